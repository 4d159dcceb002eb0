// Normalizer implementations; NFC comes from ICU (Unicode 15 in Debian 12's ICU 72), with an ASCII fast path.
#include "data/tokenizer/normalizers.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include <vector>

#include "core/error.h"
#include "data/tokenizer/json_fields.h"
#include "data/tokenizer/pattern.h"

namespace mt::tok {
namespace {

bool is_ascii(const std::string& text) {
  for (const char c : text)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

class Nfc final : public Normalizer {
 public:
  Nfc() {
    UErrorCode status = U_ZERO_ERROR;
    nfc_ = icu::Normalizer2::getNFCInstance(status);
    MT_REQUIRE(U_SUCCESS(status), "ICU: NFC normalizer unavailable: {}", u_errorName(status));
  }
  void normalize(std::string& text) const override {
    if (is_ascii(text)) return;
    const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
    UErrorCode status = U_ZERO_ERROR;
    if (nfc_->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return;
    std::string out;
    icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
    status = U_ZERO_ERROR;
    nfc_->normalizeUTF8(0, piece, sink, nullptr, status);
    MT_ASSERT(U_SUCCESS(status), "ICU NFC: {}", u_errorName(status));
    text = std::move(out);
  }

 private:
  const icu::Normalizer2* nfc_ = nullptr;
};

class Replace final : public Normalizer {
 public:
  Replace(Pattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text) const override { text = pattern_.replace_all(text, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(std::string& text) const override {
    for (const auto& step : steps_) step->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Normalizer> parse_normalizer(const nlohmann::json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string type = type_field(j, where);
  if (type == "NFC") return std::make_unique<Nfc>();
  if (type == "Replace")
    return std::make_unique<Replace>(Pattern::from_json(required_field(j, "pattern", where), child(where, "pattern")),
                                     string_field(j, "content", where));
  if (type == "Prepend") return std::make_unique<Prepend>(string_field(j, "prepend", where));
  if (type == "Sequence") {
    const std::string list = child(where, "normalizers");
    const nlohmann::json& items = required_field(j, "normalizers", where);
    MT_REQUIRE(items.is_array(), "{}: expected an array", list);
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < items.size(); ++i)
      if (auto step = parse_normalizer(items[i], child(list, i))) steps.push_back(std::move(step));
    return std::make_unique<Sequence>(std::move(steps));
  }
  throw Error(fmt::format("{}: unsupported normalizer type '{}' (supported: Sequence, NFC, Replace, Prepend)", where,
                          type));
}

}  // namespace mt::tok
