// The Jinja renderer against transformers itself: tests/data/fixtures/jinja/renders.json (tools/
// make_jinja_fixtures.py) holds what transformers' render_jinja_template (Jinja2, transformers' environment) makes
// of real chat templates (GPT-OSS, Qwen2.5, Qwen3, Llama 3 / 3.1, Mistral, Gemma 2 / 3, Phi-3 / 4, InternLM2, Yi, DeepSeek-R1,
// Hermes tool use, LLaMA-Factory's generated ones) and of our constructs template; ours must match byte for byte,
// and refuse what it refuses. Also: errors name the file, line and column.
#include <fmt/format.h>

#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "catch.h"
#include "core/error.h"
#include "data/templates/jinja/template.h"

namespace mt {
namespace {

using nlohmann::ordered_json;

const std::string kFixtures = std::string(MEGATRAIN_SOURCE_DIR) + "/tests/data/fixtures/jinja/";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// strftime_now as the fixture script pins it: 2024-07-26.
jinja::Value pinned_strftime() {
  return jinja::Value::of(jinja::Function([](jinja::Args& args) {
    std::tm day{};
    day.tm_year = 124;
    day.tm_mon = 6;
    day.tm_mday = 26;
    day.tm_wday = 5;
    char buffer[64];
    const size_t n = std::strftime(buffer, sizeof buffer, args.positional.at(0).string.c_str(), &day);
    return jinja::Value::of(std::string(buffer, n));
  }));
}

std::string render(const std::string& source, const ordered_json& variables = ordered_json::object()) {
  jinja::Dict vars;
  for (const auto& [k, v] : variables.items()) vars.emplace_back(k, jinja::from_json(v));
  return jinja::Template(source, "test.jinja").render(vars);
}

std::string error_of(const std::string& source, const ordered_json& variables = ordered_json::object()) {
  try {
    render(source, variables);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// "" when equal; else where they part, with some text of each from there.
std::string first_difference(const std::string& ours, const std::string& theirs) {
  if (ours == theirs) return "";
  size_t at = 0;
  while (at < ours.size() && at < theirs.size() && ours[at] == theirs[at]) ++at;
  const size_t from = at > 20 ? at - 20 : 0;
  return fmt::format("byte {}: ours \"{}\" transformers \"{}\"", at, ours.substr(from, 60), theirs.substr(from, 60));
}

}  // namespace

TEST_CASE("chat templates render what transformers renders, byte for byte", "[data][jinja]") {
  const ordered_json fixtures = ordered_json::parse(read_text(kFixtures + "renders.json"));
  REQUIRE(fixtures.size() >= 20);
  size_t renders = 0, refusals = 0;
  for (const auto& fixture : fixtures) {
    const std::string name = fixture["template"];
    const std::string source = fixture.contains("file") ? read_text(kFixtures + fixture["file"].get<std::string>())
                                                        : fixture["source"].get<std::string>();
    const jinja::Template compiled(source, name + ".jinja");
    for (const auto& c : fixture["cases"]) {
      INFO(name << " / " << c["name"].get<std::string>());
      jinja::Dict vars;
      for (const auto& [k, v] : c["variables"].items()) vars.emplace_back(k, jinja::from_json(v));
      vars.emplace_back("messages", jinja::from_json(c["messages"]));
      vars.emplace_back("tools", jinja::from_json(c["tools"]));
      vars.emplace_back("documents", jinja::Value::none());
      vars.emplace_back("add_generation_prompt", jinja::Value::of(c["add_generation_prompt"].get<bool>()));
      vars.emplace_back("strftime_now", pinned_strftime());
      if (c.contains("rendered")) {
        CHECK(first_difference(compiled.render(vars), c["rendered"].get<std::string>()) == "");
        ++renders;
      } else {
        const std::string expected = c["error"];
        try {
          compiled.render(vars);
          FAIL("rendered what transformers refuses: " << expected);
        } catch (const Error& e) {
          CHECK(std::string(e.what()).find(expected) != std::string::npos);
        }
        ++refusals;
      }
    }
  }
  CHECK(renders >= 100);
  CHECK(refusals == 4);
}

TEST_CASE("Jinja whitespace control as transformers configures it", "[data][jinja]") {
  CHECK(render("a\n  {% if true %}\n  b\n  {% endif %}\nc") == "a\n  b\nc");
  CHECK(render("a  {%- if true -%}  b  {%- endif %}  c") == "ab  c");
  CHECK(render("  {%+ if true %}x{% endif +%}\ny") == "  x\ny");
  CHECK(render("x {# note #}\ny") == "x y");
  CHECK(render("line\n") == "line");
  CHECK(render("a\r\nb") == "a\nb");
  CHECK(render("{{ 'a' }}  \n  {{- 'b' }}") == "ab");
}

TEST_CASE("Jinja values print as Python prints them", "[data][jinja]") {
  CHECK(render("{{ none }} {{ true }} {{ 1.0 }} {{ 1e20 }} {{ 2 ** 0.5 }}") ==
        "None True 1.0 1e+20 1.4142135623730951");
  CHECK(render("{{ ['a', \"it's\", 1, none] }} {{ {'k': (1,)} }}") == "['a', \"it's\", 1, None] {'k': (1,)}");
  CHECK(render("{{ 'héllo'[::-1] }} {{ 'héllo' | length }} {{ 'héllo'[1] }}") == "olléh 5 é");
  CHECK(render("{{ m.content | tojson }}", {{"m", {{"content", "é\n\"q\""}}}}) == "\"é\\n\\\"q\\\"\"");
}

TEST_CASE("Jinja scoping: loops are scopes, namespaces carry values out, macros see the top level", "[data][jinja]") {
  CHECK(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}") == "1");
  CHECK(render("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = i %}{% endfor %}{{ ns.x }}") == "2");
  CHECK(render("{% for i in [1, 2] %}{% if i == 1 %}{% set y = 5 %}{% endif %}[{{ y }}]{% endfor %}") == "[5][]");
  CHECK(render("{% set y = 1 %}{% macro m(a) %}{{ a }}{{ y }}{% endmacro %}{% set y = 2 %}{{ m(3) }}") == "32");
  CHECK(render("{% for a, b in {'x': 1}.items() %}{{ a }}{{ b }}{% endfor %}{% for x in [] %}no{% else %}empty{% endfor %}") ==
        "x1empty");
}

TEST_CASE("Jinja errors are one line naming the file, line and column", "[data][jinja]") {
  CHECK(error_of("ok\n{% if x %}") == "test.jinja:2:11: unexpected end of template, expected 'endif'");
  CHECK(error_of("{{ messages[0].content.foo.bar }}", {{"messages", ordered_json::array()}}) ==
        "test.jinja:1:4: 'messages[0]' is undefined");
  CHECK(error_of("\n  {{ raise_exception('roles must alternate') }}") == "test.jinja:2:6: roles must alternate");
  CHECK(error_of("{% include 'x.jinja' %}") ==
        "test.jinja:1:4: the 'include' statement is not supported in chat templates here");
  CHECK(error_of("{{ x | frobnicate }}") == "test.jinja:1:6: no filter named 'frobnicate'");
  CHECK(error_of("{{ 'a' @ 1 }}") == "test.jinja:1:8: unexpected char '@'");
  CHECK(error_of("{{ '%s' % 1 }}") == "test.jinja:1:9: printf-style '%' formatting of strings is not supported");
  CHECK(error_of("{{ 1 < 2 < 3 }}") == "test.jinja:1:10: chained comparisons are not supported");
  CHECK(error_of("{{ 'abc") == "test.jinja:1:4: unexpected end of string");
}

}  // namespace mt
