#include "import/json.h"

#include <cmath>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "port/port.h"

namespace tinyai {

TinyAIStatus ParseJson(const char* data, size_t size, size_t max_bytes, const std::string& source, nlohmann::json* out) {
  if (size > max_bytes) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': %zu bytes of JSON; TinyAI reads at most %zu", source.c_str(), size,
                    max_bytes);
  }
  // The keys of each object being parsed, innermost last.
  std::vector<std::unordered_set<std::string>> objects;
  std::string repeated;
  size_t deepest = 0;
  auto callback = [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    switch (event) {
      case E::object_start:
        objects.emplace_back();
        deepest = objects.size() > deepest ? objects.size() : deepest;
        break;
      case E::object_end:
        if (!objects.empty()) objects.pop_back();
        break;
      case E::array_start:
        objects.emplace_back();  // counts toward the depth; holds no keys
        deepest = objects.size() > deepest ? objects.size() : deepest;
        break;
      case E::array_end:
        if (!objects.empty()) objects.pop_back();
        break;
      case E::key:
        if (!objects.empty() && parsed.is_string() && !objects.back().insert(parsed.get_ref<const std::string&>()).second &&
            repeated.empty()) {
          repeated = parsed.get_ref<const std::string&>();
        }
        break;
      case E::value:
        break;
    }
    return true;
  };
  nlohmann::json j = nlohmann::json::parse(data, data + size, callback, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    // Where the syntax breaks: parse again with a SAX handler that records it.
    struct Where : nlohmann::json_sax<nlohmann::json> {
      size_t at = 0;
      std::string what;
      bool null() override { return true; }
      bool boolean(bool) override { return true; }
      bool number_integer(number_integer_t) override { return true; }
      bool number_unsigned(number_unsigned_t) override { return true; }
      bool number_float(number_float_t, const string_t&) override { return true; }
      bool string(string_t&) override { return true; }
      bool binary(binary_t&) override { return true; }
      bool start_object(std::size_t) override { return true; }
      bool key(string_t&) override { return true; }
      bool end_object() override { return true; }
      bool start_array(std::size_t) override { return true; }
      bool end_array() override { return true; }
      bool parse_error(std::size_t position, const std::string& token, const nlohmann::detail::exception& e) override {
        at = position;
        what = e.what();
        (void)token;
        return false;
      }
    } where;
    nlohmann::json::sax_parse(data, data + size, &where, nlohmann::json::input_format_t::json, /*strict=*/true);
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': not valid JSON (at byte %zu: %s)", source.c_str(), where.at,
                    where.what.c_str());
  }
  if (!repeated.empty()) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' appears twice in one object", source.c_str(), repeated.c_str());
  }
  if (deepest > kMaxJsonDepth) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': JSON nested %zu deep; at most %zu", source.c_str(), deepest,
                    kMaxJsonDepth);
  }
  *out = std::move(j);
  return TINYAI_OK;
}

TinyAIStatus ReadJsonFile(const std::string& path, size_t max_bytes, nlohmann::json* out) {
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
  return ParseJson(text.data(), text.size(), max_bytes, path, out);
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
  if (!std::isfinite(d) || std::fabs(d) > 3.0e38) {
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
