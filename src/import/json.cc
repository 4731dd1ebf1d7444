#include "import/json.h"

#include <cmath>
#include <unordered_set>
#include <vector>

#include "common/printable.h"
#include "common/status.h"
#include "port/port.h"

namespace tinyai {

namespace {

// The first pass: counts, depth and repeated keys from nlohmann's SAX
// events; stops (returns false) at the first problem, which it records.
class Checker : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit Checker(size_t max_values) : max_values_(max_values) {}

  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override { return Open(true); }
  bool key(string_t& k) override {
    if (!Value()) return false;
    if (!levels_.empty() && !levels_.back().insert(k).second) {
      problem_ = kRepeated;
      detail_ = k;
      return false;
    }
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(false); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    problem_ = kSyntax;
    at_ = position;
    detail_ = e.what();
    return false;
  }

  enum Problem { kNone, kSyntax, kRepeated, kDepth, kValues };
  Problem problem() const { return problem_; }
  const std::string& detail() const { return detail_; }
  size_t at() const { return at_; }

 private:
  bool Value() {
    if (++values_ > max_values_) {
      problem_ = kValues;
      return false;
    }
    return true;
  }
  bool Open(bool object) {
    if (!Value()) return false;
    if (levels_.size() >= kMaxJsonDepth) {
      problem_ = kDepth;
      return false;
    }
    levels_.emplace_back();
    if (!object) levels_.back().insert(std::string());  // arrays hold no keys; the set stays unused
    return true;
  }
  bool Close() {
    if (!levels_.empty()) levels_.pop_back();
    return true;
  }

  size_t max_values_;
  size_t values_ = 0;
  std::vector<std::unordered_set<std::string>> levels_;  // the keys of each open object
  Problem problem_ = kNone;
  std::string detail_;
  size_t at_ = 0;
};

}  // namespace

TinyAIStatus CheckJson(const char* data, size_t size, size_t max_values, const std::string& source) {
  Checker checker(max_values);
  const bool ok = nlohmann::json::sax_parse(data, data + size, &checker, nlohmann::json::input_format_t::json,
                                            /*strict=*/true);
  if (ok && checker.problem() == Checker::kNone) return TINYAI_OK;
  switch (checker.problem()) {
    case Checker::kRepeated:
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' appears twice in one object", source.c_str(),
                      Printable(checker.detail()).c_str());
    case Checker::kDepth:
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': JSON nested more than %zu deep", source.c_str(), kMaxJsonDepth);
    case Checker::kValues:
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': more than %zu JSON values; TinyAI reads at most that many",
                      source.c_str(), max_values);
    default:
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': not valid JSON (at byte %zu: %s)", source.c_str(), checker.at(),
                      checker.detail().c_str());
  }
}

TinyAIStatus ParseJson(const char* data, size_t size, size_t max_bytes, size_t max_values, const std::string& source,
                       nlohmann::json* out) {
  if (size > max_bytes) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': %zu bytes of JSON; TinyAI reads at most %zu", source.c_str(), size,
                    max_bytes);
  }
  TINYAI_RETURN_IF_ERROR(CheckJson(data, size, max_values, source));
  nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {  // CheckJson accepted it: not expected
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': not valid JSON", source.c_str());
  }
  *out = std::move(j);
  return TINYAI_OK;
}

TinyAIStatus ReadJsonFile(const std::string& path, size_t max_bytes, size_t max_values, nlohmann::json* out) {
  port::File f;
  TINYAI_RETURN_IF_ERROR(port::OpenFile(path.c_str(), &f));
  struct Close {
    port::File* f;
    ~Close() { port::CloseFile(f); }
  } close{&f};
  if (f.size > max_bytes) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': %llu bytes of JSON; TinyAI reads at most %zu", path.c_str(),
                    static_cast<unsigned long long>(f.size), max_bytes);
  }
  std::string text(static_cast<size_t>(f.size), '\0');
  if (!text.empty()) TINYAI_RETURN_IF_ERROR(port::ReadAt(f, 0, &text[0], text.size(), path.c_str()));
  return ParseJson(text.data(), text.size(), max_bytes, max_values, path, out);
}

const char* JsonKind(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::number_integer: return "a negative integer";
    case nlohmann::json::value_t::number_unsigned: return "an integer";
    case nlohmann::json::value_t::number_float: return "a fractional number";
    default: return "another kind of value";
  }
}

namespace {

// The member, or null with *found = false (a missing member is an error
// without `found`).
TinyAIStatus Member(const nlohmann::json& object, const char* key, const std::string& source, bool* found,
                    const nlohmann::json** out) {
  *out = nullptr;
  if (!object.is_object()) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': not a JSON object", source.c_str());
  auto it = object.find(key);
  if (found) *found = it != object.end();
  if (it == object.end()) {
    if (found) return TINYAI_OK;
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': no '%s'", source.c_str(), key);
  }
  *out = &*it;
  return TINYAI_OK;
}

}  // namespace

TinyAIStatus JsonUint(const nlohmann::json& object, const char* key, uint64_t max, const std::string& source,
                      uint64_t* out, bool* found) {
  const nlohmann::json* v = nullptr;
  TINYAI_RETURN_IF_ERROR(Member(object, key, source, found, &v));
  if (v == nullptr) return TINYAI_OK;
  if (!v->is_number_unsigned() || v->get<uint64_t>() > max) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': '%s' is %s%s, not an integer in 0..%llu", source.c_str(), key,
                    JsonKind(*v), v->is_number_unsigned() ? " out of range" : "", static_cast<unsigned long long>(max));
  }
  *out = v->get<uint64_t>();
  return TINYAI_OK;
}

TinyAIStatus JsonFloat(const nlohmann::json& object, const char* key, const std::string& source, float* out,
                       bool* found) {
  const nlohmann::json* v = nullptr;
  TINYAI_RETURN_IF_ERROR(Member(object, key, source, found, &v));
  if (v == nullptr) return TINYAI_OK;
  if (!v->is_number()) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': '%s' is %s, not a number", source.c_str(), key, JsonKind(*v));
  const double d = v->get<double>();
  if (!(std::fabs(d) <= 3.4028234663852886e38)) {  // NaN, infinite or beyond float: the cast is undefined
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': '%s' (%g) is not a finite float", source.c_str(), key, d);
  }
  *out = static_cast<float>(d);
  return TINYAI_OK;
}

TinyAIStatus JsonString(const nlohmann::json& object, const char* key, const std::string& source, std::string* out,
                        bool* found) {
  const nlohmann::json* v = nullptr;
  TINYAI_RETURN_IF_ERROR(Member(object, key, source, found, &v));
  if (v == nullptr) return TINYAI_OK;
  if (!v->is_string()) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': '%s' is %s, not a string", source.c_str(), key, JsonKind(*v));
  *out = v->get_ref<const std::string&>();
  return TINYAI_OK;
}

TinyAIStatus JsonBool(const nlohmann::json& object, const char* key, const std::string& source, bool* out,
                      bool* found) {
  const nlohmann::json* v = nullptr;
  TINYAI_RETURN_IF_ERROR(Member(object, key, source, found, &v));
  if (v == nullptr) return TINYAI_OK;
  if (!v->is_boolean()) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': '%s' is %s, not true or false", source.c_str(), key, JsonKind(*v));
  *out = v->get<bool>();
  return TINYAI_OK;
}

}  // namespace tinyai
