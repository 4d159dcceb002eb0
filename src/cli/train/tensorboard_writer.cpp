// TensorBoardWriter: hand-encoded Event / Summary protocol buffers in TFRecord frames (see tensorboard_writer.h).
// Event: 1 wall_time (double), 2 step (int64), 3 file_version (string), 5 summary (Summary).
// Summary: 1 value (repeated Value); Value: 1 tag (string), 2 simple_value (float).
#include "cli/train/tensorboard_writer.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>

#include "core/error.h"

namespace mt {
namespace {

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0x82F63B78u ^ (c >> 1) : c >> 1;  // reflected Castagnoli polynomial
      t[i] = c;
    }
    return t;
  }();
  return table;
}

void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void key(std::string& out, int field, int wire_type) { varint(out, static_cast<uint64_t>(field) << 3 | wire_type); }

template <typename T>
void fixed(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // little-endian hosts only (x86-64, aarch64)
  out.append(bytes, sizeof(T));
}

void bytes_field(std::string& out, int field, const std::string& bytes) {
  key(out, field, 2);
  varint(out, bytes.size());
  out += bytes;
}

std::string event_header(double wall_time, int64_t step) {
  std::string e;
  key(e, 1, 1);
  fixed(e, wall_time);
  key(e, 2, 0);
  varint(e, static_cast<uint64_t>(step));
  return e;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  uint32_t c = 0xFFFFFFFFu;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) c = crc_table()[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  MT_REQUIRE(!ec, "{}: cannot create the TensorBoard directory: {}", dir.string(), ec.message());
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  const double wall = now_seconds();
  file_ = dir / ("events.out.tfevents." + std::to_string(static_cast<int64_t>(wall)) + "." + host);
  out_ = std::fopen(file_.c_str(), "wb");
  MT_REQUIRE(out_ != nullptr, "{}: cannot open for writing", file_.string());
  std::string e = event_header(wall, 0);
  bytes_field(e, 3, "brain.Event:2");
  write_record(e);
}

TensorBoardWriter::~TensorBoardWriter() {
  if (out_) std::fclose(out_);
}

void TensorBoardWriter::add_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    bytes_field(v, 1, tag);
    key(v, 2, 5);
    fixed(v, static_cast<float>(value));
    bytes_field(summary, 1, v);
  }
  std::string e = event_header(now_seconds(), step);
  bytes_field(e, 5, summary);
  write_record(e);
}

void TensorBoardWriter::write_record(const std::string& event) {
  std::string frame;
  const uint64_t length = event.size();
  fixed(frame, length);
  fixed(frame, masked_crc32c(frame.data(), 8));
  frame += event;
  fixed(frame, masked_crc32c(event.data(), event.size()));
  MT_REQUIRE(std::fwrite(frame.data(), 1, frame.size(), out_) == frame.size() && std::fflush(out_) == 0,
             "{}: write failed", file_.string());
}

}  // namespace mt
