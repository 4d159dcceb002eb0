// Every run config shipped in configs/ loads and validates with load_config (what `megatrain train --config`
// does first), and states the hardware it was sized for.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "catch.h"
#include "config/config.h"

TEST_CASE("config: every configs/*.yaml loads and names its hardware", "[config]") {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(MEGATRAIN_SOURCE_DIR "/configs")) {
    if (e.path().extension() != ".yaml") continue;
    ++files;
    INFO(e.path().string());
    mt::Config c;
    REQUIRE_NOTHROW(c = mt::load_config(e.path()));
    CHECK(!c.model.name.empty());
    CHECK(!c.dataset.name.empty());
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    CHECK_THAT(text.str(), mt_test::contains("Sized for"));
  }
  CHECK(files >= 8);
}
