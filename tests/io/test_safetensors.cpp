// safetensors: files written by the Python library read back exactly, our writer reproduces them byte for
// byte, round trips, sharded directories, and one-line errors for damaged files.
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "catch.h"
#include "core/error.h"
#include "io/safetensors.h"

namespace fs = std::filesystem;
using mt::StDType;

namespace {

const fs::path kData = fs::path(MEGATRAIN_SOURCE_DIR) / "tests" / "io" / "data";

struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() / ("mt_test_io_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out << bytes;
}

// A file with the given header text (not padded) followed by `data_size` zero bytes.
std::string make_file(const std::string& header, std::size_t data_size) {
  std::string s(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(s.data(), &n, 8);
  return s + header + std::string(data_size, '\0');
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const mt::Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<float> as_f32(const mt::StTensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  mt::read_as_f32(t, v.data());
  return v;
}

}  // namespace

TEST_CASE("a file written by safetensors.torch reads back exactly", "[safetensors]") {
  const mt::SafetensorsFile f(kData / "mixed.safetensors");
  CHECK(f.metadata().at("format") == "pt");
  CHECK(f.metadata().at("note") == "written by safetensors.torch");
  REQUIRE(f.tensors().size() == 4);

  const auto& a = f.tensors().at("a");
  CHECK(a.dtype == StDType::F32);
  CHECK(a.shape == std::vector<int64_t>{2, 3});
  CHECK(as_f32(a) == std::vector<float>{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f});

  const auto& b = f.tensors().at("b");
  CHECK(b.dtype == StDType::BF16);
  CHECK(as_f32(b) == std::vector<float>{1.5f, -2.0f, 3.140625f, 0.00099945068359375f});

  const auto& c = f.tensors().at("c");
  CHECK(c.dtype == StDType::F16);
  const auto cv = as_f32(c);
  CHECK(cv[0] == 0.5f);
  CHECK(cv[1] == -65504.0f);
  CHECK(cv[2] == std::ldexp(1.0f, -24));  // the smallest subnormal
  CHECK(cv[3] == std::numeric_limits<float>::infinity());

  const auto& idx = f.tensors().at("idx");
  CHECK(idx.dtype == StDType::I64);
  CHECK(idx.nbytes == 16);
  const std::string msg = error_of([&] { as_f32(idx); });
  CHECK(msg.find("'idx'") != std::string::npos);
  CHECK(msg.find("mixed.safetensors") != std::string::npos);
}

TEST_CASE("the writer reproduces the Python library's files byte for byte", "[safetensors]") {
  TempDir tmp;
  const std::vector<float> w = {1.0f, -2.5f, 3.25f, 0.1f, 0.2f, 0.3f};
  const std::vector<float> z = {42.0f};
  const std::vector<mt::StWriteTensor> tensors = {{"w", {2, 3}, w.data()}, {"z", {1}, z.data()}};
  mt::write_safetensors(tmp.path / "f32.safetensors", tensors, mt::DType::f32);
  mt::write_safetensors(tmp.path / "bf16.safetensors", tensors, mt::DType::bf16);
  CHECK(read_bytes(tmp.path / "f32.safetensors") == read_bytes(kData / "f32.safetensors"));
  CHECK(read_bytes(tmp.path / "bf16.safetensors") == read_bytes(kData / "bf16.safetensors"));
  CHECK(std::distance(fs::directory_iterator(tmp.path), fs::directory_iterator()) == 2);  // no temporaries left
}

TEST_CASE("f32 and bf16 round trips keep order, shapes and values", "[safetensors]") {
  TempDir tmp;
  std::vector<float> big(1000), scalar = {-7.25f};
  for (size_t i = 0; i < big.size(); ++i) big[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  const std::vector<mt::StWriteTensor> tensors = {
      {"zeta.weight", {10, 100}, big.data()}, {"alpha", {}, scalar.data()}, {"empty", {0, 4}, nullptr}};

  for (const auto dtype : {mt::DType::f32, mt::DType::bf16}) {
    const fs::path p = tmp.path / "t.safetensors";
    mt::write_safetensors(p, tensors, dtype, {{"format", "pt"}, {"step", "12"}});
    const std::string bytes = read_bytes(p);
    std::uint64_t header_len = 0;
    std::memcpy(&header_len, bytes.data(), 8);
    CHECK(header_len % 8 == 0);
    CHECK(bytes.find("zeta.weight") < bytes.find("alpha"));  // given order, not sorted

    const mt::SafetensorsFile f(p);
    CHECK(f.metadata().at("step") == "12");
    const auto& t = f.tensors().at("zeta.weight");
    CHECK(t.dtype == (dtype == mt::DType::f32 ? StDType::F32 : StDType::BF16));
    CHECK(t.shape == std::vector<int64_t>{10, 100});
    const auto v = as_f32(t);
    for (size_t i = 0; i < big.size(); ++i)
      REQUIRE(v[i] == (dtype == mt::DType::f32 ? big[i] : mt::round_to_bf16(big[i])));
    CHECK(f.tensors().at("alpha").shape.empty());
    CHECK(as_f32(f.tensors().at("alpha"))[0] == -7.25f);
    CHECK(f.tensors().at("empty").numel() == 0);
  }
}

TEST_CASE("F64 tensors read exactly as fp64 and rounded as fp32", "[safetensors]") {
  TempDir tmp;
  const std::vector<double> values = {1.0 + 1e-12, -3.25, 1e-300, 0.1};
  std::string header = R"({"t":{"dtype":"F64","shape":[2,2],"data_offsets":[0,32]}})";
  std::string bytes = make_file(header, 0);
  bytes.append(reinterpret_cast<const char*>(values.data()), 32);
  write_bytes(tmp.path / "f64.safetensors", bytes);
  const mt::SafetensorsFile f(tmp.path / "f64.safetensors");
  const mt::StTensor& t = f.tensors().at("t");
  std::vector<double> exact(4);
  mt::read_as_f64(t, exact.data());
  CHECK(exact == values);
  CHECK(as_f32(t) == std::vector<float>{1.f, -3.25f, 0.f, 0.1f});
}

TEST_CASE("a model directory: one file or shards listed by the index", "[safetensors]") {
  TempDir tmp;
  const std::vector<float> x = {1, 2, 3, 4}, y = {5, 6};
  SECTION("single file") {
    mt::write_safetensors(tmp.path / "model.safetensors", {{"x", {4}, x.data()}, {"y", {2}, y.data()}}, mt::DType::f32);
    const mt::SafetensorsModel m(tmp.path);
    CHECK(m.names() == std::vector<std::string>{"x", "y"});
    CHECK(m.find("nope") == nullptr);
    CHECK(as_f32(*m.find("y")) == y);
    CHECK(m.dir() == tmp.path);
  }
  SECTION("sharded") {
    mt::write_safetensors(tmp.path / "model-00001-of-00002.safetensors", {{"x", {4}, x.data()}}, mt::DType::bf16);
    mt::write_safetensors(tmp.path / "model-00002-of-00002.safetensors", {{"y", {2}, y.data()}}, mt::DType::f32);
    write_bytes(tmp.path / "model.safetensors.index.json",
                R"({"metadata": {"total_size": 16}, "weight_map": {"x": "model-00001-of-00002.safetensors",
                    "y": "model-00002-of-00002.safetensors"}})");
    const mt::SafetensorsModel m(tmp.path);
    CHECK(m.names() == std::vector<std::string>{"x", "y"});
    CHECK(as_f32(*m.find("x")) == x);
    CHECK(m.find("x")->file.filename() == "model-00001-of-00002.safetensors");
    CHECK(as_f32(*m.find("y")) == y);
  }
  SECTION("a tensor listed but missing from its shard") {
    mt::write_safetensors(tmp.path / "a.safetensors", {{"x", {4}, x.data()}}, mt::DType::f32);
    write_bytes(tmp.path / "model.safetensors.index.json",
                R"({"weight_map": {"x": "a.safetensors", "y": "a.safetensors"}})");
    const std::string msg = error_of([&] { mt::SafetensorsModel m(tmp.path); });
    CHECK(msg.find("'y'") != std::string::npos);
    CHECK(msg.find("a.safetensors") != std::string::npos);
  }
  SECTION("neither file present") {
    const std::string msg = error_of([&] { mt::SafetensorsModel m(tmp.path); });
    CHECK(msg.find(tmp.path.string()) != std::string::npos);
    CHECK(msg.find("model.safetensors") != std::string::npos);
  }
}

TEST_CASE("damaged files are rejected with the file and the tensor named", "[safetensors]") {
  TempDir tmp;
  const fs::path p = tmp.path / "bad.safetensors";
  const auto error_for = [&](const std::string& bytes) {
    write_bytes(p, bytes);
    return error_of([&] { mt::SafetensorsFile f(p); });
  };
  const std::string good = read_bytes(kData / "f32.safetensors");

  SECTION("truncated data area") {
    const std::string msg = error_for(good.substr(0, good.size() - 3));
    CHECK(msg.find("bad.safetensors") != std::string::npos);
    CHECK(msg.find("'z'") != std::string::npos);
    CHECK(msg.find("outside the data area") != std::string::npos);
  }
  SECTION("shorter than the length prefix") { CHECK(error_for("abc").find("truncated") != std::string::npos); }
  SECTION("header length beyond the file") {
    CHECK(error_for(good.substr(0, 100)).find("header length") != std::string::npos);
  }
  SECTION("offsets out of range") {
    const std::string msg = error_for(make_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 8));
    CHECK(msg.find("'t'") != std::string::npos);
    CHECK(msg.find("[4, 12]") != std::string::npos);
  }
  SECTION("byte count does not match the shape") {
    const std::string msg = error_for(make_file(R"({"t":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}})", 8));
    CHECK(msg.find("'t'") != std::string::npos);
    CHECK(msg.find("needs 6") != std::string::npos);
  }
  SECTION("unsupported dtype") {
    const std::string msg = error_for(make_file(R"({"t":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", 8));
    CHECK(msg.find("'t'") != std::string::npos);
    CHECK(msg.find("C64") != std::string::npos);
  }
  SECTION("header is not JSON") {
    CHECK(error_for(make_file("{not json", 0)).find("not valid JSON") != std::string::npos);
  }
  SECTION("missing file") {
    const std::string msg = error_of([&] { mt::SafetensorsFile f(tmp.path / "absent.safetensors"); });
    CHECK(msg.find("absent.safetensors") != std::string::npos);
  }
}

TEST_CASE("the writer rejects repeated names and leaves nothing behind", "[safetensors]") {
  TempDir tmp;
  const std::vector<float> x = {1, 2};
  const std::string msg = error_of([&] {
    mt::write_safetensors(tmp.path / "w.safetensors", {{"x", {2}, x.data()}, {"x", {2}, x.data()}}, mt::DType::f32);
  });
  CHECK(msg.find("'x'") != std::string::npos);
  CHECK(fs::is_empty(tmp.path));
}
