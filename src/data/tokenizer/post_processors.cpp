// Post-processor implementations: a template is a list of parts, each a run of special ids or the sequence.
#include "data/tokenizer/post_processors.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer/json_fields.h"

namespace mt::tok {
namespace {

class Template final : public PostProcessor {
 public:
  // An empty `ids` part stands for the sequence ($A).
  explicit Template(std::vector<std::vector<int32_t>> parts) : parts_(std::move(parts)) {}
  void process(std::vector<int32_t>& ids) const override {
    std::vector<int32_t> out;
    for (const auto& part : parts_)
      out.insert(out.end(), part.empty() ? ids.begin() : part.begin(), part.empty() ? ids.end() : part.end());
    ids = std::move(out);
  }

 private:
  std::vector<std::vector<int32_t>> parts_;
};

class Sequence final : public PostProcessor {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {}
  void process(std::vector<int32_t>& ids) const override {
    for (const auto& step : steps_) step->process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

std::unique_ptr<PostProcessor> parse_template(const nlohmann::json& j, const std::string& where) {
  const std::string single_where = child(where, "single");
  const nlohmann::json& single = required_field(j, "single", where);
  const nlohmann::json& specials = required_field(j, "special_tokens", where);
  MT_REQUIRE(single.is_array(), "{}: expected an array", single_where);
  std::vector<std::vector<int32_t>> parts;
  int sequences = 0;
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string at = child(single_where, i);
    const nlohmann::json& piece = single[i];
    if (piece.is_object() && piece.contains("Sequence")) {
      MT_REQUIRE(string_field(piece["Sequence"], "id", at) == "A", "{}: the single template can only hold $A", at);
      ++sequences;
      parts.emplace_back();
      continue;
    }
    const std::string name = string_field(required_field(piece, "SpecialToken", at), "id", child(at, "SpecialToken"));
    const std::string special_where = child(child(where, "special_tokens"), name);
    const nlohmann::json& ids = required_field(required_field(specials, name, child(where, "special_tokens")), "ids",
                                               special_where);
    MT_REQUIRE(ids.is_array() && !ids.empty(), "{}: expected a non-empty array of ids", child(special_where, "ids"));
    std::vector<int32_t> part;
    for (const auto& id : ids) {
      MT_REQUIRE(id.is_number_integer() && id.get<int64_t>() >= 0, "{}: bad id {}", child(special_where, "ids"),
                 id.dump());
      part.push_back(id.get<int32_t>());
    }
    parts.push_back(std::move(part));
  }
  MT_REQUIRE(sequences == 1, "{}: expected exactly one $A, found {}", single_where, sequences);
  return std::make_unique<Template>(std::move(parts));
}

}  // namespace

std::unique_ptr<PostProcessor> parse_post_processor(const nlohmann::json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = type_field(j, where);
  if (type == "ByteLevel") return nullptr;
  if (type == "TemplateProcessing") return parse_template(j, where);
  if (type == "Sequence") {
    const std::string list = child(where, "processors");
    const nlohmann::json& items = required_field(j, "processors", where);
    MT_REQUIRE(items.is_array(), "{}: expected an array", list);
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (size_t i = 0; i < items.size(); ++i)
      if (auto step = parse_post_processor(items[i], child(list, i))) steps.push_back(std::move(step));
    return std::make_unique<Sequence>(std::move(steps));
  }
  throw Error(fmt::format(
      "{}: unsupported post_processor type '{}' (supported: TemplateProcessing, ByteLevel, Sequence)", where, type));
}

}  // namespace mt::tok
