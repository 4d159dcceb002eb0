// MPI-3 shared windows (see shared_window.h). Rank 0 adds one page of slack to its contribution so that
// base() can be rounded up to a page boundary: Open MPI's osc/sm places the data after its own control
// block, so the raw base is not page-aligned.
#include "dist/shared_window.h"

#include <unistd.h>

#include <cstdint>
#include <exception>

#include "dist/check.h"

namespace mt::dist {

std::size_t page_size() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

SharedWindow::SharedWindow(const Context& ctx, std::size_t local_bytes) : node_size_(ctx.node_size) {
  const std::size_t page = page_size();
  unsigned long long mine = local_bytes, total = 0;
  MT_CHECK_MPI(MPI_Allreduce(&mine, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, ctx.node));
  bytes_ = total;
  const std::size_t contribution = local_bytes + (ctx.node_rank == 0 ? page : 0);
  void* local = nullptr;
  MT_CHECK_MPI(MPI_Win_allocate_shared(static_cast<MPI_Aint>(contribution), 1, MPI_INFO_NULL, ctx.node, &local, &win_));
  MT_CHECK_MPI(MPI_Win_set_errhandler(win_, MPI_ERRORS_RETURN));
  MPI_Aint rank0_bytes = 0;
  int disp_unit = 0;
  void* rank0_base = nullptr;
  MT_CHECK_MPI(MPI_Win_shared_query(win_, 0, &rank0_bytes, &disp_unit, &rank0_base));
  const auto raw = reinterpret_cast<std::uintptr_t>(rank0_base);
  base_ = reinterpret_cast<std::byte*>((raw + page - 1) / page * page);
}

SharedWindow::~SharedWindow() {
  if (win_ == MPI_WIN_NULL) return;
  if (std::uncaught_exceptions() > 0 && node_size_ > 1) return;
  MT_CHECK_MPI(MPI_Win_free(&win_));
}

}  // namespace mt::dist
