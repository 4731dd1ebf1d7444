// Heap arrays that report allocation failure as a status instead of
// aborting (the core builds without exceptions).
#ifndef TINYAI_COMMON_ARRAY_H_
#define TINYAI_COMMON_ARRAY_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <utility>

#include "common/status.h"

namespace tinyai {

// An owning array of default-constructed T with a fixed size.
template <class T>
class Array {
 public:
  Array() = default;
  Array(Array&&) noexcept = default;
  Array& operator=(Array&&) noexcept = default;

  // Allocates count elements; on failure returns TINYAI_ERR_OUT_OF_MEMORY
  // with what names the purpose in the message.
  TinyAIStatus Allocate(size_t count, const char* what) {
    data_.reset();
    size_ = 0;
    if (count == 0) return TINYAI_OK;
    if (count > SIZE_MAX / sizeof(T)) {
      return SetError(TINYAI_ERR_OVERFLOW, "%s: %zu elements overflow the address space", what, count);
    }
    data_.reset(new (std::nothrow) T[count]());
    if (!data_) {
      return SetError(TINYAI_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes", what,
                      count * sizeof(T));
    }
    size_ = count;
    return TINYAI_OK;
  }

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_.get(); }
  T* end() { return data_.get() + size_; }
  const T* begin() const { return data_.get(); }
  const T* end() const { return data_.get() + size_; }

 private:
  std::unique_ptr<T[]> data_;
  size_t size_ = 0;
};

// An owning, 64-byte aligned, zero-filled buffer of floats or bytes.
class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;
  AlignedBuffer() = default;
  AlignedBuffer(AlignedBuffer&& o) noexcept : data_(o.data_), bytes_(o.bytes_) {
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      Free();
      data_ = o.data_;
      bytes_ = o.bytes_;
      o.data_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { Free(); }

  enum Fill { kZeroed, kUninitialized };
  // kUninitialized leaves large buffers' pages uncommitted until written.
  TinyAIStatus Allocate(size_t bytes, const char* what, Fill fill = kZeroed);
  void Free();

  void* data() const { return data_; }
  float* floats() const { return static_cast<float*>(data_); }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace tinyai

#endif  // TINYAI_COMMON_ARRAY_H_
