// CLI11 validators for the integer and real flags of the `megatrain` subcommands, whose message names the value
// and the accepted range in words ("--layers: -1 is below the minimum 0"); CLI11 prefixes the flag's name.
// Invariant: a value is accepted exactly when it parses completely as the type and lies in [min, max].
#pragma once
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <string>

namespace mt {

// An integer in [min, max].
inline CLI::Validator integer_in(int64_t min, int64_t max = std::numeric_limits<int64_t>::max()) {
  const std::string range = max == std::numeric_limits<int64_t>::max() ? fmt::format("an integer >= {}", min)
                                                                          : fmt::format("an integer in [{}, {}]", min, max);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        int64_t value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return fmt::format("'{}' is not {}", text, range);
        if (value < min) return fmt::format("{} is below the minimum {}", text, min);
        if (value > max) return fmt::format("{} is above the maximum {}", text, max);
        return {};
      },
      range);
}

// A finite real number > 0 (sizes given in GiB, parameter counts in 1e9 notation).
inline CLI::Validator positive_real() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value) || !(value > 0) || value > std::numeric_limits<double>::max())
          return fmt::format("'{}' is not a positive number", text);
        return {};
      },
      "a positive number");
}

}  // namespace mt
