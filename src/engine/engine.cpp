// The layer schedule of one step (see engine.h): embed → layers → head+loss (forward and its backward
// fused), then segments in reverse: recompute from the checkpoint, backward layer by layer, then embed.
#include "engine/engine.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.h"
#include "engine/checkpoint_store.h"
#include "engine/chunked_attention.h"
#include "engine/edge_layers.h"
#include "engine/weight_stream.h"
#include "model/alibi.h"
#include "model/rope.h"

namespace mt {

// A layer that recomputes nothing: its internals over the whole pass, and its input where that is not a
// checkpoint (null where it is).
struct SavedLayer {
  InternalsWidths widths;
  LayerInternals internals;
  void* input = nullptr;
};

// Hidden states and saved layers of one pass, in backend memory, reused while shapes fit (the boundary states at
// k·c, k = 0.., are the checkpoint store's).
struct Engine::Activations {
  Backend& be;
  int64_t tokens = 0, mb_tokens = 0, mb_seqs = 0, seq_len = 0;
  std::vector<void*> segment;       // inputs of the layers of the segment being recomputed
  std::vector<SavedLayer> saved;    // layers recompute_layers.. L-1
  std::vector<void*> saved_buffers;
  int64_t micro_batches = 0;        // of a pass, the most the kept MoE offsets hold
  std::vector<MoeKept> moe_kept;    // per layer: a keeping MoE layer's rows over the pass (null pointers elsewhere)
  std::vector<std::vector<std::vector<int64_t>>> moe_kept_offsets;  // [layer][micro-batch] its experts' offsets
  void* current = nullptr;
  void* next = nullptr;
  void* grad = nullptr;             // ∂L/∂(hidden) flowing backward
  float* row_loss = nullptr;        // [tokens] each row's CE, and the weight of its gradient (SequenceObjective)
  float* row_weight = nullptr;
  std::unique_ptr<DecoderWorkspace> ws;

  explicit Activations(Backend& b) : be(b) {}
  ~Activations() {
    for (void* p : segment) be.free_bytes(p);
    for (void* p : saved_buffers) be.free_bytes(p);
    for (void* p : {current, next, grad, static_cast<void*>(row_loss), static_cast<void*>(row_weight)})
      if (p) be.free_bytes(p);
  }
};

// The batch's index arrays where the backend can read them (uploaded for device backends), and the segments of each
// micro-batch as a virtual batch (backend/segment_batch.h), built the first time a micro-batch asks.
struct Engine::BatchArrays {
  Backend& be;
  const Batch& host;
  mutable std::vector<void*> owned;
  const int32_t *input_ids, *targets, *positions, *seq_lens, *segments, *chunk_segments = nullptr;
  std::vector<int32_t> chunk_ids;  // chunked attention's key groups (chunked_attention.h)
  // (chunk ids or the batch's segments, first sequence, sequences) → that run's virtual batch
  mutable std::map<std::tuple<bool, int64_t, int64_t>, SegmentBatch> segment_batches;
  mutable std::vector<std::unique_ptr<SegmentBatchLayout>> layouts;  // their host vectors (a host backend reads them)

  BatchArrays(Backend& b, const Batch& batch, int64_t attention_chunk) : be(b), host(batch) {
    input_ids = place(batch.input_ids);
    targets = place(batch.targets);
    positions = place(batch.positions);
    seq_lens = place(batch.seq_lens);
    segments = batch.segments.empty() ? nullptr : place(batch.segments);
    if (attention_chunk > 0) chunk_ids = chunk_segment_ids(batch.positions, batch.seq_len, attention_chunk);
    if (!chunk_ids.empty()) chunk_segments = place(chunk_ids);
  }
  ~BatchArrays() {
    for (void* p : owned) be.free_bytes(p);
  }
  // Host vectors stay where they are on a host backend: v must outlive this.
  const int32_t* place(const std::vector<int32_t>& v) const {
    if (be.host_memory()) return v.data();
    const auto bytes = static_cast<int64_t>(v.size() * sizeof(int32_t));
    void* p = be.alloc_bytes(bytes);
    be.upload(p, v.data(), bytes);
    owned.push_back(p);
    return static_cast<const int32_t*>(p);
  }
  // Sequences [first_seq, first_seq + seqs) of the chunk ids (chunks) or the batch's segments as a virtual batch;
  // null where those ids are absent.
  const SegmentBatch* segment_batch(bool chunks, int64_t first_seq, int64_t seqs) const {
    const std::vector<int32_t>& ids = chunks ? chunk_ids : host.segments;
    if (ids.empty()) return nullptr;
    const auto key = std::make_tuple(chunks, first_seq, seqs);
    if (auto it = segment_batches.find(key); it != segment_batches.end()) return &it->second;
    const int64_t S = host.seq_len;
    SegmentBatchLayout l = segment_batch_layout(ids.data() + first_seq * S, host.seq_lens.data() + first_seq, seqs, S);
    layouts.push_back(std::make_unique<SegmentBatchLayout>(std::move(l)));
    const SegmentBatchLayout& kept = *layouts.back();
    SegmentBatch& sb = segment_batches[key];
    sb.groups = kept.groups;
    sb.starts = kept.starts.empty() ? nullptr : place(kept.starts);
    sb.lens = kept.lens.empty() ? nullptr : place(kept.lens);
    return &sb;
  }
};

std::vector<int64_t> pass_region_order(int64_t L, int64_t c, bool tied, int64_t recompute_layers) {
  std::vector<int64_t> order;
  for (int64_t r = 0; r <= L + 1; ++r) order.push_back(r);
  if (tied) order.push_back(0);
  for (int64_t seg_start = (L - 1) / c * c; seg_start >= 0; seg_start -= c) {
    const int64_t seg_end = std::min(seg_start + c, L);
    for (int64_t i = seg_start; i + 1 < std::min(seg_end, recompute_layers); ++i) order.push_back(i + 1);
    for (int64_t i = seg_end - 1; i >= seg_start; --i) order.push_back(i + 1);
  }
  return order;
}

void set_moe_aux_options(const ModelSpec& spec, double run_coef, EngineOptions& o) {
  const bool moe = std::any_of(spec.layers.begin(), spec.layers.end(), [](const LayerSpec& l) { return l.moe.active(); });
  const bool sigmoid = std::any_of(spec.layers.begin(), spec.layers.end(),
                                   [](const LayerSpec& l) { return l.moe.router == RouterKind::sigmoid_group; });
  MT_REQUIRE(!(moe && sigmoid && run_coef >= 0.0),
             "training.moe_aux_loss_coef: {} routes by sigmoid scores and has no router load-balancing loss in "
             "transformers; leave it auto", spec.architecture);
  o.moe_aux_loss = moe && !sigmoid && (spec.output_router_logits || run_coef >= 0.0);
  o.moe_aux_coef = run_coef >= 0.0 ? run_coef : spec.router_aux_loss_coef;
}

Engine::Engine(Backend& backend, const ModelSpec& spec, HostStore& store, const EngineOptions& options,
               EngineTransfers transfers)
    : backend_(backend), spec_(spec), store_(store), options_(options), weights_(std::move(transfers.weights)),
      grads_(std::move(transfers.grads)), counters_(std::move(transfers.counters)),
      checkpoints_(std::move(transfers.checkpoints)) {
  if (!weights_) weights_ = std::make_unique<BasicWeightStream>(backend_, store_, 2);
  if (!checkpoints_) checkpoints_ = make_checkpoint_store(backend_, options_.checkpoints);
  if (!grads_) grads_ = std::make_unique<BasicGradientSink>(backend_, store_);
  MT_ASSERT(options_.checkpoint_interval >= 1 && options_.passes >= 1 && options_.max_positions > 0 &&
            options_.recompute_layers >= 0 && options_.moe_keep_layers >= 0);
  options_.recompute_layers = std::min(options_.recompute_layers, spec_.num_layers);
  ctx_.backend = &backend_;
  ctx_.spec = &spec_;
  ctx_.layout = &store_.layout();
  ctx_.expert_occupancy = &expert_occupancy_;
  ctx_.rope.resize(spec_.rope_tables.size());
  rope_tables_.resize(spec_.rope_tables.size());
  for (size_t t = 0; t < spec_.rope_tables.size(); ++t) {
    const int64_t n = options_.max_positions * (spec_.rope_tables[t].rot_dim() / 2);
    RopeBuffers& b = rope_tables_[t];
    b.cos = backend_.alloc_reals(n);
    b.sin = backend_.alloc_reals(n);
    ctx_.rope[t] = {b.cos, b.sin, spec_.rope_tables[t].rot_dim(), spec_.rope_tables[t].interleaved};
    upload_rope_table(t, 0);
  }
  // ALiBi slopes, one buffer per head count.
  for (const LayerSpec& l : spec_.layers) {
    if (!l.attention.alibi) {
      ctx_.alibi_slopes.push_back(nullptr);
      continue;
    }
    float*& slopes = alibi_slopes_[l.attention.num_heads];
    if (!slopes) {
      const std::vector<float> host = alibi_slopes(l.attention.num_heads);
      slopes = backend_.alloc_reals(l.attention.num_heads);
      backend_.upload(slopes, host.data(), l.attention.num_heads * 4);
    }
    ctx_.alibi_slopes.push_back(slopes);
  }
  // Router-loss statistics: one row of E per MoE layer.
  for (const LayerSpec& l : spec_.layers) {
    moe_aux_.slot.push_back(l.moe.active() ? moe_layers_ : -1);
    if (!l.moe.active()) continue;
    MT_ASSERT(moe_layers_ == 0 || (l.moe.num_experts == moe_aux_.experts && l.moe.top_k == moe_top_k_),
              "MoE layers with different expert counts");
    moe_aux_.experts = l.moe.num_experts;
    moe_top_k_ = l.moe.top_k;
    ++moe_layers_;
  }
  if (moe_layers_ > 0) {
    moe_aux_.counts = static_cast<int32_t*>(backend_.alloc_bytes(moe_layers_ * moe_aux_.experts * 4));
    moe_aux_.prob_sums = backend_.alloc_reals(moe_layers_ * moe_aux_.experts);
    moe_aux_grad_ = backend_.alloc_reals(moe_aux_.experts);
    ctx_.moe_aux = &moe_aux_;
  }
}

double Engine::finish_router_loss(double aux_weight) {
  const int64_t E = moe_aux_.experts, n = moe_layers_ * E;
  std::vector<int32_t> counts(static_cast<size_t>(n));
  std::vector<float> sums(static_cast<size_t>(n));
  backend_.download(counts.data(), moe_aux_.counts, n * 4);
  backend_.download(sums.data(), moe_aux_.prob_sums, n * 4);
  // transformers' load_balancing_loss_func: over every MoE layer's valid tokens (rows),
  // E · Σ_e (routed rows to e / rows) · (Σ probs of e / rows); its gradient in probs[t, e] is E · count_e / rows².
  std::vector<double> count(static_cast<size_t>(E), 0.0), prob(static_cast<size_t>(E), 0.0);
  double routed = 0;
  for (int64_t l = 0; l < moe_layers_; ++l)
    for (int64_t e = 0; e < E; ++e) {
      count[static_cast<size_t>(e)] += counts[static_cast<size_t>(l * E + e)];
      prob[static_cast<size_t>(e)] += sums[static_cast<size_t>(l * E + e)];
      routed += counts[static_cast<size_t>(l * E + e)];
    }
  const double rows = routed / static_cast<double>(moe_top_k_);
  double aux = 0;
  std::vector<float> grad(static_cast<size_t>(E));
  const double weight = aux_weight * options_.moe_aux_coef / static_cast<double>(options_.passes);
  for (int64_t e = 0; e < E; ++e) {
    const double c = count[static_cast<size_t>(e)];
    aux += rows > 0 ? (c / rows) * (prob[static_cast<size_t>(e)] / rows) : 0.0;
    grad[static_cast<size_t>(e)] = rows > 0 ? static_cast<float>(weight * static_cast<double>(E) * c / (rows * rows)) : 0.f;
  }
  backend_.upload(moe_aux_grad_, grad.data(), E * 4);
  moe_aux_.grad = weight > 0 ? moe_aux_grad_ : nullptr;
  return aux * static_cast<double>(E);
}

Engine::~Engine() {
  acts_.reset();
  for (const RopeBuffers& b : rope_tables_) {
    backend_.free_bytes(b.cos);
    backend_.free_bytes(b.sin);
  }
  for (const auto& [heads, slopes] : alibi_slopes_) backend_.free_bytes(slopes);
  for (void* p : {static_cast<void*>(moe_aux_.counts), static_cast<void*>(moe_aux_.prob_sums),
                  static_cast<void*>(moe_aux_grad_)})
    if (p) backend_.free_bytes(p);
}

void Engine::upload_rope_table(size_t t, int64_t longest) {
  const RopeSpec& rope = spec_.rope_tables[t];
  RopeBuffers& b = rope_tables_[t];
  const int64_t key = rope_table_key(rope, longest);
  if (b.uploaded && b.key == key) return;
  const RopeTable table = make_rope_table(rope, options_.max_positions, longest);
  const auto n = static_cast<int64_t>(table.cos.size());
  backend_.upload(b.cos, table.cos.data(), n * 4);
  backend_.upload(b.sin, table.sin.data(), n * 4);
  b.key = key;
  b.uploaded = true;
}

PipelineStats Engine::take_transfer_stats() {
  PipelineStats s = counters_ ? counters_->take() : PipelineStats{};
  s.h2d_bytes = weights_->bytes_moved() - std::exchange(h2d_reported_, weights_->bytes_moved());
  s.d2h_bytes = grads_->bytes_moved() - std::exchange(d2h_reported_, grads_->bytes_moved());
  return s;
}

int64_t Engine::micro_batch_size_for(int64_t pass_seqs, int64_t seq_len) const {
  if (options_.micro_batch_size > 0) return std::min(options_.micro_batch_size, pass_seqs);
  return std::clamp<int64_t>(4096 / std::max<int64_t>(seq_len, 1), 1, pass_seqs);
}

Engine::Activations& Engine::activations_for(int64_t pass_tokens, int64_t mb_seqs, int64_t seq_len) {
  const int64_t mb_tokens = mb_seqs * seq_len;
  const int64_t micro_batches = (pass_tokens / seq_len + mb_seqs - 1) / mb_seqs;
  if (acts_ && acts_->tokens >= pass_tokens && acts_->mb_tokens >= mb_tokens && acts_->mb_seqs >= mb_seqs &&
      acts_->seq_len >= seq_len && acts_->micro_batches >= micro_batches)
    return *acts_;
  acts_.reset();
  acts_ = std::make_unique<Activations>(backend_);
  Activations& a = *acts_;
  a.tokens = pass_tokens;
  a.mb_tokens = mb_tokens;
  a.mb_seqs = mb_seqs;
  a.seq_len = seq_len;
  a.micro_batches = micro_batches;
  const int64_t L = spec_.num_layers, c = options_.checkpoint_interval, H = spec_.hidden_size;
  const int64_t n = pass_tokens * H;
  checkpoints_->reserve((L + c - 1) / c, n * static_cast<int64_t>(dtype_size(backend_.dtype())));
  for (int64_t k = 1; k < std::min(c, L); ++k) a.segment.push_back(backend_.alloc(n));
  a.current = backend_.alloc(n);
  a.next = backend_.alloc(n);
  a.grad = backend_.alloc(n);
  a.row_loss = backend_.alloc_reals(pass_tokens);
  a.row_weight = backend_.alloc_reals(pass_tokens);
  // seq_len bounds every micro-batch's padded length, so lse fits max mb_seqs × heads × seq_len.
  a.ws = std::make_unique<DecoderWorkspace>(backend_, spec_, mb_tokens, mb_seqs, seq_len, options_.token_chunk);
  for (int64_t i = options_.recompute_layers; i < L; ++i) {
    SavedLayer s;
    s.widths = saved_layer_widths(spec_, i);
    s.internals = allocate_internals(backend_, s.widths, pass_tokens / seq_len, seq_len, a.saved_buffers);
    if (i % c != 0) {
      s.input = backend_.alloc(n);
      a.saved_buffers.push_back(s.input);
    }
    a.saved.push_back(s);
  }
  a.moe_kept.resize(static_cast<size_t>(L));
  a.moe_kept_offsets.resize(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) {
    if (!moe_layer_keeps(spec_, i, options_.moe_keep_layers)) continue;
    a.moe_kept[static_cast<size_t>(i)] =
        allocate_moe_kept(backend_, spec_, i, pass_tokens, micro_batches, a.saved_buffers);
    a.moe_kept_offsets[static_cast<size_t>(i)].resize(static_cast<size_t>(micro_batches));
  }
  return a;
}

// Length-dependent RoPE (longrope, dynamic) sees the batch's longest position, as transformers does.
void Engine::upload_batch_rope(const Batch& batch) {
  const int32_t longest = batch.positions.empty() ? 0 : *std::max_element(batch.positions.begin(), batch.positions.end()) + 1;
  for (size_t t = 0; t < rope_tables_.size(); ++t) upload_rope_table(t, longest);
}

std::vector<MicroBatch> Engine::micro_batches(const BatchArrays& arrays, int64_t first_seq, int64_t seqs,
                                              int64_t mb_seqs, int64_t S) const {
  std::vector<MicroBatch> mbs;
  for (int64_t s = first_seq; s < first_seq + seqs; s += mb_seqs) {
    MicroBatch mb;
    mb.first_seq = s;
    mb.seqs = std::min(mb_seqs, first_seq + seqs - s);
    mb.seq_len = S;
    const auto t0 = static_cast<size_t>(s * S);
    mb.input_ids = arrays.input_ids + t0;
    mb.targets = arrays.targets + t0;
    mb.positions = arrays.positions + t0;
    mb.seq_lens = arrays.seq_lens + s;
    const auto lens = arrays.host.seq_lens.begin() + s;
    mb.all_valid = std::all_of(lens, lens + mb.seqs, [S](int32_t len) { return len == S; });
    mb.segments = arrays.segments ? arrays.segments + t0 : nullptr;
    mb.chunk_segments = arrays.chunk_segments ? arrays.chunk_segments + t0 : nullptr;
    mb.segment_batch = arrays.segment_batch(false, s, mb.seqs);
    mb.chunk_segment_batch = arrays.segment_batch(true, s, mb.seqs);
    mbs.push_back(mb);
  }
  return mbs;
}

StepLoss Engine::forward_backward(const Batch& batch, int64_t loss_tokens, double aux_weight) {
  return train_passes(batch, loss_tokens, aux_weight, nullptr);
}

StepLoss Engine::forward_backward(const Batch& batch, SequenceObjective& objective) {
  const int64_t group = objective.group_size();
  MT_REQUIRE(group >= 1 && batch.num_seqs % group == 0, "batch of {} sequences is not made of groups of {}",
             batch.num_seqs, group);
  return train_passes(batch, 0, 1.0, &objective);
}

StepLoss Engine::train_passes(const Batch& batch, int64_t loss_tokens, double aux_weight,
                              SequenceObjective* objective) {
  if (loss_tokens == 0) loss_tokens = batch.num_target_tokens;
  MT_REQUIRE(loss_tokens > 0, "batch has no target tokens (every label is -100)");
  MT_REQUIRE(batch.seq_len <= options_.max_positions,
             "sequence length {} exceeds the {} positions of the RoPE table", batch.seq_len, options_.max_positions);
  const int64_t group = objective ? objective->group_size() : 1, groups = batch.num_seqs / group;
  MT_REQUIRE(groups >= options_.passes,
             "batch of {} sequences does not split into {} gradient accumulation passes", batch.num_seqs,
             options_.passes);
  upload_batch_rope(batch);
  StepLoss loss;
  loss.target_tokens = batch.num_target_tokens;
  if (options_.moe_aux_loss) loss.aux_coef = options_.moe_aux_coef;
  // A SequenceObjective's weights carry the loss's normalisation: the head's gradient is theirs alone.
  const float grad_scale = objective ? 1.0f : 1.0f / static_cast<float>(loss_tokens);
  const BatchArrays arrays(backend_, batch, attention_chunk(spec_));
  // Pass p takes the groups [p·n/passes, (p+1)·n/passes) (n groups): equal runs when passes divides n.
  for (int64_t p = 0; p < options_.passes; ++p) {
    const int64_t first = p * groups / options_.passes * group, end = (p + 1) * groups / options_.passes * group;
    run_pass(batch, arrays, first, end - first, p == 0, grad_scale, aux_weight, objective, loss);
  }
  grads_->wait();
  sum_of_squares_ = grads_->sum_of_squares();
  backend_.synchronize();
  return loss;
}

void Engine::run_pass(const Batch& batch, const BatchArrays& arrays, int64_t first_seq, int64_t seqs,
                      bool first_pass, float grad_scale, double aux_weight, SequenceObjective* objective,
                      StepLoss& loss) {
  const int64_t S = batch.seq_len, H = spec_.hidden_size, L = spec_.num_layers;
  const int64_t c = options_.checkpoint_interval;
  const int64_t mb_seqs = micro_batch_size_for(seqs, S);
  Activations& a = activations_for(seqs * S, mb_seqs, S);

  const std::vector<MicroBatch> mbs = micro_batches(arrays, first_seq, seqs, mb_seqs, S);
  // A micro-batch's hidden rows inside a pass-sized buffer.
  const auto esize = static_cast<int64_t>(dtype_size(backend_.dtype()));
  auto rows = [&](void* buf, const MicroBatch& mb) {
    return static_cast<void*>(static_cast<char*>(buf) + (mb.first_seq - first_seq) * S * H * esize);
  };
  const int64_t pass_bytes = seqs * S * H * esize;
  const int64_t embed_region = 0, head_region = L + 1, R = options_.recompute_layers;
  weights_->plan(pass_region_order(L, c, store_.layout().head.lm_head < 0, R));
  // A saved layer's internals for one micro-batch.
  auto saved = [&](int64_t i, const MicroBatch& mb) -> std::optional<LayerInternals> {
    if (i < R) return std::nullopt;
    const SavedLayer& layer = a.saved[static_cast<size_t>(i - R)];
    return internals_rows(layer.internals, layer.widths, esize, mb.first_seq - first_seq, S);
  };
  auto saved_input = [&](int64_t i) { return i < R ? nullptr : a.saved[static_cast<size_t>(i - R)].input; };
  // A keeping MoE layer's kept rows for one micro-batch; `filled` after the pass's first forward of the layer.
  auto moe_kept = [&](int64_t i, const MicroBatch& mb, bool filled) -> std::optional<MoeKept> {
    if (!moe_layer_keeps(spec_, i, options_.moe_keep_layers)) return std::nullopt;
    const int64_t m = (mb.first_seq - first_seq) / mb_seqs;
    return moe_kept_rows(a.moe_kept[static_cast<size_t>(i)], spec_, i, esize, (mb.first_seq - first_seq) * S, m,
                         &a.moe_kept_offsets[static_cast<size_t>(i)][static_cast<size_t>(m)], filled);
  };

  // Forward: embedding, then every layer, keeping the boundary states at multiples of c.
  float* table_grad = grads_->begin(embed_region);
  {
    const void* table = weights_->acquire(embed_region);
    void* first = checkpoints_->begin_write(0, pass_bytes);
    for (const auto& mb : mbs) embedding_forward(ctx_, table, rows(first, mb), mb);
    weights_->release(embed_region);
    checkpoints_->end_write(0);
    backend_.copy_bytes(a.current, first, pass_bytes);
  }
  const bool router_loss = options_.moe_aux_loss && moe_layers_ > 0;
  if (router_loss) {
    backend_.zero_bytes(moe_aux_.counts, moe_layers_ * moe_aux_.experts * 4);
    backend_.zero_bytes(moe_aux_.prob_sums, moe_layers_ * moe_aux_.experts * 4);
  }
  moe_aux_.collect = router_loss;
  moe_aux_.grad = nullptr;
  for (int64_t i = 0; i < L; ++i) {
    if (void* input = saved_input(i)) backend_.copy_bytes(input, a.current, pass_bytes);
    const void* w = weights_->acquire(i + 1);
    for (const auto& mb : mbs) {
      const std::optional<LayerInternals> n = saved(i, mb);
      const std::optional<MoeKept> kept = moe_kept(i, mb, false);
      decoder_layer_forward(ctx_, i, w, rows(a.current, mb), rows(a.next, mb), mb, *a.ws, n ? &*n : nullptr,
                            kept ? &*kept : nullptr);
    }
    weights_->release(i + 1);
    std::swap(a.current, a.next);
    if ((i + 1) % c == 0 && i + 1 < L) {
      const int64_t k = (i + 1) / c;
      backend_.copy_bytes(checkpoints_->begin_write(k, pass_bytes), a.current, pass_bytes);
      checkpoints_->end_write(k);
    }
  }
  moe_aux_.collect = false;  // the forwards that backward recomputes add nothing
  if (router_loss) loss.aux_loss += finish_router_loss(aux_weight) / static_cast<double>(options_.passes);

  // Head: loss and its gradient in the same pass over the weights.
  {
    const void* head = weights_->acquire(head_region);
    const void* table = store_.layout().head.lm_head < 0 ? weights_->acquire(embed_region) : nullptr;
    float* head_grad = grads_->begin(head_region);
    head_prepare(ctx_, head, *a.ws);
    const float* row_weight = nullptr;
    if (objective) {  // the sequences' log-probabilities first, then each row's weight: −∂loss/∂logp of its sequence
      for (const auto& mb : mbs)
        head_loss_only(ctx_, head, table, rows(a.current, mb), mb, *a.ws, a.row_loss + (mb.first_seq - first_seq) * S);
      const std::vector<double> logps = pass_sequence_logps(seqs, S);
      std::vector<double> d_logp(logps.size(), 0.0);
      objective->weigh(first_seq, logps, d_logp);
      std::vector<float> weights(static_cast<size_t>(seqs * S));
      for (int64_t i = 0; i < seqs; ++i)
        std::fill_n(weights.begin() + i * S, S, static_cast<float>(-d_logp[static_cast<size_t>(i)]));
      backend_.upload(a.row_weight, weights.data(), seqs * S * 4);
      row_weight = a.row_weight;
    }
    for (const auto& mb : mbs)
      loss.loss_sum += head_forward_backward(ctx_, head, table, rows(a.current, mb), rows(a.grad, mb), head_grad,
                                             table_grad, mb, grad_scale, *a.ws,
                                             row_weight ? row_weight + (mb.first_seq - first_seq) * S : nullptr);
    head_finish(ctx_, head, head_grad, *a.ws);
    weights_->release(head_region);
    if (table) weights_->release(embed_region);
    grads_->finish(head_region, first_pass);
  }

  // Backward, segment by segment from the last: recompute the inputs of the segment's layers that saved
  // nothing, then go back through it.
  for (int64_t seg_start = (L - 1) / c * c; seg_start >= 0; seg_start -= c) {
    const int64_t seg_end = std::min(seg_start + c, L);
    void* checkpoint = checkpoints_->acquire(seg_start / c);
    auto layer_input = [&](int64_t i) {
      if (i == seg_start) return checkpoint;
      if (void* input = saved_input(i)) return input;
      return a.segment[i - seg_start - 1];
    };
    for (int64_t i = seg_start; i + 1 < std::min(seg_end, R); ++i) {
      const void* w = weights_->acquire(i + 1);
      for (const auto& mb : mbs) {
        const std::optional<MoeKept> kept = moe_kept(i, mb, true);
        decoder_layer_forward(ctx_, i, w, rows(layer_input(i), mb), rows(layer_input(i + 1), mb), mb, *a.ws, nullptr,
                              kept ? &*kept : nullptr);
      }
      weights_->release(i + 1);
    }
    for (int64_t i = seg_end - 1; i >= seg_start; --i) {
      const void* w = weights_->acquire(i + 1);
      float* dw = grads_->begin(i + 1);
      for (const auto& mb : mbs) {
        const std::optional<LayerInternals> n = saved(i, mb);
        const std::optional<MoeKept> kept = moe_kept(i, mb, true);
        decoder_layer_backward(ctx_, i, w, rows(layer_input(i), mb), rows(a.grad, mb), rows(a.grad, mb), dw, mb,
                               *a.ws, n ? &*n : nullptr, kept ? &*kept : nullptr);
      }
      weights_->release(i + 1);
      grads_->finish(i + 1, first_pass);
    }
    checkpoints_->release(seg_start / c);
  }

  for (const auto& mb : mbs)
    embedding_backward(ctx_, table_grad, rows(a.grad, mb), mb, batch.input_ids.data() + mb.first_seq * S);
  grads_->finish(embed_region, first_pass);
}

StepLoss Engine::forward_loss(const Batch& batch) {
  MT_REQUIRE(batch.seq_len <= options_.max_positions,
             "sequence length {} exceeds the {} positions of the RoPE table", batch.seq_len, options_.max_positions);
  upload_batch_rope(batch);
  StepLoss loss;
  loss.target_tokens = batch.num_target_tokens;
  const BatchArrays arrays(backend_, batch, attention_chunk(spec_));
  // The passes of forward_backward where the batch splits into them, so that activations fit the same plan.
  const int64_t passes = std::min(options_.passes, batch.num_seqs);
  for (int64_t p = 0; p < passes; ++p) {
    const int64_t first = p * batch.num_seqs / passes, end = (p + 1) * batch.num_seqs / passes;
    run_forward_pass(arrays, first, end - first, batch.seq_len, loss);
  }
  backend_.synchronize();
  return loss;
}

std::vector<double> Engine::sequence_logps(const Batch& batch) {
  MT_REQUIRE(batch.seq_len <= options_.max_positions,
             "sequence length {} exceeds the {} positions of the RoPE table", batch.seq_len, options_.max_positions);
  upload_batch_rope(batch);
  StepLoss loss;
  std::vector<double> logps;
  const BatchArrays arrays(backend_, batch, attention_chunk(spec_));
  const int64_t passes = std::min(options_.passes, batch.num_seqs);
  for (int64_t p = 0; p < passes; ++p) {
    const int64_t first = p * batch.num_seqs / passes, end = (p + 1) * batch.num_seqs / passes;
    run_forward_pass(arrays, first, end - first, batch.seq_len, loss, &logps);
  }
  backend_.synchronize();
  return logps;
}

std::vector<double> Engine::pass_sequence_logps(int64_t seqs, int64_t S) {
  std::vector<float> row_loss(static_cast<size_t>(seqs * S));
  backend_.download(row_loss.data(), acts_->row_loss, seqs * S * 4);
  std::vector<double> logps(static_cast<size_t>(seqs), 0.0);
  for (int64_t i = 0; i < seqs; ++i)
    for (int64_t t = 0; t < S; ++t) logps[static_cast<size_t>(i)] -= row_loss[static_cast<size_t>(i * S + t)];
  return logps;
}

// Embedding, every layer and the head's loss over one pass; the weights stream in forward order only. With `logps`,
// each sequence's summed log-probability is appended to it.
void Engine::run_forward_pass(const BatchArrays& arrays, int64_t first_seq, int64_t seqs, int64_t S, StepLoss& loss,
                              std::vector<double>* logps) {
  const int64_t H = spec_.hidden_size, L = spec_.num_layers;
  const int64_t mb_seqs = micro_batch_size_for(seqs, S);
  Activations& a = activations_for(seqs * S, mb_seqs, S);
  const std::vector<MicroBatch> mbs = micro_batches(arrays, first_seq, seqs, mb_seqs, S);
  const auto esize = static_cast<int64_t>(dtype_size(backend_.dtype()));
  auto rows = [&](void* buf, const MicroBatch& mb) {
    return static_cast<void*>(static_cast<char*>(buf) + (mb.first_seq - first_seq) * S * H * esize);
  };
  const bool tied = store_.layout().head.lm_head < 0;
  std::vector<int64_t> order;
  for (int64_t r = 0; r <= L + 1; ++r) order.push_back(r);
  if (tied) order.push_back(0);
  weights_->plan(order);
  {
    const void* table = weights_->acquire(0);
    for (const auto& mb : mbs) embedding_forward(ctx_, table, rows(a.current, mb), mb);
    weights_->release(0);
  }
  for (int64_t i = 0; i < L; ++i) {
    const void* w = weights_->acquire(i + 1);
    for (const auto& mb : mbs) decoder_layer_forward(ctx_, i, w, rows(a.current, mb), rows(a.next, mb), mb, *a.ws);
    weights_->release(i + 1);
    std::swap(a.current, a.next);
  }
  const void* head = weights_->acquire(L + 1);
  const void* table = tied ? weights_->acquire(0) : nullptr;
  head_prepare(ctx_, head, *a.ws);
  for (const auto& mb : mbs)
    loss.loss_sum += head_loss_only(ctx_, head, table, rows(a.current, mb), mb, *a.ws,
                                    logps ? a.row_loss + (mb.first_seq - first_seq) * S : nullptr);
  weights_->release(L + 1);
  if (table) weights_->release(0);
  if (logps) {
    const std::vector<double> pass = pass_sequence_logps(seqs, S);
    logps->insert(logps->end(), pass.begin(), pass.end());
  }
}

}  // namespace mt
