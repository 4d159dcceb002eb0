// cuDNN's SDPA graphs on cudnn-frontend (kernels/attention/cudnn_sdpa_frontend.h) without a GPU: every variant
// training can ask for (forward and backward, deterministic or not, padded, ragged, causal or a tile below the
// diagonal, window, soft-cap and ALiBi through our score modifier, sinks, MHA and GQA, head_dim 64/128/256, latent
// attention's 192/128) passes the frontend's validation for Hopper and lowers into an operation graph that the cuDNN
// this build links finalizes; a head dim cuDNN cannot take is refused with the frontend's reason, and a soft-capped or
// ALiBi backward whose key length is not a multiple of 128 exactly where cudnn_frontend_gap says. What the graphs
// compute needs the GPU: the op table (test_cuda_cudnn_attention.cpp and its neighbours) runs them against the CPU
// reference there.
#ifdef MEGATRAIN_HAVE_CUDNN
#include <cudnn.h>

#include <cstdint>
#include <string>
#include <vector>

#include "catch.h"
#include "kernels/attention/cudnn_sdpa_frontend.h"
#include "plan/cudnn_attention_plan.h"

namespace {

namespace cu = mt::cuda;

enum class Extra { none, window, softcap, alibi, sinks };

struct Variant {
  cu::SdpaGraphSpec spec;
  Extra extra;
  int64_t n_heads, n_kv_heads, head_dim;
  std::string describe() const {
    const char* extras[] = {"", " window", " soft-cap", " ALiBi", " sinks"};
    return std::string(spec.backward ? (spec.deterministic ? "backward" : "backward non-deterministic") : "forward") +
           (spec.padding ? (spec.ragged ? " ragged" : " padded") : "") + (spec.causal ? "" : " unmasked") +
           extras[static_cast<int>(extra)] + " heads " + std::to_string(n_heads) + "/" + std::to_string(n_kv_heads) +
           " head_dim " + std::to_string(head_dim);
  }
};

const float kSlope = 0.5f;  // a slope's address: the graph reads only whether the shape has slopes
const uint16_t kSink = 0;   // likewise a sink's

mt::AttnShape shape_of(const Variant& v) {
  mt::AttnShape s;
  s.batch = 2;
  s.seq = 1024;
  s.n_heads = v.n_heads;
  s.n_kv_heads = v.n_kv_heads;
  s.head_dim = v.head_dim;
  if (v.extra == Extra::window) s.window = 256;
  if (v.extra == Extra::softcap) {
    s.scale = 1.f / 16.f;
    s.softcap = 50.f;
  }
  if (v.extra == Extra::alibi) s.alibi_slopes = &kSlope;
  if (v.extra == Extra::sinks) s.sinks = &kSink;
  return s;
}

std::vector<Variant> variants() {
  std::vector<Variant> out;
  struct Heads {
    int64_t n_heads, n_kv_heads, head_dim;
  };
  for (const Heads hd : {Heads{16, 2, 128}, Heads{8, 8, 64}, Heads{16, 8, 256}})
    for (const bool backward : {false, true})
      for (const bool deterministic : {true, false})
        for (const bool padding : {false, true})
          for (const bool ragged : {false, true})
            for (const bool causal : {true, false})
              for (const Extra extra : {Extra::none, Extra::window, Extra::softcap, Extra::alibi, Extra::sinks}) {
                if ((!backward && !deterministic) || (ragged && !padding)) continue;
                if (extra == Extra::sinks && (backward || !causal)) continue;  // the forward's, in training's causal calls
                if (extra == Extra::window && !causal) continue;  // a tile below the diagonal has no window
                out.push_back({{backward, deterministic, padding, causal, ragged, extra == Extra::sinks}, extra,
                               hd.n_heads, hd.n_kv_heads, hd.head_dim});
              }
  return out;
}

}  // namespace

TEST_CASE("cuDNN SDPA graphs on cudnn-frontend: every variant validates and lowers without a GPU", "[cudnn_graph]") {
  const std::vector<Variant> all = variants();
  REQUIRE(all.size() == 3 * 66);
  for (const Variant& v : all) {
    INFO(v.describe());
    CHECK(cu::sdpa_lowering_error(shape_of(v), v.spec, 90).empty());
  }
}

TEST_CASE("cuDNN SDPA graphs on cudnn-frontend: latent attention's value head dim of its own lowers",
          "[cudnn_graph]") {
  mt::AttnShape s;
  s.batch = 2;
  s.seq = 1024;
  s.n_heads = 16;
  s.n_kv_heads = 16;
  s.head_dim = 192;
  s.v_head_dim = 128;
  for (const bool backward : {false, true})
    for (const bool deterministic : {true, false})
      for (const bool padding : {false, true}) {
        INFO((backward ? "backward" : "forward") << (deterministic ? "" : " non-deterministic")
                                                 << (padding ? " padded" : ""));
        CHECK(cu::sdpa_lowering_error(s, {backward, deterministic, padding, true, false, false}, 90).empty());
      }
}

TEST_CASE("cuDNN SDPA graphs on cudnn-frontend: a head dim cuDNN cannot take is refused with the reason",
          "[cudnn_graph]") {
  mt::AttnShape s;
  s.batch = 2;
  s.seq = 1024;
  s.n_heads = 16;
  s.n_kv_heads = 2;
  s.head_dim = 100;  // not a multiple of 8
  for (const bool backward : {false, true}) {
    const std::string why = cu::sdpa_lowering_error(s, {backward, true, false, true, false, false}, 90);
    INFO(why);
    CHECK(why.find("multiple of 8") != std::string::npos);
  }
}

// cudnn-frontend 1.32's own full-length padding mask of a backward whose key length is not a multiple of 128 (cuDNN
// 9.15 and older), which it refuses beside our score modifier: the frontend refuses exactly the graphs
// cudnn_frontend_gap (plan/cudnn_attention_plan.h) names at the cuDNN this build loads, so CudnnAttention refuses them
// before building and runs our kernel.
TEST_CASE("cuDNN SDPA graphs on cudnn-frontend: a soft-capped or ALiBi backward off 128 as cudnn_frontend_gap says",
          "[cudnn_graph]") {
  const auto version = static_cast<int64_t>(cudnnGetVersion());
  for (const Extra extra : {Extra::softcap, Extra::alibi, Extra::none})
    for (const int64_t seq : {320, 384})
      for (const bool padding : {false, true})
        for (const bool ragged : {false, true}) {
          if (ragged && !padding) continue;
          const Variant v{{true, true, padding, true, ragged, false}, extra, 8, 2, 128};
          mt::AttnShape s = shape_of(v);
          s.seq = seq;
          const std::string why = cu::sdpa_lowering_error(s, v.spec, 90);
          const std::string gap = mt::cudnn_frontend_gap(s, true, ragged, version);
          INFO(v.describe() << " seq " << seq << " on cuDNN " << version << ": " << why << " / " << gap);
          CHECK(why.empty() == gap.empty());
          if (!gap.empty()) CHECK(why.find("score mod") != std::string::npos);
        }
}

#endif  // MEGATRAIN_HAVE_CUDNN
