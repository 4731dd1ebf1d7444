#include "import/safetensors.h"

#include <algorithm>
#include <cstring>

#include "common/checked_math.h"
#include "common/status.h"
#include "import/json.h"

namespace tinyai {
namespace safetensors {

uint64_t Tensor::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;  // checked by Parse
  return n;
}

const Tensor* File::Find(const std::string& name) const {
  for (const Tensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

uint64_t DTypeBytes(const std::string& d) {
  if (d == "BOOL" || d == "U8" || d == "I8" || d == "F8_E5M2" || d == "F8_E4M3") return 1;
  if (d == "I16" || d == "U16" || d == "F16" || d == "BF16") return 2;
  if (d == "I32" || d == "U32" || d == "F32") return 4;
  if (d == "I64" || d == "U64" || d == "F64") return 8;
  return 0;
}

TinyAIStatus Parse(const uint8_t* data, uint64_t available, uint64_t size, const std::string& source, File* out) {
  const char* src = source.c_str();
  if (size < 8 || available < 8) {
    return SetError(TINYAI_ERR_TRUNCATED, "'%s': %llu bytes; a safetensors file starts with an 8-byte header length",
                    src, static_cast<unsigned long long>(size));
  }
  uint64_t n = 0;
  std::memcpy(&n, data, 8);
  if (n > kMaxHeaderBytes) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': a header of %llu bytes; TinyAI reads headers up to %llu bytes (as "
                    "the reference reader does)", src, static_cast<unsigned long long>(n),
                    static_cast<unsigned long long>(kMaxHeaderBytes));
  }
  if (n > size - 8 || n > available - 8) {
    return SetError(TINYAI_ERR_TRUNCATED, "'%s': a header of %llu bytes in a file of %llu", src,
                    static_cast<unsigned long long>(n), static_cast<unsigned long long>(size));
  }
  nlohmann::json header;
  TINYAI_RETURN_IF_ERROR(ParseJson(reinterpret_cast<const char*>(data + 8), static_cast<size_t>(n),
                                   static_cast<size_t>(kMaxHeaderBytes), source + " (header)", &header));
  if (!header.is_object()) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': the header is %s, not a JSON object", src, JsonKind(header));
  }
  File f;
  f.source = source;
  f.size = size;
  f.data_offset = 8 + n;
  const uint64_t data_bytes = size - f.data_offset;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': __metadata__ is %s, not an object of strings", src, JsonKind(v));
      }
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) {
          return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': __metadata__ '%s' is %s, not a string", src, m.key().c_str(),
                          JsonKind(m.value()));
        }
        f.metadata.emplace_back(m.key(), m.value().get_ref<const std::string&>());
      }
      continue;
    }
    const std::string where = source + ": tensor '" + name + "'";
    if (!v.is_object()) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' is %s, not an object", src, name.c_str(), JsonKind(v));
    }
    for (auto m = v.begin(); m != v.end(); ++m) {
      if (m.key() != "dtype" && m.key() != "shape" && m.key() != "data_offsets") {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has an unknown field '%s'", src, name.c_str(),
                        m.key().c_str());
      }
    }
    Tensor t;
    t.name = name;
    TINYAI_RETURN_IF_ERROR(JsonString(v, "dtype", where, &t.dtype));
    const uint64_t each = DTypeBytes(t.dtype);
    if (each == 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has dtype '%s', which safetensors does not define", src,
                      name.c_str(), t.dtype.c_str());
    }
    auto shape = v.find("shape");
    auto offsets = v.find("data_offsets");
    if (shape == v.end() || !shape->is_array()) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has no shape array", src, name.c_str());
    }
    if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has no data_offsets [begin, end]", src, name.c_str());
    }
    uint64_t elements = 1;
    for (const nlohmann::json& d : *shape) {
      if (!d.is_number_unsigned()) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has a dimension that is %s, not an integer >= 0", src,
                        name.c_str(), JsonKind(d));
      }
      t.shape.push_back(d.get<uint64_t>());
      if (!CheckedMul(elements, t.shape.back(), &elements)) {
        return SetError(TINYAI_ERR_OVERFLOW, "'%s': tensor '%s': its shape overflows 64 bits", src, name.c_str());
      }
    }
    uint64_t bytes = 0;
    if (!CheckedMul(elements, each, &bytes)) {
      return SetError(TINYAI_ERR_OVERFLOW, "'%s': tensor '%s': its size overflows 64 bits", src, name.c_str());
    }
    for (const nlohmann::json& o : *offsets) {
      if (!o.is_number_unsigned()) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has a data offset that is %s, not an integer >= 0",
                        src, name.c_str(), JsonKind(o));
      }
    }
    const uint64_t begin = (*offsets)[0].get<uint64_t>(), end = (*offsets)[1].get<uint64_t>();
    if (end < begin) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' ends (%llu) before it begins (%llu)", src, name.c_str(),
                      static_cast<unsigned long long>(end), static_cast<unsigned long long>(begin));
    }
    if (end > data_bytes) {
      return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "'%s': tensor '%s' ends at %llu, past the %llu bytes of data", src,
                      name.c_str(), static_cast<unsigned long long>(end), static_cast<unsigned long long>(data_bytes));
    }
    if (end - begin != bytes) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has %llu bytes, but its shape of %llu %s values needs "
                      "%llu", src, name.c_str(), static_cast<unsigned long long>(end - begin),
                      static_cast<unsigned long long>(elements), t.dtype.c_str(), static_cast<unsigned long long>(bytes));
    }
    t.offset = f.data_offset + begin;
    t.bytes = bytes;
    f.tensors.push_back(std::move(t));
  }
  // The data, tiled: no overlap, no gap, nothing after the last tensor.
  std::vector<const Tensor*> order;
  for (const Tensor& t : f.tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const Tensor* a, const Tensor* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->bytes < b->bytes;
  });
  uint64_t at = f.data_offset;
  for (const Tensor* t : order) {
    if (t->offset != at) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' starts at byte %llu of the data, not at %llu where the "
                      "one before it ends (tensors overlap or leave a gap)", src, t->name.c_str(),
                      static_cast<unsigned long long>(t->offset - f.data_offset),
                      static_cast<unsigned long long>(at - f.data_offset));
    }
    at += t->bytes;
  }
  if (at != size) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': %llu bytes after the last tensor's data", src,
                    static_cast<unsigned long long>(size - at));
  }
  *out = std::move(f);
  return TINYAI_OK;
}

}  // namespace safetensors
}  // namespace tinyai
