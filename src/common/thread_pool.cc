#include "common/thread_pool.h"

#if TINYAI_WITH_THREADS
#include <thread>
#endif

namespace tinyai {

#if TINYAI_WITH_THREADS

namespace {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || (defined(__arm__) && defined(__ARM_ARCH_7A__))
  __asm__ __volatile__("yield");
#endif
}

// Spin iterations before a worker sleeps: about 50-100 us of polling.
constexpr int kSpinIterations = 20000;

}  // namespace

ThreadPool::~ThreadPool() { Stop(); }

TinyAIStatus ThreadPool::Start(int threads) {
  Stop();
  if (threads < 1) threads = 1;
  threads_ = 1;
  stop_.store(false);
  if (threads == 1) return TINYAI_OK;
  spin_limit_ = threads <= port::CpuCount() ? kSpinIterations : 0;
  TINYAI_RETURN_IF_ERROR(workers_.Allocate(static_cast<size_t>(threads - 1), "thread pool"));
  for (size_t i = 0; i < workers_.size(); ++i) {
    workers_[i].pool = this;
    workers_[i].index = static_cast<int>(i + 1);
    workers_[i].start_generation = generation_.load(std::memory_order_acquire);
    TinyAIStatus s = port::StartThread(&workers_[i].thread, &ThreadPool::WorkerMain, &workers_[i]);
    if (s != TINYAI_OK) {
      Stop();
      return s;
    }
  }
  threads_ = threads;
  return TINYAI_OK;
}

void ThreadPool::Stop() {
  if (workers_.size() == 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (Worker& w : workers_) port::JoinThread(&w.thread);
  workers_ = Array<Worker>();
  threads_ = 1;
}

void ThreadPool::WorkerMain(void* arg) {
  Worker* self = static_cast<Worker*>(arg);
  ThreadPool* pool = self->pool;
  unsigned seen = self->start_generation;
  for (;;) {
    int spins = 0;
    unsigned gen;
    while ((gen = pool->generation_.load(std::memory_order_acquire)) == seen &&
           !pool->stop_.load(std::memory_order_acquire)) {
      if (++spins < pool->spin_limit_) {
        CpuRelax();
        continue;
      }
      std::unique_lock<std::mutex> lock(pool->mutex_);
      pool->sleepers_.fetch_add(1);
      pool->wake_.wait(lock, [&] {
        return pool->generation_.load(std::memory_order_acquire) != seen ||
               pool->stop_.load(std::memory_order_acquire);
      });
      pool->sleepers_.fetch_sub(1);
      spins = 0;
    }
    if (pool->stop_.load(std::memory_order_acquire)) return;
    seen = gen;
    pool->fn_(pool->ctx_, self->index, pool->threads_);
    pool->pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::Run(Fn fn, void* ctx) {
  if (threads_ == 1) {
    fn(ctx, 0, 1);
    return;
  }
  fn_ = fn;
  ctx_ = ctx;
  pending_.store(threads_ - 1, std::memory_order_release);
  {
    // Publishing under the mutex pairs with the sleepers' predicate check.
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  if (sleepers_.load() > 0) wake_.notify_all();
  fn(ctx, 0, threads_);
  int spins = 0;
  while (pending_.load(std::memory_order_acquire) != 0) {
    if (++spins < spin_limit_) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
}

#else  // !TINYAI_WITH_THREADS

ThreadPool::~ThreadPool() = default;

TinyAIStatus ThreadPool::Start(int threads) {
  threads_ = 1;
  (void)threads;
  return TINYAI_OK;
}

void ThreadPool::Stop() {}

void ThreadPool::WorkerMain(void*) {}

void ThreadPool::Run(Fn fn, void* ctx) { fn(ctx, 0, 1); }

#endif

}  // namespace tinyai
