// nn.Embedding's padding_idx (the config's pad_token_id): the lookup adds no gradient to that row, whatever the
// batch holds, while every other row and region trains exactly as without it; a tied head still trains the row.
#include "catch.h"
#include "engine/engine.h"
#include "engine/tiny_model.h"

using namespace mt;
using namespace mt::testing;

namespace {

std::vector<std::vector<float>> gradients(bool tied, int64_t padding_idx, const Batch& batch) {
  ModelSpec spec = tiny_spec(2, tied);
  spec.padding_idx = padding_idx;
  const ParamLayout layout = make_param_layout(spec);
  HostStore store(layout, DType::f32);
  fill_random(store, 5);
  auto be = make_cpu_backend();
  EngineOptions options;
  options.max_positions = 32;
  {
    Engine engine(*be, spec, store, options);
    engine.forward_backward(batch);
  }
  std::vector<std::vector<float>> out;
  for (int64_t r = 0; r < store.num_regions(); ++r)
    out.emplace_back(store.grad(r), store.grad(r) + layout.regions[static_cast<size_t>(r)].numel);
  return out;
}

}  // namespace

TEST_CASE("the padding row gets no gradient from the embedding lookup", "[engine][padding_idx]") {
  const Batch batch = tiny_batch(40, 4);
  const int32_t pad = batch.input_ids[1];  // a token the batch holds
  const int64_t H = tiny_spec(2, false).hidden_size;
  const auto plain = gradients(false, -1, batch), padded = gradients(false, pad, batch);
  REQUIRE(plain.size() == padded.size());
  for (size_t r = 1; r < plain.size(); ++r) CHECK(plain[r] == padded[r]);  // layers and head unchanged
  for (int64_t v = 0; v < 40; ++v) {
    INFO("row " << v);
    const auto row = [&](const std::vector<float>& g) {
      return std::vector<float>(g.begin() + v * H, g.begin() + (v + 1) * H);
    };
    if (v == pad) {
      CHECK(row(padded[0]) == std::vector<float>(static_cast<size_t>(H), 0.0f));
      CHECK(row(plain[0]) != std::vector<float>(static_cast<size_t>(H), 0.0f));
    } else {
      CHECK(row(padded[0]) == row(plain[0]));
    }
  }
  // Tied: the row still gets the head's gradient.
  const auto tied = gradients(true, pad, batch);
  CHECK(std::vector<float>(tied[0].begin() + pad * H, tied[0].begin() + (pad + 1) * H) !=
        std::vector<float>(static_cast<size_t>(H), 0.0f));
}
