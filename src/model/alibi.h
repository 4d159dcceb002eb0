// ALiBi head slopes as Baichuan 2's modeling code computes them (_get_interleave): for n a power of two,
// start·ratio^i with start = ratio = 2^(−2^−(log2 n − 3)); otherwise the slopes of the closest lower power of two
// followed by every other slope of twice that power. Invariant: n slopes, fp32 as torch.Tensor holds them.
#pragma once
#include <cstdint>
#include <vector>

namespace mt {

std::vector<float> alibi_slopes(int64_t num_heads);

}  // namespace mt
