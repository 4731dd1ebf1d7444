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
  for (port::Thread& t : threads_) TINYAI_RETURN_IF_ERROR(port::StartThread(&t, &PrefetchWorkers::Main, this));
#else
  (void)threads;
#endif
  return TINYAI_OK;
}

void PrefetchWorkers::Stop() {
#if TINYAI_WITH_THREADS
  if (!queue_) return;
  stopping_.store(true);
  // Workers skip what is still queued once stopping_ is set and exit at
  // their stop item; a worker mid-load finishes that load first.
  for (port::Thread& t : threads_) {
    if (t.started) queue_->queue.enqueue(kStopWorker);
  }
  for (port::Thread& t : threads_) port::JoinThread(&t);
  Delete(queue_);
  queue_ = nullptr;
  threads_ = Array<port::Thread>();
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

void PrefetchWorkers::Main(void* self) {
#if TINYAI_WITH_THREADS
  PrefetchWorkers* w = static_cast<PrefetchWorkers*>(self);
  for (;;) {
    int32_t item = kStopWorker;
    w->queue_->queue.wait_dequeue(item);
    if (item == kStopWorker) return;
    if (w->stopping_.load()) continue;
    w->load_(w->ctx_, item);
  }
#else
  (void)self;
#endif
}

}  // namespace tinyai
