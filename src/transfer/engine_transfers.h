// EngineTransfers: the transfer objects an engine is made with, one per kind of traffic (weights in, gradients
// out, activation checkpoints, the copy streams' counters). A backend that streams on its own (the CUDA pipeline,
// kernels/runtime/pipeline.h) fills what it implements; the engine makes the basic implementation of every member
// left null (engine/weight_stream.h, engine/checkpoint_store.h).
#pragma once
#include <memory>

#include "transfer/checkpoint_store.h"
#include "transfer/weight_stream.h"

namespace mt {

struct EngineTransfers {
  std::unique_ptr<WeightStream> weights;  // null: BasicWeightStream
  std::unique_ptr<GradientSink> grads;    // null: BasicGradientSink
  std::shared_ptr<PipelineCounters> counters;  // may be null
  std::unique_ptr<CheckpointStore> checkpoints;  // null: make_checkpoint_store for EngineOptions::checkpoints
};

}  // namespace mt
