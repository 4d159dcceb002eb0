// RoPE tables against transformers 5.24: inv_freq, attention scaling and cos/sin of LlamaRotaryEmbedding for
// default, linear (also partial rotary), llama3 and yarn (also mscale/mscale_all_dim, betas, no truncation).
// The numbers were printed once by hand from transformers; no Python runs here. Longrope and dynamic NTK tables,
// which depend on the batch's longest position, against their formulas (modeling_rope_utils.py).
#include <cmath>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "model/model_spec.h"
#include "model/rope.h"

namespace {

struct Sample {
  int64_t pos, i;
  float cos, sin;
};

struct RopeCase {
  const char* name;
  const char* config;  // merged into a tiny Llama config
  std::vector<float> inv_freq;
  double attention_scaling;
  std::vector<Sample> samples;  // positions 1, 7, 1000, 4095 × pairs 0, 1, half, last
};

// clang-format off
const RopeCase kCases[] = {
    {"default",
     R"({"hidden_size": 256, "num_attention_heads": 4, "rope_theta": 10000.0})",
     {
      1.000000000e+00f, 7.498942018e-01f, 5.623413324e-01f, 4.216965139e-01f,
      3.162277639e-01f, 2.371373624e-01f, 1.778279394e-01f, 1.333521456e-01f,
      1.000000015e-01f, 7.498941571e-02f, 5.623412877e-02f, 4.216964915e-02f,
      3.162277862e-02f, 2.371373586e-02f, 1.778279431e-02f, 1.333521493e-02f,
      9.999999776e-03f, 7.498942316e-03f, 5.623413250e-03f, 4.216964822e-03f,
      3.162277862e-03f, 2.371373819e-03f, 1.778279431e-03f, 1.333521446e-03f,
      1.000000047e-03f, 7.498941850e-04f, 5.623413017e-04f, 4.216964880e-04f,
      3.162277862e-04f, 2.371373848e-04f, 1.778279402e-04f, 1.333521504e-04f,
     },
     1.0,
     {
      {1, 0, 5.403023362e-01f, 8.414709568e-01f}, {1, 1, 7.317609787e-01f, 6.815613508e-01f},
      {1, 16, 9.999499917e-01f, 9.999833070e-03f}, {1, 31, 1.000000000e+00f, 1.333521504e-04f},
      {7, 0, 7.539022565e-01f, 6.569865942e-01f}, {7, 1, 5.114492774e-01f, -8.593134880e-01f},
      {7, 16, 9.975510240e-01f, 6.994284689e-02f}, {7, 31, 9.999995828e-01f, 9.334649658e-04f},
      {1000, 0, 5.623790622e-01f, 8.268795609e-01f}, {1000, 1, -5.845928788e-01f, 8.113268018e-01f},
      {1000, 16, -8.390715122e-01f, -5.440211296e-01f}, {1000, 31, 9.911217690e-01f, 1.329572648e-01f},
      {4095, 0, -6.597599387e-02f, -9.978212118e-01f}, {4095, 1, -9.004636109e-02f, -9.959375858e-01f},
      {4095, 16, -9.940330982e-01f, -1.090787947e-01f}, {4095, 31, 8.545684218e-01f, 5.193388462e-01f},
     }},
    {"linear",
     R"({"hidden_size": 128, "num_attention_heads": 4, "rope_scaling": {"type": "linear", "factor": 4.0}})",
     {
      2.500000000e-01f, 1.405853331e-01f, 7.905694097e-02f, 4.445698485e-02f,
      2.500000037e-02f, 1.405853219e-02f, 7.905694656e-03f, 4.445698578e-03f,
      2.499999944e-03f, 1.405853312e-03f, 7.905694656e-04f, 4.445698578e-04f,
      2.500000119e-04f, 1.405853254e-04f, 7.905694656e-05f, 4.445698505e-05f,
     },
     1.0,
     {
      {1, 0, 9.689124227e-01f, 2.474039644e-01f}, {1, 1, 9.901341200e-01f, 1.401226968e-01f},
      {1, 8, 9.999969006e-01f, 2.499997383e-03f}, {1, 15, 1.000000000e+00f, 4.445698505e-05f},
      {7, 0, -1.782460511e-01f, 9.839859605e-01f}, {7, 1, 5.536150336e-01f, 8.327727318e-01f},
      {7, 8, 9.998468757e-01f, 1.749910600e-02f}, {7, 15, 9.999999404e-01f, 3.111989063e-04f},
      {1000, 0, 2.409882993e-01f, -9.705280066e-01f}, {1000, 1, -7.064388990e-01f, 7.077740431e-01f},
      {1000, 8, -8.011435866e-01f, 5.984721184e-01f}, {1000, 15, 9.990119338e-01f, 4.444234073e-02f},
      {4095, 0, 9.174373746e-01f, -3.978801668e-01f}, {4095, 1, -7.070313692e-01f, -7.071822286e-01f},
      {4095, 8, -6.875241995e-01f, -7.261614799e-01f}, {4095, 15, 9.834743738e-01f, 1.810474098e-01f},
     }},
    {"linear_partial",
     R"({"hidden_size": 256, "num_attention_heads": 4, "partial_rotary_factor": 0.5,
        "rope_parameters": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}})",
     {
      5.000000000e-01f, 2.811706662e-01f, 1.581138819e-01f, 8.891396970e-02f,
      5.000000075e-02f, 2.811706439e-02f, 1.581138931e-02f, 8.891397156e-03f,
      4.999999888e-03f, 2.811706625e-03f, 1.581138931e-03f, 8.891397156e-04f,
      5.000000237e-04f, 2.811706509e-04f, 1.581138931e-04f, 8.891397010e-05f,
     },
     1.0,
     {
      {1, 0, 8.775825500e-01f, 4.794255495e-01f}, {1, 1, 9.607312679e-01f, 2.774805427e-01f},
      {1, 8, 9.999874830e-01f, 4.999978933e-03f}, {1, 15, 1.000000000e+00f, 8.891397010e-05f},
      {7, 0, -9.364566803e-01f, -3.507832289e-01f}, {7, 1, -3.870207965e-01f, 9.220709801e-01f},
      {7, 8, 9.993875623e-01f, 3.499285504e-02f}, {7, 15, 9.999998212e-01f, 6.223977543e-04f},
      {1000, 0, -8.838492632e-01f, -4.677717984e-01f}, {1000, 1, -1.888198312e-03f, -9.999982119e-01f},
      {1000, 8, 2.836622000e-01f, -9.589242935e-01f}, {1000, 15, 9.960497618e-01f, 8.879686147e-02f},
      {4095, 0, 6.833827496e-01f, -7.300602794e-01f}, {4095, 1, -2.133577800e-04f, 1.000000000e+00f},
      {4095, 8, -5.462093651e-02f, 9.985071421e-01f}, {4095, 15, 9.344436526e-01f, 3.561109900e-01f},
     }},
    {"llama3",
     R"({"hidden_size": 512, "num_attention_heads": 4, "max_position_embeddings": 131072,
        "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})",
     {
      1.000000000e+00f, 8.146172166e-01f, 6.636012793e-01f, 5.405809879e-01f,
      4.403666258e-01f, 3.587302268e-01f, 2.922278345e-01f, 2.380538136e-01f,
      1.939227581e-01f, 1.579728127e-01f, 1.286873817e-01f, 1.048309505e-01f,
      8.539710194e-02f, 6.956595182e-02f, 5.666961893e-02f, 4.616405070e-02f,
      3.760603070e-02f, 3.063452058e-02f, 2.495540865e-02f, 2.032910474e-02f,
      1.656044088e-02f, 1.349041983e-02f, 1.098952908e-02f, 8.952259086e-03f,
      7.292665076e-03f, 5.940730684e-03f, 4.839421250e-03f, 3.942275885e-03f,
      3.211446106e-03f, 2.166570630e-03f, 1.371893683e-03f, 8.567514597e-04f,
      5.248460220e-04f, 3.126936499e-04f, 1.785077911e-04f, 9.556212171e-05f,
      7.784655463e-05f, 6.341514381e-05f, 5.165906987e-05f, 4.208236714e-05f,
      3.428102355e-05f, 2.792590931e-05f, 2.274892904e-05f, 1.853166941e-05f,
      1.509621779e-05f, 1.229763893e-05f, 1.001786859e-05f, 8.160727702e-06f,
      6.647869668e-06f, 5.415469332e-06f, 4.411534519e-06f, 3.593711881e-06f,
      2.927499736e-06f, 2.384791742e-06f, 1.942692506e-06f, 1.582550794e-06f,
      1.289173156e-06f, 1.050182618e-06f, 8.554969213e-07f, 6.969025321e-07f,
      5.677088097e-07f, 4.624653798e-07f, 3.767322596e-07f, 3.068925878e-07f,
     },
     1.0,
     {
      {1, 0, 5.403023362e-01f, 8.414709568e-01f}, {1, 1, 6.861469150e-01f, 7.274630070e-01f},
      {1, 32, 9.999998808e-01f, 5.248460220e-04f}, {1, 63, 1.000000000e+00f, 3.068925878e-07f},
      {7, 0, 7.539022565e-01f, 6.569865942e-01f}, {7, 1, 8.359884620e-01f, -5.487470627e-01f},
      {7, 32, 9.999932647e-01f, 3.673914121e-03f}, {7, 63, 1.000000000e+00f, 2.148248086e-06f},
      {1000, 0, 5.623790622e-01f, 8.268795609e-01f}, {1000, 1, -5.859939456e-01f, -8.103154302e-01f},
      {1000, 32, 8.654010892e-01f, 5.010797381e-01f}, {1000, 63, 9.999999404e-01f, 3.068925871e-04f},
      {4095, 0, -6.597599387e-02f, -9.978212118e-01f}, {4095, 1, 8.707965016e-01f, -4.916436076e-01f},
      {4095, 32, -5.467252731e-01f, 8.373120427e-01f}, {4095, 63, 9.999992251e-01f, 1.256724820e-03f},
     }},
    {"yarn",
     R"({"hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": 16384,
        "rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                            "original_max_position_embeddings": 4096}})",
     {
      1.000000000e+00f, 6.493816376e-01f, 4.216965139e-01f, 2.738419771e-01f,
      1.778279394e-01f, 1.154782027e-01f, 7.498941571e-02f, 4.504449293e-02f,
      2.687936090e-02f, 1.591481827e-02f, 9.334650822e-03f, 5.412276834e-03f,
      3.092877101e-03f, 1.734577119e-03f, 9.485494811e-04f, 5.004761624e-04f,
      2.500000119e-04f, 1.623454154e-04f, 1.054241220e-04f, 6.846048927e-05f,
      4.445698505e-05f, 2.886954826e-05f, 1.874735608e-05f, 1.217418867e-05f,
      7.905693565e-06f, 5.133812465e-06f, 3.333803534e-06f, 2.164910939e-06f,
      1.405853368e-06f, 9.129353202e-07f, 5.928434348e-07f, 3.849816324e-07f,
     },
     1.138629436111989,
     {
      {1, 0, 6.152041554e-01f, 9.581236243e-01f}, {1, 1, 9.068703651e-01f, 6.885223985e-01f},
      {1, 16, 1.138629436e+00f, 2.846573771e-04f}, {1, 31, 1.138629436e+00f, 4.383514067e-07f},
      {7, 0, 8.584153056e-01f, 7.480642796e-01f}, {7, 1, -1.889513135e-01f, -1.122842073e+00f},
      {7, 16, 1.138627648e+00f, 1.992600504e-03f}, {7, 31, 1.138629436e+00f, 3.068460046e-06f},
      {1000, 0, 6.403413415e-01f, 9.415094256e-01f}, {1000, 1, -6.825113893e-01f, 9.114028811e-01f},
      {1000, 16, 1.103232265e+00f, 2.817014456e-01f}, {1000, 31, 1.138629317e+00f, 4.383514170e-04f},
      {4095, 0, -7.512220740e-02f, -1.136148572e+00f}, {4095, 1, 1.593476981e-01f, 1.127424121e+00f},
      {4095, 16, 5.922772288e-01f, 9.724631906e-01f}, {4095, 31, 1.138628006e+00f, 1.795048243e-03f},
     }},
    {"yarn_mscale",
     R"({"hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": 16384,
        "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                            "original_max_position_embeddings": 4096, "mscale": 0.707, "mscale_all_dim": 1.0,
                            "truncate": false, "beta_fast": 16, "beta_slow": 2}})",
     {
      1.000000000e+00f, 7.498942018e-01f, 5.623413324e-01f, 4.216965139e-01f,
      3.162277639e-01f, 2.371373624e-01f, 1.778279394e-01f, 1.333521456e-01f,
      1.000000015e-01f, 7.498941571e-02f, 5.623412877e-02f, 4.216964915e-02f,
      3.162277862e-02f, 2.341951057e-02f, 1.571612246e-02f, 1.040109713e-02f,
      6.761618890e-03f, 4.292032216e-03f, 2.634802135e-03f, 1.538058510e-03f,
      8.251044783e-04f, 5.928434548e-04f, 4.445698578e-04f, 3.333803616e-04f,
      2.500000119e-04f, 1.874735462e-04f, 1.405853254e-04f, 1.054241220e-04f,
      7.905694656e-05f, 5.928434621e-05f, 4.445698505e-05f, 3.333803761e-05f,
     },
     0.964326914892074,
     {
      {1, 0, 5.210281014e-01f, 8.114531040e-01f}, {1, 1, 7.056568265e-01f, 6.572479606e-01f},
      {1, 16, 9.643049240e-01f, 6.520361174e-03f}, {1, 31, 9.643269181e-01f, 3.214876779e-05f},
      {7, 0, 7.270082235e-01f, 6.335498691e-01f}, {7, 1, 4.932042956e-01f, -8.286591172e-01f},
      {7, 16, 9.632469416e-01f, 4.562583938e-02f}, {7, 31, 9.643269181e-01f, 2.250413818e-04f},
      {1000, 0, 5.423172712e-01f, 7.973822355e-01f}, {1000, 1, -5.637386441e-01f, 7.823842764e-01f},
      {1000, 16, 8.560494781e-01f, 4.439658821e-01f}, {1000, 31, 9.637911320e-01f, 3.214281052e-02f},
      {4095, 0, -6.362242997e-02f, -9.622258544e-01f}, {4095, 1, -8.683413267e-02f, -9.604094028e-01f},
      {4095, 16, -8.037022352e-01f, 5.329062343e-01f}, {4095, 31, 9.553545713e-01f, 1.312406510e-01f},
     }},
};
// clang-format on

// The RoPE table spec of a tiny Llama config with `config` merged in.
mt::RopeSpec rope_of(const char* config) {
  nlohmann::json j = {{"architectures", {"LlamaForCausalLM"}},
                      {"vocab_size", 32},
                      {"intermediate_size", 64},
                      {"num_hidden_layers", 1},
                      {"max_position_embeddings", 4096}};
  j.update(nlohmann::json::parse(config));
  const mt::ModelSpec spec = mt::parse_model_spec(j, "rope test");
  REQUIRE(spec.rope_tables.size() == 1);
  return spec.rope_tables[0];
}

}  // namespace

TEST_CASE("RoPE inverse frequencies equal transformers' to the last bit", "[rope]") {
  for (const RopeCase& c : kCases) {
    INFO(c.name);
    double scaling = 0.0;
    const std::vector<float> inv_freq = mt::rope_inverse_frequencies(rope_of(c.config), &scaling);
    CHECK(std::abs(scaling - c.attention_scaling) < 1e-15);
    REQUIRE(inv_freq.size() == c.inv_freq.size());
    for (size_t i = 0; i < inv_freq.size(); ++i) {
      INFO("pair " << i);
      CHECK(inv_freq[i] == c.inv_freq[i]);
    }
  }
}

TEST_CASE("RoPE tables equal transformers' cos and sin within one float rounding", "[rope]") {
  for (const RopeCase& c : kCases) {
    INFO(c.name);
    const mt::RopeTable t = mt::make_rope_table(rope_of(c.config), 4096);
    const auto half = static_cast<int64_t>(c.inv_freq.size());
    CHECK(t.rot_dim == 2 * half);
    CHECK(t.max_positions == 4096);
    REQUIRE(t.cos.size() == static_cast<size_t>(4096 * half));
    REQUIRE(t.sin.size() == t.cos.size());
    const auto scale = static_cast<float>(c.attention_scaling);
    for (int64_t i = 0; i < half; ++i) {  // position 0: cos is the scaling, sin is zero
      CHECK(t.cos[static_cast<size_t>(i)] == scale);
      CHECK(t.sin[static_cast<size_t>(i)] == 0.0f);
    }
    for (const Sample& s : c.samples) {
      INFO("position " << s.pos << " pair " << s.i);
      const auto k = static_cast<size_t>(s.pos * half + s.i);
      CHECK(std::abs(t.cos[k] - s.cos) <= 1.2e-7f * scale);
      CHECK(std::abs(t.sin[k] - s.sin) <= 1.2e-7f * scale);
    }
  }
}

namespace {

// |a − b| within `rel` of |b|.
bool close(double a, double b, double rel) { return std::abs(a - b) <= rel * std::abs(b); }

// A table's entries equal cos/sin(position · inv_freq) · scaling within one float rounding.
void check_table(const mt::RopeTable& t, const std::vector<float>& inv_freq, double scaling) {
  const auto half = static_cast<int64_t>(inv_freq.size());
  REQUIRE(t.rot_dim == 2 * half);
  REQUIRE(t.cos.size() == static_cast<size_t>(t.max_positions * half));
  const auto scale = static_cast<float>(scaling);
  for (const int64_t p : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000}, t.max_positions - 1})
    for (int64_t i = 0; i < half; ++i) {
      INFO("position " << p << " pair " << i);
      const double angle = static_cast<float>(p) * inv_freq[static_cast<size_t>(i)];
      const auto k = static_cast<size_t>(p * half + i);
      CHECK(std::abs(t.cos[k] - static_cast<float>(std::cos(angle)) * scale) <= 1.2e-7f * scale);
      CHECK(std::abs(t.sin[k] - static_cast<float>(std::sin(angle)) * scale) <= 1.2e-7f * scale);
    }
}

}  // namespace

TEST_CASE("longrope: short factors up to the original length, long factors above it", "[rope]") {
  // head_dim 16: 8 frequencies; Phi-3 style: max 4096 positions over an original 1024, so factor 4.
  const mt::RopeSpec r = rope_of(R"({"hidden_size": 64, "num_attention_heads": 4, "rope_theta": 10000.0,
      "original_max_position_embeddings": 1024,
      "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.0, 1.05, 1.1, 1.3, 1.6, 2.0, 2.5],
                       "long_factor": [1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 8.0, 12.0]}})");
  REQUIRE(r.type == "longrope");
  REQUIRE(r.original_max_position_embeddings == 1024);
  const double expected_scaling = std::sqrt(1.0 + std::log(4.0) / std::log(1024.0));
  // inv_freq[i] = 1 / (ext[i] · base^(2i/d)).
  const auto expected = [&](const std::vector<double>& ext) {
    std::vector<double> out;
    for (size_t i = 0; i < ext.size(); ++i) out.push_back(1.0 / (ext[i] * std::pow(10000.0, 2.0 * i / 16.0)));
    return out;
  };
  const std::vector<double> short_freq = expected(r.short_factor), long_freq = expected(r.long_factor);
  for (const int64_t longest : {0, 1, 512, 1024, 1025, 2048, 4096}) {
    INFO("longest " << longest);
    const bool long_table = longest > 1024;
    double scaling = 0.0;
    const std::vector<float> inv_freq = mt::rope_inverse_frequencies(r, &scaling, longest);
    CHECK(std::abs(scaling - expected_scaling) < 1e-15);  // the same for both factor sets
    REQUIRE(inv_freq.size() == 8);
    for (size_t i = 0; i < inv_freq.size(); ++i) {
      INFO("pair " << i);
      CHECK(close(inv_freq[i], (long_table ? long_freq : short_freq)[i], 4e-7));
    }
    CHECK(mt::rope_table_key(r, longest) == (long_table ? 1 : 0));  // one table per factor set
    const mt::RopeTable t = mt::make_rope_table(r, 2048, longest);
    CHECK(t.max_positions == 2048);
    check_table(t, inv_freq, expected_scaling);
  }
  // The two factor sets give different tables.
  CHECK(mt::make_rope_table(r, 64, 1024).cos != mt::make_rope_table(r, 64, 1025).cos);
}

TEST_CASE("longrope without an original length: factor from the dict, no scaling at factor 1", "[rope]") {
  const mt::RopeSpec r = rope_of(R"({"hidden_size": 64, "num_attention_heads": 4,
      "rope_parameters": {"rope_type": "longrope", "rope_theta": 500.0,
                          "short_factor": [1, 1, 1, 1, 1, 1, 1, 1], "long_factor": [2, 2, 2, 2, 2, 2, 2, 2]}})");
  CHECK(r.original_max_position_embeddings == 4096);  // max_position_embeddings
  double scaling = 0.0;
  const std::vector<float> inv_freq = mt::rope_inverse_frequencies(r, &scaling, 4096);
  CHECK(scaling == 1.0);
  // Short factors of 1: the default table's frequencies.
  double default_scaling = 0.0;
  const std::vector<float> plain = mt::rope_inverse_frequencies(
      rope_of(R"({"hidden_size": 64, "num_attention_heads": 4, "rope_theta": 500.0})"), &default_scaling);
  CHECK(inv_freq == plain);
  CHECK(default_scaling == 1.0);
}

TEST_CASE("dynamic NTK: the plain table up to max_position_embeddings, a larger base above", "[rope]") {
  // head_dim 16, factor 2, max_position_embeddings 4096.
  const mt::RopeSpec r = rope_of(R"({"hidden_size": 64, "num_attention_heads": 4, "rope_theta": 10000.0,
      "rope_scaling": {"type": "dynamic", "factor": 2.0}})");
  REQUIRE(r.type == "dynamic");
  const mt::RopeSpec plain = rope_of(R"({"hidden_size": 64, "num_attention_heads": 4, "rope_theta": 10000.0})");
  const std::vector<float> plain_freq = mt::rope_inverse_frequencies(plain, nullptr);
  for (const int64_t longest : {0, 1, 100, 4095, 4096}) {
    INFO("longest " << longest);
    double scaling = 0.0;
    CHECK(mt::rope_inverse_frequencies(r, &scaling, longest) == plain_freq);
    CHECK(scaling == 1.0);
    CHECK(mt::rope_table_key(r, longest) == 0);
    const mt::RopeTable t = mt::make_rope_table(r, 256, longest);
    CHECK(t.cos == mt::make_rope_table(plain, 256).cos);
    CHECK(t.sin == mt::make_rope_table(plain, 256).sin);
  }
  for (const int64_t longest : {4097, 6000, 8192, 16384}) {
    INFO("longest " << longest);
    // base · (factor · L / max − (factor − 1))^(d / (d − 2))
    const double base = 10000.0 * std::pow(2.0 * static_cast<double>(longest) / 4096.0 - 1.0, 16.0 / 14.0);
    double scaling = 0.0;
    const std::vector<float> inv_freq = mt::rope_inverse_frequencies(r, &scaling, longest);
    CHECK(scaling == 1.0);
    REQUIRE(inv_freq.size() == 8);
    for (size_t i = 0; i < inv_freq.size(); ++i) {
      INFO("pair " << i);
      CHECK(close(inv_freq[i], 1.0 / std::pow(base, 2.0 * i / 16.0), 4e-7));
      if (i > 0) CHECK(inv_freq[i] < plain_freq[i]);  // a larger base: lower frequencies
    }
    CHECK(inv_freq[0] == 1.0f);
    CHECK(mt::rope_table_key(r, longest) == longest);  // one table per length
    check_table(mt::make_rope_table(r, 2048, longest), inv_freq, 1.0);
  }
}

TEST_CASE("llama3 RoPE with equal low and high frequency factors (Llama 4 Scout) equals transformers'", "[rope]") {
  // transformers warns and computes: no medium band, each frequency kept or divided by the factor (printed once from
  // transformers 5.24's _compute_llama3_parameters).
  const std::vector<float> expected = {
      1.000000000e+00f, 8.146172166e-01f, 6.636012793e-01f, 5.405809879e-01f,
      4.403666258e-01f, 3.587302268e-01f, 2.922278345e-01f, 2.380538136e-01f,
      1.939227581e-01f, 1.579728127e-01f, 1.286873817e-01f, 1.048309505e-01f,
      8.539710194e-02f, 6.956595182e-02f, 5.666961893e-02f, 4.616405070e-02f,
      3.760603070e-02f, 3.063452058e-02f, 2.495540865e-02f, 2.032910474e-02f,
      1.656044088e-02f, 1.349041983e-02f, 1.098952908e-02f, 8.952259086e-03f,
      7.292665076e-03f, 5.940730684e-03f, 4.839421250e-03f, 3.942275885e-03f,
      3.211446106e-03f, 2.616099082e-03f, 2.131119603e-03f, 1.736046746e-03f,
      1.414213446e-03f, 1.152042649e-03f, 9.384738514e-04f, 4.778106086e-05f,
      3.892327732e-05f, 3.170757191e-05f, 2.582953493e-05f, 2.104118357e-05f,
      1.714051177e-05f, 1.396295465e-05f, 1.137446452e-05f, 9.265834706e-06f,
      7.548108897e-06f, 6.148819466e-06f, 5.008934295e-06f, 4.080363851e-06f,
      3.323934834e-06f, 2.707734666e-06f, 2.205767260e-06f, 1.796855940e-06f,
      1.463749868e-06f, 1.192395871e-06f, 9.713462532e-07f, 7.912753972e-07f,
      6.445865779e-07f, 5.250913091e-07f, 4.277484607e-07f, 3.484512661e-07f,
      2.838544049e-07f, 2.312326899e-07f, 1.883661298e-07f, 1.534462939e-07f,
  };
  const mt::RopeSpec rope = rope_of(
      R"({"hidden_size": 512, "num_attention_heads": 4, "max_position_embeddings": 131072,
          "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 16.0, "low_freq_factor": 1.0,
                              "high_freq_factor": 1.0, "original_max_position_embeddings": 8192}})");
  double scaling = 0.0;
  CHECK(mt::rope_inverse_frequencies(rope, &scaling) == expected);
  CHECK(scaling == 1.0);
}
