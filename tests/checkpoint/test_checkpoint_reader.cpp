// CheckpointFile refuses what is not a checkpoint with one clear error (a text file, an HDF5 file without /meta,
// a missing file), and select_flat_range picks exactly a flat element range of 1-D and 2-D tensors.
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <vector>

#include "catch.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/h5_handle.h"
#include "checkpoint/tensor_selection.h"
#include "core/error.h"

namespace {

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("megatrain_test_" + std::to_string(::getpid()) + "_" + name);
}

std::string error_of(const std::filesystem::path& p) {
  try {
    mt::CheckpointFile f(p);
  } catch (const mt::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a text file is not a checkpoint") {
  const auto p = temp_file("text.h5");
  std::ofstream(p) << "hello, not HDF5\n";
  const std::string e = error_of(p);
  CHECK(e.find(p.string()) != std::string::npos);
  CHECK(e.find("not an HDF5 file") != std::string::npos);
  std::filesystem::remove(p);
}

TEST_CASE("an HDF5 file without /meta is not a checkpoint") {
  const auto p = temp_file("plain.h5");
  {
    mt::h5::Handle f(H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    REQUIRE(f.get() >= 0);
    mt::h5::Handle g(H5Gcreate2(f.get(), "/data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  }
  const std::string e = error_of(p);
  CHECK(e.find("not a megatrain checkpoint") != std::string::npos);
  std::filesystem::remove(p);
  CHECK(error_of(p).find("no such checkpoint file") != std::string::npos);
}

TEST_CASE("select_flat_range selects exactly the flat range") {
  const std::vector<int64_t> shape{5, 7};
  const hsize_t dims[2] = {5, 7};
  mt::h5::Handle space(H5Screate_simple(2, dims, nullptr));
  for (const auto& [b, e] : std::vector<std::pair<int64_t, int64_t>>{{0, 35}, {3, 5}, {3, 17}, {7, 21}, {8, 34}, {0, 1}}) {
    mt::select_flat_range(space.get(), shape, b, e, "test", "t");
    CHECK(H5Sget_select_npoints(space.get()) == e - b);
    hsize_t start[2], end[2];
    H5Sget_select_bounds(space.get(), start, end);
    CHECK(static_cast<int64_t>(start[0]) == b / 7);
    CHECK(static_cast<int64_t>(end[0]) == (e - 1) / 7);
  }
  const std::vector<int64_t> flat{10};
  const hsize_t n = 10;
  mt::h5::Handle line(H5Screate_simple(1, &n, nullptr));
  mt::select_flat_range(line.get(), flat, 4, 9, "test", "t");
  CHECK(H5Sget_select_npoints(line.get()) == 5);
}
