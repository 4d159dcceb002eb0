// mt::real, the element type of the CPU reference's arithmetic and of the op interface's fp32 slots (gradient
// accumulators, log-sum-exps, RoPE tables, ALiBi slopes, routing weights, delta-rule gates): float in every build of
// MegaTrain; double where a target compiles its own copy of the CPU backend and the layer templates with
// MT_REAL_DOUBLE defined (tests_grad64, the fp64 finite-difference gradient checks). real_dtype is the CPU backend's
// dtype() to match.
// Invariant: no program links code compiled with both definitions (one definition rule); code that holds or streams
// model state (the host store, the engine's pipeline, the optimizer, the CUDA backend) is fp32 and never compiled
// with MT_REAL_DOUBLE.
#pragma once
#include "core/dtype.h"

namespace mt {

#ifdef MT_REAL_DOUBLE
using real = double;
#else
using real = float;
#endif

constexpr DType real_dtype = sizeof(real) == 8 ? DType::f64 : DType::f32;

}  // namespace mt
