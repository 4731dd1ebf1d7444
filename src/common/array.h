// Heap arrays that report allocation failure as a status instead of
// aborting (the core builds without exceptions).
#ifndef TINYAI_COMMON_ARRAY_H_
#define TINYAI_COMMON_ARRAY_H_

#include <cstddef>
#include <cstdint>
#include <new>

#include "common/memory.h"
#include "common/status.h"

namespace tinyai {

// TINYAI_ERR_OUT_OF_MEMORY for bytes of what, with the port's account of
// its memory (a static arena's room) when it has one.
TinyAIStatus OutOfMemory(const char* what, size_t bytes);

// An owning array of value-initialised T with a fixed size, on the port's
// allocator (common/memory.h).
template <class T>
class Array {
 public:
  Array() = default;
  Array(Array&& o) noexcept : data_(o.data_), size_(o.size_) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  Array& operator=(Array&& o) noexcept {
    if (this != &o) {
      Reset();
      data_ = o.data_;
      size_ = o.size_;
      o.data_ = nullptr;
      o.size_ = 0;
    }
    return *this;
  }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;
  ~Array() { Reset(); }

  // Allocates count elements; on failure returns TINYAI_ERR_OUT_OF_MEMORY
  // with what names the purpose in the message.
  TinyAIStatus Allocate(size_t count, const char* what) {
    Reset();
    if (count == 0) return TINYAI_OK;
    if (count > SIZE_MAX / sizeof(T)) {
      return SetError(TINYAI_ERR_OVERFLOW, "%s: %zu elements overflow the address space", what, count);
    }
    void* p = LedgerAlloc(AllocAlignment<T>(), count * sizeof(T));
    if (!p) return OutOfMemory(what, count * sizeof(T));
    data_ = static_cast<T*>(p);
    for (size_t i = 0; i < count; ++i) ::new (data_ + i) T();
    size_ = count;
    return TINYAI_OK;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }

 private:
  void Reset() {
    for (size_t i = 0; i < size_; ++i) data_[i].~T();
    LedgerFree(data_);
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
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
