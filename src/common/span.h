// Span<T>: a pointer and a count, never owning.
#ifndef TINYAI_COMMON_SPAN_H_
#define TINYAI_COMMON_SPAN_H_

#include <cstddef>

namespace tinyai {

template <class T>
class Span {
 public:
  constexpr Span() = default;
  constexpr Span(T* data, size_t size) : data_(data), size_(size) {}
  template <class U>
  constexpr Span(const Span<U>& other) : data_(other.data()), size_(other.size()) {}

  constexpr T* data() const { return data_; }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr T& operator[](size_t i) const { return data_[i]; }
  constexpr T* begin() const { return data_; }
  constexpr T* end() const { return data_ + size_; }
  constexpr Span subspan(size_t offset, size_t count) const { return Span(data_ + offset, count); }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

// A string slice that need not be NUL-terminated.
struct StringView {
  const char* data = nullptr;
  size_t size = 0;
};

}  // namespace tinyai

#endif  // TINYAI_COMMON_SPAN_H_
