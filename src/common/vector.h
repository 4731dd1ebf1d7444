// A growable array of trivially copyable T whose growth reports failure as
// a status (the core builds without exceptions). Used where counts are not
// known up front: the layers a caller adds to a schedule, the operators and
// tensors a graph is built from.
#ifndef TINYAI_COMMON_VECTOR_H_
#define TINYAI_COMMON_VECTOR_H_

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "common/array.h"
#include "common/span.h"

namespace tinyai {

template <class T>
class Vector {
  static_assert(std::is_trivially_copyable<T>::value, "Vector holds trivially copyable types");

 public:
  Vector() = default;
  Vector(Vector&&) noexcept = default;
  Vector& operator=(Vector&&) noexcept = default;

  // Makes room for at least capacity elements.
  TinyAIStatus Reserve(size_t capacity, const char* what) {
    if (capacity <= data_.size()) return TINYAI_OK;
    Array<T> grown;
    TINYAI_RETURN_IF_ERROR(grown.Allocate(capacity, what));
    if (size_) std::memcpy(grown.data(), data_.data(), size_ * sizeof(T));
    data_ = static_cast<Array<T>&&>(grown);
    return TINYAI_OK;
  }

  TinyAIStatus Push(const T& value, const char* what) {
    if (size_ == data_.size()) {
      TINYAI_RETURN_IF_ERROR(Reserve(size_ < 8 ? 8 : 2 * size_, what));
    }
    data_[size_++] = value;
    return TINYAI_OK;
  }

  void Clear() { size_ = 0; }
  void PopBack() {
    if (size_) --size_;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return data_.size(); }
  T* data() { return data_.data(); }
  const T* data() const { return data_.data(); }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& back() { return data_[size_ - 1]; }
  T* begin() { return data_.data(); }
  T* end() { return data_.data() + size_; }
  const T* begin() const { return data_.data(); }
  const T* end() const { return data_.data() + size_; }
  Span<const T> span() const { return Span<const T>(data_.data(), size_); }

 private:
  Array<T> data_;
  size_t size_ = 0;
};

}  // namespace tinyai

#endif  // TINYAI_COMMON_VECTOR_H_
