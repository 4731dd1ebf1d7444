#include "loader/prefetch_workers.h"

#include "common/memory.h"
#include "common/status.h"

#if TINYAI_WITH_THREADS
#include <concurrentqueue/blockingconcurrentqueue.h>
#endif

namespace tinyai {

#if TINYAI_WITH_THREADS
class PrefetchQueue {
 public:
  moodycamel::BlockingConcurrentQueue<int32_t> queue;
};
#else
class PrefetchQueue {};
#endif

namespace {
constexpr int32_t kStopWorker = -1;
}  // namespace

TinyAIStatus PrefetchWorkers::Start(int threads, LoadFn load, void* ctx) {
  stopping_.store(false);
  load_ = load;
  ctx_ = ctx;
#if TINYAI_WITH_THREADS
  queue_ = New<PrefetchQueue>();
  if (!queue_) return SetError(TINYAI_ERR_OUT_OF_MEMORY, "cannot allocate the prefetch queue");
  TINYAI_RETURN_IF_ERROR(threads_.Allocate(static_cast<size_t>(threads), "prefetch workers"));
  TINYAI_RETURN_IF_ERROR(workers_.Allocate(static_cast<size_t>(threads), "prefetch workers"));
  active_.store(threads);
  for (size_t i = 0; i < threads_.size(); ++i) {
    workers_[i] = Worker{this, static_cast<int>(i)};
    TINYAI_RETURN_IF_ERROR(port::StartThread(&threads_[i], &PrefetchWorkers::Main, &workers_[i]));
  }
#else
  (void)threads;
#endif
  return TINYAI_OK;
}

void PrefetchWorkers::Stop() {
#if TINYAI_WITH_THREADS
  if (!queue_) return;
  {
    LockGuard lock(gate_mutex_);
    stopping_.store(true);
    gate_.notify_all();  // the waiting ones go on to their stop items
  }
  // Workers skip what is still queued once stopping_ is set and exit at
  // their stop item; a worker mid-load finishes that load first.
  for (port::Thread& t : threads_) {
    if (t.started) queue_->queue.enqueue(kStopWorker);
  }
  for (port::Thread& t : threads_) port::JoinThread(&t);
  Delete(queue_);
  queue_ = nullptr;
  threads_ = Array<port::Thread>();
  workers_ = Array<Worker>();
  stopping_.store(false);  // no worker is left to see it
#endif
}

bool PrefetchWorkers::Enqueue(int32_t entry) {
#if TINYAI_WITH_THREADS
  return queue_->queue.enqueue(entry);
#else
  (void)entry;
  return false;
#endif
}

void PrefetchWorkers::SetActive(int n) {
#if TINYAI_WITH_THREADS
  if (n < 1) n = 1;
  LockGuard lock(gate_mutex_);
  active_.store(n);
  gate_.notify_all();
#else
  (void)n;
#endif
}

void PrefetchWorkers::WaitTurn(int index) {
#if TINYAI_WITH_THREADS
  if (index < active_.load()) return;
  UniqueLock lock(gate_mutex_);
  while (index >= active_.load() && !stopping_.load()) gate_.wait(lock);
#else
  (void)index;
#endif
}

void PrefetchWorkers::Main(void* worker) {
#if TINYAI_WITH_THREADS
  const Worker* self = static_cast<const Worker*>(worker);
  PrefetchWorkers* w = self->owner;
  for (;;) {
    w->WaitTurn(self->index);
    int32_t item = kStopWorker;
    w->queue_->queue.wait_dequeue(item);
    if (item == kStopWorker) return;
    if (w->stopping_.load()) continue;
    w->load_(w->ctx_, item);
  }
#else
  (void)worker;
#endif
}

}  // namespace tinyai
