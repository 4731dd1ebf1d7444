// A mutex and condition variable that compile away on ports without threads.
#ifndef TINYAI_COMMON_SYNC_H_
#define TINYAI_COMMON_SYNC_H_

#include "common/config.h"

#if TINYAI_WITH_THREADS
#include <condition_variable>
#include <mutex>
#endif

namespace tinyai {

#if TINYAI_WITH_THREADS
using Mutex = std::mutex;
using LockGuard = std::lock_guard<std::mutex>;
using UniqueLock = std::unique_lock<std::mutex>;
using CondVar = std::condition_variable;
#else
struct Mutex {
  void lock() {}
  void unlock() {}
};
struct LockGuard {
  explicit LockGuard(Mutex&) {}
};
struct UniqueLock {
  explicit UniqueLock(Mutex&) {}
};
// Without threads nobody else can change what a waiter waits for, so a wait
// would never end: callers must not wait (they check TINYAI_WITH_THREADS).
struct CondVar {
  void notify_all() {}
};
#endif

}  // namespace tinyai

#endif  // TINYAI_COMMON_SYNC_H_
