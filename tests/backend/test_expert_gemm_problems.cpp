// Tests of the grouped expert GEMMs' problem lists (backend/expert_gemm_problems.h): each GEMM's shapes, addresses
// and leading dimensions per expert, experts without rows left out, the first unsupported operand named, and the
// packed device arrays read back field by field.
// Invariant: addresses are plain numbers (device addresses are never dereferenced on the host).
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "backend/expert_gemm_problems.h"
#include "catch.h"
#include "core/error.h"

namespace {

using mt::ExpertGemm;
using mt::ExpertGemmProblem;

// Offsets of experts holding rows[e] rows each.
std::vector<int64_t> offsets_of(const std::vector<int64_t>& rows) {
  std::vector<int64_t> o(rows.size() + 1, 0);
  std::partial_sum(rows.begin(), rows.end(), o.begin() + 1);
  return o;
}

constexpr uint64_t kOut = 0x10000000, kA = 0x20000000, kB = 0x30000000;  // 16-byte aligned bases

}  // namespace

TEST_CASE("expert GEMM problems: one per expert with rows, in CUTLASS's convention", "[moe_gemm]") {
  const int64_t I = 64, O = 48, stride = I * O + 8;
  const std::vector<int64_t> rows = {3, 0, 5, 0, 1};
  const auto offsets = offsets_of(rows);  // 0 3 3 8 8 9
  SECTION("forward: y[rows, O] = x[rows, I] · w_eᵀ") {
    const auto p = mt::expert_gemm_problems(ExpertGemm::forward, kOut, kA, kB, stride, offsets.data(), 5, I, O);
    CHECK(p.unsupported.empty());
    REQUIRE(p.problems.size() == 3);
    CHECK(p.problems[0] == ExpertGemmProblem{3, 48, 64, kA, kB, kOut, 64, 64, 48});
    CHECK(p.problems[1] == ExpertGemmProblem{5, 48, 64, kA + 3 * 64 * 2, kB + 2 * stride * 2, kOut + 3 * 48 * 2, 64,
                                             64, 48});
    CHECK(p.problems[2] == ExpertGemmProblem{1, 48, 64, kA + 8 * 64 * 2, kB + 4 * stride * 2, kOut + 8 * 48 * 2, 64,
                                             64, 48});
  }
  SECTION("backward data: dx[rows, I] = dy[rows, O] · w_e") {
    const auto p = mt::expert_gemm_problems(ExpertGemm::backward_data, kOut, kA, kB, stride, offsets.data(), 5, I, O);
    CHECK(p.unsupported.empty());
    REQUIRE(p.problems.size() == 3);
    CHECK(p.problems[1] == ExpertGemmProblem{5, 64, 48, kA + 3 * 48 * 2, kB + 2 * stride * 2, kOut + 3 * 64 * 2, 48,
                                             64, 64});
  }
  SECTION("backward weight: dw_e[O, I] += dy[rows, O]ᵀ · x[rows, I], K = rows, dw fp32") {
    const auto p = mt::expert_gemm_problems(ExpertGemm::backward_weight, kOut, kA, kB, stride, offsets.data(), 5, I, O);
    CHECK(p.unsupported.empty());
    REQUIRE(p.problems.size() == 3);
    CHECK(p.problems[0] == ExpertGemmProblem{48, 64, 3, kA, kB, kOut, 48, 64, 64});
    CHECK(p.problems[2] == ExpertGemmProblem{48, 64, 1, kA + 8 * 48 * 2, kB + 8 * 64 * 2, kOut + 4 * stride * 4, 48,
                                             64, 64});
  }
}

TEST_CASE("expert GEMM problems: no rows anywhere is no problem, and nothing unsupported", "[moe_gemm]") {
  const auto offsets = offsets_of({0, 0, 0, 0});
  for (const ExpertGemm g : {ExpertGemm::forward, ExpertGemm::backward_data, ExpertGemm::backward_weight}) {
    const auto p = mt::expert_gemm_problems(g, kOut, kA, kB, 64 * 64, offsets.data(), 4, 64, 64);
    CHECK(p.problems.empty());
    CHECK(p.unsupported.empty());
  }
}

TEST_CASE("expert GEMM problems: the first unaligned extent or address is named, the problems still listed",
          "[moe_gemm]") {
  const auto offsets = offsets_of({2, 0, 7});
  const auto unsupported = [&](ExpertGemm g, uint64_t out, uint64_t a, uint64_t b, int64_t stride, int64_t I,
                               int64_t O) {
    const auto p = mt::expert_gemm_problems(g, out, a, b, stride, offsets.data(), 3, I, O);
    CHECK(p.problems.size() == 2);
    return p.unsupported;
  };
  CHECK(unsupported(ExpertGemm::forward, kOut, kA, kB, 36 * 16, 36, 16) ==
        "I = 36 is not a multiple of 8: rows of bf16 not 16-byte aligned");
  CHECK(unsupported(ExpertGemm::backward_data, kOut, kA, kB, 16 * 12, 16, 12) ==
        "O = 12 is not a multiple of 8: rows of bf16 not 16-byte aligned");
  // A w_stride that is not a multiple of 8 bf16 elements: expert 2's weight (expert 1 has no rows) is misaligned.
  CHECK(unsupported(ExpertGemm::forward, kOut, kA, kB, 64 * 64 + 3, 64, 64) ==
        "expert 2's w_e at 0x3000400c is not 16-byte aligned (w_stride 4099)");
  // dw is fp32: 4 elements make 16 bytes, so a stride of 4099 misaligns it, 4100 does not.
  CHECK(unsupported(ExpertGemm::backward_weight, kOut, kA, kB, 64 * 64 + 3, 64, 64) ==
        "expert 2's dw_e at 0x10008018 is not 16-byte aligned (w_stride 4099)");
  CHECK(unsupported(ExpertGemm::backward_weight, kOut, kA, kB, 64 * 64 + 4, 64, 64).empty());
  CHECK(unsupported(ExpertGemm::backward_data, kOut + 2, kA, kB, 64 * 64, 64, 64) ==
        "expert 0's dx at 0x10000002 is not 16-byte aligned (w_stride 4096)");
  CHECK(unsupported(ExpertGemm::backward_weight, kOut, kA, kB + 8, 64 * 64, 64, 64) ==
        "expert 0's x at 0x30000008 is not 16-byte aligned (w_stride 4096)");
}

TEST_CASE("expert GEMM problems: decreasing offsets are refused with the expert named", "[moe_gemm]") {
  const std::vector<int64_t> offsets = {0, 4, 2};
  try {
    mt::expert_gemm_problems(ExpertGemm::forward, kOut, kA, kB, 64, offsets.data(), 2, 8, 8);
    FAIL("no error");
  } catch (const mt::Error& e) {
    CHECK(std::string(e.what()) == "expert GEMM problems: offsets decrease at expert 1 (4 then 2)");
  }
}

TEST_CASE("expert GEMM arrays: 16-byte aligned sections, packed fields read back", "[moe_gemm]") {
  const mt::ExpertGemmArrays none = mt::expert_gemm_arrays(0);
  CHECK(none.bytes == 0);
  const mt::ExpertGemmArrays s = mt::expert_gemm_arrays(3);
  // shapes 36 bytes -> 48; then 8 sections of 24 bytes -> 32 each.
  CHECK(s.shapes == 0);
  CHECK(s.a == 48);
  CHECK(s.b == 80);
  CHECK(s.c == 112);
  CHECK(s.d == 144);
  CHECK(s.lda == 176);
  CHECK(s.ldd == 272);
  CHECK(s.bytes == 304);
  const std::vector<ExpertGemmProblem> problems = {{3, 48, 64, kA, kB, kOut, 64, 64, 48},
                                                   {5, 48, 64, kA + 384, kB + 6160, kOut + 288, 64, 64, 48},
                                                   {1, 48, 64, kA + 1024, kB + 12320, kOut + 768, 64, 64, 48}};
  std::vector<std::byte> buffer(static_cast<size_t>(s.bytes), std::byte{0xff});
  mt::pack_expert_gemm_arrays(problems, buffer.data());
  const auto read = [&](int64_t offset, auto value) {
    std::memcpy(&value, buffer.data() + offset, sizeof(value));
    return value;
  };
  for (int64_t i = 0; i < 3; ++i) {
    const ExpertGemmProblem& p = problems[static_cast<size_t>(i)];
    CHECK(read(s.shapes + 12 * i, int32_t{}) == p.m);
    CHECK(read(s.shapes + 12 * i + 4, int32_t{}) == p.n);
    CHECK(read(s.shapes + 12 * i + 8, int32_t{}) == p.k);
    CHECK(read(s.a + 8 * i, uint64_t{}) == p.a);
    CHECK(read(s.b + 8 * i, uint64_t{}) == p.b);
    CHECK(read(s.c + 8 * i, uint64_t{}) == p.d);  // C = D: beta reads the output in place
    CHECK(read(s.d + 8 * i, uint64_t{}) == p.d);
    CHECK(read(s.lda + 8 * i, int64_t{}) == p.lda);
    CHECK(read(s.ldb + 8 * i, int64_t{}) == p.ldb);
    CHECK(read(s.ldc + 8 * i, int64_t{}) == p.ldd);
    CHECK(read(s.ldd + 8 * i, int64_t{}) == p.ldd);
  }
  CHECK(read(s.shapes + 36, int32_t{}) == 0);  // padding zeroed
}
