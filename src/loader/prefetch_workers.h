// The weight cache's prefetch workers: threads (started through the port)
// that take entries off a queue (a moodycamel BlockingConcurrentQueue, the
// only user of concurrentqueue) and hand each to the cache's load function,
// which loads it only if it can make room without evicting anything the
// policy values more (loader/weight_cache.h). Without threads (the port has
// none, or the build) there are no workers: the cache loads a prefetch
// inline.
#ifndef TINYAI_LOADER_PREFETCH_WORKERS_H_
#define TINYAI_LOADER_PREFETCH_WORKERS_H_

#include <atomic>
#include <cstdint>

#include "common/array.h"
#include "common/seam.h"
#include "common/sync.h"
#include "tinyai/status.h"

namespace tinyai {

class PrefetchQueue;

// The most workers the automatic count (TINYAI_PREFETCH_THREADS_AUTO) runs.
constexpr int kAutoPrefetchMax = 4;

class PrefetchWorkers {
 public:
  // Loads entry (on a worker thread).
  using LoadFn = void (*)(void* ctx, int32_t entry);

  PrefetchWorkers() = default;
  PrefetchWorkers(const PrefetchWorkers&) = delete;
  PrefetchWorkers& operator=(const PrefetchWorkers&) = delete;
  ~PrefetchWorkers() { Stop(); }

  // Starts threads workers that call load(ctx, entry) for each entry
  // queued, all of them active. A no-op in a build without threads.
  TinyAIStatus Start(int threads, LoadFn load, void* ctx);
  // Lets the first n workers (at least one) take entries; the others wait
  // for a larger n or Stop() (the automatic count: weight_cache.h).
  void SetActive(int n);
  int active() const { return active_.load(std::memory_order_relaxed); }
  // Stops the workers: what is still queued is dropped, a load in progress
  // finishes first.
  void Stop();
  bool running() const { return queue_ != nullptr; }
  // Queues entry for the workers (running() only); false when the queue
  // could not grow (the prefetch is dropped).
  bool Enqueue(int32_t entry);
  // True while Stop() drains the workers: a load that sees it does nothing.
  bool stopping() const { return stopping_.load(); }

 private:
  struct Worker {
    PrefetchWorkers* owner;
    int index;
  };
  static void Main(void* worker);
  // Waits while worker index may not take entries (index >= active_).
  void WaitTurn(int index);

  PrefetchQueue* queue_ = nullptr;
  Array<port::Thread> threads_;
  Array<Worker> workers_;
  std::atomic<int> active_{0};
  Mutex gate_mutex_;
  CondVar gate_;
  LoadFn load_ = nullptr;
  void* ctx_ = nullptr;
  std::atomic<bool> stopping_{false};
};

}  // namespace tinyai

#endif  // TINYAI_LOADER_PREFETCH_WORKERS_H_
