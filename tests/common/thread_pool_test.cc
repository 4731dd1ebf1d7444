#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "port/port.h"

namespace tinyai {
namespace {

// Enough work that a loop is split across threads.
constexpr uint64_t kBig = ThreadPool::kMinParallelWork * 4;

TEST(ThreadPool, EveryIndexVisitedOnceForManySizesAndThreadCounts) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool;
    ASSERT_EQ(pool.Start(threads), TINYAI_OK);
    pool.set_always_split_for_testing(true);
    EXPECT_EQ(pool.size(), threads);
    for (size_t n : {0u, 1u, 2u, 15u, 16u, 17u, 100u, 1000u, 100000u}) {
      for (size_t grain : {0u, 1u, 16u, 64u}) {
        for (uint64_t work : {uint64_t{0}, kBig}) {
          std::vector<std::atomic<int>> hits(n);
          const size_t g = grain == 0 ? 1 : grain;
          pool.ParallelFor(n, grain, work, [&](size_t begin, size_t end, int t) {
            EXPECT_GE(t, 0);
            EXPECT_LT(t, threads);
            EXPECT_TRUE(begin % g == 0) << begin;
            EXPECT_TRUE(end % g == 0 || end == n) << end;
            for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
          });
          for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
        }
      }
    }
  }
}

TEST(ThreadPool, SmallLoopsRunOnTheCallerAlone) {
  ThreadPool pool;
  ASSERT_EQ(pool.Start(2), TINYAI_OK);
  std::atomic<int> pieces{0};
  pool.ParallelFor(1000, 1, ThreadPool::kMinParallelWork - 1, [&](size_t begin, size_t end, int t) {
    EXPECT_EQ(t, 0);
    EXPECT_EQ(begin, 0u);
    EXPECT_EQ(end, 1000u);
    pieces.fetch_add(1);
  });
  EXPECT_EQ(pieces.load(), 1);
  EXPECT_EQ(pool.stats().inline_runs, 1u);
  EXPECT_EQ(pool.stats().parallel_runs, 0u);
}

TEST(ThreadPool, ManyBackToBackRunsComplete) {
  // The first loop after Start must not be missed by a worker that has not
  // yet looked at the loop counter (a bug once hung generation).
  for (int rep = 0; rep < 200; ++rep) {
    ThreadPool pool;
    ASSERT_EQ(pool.Start(2), TINYAI_OK);
    std::atomic<int> calls{0};
    pool.Run([](void* ctx, size_t, int) { static_cast<std::atomic<int>*>(ctx)->fetch_add(1); }, &calls, 8);
    EXPECT_EQ(calls.load(), 8);
  }
  ThreadPool pool;
  ASSERT_EQ(pool.Start(2), TINYAI_OK);
  pool.set_always_split_for_testing(true);
  std::atomic<long> sum{0};
  for (int i = 0; i < 20000; ++i) {
    pool.ParallelFor(64, 1, kBig, [&](size_t b, size_t e, int) { sum.fetch_add(static_cast<long>(e - b)); });
  }
  EXPECT_EQ(sum.load(), 64 * 20000);
}

// What the tests below wait for is another thread's step (a worker joining
// a loop, the caller running chunks, a worker going to sleep), never an
// interval: their verdicts follow from the order of events alone. The bound
// on each wait only turns a hang (the step never coming: what a broken pool
// does) into a failure with a message. The slowest wait measured on a
// 2-core machine beside two busy loops (and other builds) was 18 ms under
// ASan (12 ms in release, 2.7 ms under ThreadSanitizer alone); qemu runs
// these tests too (aarch64), tens of times slower, beside the rest of the
// suite. A correct pool ends each wait as soon as the step comes, so the
// guard costs only a broken pool's time: 10 s, well past 10x any of them.
constexpr auto kHangGuard = std::chrono::seconds(10);

// A count other threads add to, and waits for it to reach a value.
class Count {
 public:
  void Add(int n) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      value_ += n;
    }
    changed_.notify_all();
  }
  int value() {
    std::lock_guard<std::mutex> lock(mutex_);
    return value_;
  }
  // Whether the count reached at_least (false: a hang).
  bool WaitFor(int at_least) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, kHangGuard, [&] { return value_ >= at_least; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int value_ = 0;
};

// Polls done() until it holds (false: a hang).
template <class Done>
bool WaitUntil(Done&& done) {
  const auto give_up = std::chrono::steady_clock::now() + kHangGuard;
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return done();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

// Spins until done() holds (false: a hang), for a wait that must end within
// microseconds of the event: neither sleeping nor yielding the core.
template <class Done>
bool SpinUntil(Done&& done) {
  const auto give_up = std::chrono::steady_clock::now() + kHangGuard;
  for (unsigned spins = 1; !done(); ++spins) {
    if (spins % 4096 == 0 && std::chrono::steady_clock::now() > give_up) return done();
  }
  return true;
}

TEST(ThreadPool, TheCallerRunsWhatAStuckWorkerLeaves) {
  // A worker that is stuck (descheduled) inside the first chunk it claims
  // holds up only that chunk: the caller runs every other one. In order: the
  // caller's first chunk waits for the worker to claim one, and the worker
  // stays in it until the caller has run all the others - which a pool that
  // waited for the worker, or handed it more than a chunk, never does.
  ThreadPool pool;
  ASSERT_EQ(pool.Start(2), TINYAI_OK);
  pool.set_always_split_for_testing(true);
  const int chunk = 64 / static_cast<int>(2 * ThreadPool::kChunksPerThread);
  Count by_worker, by_caller;
  std::atomic<bool> worker_came{true}, caller_ran_the_rest{true};
  std::vector<std::atomic<int>> hits(64);
  pool.ParallelFor(64, 1, kBig, [&](size_t b, size_t e, int t) {
    for (size_t i = b; i < e; ++i) hits[i].fetch_add(1);
    if (t != 0) {
      by_worker.Add(static_cast<int>(e - b));
      if (!by_caller.WaitFor(64 - chunk)) caller_ran_the_rest = false;
    } else {
      if (b == 0 && !by_worker.WaitFor(1)) worker_came = false;
      by_caller.Add(static_cast<int>(e - b));
    }
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  ASSERT_TRUE(worker_came) << "the worker never joined the loop";
  EXPECT_TRUE(caller_ran_the_rest) << "the caller did not run the chunks the stuck worker left";
  EXPECT_EQ(by_worker.value(), chunk) << "the stuck worker claimed more than its first chunk";
  EXPECT_EQ(by_caller.value(), 64 - chunk);
}

// Runs a loop in which the worker holds the chunk it claims until well after
// the caller has run all the others: twice as long as the loop had taken by
// then, plus 1 ms (a sleep lasts at least that long, however busy the
// machine), so the caller waits longer than kStallNanos and than its own
// part. Returns whether the pool counted a stall (not when the caller was
// preempted between its last chunk and its clock: then try again); *hung
// when a step never came.
bool RunALoopWithAStuckWorker(ThreadPool* pool, bool* hung) {
  const uint64_t stalls = pool->stats().stalls;
  const uint64_t t0 = port::MonotonicNanos();
  Count by_worker, by_caller;
  std::atomic<bool> on_time{true};
  const int others = static_cast<int>(2 * ThreadPool::kChunksPerThread) - 1;
  pool->ParallelFor(64, 1, kBig, [&](size_t b, size_t, int t) {
    if (t != 0) {
      by_worker.Add(1);
      if (!by_caller.WaitFor(others)) on_time = false;
      const uint64_t so_far = port::MonotonicNanos() - t0;
      std::this_thread::sleep_for(std::chrono::nanoseconds(2 * so_far + 1000 * 1000));
    } else {
      if (b == 0 && !by_worker.WaitFor(1)) on_time = false;
      by_caller.Add(1);
    }
  });
  *hung = !on_time;
  return pool->stats().stalls > stalls;
}

// Runs loops with a stuck worker until the pool counts a stall (20 tries:
// the caller may be preempted between its last chunk and its clock).
::testing::AssertionResult Stall(ThreadPool* pool) {
  bool stalled = false, hung = false;
  for (int attempt = 0; attempt < 20 && !stalled && !hung; ++attempt) stalled = RunALoopWithAStuckWorker(pool, &hung);
  if (hung) return ::testing::AssertionFailure() << "the worker never joined the loop, or the caller never ran the other chunks";
  if (!stalled) {
    return ::testing::AssertionFailure() << "a worker held its chunk long after the caller ran out, and no stall was counted";
  }
  return ::testing::AssertionSuccess();
}

TEST(ThreadPool, AStalledLoopMakesThePoolRunAloneForAWhile) {
  // A backoff far longer than anything here takes: the loop right after the
  // stall falls inside it on any machine.
  {
    ThreadPool pool;
    ASSERT_EQ(pool.Start(2), TINYAI_OK);
    pool.set_always_split_for_testing(true);
    pool.set_min_backoff_for_testing(uint64_t{3600} * 1000 * 1000 * 1000);
    ASSERT_TRUE(Stall(&pool));
    // Right after it, loops run on the caller alone, however large.
    const ThreadPool::Stats before = pool.stats();
    std::atomic<int> other_threads{0};
    pool.ParallelFor(64, 1, kBig, [&](size_t, size_t, int t) { other_threads.fetch_add(t != 0); });
    EXPECT_EQ(other_threads.load(), 0);
    EXPECT_EQ(pool.stats().backoff_runs, before.backoff_runs + 1);
    EXPECT_EQ(pool.stats().parallel_runs, before.parallel_runs);
  }
  // And after the backoff (the default, 1 ms after one stall), split again.
  ThreadPool pool;
  ASSERT_EQ(pool.Start(2), TINYAI_OK);
  pool.set_always_split_for_testing(true);
  ASSERT_TRUE(Stall(&pool));
  const ThreadPool::Stats before = pool.stats();
  std::this_thread::sleep_for(std::chrono::nanoseconds(ThreadPool::kMinBackoffNanos));
  pool.ParallelFor(64, 1, kBig, [&](size_t, size_t, int) {});
  EXPECT_EQ(pool.stats().parallel_runs, before.parallel_runs + 1);
  EXPECT_EQ(pool.stats().backoff_runs, before.backoff_runs);
}

// A worker that polls for loops that come rarely takes the core the caller
// needs on a busy machine (the contention benchmark: the default model beside
// two busy loops decoded at 0.84x one thread with workers polling 50 us after
// every loop they were woken for, 0.92x without). In order: each loop opens
// only once the worker has gone to sleep after the last, and 2 ms later (more
// than the 4 x kWorkerSpinNanos the worker counts a gap as at most, since a
// sleep lasts at least that long): rare loops on any machine.
TEST(ThreadPool, WorkersDoNotPollForLoopsThatComeRarely) {
  ThreadPool pool;
  ASSERT_EQ(pool.Start(2), TINYAI_OK);
  pool.set_always_split_for_testing(true);
  // No backoff: on a busy machine the worker is preempted inside a chunk, the
  // pool counts a stall, and a loop run on the caller alone never wakes the
  // worker this test waits for.
  pool.set_min_backoff_for_testing(0);
  constexpr uint64_t kLoops = 50;
  ASSERT_TRUE(WaitUntil([&] { return pool.stats().worker_sleeps >= 1; })) << "the worker never went to sleep";
  for (uint64_t i = 1; i <= kLoops; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    pool.ParallelFor(64, 1, kBig, [](size_t, size_t, int) {});
    ASSERT_TRUE(WaitUntil([&] { return pool.stats().worker_sleeps >= i + 1; }))
        << "the worker never went back to sleep after loop " << i;
  }
  const ThreadPool::Stats s = pool.stats();
  EXPECT_EQ(s.worker_sleeps, kLoops + 1) << "one sleep before each loop (and none for a loop it never saw)";
  EXPECT_LE(s.worker_idle_polls, 3u) << "after a gap or two the worker stops polling for the next loop";
}

// A worker polls for loops that come back to back: a loop that opens within
// kWorkerSpinNanos of the worker going idle finds it polling, not asleep.
// Judged from the order of events and the clock, whatever the machine's
// speed: every loop waits for the worker to take a chunk (the caller's first
// chunk spins until it has), and the test bounds each gap between loops from
// above, from the end of the worker's last chunk of a loop (it goes idle
// after that) to the start of the caller's first chunk of the next (which
// opened before that). A trial is a fresh pool running loops until one comes
// late (a gap over kInTime, on a busy machine: the caller preempted). The
// worker polls while the moving average of its gaps is under
// kWorkerSpinNanos: the first gap (from its start) may be long, the others
// were short, so it polls from the third loop on and catches every loop in
// time. It may sleep before the first two loops, before the late one and
// after the last: 4 sleeps at most, in a trial of kJudged loops in time or
// more. A worker that never polls sleeps before nearly every loop.
TEST(ThreadPool, WorkersPollForLoopsThatComeBackToBack) {
  if (port::CpuCount() < 2) GTEST_SKIP() << "one core: workers never poll, they would take the caller's core";
  constexpr int kLoops = 32, kJudged = 12, kTrials = 1000, kEnough = 10;
  constexpr uint64_t kInTime = ThreadPool::kWorkerSpinNanos * 3 / 4;
  int judged = 0;
  for (int trial = 0; trial < kTrials && judged < kEnough; ++trial) {
    ThreadPool pool;
    ASSERT_EQ(pool.Start(2), TINYAI_OK);
    pool.set_always_split_for_testing(true);
    // No backoff: a loop run on the caller alone after a stall (the worker
    // preempted inside a chunk) has no worker to wait for.
    pool.set_min_backoff_for_testing(0);
    int in_time = 0;
    uint64_t worker_done = 0;
    for (int i = 0; i < kLoops; ++i) {
      std::atomic<bool> worker_in{false}, came{true};
      std::atomic<uint64_t> first_chunk{0}, last_worker_chunk{0};
      bool caller_in = false;
      pool.ParallelFor(64, 1, kBig, [&](size_t, size_t, int t) {
        uint64_t unset = 0;
        const uint64_t now = port::MonotonicNanos();
        first_chunk.compare_exchange_strong(unset, now);
        if (t != 0) {
          worker_in = true;
          last_worker_chunk = now;
        } else if (!caller_in) {
          caller_in = true;
          if (!SpinUntil([&] { return worker_in.load(); })) came = false;
        }
      });
      ASSERT_TRUE(came) << "the worker never joined loop " << i;
      const uint64_t opened_by = first_chunk.load();
      const uint64_t gap = opened_by > worker_done ? opened_by - worker_done : 0;
      worker_done = last_worker_chunk.load();
      if (i > 0 && gap > kInTime) break;
      ++in_time;
    }
    ASSERT_EQ(pool.Start(1), TINYAI_OK);  // stops the worker: its counters are final
    if (in_time < kJudged) continue;
    ++judged;
    EXPECT_LE(pool.stats().worker_sleeps, 4u)
        << "trial " << trial << ": " << in_time << " loops came within " << kInTime / 1000
        << " us of the worker going idle, and it slept " << pool.stats().worker_sleeps << " times";
  }
  std::printf("[ polling  ] %d trials of %d or more loops in time\n", judged, kJudged);
  if (judged == 0) {
    GTEST_SKIP() << "in " << kTrials << " trials the caller never ran " << kJudged
                 << " loops in a row in time: too busy a machine to judge";
  }
}

TEST(ThreadPool, RestartAndDestroyWhileIdleAreClean) {
  ThreadPool pool;
  ASSERT_EQ(pool.Start(3), TINYAI_OK);
  ASSERT_EQ(pool.Start(2), TINYAI_OK);
  EXPECT_EQ(pool.size(), 2);
  ASSERT_EQ(pool.Start(0), TINYAI_OK);  // below 1 means the caller alone
  EXPECT_EQ(pool.size(), 1);
}

TEST(ThreadPool, MoreThreadsThanCoresStillComplete) {
  ThreadPool pool;
  ASSERT_EQ(pool.Start(8), TINYAI_OK);
  pool.set_always_split_for_testing(true);
  std::atomic<long> sum{0};
  for (int i = 0; i < 2000; ++i) {
    pool.ParallelFor(1000, 16, kBig, [&](size_t b, size_t e, int) { sum.fetch_add(static_cast<long>(e - b)); });
  }
  EXPECT_EQ(sum.load(), 1000L * 2000);
}

}  // namespace
}  // namespace tinyai

namespace tinyai {
namespace {

// The choice follows the measured costs: splitting that costs more than it
// saves is given up, and taken up again once it pays.
TEST(SplitPolicy, LearnsWhetherSplittingPays) {
  SplitPolicy p;
  const uint64_t work = 100000;
  int splits = 0;
  // Split costs 3 ns per unit of work, inline 1: after the first trial of
  // inline it runs inline, trying a split less and less often.
  for (int i = 0; i < 2000; ++i) {
    const bool split = p.Choose(work);
    splits += split;
    p.Learn(work, split, split ? 3 * work : work);
  }
  EXPECT_FALSE(p.Prefers(work));
  EXPECT_LT(splits, 20) << "exploring backs off: 8, 16, 32, ... loops apart";
  // The machine gets quiet: split costs 0.5 now; the next trial wins and the
  // choice follows within a trial or two.
  int inline_after = 0;
  for (int i = 0; i < 3000; ++i) {
    const bool split = p.Choose(work);
    if (!split) ++inline_after;
    p.Learn(work, split, split ? work / 2 : work);
  }
  EXPECT_TRUE(p.Prefers(work));
  EXPECT_LT(inline_after, 1200) << "back to splitting within one exploration interval";
  // Loops of another size are learned on their own.
  EXPECT_TRUE(p.Prefers(work * 64));
}

// Runs `loops` loops of `work` through the policy, splitting costing half
// of running inline.
void TrainSplitPays(SplitPolicy* p, uint64_t work, int loops) {
  for (int i = 0; i < loops; ++i) {
    const bool split = p->Choose(work);
    p->Learn(work, split, split ? work / 2 : work);
  }
}

TEST(SplitPolicy, OneSlowSplitDoesNotOutweighManyFastOnes) {
  SplitPolicy p;
  const uint64_t work = 1 << 20;
  TrainSplitPays(&p, work, 100);
  ASSERT_TRUE(p.Prefers(work));
  p.Learn(work, true, work + work / 2);  // one preempted run, 1.5 ns per unit
  EXPECT_TRUE(p.Prefers(work)) << "an eighth of one bad sample: 0.625 < 1";
}

// On a busy machine a loop is now and then preempted for a timeslice,
// hundreds of times its cost, in whichever way it runs: mostly the way in
// use. The choice must follow the costs, not the preemptions (it flipped
// to the slower way after each one before samples were capped).
TEST(SplitPolicy, PreemptionsDoNotDecide) {
  for (const bool split_pays : {false, true}) {
    SplitPolicy p;
    const uint64_t work = 1 << 16;
    const uint64_t fast = work, slow = work + work / 2;  // 1 and 1.5 ns per unit
    int slower = 0;
    for (int i = 0; i < 5000; ++i) {
      const bool split = p.Choose(work);
      uint64_t nanos = split == split_pays ? fast : slow;
      if (i % 10 == 9) nanos *= 300;  // preempted: a 3 ms timeslice on a 10 us loop
      slower += split != split_pays;
      p.Learn(work, split, nanos);
    }
    EXPECT_EQ(p.Prefers(work), split_pays);
    EXPECT_LT(slower, 100) << "the slower way only as trials, " << (split_pays ? "splitting" : "inline") << " pays";
  }
}

// A lasting change is still followed quickly despite the cap: splitting
// that gets four times dearer is given up within a few dozen loops.
TEST(SplitPolicy, CappedSamplesStillFollowALastingChange) {
  SplitPolicy p;
  const uint64_t work = 1 << 16;
  TrainSplitPays(&p, work, 200);
  ASSERT_TRUE(p.Prefers(work));
  int loops = 0;
  while (p.Prefers(work) && loops < 1000) {
    const bool split = p.Choose(work);
    p.Learn(work, split, split ? 2 * work : work);
    ++loops;
  }
  EXPECT_FALSE(p.Prefers(work));
  EXPECT_LT(loops, 40);
}

}  // namespace
}  // namespace tinyai
