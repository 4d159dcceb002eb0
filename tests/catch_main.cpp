// Catch2 2.x entry point (Catch2 3.x links Catch2WithMain instead).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
