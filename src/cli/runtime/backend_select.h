// Chooses the compute backend of a run: CUDA when this build has it and a GPU is visible, else the CPU
// reference; the backend switch (MEGATRAIN_BACKEND=cpu|cuda, the environment's alone: ranks count GPUs before any
// config is read) forces one (an unavailable forced backend is an error).
// Invariant: the returned backend computes in `dtype` where it can (the CPU reference always uses fp32).
#pragma once
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/dtype.h"
#include "core/runtime_switches.h"
#include "dist/data_parallel.h"
#include "engine/engine.h"
#include "optim/optimizer.h"

namespace mt {

// switches: the run's (core/runtime_switches.h: Config::runtime, or environment_switches() where no config is read),
// read once by the caller; the CUDA backend keeps them.
std::unique_ptr<Backend> select_backend(DType dtype, int device, const RuntimeSwitches& switches);
// GPUs the CUDA backend would see (0 when the CPU backend is forced, or without CUDA), and the NUMA node of each.
int visible_gpus();
std::vector<int> visible_gpu_numa_nodes();
// The optimizer's passes for the backend select_backend picks: split on CUDA (the next forward waits only for the
// parameters pass; the moments pass overlaps the head and backward), fused on the CPU (its engine shares the
// cores: one pass moves the fewest bytes).
UpdatePasses update_passes();
// Data-parallel GPU ranks per node: `requested` when > 0, else one per visible GPU up to the node's ranks (1 on
// CPU).
int gpus_per_node(int64_t requested);

// The engine's weight and gradient transfers for `backend`: the CUDA pipeline with `slots` GPU weight slots
// on a CUDA backend, the basic synchronous ones otherwise; with several compute ranks, gradients summed over
// them first (NCCL on GPUs where the build has it, MPI otherwise) and delivered by the node's rank 0.
// weights: the model's compute dtype (the store may stream fp32 master for bf16 weights). checkpoints: the resolved
// placement of the activation checkpoints (host on CUDA: page-locked slots with asynchronous copies).
// resident_regions: the store's leading regions whose optimizer state stays on the GPU (plan/resident_plan.h; CUDA
// only, 0 elsewhere).
EngineTransfers make_engine_transfers(Backend& backend, HostStore& store, int64_t slots,
                                      const dist::DataParallel& dp, DType weights,
                                      CheckpointPlacement checkpoints = CheckpointPlacement::gpu,
                                      int64_t resident_regions = 0);

}  // namespace mt
