#include "format/gguf_format.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

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

template <class T>
T Read(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

bool Equals(StringView a, const char* b) {
  const size_t n = std::strlen(b);
  return a.size == n && std::memcmp(a.data, b, n) == 0;
}

bool Less(StringView a, StringView b) {
  const int c = std::memcmp(a.data, b.data, a.size < b.size ? a.size : b.size);
  return c < 0 || (c == 0 && a.size < b.size);
}

bool Same(StringView a, StringView b) { return a.size == b.size && std::memcmp(a.data, b.data, a.size) == 0; }

// A cursor over the header's bytes that checks every read: past the file's
// end is TINYAI_ERR_TRUNCATED; past the bytes given (but inside the file),
// too, with wanted set to the bytes to give next time.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, uint64_t file_size, const char* source, uint64_t* wanted)
      : data_(data), size_(size), file_size_(file_size), source_(source), wanted_(wanted) {}
  uint64_t pos() const { return pos_; }
  const uint8_t* at() const { return data_ + pos_; }
  // "%s%s%s" of what, where and index suffix name the field in messages.
  TinyAIStatus Need(uint64_t n, const char* what, StringView where, const char* suffix = "") const {
    if (RangeInside(pos_, n, size_)) return TINYAI_OK;
    if (size_ < file_size_ && RangeInside(pos_, n, file_size_)) {
      // Twice what is needed so far: a long header is read in a few steps.
      const uint64_t need = pos_ + n, twice = size_ > file_size_ / 2 ? file_size_ : size_ * 2;
      *wanted_ = need > twice ? need : twice;
      return SetError(TINYAI_ERR_TRUNCATED, "'%s': the header continues past the %llu bytes read", source_,
                      static_cast<unsigned long long>(size_));
    }
    return SetError(TINYAI_ERR_TRUNCATED, "'%s': %s%s%s needs %llu bytes at offset %llu; the file has %llu", source_,
                    what, Printable(where).c_str(), suffix, static_cast<unsigned long long>(n),
                    static_cast<unsigned long long>(pos_), static_cast<unsigned long long>(file_size_));
  }
  template <class T>
  TinyAIStatus Take(T* out, const char* what, StringView where, const char* suffix = "") {
    TINYAI_RETURN_IF_ERROR(Need(sizeof(T), what, where, suffix));
    *out = Read<T>(data_ + pos_);
    pos_ += sizeof(T);
    return TINYAI_OK;
  }
  TinyAIStatus Skip(uint64_t n, const char* what, StringView where, const char* suffix = "") {
    TINYAI_RETURN_IF_ERROR(Need(n, what, where, suffix));
    pos_ += n;
    return TINYAI_OK;
  }
  // A string, left in place.
  TinyAIStatus TakeString(StringView* out, const char* what, StringView where, const char* suffix = "") {
    uint64_t length = 0;
    TINYAI_RETURN_IF_ERROR(Take(&length, what, where, suffix));
    out->data = reinterpret_cast<const char*>(data_ + pos_);
    TINYAI_RETURN_IF_ERROR(Skip(length, what, where, suffix));
    out->size = static_cast<size_t>(length);
    return TINYAI_OK;
  }

 private:
  const uint8_t* data_;
  uint64_t size_, file_size_;
  const char* source_;
  uint64_t* wanted_;
  uint64_t pos_ = 0;
};

// The value of type `type` at the cursor, skipped after checking it fits.
TinyAIStatus SkipValue(Cursor* c, uint32_t type, StringView key, const char* source, KeyView* v) {
  v->type = type;
  v->value = c->at();
  if (type == kString) {
    StringView s;
    return c->TakeString(&s, "the string value of ", key);
  }
  if (type == kArray) {
    TINYAI_RETURN_IF_ERROR(c->Take(&v->elem_type, "the array type of ", key));
    TINYAI_RETURN_IF_ERROR(c->Take(&v->count, "the array length of ", key));
    v->value = c->at();
    if (v->elem_type == kArray) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' is an array of arrays, which no model key is", source,
                      Printable(key).c_str());
    }
    if (v->elem_type == kString) {
      // At least 8 bytes per element: a count the rest of the file cannot
      // hold is refused before the walk.
      if (v->count > 0 && v->count - 1 >= UINT64_MAX / 8) {
        return SetError(TINYAI_ERR_OVERFLOW, "'%s': key '%s': an array of %llu strings", source, Printable(key).c_str(),
                        static_cast<unsigned long long>(v->count));
      }
      TINYAI_RETURN_IF_ERROR(c->Need(v->count * 8, "the strings of ", key));
      for (uint64_t i = 0; i < v->count; ++i) {
        StringView s;
        TINYAI_RETURN_IF_ERROR(c->TakeString(&s, "a string of ", key, " (an element)"));
      }
      return TINYAI_OK;
    }
    const uint64_t each = ScalarBytes(v->elem_type);
    if (each == 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' is an array of unknown value type %u", source,
                      Printable(key).c_str(), v->elem_type);
    }
    uint64_t bytes = 0;
    if (!CheckedMul(v->count, each, &bytes)) {
      return SetError(TINYAI_ERR_OVERFLOW, "'%s': key '%s': an array of %llu %s values overflows", source,
                      Printable(key).c_str(), static_cast<unsigned long long>(v->count), ValueTypeName(v->elem_type));
    }
    return c->Skip(bytes, "the array of ", key);
  }
  const uint64_t bytes = ScalarBytes(type);
  if (bytes == 0) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' has unknown value type %u", source, Printable(key).c_str(),
                    type);
  }
  return c->Skip(bytes, "the value of ", key);
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

const char* ValueTypeName(uint32_t t) {
  static const char* const kNames[] = {"uint8", "int8",   "uint16", "int16", "uint32", "int32", "float32",
                                       "bool",  "string", "array",  "uint64", "int64", "float64"};
  return t < sizeof kNames / sizeof kNames[0] ? kNames[t] : "unknown";
}

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

const KeyView* HeaderView::Find(const char* key) const {
  for (const KeyView& k : keys) {
    if (Equals(k.key, key)) return &k;
  }
  return nullptr;
}

const TensorView* HeaderView::FindTensor(const char* name) const {
  for (const TensorView& t : tensors) {
    if (Equals(t.name, name)) return &t;
  }
  return nullptr;
}

TinyAIStatus ParseHeader(const uint8_t* head, uint64_t head_size, uint64_t file_size, const char* source,
                         HeaderView* out) {
  out->wanted = 0;
  if (head_size < 4 || std::memcmp(head, "GGUF", 4) != 0) {
    return SetError(TINYAI_ERR_BAD_MAGIC, "'%s' is not a GGUF file (no 'GGUF' magic)", source);
  }
  const StringView none{"", 0};
  Cursor c(head, head_size, file_size, source, &out->wanted);
  TINYAI_RETURN_IF_ERROR(c.Skip(4, "the magic", none));
  TINYAI_RETURN_IF_ERROR(c.Take(&out->version, "the version", none));
  if (out->version != 2 && out->version != 3) {
    return SetError(TINYAI_ERR_UNSUPPORTED_VERSION,
                    "'%s': GGUF version %u; TinyAI reads versions 2 and 3 (little-endian; version 1 and "
                    "big-endian files are not read)", source, out->version);
  }
  uint64_t tensor_count = 0, kv_count = 0;
  TINYAI_RETURN_IF_ERROR(c.Take(&tensor_count, "the tensor count", none));
  TINYAI_RETURN_IF_ERROR(c.Take(&kv_count, "the key count", none));
  // Each key takes at least 12 bytes, each tensor 28: counts the file
  // cannot hold are refused before anything is reserved for them.
  const uint64_t left = file_size - c.pos();
  if (kv_count > left / 12) {
    return SetError(TINYAI_ERR_TRUNCATED, "'%s': %llu keys cannot fit in the %llu bytes after the header", source,
                    static_cast<unsigned long long>(kv_count), static_cast<unsigned long long>(left));
  }
  if (tensor_count > left / 28) {
    return SetError(TINYAI_ERR_TRUNCATED, "'%s': %llu tensors cannot fit in the %llu bytes after the header", source,
                    static_cast<unsigned long long>(tensor_count), static_cast<unsigned long long>(left));
  }
  TINYAI_RETURN_IF_ERROR(out->keys.Allocate(static_cast<size_t>(kv_count), "GGUF keys"));
  for (uint64_t i = 0; i < kv_count; ++i) {
    KeyView& kv = out->keys[static_cast<size_t>(i)];
    char which[32];
    std::snprintf(which, sizeof which, "key %llu", static_cast<unsigned long long>(i));
    TINYAI_RETURN_IF_ERROR(c.TakeString(&kv.key, "the name of ", StringView{which, std::strlen(which)}));
    if (kv.key.size == 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key %llu has an empty name", source, static_cast<unsigned long long>(i));
    }
    for (uint64_t j = 0; j < i; ++j) {
      if (Same(out->keys[static_cast<size_t>(j)].key, kv.key)) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' appears twice", source, Printable(kv.key).c_str());
      }
    }
    uint32_t type = 0;
    TINYAI_RETURN_IF_ERROR(c.Take(&type, "the value type of ", kv.key));
    TINYAI_RETURN_IF_ERROR(SkipValue(&c, type, kv.key, source, &kv));
  }
  uint64_t alignment = 32;
  if (const KeyView* a = out->Find("general.alignment")) {
    int64_t v = 0;
    if (!IsInteger(a->type) || !ReadInteger(a->value, a->type, &v) || v < 0 || v > UINT32_MAX) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key 'general.alignment' is not an integer of 0..%u", source,
                      UINT32_MAX);
    }
    alignment = static_cast<uint64_t>(v);
  }
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': general.alignment %llu is not a power of two", source,
                    static_cast<unsigned long long>(alignment));
  }
  out->alignment = alignment;
  TINYAI_RETURN_IF_ERROR(out->tensors.Allocate(static_cast<size_t>(tensor_count), "GGUF tensors"));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    TensorView& t = out->tensors[static_cast<size_t>(i)];
    char which[32];
    std::snprintf(which, sizeof which, "tensor %llu", static_cast<unsigned long long>(i));
    TINYAI_RETURN_IF_ERROR(c.TakeString(&t.name, "the name of ", StringView{which, std::strlen(which)}));
    if (t.name.size == 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor %llu has an empty name", source,
                      static_cast<unsigned long long>(i));
    }
    TINYAI_RETURN_IF_ERROR(c.Take(&t.n_dims, "the dimension count of ", t.name));
    if (t.n_dims == 0 || t.n_dims > 4) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has %u dimensions (1..4)", source,
                      Printable(t.name).c_str(), t.n_dims);
    }
    uint64_t elements = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      TINYAI_RETURN_IF_ERROR(c.Take(&t.dims[d], "a dimension of ", t.name));
      if (t.dims[d] == 0) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has dimension %u of 0", source,
                        Printable(t.name).c_str(), d);
      }
      if (!CheckedMul(elements, t.dims[d], &elements)) {
        return SetError(TINYAI_ERR_OVERFLOW, "'%s': tensor '%s': its dimensions overflow 64 bits", source,
                        Printable(t.name).c_str());
      }
    }
    TINYAI_RETURN_IF_ERROR(c.Take(&t.type, "the type of ", t.name));
    uint64_t block = 0, block_bytes = 0;
    if (!TypeSize(t.type, &block, &block_bytes)) {
      const char* name = TypeName(t.type);
      return SetError(name ? TINYAI_ERR_UNSUPPORTED : TINYAI_ERR_BAD_FORMAT,
                      "'%s': tensor '%s' has ggml type %s (%u), whose size %s", source, Printable(t.name).c_str(),
                      name ? name : "unknown", t.type, name ? "ggml no longer defines" : "is not known");
    }
    if (t.dims[0] % block != 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' (%s) has rows of %llu values, not a multiple of its "
                      "blocks of %llu", source, Printable(t.name).c_str(), TypeName(t.type),
                      static_cast<unsigned long long>(t.dims[0]), static_cast<unsigned long long>(block));
    }
    if (!CheckedMul(elements / block, block_bytes, &t.bytes)) {
      return SetError(TINYAI_ERR_OVERFLOW, "'%s': tensor '%s': its size overflows 64 bits", source,
                      Printable(t.name).c_str());
    }
    TINYAI_RETURN_IF_ERROR(c.Take(&t.offset, "the offset of ", t.name));
    if (t.offset % alignment != 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' starts at %llu, not a multiple of the alignment %llu",
                      source, Printable(t.name).c_str(), static_cast<unsigned long long>(t.offset),
                      static_cast<unsigned long long>(alignment));
    }
  }
  // Duplicate names, found on a sorted index of them.
  Array<uint32_t> order;
  TINYAI_RETURN_IF_ERROR(order.Allocate(static_cast<size_t>(tensor_count), "GGUF tensor order"));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
  const TensorView* ts = out->tensors.data();
  std::sort(order.begin(), order.end(), [ts](uint32_t a, uint32_t b) { return Less(ts[a].name, ts[b].name); });
  for (size_t i = 1; i < order.size(); ++i) {
    if (Same(ts[order[i - 1]].name, ts[order[i]].name)) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' appears twice", source,
                      Printable(ts[order[i]].name).c_str());
    }
  }
  out->data_offset = AlignUp(c.pos(), alignment);
  if (out->data_offset > file_size) {
    if (tensor_count != 0) {
      return SetError(TINYAI_ERR_TRUNCATED, "'%s': the data section would start at %llu, past the end (%llu bytes)",
                      source, static_cast<unsigned long long>(out->data_offset),
                      static_cast<unsigned long long>(file_size));
    }
    out->data_offset = file_size;  // no data section needed
  }
  const uint64_t section = file_size - out->data_offset;
  for (TensorView& t : out->tensors) {
    if (!RangeInside(t.offset, t.bytes, section)) {
      return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "'%s': tensor '%s' (%llu bytes at %llu) lies outside the data section "
                      "(%llu bytes)", source, Printable(t.name).c_str(), static_cast<unsigned long long>(t.bytes),
                      static_cast<unsigned long long>(t.offset), static_cast<unsigned long long>(section));
    }
    t.offset += out->data_offset;
  }
  std::sort(order.begin(), order.end(), [ts](uint32_t a, uint32_t b) { return ts[a].offset < ts[b].offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const TensorView &a = ts[order[i - 1]], &b = ts[order[i]];
    if (a.offset + a.bytes > b.offset) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensors '%s' and '%s' overlap", source, Printable(a.name).c_str(),
                      Printable(b.name).c_str());
    }
  }
  return TINYAI_OK;
}

}  // namespace gguf
}  // namespace tinyai
