// The longest trainable sequence: the memory plan's own figures bound it (the longest fits, a step longer does
// not), token chunks keep the feed-forward's workspace flat in the sequence length, and the model's positions
// follow its RoPE scaling (yarn, longrope, linear cover original × factor; dynamic NTK covers any length).
#include "catch.h"
#include "engine/layer_internals.h"
#include "model/model_spec.h"
#include "plan/sequence_limit.h"

namespace {

mt::ModelSpec model(const char* name) {
  return mt::load_model_spec(std::string(MEGATRAIN_SOURCE_DIR "/configs/models/") + name + ".json");
}

constexpr int64_t kGiB = int64_t{1} << 30;

}  // namespace

TEST_CASE("the longest sequence fits the usable GPU memory and one step more does not", "[plan][longseq]") {
  for (const char* name : {"qwen2.5-3b", "qwen2.5-7b"}) {
    INFO(name);
    const mt::ModelSpec spec = model(name);
    const mt::Machine h200{139 * kGiB, 1500 * kGiB};
    const mt::SequenceLimit s = mt::longest_trainable_sequence(spec, mt::RunShape{}, h200);
    REQUIRE(s.memory_tokens > 0);
    CHECK(s.memory_tokens % mt::kSequenceStep == 0);
    CHECK(s.host_fits);
    CHECK(s.gpu_bytes == mt::one_sequence_gpu_bytes(spec, mt::RunShape{}, s.memory_tokens));
    CHECK(s.gpu_bytes <= mt::usable_gpu_bytes(h200.gpu_bytes));
    CHECK(mt::one_sequence_gpu_bytes(spec, mt::RunShape{}, s.memory_tokens + mt::kSequenceStep) >
          mt::usable_gpu_bytes(h200.gpu_bytes));
    CHECK(s.longest() == std::min(s.memory_tokens, spec.max_position_embeddings));
    // The targets, by GPU memory (the shipped configs have 32 768 positions; rope scaling extends them).
    CHECK(s.memory_tokens >= (std::string(name) == "qwen2.5-3b" ? 524288 : 262144));
    // A host RAM the store does not fit: nothing trains.
    CHECK(mt::longest_trainable_sequence(spec, mt::RunShape{}, {h200.gpu_bytes, 8 * kGiB}).longest() == 0);
  }
}

TEST_CASE("token chunks keep the feed-forward workspace flat in the sequence length", "[plan][longseq]") {
  const mt::ModelSpec spec = model("qwen2.5-7b");
  mt::RunShape run;
  run.batch_size = run.passes = run.micro_batch_size = 1;
  run.checkpoint_interval = 4;
  auto workspace = [&](int64_t seq, int64_t chunk) {
    run.seq_len = seq;
    run.token_chunk = chunk;
    return mt::plan_gpu(spec, run).layer_workspace;
  };
  const int64_t I = spec.layers[0].mlp.intermediate_size;
  // Doubling the sequence past the chunk adds the per-token terms only, not the feed-forward's 6 × I per token.
  const int64_t per_token_growth = workspace(2 * 65536, 16384) - workspace(65536, 16384);
  const int64_t unchunked_growth = workspace(2 * 65536, 1 << 30) - workspace(65536, 1 << 30);
  CHECK(unchunked_growth - per_token_growth == mt::kMlpChunkBuffers * 65536 * I * 2);
}

TEST_CASE("the model's positions follow its RoPE scaling", "[plan][longseq]") {
  mt::ModelSpec spec = model("qwen2.5-7b");
  std::string why;
  CHECK(mt::model_position_limit(spec, &why) == 32768);
  CHECK(why == "max_position_embeddings 32768");
  for (mt::RopeSpec& r : spec.rope_tables) {
    r.type = "yarn";
    r.factor = 8;
    r.original_max_position_embeddings = 32768;
  }
  CHECK(mt::model_position_limit(spec, &why) == 262144);
  CHECK(why == "yarn RoPE scaling: 32768 × factor 8");
  for (mt::RopeSpec& r : spec.rope_tables) r.type = "dynamic";
  CHECK(mt::model_position_limit(spec) == mt::kNoPositionLimit);
}
