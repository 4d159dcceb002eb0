// SharedWindow: one MPI-3 shared-memory window on the node communicator (MPI_Win_allocate_shared,
// contiguous), mapped by every rank of the node at its own address.
// Invariant: base() is page-aligned and addresses the same bytes on every rank. Freeing is collective;
// while an exception unwinds a job of several ranks the window is left to process exit instead, because
// that job is about to be aborted and the other ranks will never join MPI_Win_free.
#pragma once
#include <mpi.h>

#include <cstddef>

#include "dist/context.h"

namespace mt::dist {

class SharedWindow {
 public:
  // Collective over ctx.node: this rank contributes `local_bytes`; the window holds the sum.
  SharedWindow(const Context& ctx, std::size_t local_bytes);
  ~SharedWindow();
  SharedWindow(const SharedWindow&) = delete;
  SharedWindow& operator=(const SharedWindow&) = delete;

  std::byte* base() const { return base_; }
  std::size_t bytes() const { return bytes_; }  // sum of every rank's contribution

 private:
  MPI_Win win_ = MPI_WIN_NULL;
  std::byte* base_ = nullptr;
  std::size_t bytes_ = 0;
  int node_size_ = 1;
};

std::size_t page_size();

}  // namespace mt::dist
