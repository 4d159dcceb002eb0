// The CUDA weight-streaming pipeline: the host store page-locked; `k >= 2` device weight slots of the largest
// streamed region's size filled by an H2D stream ahead of compute (the engine announces each pass's order);
// layer gradients returned by a D2H stream as soon as they are final. Streams are ordered by events only.
// A store streaming fp32 master to a bf16 backend lands each copy in one fp32 staging buffer and casts it
// into the slot on the H2D stream (round to nearest even, as the host's bf16 copy).
// Regions whose optimizer state stays on the GPU (resident_regions.h) take no slot and no copy: the layers read their
// weights where they live, and their gradients stay there (the first pass accumulates in place).
// Invariant: a slot is overwritten only after the compute stream has finished every op that read it, and
// compute reads a slot only after its copy has completed; a gradient buffer is reused only after its D2H.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "store/host_store.h"
#include "transfer/engine_transfers.h"

namespace mt {

// backend must come from make_cuda_backend. Page-locks the store's streamed and gradient buffers for the
// lifetime of the returned objects; their counters report copy-stream time and compute waits.
// resident_regions > 0: the store's leading regions keep their optimizer state in GPU memory (resident_regions.h),
// where the layers read their weights and the backward leaves their gradients; the optimizer updates them there.
EngineTransfers make_cuda_pipeline(Backend& backend, HostStore& store, int64_t slots, int64_t resident_regions = 0);

}  // namespace mt
