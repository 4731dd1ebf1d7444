#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace tinyai {
namespace {

TEST(ThreadPool, EveryIndexVisitedOnceForManySizesAndThreadCounts) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool;
    ASSERT_EQ(pool.Start(threads), TINYAI_OK);
    EXPECT_EQ(pool.size(), threads);
    for (size_t n : {0u, 1u, 2u, 15u, 16u, 17u, 100u, 1000u}) {
      for (size_t grain : {1u, 16u, 64u}) {
        std::vector<std::atomic<int>> hits(n);
        pool.ParallelFor(n, grain, [&](size_t begin, size_t end, int t) {
          EXPECT_GE(t, 0);
          EXPECT_LT(t, threads);
          EXPECT_TRUE(begin % grain == 0) << begin;
          for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
        });
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
      }
    }
  }
}

TEST(ThreadPool, ManyBackToBackRunsComplete) {
  // The first Run after Start must not be missed by a worker that has not
  // yet looked at the job counter (a bug once hung generation).
  for (int rep = 0; rep < 200; ++rep) {
    ThreadPool pool;
    ASSERT_EQ(pool.Start(2), TINYAI_OK);
    std::atomic<int> calls{0};
    pool.Run([](void* ctx, int, int) { static_cast<std::atomic<int>*>(ctx)->fetch_add(1); }, &calls);
    EXPECT_EQ(calls.load(), 2);
  }
  ThreadPool pool;
  ASSERT_EQ(pool.Start(2), TINYAI_OK);
  std::atomic<long> sum{0};
  for (int i = 0; i < 20000; ++i) {
    pool.ParallelFor(2, 1, [&](size_t b, size_t e, int) { sum.fetch_add(static_cast<long>(e - b)); });
  }
  EXPECT_EQ(sum.load(), 40000);
}

TEST(ThreadPool, RestartAndDestroyWhileIdleAreClean) {
  ThreadPool pool;
  ASSERT_EQ(pool.Start(3), TINYAI_OK);
  ASSERT_EQ(pool.Start(2), TINYAI_OK);
  EXPECT_EQ(pool.size(), 2);
  ASSERT_EQ(pool.Start(0), TINYAI_OK);  // below 1 means the caller alone
  EXPECT_EQ(pool.size(), 1);
}

}  // namespace
}  // namespace tinyai
