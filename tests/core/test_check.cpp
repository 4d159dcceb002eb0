// The check macro family (core/check.h): a failed call's one-line message names the library, the statement and
// its place with the library's own text; `throw_error` checks raise mt::Error, passing calls do nothing.
#include <string>

#include "catch.h"
#include "core/check.h"
#include "core/error.h"

namespace {

int status(int code) { return code; }
std::string text_of(int code) { return "status " + std::to_string(code); }

}  // namespace

TEST_CASE("MT_CHECK_CALL passes a good status and throws one line naming the failing call", "[check]") {
  const auto passing = [] { MT_CHECK_CALL(throw_error, "LIB", status(0), mt_rc_ == 0, text_of(mt_rc_)); };
  CHECK_NOTHROW(passing());
  try {
    MT_CHECK_CALL(throw_error, "LIB", status(7), mt_rc_ == 0, text_of(mt_rc_));
    FAIL("no error");
  } catch (const mt::Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("LIB call failed at ") == 0);
    CHECK(msg.find("test_check.cpp:") != std::string::npos);
    CHECK(msg.find("`status(7)`: status 7") != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
}
