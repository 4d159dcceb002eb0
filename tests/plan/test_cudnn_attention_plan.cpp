// cuDNN attention's workspace and per-direction choice (plan/cudnn_attention_plan.h) and what the memory plan and the
// sequence limit make of them: the formula against the workspaces cuDNN 9.14 reported on the H200, auto's choice
// per direction, the plan reserving the deterministic backward's workspace where it fits (else our backward, with
// its GQA partials), the staging copies of any batch length up to the run's, and the longest sequence cuDNN's
// backward covers.
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "catch.h"
#include "model/model_spec.h"
#include "plan/cudnn_attention_plan.h"
#include "plan/memory_plan.h"
#include "plan/sequence_limit.h"

namespace {

constexpr int64_t kMiB = int64_t{1} << 20, kGiB = int64_t{1} << 30;

mt::ModelSpec qwen25_3b() { return mt::load_model_spec(MEGATRAIN_SOURCE_DIR "/configs/models/qwen2.5-3b.json"); }

mt::AttnShape shape(int64_t batch, int64_t seq, int64_t heads, int64_t kv_heads, int64_t head_dim) {
  return mt::AttnShape{.batch = batch, .seq = seq, .n_heads = heads, .n_kv_heads = kv_heads, .head_dim = head_dim};
}

// Tenths of a MiB, as the probe and the graph log print them.
int64_t tenths(int64_t bytes) { return (bytes * 10 + kMiB / 2) / kMiB; }

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

// The message of what f throws ("" when it does not).
template <class F>
std::string thrown(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// The switches the checks plan with: the defaults, or with one switch's variable set for a scope (Switch).
mt::RuntimeSwitches g_switches;
mt::CudnnAttentionPlan plan() { return mt::CudnnAttentionPlan(g_switches); }
// The plan with the attention switch `c` over the current switches.
mt::CudnnAttentionPlan with_choice(mt::AttentionChoice c) {
  mt::RuntimeSwitches s = g_switches;
  s.attention = c;
  return mt::CudnnAttentionPlan(s);
}

// One switch's environment variable for a scope, read as a run reads it (with_environment) into g_switches.
struct Switch {
  mt::RuntimeSwitches saved = g_switches;
  Switch(const char* variable, const char* value) {
    setenv(variable, value, 1);
    try {
      g_switches = mt::with_environment(g_switches);
    } catch (...) {
      unsetenv(variable);
      throw;
    }
    unsetenv(variable);
  }
  ~Switch() { g_switches = saved; }
};

// A run of batch × seq tokens with cuDNN attention, its passes and micro-batch left to resolve_auto.
mt::RunShape cudnn_run(int64_t seq, int64_t batch) {
  mt::RunShape run;
  run.seq_len = seq;
  run.batch_size = batch;
  run.passes = 0;
  run.micro_batch_size = 0;
  run.cudnn_attention = true;
  run.runtime = g_switches;
  return run;
}

}  // namespace

TEST_CASE("cudnn attention workspace: the formula gives what cuDNN reported on the H200", "[plan][cudnn]") {
  // Deterministic backward graphs (plan workspace with the softmax sum), causal bf16, from the probe and the op rows.
  CHECK(plan().backward_graph_bytes(4, 8192, 16, 128) / kMiB == 8450);
  CHECK(plan().backward_graph_bytes(1, 32768, 16, 128) / kMiB == 33026);
  CHECK(tenths(plan().backward_graph_bytes(1, 256, 16, 128)) == 40);
  CHECK(tenths(plan().backward_graph_bytes(1, 256, 4, 128)) == 10);
  CHECK(tenths(plan().backward_graph_bytes(2, 320, 4, 256)) == 44);  // the 2×300 hd256 row, in its 320 bucket
  // At a bucket length nothing is staged and the forward graph takes one unit of workspace.
  const mt::CudnnWorkspace at_bucket = plan().workspace(shape(4, 8192, 16, 2, 128));
  CHECK(at_bucket.forward == mt::kCudnnGraphUnit);
  CHECK(at_bucket.backward == plan().backward_graph_bytes(4, 8192, 16, 128));
  // Between buckets: 300 runs the 320 graph, staged: forward q, o, k, v, lse, lengths; backward twice the rows.
  const mt::AttnShape between = shape(2, 300, 4, 2, 256);
  const int64_t q = 2 * 320 * 4 * 256 * 2, kv = 2 * 320 * 2 * 256 * 2, rest = 2 * 4 * 320 * 4 + 256;
  CHECK(plan().staging_bytes(false, between) == 2 * q + 2 * kv + rest);
  CHECK(plan().staging_bytes(true, between) == 4 * q + 4 * kv + rest);
  const mt::CudnnWorkspace w = plan().workspace(between);
  CHECK(w.forward == mt::kCudnnGraphUnit + 2 * q + 2 * kv + rest);
  CHECK(w.backward == plan().backward_graph_bytes(2, 320, 4, 256) + 4 * q + 4 * kv + rest);
}

TEST_CASE("cudnn attention: sequence buckets round up by at most an eighth, 64 at least", "[plan][cudnn]") {
  CHECK(plan().seq_bucket(2) == 64);
  CHECK(plan().seq_bucket(64) == 64);
  CHECK(plan().seq_bucket(77) == 128);
  CHECK(plan().seq_bucket(192) == 192);
  CHECK(plan().seq_bucket(1000) == 1024);
  CHECK(plan().seq_bucket(5000) == 5120);
  CHECK(plan().seq_bucket(8192) == 8192);
  CHECK(plan().seq_bucket(8193) == 9216);
  CHECK(plan().seq_bucket(32768) == 32768);
  for (int64_t seq = 2; seq < 70000; seq += 97) {
    const int64_t b = plan().seq_bucket(seq);
    CHECK((b >= seq && (b - seq) * 8 <= std::max<int64_t>(seq, 512)));
  }
  const Switch off("MEGATRAIN_CUDNN_SEQ_BUCKETS", "0");
  CHECK(plan().seq_bucket(77) == 77);
  CHECK(plan().staging_bytes(true, shape(1, 77, 4, 2, 64)) == 0);
}

TEST_CASE("cudnn attention: what only our kernel has is not covered", "[plan][cudnn]") {
  mt::AttnShape s = shape(1, 64, 4, 2, 128);
  CHECK(mt::cudnn_attention_gap(s, mt::DType::bf16).empty());
  CHECK(!mt::cudnn_attention_gap(s, mt::DType::f32).empty());
  mt::AttnShape capped = s;
  capped.softcap = 50.f;
  CHECK(mt::cudnn_attention_gap(capped, mt::DType::bf16).empty());  // the graph's score modifier (Gemma 2)
  mt::AttnShape segmented = s;
  const int32_t seg[1] = {0};
  segmented.segments = seg;
  CHECK(mt::cudnn_attention_gap(segmented, mt::DType::bf16) == "packed segments without their virtual batch");
  const mt::SegmentBatch virtual_batch;
  segmented.segment_batch = &virtual_batch;
  CHECK(mt::cudnn_attention_gap(segmented, mt::DType::bf16).empty());  // run as their virtual batch
  mt::AttnShape odd_dim = s;
  odd_dim.head_dim = 6;
  CHECK(!mt::cudnn_attention_gap(odd_dim, mt::DType::bf16).empty());
  mt::AttentionSpec layer{.num_heads = 16, .num_kv_heads = 2, .head_dim = 128};
  CHECK(mt::cudnn_layer_gap(layer, mt::DType::bf16).empty());
  const mt::AttentionSpec gemma2{.num_heads = 16, .num_kv_heads = 8, .head_dim = 256, .window = 4096, .softcap = 50};
  CHECK(mt::cudnn_layer_gap(gemma2, mt::DType::bf16).empty());
  const mt::AttentionSpec chunked{.num_heads = 40, .num_kv_heads = 8, .head_dim = 128, .chunk = 8192};
  CHECK(mt::cudnn_layer_gap(chunked, mt::DType::bf16).empty());  // Llama 4's chunks: a virtual batch
  layer.alibi = true;
  CHECK(mt::cudnn_layer_gap(layer, mt::DType::bf16).empty());  // Baichuan 2: the slopes' bias in the graph
  mt::AttnShape alibi = shape(1, 32768, 40, 40, 128);
  const float slopes[40] = {};
  CHECK(plan().backward_tile(alibi) > 0);
  alibi.alibi_slopes = slopes;
  CHECK(mt::cudnn_attention_gap(alibi, mt::DType::bf16).empty());
  CHECK(plan().backward_tile(alibi) == 0);  // its bias is the tile's place: one graph
}

// Packed segments as their virtual batch: a group's shape (its class's bound, or the call's length where shorter,
// bucketed; its lengths; the call's window) and calls that keep the graph and the gathered rows within a limit; the
// reserve of a packed run holds a call of one segment as long as the sequence.
TEST_CASE("cudnn attention: packed segments run as a virtual batch of each length group", "[plan][cudnn]") {
  mt::AttnShape s = shape(2, 4096, 16, 2, 128);
  const int32_t seg[1] = {0};
  mt::SegmentBatch sb;
  const int32_t lens[16] = {};  // the group's lengths (device memory in a run): never read here
  sb.lens = lens;
  s.segments = seg;
  s.segment_batch = &sb;
  s.window = 700;
  const mt::SegmentGroup g{.first = 3, .sequences = 16, .segments = 9, .longest = 1000, .bound = 1024};
  const mt::AttnShape v = plan().segment_group_shape(s, g);
  CHECK(v.batch == 16);
  CHECK(v.seq == 1024);  // the class's bound, whatever the longest segment
  CHECK(v.seq_lens == lens + 3);
  CHECK(v.segments == nullptr);
  CHECK(v.segment_batch == nullptr);
  CHECK(v.window == 700);
  CHECK(mt::cudnn_attention_gap(v, mt::DType::bf16).empty());
  mt::AttnShape short_call = s;
  short_call.seq = 900;  // a class bound past the call's length: the call's length, bucketed
  CHECK(plan().segment_group_shape(short_call, mt::SegmentGroup{.sequences = 1, .segments = 1, .longest = 900,
                                                                   .bound = 1024})
            .seq == plan().seq_bucket(900));
  // A call holds its graph and its gathered rows; the calls split where the limit asks, at least one sequence.
  const mt::AttnShape w = plan().segment_group_shape(s, g);
  const int64_t three = plan().segment_call_bytes(true, w, 3);
  CHECK(three == plan().backward_graph_bytes(3, w.seq, 16, 128) + mt::cudnn_segment_staging_bytes(true, [&] {
          mt::AttnShape c = w;
          c.batch = 3;
          return c;
        }()));
  CHECK(plan().segment_call_batch(true, w, -1) == 16);
  CHECK(plan().segment_call_batch(true, w, three) == 3);
  CHECK(plan().segment_call_batch(true, w, 1) == 1);
  CHECK(plan().segment_call_bytes(false, w, 3) < three);
  CHECK(plan().segment_call_batch(false, w, plan().segment_call_bytes(false, w, 4)) == 4);
  // One sequence of any group fits the reserve of one unsegmented sequence of the call's length.
  mt::AttnShape one = shape(1, 4096, 16, 2, 128);
  const mt::SegmentGroup whole{.first = 0, .sequences = 1, .segments = 1, .longest = 4096, .bound = 4096};
  s.window = 0;
  CHECK(plan().segment_call_bytes(true, plan().segment_group_shape(s, whole), 1) <=
        plan().reserve(one).backward);
  CHECK(plan().segment_call_bytes(false, plan().segment_group_shape(s, whole), 1) <=
        plan().reserve(one).forward);
  CHECK(plan().reserve(one, 0, true).backward == plan().reserve(one).backward);
  // Past the tile the tiled graph gathers nothing, so a packed run's reserve also holds one segment's rows.
  mt::AttnShape long_one = shape(1, 32768, 16, 2, 128);
  mt::AttnShape long_s = long_one;
  long_s.segments = seg;
  long_s.segment_batch = &sb;
  const mt::SegmentGroup longest{.sequences = 1, .segments = 1, .longest = 32768, .bound = 32768};
  const int64_t segment_call = plan().segment_call_bytes(true, plan().segment_group_shape(long_s, longest), 1);
  CHECK(segment_call > plan().reserve(long_one).backward);
  CHECK(plan().reserve(long_one, 0, true).backward == segment_call);
}

// GPT-OSS's sinks: covered in both directions (the forward's softmax takes the sink; the backward is the graph
// without it, lse holding the sink), the forward from cuDNN 9.13 (the SDPA sink pattern), the backward at any version.
TEST_CASE("cudnn attention: sinks are covered, the forward from cuDNN 9.13", "[plan][cudnn]") {
  mt::AttnShape s = shape(2, 4096, 64, 8, 64);
  s.window = 128;
  const uint16_t sinks[64] = {};
  s.sinks = sinks;
  CHECK(mt::cudnn_attention_gap(s, mt::DType::bf16).empty());
  CHECK(!mt::cudnn_attention_gap(s, mt::DType::f32).empty());
  const mt::AttentionSpec gpt_oss{.num_heads = 64, .num_kv_heads = 8, .head_dim = 64, .window = 128, .sinks = true};
  CHECK(mt::cudnn_layer_gap(gpt_oss, mt::DType::bf16).empty());
  for (const bool backward : {false, true}) {
    CHECK(mt::cudnn_version_gap(s, backward, 91300).empty());
    CHECK(mt::cudnn_version_gap(s, backward, 91400).empty());
  }
  CHECK(mt::cudnn_version_gap(s, true, 91200).empty());
  CHECK(mt::cudnn_version_gap(s, true, 90600).empty());
  const std::string old = mt::cudnn_version_gap(s, false, 91200);
  CHECK(contains(old, "attention sinks need cuDNN 9.13 or later"));
  CHECK(contains(old, "not 9.12.0"));
  s.sinks = nullptr;
  CHECK(mt::cudnn_version_gap(s, false, 91200).empty());
  // The other versions the graph refuses, as before sinks.
  CHECK(contains(mt::cudnn_version_gap(s, false, 91001), "9.10.0/9.10.1"));
  mt::AttnShape capped = s;
  capped.softcap = 50.f;
  CHECK(contains(mt::cudnn_version_gap(capped, true, 90500), "soft-cap needs cuDNN 9.6"));
  CHECK(mt::cudnn_version_gap(capped, true, 90600).empty());
}

// cudnn-frontend 1.32 on cuDNN 9.15 and older: its own full-length padding mask of a backward whose key length is not
// a multiple of 128, refused beside our score modifier (a soft-cap or ALiBi), padded or not; a ragged graph, the
// forward, a key length of a multiple of 128, a shape without a modifier and cuDNN 9.16 on are built.
TEST_CASE("cudnn attention: cudnn-frontend refuses a soft-capped or ALiBi backward off 128 on cuDNN 9.15 and older",
          "[plan][cudnn]") {
  const float slopes[8] = {};
  struct Row {
    const char* what;
    int64_t seq;
    float softcap;
    bool alibi, backward, ragged;
    int64_t version;
    bool refused;
  };
  for (const Row r : {Row{"soft-cap, 701 (a 704 bucket), 9.14", 704, 50.f, false, true, false, 91400, true},
                      Row{"ALiBi, 320, 9.15", 320, 0.f, true, true, false, 91500, true},
                      Row{"soft-cap and ALiBi, 192, 9.6", 192, 2.f, true, true, false, 90600, true},
                      Row{"soft-cap, 704, 9.16", 704, 50.f, false, true, false, 91600, false},
                      Row{"ALiBi, 320, 9.19", 320, 0.f, true, true, false, 91900, false},
                      Row{"soft-cap, 704 ragged, 9.14", 704, 50.f, false, true, true, 91400, false},
                      Row{"soft-cap, 384, 9.14", 384, 50.f, false, true, false, 91400, false},
                      Row{"ALiBi, 1024, 9.14", 1024, 0.f, true, true, false, 91400, false},
                      Row{"no modifier, 704, 9.14", 704, 0.f, false, true, false, 91400, false},
                      Row{"soft-cap forward, 704, 9.14", 704, 50.f, false, false, false, 91400, false}}) {
    INFO(r.what);
    mt::AttnShape s = shape(2, r.seq, 8, 8, 128);
    s.softcap = r.softcap;
    if (r.alibi) s.alibi_slopes = slopes;
    const std::string why = mt::cudnn_frontend_gap(s, r.backward, r.ragged, r.version);
    CHECK(why.empty() == !r.refused);
    // padded or not: the score modifier builds the padding mask, so the frontend sees none
    const std::vector<int32_t> lens{static_cast<int32_t>(r.seq), 100};
    s.seq_lens = lens.data();
    CHECK(mt::cudnn_frontend_gap(s, r.backward, r.ragged, r.version) == why);
    if (r.refused) {
      CHECK(contains(why, "cudnn-frontend 1.32 adds its own full-length padding mask there"));
      CHECK(contains(why, ("key length " + std::to_string(r.seq) + " ").c_str()));
    }
  }
  mt::AttnShape capped = shape(1, 704, 8, 8, 128);
  capped.softcap = 50.f;
  CHECK(mt::cudnn_frontend_gap(capped, true, false, 91401) ==
        "soft-capped backward at key length 704 (not a multiple of 128) on cuDNN 9.14.1: cudnn-frontend 1.32 adds its "
        "own full-length padding mask there (cuDNN 9.15 and older), which it refuses beside a score modifier");
}

TEST_CASE("memory plan: GPT-OSS's attention (sinks) reserves cuDNN's deterministic backward", "[plan][cudnn]") {
  const mt::ModelSpec spec = mt::load_model_spec(MEGATRAIN_SOURCE_DIR "/configs/models/gpt-oss-20b.json");
  mt::RunShape run = cudnn_run(4096, 8);
  mt::resolve_auto(spec, run, 139 * kGiB, true);
  CHECK(run.cudnn_backward);
  const mt::GpuPlan g = mt::plan_gpu(spec, run);
  CHECK(g.cudnn_backward);
  CHECK(g.attention_workspace == plan().reserve(shape(g.micro_batch_size, 4096, 64, 8, 64)).backward);
  CHECK(contains(plan().describe_plan(g), "cuDNN forward and deterministic backward"));
}

TEST_CASE("cudnn attention: auto picks per direction, the backward by the reserved workspace", "[plan][cudnn]") {
  using mt::AttentionChoice;
  const int64_t reserved = 8450 * kMiB;
  // MEGATRAIN_ATTENTION itself.
  CHECK(plan().choice() == AttentionChoice::automatic);
  {
    const Switch e("MEGATRAIN_ATTENTION", "ours");
    CHECK(plan().choice() == AttentionChoice::ours);
  }
  CHECK(contains(thrown([] { const Switch e("MEGATRAIN_ATTENTION", "flash"); }), "MEGATRAIN_ATTENTION"));
  // The limit: the plan's figure under auto, none under cudnn, MEGATRAIN_CUDNN_WORKSPACE_MIB over both.
  CHECK(with_choice(AttentionChoice::automatic).workspace_limit(reserved) == reserved);
  CHECK(with_choice(AttentionChoice::automatic).workspace_limit(-1) == -1);
  CHECK(with_choice(AttentionChoice::cudnn).workspace_limit(reserved) == -1);
  {
    const Switch e("MEGATRAIN_CUDNN_WORKSPACE_MIB", "1024");
    CHECK(with_choice(AttentionChoice::automatic).workspace_limit(reserved) == 1024 * kMiB);
    CHECK(with_choice(AttentionChoice::cudnn).workspace_limit(reserved) == 1024 * kMiB);
  }
  CHECK(contains(thrown([] { const Switch e("MEGATRAIN_CUDNN_WORKSPACE_MIB", "lots"); }),
                 "MEGATRAIN_CUDNN_WORKSPACE_MIB"));
  // Forward: cuDNN wherever covered (no workspace at a bucket length).
  CHECK(with_choice(AttentionChoice::automatic).choose(false, "", 0, 0).cudnn);
  CHECK(!with_choice(AttentionChoice::automatic).choose(false, "ALiBi", 0, -1).cudnn);
  CHECK(!with_choice(AttentionChoice::ours).choose(false, "", 0, -1).cudnn);
  // Backward: cuDNN's deterministic graph within the reserve, ours past it (and why).
  CHECK(with_choice(AttentionChoice::automatic).choose(true, "", reserved, reserved).cudnn);
  const mt::AttentionDecision over = with_choice(AttentionChoice::automatic).choose(true, "", 33026 * kMiB, reserved);
  CHECK(!over.cudnn);
  CHECK(contains(over.why, "memory plan"));
  CHECK(with_choice(AttentionChoice::cudnn).choose(true, "", 33026 * kMiB, -1).cudnn);
  CHECK(!with_choice(AttentionChoice::automatic).choose(true, "packed segments", 0, reserved).cudnn);
  CHECK(!with_choice(AttentionChoice::ours).choose(true, "", 0, reserved).cudnn);
}

TEST_CASE("memory plan: cuDNN's deterministic backward workspace is reserved where it fits", "[plan][cudnn]") {
  const mt::ModelSpec spec = qwen25_3b();
  mt::RunShape run = cudnn_run(8192, 8);
  REQUIRE(mt::cudnn_attention_for(run.dtype, 139 * kGiB, g_switches));
  mt::RunShape on_h200 = run;
  mt::resolve_auto(spec, on_h200, 139 * kGiB, true);
  CHECK(on_h200.cudnn_backward);
  const mt::GpuPlan g = mt::plan_gpu(spec, on_h200);
  const int64_t mb = g.micro_batch_size;
  const mt::CudnnWorkspace w = plan().reserve(shape(mb, 8192, 16, 2, 128));
  CHECK(g.cudnn_backward);
  CHECK(g.cudnn_backward_tile == 0);  // 8192 tokens: one graph
  CHECK(g.attention_workspace == w.backward);
  CHECK(g.cudnn_backward_need == w.backward);
  CHECK(g.total() <= mt::usable_gpu_bytes(139 * kGiB));
  // The same shape with our backward: the forward's staging only, and our GQA partials instead.
  mt::RunShape ours = on_h200;
  ours.cudnn_backward = false;
  const mt::GpuPlan o = mt::plan_gpu(spec, ours);
  CHECK(o.attention_workspace == w.forward);
  CHECK(o.layer_workspace > g.layer_workspace);
  CHECK(o.total() - o.layer_workspace - o.attention_workspace ==
        g.total() - g.layer_workspace - g.attention_workspace);
  // Not bf16, or MEGATRAIN_ATTENTION=ours, or no GPU: no cuDNN at all.
  CHECK(!mt::cudnn_attention_for(mt::DType::f32, 139 * kGiB, g_switches));
  CHECK(!mt::cudnn_attention_for(mt::DType::bf16, 0, g_switches));
  {
    const Switch e("MEGATRAIN_ATTENTION", "ours");
    CHECK(!mt::cudnn_attention_for(mt::DType::bf16, 139 * kGiB, g_switches));
  }
  // A GPU that does not hold the one-graph workspace beside the leanest plan (2×32768: 33 GiB a sequence on a 48 GiB
  // GPU): the plan assumes our backward and says so.
  const Switch whole("MEGATRAIN_CUDNN_BACKWARD_TILE", "0");
  mt::RunShape small = run;
  small.runtime = g_switches;
  small.seq_len = 32768;
  small.batch_size = 2;
  const int64_t small_gpu = 48 * kGiB;
  mt::resolve_auto(spec, small, small_gpu, true);
  const mt::GpuPlan s = mt::plan_gpu(spec, small);
  CHECK(!small.cudnn_backward);
  CHECK(!s.cudnn_backward);
  CHECK(s.cudnn_backward_need > 0);
  CHECK(s.attention_workspace ==
        plan().reserve(shape(s.micro_batch_size, 32768, 16, 2, 128)).forward);
  CHECK(s.total() <= mt::usable_gpu_bytes(small_gpu));
  CHECK(contains(plan().describe_plan(s), "our backward"));
  CHECK(contains(plan().describe_plan(g), "deterministic backward"));
  // Micro-batches of 2 such sequences on an 80 GiB GPU: one call of both (66 GiB) does not fit, a call a sequence
  // does: cuDNN's backward in calls of 1 rather than ours.
  mt::RunShape pair = small;
  pair.seq_len = 32768;
  pair.batch_size = 2;
  pair.micro_batch_size = 2;
  pair.passes = 1;
  pair.recompute_layers = 0;
  pair.cudnn_backward = false;
  pair.cudnn_call_batch = 0;
  mt::resolve_auto(spec, pair, 80 * kGiB, true);
  const mt::GpuPlan p = mt::plan_gpu(spec, pair);
  CHECK(pair.cudnn_backward);
  CHECK(p.cudnn_call_batch == 1);
  CHECK(p.attention_workspace == plan().reserve(shape(2, 32768, 16, 2, 128), 1).backward);
  CHECK(p.total() <= mt::usable_gpu_bytes(80 * kGiB));
  CHECK(contains(plan().describe_plan(p), "in calls of 1 sequence(s)"));
  mt::RunShape whole_calls = pair;
  whole_calls.cudnn_call_batch = 0;
  CHECK(mt::plan_gpu(spec, whole_calls).total() > mt::usable_gpu_bytes(80 * kGiB));
}

TEST_CASE("cudnn attention reserve: the most any batch length up to the longest holds", "[plan][cudnn]") {
  // A batch is as long as its longest sequence: one token short of the bucket stages into it.
  const mt::CudnnWorkspace at = plan().reserve(shape(2, 8192, 16, 2, 128));
  const mt::CudnnWorkspace short_one = plan().workspace(shape(2, 8191, 16, 2, 128));
  CHECK(at.forward == short_one.forward);
  CHECK(at.backward == short_one.backward);
  for (int64_t seq = 2; seq <= 8192; seq += 37) {
    const mt::CudnnWorkspace w = plan().workspace(shape(2, seq, 16, 2, 128));
    CHECK(w.forward <= at.forward);
    CHECK(w.backward <= at.backward);
  }
  // Without buckets nothing is staged: the longest length's graph is the most.
  const Switch off("MEGATRAIN_CUDNN_SEQ_BUCKETS", "0");
  const mt::CudnnWorkspace unstaged = plan().reserve(shape(2, 8192, 16, 2, 128));
  CHECK(unstaged.forward == mt::kCudnnGraphUnit);
  CHECK(unstaged.backward == plan().backward_graph_bytes(2, 8192, 16, 128));
}

TEST_CASE("cudnn attention: the deterministic backward runs a batch in calls that fit the workspace limit",
          "[plan][cudnn]") {
  // Qwen3-30B-A3B's micro-batch of 8 × 4096 (32 heads): 1 GiB of dP a sequence. No limit, or one the whole call
  // fits: one call; a limit of a sequence's call: a call a sequence, an eighth of the workspace.
  const mt::AttnShape moe = shape(8, 4096, 32, 4, 128);
  const int64_t one = plan().backward_call_bytes(moe, 1), all = plan().backward_call_bytes(moe, 8);
  CHECK(all > 8 * kGiB);
  CHECK(plan().backward_batch(moe, -1) == 8);
  CHECK(plan().backward_batch(moe, all) == 8);
  CHECK(plan().backward_batch(moe, one) == 1);
  CHECK(plan().backward_batch(moe, one - 1) == 1);  // at least one (the call is then refused by the limit)
  CHECK(plan().backward_batch(moe, plan().backward_call_bytes(moe, 3)) == 3);
  CHECK(plan().workspace(moe, one).backward == plan().backward_graph_bytes(1, 4096, 32, 128));
  CHECK(plan().workspace(moe).backward == plan().backward_graph_bytes(8, 4096, 32, 128));
  // Calls of 3: the last holds the 2 left, its lengths from its first sequence's.
  mt::AttnShape padded = moe;
  const int32_t lens[8] = {};
  padded.seq_lens = lens;
  const int64_t three = plan().backward_call_bytes(moe, 3);
  CHECK(plan().backward_call(padded, 0, three).batch == 3);
  const mt::AttnShape last = plan().backward_call(padded, 6, three);
  CHECK(last.batch == 2);
  CHECK(last.seq_lens == lens + 6);
  // The reserve at calls of n: held to it, the longest length's calls take n sequences and no shorter length's
  // call takes more than it.
  for (const int64_t n : {1, 2, 3, 8}) {
    const mt::CudnnWorkspace r = plan().reserve(moe, n);
    CHECK(r.backward == plan().backward_call_bytes(moe, n));
    CHECK(plan().backward_batch(moe, r.backward) == n);
    for (int64_t seq = 2; seq <= 4096; seq += 53)
      CHECK(plan().workspace(shape(8, seq, 32, 4, 128), r.backward).backward <= r.backward);
  }
  CHECK(plan().reserve(moe).backward == plan().reserve(moe, 8).backward);
}

TEST_CASE("memory plan: a length between buckets reserves the staging copies", "[plan][cudnn]") {
  const mt::ModelSpec spec = qwen25_3b();
  mt::RunShape run;
  run.seq_len = 5000;  // runs the 5120 graph
  run.batch_size = 2;
  run.micro_batch_size = 2;
  run.recompute_layers = spec.num_layers;
  run.cudnn_attention = true;
  const mt::AttnShape s = shape(2, 5000, 16, 2, 128);
  CHECK(mt::plan_gpu(spec, run).attention_workspace == mt::kCudnnGraphUnit + plan().staging_bytes(false, s));
  run.cudnn_backward = true;
  CHECK(mt::plan_gpu(spec, run).attention_workspace ==
        plan().backward_graph_bytes(2, 5120, 16, 128) + plan().staging_bytes(true, s));
}

TEST_CASE("sequence limit: beyond the length cuDNN's backward fits, the plan assumes ours", "[plan][cudnn][longseq]") {
  const Switch whole("MEGATRAIN_CUDNN_BACKWARD_TILE", "0");  // one graph: its workspace is quadratic in the length
  const mt::ModelSpec spec = qwen25_3b();
  const mt::Machine h200{139 * kGiB, 1500 * kGiB};
  mt::RunShape run;
  run.cudnn_attention = true;
  run.runtime = g_switches;
  const mt::SequenceLimit s = mt::longest_trainable_sequence(spec, run, h200);
  const int64_t usable = mt::usable_gpu_bytes(h200.gpu_bytes);
  REQUIRE(s.memory_tokens >= 524288);  // the target holds with cuDNN's forward
  // 1×32768 needs 33 GiB (it fits); quadratic in the length, so well short of the memory limit.
  CHECK(s.cudnn_backward_tokens >= 32768);
  CHECK(s.cudnn_backward_tokens < s.memory_tokens);
  mt::RunShape with = run;
  with.cudnn_backward = true;
  CHECK(mt::one_sequence_gpu_bytes(spec, with, s.cudnn_backward_tokens) <= usable);
  CHECK(mt::one_sequence_gpu_bytes(spec, with, s.cudnn_backward_tokens + mt::kSequenceStep) > usable);
  CHECK(s.gpu_bytes == mt::one_sequence_gpu_bytes(spec, run, s.memory_tokens));  // our backward there
  // Without cuDNN the figure is as before.
  CHECK(mt::longest_trainable_sequence(spec, mt::RunShape{}, h200).cudnn_backward_tokens == 0);
}

TEST_CASE("cudnn attention: padded and packed calls are ragged unless MEGATRAIN_CUDNN_RAGGED=0", "[plan][cudnn]") {
  CHECK(plan().ragged());
  {
    const Switch e("MEGATRAIN_CUDNN_RAGGED", "0");
    CHECK_FALSE(plan().ragged());
  }
  {
    const Switch e("MEGATRAIN_CUDNN_RAGGED", "1");
    CHECK(plan().ragged());
  }
  for (const char* bad : {"yes", "2", "off"})
    CHECK(contains(thrown([&] { const Switch e("MEGATRAIN_CUDNN_RAGGED", bad); }),
                   "MEGATRAIN_CUDNN_RAGGED must be 0 or 1"));
}

TEST_CASE("cudnn attention: past the tile length the deterministic backward runs in tiles", "[plan][cudnn][longseq]") {
  // Which calls tile: longer than the configured tile, without a window.
  CHECK(plan().backward_tile(shape(4, 8192, 16, 2, 128)) == 0);  // one graph up to the tile
  CHECK(plan().backward_tile(shape(1, 8193, 16, 2, 128)) == 8192);
  CHECK(plan().backward_tile(shape(1, 32768, 16, 2, 128)) == 8192);
  CHECK(plan().backward_tile(shape(1, 524288, 16, 2, 128)) == 8192);
  mt::AttnShape windowed = shape(1, 32768, 16, 8, 256);
  windowed.window = 4096;
  CHECK(plan().backward_tile(windowed) == 0);  // windows run as one graph
  {
    const Switch e("MEGATRAIN_CUDNN_BACKWARD_TILE", "0");
    CHECK(plan().backward_tile(shape(1, 524288, 16, 2, 128)) == 0);
  }
  {
    const Switch e("MEGATRAIN_CUDNN_BACKWARD_TILE", "2048");
    CHECK(plan().backward_tile(shape(1, 32768, 16, 2, 128)) == 2048);
    CHECK(plan().backward_tile(shape(1, 2048, 16, 2, 128)) == 0);
  }
  for (const char* bad : {"1000", "64", "lots"})
    CHECK(contains(thrown([&] { const Switch e("MEGATRAIN_CUDNN_BACKWARD_TILE", bad); }),
                   "MEGATRAIN_CUDNN_BACKWARD_TILE"));
  // The workspace: one tile's graph and the side tensors, O(tile² + sequence), never staged.
  const int64_t T = 8192;
  for (const int64_t seq : {int64_t{524288}, int64_t{500001}}) {
    const mt::AttnShape long_one = shape(1, seq, 16, 2, 128);
    const int64_t rows = (seq + T - 1) / T * T, row = 16 * T * 4, q_tile = T * 2048 * 2, kv_tile = T * 256 * 2;
    const int64_t side = row + 4 * q_tile + 4 * kv_tile + T * 2048 * 4 + 2 * rows * 256 * 4 + 2 * 256;
    CHECK(mt::cudnn_tiled_side_bytes(long_one, T) == side);
    CHECK(plan().tiled_backward_bytes(long_one, T) == plan().backward_graph_bytes(1, T, 16, 128) + side);
    CHECK(plan().workspace(long_one).backward == plan().tiled_backward_bytes(long_one, T));
    CHECK(plan().workspace(long_one).backward < 4 * kGiB);
  }
  // The reserve bounds every length up to the longest: one graph (staged) up to the tile, tiles past it.
  const mt::CudnnWorkspace at = plan().reserve(shape(2, 40000, 16, 2, 128));
  for (int64_t seq = 2; seq <= 40000; seq += 97) {
    const mt::CudnnWorkspace w = plan().workspace(shape(2, seq, 16, 2, 128));
    CHECK(w.forward <= at.forward);
    CHECK(w.backward <= at.backward);
  }
}

TEST_CASE("memory plan and sequence limit: the tiled backward fits where one graph does not", "[plan][cudnn][longseq]") {
  const mt::ModelSpec spec = qwen25_3b();
  mt::RunShape run = cudnn_run(32768, 2);
  mt::resolve_auto(spec, run, 48 * kGiB, true);  // a 48 GiB GPU: one graph's 33 GiB does not fit beside the plan
  CHECK(run.cudnn_backward);
  const mt::GpuPlan g = mt::plan_gpu(spec, run);
  CHECK(g.cudnn_backward);
  CHECK(g.cudnn_backward_tile == 8192);
  CHECK(contains(plan().describe_plan(g), "in tiles of 8192 tokens"));
  CHECK(g.attention_workspace < 8 * kGiB);
  // The longest sequence with the tiles: past our backward's (whose GQA partials grow with the length).
  const mt::Machine h200{139 * kGiB, 1500 * kGiB};
  mt::RunShape one;
  one.cudnn_attention = true;
  const mt::SequenceLimit s = mt::longest_trainable_sequence(spec, one, h200);
  CHECK(s.cudnn_backward_tokens == s.memory_tokens);
  CHECK(s.memory_tokens > mt::longest_trainable_sequence(spec, mt::RunShape{}, h200).memory_tokens);
  mt::RunShape with = one;
  with.cudnn_backward = true;
  CHECK(mt::one_sequence_gpu_bytes(spec, with, s.memory_tokens) <= mt::usable_gpu_bytes(h200.gpu_bytes));
}

TEST_CASE("cudnn attention: MEGATRAIN_ATTENTION_DETERMINISTIC=0 plans the non-deterministic backward, never tiled",
          "[plan][cudnn][longseq]") {
  CHECK(plan().deterministic_backward());
  for (const char* bad : {"yes", "2", "false"})
    CHECK(contains(thrown([&] { const Switch e("MEGATRAIN_ATTENTION_DETERMINISTIC", bad); }),
                   "MEGATRAIN_ATTENTION_DETERMINISTIC must be 0 or 1"));
  const int64_t deterministic_4x8192 = plan().backward_graph_bytes(4, 8192, 16, 128);
  const mt::ModelSpec spec = qwen25_3b();
  const mt::Machine h200{139 * kGiB, 1500 * kGiB};
  mt::RunShape one;
  one.cudnn_attention = true;
  const int64_t deterministic_longest = mt::longest_trainable_sequence(spec, one, h200).memory_tokens;
  {
    const Switch e("MEGATRAIN_ATTENTION_DETERMINISTIC", "1");
    CHECK(plan().deterministic_backward());
  }
  const Switch e("MEGATRAIN_ATTENTION_DETERMINISTIC", "0");
  CHECK_FALSE(plan().deterministic_backward());
  one.runtime = g_switches;
  // cuDNN's plan (b·h·⌈s⌉₆₄·d·4), our fp32 dQ accumulator and softmax sum: what the H200 reported (514 MiB at both).
  CHECK(plan().backward_graph_bytes(4, 8192, 16, 128) / kMiB == 514);
  CHECK(plan().backward_graph_bytes(1, 32768, 16, 128) / kMiB == 514);
  CHECK(plan().backward_graph_bytes(4, 8192, 16, 128) < deterministic_4x8192 / 16);
  // Linear in the sequence, so it never tiles: one graph at any length.
  CHECK(plan().backward_tile(shape(1, 524288, 16, 2, 128)) == 0);
  CHECK(plan().workspace(shape(1, 32768, 16, 2, 128)).backward ==
        plan().backward_graph_bytes(1, 32768, 16, 128));
  // The plan reserves it and says so. Its longest sequence on the H200 is shorter than the deterministic tiles' (about
  // a million tokens): its cuDNN plan and our dQ accumulator, fp32 b·h·s·d each, outgrow a tile's dP there.
  mt::RunShape run = cudnn_run(32768, 2);
  mt::resolve_auto(spec, run, 139 * kGiB, true);
  const mt::GpuPlan g = mt::plan_gpu(spec, run);
  CHECK(g.cudnn_backward);
  CHECK(g.cudnn_backward_tile == 0);
  CHECK(contains(plan().describe_plan(g), "non-deterministic backward (MEGATRAIN_ATTENTION_DETERMINISTIC=0)"));
  const int64_t longest = mt::longest_trainable_sequence(spec, one, h200).memory_tokens;
  CHECK(longest >= 524288);
  CHECK(longest < deterministic_longest);
}
