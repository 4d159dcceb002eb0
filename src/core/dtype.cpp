// Names of element types.
#include "core/dtype.h"

#include "core/error.h"

namespace mt {

std::string_view dtype_name(DType t) {
  return t == DType::f32 ? "float32" : t == DType::bf16 ? "bfloat16" : "float64";
}

DType dtype_from_name(std::string_view name) {
  if (name == "float32" || name == "fp32") return DType::f32;
  if (name == "bfloat16" || name == "bf16") return DType::bf16;
  throw Error(fmt::format("unknown dtype '{}' (expected float32 or bfloat16)", name));
}

}  // namespace mt
