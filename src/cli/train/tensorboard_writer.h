// TensorBoard event files (training.report_to: [tensorboard]): <output_dir>/runs/events.out.tfevents.<time>.<host>, a
// TFRecord stream of Event protocol buffers — the first holds file_version "brain.Event:2", each later one a step's
// scalars (Summary.Value{tag, simple_value}) — written live, one flush per step, as TensorBoard's reader expects.
// Invariant: every record is framed as TFRecord frames it (little-endian uint64 length, masked CRC-32C of the length,
// the bytes, masked CRC-32C of the bytes); a scalar is logged under the tag it is given, in the order given.
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace mt {

// CRC-32C (Castagnoli) and TFRecord's masking of it.
uint32_t crc32c(const void* data, size_t size);
uint32_t masked_crc32c(const void* data, size_t size);

class TensorBoardWriter {
 public:
  // Creates dir (output_dir/runs) and the event file in it.
  explicit TensorBoardWriter(const std::filesystem::path& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  void add_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars);
  const std::filesystem::path& file() const { return file_; }

 private:
  void write_record(const std::string& event);
  std::filesystem::path file_;
  std::FILE* out_ = nullptr;
};

}  // namespace mt
