// JSON for the importers (safetensors headers, Hugging Face config.json and
// index files), parsed by nlohmann::json (Debian's nlohmann-json3-dev), not
// by hand. Bounded: an input longer than the caller's limit is refused
// before it is parsed; a first pass over nlohmann's SAX events, which builds
// nothing, refuses nesting deeper than kMaxJsonDepth, more than the caller's
// number of values, and an object that names a key twice (nlohmann keeps the
// last value of a repeated key silently; a tensor named twice must not
// pass), stopping where it finds one; only then is the document built, so
// its memory is bounded by the values allowed, not by what the bytes could
// describe. The importers are built without exceptions: nlohmann then
// aborts where it would throw, so every access checks the value's type
// first (the fuzz targets hold them to it).
#ifndef TINYAI_IMPORT_JSON_H_
#define TINYAI_IMPORT_JSON_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tinyai/status.h"

namespace tinyai {

constexpr size_t kMaxJsonDepth = 64;

// Checks size bytes at data as above without building anything: valid JSON,
// nested at most kMaxJsonDepth deep, at most max_values values and keys, no
// key twice in an object. TINYAI_ERR_BAD_FORMAT naming source and what is
// wrong (the byte where the syntax breaks, the repeated key, the depth);
// TINYAI_ERR_UNSUPPORTED for too many values.
TinyAIStatus CheckJson(const char* data, size_t size, size_t max_values, const std::string& source);

// CheckJson, then the document. TINYAI_ERR_UNSUPPORTED when size > max_bytes.
TinyAIStatus ParseJson(const char* data, size_t size, size_t max_bytes, size_t max_values, const std::string& source,
                       nlohmann::json* out);

// Reads and parses a whole file (TINYAI_ERR_FILE_NOT_FOUND / TINYAI_ERR_IO as
// the port says; over max_bytes: TINYAI_ERR_UNSUPPORTED before it is read).
TinyAIStatus ReadJsonFile(const std::string& path, size_t max_bytes, size_t max_values, nlohmann::json* out);

// Typed reads of an object's member. A missing member is TINYAI_ERR_BAD_FORMAT
// (or, with `found`, *found = false and TINYAI_OK); a member of another type
// or out of range is TINYAI_ERR_BAD_FORMAT naming source, key and what it is.
TinyAIStatus JsonUint(const nlohmann::json& object, const char* key, uint64_t max, const std::string& source,
                      uint64_t* out, bool* found = nullptr);
TinyAIStatus JsonFloat(const nlohmann::json& object, const char* key, const std::string& source, float* out,
                       bool* found = nullptr);
TinyAIStatus JsonString(const nlohmann::json& object, const char* key, const std::string& source, std::string* out,
                        bool* found = nullptr);
TinyAIStatus JsonBool(const nlohmann::json& object, const char* key, const std::string& source, bool* out,
                      bool* found = nullptr);

// What a JSON value is, for messages ("a string", "an array", ...).
const char* JsonKind(const nlohmann::json& v);

}  // namespace tinyai

#endif  // TINYAI_IMPORT_JSON_H_
