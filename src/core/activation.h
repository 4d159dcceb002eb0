// The gate activations of gated MLPs (GLU blocks), shared by model specs and backend ops.
// Invariant: each value names one function exactly as transformers' ACT2FN computes it.
#pragma once

namespace mt {

enum class Activation {
  silu,       // x·σ(x) ("silu", "swish")
  gelu_tanh,  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) ("gelu_pytorch_tanh", Gemma's "gelu_new"-style)
};

}  // namespace mt
