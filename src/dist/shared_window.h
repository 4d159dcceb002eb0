// SharedWindow: one MPI-3 shared-memory window on the node communicator, mapped by every rank of the node.
// Invariant: base() is page-aligned and the same bytes on every rank. Freeing is collective; while an exception
// unwinds a job of several ranks (about to be aborted, no other rank will join MPI_Win_free) it is left to exit.
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
