// The predicted step (see step_time.h): op-class compute per acquisition, then the pipeline simulated pass by pass.
#include "plan/step_time.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/moe_block.h"
#include "model/flops.h"
#include "model/param_layout.h"
#include "plan/step_rates.h"

namespace mt {
namespace {

// Our attention kernel against cuDNN's (the twenty-fifth session's probe, head dim 128: 2.5-2.8× forward, 2.7-3.0×
// backward at 32 × 1024 and 8 × 4096): where cuDNN does not run a direction, that direction's share over this.
constexpr double kOurAttentionSlowdown = 2.7;

enum class Use { forward, head, rebuild, backward };

struct Acquisition {
  int64_t region;
  Use use;
};

// The engine's acquisition order of one pass (pass_region_order) with what each acquisition computes.
std::vector<Acquisition> pass_acquisitions(int64_t L, int64_t c, bool tied, int64_t recompute_layers) {
  std::vector<Acquisition> out;
  for (int64_t r = 0; r <= L; ++r) out.push_back({r, Use::forward});
  out.push_back({L + 1, tied ? Use::forward : Use::head});  // untied: the head's forward and backward, fused
  if (tied) out.push_back({0, Use::head});                  // tied: the head's matmuls read the embedding
  for (int64_t seg_start = (L - 1) / c * c; seg_start >= 0; seg_start -= c) {
    const int64_t seg_end = std::min(seg_start + c, L);
    for (int64_t i = seg_start; i + 1 < std::min(seg_end, recompute_layers); ++i) out.push_back({i + 1, Use::rebuild});
    for (int64_t i = seg_end - 1; i >= seg_start; --i) out.push_back({i + 1, Use::backward});
  }
  return out;
}

// A layer's model FLOPs per token (forward and backward, as flops.h counts them) by op class, and the MoE recompute's.
struct LayerFlops {
  double dense = 0, attention = 0, experts = 0;
  double recompute_dense = 0, recompute_experts = 0;  // a non-keeping MoE layer's backward
};

std::vector<LayerFlops> layer_flops(const ModelSpec& spec, const std::vector<double>& region_flops, int64_t seq_len) {
  std::vector<LayerFlops> out(static_cast<size_t>(spec.num_layers));
  const auto H = static_cast<double>(spec.hidden_size);
  for (int64_t i = 0; i < spec.num_layers; ++i) {
    const LayerSpec& l = spec.layers[static_cast<size_t>(i)];
    LayerFlops& f = out[static_cast<size_t>(i)];
    // Linear-attention state updates run with the dense work; attention is its own class.
    f.attention = l.linear_mixer() ? 0.0 : mixer_flops_per_token(l, seq_len);
    if (l.moe.active()) {
      const double per_expert = 3.0 * H * static_cast<double>(l.moe.intermediate_size);
      f.experts = 6.0 * static_cast<double>(l.moe.top_k) * per_expert;
      f.recompute_experts = 2.0 * 2.0 * H * static_cast<double>(l.moe.top_k * l.moe.intermediate_size);  // gate, up
      f.recompute_dense = moe_recompute_flops_per_token(spec, i) - f.recompute_experts;
    }
    f.dense = region_flops[static_cast<size_t>(i) + 1] - f.attention - f.experts;
  }
  return out;
}

}  // namespace

double dense_share_of_gemm(int64_t hidden_size) {
  const double wide = std::clamp((static_cast<double>(hidden_size) - 2048.0) / (3584.0 - 2048.0), 0.0, 1.0);
  return kDenseShareOfGemm + wide * (kDenseShareOfGemmWide - kDenseShareOfGemm);
}

namespace {

// Seconds of each op class for one acquisition over a pass's tokens.
struct Seconds {
  double dense = 0, head = 0, attention = 0, experts = 0, recompute = 0;
  double total() const { return dense + head + attention + experts; }
};

class ComputeTimes {
 public:
  ComputeTimes(const ModelSpec& spec, const ParamLayout& layout, const RunShape& run, const StepRates& rates)
      : spec_(spec), run_(run), gemm_(rates.gpu_flops / kStepFlopsPerGemmFlop),
        dense_gemm_(gemm_ * dense_share_of_gemm(spec.hidden_size)) {
    const std::vector<double> regions = region_flops_per_token(spec, layout, run.seq_len);
    layers_ = layer_flops(spec, regions, run.seq_len);
    head_flops_ = regions.back();
    tokens_ = static_cast<double>(run.batch_size / std::max<int64_t>(run.passes, 1) * run.seq_len);
    const int64_t mb = resolve_micro_batch(run);
    mb_tokens_ = static_cast<double>(mb * run.seq_len);
    // Attention's shares at seq_len, log2-interpolated between the probe's 1024 and 4096 and held outside.
    const double at = std::clamp((std::log2(static_cast<double>(std::max<int64_t>(run.seq_len, 1))) - 10.0) / 2.0, 0.0, 1.0);
    attention_forward_ = kAttentionForwardShare1k + at * (kAttentionForwardShare4k - kAttentionForwardShare1k);
    attention_backward_ = kAttentionBackwardShare1k + at * (kAttentionBackwardShare4k - kAttentionBackwardShare1k);
    if (!run.cudnn_attention) attention_forward_ /= kOurAttentionSlowdown;
    if (!(run.cudnn_attention && run.cudnn_backward)) {
      attention_backward_ /= kOurAttentionSlowdown;
    } else {
      const int64_t call = run.cudnn_call_batch > 0 ? std::min(run.cudnn_call_batch, mb) : mb;
      attention_backward_ *= std::pow(kAttentionBackwardPerHalving,
                                      std::log2(static_cast<double>(mb) / static_cast<double>(std::max<int64_t>(call, 1))));
    }
  }

  Seconds of(const Acquisition& a) const {
    Seconds s;
    const int64_t L = spec_.num_layers;
    if (a.use == Use::head) {
      s.head = head_flops_ * tokens_ / (gemm_ * kHeadShareOfGemm);
      return s;
    }
    if (a.region == 0 || a.region == L + 1) return s;  // the embedding's lookup, the final norm
    const int64_t i = a.region - 1;
    const LayerFlops& f = layers_[static_cast<size_t>(i)];
    const double experts_rate = gemm_ * expert_share(i);
    const bool keeps = moe_layer_keeps(spec_, i, run_.moe_keep_layers);
    // The layer's forward; its experts' share is `experts` of their three GEMMs (a keeping layer's forward over its
    // filled rows computes only the down projection).
    const auto forward = [&](Seconds& into, double experts) {
      into.dense += f.dense / 3.0 * tokens_ / dense_gemm_;
      into.attention += f.attention / 3.0 * tokens_ / (gemm_ * attention_forward_);
      into.experts += experts * f.experts / 3.0 * tokens_ / experts_rate;
    };
    if (a.use == Use::forward || a.use == Use::rebuild) {
      forward(s, a.use == Use::rebuild && keeps ? 1.0 / 3.0 : 1.0);
      if (a.use == Use::rebuild) s.recompute = s.total();
      return s;
    }
    s.dense = 2.0 * f.dense / 3.0 * tokens_ / dense_gemm_;
    s.attention = 2.0 * f.attention / 3.0 * tokens_ / (gemm_ * attention_backward_);
    s.experts = 2.0 * f.experts / 3.0 * tokens_ / experts_rate;
    const double before = s.total();
    if (i < run_.recompute_layers) forward(s, keeps ? 1.0 / 3.0 : 1.0);
    if (!keeps) {
      s.dense += f.recompute_dense * tokens_ / dense_gemm_;
      s.experts += f.recompute_experts * tokens_ / experts_rate;
    }
    s.recompute = s.total() - before;
    return s;
  }

 private:
  // The experts' share of the GEMM rate at their rows per expert in a micro-batch.
  double expert_share(int64_t layer) const {
    const MoeSpec& m = spec_.layers[static_cast<size_t>(layer)].moe;
    if (!m.active()) return 1.0;
    const double rows = mb_tokens_ * static_cast<double>(m.top_k) / static_cast<double>(m.num_experts);
    return kExpertShareOfGemm * rows / (rows + kExpertHalfRows);
  }

  const ModelSpec& spec_;
  const RunShape& run_;
  double gemm_;
  double dense_gemm_;  // the dense matmuls' rate at the model's width
  std::vector<LayerFlops> layers_;
  double head_flops_ = 0, tokens_ = 0, mb_tokens_ = 0;
  double attention_forward_ = 0, attention_backward_ = 0;
};

// What one acquisition of a pass does in the pipeline (kernels/runtime/pipeline.cu).
struct Stage {
  int64_t region = 0;
  double compute = 0;        // seconds of GPU work
  double copy = 0;           // seconds of its weights' copy in (0: resident, or still in its slot)
  int64_t refills = -1;      // the acquisition whose slot the copy refills (it must have been released); -1 none
  double gradient_out = 0;   // seconds of its fp32 gradient's copy out (0: none, or resident)
  double gradient_in = 0;    // and of the host's sum so far in, in a pass after the first
  int buffer = -1;           // the gradient buffer its backward writes: 0 embedding, 1 head, 2 the layers' pair
};

// The weight slots as the pipeline plans them per pass: a resident region is read where it lives; a region still
// in a slot is reused; otherwise the slot used farthest in the future (never the one in use) is refilled.
void plan_slots(std::vector<Stage>& stages, int64_t slots) {
  const auto k = static_cast<size_t>(std::max<int64_t>(slots, 1));
  std::vector<int64_t> holds(k, -1), last(k, -1);
  size_t in_use = k;
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].copy <= 0) continue;  // resident
    size_t s = k;
    for (size_t j = 0; j < k; ++j)
      if (holds[j] == stages[i].region) s = j;
    if (s < k) {
      stages[i].copy = 0;
    } else {
      int64_t farthest = -1;
      for (size_t j = 0; j < k; ++j) {
        if (j == in_use) continue;
        int64_t next = std::numeric_limits<int64_t>::max();
        for (size_t t = i + 1; t < stages.size() && holds[j] >= 0; ++t)
          if (stages[t].region == holds[j]) {
            next = static_cast<int64_t>(t);
            break;
          }
        if (next > farthest) {
          farthest = next;
          s = j;
        }
      }
      stages[i].refills = last[s];
      holds[s] = stages[i].region;
    }
    last[s] = static_cast<int64_t>(i);
    in_use = s;
  }
}

// When the host's optimizer has each region ready for the step's first pass: updated_at (its parameters pass, which
// the weight copy waits for) and moments_read_at (its moments pass has read the previous gradient, which the
// gradient's copy out waits for).
struct HostUpdate {
  std::vector<double> updated_at, moments_read_at;
};

// One step through the pipeline: from the first forward's start (the compute stream starts at `start`, after the
// resident update) to the last gradient's arrival. The embedding's gradient crosses after each pass's last stage.
double simulate_step(const std::vector<Stage>& stages, const Stage& embedding, int64_t passes, double start,
                     const HostUpdate& host) {
  const size_t n = stages.size();
  double compute_end = start, h2d_free = 0, gradient_stream = 0;
  double buffer_free[4] = {0, 0, 0, 0};  // embedding, head, the layers' two
  int64_t layer_gradients = 0;
  std::vector<double> released(n, 0);
  for (int64_t p = 0; p < passes; ++p) {
    const bool first = p == 0;
    // The copy stream starts a pass once the compute has finished the previous one with every slot.
    h2d_free = std::max(h2d_free, compute_end);
    // On the gradient stream: a pass after the first brings the host's sum so far in, then the total goes out; in
    // the first, the copy out waits for the moments pass to have read the previous gradient.
    const auto gradient_out = [&](int64_t region, double in, double out) {
      double begin = std::max(gradient_stream, compute_end);
      if (first) begin = std::max(begin, host.moments_read_at[static_cast<size_t>(region)]);
      if (!first) begin = h2d_free = std::max(begin, h2d_free) + in;
      return gradient_stream = begin + out;
    };
    std::vector<double> copied(n, 0);
    // Weight copies are queued in order, each as soon as the slot it refills is released (before the gradient of
    // the stage that released it); in the first pass each also waits for the host's parameters pass to update it.
    size_t queued = 0;
    const auto queue_copies = [&](int64_t released_upto) {
      for (; queued < n && stages[queued].refills <= released_upto; ++queued) {
        const Stage& s = stages[queued];
        if (s.copy <= 0) continue;
        const double slot_free = s.refills >= 0 ? released[static_cast<size_t>(s.refills)] : 0.0;
        const double ready = first ? host.updated_at[static_cast<size_t>(s.region)] : 0.0;
        copied[queued] = h2d_free = std::max({h2d_free, slot_free, ready}) + s.copy;
      }
    };
    queue_copies(-1);
    for (size_t i = 0; i < n; ++i) {
      const Stage& s = stages[i];
      double begin = std::max(compute_end, copied[i]);
      double* buffer = s.buffer == 2 ? &buffer_free[2 + layer_gradients++ % 2] : s.buffer >= 0 ? &buffer_free[s.buffer] : nullptr;
      if (buffer != nullptr) begin = std::max(begin, *buffer);
      compute_end = begin + s.compute;
      released[i] = compute_end;
      queue_copies(static_cast<int64_t>(i));
      if (buffer != nullptr && s.gradient_out > 0) *buffer = gradient_out(s.region, s.gradient_in, s.gradient_out);
    }
    if (embedding.gradient_out > 0) buffer_free[0] = gradient_out(0, embedding.gradient_in, embedding.gradient_out);
  }
  return std::max(compute_end, gradient_stream);
}

}  // namespace

double moe_recompute_flops_per_token(const ModelSpec& spec, int64_t layer) {
  const MoeSpec& m = spec.layers[static_cast<size_t>(layer)].moe;
  if (!m.active()) return 0.0;
  const auto H = static_cast<double>(spec.hidden_size);
  const auto S = static_cast<double>(m.shared_intermediate_size);
  double flops = 2.0 * H * static_cast<double>(m.num_experts);                                  // router
  flops += 2.0 * 2.0 * H * static_cast<double>(m.top_k) * static_cast<double>(m.intermediate_size);  // gate, up
  flops += 2.0 * 2.0 * H * S;                                                                      // shared gate, up
  if (m.shared_intermediate_size > 0 && m.shared_gate) flops += 2.0 * S * H + 2.0 * H;             // its down, logit
  return flops;
}

StepTime predict_step_time(const ModelSpec& spec, const RunShape& run, const StepRates& rates) {
  return predict_step_time(spec, make_param_layout(spec), run, rates);
}

StepTime predict_step_time(const ModelSpec& spec, const ParamLayout& layout, const RunShape& run,
                           const StepRates& rates) {
  StepTime t;
  const int64_t L = spec.num_layers;
  const bool tied = layout.head.lm_head < 0;
  const int64_t c = std::max<int64_t>(run.checkpoint_interval, 1);
  const int64_t recompute = std::min(run.recompute_layers, L);
  const std::vector<Acquisition> order = pass_acquisitions(L, c, tied, recompute);
  {
    const std::vector<int64_t> engine_order = pass_region_order(L, c, tied, recompute);
    MT_ASSERT(engine_order.size() == order.size() &&
              std::equal(engine_order.begin(), engine_order.end(), order.begin(),
                         [](int64_t r, const Acquisition& a) { return r == a.region; }),
              "step_time's acquisitions differ from the engine's pass_region_order");
  }
  const int64_t passes = std::max<int64_t>(run.passes, 1);
  const auto p = static_cast<double>(passes);
  const ComputeTimes times(spec, layout, run, rates);
  const auto stream = static_cast<double>(dtype_size(run.stream_dtype));
  const auto regions = static_cast<int64_t>(layout.regions.size());
  const auto resident = [&](int64_t r) { return r < run.resident_regions; };
  const auto numel = [&](int64_t r) { return static_cast<double>(layout.regions[static_cast<size_t>(r)].numel); };
  const double h2d = rates.pcie_bytes * kH2dShareInTraining, d2h = rates.pcie_bytes * kD2hShareInTraining;
  std::vector<Stage> stages;
  for (const Acquisition& a : order) {
    const Seconds s = times.of(a);
    t.dense_s += p * s.dense;
    t.head_s += p * s.head;
    t.attention_s += p * s.attention;
    t.experts_s += p * s.experts;
    t.recompute_s += p * s.recompute;
    Stage st;
    st.region = a.region;
    st.compute = s.total();
    st.copy = resident(a.region) ? 0.0 : numel(a.region) * stream / h2d;
    // The head's gradient (untied) after its fused backward, each layer's after its backward; a tied head's goes
    // with the embedding's, after the pass.
    const bool head_gradient = a.use == Use::head && !tied;
    if (head_gradient || a.use == Use::backward) {
      st.buffer = head_gradient ? 1 : 2;
      st.gradient_out = resident(a.region) ? 0.0 : numel(a.region) * 4.0 / d2h;
      st.gradient_in = resident(a.region) ? 0.0 : numel(a.region) * 4.0 / h2d;
    }
    if (a.use == Use::forward && a.region == 0) st.buffer = 0;  // the embedding's buffer, begun with the pass
    stages.push_back(st);
  }
  plan_slots(stages, run.weight_slots);
  for (const Stage& st : stages)
    if (st.copy > 0) t.h2d_bytes += p * numel(st.region) * stream;
  for (int64_t r = 0; r < regions; ++r)
    if (!resident(r)) {
      t.d2h_bytes += p * numel(r) * 4.0;
      t.h2d_bytes += (p - 1) * numel(r) * 4.0;  // the host's sum so far, in every pass after the first
    }
  t.compute_s = t.dense_s + t.head_s + t.attention_s + t.experts_s;
  // The resident regions' update on the GPU, before the step's first forward.
  double resident_parameters = 0;
  for (int64_t r = 0; r < std::min(run.resident_regions, regions); ++r) resident_parameters += numel(r);
  t.resident_update_s = resident_parameters * kResidentUpdateBytesPerParameter / kResidentUpdateBytesPerSecond;
  // The host's update of the other regions: the parameters pass in forward order from the step's start, then the
  // moments pass from the last region back (each rank over its slice).
  const double host_rate = rates.parameters_pass_params * static_cast<double>(std::max(run.ranks, 1));
  HostUpdate host{std::vector<double>(static_cast<size_t>(regions), 0.0),
                  std::vector<double>(static_cast<size_t>(regions), 0.0)};
  double done = 0;
  for (int64_t r = 0; r < regions; ++r)
    if (!resident(r)) host.updated_at[static_cast<size_t>(r)] = done += numel(r) / host_rate;
  for (int64_t r = regions - 1; r >= 0; --r)
    if (!resident(r)) host.moments_read_at[static_cast<size_t>(r)] = done += numel(r) / (host_rate * kMomentsPerParametersPass);
  Stage embedding;  // its gradient, after each pass
  embedding.gradient_out = resident(0) ? 0.0 : numel(0) * 4.0 / d2h;
  embedding.gradient_in = resident(0) ? 0.0 : numel(0) * 4.0 / h2d;
  const HostUpdate at_once{std::vector<double>(static_cast<size_t>(regions), 0.0),
                           std::vector<double>(static_cast<size_t>(regions), 0.0)};
  const double unhindered = simulate_step(stages, embedding, passes, t.resident_update_s, at_once);
  t.step_s = simulate_step(stages, embedding, passes, t.resident_update_s, host);
  // What the stages waited for (rounding left out: a step that never waits has no wait).
  const auto waited = [](double seconds) { return seconds > 1e-9 ? seconds : 0.0; };
  t.stream_wait_s = waited(unhindered - t.compute_s - t.resident_update_s);
  t.optimizer_wait_s = waited(t.step_s - unhindered);
  return t;
}

std::string describe_step_time(const StepTime& t) {
  return MT_FORMAT("predicted step {:.3f} s: compute {:.3f} s (dense {:.3f}, head {:.3f}, attention {:.3f}, experts "
                   "{:.3f}; of them recompute {:.3f}), resident update {:.3f} s, waiting {:.3f} s for copies and "
                   "{:.3f} s for the host's optimizer", t.step_s, t.compute_s, t.dense_s, t.head_s,
                   t.attention_s, t.experts_s, t.recompute_s, t.resident_update_s, t.stream_wait_s, t.optimizer_wait_s);
}

}  // namespace mt
