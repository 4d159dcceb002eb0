// One include for Catch2 2.x (single header) and 3.x (split headers), so tests build on Debian 12 and newer
// systems; `contains(text)` is the substring matcher under either name.
#pragma once
#if __has_include(<catch2/catch_test_macros.hpp>)
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
namespace mt_test {
inline auto contains(const std::string& text) { return Catch::Matchers::ContainsSubstring(text); }
}  // namespace mt_test
using Catch::Approx;  // Catch2 2.x has it in the global namespace
#else
#include <catch2/catch.hpp>
namespace mt_test {
inline auto contains(const std::string& text) { return Catch::Matchers::Contains(text); }
}  // namespace mt_test
#endif
