// The longest sequence a model can train on a machine: batch 1, every layer recomputing (the least activation
// memory), at the checkpoint interval that suits the length best, from the memory plan's own sizing
// (plan_gpu, plan_host), and the model's positions (max_position_embeddings, or what its RoPE scaling covers);
// with the activation checkpoints on the GPU, and with them in host RAM (the GPU then holds their two staging
// buffers, and what bounds the length is one layer's workspace on the GPU and the checkpoints beside the store in
// host RAM).
// Invariant: memory_tokens (host_memory_tokens) is a multiple of kSequenceStep whose plan fits usable_gpu_bytes
// (and the usable host RAM) (0: none fits); a longer one by kSequenceStep does not.
#pragma once
#include <cstdint>
#include <limits>
#include <string>

#include "model/model_spec.h"
#include "plan/memory_plan.h"
#include "plan/resource_advice.h"

namespace mt {

inline constexpr int64_t kSequenceStep = 1024;
inline constexpr int64_t kNoPositionLimit = std::numeric_limits<int64_t>::max();

// The longest position the model trains on: max_position_embeddings, or more where a RoPE table's yarn or longrope
// scaling covers more (original_max_position_embeddings × factor; linear and llama3 configs state the scaled length
// in max_position_embeddings itself); kNoPositionLimit with dynamic NTK scaling (rebuilt for any length) or without
// RoPE (ALiBi, NoPE). `why` names what sets it.
int64_t model_position_limit(const ModelSpec& spec, std::string* why = nullptr);

struct SequenceLimit {
  int64_t memory_tokens = 0;          // longest multiple of kSequenceStep that fits GPU memory (0: not even one step)
  int64_t checkpoint_interval = 0;    // the interval it fits at
  int64_t gpu_bytes = 0;              // its plan's GPU total
  // With run.cudnn_attention: the longest multiple of kSequenceStep at which cuDNN's backward's
  // workspace fits too (0: at none); longer sequences, up to memory_tokens, plan (and run) our backward. In tiles
  // (CudnnAttentionPlan::backward_tile) cuDNN's backward holds less than ours (our GQA partials), so it usually sets memory_tokens.
  int64_t cudnn_backward_tokens = 0;
  bool host_fits = false;             // the host store fits the RAM, its NVMe tier the NVMe (batch 1 needs nothing
                                      // else of the host)
  int64_t position_tokens = 0;        // model_position_limit
  std::string position_source;
  int64_t longest() const { return host_fits ? std::min(memory_tokens, position_tokens) : 0; }
  // The checkpoints in host RAM: the longest multiple of kSequenceStep that fits the GPU and, beside the host plan,
  // the usable RAM (unchecked where the machine's RAM is 0), at the interval among those whose checkpoints fit the
  // RAM that takes the fewest GPU bytes; its GPU total and its checkpoints' host bytes.
  int64_t host_memory_tokens = 0;
  int64_t host_checkpoint_interval = 0;
  int64_t host_gpu_bytes = 0;
  int64_t host_checkpoint_bytes = 0;
  int64_t longest_with_host_checkpoints() const {
    return host_fits ? std::min(host_memory_tokens, position_tokens) : 0;
  }
};

// GPU bytes of the leanest plan of one sequence of `tokens`: batch 1, every layer recomputing, at run's
// checkpoint_interval or (0) the best one, which `interval` receives, with run's checkpoint placement (automatic:
// the leaner of gpu and host).
int64_t one_sequence_gpu_bytes(const ModelSpec& spec, RunShape run, int64_t tokens, int64_t* interval = nullptr);

// run: dtype, stream dtype, weight slots, ranks, offload, token_chunk, cudnn_attention and, when not 0,
// checkpoint_interval are kept (its checkpoint placement is not: both are reported); the rest is batch 1
// recomputing every layer. memory_tokens is the longer of our backward's and (with run.cudnn_attention) cuDNN's
// (cuDNN's forward staging counted); cudnn_backward_tokens says how far cuDNN's backward fits.
SequenceLimit longest_trainable_sequence(const ModelSpec& spec, RunShape run, const Machine& machine);

}  // namespace mt
