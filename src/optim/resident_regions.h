// ResidentRegions: the leading regions [0, count()) whose fp32 master, Adam moments and gradient a device holds for
// the run (the CUDA pipeline, in GPU memory the memory plan leaves free; plan/resident_plan.h). The optimizer hands
// their update to it instead of running its passes over them; the engine reads their weights and leaves their
// gradients there. The device's copy is the truth while it exists: the store's master, moments (and bf16 copy) of
// those regions are brought up to date by write_back() (HostStore::sync_resident), which whatever reads them on the
// host calls first (checkpoints, the export), and once more when the device state goes.
// Invariants: update() applies exactly adamw_update's element operations (optim/adamw.h), so a resident region is
// bitwise what the host passes would make it; it returns at once, and whatever reads the region's device state
// afterwards (the next forward, write_back) is ordered after that update.
#pragma once
#include <cstdint>

#include "optim/adamw.h"

namespace mt {

class ResidentRegions {
 public:
  virtual ~ResidentRegions() = default;
  virtual int64_t count() const = 0;
  // Region r's AdamW step (nothing changes when skipped), whose result is the store's version `version`. Called
  // once per step for every resident region, after the global norm is known.
  virtual void update(int64_t r, const AdamWStep& hp, bool skipped, int64_t version) = 0;
  // Blocks until the store holds every resident region's state as of the last update (every update finished).
  virtual void write_back() = 0;
};

}  // namespace mt
