#include "import/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_set>

#include "common/checked_math.h"
#include "common/printable.h"
#include "common/status.h"

namespace tinyai {
namespace gguf {

namespace {

struct TypeInfo {
  uint32_t type;
  const char* name;
  uint64_t block, bytes;  // 0, 0: a type ggml removed (its number is never written)
};

// ggml's types (ggml.h enum ggml_type, ggml-common.h block layouts).
constexpr TypeInfo kTypes[] = {
    {0, "F32", 1, 4},        {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},      {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},     {7, "Q5_1", 32, 24},      {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},   {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},  {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},  {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82},  {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},       {27, "I64", 1, 8},        {28, "F64", 1, 8},        {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},      {31, "Q4_0_4_4", 0, 0},   {32, "Q4_0_4_8", 0, 0},   {33, "Q4_0_8_8", 0, 0},
    {34, "TQ1_0", 256, 54},  {35, "TQ2_0", 256, 66},   {36, "IQ4_NL_4_4", 0, 0}, {37, "IQ4_NL_4_8", 0, 0},
    {38, "IQ4_NL_8_8", 0, 0}, {39, "MXFP4", 32, 17},
};

const TypeInfo* FindType(uint32_t type) {
  for (const TypeInfo& t : kTypes) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

const char* ValueTypeName(uint32_t t) {
  static const char* const kNames[] = {"uint8", "int8",   "uint16", "int16", "uint32", "int32", "float32",
                                       "bool",  "string", "array",  "uint64", "int64", "float64"};
  return t < sizeof kNames / sizeof kNames[0] ? kNames[t] : "unknown";
}

// Bytes of a scalar value type (strings and arrays: 0).
uint64_t ScalarBytes(uint32_t t) {
  switch (t) {
    case kUint8: case kInt8: case kBool: return 1;
    case kUint16: case kInt16: return 2;
    case kUint32: case kInt32: case kFloat32: return 4;
    case kUint64: case kInt64: case kFloat64: return 8;
    default: return 0;
  }
}

bool IsInteger(uint32_t t) {
  return t == kUint8 || t == kInt8 || t == kUint16 || t == kInt16 || t == kUint32 || t == kInt32 || t == kUint64 ||
         t == kInt64;
}

// Reads a little-endian integer at p (the caller checked the bounds).
template <class T>
T Read(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// An integer value of type t at p as int64 (uint64 above INT64_MAX: false).
bool ReadInteger(const uint8_t* p, uint32_t t, int64_t* out) {
  switch (t) {
    case kUint8: *out = Read<uint8_t>(p); return true;
    case kInt8: *out = Read<int8_t>(p); return true;
    case kUint16: *out = Read<uint16_t>(p); return true;
    case kInt16: *out = Read<int16_t>(p); return true;
    case kUint32: *out = Read<uint32_t>(p); return true;
    case kInt32: *out = Read<int32_t>(p); return true;
    case kInt64: *out = Read<int64_t>(p); return true;
    case kUint64: {
      const uint64_t v = Read<uint64_t>(p);
      if (v > static_cast<uint64_t>(INT64_MAX)) return false;
      *out = static_cast<int64_t>(v);
      return true;
    }
    default: return false;
  }
}

// A cursor over the file that checks every read against its end.
class Cursor {
 public:
  Cursor(const File& f) : f_(f) {}
  uint64_t pos() const { return pos_; }
  // Reads n bytes' worth: TINYAI_ERR_TRUNCATED naming `what` past the end.
  TinyAIStatus Need(uint64_t n, const char* what, const std::string& where) const {
    if (RangeInside(pos_, n, f_.size)) return TINYAI_OK;
    return SetError(TINYAI_ERR_TRUNCATED, "'%s': %s%s needs %llu bytes at offset %llu; the file has %llu",
                    f_.source.c_str(), what, Printable(where).c_str(), static_cast<unsigned long long>(n),
                    static_cast<unsigned long long>(pos_), static_cast<unsigned long long>(f_.size));
  }
  template <class T>
  TinyAIStatus Take(T* out, const char* what, const std::string& where) {
    TINYAI_RETURN_IF_ERROR(Need(sizeof(T), what, where));
    *out = Read<T>(f_.data + pos_);
    pos_ += sizeof(T);
    return TINYAI_OK;
  }
  TinyAIStatus Skip(uint64_t n, const char* what, const std::string& where) {
    TINYAI_RETURN_IF_ERROR(Need(n, what, where));
    pos_ += n;
    return TINYAI_OK;
  }
  // A string: its bytes stay in the file; *offset and *length say where.
  TinyAIStatus TakeString(uint64_t* offset, uint64_t* length, const char* what, const std::string& where) {
    TINYAI_RETURN_IF_ERROR(Take(length, what, where));
    *offset = pos_;
    return Skip(*length, what, where);
  }

 private:
  const File& f_;
  uint64_t pos_ = 0;
};

// The value of type `type` at the cursor, skipped after checking it fits.
TinyAIStatus SkipValue(Cursor* c, uint32_t type, const std::string& key, const std::string& source, Value* v) {
  v->type = type;
  if (type == kString) {
    uint64_t offset = 0, length = 0;
    TINYAI_RETURN_IF_ERROR(c->TakeString(&offset, &length, "the string value of ", key));
    v->offset = offset - sizeof(uint64_t);
    return TINYAI_OK;
  }
  if (type == kArray) {
    TINYAI_RETURN_IF_ERROR(c->Take(&v->elem_type, "the array type of ", key));
    TINYAI_RETURN_IF_ERROR(c->Take(&v->count, "the array length of ", key));
    v->offset = c->pos();
    if (v->elem_type == kArray) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' is an array of arrays, which no model key is",
                      source.c_str(), Printable(key).c_str());
    }
    if (v->elem_type == kString) {
      // At least 8 bytes per element: a count the rest of the file cannot hold is refused before the walk.
      if (v->count > 0 && v->count - 1 >= UINT64_MAX / 8) {
        return SetError(TINYAI_ERR_OVERFLOW, "'%s': key '%s': an array of %llu strings", source.c_str(), Printable(key).c_str(),
                        static_cast<unsigned long long>(v->count));
      }
      TINYAI_RETURN_IF_ERROR(c->Need(v->count * 8, "the strings of ", key));
      for (uint64_t i = 0; i < v->count; ++i) {
        uint64_t offset = 0, length = 0;
        TINYAI_RETURN_IF_ERROR(c->TakeString(&offset, &length, "a string of ", key + " [" + std::to_string(i) + "]"));
      }
      return TINYAI_OK;
    }
    const uint64_t each = ScalarBytes(v->elem_type);
    if (each == 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' is an array of unknown value type %u", source.c_str(),
                      Printable(key).c_str(), v->elem_type);
    }
    uint64_t bytes = 0;
    if (!CheckedMul(v->count, each, &bytes)) {
      return SetError(TINYAI_ERR_OVERFLOW, "'%s': key '%s': an array of %llu %s values overflows", source.c_str(),
                      Printable(key).c_str(), static_cast<unsigned long long>(v->count), ValueTypeName(v->elem_type));
    }
    return c->Skip(bytes, "the array of ", key);
  }
  const uint64_t bytes = ScalarBytes(type);
  if (bytes == 0) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' has unknown value type %u", source.c_str(), Printable(key).c_str(), type);
  }
  v->offset = c->pos();
  return c->Skip(bytes, "the value of ", key);
}

TinyAIStatus WrongType(const File& f, const std::string& key, const Value& v, const char* wanted) {
  const std::string got = v.type == kArray ? std::string("array of ") + ValueTypeName(v.elem_type) : ValueTypeName(v.type);
  return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' is %s, not %s", f.source.c_str(), Printable(key).c_str(), got.c_str(),
                  wanted);
}

}  // namespace

const char* TypeName(uint32_t type) {
  const TypeInfo* t = FindType(type);
  return t ? t->name : nullptr;
}

bool TypeSize(uint32_t type, uint64_t* block, uint64_t* bytes) {
  const TypeInfo* t = FindType(type);
  if (t == nullptr || t->block == 0) return false;
  *block = t->block;
  *bytes = t->bytes;
  return true;
}

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
  File f;
  f.data = data;
  f.size = size;
  f.source = source;
  if (size < 4 || std::memcmp(data, "GGUF", 4) != 0) {
    return SetError(TINYAI_ERR_BAD_MAGIC, "'%s' is not a GGUF file (no 'GGUF' magic)", source.c_str());
  }
  Cursor c(f);
  TINYAI_RETURN_IF_ERROR(c.Skip(4, "the magic", ""));
  TINYAI_RETURN_IF_ERROR(c.Take(&f.version, "the version", ""));
  if (f.version != 2 && f.version != 3) {
    return SetError(TINYAI_ERR_UNSUPPORTED_VERSION,
                    "'%s': GGUF version %u; TinyAI reads versions 2 and 3 (little-endian; version 1 and "
                    "big-endian files are not read)",
                    source.c_str(), f.version);
  }
  uint64_t tensor_count = 0, kv_count = 0;
  TINYAI_RETURN_IF_ERROR(c.Take(&tensor_count, "the tensor count", ""));
  TINYAI_RETURN_IF_ERROR(c.Take(&kv_count, "the key count", ""));
  // Each key takes at least 12 bytes, each tensor 28: counts the file
  // cannot hold are refused before anything is reserved for them.
  const uint64_t left = size - c.pos();
  if (kv_count > left / 12) {
    return SetError(TINYAI_ERR_TRUNCATED, "'%s': %llu keys cannot fit in the %llu bytes after the header",
                    source.c_str(), static_cast<unsigned long long>(kv_count), static_cast<unsigned long long>(left));
  }
  if (tensor_count > left / 28) {
    return SetError(TINYAI_ERR_TRUNCATED, "'%s': %llu tensors cannot fit in the %llu bytes after the header",
                    source.c_str(), static_cast<unsigned long long>(tensor_count),
                    static_cast<unsigned long long>(left));
  }
  std::unordered_set<std::string> keys;
  f.kvs.reserve(static_cast<size_t>(kv_count < 4096 ? kv_count : 4096));  // the counts are the file's: grow as read
  for (uint64_t i = 0; i < kv_count; ++i) {
    const std::string where = " of key " + std::to_string(i);
    uint64_t offset = 0, length = 0;
    TINYAI_RETURN_IF_ERROR(c.TakeString(&offset, &length, "the name", where));
    KeyValue kv;
    kv.key.assign(reinterpret_cast<const char*>(data + offset), static_cast<size_t>(length));
    if (kv.key.empty()) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key %llu has an empty name", source.c_str(), static_cast<unsigned long long>(i));
    if (!keys.insert(kv.key).second) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' appears twice", source.c_str(), Printable(kv.key).c_str());
    }
    uint32_t type = 0;
    TINYAI_RETURN_IF_ERROR(c.Take(&type, "the value type of ", kv.key));
    TINYAI_RETURN_IF_ERROR(SkipValue(&c, type, kv.key, source, &kv.value));
    f.kvs.push_back(std::move(kv));
  }
  bool has_alignment = false;
  uint64_t alignment = 32;
  TINYAI_RETURN_IF_ERROR(f.GetUint("general.alignment", UINT32_MAX, &alignment, &has_alignment));
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': general.alignment %llu is not a power of two", source.c_str(),
                    static_cast<unsigned long long>(alignment));
  }
  f.alignment = alignment;
  std::unordered_set<std::string> names;
  f.tensors.reserve(static_cast<size_t>(tensor_count < 4096 ? tensor_count : 4096));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    const std::string where = " of tensor " + std::to_string(i);
    uint64_t offset = 0, length = 0;
    TINYAI_RETURN_IF_ERROR(c.TakeString(&offset, &length, "the name", where));
    TensorInfo t;
    t.name.assign(reinterpret_cast<const char*>(data + offset), static_cast<size_t>(length));
    if (t.name.empty()) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor %llu has an empty name", source.c_str(),
                      static_cast<unsigned long long>(i));
    }
    if (!names.insert(t.name).second) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' appears twice", source.c_str(), Printable(t.name).c_str());
    }
    TINYAI_RETURN_IF_ERROR(c.Take(&t.n_dims, "the dimension count of ", t.name));
    if (t.n_dims == 0 || t.n_dims > 4) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has %u dimensions (1..4)", source.c_str(),
                      Printable(t.name).c_str(), t.n_dims);
    }
    uint64_t elements = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      TINYAI_RETURN_IF_ERROR(c.Take(&t.dims[d], "a dimension of ", t.name));
      if (t.dims[d] == 0) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has dimension %u of 0", source.c_str(),
                        Printable(t.name).c_str(), d);
      }
      if (!CheckedMul(elements, t.dims[d], &elements)) {
        return SetError(TINYAI_ERR_OVERFLOW, "'%s': tensor '%s': its dimensions overflow 64 bits", source.c_str(),
                        Printable(t.name).c_str());
      }
    }
    TINYAI_RETURN_IF_ERROR(c.Take(&t.type, "the type of ", t.name));
    uint64_t block = 0, block_bytes = 0;
    if (!TypeSize(t.type, &block, &block_bytes)) {
      const char* name = TypeName(t.type);
      return SetError(name ? TINYAI_ERR_UNSUPPORTED : TINYAI_ERR_BAD_FORMAT,
                      "'%s': tensor '%s' has ggml type %s (%u), whose size %s", source.c_str(), Printable(t.name).c_str(),
                      name ? name : "unknown", t.type, name ? "ggml no longer defines" : "is not known");
    }
    if (t.dims[0] % block != 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' (%s) has rows of %llu values, not a multiple of its "
                      "blocks of %llu", source.c_str(), Printable(t.name).c_str(), TypeName(t.type),
                      static_cast<unsigned long long>(t.dims[0]), static_cast<unsigned long long>(block));
    }
    if (!CheckedMul(elements / block, block_bytes, &t.bytes)) {
      return SetError(TINYAI_ERR_OVERFLOW, "'%s': tensor '%s': its size overflows 64 bits", source.c_str(),
                      Printable(t.name).c_str());
    }
    TINYAI_RETURN_IF_ERROR(c.Take(&t.offset, "the offset of ", t.name));
    if (t.offset % alignment != 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' starts at %llu, not a multiple of the alignment %llu",
                      source.c_str(), Printable(t.name).c_str(), static_cast<unsigned long long>(t.offset),
                      static_cast<unsigned long long>(alignment));
    }
    f.tensors.push_back(std::move(t));
  }
  f.data_offset = AlignUp(c.pos(), alignment);
  if (f.data_offset > size) {
    if (tensor_count == 0) f.data_offset = size;  // no data section needed
    else
      return SetError(TINYAI_ERR_TRUNCATED, "'%s': the data section would start at %llu, past the end (%llu bytes)",
                      source.c_str(), static_cast<unsigned long long>(f.data_offset),
                      static_cast<unsigned long long>(size));
  }
  const uint64_t section = size - f.data_offset;
  std::vector<size_t> order(f.tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (TensorInfo& t : f.tensors) {
    if (!RangeInside(t.offset, t.bytes, section)) {
      return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "'%s': tensor '%s' (%llu bytes at %llu) lies outside the data section "
                      "(%llu bytes)", source.c_str(), Printable(t.name).c_str(), static_cast<unsigned long long>(t.bytes),
                      static_cast<unsigned long long>(t.offset), static_cast<unsigned long long>(section));
    }
    t.offset += f.data_offset;
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return f.tensors[a].offset < f.tensors[b].offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const TensorInfo &a = f.tensors[order[i - 1]], &b = f.tensors[order[i]];
    if (a.offset + a.bytes > b.offset) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensors '%s' and '%s' overlap", source.c_str(), Printable(a.name).c_str(),
                      Printable(b.name).c_str());
    }
  }
  *out = std::move(f);
  return TINYAI_OK;
}

}  // namespace gguf
}  // namespace tinyai
