#include "common/thread_pool.h"

namespace tinyai {

bool SplitPolicy::Choose(uint64_t work) {
  Class& c = classes_[ClassOf(work)];
  c.exploring = ++c.runs >= c.explore_at;
  if (c.exploring) c.runs = 0;
  return c.exploring ? !c.split : c.split;
}

void SplitPolicy::Learn(uint64_t work, bool split, uint64_t nanos) {
  Class& c = classes_[ClassOf(work)];
  float cost = static_cast<float>(nanos) / static_cast<float>(work == 0 ? 1 : work);
  // The way in use moves its average by an eighth; a trial of the other way,
  // whose average may be long stale, by half.
  float& average = split ? c.split_cost : c.inline_cost;
  const float other = split ? c.inline_cost : c.split_cost;
  // A sample counts for at most kMaxSampleRatio times the average: a loop
  // preempted for a timeslice (hundreds of times its cost, on a busy machine)
  // would otherwise push whichever way it ran in above the other one, and
  // the choice would follow the preemptions, not the costs. A lasting change
  // still moves the average, by up to an eighth (or half) per loop.
  if (average > 0 && cost > average * kMaxSampleRatio) cost = average * kMaxSampleRatio;
  average = average == 0 ? cost : average + (cost - average) / (c.exploring ? 2 : 8);
  if (c.exploring && other > 0) {
    // A trial that beat the way in use is worth repeating soon (its average
    // may still be catching up); one that lost, less often.
    c.explore_at = cost < other ? kExploreMin : (c.explore_at * 2 > kExploreMax ? kExploreMax : c.explore_at * 2);
  }
  if (c.split_cost > 0 && c.inline_cost > 0) c.split = c.split_cost < c.inline_cost;
  c.exploring = false;
}

#if TINYAI_WITH_THREADS

namespace {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || (defined(__arm__) && defined(__ARM_ARCH_7A__))
  __asm__ __volatile__("yield");
#endif
}

// Polls `done` until it holds or `nanos` have passed (checking the clock
// every 64 polls); returns whether it holds.
template <class Done>
bool PollFor(uint64_t nanos, Done&& done) {
  if (nanos == 0) return done();
  uint64_t start = 0;
  for (unsigned polls = 1;; ++polls) {
    if (done()) return true;
    if (polls % 64 == 0) {
      const uint64_t now = port::MonotonicNanos();
      if (start == 0) {
        start = now;
      } else if (now - start >= nanos) {
        return done();
      }
    }
    CpuRelax();
  }
}

}  // namespace

ThreadPool::~ThreadPool() { Stop(); }

TinyAIStatus ThreadPool::Start(int threads) {
  Stop();
  if (threads < 1) threads = 1;
  threads_ = 1;
  stop_.store(false);
  serial_until_ = backoff_ = 0;
  calm_runs_ = 0;
  if (threads == 1) return TINYAI_OK;
  // More threads than cores: polling would take the core a running thread
  // needs. Set before the workers start, which read them.
  const bool oversubscribed = threads > port::CpuCount();
  worker_spin_ = oversubscribed ? 0 : kWorkerSpinNanos;
  caller_spin_ = oversubscribed ? 0 : kCallerSpinNanos;
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

bool ThreadPool::GoParallel() {
  if (threads_ == 1) return false;
  if (serial_until_ != 0) {
    if (port::MonotonicNanos() < serial_until_) {
      ++stats_.backoff_runs;
      return false;
    }
    serial_until_ = 0;
  }
  return true;
}

size_t ThreadPool::Drain(int thread) {
  size_t done = 0;
  for (;;) {
    const size_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
    if (c >= chunks_) return done;
    fn_(ctx_, c, thread);
    ++done;
  }
}

void ThreadPool::WorkerMain(void* arg) {
  Worker* self = static_cast<Worker*>(arg);
  ThreadPool* pool = self->pool;
  const uint64_t spin = pool->worker_spin_;
  unsigned seen = self->start_generation;
  // Moving average (a quarter per loop) of how long after this worker went
  // idle the next loop opened; it polls only while that is under `spin`.
  // Samples are capped at 4 * spin, so a few prompt loops after a pause
  // (the next token, a new prompt) bring polling back.
  int64_t gap_average = 0;
  for (;;) {
    auto news = [&] {
      return pool->generation_.load(std::memory_order_acquire) != seen || pool->stop_.load(std::memory_order_acquire);
    };
    const uint64_t idle_since = port::MonotonicNanos();
    const uint64_t poll = gap_average < static_cast<int64_t>(spin) ? spin : 0;
    if (!PollFor(poll, news)) {
      if (poll != 0) pool->worker_idle_polls_.fetch_add(1, std::memory_order_relaxed);
      pool->worker_sleeps_.fetch_add(1, std::memory_order_relaxed);
      std::unique_lock<std::mutex> lock(pool->mutex_);
      pool->sleepers_.fetch_add(1);
      pool->wake_.wait(lock, news);
      pool->sleepers_.fetch_sub(1);
    }
    if (pool->stop_.load(std::memory_order_acquire)) return;
    seen = pool->generation_.load(std::memory_order_acquire);
    const uint64_t opened = pool->opened_at_.load(std::memory_order_relaxed);
    uint64_t gap = opened > idle_since ? opened - idle_since : 0;
    if (gap > 4 * spin) gap = 4 * spin;
    gap_average += (static_cast<int64_t>(gap) - gap_average) / 4;
    // Join the loop unless the caller has already run out of chunks. A
    // worker this late may join the loop after the one it was woken for,
    // which is as good: it reads the loop's fields only once inside.
    uint32_t v = pool->active_.load(std::memory_order_relaxed);
    bool joined = false;
    while ((v & kClosed) == 0) {
      if (pool->active_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel, std::memory_order_relaxed)) {
        joined = true;
        break;
      }
    }
    if (!joined) continue;
    const size_t done = pool->Drain(self->index);
    pool->worker_chunks_.fetch_add(done, std::memory_order_relaxed);
    if (pool->active_.fetch_sub(1, std::memory_order_acq_rel) == (kClosed | 1u)) {
      // The last claimed chunk of a closed loop: the caller may be asleep.
      std::lock_guard<std::mutex> lock(pool->mutex_);
      if (pool->caller_waiting_) pool->done_.notify_one();
    }
  }
}

void ThreadPool::Run(ChunkFn fn, void* ctx, size_t chunks) {
  if (threads_ == 1 || chunks < 2) {
    for (size_t c = 0; c < chunks; ++c) fn(ctx, c, 0);
    return;
  }
  const uint64_t t0 = port::MonotonicNanos();
  fn_ = fn;
  ctx_ = ctx;
  chunks_ = chunks;
  next_chunk_.store(0, std::memory_order_relaxed);
  opened_at_.store(t0, std::memory_order_relaxed);
  active_.store(0, std::memory_order_release);  // open: workers may join
  {
    // Publishing under the mutex pairs with the sleepers' predicate check.
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  if (sleepers_.load() > 0) wake_.notify_all();
  const size_t mine = Drain(0);
  const uint64_t t1 = port::MonotonicNanos();
  // No chunk is left to claim: close the loop, then wait for the claimed ones.
  auto idle = [&] { return (active_.load(std::memory_order_acquire) & ~kClosed) == 0; };
  if ((active_.fetch_or(kClosed, std::memory_order_acq_rel) & ~kClosed) != 0 &&
      !PollFor(caller_spin_, idle)) {
    std::unique_lock<std::mutex> lock(mutex_);
    caller_waiting_ = true;
    done_.wait(lock, idle);
    caller_waiting_ = false;
  }
  const uint64_t t2 = port::MonotonicNanos();
  ++stats_.parallel_runs;
  stats_.chunks_by_caller += mine;
  // A worker preempted in the middle of a chunk made the caller wait far
  // longer than the loop's own work: run loops alone for a while.
  const uint64_t waited = t2 - t1;
  if (waited > kStallNanos && waited > t1 - t0) {
    ++stats_.stalls;
    backoff_ = backoff_ == 0 ? min_backoff_ : (backoff_ * 2 > kMaxBackoffNanos ? kMaxBackoffNanos : backoff_ * 2);
    serial_until_ = t2 + backoff_;
    calm_runs_ = 0;
  } else if (backoff_ != 0 && ++calm_runs_ >= kCalmRuns) {
    backoff_ = 0;
    calm_runs_ = 0;
  }
}

ThreadPool::Stats ThreadPool::stats() const {
  Stats s = stats_;
  s.chunks_by_workers = worker_chunks_.load(std::memory_order_relaxed);
  s.worker_idle_polls = worker_idle_polls_.load(std::memory_order_relaxed);
  s.worker_sleeps = worker_sleeps_.load(std::memory_order_relaxed);
  return s;
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

bool ThreadPool::GoParallel() { return false; }

void ThreadPool::Run(ChunkFn fn, void* ctx, size_t chunks) {
  for (size_t c = 0; c < chunks; ++c) fn(ctx, c, 0);
}

ThreadPool::Stats ThreadPool::stats() const { return stats_; }

#endif

}  // namespace tinyai
