// Engine: one training step's forward and backward over the global batch, layer by layer.
// The whole pass batch goes through each layer while its weights are bound; micro-batches are the inner
// loop; hidden states are kept only at every checkpoint_interval-th layer boundary and each segment is
// recomputed from its checkpoint during backward. gradient_accumulation_steps splits the batch into passes.
// Invariant: after forward_backward the store's grad regions hold ∂(mean CE over all targets of the batch)/∂θ.
#pragma once
#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "data/batch.h"
#include "engine/decoder_layer.h"
#include "engine/weight_stream.h"
#include "model/model_spec.h"
#include "store/host_store.h"

namespace mt {

struct EngineOptions {
  int64_t checkpoint_interval = 1;
  int64_t micro_batch_size = 0;   // sequences per micro-batch; 0 = auto (about 4096 tokens)
  int64_t passes = 1;             // gradient_accumulation_steps
  int64_t max_positions = 0;      // RoPE table length; sequences must not exceed it
};

struct StepLoss {
  double loss_sum = 0.0;          // Σ CE over targets
  int64_t target_tokens = 0;
  double mean() const { return target_tokens ? loss_sum / static_cast<double>(target_tokens) : 0.0; }
};

class Engine {
 public:
  Engine(Backend& backend, const ModelSpec& spec, HostStore& store, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  StepLoss forward_backward(const Batch& batch);
  int64_t micro_batch_size_for(int64_t pass_seqs, int64_t seq_len) const;

 private:
  struct Activations;
  struct BatchArrays;
  void run_pass(const Batch& batch, const BatchArrays& arrays, int64_t first_seq, int64_t seqs, bool first_pass,
                float grad_scale, StepLoss& loss);
  Activations& activations_for(int64_t pass_tokens, int64_t mb_seqs, int64_t seq_len);

  Backend& backend_;
  const ModelSpec& spec_;
  HostStore& store_;
  EngineOptions options_;
  LayerContext ctx_;
  float* rope_cos_ = nullptr;
  float* rope_sin_ = nullptr;
  WeightStream weights_;
  GradientSink grads_;
  std::unique_ptr<Activations> acts_;
};

}  // namespace mt
