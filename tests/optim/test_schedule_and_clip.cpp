// Learning-rate schedules against transformers' formulas, and clipping against clip_grad_norm_.
#include <cmath>
#include <numbers>

#include "catch.h"
#include "optim/grad_clip.h"
#include "optim/lr_schedule.h"

TEST_CASE("warmup starts at zero and reaches the base rate", "[schedule]") {
  const mt::LrSchedule s{"constant", 1.0, 4, 10, 0.0};
  CHECK(mt::lr_at(s, 1) == 0.0);
  CHECK(mt::lr_at(s, 3) == 0.5);
  CHECK(mt::lr_at(s, 5) == 1.0);
  CHECK(mt::lr_at(s, 10) == 1.0);
}

TEST_CASE("linear decay with a floor", "[schedule]") {
  const mt::LrSchedule s{"linear", 2.0, 0, 4, 0.25};
  CHECK(mt::lr_at(s, 1) == 2.0);
  CHECK(std::abs(mt::lr_at(s, 3) - 2.0 * (0.25 + 0.75 * 0.5)) < 1e-15);
}

TEST_CASE("cosine decay with warmup and a floor", "[schedule]") {
  const mt::LrSchedule s{"cosine", 1e-3, 1, 4, 0.1};
  // The llama fixture's recorded rates.
  CHECK(mt::lr_at(s, 1) == 0.0);
  CHECK(std::abs(mt::lr_at(s, 2) - 1e-3) < 1e-18);
  const double progress = 2.0 / 3.0;
  CHECK(std::abs(mt::lr_at(s, 4) - 1e-3 * (0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * progress)))) < 1e-18);
}

TEST_CASE("clipping coefficient as clip_grad_norm_", "[clip]") {
  CHECK(mt::clip_coefficient(0.5, 1.0) == 1.0f);
  CHECK(std::abs(mt::clip_coefficient(4.0, 1.0) - 0.25f) < 1e-6f);
  CHECK(mt::clip_coefficient(1e9, 0.0) == 1.0f);
}
