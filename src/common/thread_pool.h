// A pool of compute threads for one model runner (no globals). Run() executes
// a function on every thread, the caller included, and returns when all are
// done. Idle workers spin briefly (decoding dispatches thousands of small
// parallel regions per second) and then sleep. Without threads the pool runs
// everything on the caller.
#ifndef TINYAI_COMMON_THREAD_POOL_H_
#define TINYAI_COMMON_THREAD_POOL_H_

#include <cstddef>

#include "common/array.h"
#include "common/config.h"
#include "port/port.h"

#if TINYAI_WITH_THREADS
#include <atomic>
#include <condition_variable>
#include <mutex>
#endif

namespace tinyai {

class ThreadPool {
 public:
  using Fn = void (*)(void* ctx, int thread, int threads);

  ThreadPool() = default;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool();

  // threads counts the caller; 1 means no workers.
  TinyAIStatus Start(int threads);
  int size() const { return threads_; }

  void Run(Fn fn, void* ctx);

  // Calls f(begin, end, thread) on contiguous shares of [0, n), one share per
  // thread, each share's size a multiple of grain (except the last).
  template <class F>
  void ParallelFor(size_t n, size_t grain, F&& f) {
    struct Ctx {
      F* f;
      size_t n, grain;
    } ctx{&f, n, grain == 0 ? 1 : grain};
    Run(
        [](void* p, int t, int nt) {
          Ctx* c = static_cast<Ctx*>(p);
          size_t chunks = (c->n + c->grain - 1) / c->grain;
          size_t begin = chunks * static_cast<size_t>(t) / static_cast<size_t>(nt) * c->grain;
          size_t end = chunks * static_cast<size_t>(t + 1) / static_cast<size_t>(nt) * c->grain;
          if (end > c->n) end = c->n;
          if (begin < end) (*c->f)(begin, end, t);
        },
        &ctx);
  }

 private:
  static void WorkerMain(void* arg);
  void Stop();

  int threads_ = 1;
#if TINYAI_WITH_THREADS
  // Polls before sleeping (waiting workers) or yielding (the caller); 0 when
  // there are more threads than cores, where spinning steals the core the
  // awaited thread needs.
  int spin_limit_ = 0;
  struct Worker {
    ThreadPool* pool;
    int index;
    unsigned start_generation;  // read before the thread starts, so no job is missed
    port::Thread thread;
  };
  Array<Worker> workers_;
  std::atomic<unsigned> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  Fn fn_ = nullptr;
  void* ctx_ = nullptr;
#endif
};

}  // namespace tinyai

#endif  // TINYAI_COMMON_THREAD_POOL_H_
