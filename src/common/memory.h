// Objects on the port's allocator. Every byte the core allocates goes
// through the recording allocator (common/ledger.h) to port::AlignedAlloc,
// so a port without a heap (ports/baremetal) serves it from the caller's
// static arena and TinyAI's account is what it took; nothing calls
// operator new.
//
//   Foo* f = New<Foo>(args...);   // nullptr when out of memory
//   Delete(f);                    // nullptr ok
#ifndef TINYAI_COMMON_MEMORY_H_
#define TINYAI_COMMON_MEMORY_H_

#include <cstddef>
#include <new>

#include "common/ledger.h"
#include "common/seam.h"

namespace tinyai {

// The alignment of every allocation of the core: enough for any scalar type
// and for the 16-byte vectors of the SIMD kernels.
constexpr size_t kMinAlignment = 16;

template <class T>
constexpr size_t AllocAlignment() {
  return alignof(T) > kMinAlignment ? alignof(T) : kMinAlignment;
}

template <class T, class... Args>
T* New(Args&&... args) {
  void* p = LedgerAlloc(AllocAlignment<T>(), sizeof(T));
  return p ? ::new (p) T(static_cast<Args&&>(args)...) : nullptr;
}

template <class T>
void Delete(T* p) {
  if (!p) return;
  p->~T();
  LedgerFree(p);
}

}  // namespace tinyai

#endif  // TINYAI_COMMON_MEMORY_H_
