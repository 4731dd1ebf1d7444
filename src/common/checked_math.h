// Overflow-checked size arithmetic for validating untrusted sizes.
#ifndef TINYAI_COMMON_CHECKED_MATH_H_
#define TINYAI_COMMON_CHECKED_MATH_H_

#include <cstddef>
#include <cstdint>

namespace tinyai {

// Each returns false (and leaves *out unspecified) when the result overflows.
inline bool CheckedAdd(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }
inline bool CheckedMul(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
// A byte count as a size_t; false when it exceeds the address space (a
// 32-bit target).
inline bool CheckedSize(uint64_t bytes, size_t* out) { return !__builtin_add_overflow(bytes, 0, out); }

inline uint64_t AlignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// True when [offset, offset+size) lies inside [0, limit) without overflow.
inline bool RangeInside(uint64_t offset, uint64_t size, uint64_t limit) {
  uint64_t end;
  return CheckedAdd(offset, size, &end) && end <= limit;
}

}  // namespace tinyai

#endif  // TINYAI_COMMON_CHECKED_MATH_H_
