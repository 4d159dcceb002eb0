// Memory plan arithmetic against hand-computed figures and against the H200 measurements of docs/PERFORMANCE.md
// (peak GPU memory of `megatrain bench`, Qwen2.5-3B shape, seq 1024, checkpoint_interval 1, 2 slots, bf16).
#include <cmath>

#include "catch.h"
#include "model/model_spec.h"
#include "plan/gemm_workspace.h"
#include "plan/memory_plan.h"

namespace {

mt::ModelSpec qwen25_3b() { return mt::load_model_spec(MEGATRAIN_SOURCE_DIR "/configs/models/qwen2.5-3b.json"); }

double gib(int64_t b) { return static_cast<double>(b) / (1 << 30); }

mt::RunShape bench_run(int64_t batch) {
  mt::RunShape r;
  r.dtype = mt::DType::bf16;
  r.seq_len = 1024;
  r.batch_size = batch;
  r.checkpoint_interval = 1;
  r.weight_slots = 2;
  return r;
}

}  // namespace

TEST_CASE("host bytes per parameter: 18 in bf16, 16 in fp32, sliced per rank", "[plan]") {
  const mt::ModelSpec spec = qwen25_3b();
  const mt::HostPlan bf16 = mt::plan_host(spec, mt::DType::bf16, 2);
  CHECK(bf16.bytes_per_parameter() == 18);
  CHECK(bf16.store_bytes == bf16.parameters * 18);
  REQUIRE(bf16.rank_bytes.size() == 2);
  CHECK(bf16.rank_bytes[0] + bf16.rank_bytes[1] == bf16.store_bytes);
  CHECK(std::abs(bf16.rank_bytes[0] - bf16.rank_bytes[1]) < bf16.store_bytes / 100);
  const mt::HostPlan f32 = mt::plan_host(spec, mt::DType::f32, 1);
  CHECK(f32.bytes_per_parameter() == 16);
  CHECK(f32.parameters == mt::count_parameters(spec));
}

TEST_CASE("GPU plan terms for Qwen2.5-3B, batch 8, seq 1024, c = 1", "[plan]") {
  const mt::ModelSpec spec = qwen25_3b();
  const mt::GpuPlan g = mt::plan_gpu(spec, bench_run(8));
  const int64_t emb = spec.vocab_size * spec.hidden_size;  // the largest region (tied embedding)
  CHECK(g.weight_slots == 2 * emb * 2);
  CHECK(g.checkpoints == 36 * 8 * 1024 * spec.hidden_size * 2);
  CHECK(g.segment == 3 * 8 * 1024 * spec.hidden_size * 2);
  CHECK(g.micro_batch_size == 4);  // auto: 4096 tokens
  CHECK(g.gemm_workspace == 64 << 20);
}

TEST_CASE("GPU plan: the expert GEMMs' workspaces, the loop's four lanes and CUTLASS's in bf16 with moe_gemm cutlass",
          "[plan]") {
  const mt::ModelSpec spec = mt::load_model_spec(MEGATRAIN_SOURCE_DIR "/configs/models/deepseek-v3.json");
  mt::RunShape run = bench_run(1);
  const int64_t loop = (int64_t{64} << 20) + 4 * (int64_t{32} << 20);
  CHECK(mt::plan_gpu(spec, run).gemm_workspace == loop);
  run.runtime.moe_gemm = mt::MoeGemmChoice::cutlass;
  // 256 experts: shapes 3 KiB, eight arrays of 2 KiB, in each of 16 slots; the workspace 256 KiB.
  CHECK(mt::expert_gemm_arrays(256).bytes == 3072 + 8 * 2048);
  CHECK(mt::plan_gpu(spec, run).gemm_workspace == loop + (int64_t{256} << 10) + 16 * (3072 + 8 * 2048));
  run.dtype = mt::DType::f32;  // fp32 problems run the loop whatever the switch
  CHECK(mt::plan_gpu(spec, run).gemm_workspace == loop);
}

// Peaks of `megatrain bench --seq 1024 --steps 1 --warmup 0 --checkpoint-interval 1 --micro-batch 4 --stream-dtype
// bfloat16 --optimizer-on-gpu off --recompute-layers L` with MEGATRAIN_ATTENTION=ours on the H200 (ninth session,
// docs/PERFORMANCE.md): batch 8 6.30 GiB, batch 16 7.52, 12 layers batch 8 5.55.
TEST_CASE("GPU plan within 10% of the H200 bench peaks", "[plan]") {
  const mt::ModelSpec spec = qwen25_3b();
  CHECK(gib(mt::plan_gpu(spec, bench_run(8)).total()) == Approx(6.30).epsilon(0.10));
  CHECK(gib(mt::plan_gpu(spec, bench_run(16)).total()) == Approx(7.52).epsilon(0.10));
  const mt::ModelSpec twelve = mt::first_layers(spec, 12);  // bench --layers 12
  CHECK(gib(mt::plan_gpu(twelve, bench_run(8)).total()) == Approx(5.55).epsilon(0.10));
}

TEST_CASE("micro-batch resolution follows the engine", "[plan]") {
  mt::RunShape r;
  r.seq_len = 1024;
  r.batch_size = 16;
  r.passes = 2;
  CHECK(mt::resolve_micro_batch(r) == 4);
  r.micro_batch_size = 3;
  CHECK(mt::resolve_micro_batch(r) == 3);
  r.micro_batch_size = 100;
  CHECK(mt::resolve_micro_batch(r) == 8);
  r.micro_batch_size = 0;
  r.seq_len = 8192;
  CHECK(mt::resolve_micro_batch(r) == 1);
}

TEST_CASE("checkpoints scale with ceil(L / c), activations with the micro-batch", "[plan]") {
  const mt::ModelSpec spec = qwen25_3b();
  mt::RunShape r = bench_run(8);
  r.checkpoint_interval = 5;  // 36 layers -> 8 checkpoints, 4 extra segment inputs
  const mt::GpuPlan g = mt::plan_gpu(spec, r);
  const int64_t n = 8 * 1024 * spec.hidden_size * 2;
  CHECK(g.checkpoints == 8 * n);
  CHECK(g.segment == 7 * n);
  r.micro_batch_size = 1;
  CHECK(mt::plan_gpu(spec, r).layer_workspace * 4 == Approx(g.layer_workspace).epsilon(0.01));
}

TEST_CASE("saved layers hold their internals over the pass; auto saves as many as the GPU holds", "[plan]") {
  const mt::ModelSpec spec = qwen25_3b();
  mt::RunShape r = bench_run(8);
  CHECK(mt::plan_gpu(spec, r).saved_layers == 0);  // every layer recomputes by default
  // q, attn (2 × 2048), k, v (2 × 256), h1 (2048), gate, up (2 × 11008) in bf16, lse (16 heads) in fp32.
  const int64_t tokens = 8 * 1024, per_layer = tokens * 28672 * 2 + tokens * 16 * 4;
  r.recompute_layers = 30;
  CHECK(mt::plan_gpu(spec, r).saved_layers == 6 * per_layer);
  r.checkpoint_interval = 5;  // saved layers 30..35: 31–34 are off a checkpoint and keep their input too
  CHECK(mt::plan_gpu(spec, r).saved_layers == 6 * per_layer + 4 * tokens * spec.hidden_size * 2);

  r = bench_run(64);
  CHECK(mt::auto_recompute_layers(spec, r, 0) == 36);               // the CPU backend recomputes all
  CHECK(mt::auto_recompute_layers(spec, r, int64_t{1} << 40) == 0);  // room for every layer
  const int64_t h200 = int64_t{139} << 30;
  const int64_t chosen = mt::auto_recompute_layers(spec, r, h200);
  CHECK(chosen > 0);
  CHECK(chosen < 36);
  r.recompute_layers = chosen;
  CHECK(mt::plan_gpu(spec, r).total() <= mt::usable_gpu_bytes(h200));
  r.recompute_layers = chosen - 1;
  CHECK(mt::plan_gpu(spec, r).total() > mt::usable_gpu_bytes(h200));
}

TEST_CASE("auto micro-batch: 16384 tokens where the workspace is small beside the GPU, else 4096", "[plan]") {
  const mt::ModelSpec spec = qwen25_3b();
  mt::RunShape r = bench_run(64);
  CHECK(mt::auto_micro_batch(spec, r, 0) == 4);                     // no GPU: resolve_micro_batch
  CHECK(mt::auto_micro_batch(spec, r, int64_t{139} << 30) == 16);   // H200: a 2.9 GiB workspace
  CHECK(mt::auto_micro_batch(spec, r, int64_t{40} << 30) == 8);     // 1.5 GiB fits 5 % of 40 GiB, 2.9 does not
  CHECK(mt::auto_micro_batch(spec, r, int64_t{16} << 30) == 4);
  r.batch_size = 8;
  CHECK(mt::auto_micro_batch(spec, r, int64_t{139} << 30) == 8);    // never above the pass
  r.micro_batch_size = 2;                                           // auto ignores a given size
  CHECK(mt::auto_micro_batch(spec, r, int64_t{139} << 30) == 8);
}

TEST_CASE("auto micro-batch: MoE layers take 32768 tokens where the workspace allows, dense layers never", "[plan]") {
  const mt::ModelSpec q30 =
      mt::first_layers(mt::load_model_spec(MEGATRAIN_SOURCE_DIR "/configs/models/qwen3-30b-a3b.json"), 10);
  mt::RunShape r = bench_run(64);
  r.seq_len = 4096;
  CHECK(mt::auto_micro_batch(q30, r, int64_t{139} << 30) == 8);   // 32 768 tokens: 2 000 rows per expert
  CHECK(mt::auto_micro_batch(q30, r, int64_t{40} << 30) < 8);     // the workspace is too large beside 40 GiB
  CHECK(mt::auto_micro_batch(qwen25_3b(), r, int64_t{139} << 30) == 4);  // dense: 16 384 at most
}

TEST_CASE("auto passes: the fewest recomputing layers among passes of at least 65 536 tokens that fit", "[plan]") {
  const mt::ModelSpec spec = qwen25_3b();
  const mt::ModelSpec seven = mt::load_model_spec(MEGATRAIN_SOURCE_DIR "/configs/models/qwen2.5-7b.json");
  const int64_t h200 = int64_t{139} << 30;
  // The choices measured on the H200 (docs/PERFORMANCE.md): each is the faster one there.
  CHECK(mt::auto_passes(spec, bench_run(64), h200, true) == 1);   // a pass of 32 sequences is too short
  CHECK(mt::auto_passes(spec, bench_run(128), h200, true) == 2);  // 5 layers recompute instead of 22
  CHECK(mt::auto_passes(spec, bench_run(256), h200, true) == 4);  // 5 instead of 31
  CHECK(mt::auto_passes(seven, bench_run(64), h200, true) == 1);
  CHECK(mt::auto_passes(seven, bench_run(128), h200, true) == 2);
  CHECK(mt::auto_passes(spec, bench_run(256), 0, true) == 1);     // the CPU backend: one pass
  mt::RunShape odd = bench_run(192);                               // passes divide the batch: 1, 2 or 3
  const int64_t p = mt::auto_passes(spec, odd, h200, true);
  CHECK(192 % p == 0);
  CHECK(192 / p * 1024 >= mt::kAutoPassTokens);
  // With recompute_layers given, more passes recompute no fewer layers: the fewest passes that fit.
  mt::RunShape fixed = bench_run(256);
  fixed.recompute_layers = 36;
  CHECK(mt::auto_passes(spec, fixed, h200, false) == 1);

  // resolve_auto fills in the passes first, then the micro-batch and recompute layers of one pass.
  mt::RunShape r = bench_run(256);
  r.passes = 0;
  r.micro_batch_size = 0;
  mt::resolve_auto(spec, r, h200, true);
  CHECK(r.passes == 4);
  CHECK(r.micro_batch_size == 16);
  mt::RunShape one_pass = bench_run(64);
  one_pass.micro_batch_size = 0;
  mt::resolve_auto(spec, one_pass, h200, true);
  CHECK(r.recompute_layers == one_pass.recompute_layers);  // a pass of 64 sequences either way
}
