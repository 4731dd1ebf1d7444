#include "import/gguf.h"

#include <cmath>
#include <cstring>

#include "common/checked_math.h"
#include "common/printable.h"
#include "common/status.h"

namespace tinyai {
namespace gguf {

namespace {

template <class T>
T Read(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

TinyAIStatus WrongType(const File& f, const std::string& key, const Value& v, const char* wanted) {
  const std::string got = v.type == kArray ? std::string("array of ") + ValueTypeName(v.elem_type) : ValueTypeName(v.type);
  return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' is %s, not %s", f.source.c_str(), Printable(key).c_str(), got.c_str(),
                  wanted);
}

}  // namespace

const KeyValue* File::Find(const std::string& key) const {
  for (const KeyValue& kv : kvs) {
    if (kv.key == key) return &kv;
  }
  return nullptr;
}

const TensorInfo* File::FindTensor(const std::string& name) const {
  for (const TensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {

// The key's value, or the missing key's status.
TinyAIStatus Lookup(const File& f, const std::string& key, bool* found, const Value** v) {
  const KeyValue* kv = f.Find(key);
  if (found) *found = kv != nullptr;
  if (kv == nullptr) {
    if (found) return TINYAI_OK;
    return SetError(TINYAI_ERR_NOT_FOUND, "'%s': no key '%s'", f.source.c_str(), Printable(key).c_str());
  }
  *v = &kv->value;
  return TINYAI_OK;
}

// An array of more than max elements is refused before it is read.
TinyAIStatus CheckCount(const File& f, const std::string& key, const Value& v, uint64_t max) {
  if (v.count <= max) return TINYAI_OK;
  return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': key '%s' holds %llu values; TinyAI reads at most %llu",
                  f.source.c_str(), Printable(key).c_str(), static_cast<unsigned long long>(v.count),
                  static_cast<unsigned long long>(max));
}

}  // namespace

TinyAIStatus File::GetInt(const std::string& key, int64_t* out, bool* found) const {
  const Value* v = nullptr;
  TINYAI_RETURN_IF_ERROR(Lookup(*this, key, found, &v));
  if (v == nullptr) return TINYAI_OK;
  if (!IsInteger(v->type)) return WrongType(*this, key, *v, "an integer");
  if (!ReadInteger(data + v->offset, v->type, out)) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' is out of range", source.c_str(), Printable(key).c_str());
  }
  return TINYAI_OK;
}

TinyAIStatus File::GetUint(const std::string& key, uint64_t max, uint64_t* out, bool* found) const {
  const Value* v = nullptr;
  TINYAI_RETURN_IF_ERROR(Lookup(*this, key, found, &v));
  if (v == nullptr) return TINYAI_OK;
  int64_t value = 0;
  if (!IsInteger(v->type)) return WrongType(*this, key, *v, "an integer");
  if (!ReadInteger(data + v->offset, v->type, &value) || value < 0 || static_cast<uint64_t>(value) > max) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' is out of range (0..%llu)", source.c_str(), Printable(key).c_str(),
                    static_cast<unsigned long long>(max));
  }
  *out = static_cast<uint64_t>(value);
  return TINYAI_OK;
}

TinyAIStatus File::GetFloat(const std::string& key, float* out, bool* found) const {
  const Value* v = nullptr;
  TINYAI_RETURN_IF_ERROR(Lookup(*this, key, found, &v));
  if (v == nullptr) return TINYAI_OK;
  if (v->type == kFloat32) {
    *out = Read<float>(data + v->offset);
  } else if (v->type == kFloat64) {
    const double d = Read<double>(data + v->offset);
    if (!(std::fabs(d) <= 3.4028234663852886e38)) {  // NaN, infinite or beyond float: the cast is undefined
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' (%g) is not a finite float", source.c_str(), Printable(key).c_str(), d);
    }
    *out = static_cast<float>(d);
  } else {
    return WrongType(*this, key, *v, "a float");
  }
  return TINYAI_OK;
}

TinyAIStatus File::GetString(const std::string& key, std::string* out, bool* found) const {
  const Value* v = nullptr;
  TINYAI_RETURN_IF_ERROR(Lookup(*this, key, found, &v));
  if (v == nullptr) return TINYAI_OK;
  if (v->type != kString) return WrongType(*this, key, *v, "a string");
  const uint64_t length = Read<uint64_t>(data + v->offset);
  out->assign(reinterpret_cast<const char*>(data + v->offset + 8), static_cast<size_t>(length));
  return TINYAI_OK;
}

TinyAIStatus File::GetStrings(const std::string& key, uint64_t max_count, std::vector<std::string>* out,
                              bool* found) const {
  const Value* v = nullptr;
  TINYAI_RETURN_IF_ERROR(Lookup(*this, key, found, &v));
  if (v == nullptr) return TINYAI_OK;
  if (v->type != kArray || v->elem_type != kString) return WrongType(*this, key, *v, "an array of strings");
  TINYAI_RETURN_IF_ERROR(CheckCount(*this, key, *v, max_count));
  out->clear();
  out->reserve(static_cast<size_t>(v->count));
  uint64_t at = v->offset;
  for (uint64_t i = 0; i < v->count; ++i) {  // validated by Parse
    const uint64_t length = Read<uint64_t>(data + at);
    out->emplace_back(reinterpret_cast<const char*>(data + at + 8), static_cast<size_t>(length));
    at += 8 + length;
  }
  return TINYAI_OK;
}

TinyAIStatus File::GetFloats(const std::string& key, uint64_t max_count, std::vector<float>* out, bool* found) const {
  const Value* v = nullptr;
  TINYAI_RETURN_IF_ERROR(Lookup(*this, key, found, &v));
  if (v == nullptr) return TINYAI_OK;
  if (v->type != kArray || v->elem_type != kFloat32) return WrongType(*this, key, *v, "an array of float32");
  TINYAI_RETURN_IF_ERROR(CheckCount(*this, key, *v, max_count));
  out->resize(static_cast<size_t>(v->count));
  if (v->count > 0) std::memcpy(out->data(), data + v->offset, static_cast<size_t>(v->count) * sizeof(float));
  return TINYAI_OK;
}

TinyAIStatus File::GetInts(const std::string& key, uint64_t max_count, std::vector<int64_t>* out, bool* found) const {
  const Value* v = nullptr;
  TINYAI_RETURN_IF_ERROR(Lookup(*this, key, found, &v));
  if (v == nullptr) return TINYAI_OK;
  if (v->type != kArray || !IsInteger(v->elem_type)) return WrongType(*this, key, *v, "an array of integers");
  TINYAI_RETURN_IF_ERROR(CheckCount(*this, key, *v, max_count));
  out->resize(static_cast<size_t>(v->count));
  const uint64_t each = ScalarBytes(v->elem_type);
  for (uint64_t i = 0; i < v->count; ++i) {
    if (!ReadInteger(data + v->offset + i * each, v->elem_type, &(*out)[static_cast<size_t>(i)])) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' [%llu] is out of range", source.c_str(), Printable(key).c_str(),
                      static_cast<unsigned long long>(i));
    }
  }
  return TINYAI_OK;
}

TinyAIStatus Parse(const uint8_t* data, uint64_t size, const std::string& source, File* out) {
  // The core's parser (format/gguf_format.h), its views copied out.
  HeaderView h;
  TINYAI_RETURN_IF_ERROR(ParseHeader(data, size, size, source.c_str(), &h));
  File f;
  f.data = data;
  f.size = size;
  f.source = source;
  f.version = h.version;
  f.alignment = h.alignment;
  f.data_offset = h.data_offset;
  f.kvs.reserve(h.keys.size());
  for (const KeyView& k : h.keys) {
    KeyValue kv;
    kv.key.assign(k.key.data, k.key.size);
    kv.value.type = k.type;
    kv.value.elem_type = k.elem_type;
    kv.value.count = k.count;
    kv.value.offset = static_cast<uint64_t>(k.value - data);
    f.kvs.push_back(std::move(kv));
  }
  f.tensors.reserve(h.tensors.size());
  for (const TensorView& v : h.tensors) {
    TensorInfo t;
    t.name.assign(v.name.data, v.name.size);
    t.n_dims = v.n_dims;
    for (int d = 0; d < 4; ++d) t.dims[d] = v.dims[d];
    t.type = v.type;
    t.offset = v.offset;
    t.bytes = v.bytes;
    f.tensors.push_back(std::move(t));
  }
  *out = std::move(f);
  return TINYAI_OK;
}

}  // namespace gguf
}  // namespace tinyai
