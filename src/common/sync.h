// A mutex that compiles away on ports without threads.
#ifndef TINYAI_COMMON_SYNC_H_
#define TINYAI_COMMON_SYNC_H_

#include "common/config.h"

#if TINYAI_WITH_THREADS
#include <mutex>
#endif

namespace tinyai {

#if TINYAI_WITH_THREADS
using Mutex = std::mutex;
using LockGuard = std::lock_guard<std::mutex>;
#else
struct Mutex {
  void lock() {}
  void unlock() {}
};
struct LockGuard {
  explicit LockGuard(Mutex&) {}
};
#endif

}  // namespace tinyai

#endif  // TINYAI_COMMON_SYNC_H_
