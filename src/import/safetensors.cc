#include "import/safetensors.h"

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "common/checked_math.h"
#include "common/printable.h"
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

namespace {

constexpr size_t kMaxTensors = 1u << 16;        // per file: a 4,096-layer LLaMA has about 37,000
constexpr size_t kMaxRank = 16;                 // dimensions of a tensor
constexpr size_t kMaxMetadataBytes = 1u << 20;  // __metadata__'s keys and values together

// A tensor's entry as the header gives it, checked when its object closes.
struct Entry {
  std::string name;
  bool has_dtype = false, has_shape = false, has_offsets = false;
  std::string dtype;
  std::vector<uint64_t> shape, offsets;
};

// Builds the tensor list straight from nlohmann's SAX events (no document:
// memory is the tensors', capped), stopping at the first problem with its
// status and message. The header is an object of tensor entries
// {"dtype": string, "shape": [n, ...], "data_offsets": [begin, end]} and an
// optional "__metadata__" object of strings.
class HeaderReader : public nlohmann::json_sax<nlohmann::json> {
 public:
  HeaderReader(File* f, const std::string& source) : f_(f), src_(source.c_str()) {}

  bool null() override { return Scalar("null"); }
  bool boolean(bool) override { return Scalar("a boolean"); }
  bool number_integer(number_integer_t) override { return Scalar("a negative integer"); }
  bool number_unsigned(number_unsigned_t v) override {
    if (depth_ == 3) return Element(v);
    return Scalar("an integer");
  }
  bool number_float(number_float_t, const string_t&) override { return Scalar("a fractional number"); }
  bool string(string_t& v) override {
    if (depth_ == 2 && meta_) {
      meta_bytes_ += key2_.size() + v.size();
      if (meta_bytes_ > kMaxMetadataBytes) {
        return Fail(TINYAI_ERR_UNSUPPORTED, "'%s': __metadata__ holds more than %zu bytes", src_, kMaxMetadataBytes);
      }
      f_->metadata.emplace_back(key2_, v);
      return true;
    }
    if (depth_ == 2 && key2_ == "dtype") {
      entry_.dtype = v;
      entry_.has_dtype = true;
      return true;
    }
    return Scalar("a string");
  }
  bool binary(binary_t&) override { return Scalar("binary data"); }
  bool key(string_t& k) override {
    if (depth_ == 1) {
      if (!names_.insert(k).second) {
        return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' appears twice in one object (a tensor named twice)", src_,
                    Printable(k).c_str());
      }
      key1_ = k;
      return true;
    }
    if (depth_ == 2) {
      if (!fields_.insert(k).second) {
        return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' appears twice in one object (%s '%s')", src_, Printable(k).c_str(),
                    meta_ ? "__metadata__" : "tensor", Printable(key1_).c_str());
      }
      if (!meta_ && k != "dtype" && k != "shape" && k != "data_offsets") {
        return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has an unknown field '%s'", src_, Printable(key1_).c_str(), Printable(k).c_str());
      }
      key2_ = k;
      return true;
    }
    return true;  // never reached: deeper containers are refused
  }
  bool start_object(std::size_t) override {
    if (depth_ == 0) {
      depth_ = 1;
      return true;
    }
    if (depth_ == 1) {
      meta_ = key1_ == "__metadata__";
      if (!meta_) {
        if (f_->tensors.size() >= kMaxTensors) {
          return Fail(TINYAI_ERR_UNSUPPORTED, "'%s': more than %zu tensors in one file", src_, kMaxTensors);
        }
        entry_ = Entry();
        entry_.name = key1_;
      }
      fields_.clear();
      depth_ = 2;
      return true;
    }
    return Scalar("an object");
  }
  bool end_object() override {
    if (depth_ == 2) {
      depth_ = 1;
      return meta_ ? true : Finish();
    }
    depth_ = 0;  // the header's own
    return true;
  }
  bool start_array(std::size_t) override {
    if (depth_ == 2 && !meta_ && (key2_ == "shape" || key2_ == "data_offsets")) {
      depth_ = 3;
      (key2_ == "shape" ? entry_.has_shape : entry_.has_offsets) = true;
      return true;
    }
    return Scalar("an array");
  }
  bool end_array() override {
    depth_ = 2;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': the header is not valid JSON (at byte %zu: %s)", src_, position, e.what());
  }

  TinyAIStatus status() const { return status_; }
  bool done() const { return status_ == TINYAI_OK && depth_ == 0; }
  void set_data_bytes(uint64_t n) { data_bytes_ = n; }

 private:
  // A value where it does not belong, said as the DOM reader said it.
  bool Scalar(const char* kind) {
    if (depth_ == 0) return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': the header is %s, not a JSON object", src_, kind);
    if (depth_ == 1) {
      if (key1_ == "__metadata__") {
        return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': __metadata__ is %s, not an object of strings", src_, kind);
      }
      return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' is %s, not an object", src_, Printable(key1_).c_str(), kind);
    }
    if (depth_ == 2 && meta_) {
      return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': __metadata__ '%s' is %s, not a string", src_, Printable(key2_).c_str(), kind);
    }
    if (depth_ == 2) {
      if (key2_ == "dtype") return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s': 'dtype' is %s, not a string", src_, Printable(key1_).c_str(), kind);
      if (key2_ == "shape") return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has no shape array (it is %s)", src_, Printable(key1_).c_str(), kind);
      return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has no data_offsets [begin, end] (it is %s)", src_,
                  Printable(key1_).c_str(), kind);
    }
    if (key2_ == "shape") {
      return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has a dimension that is %s, not an integer >= 0", src_,
                  Printable(key1_).c_str(), kind);
    }
    return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has a data offset that is %s, not an integer >= 0", src_,
                Printable(key1_).c_str(), kind);
  }
  bool Element(uint64_t v) {
    std::vector<uint64_t>& list = key2_ == "shape" ? entry_.shape : entry_.offsets;
    if (list.size() >= (key2_ == "shape" ? kMaxRank : 2)) {
      return key2_ == "shape"
                 ? Fail(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' has more than %zu dimensions", src_, Printable(key1_).c_str(), kMaxRank)
                 : Fail(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has no data_offsets [begin, end]", src_, Printable(key1_).c_str());
    }
    list.push_back(v);
    return true;
  }
  // The entry whose object just closed.
  bool Finish() {
    Entry& e = entry_;
    const PrintableText shown = Printable(e.name);  // a JSON name may hold any byte, NUL included
    const char* name = shown.c_str();
    if (!e.has_dtype) return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has no 'dtype'", src_, name);
    if (!e.has_shape) return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has no shape array", src_, name);
    if (!e.has_offsets || e.offsets.size() != 2) {
      return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has no data_offsets [begin, end]", src_, name);
    }
    const uint64_t each = DTypeBytes(e.dtype);
    if (each == 0) {
      return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has dtype '%s', which safetensors does not define", src_,
                  name, Printable(e.dtype).c_str());
    }
    uint64_t elements = 1, bytes = 0;
    for (uint64_t d : e.shape) {
      if (!CheckedMul(elements, d, &elements)) {
        return Fail(TINYAI_ERR_OVERFLOW, "'%s': tensor '%s': its shape overflows 64 bits", src_, name);
      }
    }
    if (!CheckedMul(elements, each, &bytes)) {
      return Fail(TINYAI_ERR_OVERFLOW, "'%s': tensor '%s': its size overflows 64 bits", src_, name);
    }
    const uint64_t begin = e.offsets[0], end = e.offsets[1];
    if (end < begin) {
      return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' ends (%llu) before it begins (%llu)", src_, name,
                  static_cast<unsigned long long>(end), static_cast<unsigned long long>(begin));
    }
    if (end > data_bytes_) {
      return Fail(TINYAI_ERR_OUT_OF_BOUNDS, "'%s': tensor '%s' ends at %llu, past the %llu bytes of data", src_, name,
                  static_cast<unsigned long long>(end), static_cast<unsigned long long>(data_bytes_));
    }
    if (end - begin != bytes) {
      return Fail(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has %llu bytes, but its shape of %llu %s values needs %llu",
                  src_, name, static_cast<unsigned long long>(end - begin), static_cast<unsigned long long>(elements),
                  Printable(e.dtype).c_str(), static_cast<unsigned long long>(bytes));
    }
    Tensor t;
    t.name = e.name;
    t.dtype = e.dtype;
    t.shape = e.shape;
    t.offset = f_->data_offset + begin;
    t.bytes = bytes;
    f_->tensors.push_back(std::move(t));
    return true;
  }
  template <class... Args>
  bool Fail(TinyAIStatus code, const char* format, Args... args) {
    if (status_ == TINYAI_OK) status_ = SetError(code, format, args...);
    return false;
  }

  File* f_;
  const char* src_;
  uint64_t data_bytes_ = 0;
  int depth_ = 0;  // 1: in the header; 2: in an entry; 3: in its shape or data_offsets
  bool meta_ = false;
  std::string key1_, key2_;
  std::unordered_set<std::string> names_, fields_;
  size_t meta_bytes_ = 0;
  Entry entry_;
  TinyAIStatus status_ = TINYAI_OK;
};

}  // namespace

TinyAIStatus Parse(const uint8_t* data, uint64_t available, uint64_t size, const std::string& source, File* out) {
  const char* src = source.c_str();
  if (size < 8 || available < 8) {
    return SetError(TINYAI_ERR_TRUNCATED, "'%s': %llu bytes; a safetensors file starts with an 8-byte header length",
                    src, static_cast<unsigned long long>(size));
  }
  uint64_t n = 0;
  std::memcpy(&n, data, 8);
  // The header "MUST begin with a {" (the format's specification): a file
  // whose ninth byte is not one is not a safetensors file, and its first 8
  // bytes are no header length to show.
  if (size > 8 && available > 8 && data[8] != '{') {
    return SetError(TINYAI_ERR_BAD_MAGIC, "'%s' is not a safetensors file: after its first 8 bytes (a header length) "
                    "comes byte 0x%02x, not the '{' that starts a safetensors header", src,
                    static_cast<unsigned>(data[8]));
  }
  if (size == 8 && n > 0) {
    return SetError(TINYAI_ERR_TRUNCATED, "'%s': 8 bytes: a safetensors header length, and no header", src);
  }
  if (n > kMaxHeaderBytes) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': a header of %llu bytes; TinyAI reads headers up to %llu bytes (as "
                    "the reference reader does)", src, static_cast<unsigned long long>(n),
                    static_cast<unsigned long long>(kMaxHeaderBytes));
  }
  if (n > size - 8 || n > available - 8) {
    return SetError(TINYAI_ERR_TRUNCATED, "'%s': a header of %llu bytes in a file of %llu", src,
                    static_cast<unsigned long long>(n), static_cast<unsigned long long>(size));
  }
  File f;
  f.source = source;
  f.size = size;
  f.data_offset = 8 + n;
  HeaderReader reader(&f, source);
  reader.set_data_bytes(size - f.data_offset);
  const char* text = reinterpret_cast<const char*>(data + 8);
  const bool parsed = nlohmann::json::sax_parse(text, text + n, &reader, nlohmann::json::input_format_t::json,
                                                /*strict=*/true);
  if (reader.status() != TINYAI_OK) return reader.status();
  if (!parsed || !reader.done()) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': the header is not a JSON object", src);
  std::sort(f.tensors.begin(), f.tensors.end(), [](const Tensor& a, const Tensor& b) { return a.name < b.name; });
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
                      "one before it ends (tensors overlap or leave a gap)", src, Printable(t->name).c_str(),
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
