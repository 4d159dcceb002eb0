// Engine: one training step's forward and backward over the global batch, layer by layer.
// The whole pass batch goes through each layer while its weights are bound; micro-batches are the inner
// loop. The first recompute_layers layers keep hidden states only at every checkpoint_interval-th layer
// boundary and recompute each segment (and each layer's internals) from its checkpoint during backward; the
// layers after them save their internals in forward and recompute none (bitwise the same gradients). Apart from
// that, the last moe_keep_layers MoE layers keep their expert activations from forward to backward (moe_block.h
// MoeKept) instead of recomputing the routing and the expert GEMMs (bitwise the same gradients too).
// gradient_accumulation_steps splits the batch into passes.
// Invariant: after forward_backward the store's grad regions hold ∂(mean CE over all targets of the batch)/∂θ, or
// ∂(the loss)/∂θ of the SequenceObjective given.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "data/batch.h"
#include "engine/checkpoint_placement.h"
#include "engine/decoder_layer.h"
#include "engine/moe_aux.h"
#include "model/model_spec.h"
#include "store/host_store.h"
#include "transfer/engine_transfers.h"

namespace mt {

struct EngineOptions {
  int64_t checkpoint_interval = 1;
  int64_t micro_batch_size = 0;   // sequences per micro-batch; 0 = auto (about 4096 tokens)
  int64_t passes = 1;             // gradient_accumulation_steps
  int64_t max_positions = 0;      // RoPE table length; sequences must not exceed it
  int64_t recompute_layers = std::numeric_limits<int64_t>::max();  // the first ones recompute; above L: all
  int64_t moe_keep_layers = 0;    // the last ones of the MoE layers keep their expert activations; above: all
  // Mixture-of-experts models: the router load-balancing loss (moe_aux.h), added to the loss × moe_aux_coef.
  bool moe_aux_loss = false;
  double moe_aux_coef = 0.0;
  int64_t token_chunk = 0;        // tokens per feed-forward chunk; 0 = kDefaultTokenChunk (layer_internals.h)
  // Where the activation checkpoints live (checkpoint_store.h): backend memory, or host slots through two
  // staging buffers.
  CheckpointPlacement checkpoints = CheckpointPlacement::gpu;
};

// Whether a run computes the router loss, and its coefficient: config.json's output_router_logits with its
// router_aux_loss_coef, or the run config's training.moe_aux_loss_coef (>= 0: on, with that coefficient).
void set_moe_aux_options(const ModelSpec& spec, double run_coef, EngineOptions& options);

struct StepLoss {
  double loss_sum = 0.0;          // Σ CE over targets
  int64_t target_tokens = 0;
  // The router load-balancing loss (mean over the passes, as transformers computes it per forward) and its
  // coefficient; 0 without one.
  double aux_loss = 0.0;
  double aux_coef = 0.0;
  double lm_mean() const { return target_tokens ? loss_sum / static_cast<double>(target_tokens) : 0.0; }
  // transformers' outputs.loss: the LM loss plus coef × aux loss.
  double mean() const { return lm_mean() + aux_coef * aux_loss; }
};

// The acquisition order of one pass: embedding, layers, head (+ embedding when tied), then per segment from
// the last: recompute the inputs of its layers below recompute_layers, backward in reverse (the embedding's
// backward needs no weights). Regions: 0 embedding, 1..L layers, L+1 head.
std::vector<int64_t> pass_region_order(int64_t num_layers, int64_t checkpoint_interval, bool tied,
                                       int64_t recompute_layers = std::numeric_limits<int64_t>::max());

// A loss over whole sequences (preference training): the head first gives each sequence's summed log-probability of
// its targets (−Σ of its tokens' cross-entropy, fp64 in token order); weigh() turns a pass's log-probabilities into
// ∂loss/∂logp per sequence, which the head's backward applies to each of the sequence's target tokens.
class SequenceObjective {
 public:
  virtual ~SequenceObjective() = default;
  // Consecutive sequences a pass boundary never splits (a pair's chosen and rejected: 2).
  virtual int64_t group_size() const = 0;
  // logps[i] is sequence first_seq + i's; d_logp (sized like logps) gets ∂loss/∂logps[i].
  virtual void weigh(int64_t first_seq, const std::vector<double>& logps, std::vector<double>& d_logp) = 0;
};

class Engine {
 public:
  Engine(Backend& backend, const ModelSpec& spec, HostStore& store, const EngineOptions& options,
         EngineTransfers transfers = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Gradients are of Σ CE / loss_tokens (0: the batch's own target tokens; data parallelism passes the global
  // batch's, so that the ranks' gradients sum to the global mean's) plus aux_weight × coef × the router loss of
  // this batch (data parallelism: 1 / ranks, each rank's loss over its share, averaged as DDP averages).
  StepLoss forward_backward(const Batch& batch, int64_t loss_tokens = 0, double aux_weight = 1.0);
  // The same with gradients of `objective`'s loss instead of the mean CE (StepLoss still sums the CE); passes split
  // the batch at multiples of objective.group_size().
  StepLoss forward_backward(const Batch& batch, SequenceObjective& objective);
  // Forward only: each sequence's summed log-probability of its targets (the reference pass), in the passes and
  // micro-batches of forward_loss; no gradient.
  std::vector<double> sequence_logps(const Batch& batch);
  // Forward only (evaluation): Σ CE of `batch` under the weights the store holds now, in the same passes and
  // micro-batches as forward_backward; no gradient is computed, no gradient region is touched or returned.
  StepLoss forward_loss(const Batch& batch);
  // Σ g² of the gradients the last forward_backward delivered, where the gradient sink computed it on the
  // backend (of the final gradients: after the last pass's sums); else empty (the optimizer computes the norm on
  // the host).
  std::optional<double> gradient_sum_of_squares() const { return sum_of_squares_; }
  // Transfer figures since the last call (bytes from the streams; times where the pipeline measures them).
  PipelineStats take_transfer_stats();
  // Bytes the activation checkpoints have crossed between backend and host memory so far (host placement).
  int64_t checkpoint_bytes_moved() const { return checkpoints_->bytes_moved(); }
  // How many experts the MoE forwards since the last call gave rows (moe_aux.h); all zero without MoE layers.
  ExpertOccupancy take_expert_occupancy() { return std::exchange(expert_occupancy_, ExpertOccupancy{}); }
  int64_t micro_batch_size_for(int64_t pass_seqs, int64_t seq_len) const;

 private:
  struct Activations;
  struct BatchArrays;
  StepLoss train_passes(const Batch& batch, int64_t loss_tokens, double aux_weight, SequenceObjective* objective);
  void run_pass(const Batch& batch, const BatchArrays& arrays, int64_t first_seq, int64_t seqs, bool first_pass,
                float grad_scale, double aux_weight, SequenceObjective* objective, StepLoss& loss);
  // The pass's rows' cross-entropy (Activations::row_loss) summed per sequence and negated.
  std::vector<double> pass_sequence_logps(int64_t seqs, int64_t seq_len);
  // After a pass's forward: the router loss from the statistics, and its gradient for the backward.
  double finish_router_loss(double aux_weight);
  std::vector<MicroBatch> micro_batches(const BatchArrays& arrays, int64_t first_seq, int64_t seqs, int64_t mb_seqs,
                                        int64_t seq_len) const;
  void run_forward_pass(const BatchArrays& arrays, int64_t first_seq, int64_t seqs, int64_t seq_len, StepLoss& loss,
                        std::vector<double>* logps = nullptr);
  void upload_batch_rope(const Batch& batch);
  Activations& activations_for(int64_t pass_tokens, int64_t mb_seqs, int64_t seq_len);

  // The table of spec.rope_tables[t] for a batch whose longest position + 1 is `longest` (rebuilt where it changes).
  void upload_rope_table(size_t t, int64_t longest);

  struct RopeBuffers {
    float *cos = nullptr, *sin = nullptr;
    int64_t key = 0;
    bool uploaded = false;
  };
  Backend& backend_;
  const ModelSpec& spec_;
  HostStore& store_;
  EngineOptions options_;
  LayerContext ctx_;
  std::vector<RopeBuffers> rope_tables_;
  std::map<int64_t, float*> alibi_slopes_;  // by head count, backend memory
  MoeAuxState moe_aux_;                     // buffers in backend memory (MoE models only)
  ExpertOccupancy expert_occupancy_;
  int64_t moe_layers_ = 0, moe_top_k_ = 0;
  float* moe_aux_grad_ = nullptr;
  std::unique_ptr<WeightStream> weights_;
  std::unique_ptr<GradientSink> grads_;
  std::shared_ptr<PipelineCounters> counters_;
  std::unique_ptr<CheckpointStore> checkpoints_;
  int64_t h2d_reported_ = 0, d2h_reported_ = 0;
  std::optional<double> sum_of_squares_;
  std::unique_ptr<Activations> acts_;
};

}  // namespace mt
