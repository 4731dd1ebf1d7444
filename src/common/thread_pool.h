// A pool of compute threads for one model runner (no globals), built to
// degrade gracefully on a machine busy with other processes.
//
// ParallelFor() splits a loop into chunks that the caller and the workers
// claim one at a time from a shared counter, so work is never tied to a
// thread: a worker that is descheduled (or still asleep) when a loop starts
// simply claims nothing, and the caller runs what is left. The caller then
// waits only for chunks a worker has already claimed, and it waits by
// blocking, not spinning, so the CPU goes to whoever needs it. Three more
// rules keep a busy machine from making two threads slower than one:
//  - small loops (less work than kMinParallelWork) run on the caller alone:
//    waking a thread costs more than it saves;
//  - an idle worker polls for the next loop for up to kWorkerSpinNanos,
//    then sleeps, and it polls only while loops have lately come that soon
//    after it went idle (a moving average of the gap, measured on the
//    caller's clock): a worker polling for loops that come rarely (the
//    policy below runs most of them on the caller) takes the core the
//    caller needs on a busy machine, and buys nothing on an idle one;
//  - when the caller had to wait for a claimed chunk much longer than the
//    loop took it (a worker was preempted mid-chunk), the pool runs every
//    loop on the caller alone for a while, doubling that while on each such
//    stall (up to kMaxBackoffNanos) and forgetting it after kCalmRuns loops
//    without one.
// Whether splitting pays at all depends on the machine and on what else it
// runs, so the pool measures it: for loops of each size (SplitPolicy), it
// keeps the cost per unit of work split and on the caller alone, runs each
// loop the cheaper way, and tries the other way now and then (more rarely
// each time it loses). Results never depend on which thread ran a chunk.
// Without threads (ports without them) everything runs on the caller.
#ifndef TINYAI_COMMON_THREAD_POOL_H_
#define TINYAI_COMMON_THREAD_POOL_H_

#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/config.h"
#include "common/seam.h"

#if TINYAI_WITH_THREADS
#include <atomic>
#include <condition_variable>
#include <mutex>
#endif

namespace tinyai {

// Which loops to split, learned from their timings. Loops are grouped by
// the power of two of their work; for each group it keeps a moving average
// of the nanoseconds per unit of work split and inline, and chooses the
// lower. The other way is tried again after kExploreMin loops of the group,
// the interval doubling (up to kExploreMax) each time that way loses and
// falling back when it wins, so a machine that gets busy (or quiet) is
// followed within a few hundred loops.
class SplitPolicy {
 public:
  static constexpr uint32_t kExploreMin = 8;
  static constexpr uint32_t kExploreMax = 1024;
  static constexpr float kMaxSampleRatio = 2.0f;
  // Whether to split the next loop of this much work.
  bool Choose(uint64_t work);
  // What the loop Choose() was asked about took (split or not).
  void Learn(uint64_t work, bool split, uint64_t nanos);
  // The current choice for loops of this much work, without exploring.
  bool Prefers(uint64_t work) const { return classes_[ClassOf(work)].split; }

 private:
  struct Class {
    float split_cost = 0;   // ns per unit of work, moving average (0 = not measured yet)
    float inline_cost = 0;
    uint32_t runs = 0;      // since the last exploration
    uint32_t explore_at = kExploreMin;
    bool split = true;      // the choice, optimistic until measured
    bool exploring = false; // the last Choose() tried the other way
  };
  static constexpr int kClasses = 48;
  static int ClassOf(uint64_t work) {
    const int c = work == 0 ? 0 : 63 - __builtin_clzll(work);
    return c < kClasses ? c : kClasses - 1;
  }
  Class classes_[kClasses];
};

class ThreadPool {
 public:
  // Runs chunk `chunk` of a loop on thread `thread` (0 = the caller).
  using ChunkFn = void (*)(void* ctx, size_t chunk, int thread);

  // Loops with less work than this (in multiply-adds, or any unit of about
  // a nanosecond's work) run on the caller alone.
  static constexpr uint64_t kMinParallelWork = 48 * 1024;
  // Chunks per thread a loop is split into (more chunks balance better and
  // leave less to wait for; each costs an atomic increment).
  static constexpr size_t kChunksPerThread = 4;
  static constexpr uint64_t kWorkerSpinNanos = 50 * 1000;
  static constexpr uint64_t kCallerSpinNanos = 20 * 1000;
  // A wait for claimed chunks is a stall when it is longer than both this
  // and the loop's own time on the caller.
  static constexpr uint64_t kStallNanos = 200 * 1000;
  static constexpr uint64_t kMinBackoffNanos = 1000 * 1000;
  static constexpr uint64_t kMaxBackoffNanos = 256 * 1000 * 1000;
  static constexpr uint32_t kCalmRuns = 256;

  struct Stats {
    uint64_t parallel_runs = 0;   // loops split across threads
    uint64_t inline_runs = 0;     // loops run on the caller alone (small, one thread, or backing off)
    uint64_t backoff_runs = 0;    // of which because of a recent stall
    uint64_t stalls = 0;          // waits for a claimed chunk that counted as a stall
    uint64_t chunks_by_workers = 0;
    uint64_t chunks_by_caller = 0;
    uint64_t worker_idle_polls = 0;  // polls for a next loop that ran out (the worker then slept)
    uint64_t worker_sleeps = 0;      // times a worker slept waiting for a loop
  };

  ThreadPool() = default;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool();

  // threads counts the caller; 1 means no workers.
  TinyAIStatus Start(int threads);
  int size() const { return threads_; }

  // Calls f(begin, end, thread) on contiguous pieces of [0, n) that cover it
  // exactly once, each piece's size a multiple of grain (except the last),
  // on the caller and the workers; returns when all are done. `work` is the
  // whole loop's cost (see kMinParallelWork). thread < size() identifies the
  // running thread (for per-thread scratch).
  template <class F>
  void ParallelFor(size_t n, size_t grain, uint64_t work, F&& f) {
    if (grain == 0) grain = 1;
    const size_t grains = (n + grain - 1) / grain;
    if (grains == 0) return;
    size_t chunks = static_cast<size_t>(threads_) * kChunksPerThread;
    if (chunks > grains) chunks = grains;
    if (chunks < 2 || work < kMinParallelWork || threads_ == 1) {
      ++stats_.inline_runs;
      f(size_t{0}, n, 0);
      return;
    }
    // Split when that has been cheaper for loops of this size (and the pool
    // is not backing off after a stall); time it either way.
    const bool split = GoParallel() && (always_split_ || policy_.Choose(work));
    const uint64_t t0 = port::MonotonicNanos();
    if (!split) {
      ++stats_.inline_runs;
      f(size_t{0}, n, 0);
      policy_.Learn(work, false, port::MonotonicNanos() - t0);
      return;
    }
    struct Ctx {
      F* f;
      size_t n, grain, grains, chunks;
    } ctx{&f, n, grain, grains, chunks};
    Run(
        [](void* p, size_t c, int t) {
          const Ctx* x = static_cast<const Ctx*>(p);
          const size_t begin = x->grains * c / x->chunks * x->grain;
          size_t end = x->grains * (c + 1) / x->chunks * x->grain;
          if (end > x->n) end = x->n;
          if (begin < end) (*x->f)(begin, end, t);
        },
        &ctx, chunks);
    policy_.Learn(work, true, port::MonotonicNanos() - t0);
  }

  // Tests: split every loop above kMinParallelWork, whatever it costs.
  void set_always_split_for_testing(bool on) { always_split_ = on; }
  // Tests: the first backoff after a stall (kMinBackoffNanos by default), so
  // that a slow host (an emulator) still reaches the next loop inside it.
  void set_min_backoff_for_testing(uint64_t nanos) { min_backoff_ = nanos; }

  // Runs fn on chunks [0, chunks) across the threads (every chunk exactly
  // once, in no particular order or thread).
  void Run(ChunkFn fn, void* ctx, size_t chunks);

  // The caller's counters (read them between loops, on the calling thread).
  Stats stats() const;

 private:
  // False when loops run on the caller alone: one thread, or backing off.
  bool GoParallel();
  static void WorkerMain(void* arg);
  void Stop();

  int threads_ = 1;
  Stats stats_;
  SplitPolicy policy_;
  bool always_split_ = false;
  uint64_t min_backoff_ = kMinBackoffNanos;
#if TINYAI_WITH_THREADS
  // Runs chunks of the current loop until none is left; returns how many.
  size_t Drain(int thread);

  struct Worker {
    ThreadPool* pool;
    int index;
    unsigned start_generation;  // read before the thread starts, so no loop is missed
    port::Thread thread;
  };
  static constexpr uint32_t kClosed = 1u << 31;

  Array<Worker> workers_;
  uint64_t worker_spin_ = 0;  // how long idle workers poll before sleeping
  uint64_t caller_spin_ = 0;  // how long the caller polls for claimed chunks before blocking
  // The loop being run: written by the caller before it opens the loop.
  ChunkFn fn_ = nullptr;
  void* ctx_ = nullptr;
  size_t chunks_ = 0;
  std::atomic<size_t> next_chunk_{0};
  std::atomic<uint64_t> opened_at_{0};  // MonotonicNanos() when the caller opened the loop
  // Workers inside the loop, with kClosed set once the caller has run out
  // of chunks (no worker enters after that).
  std::atomic<uint32_t> active_{kClosed};
  std::atomic<uint64_t> worker_chunks_{0};
  std::atomic<uint64_t> worker_idle_polls_{0};
  std::atomic<uint64_t> worker_sleeps_{0};
  std::atomic<unsigned> generation_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};
  std::mutex mutex_;
  std::condition_variable wake_;   // workers: a new loop, or stop
  std::condition_variable done_;   // the caller: the last claimed chunk is done
  bool caller_waiting_ = false;    // under mutex_
  // Backing off after a stall (caller only).
  uint64_t serial_until_ = 0;
  uint64_t backoff_ = 0;
  uint32_t calm_runs_ = 0;
#endif
};

}  // namespace tinyai

#endif  // TINYAI_COMMON_THREAD_POOL_H_
