// The grouped expert GEMMs' problem lists and their packed device arrays (see expert_gemm_problems.h).
#include "backend/expert_gemm_problems.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/log.h"

namespace mt {
namespace {

// The operands' names, for the reasons: A, B and D of each GEMM.
struct OperandNames {
  const char *a, *b, *d;
};
OperandNames operand_names(ExpertGemm g) {
  switch (g) {
    case ExpertGemm::forward: return {"x", "w_e", "y"};
    case ExpertGemm::backward_data: return {"dy", "w_e", "dx"};
    case ExpertGemm::backward_weight: return {"dy", "x", "dw_e"};
  }
  return {"a", "b", "d"};
}

constexpr int64_t kBf16Bytes = 2, kF32Bytes = 4;
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

int64_t aligned_up(int64_t bytes) {
  return (bytes + kExpertGemmAlignmentBytes - 1) / kExpertGemmAlignmentBytes * kExpertGemmAlignmentBytes;
}

// Why the problem of expert e cannot be launched (its first misaligned address), or "".
std::string misaligned(const ExpertGemmProblem& p, const OperandNames& names, int64_t e, int64_t w_stride) {
  const std::pair<const char*, uint64_t> operands[] = {{names.a, p.a}, {names.b, p.b}, {names.d, p.d}};
  for (const auto& [name, address] : operands)
    if (address % kExpertGemmAlignmentBytes != 0)
      return MT_FORMAT("expert {}'s {} at {:#x} is not {}-byte aligned (w_stride {})", e, name, address,
                       kExpertGemmAlignmentBytes, w_stride);
  return "";
}

}  // namespace

const char* expert_gemm_name(ExpertGemm g) {
  switch (g) {
    case ExpertGemm::forward: return "forward";
    case ExpertGemm::backward_data: return "backward data";
    case ExpertGemm::backward_weight: return "backward weight";
  }
  return "?";
}

ExpertGemmProblems expert_gemm_problems(ExpertGemm g, uint64_t out, uint64_t a, uint64_t b, int64_t w_stride,
                                        const int64_t* offsets, int64_t E, int64_t I, int64_t O) {
  MT_REQUIRE(E >= 0 && I > 0 && O > 0 && w_stride >= 0, "expert GEMM problems: E {} I {} O {} w_stride {}", E, I, O,
             w_stride);
  ExpertGemmProblems out_problems;
  const auto refuse = [&](std::string why) {  // the first reason stands
    if (out_problems.unsupported.empty()) out_problems.unsupported = std::move(why);
  };
  constexpr int64_t per_row = kExpertGemmAlignmentBytes / kBf16Bytes;  // bf16 elements in 16 bytes
  if (I % per_row != 0) refuse(MT_FORMAT("I = {} is not a multiple of {}: rows of bf16 not {}-byte aligned", I, per_row,
                                         kExpertGemmAlignmentBytes));
  if (O % per_row != 0) refuse(MT_FORMAT("O = {} is not a multiple of {}: rows of bf16 not {}-byte aligned", O, per_row,
                                         kExpertGemmAlignmentBytes));
  if (I > kInt32Max || O > kInt32Max) refuse(MT_FORMAT("I = {} or O = {} exceeds int32", I, O));
  const OperandNames names = operand_names(g);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t r0 = offsets[e], rows = offsets[e + 1] - offsets[e];
    MT_REQUIRE(rows >= 0, "expert GEMM problems: offsets decrease at expert {} ({} then {})", e, offsets[e],
               offsets[e + 1]);
    if (rows == 0) continue;
    if (rows > kInt32Max) refuse(MT_FORMAT("expert {} has {} rows, more than int32", e, rows));
    const auto m32 = [](int64_t v) { return static_cast<int32_t>(std::min(v, kInt32Max)); };
    const auto at = [](uint64_t base, int64_t elements, int64_t bytes) {
      return base + static_cast<uint64_t>(elements * bytes);
    };
    ExpertGemmProblem p;
    switch (g) {
      case ExpertGemm::forward:
        p = {m32(rows), m32(O), m32(I), at(a, r0 * I, kBf16Bytes), at(b, e * w_stride, kBf16Bytes),
             at(out, r0 * O, kBf16Bytes), I, I, O};
        break;
      case ExpertGemm::backward_data:
        p = {m32(rows), m32(I), m32(O), at(a, r0 * O, kBf16Bytes), at(b, e * w_stride, kBf16Bytes),
             at(out, r0 * I, kBf16Bytes), O, I, I};
        break;
      case ExpertGemm::backward_weight:
        p = {m32(O), m32(I), m32(rows), at(a, r0 * O, kBf16Bytes), at(b, r0 * I, kBf16Bytes),
             at(out, e * w_stride, kF32Bytes), O, I, I};
        break;
    }
    refuse(misaligned(p, names, e, w_stride));
    out_problems.problems.push_back(p);
  }
  return out_problems;
}

ExpertGemmArrays expert_gemm_arrays(int64_t n) {
  MT_REQUIRE(n >= 0, "expert GEMM arrays: {} problems", n);
  ExpertGemmArrays s;
  int64_t at = 0;
  const auto section = [&](int64_t& offset, int64_t bytes) {
    offset = at;
    at = aligned_up(at + bytes);
  };
  section(s.shapes, 3 * n * static_cast<int64_t>(sizeof(int32_t)));
  for (int64_t* address : {&s.a, &s.b, &s.c, &s.d}) section(*address, n * static_cast<int64_t>(sizeof(uint64_t)));
  for (int64_t* ld : {&s.lda, &s.ldb, &s.ldc, &s.ldd}) section(*ld, n * static_cast<int64_t>(sizeof(int64_t)));
  s.bytes = at;
  return s;
}

void pack_expert_gemm_arrays(const std::vector<ExpertGemmProblem>& problems, std::byte* dst) {
  const auto n = static_cast<int64_t>(problems.size());
  const ExpertGemmArrays s = expert_gemm_arrays(n);
  std::memset(dst, 0, static_cast<size_t>(s.bytes));
  const auto put = [&](int64_t section, int64_t i, const auto& value) {
    std::memcpy(dst + section + i * static_cast<int64_t>(sizeof(value)), &value, sizeof(value));
  };
  for (int64_t i = 0; i < n; ++i) {
    const ExpertGemmProblem& p = problems[static_cast<size_t>(i)];
    put(s.shapes, 3 * i, p.m), put(s.shapes, 3 * i + 1, p.n), put(s.shapes, 3 * i + 2, p.k);
    put(s.a, i, p.a), put(s.b, i, p.b), put(s.c, i, p.d), put(s.d, i, p.d);
    put(s.lda, i, p.lda), put(s.ldb, i, p.ldb), put(s.ldc, i, p.ldd), put(s.ldd, i, p.ldd);
  }
}

void log_expert_gemm_fallback(ExpertGemm g, const std::string& reason) {
  log::info("expert GEMMs ({}): the loop of cuBLASLt GEMMs runs, not CUTLASS's grouped GEMM: {}", expert_gemm_name(g),
            reason);
}

}  // namespace mt
