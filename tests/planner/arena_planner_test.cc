// The static arena planner: property tests over thousands of random
// graph-shaped buffer sets checked by independent brute force, exact cases,
// bad input, determinism, the dense fallback and a large case.
#include "planner/arena_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "tinyai/status.h"

namespace tinyai {
namespace {

// splitmix64: deterministic on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t Below(uint64_t n) { return Next() % n; }  // n > 0
  int32_t Range(int32_t lo, int32_t hi) { return lo + static_cast<int32_t>(Below(static_cast<uint64_t>(hi - lo + 1))); }

 private:
  uint64_t s_;
};

// A multiple of 64 from 64 bytes to 1 MiB, spread over the orders of
// magnitude (the exponent is uniform).
uint64_t RandomSize(Rng& rng) {
  const int e = rng.Range(0, 14);
  return 64 * (1 + rng.Below(uint64_t{1} << e));
}

// A random set shaped like a network's activations: at each step an operator
// produces a chain buffer (read by the next one or two steps) and sometimes a
// residual skip (live across many steps), an attention-like block (q, k, v
// live through ~6 steps, scores through 2), or per-step scratch. Some sets
// are mostly chains, some mostly long-lived buffers.
std::vector<PlanBuffer> RandomGraph(Rng& rng, int n) {
  std::vector<PlanBuffer> b;
  const int skip_pct = rng.Range(0, 25), attention_pct = rng.Range(0, 20), scratch_pct = rng.Range(5, 40);
  const int zero_pct = rng.Below(4) == 0 ? 5 : 0;
  auto add = [&](uint64_t size, int32_t first, int32_t last) {
    if (static_cast<int>(b.size()) >= n) return;
    if (rng.Range(1, 100) <= zero_pct) size = 0;
    b.push_back(PlanBuffer{size, first, last});
  };
  int32_t step = rng.Range(0, 3);
  while (static_cast<int>(b.size()) < n) {
    add(RandomSize(rng), step, step + rng.Range(1, 2));
    if (rng.Range(1, 100) <= skip_pct) add(RandomSize(rng), step, step + rng.Range(4, 40));
    if (rng.Range(1, 100) <= attention_pct) {
      const int32_t len = rng.Range(4, 8);
      const uint64_t qkv = RandomSize(rng);
      for (int k = 0; k < 3; ++k) add(qkv, step, step + len);
      add(RandomSize(rng), step + 1, step + 2);  // scores
    }
    if (rng.Range(1, 100) <= scratch_pct) add(RandomSize(rng), step, step);
    step += rng.Below(5) == 0 ? 0 : 1;  // sometimes several operators' outputs at one step
  }
  return b;
}

bool Share(const PlanBuffer& x, const PlanBuffer& y) { return x.first <= y.last && y.first <= x.last; }

// Do two nonzero buffers that share a step overlap in memory? (A plain
// interval test; the offsets in these tests are far from 2^64.)
bool Clash(const std::vector<PlanBuffer>& b, const std::vector<uint64_t>& off, size_t i, size_t j) {
  return b[i].size && b[j].size && Share(b[i], b[j]) && off[i] < off[j] + b[j].size && off[j] < off[i] + b[i].size;
}

// O(n^2): the first clashing pair, or false.
bool BruteOverlap(const std::vector<PlanBuffer>& b, const std::vector<uint64_t>& off, size_t* pi, size_t* pj) {
  for (size_t i = 0; i < b.size(); ++i) {
    for (size_t j = i + 1; j < b.size(); ++j) {
      if (Clash(b, off, i, j)) {
        *pi = i;
        *pj = j;
        return true;
      }
    }
  }
  return false;
}

uint64_t LiveAt(const std::vector<PlanBuffer>& b, int32_t step) {
  uint64_t live = 0;
  for (const PlanBuffer& x : b) {
    if (x.first <= step && step <= x.last) live += x.size;
  }
  return live;
}

// Every step from the first to the last, summing the live sizes.
uint64_t BruteLowerBound(const std::vector<PlanBuffer>& b) {
  if (b.empty()) return 0;
  int32_t lo = b[0].first, hi = b[0].last;
  for (const PlanBuffer& x : b) {
    lo = std::min(lo, x.first);
    hi = std::max(hi, x.last);
  }
  uint64_t best = 0;
  for (int32_t s = lo; s <= hi; ++s) best = std::max(best, LiveAt(b, s));
  return best;
}

// The placement rule written the slow, obvious way (O(n^2) per order): each
// order of the header, each buffer at the lowest offset where it overlaps no
// placed buffer sharing a step, the smallest arena winning (ties: the first
// order). The planner's sweep, pair table, tree and shortcuts must give
// exactly this.
struct Reference {
  std::vector<uint64_t> offsets;
  uint64_t arena = 0;
  int order = -1;
  int32_t first_above_bound = -1;
};

Reference ReferencePlan(const std::vector<PlanBuffer>& b, uint64_t bound) {
  Reference best;
  best.offsets.assign(b.size(), 0);
  std::vector<size_t> ids;
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i].size) ids.push_back(i);
  }
  if (ids.empty()) return best;
  auto len = [&](size_t i) { return static_cast<uint64_t>(b[i].last - b[i].first) + 1; };
  std::vector<std::pair<uint64_t, uint64_t>> taken;  // (offset, end) of placed conflicting buffers
  std::vector<uint64_t> candidates;
  for (int order = 0; order < 3; ++order) {
    std::vector<size_t> o = ids;
    std::sort(o.begin(), o.end(), [&](size_t x, size_t y) {
      const uint64_t sx = b[x].size, sy = b[y].size, lx = len(x), ly = len(y);
      if (order == 0 && sx != sy) return sx > sy;
      if (order == 0 && lx != ly) return lx > ly;
      if (order == 1 && lx != ly) return lx > ly;
      if (order == 1 && sx != sy) return sx > sy;
      if (order == 2 && sx * lx != sy * ly) return sx * lx > sy * ly;  // test sizes keep this exact
      if (b[x].first != b[y].first) return b[x].first < b[y].first;
      return x < y;
    });
    std::vector<uint64_t> off(b.size(), 0);
    std::vector<bool> placed(b.size(), false);
    uint64_t arena = 0;
    int32_t above = -1;
    for (size_t i : o) {
      // Candidates: 0 and the end of every placed conflicting buffer; the
      // lowest that overlaps none of them.
      taken.clear();
      for (size_t j : ids) {
        if (placed[j] && Share(b[i], b[j])) taken.emplace_back(off[j], off[j] + b[j].size);
      }
      candidates.assign(1, 0);
      for (const auto& t : taken) candidates.push_back(t.second);
      std::sort(candidates.begin(), candidates.end());
      for (uint64_t c : candidates) {
        bool free = true;
        for (const auto& t : taken) free = free && !(c < t.second && t.first < c + b[i].size);
        if (free) {
          off[i] = c;
          break;
        }
      }
      placed[i] = true;
      arena = std::max(arena, off[i] + b[i].size);
      if (above < 0 && off[i] + b[i].size > bound) above = static_cast<int32_t>(i);
    }
    if (best.order < 0 || arena < best.arena) {
      best.offsets = off;
      best.arena = arena;
      best.order = order;
      best.first_above_bound = above;
    }
  }
  return best;
}

struct Planned {
  TinyAIStatus status = TINYAI_OK;
  std::vector<uint64_t> offsets;
  ArenaPlanResult result;
};

Planned Plan(ArenaPlanner& planner, const std::vector<PlanBuffer>& b) {
  Planned p;
  p.offsets.assign(b.size(), 0xdeadbeefu);
  p.status = planner.Plan(Span<const PlanBuffer>(b.data(), b.size()), p.offsets.data(), &p.result);
  return p;
}

Span<const PlanBuffer> SpanOf(const std::vector<PlanBuffer>& b) { return Span<const PlanBuffer>(b.data(), b.size()); }

// Every check of one planned set; returns arena / lower bound.
double CheckSet(ArenaPlanner& planner, const std::vector<PlanBuffer>& b, Rng& rng, const std::string& what,
                bool reference = true) {
  SCOPED_TRACE(what);
  const Planned p = Plan(planner, b);
  EXPECT_EQ(p.status, TINYAI_OK) << tinyaiGetLastErrorMessage();
  if (p.status != TINYAI_OK) return 0;
  const ArenaPlanResult& r = p.result;

  size_t i = 0, j = 0;
  EXPECT_FALSE(BruteOverlap(b, p.offsets, &i, &j)) << "buffers " << i << " and " << j << " overlap";

  uint64_t naive = 0, top = 0;
  for (size_t k = 0; k < b.size(); ++k) {
    naive += b[k].size;
    if (b[k].size == 0) EXPECT_EQ(p.offsets[k], 0u) << "zero-size buffer " << k;
    top = std::max(top, p.offsets[k] + b[k].size);
  }
  EXPECT_EQ(r.naive_bytes, naive);
  EXPECT_EQ(r.arena_bytes, top);
  const uint64_t lb = BruteLowerBound(b);
  EXPECT_EQ(r.lower_bound_bytes, lb);
  EXPECT_GE(r.arena_bytes, r.lower_bound_bytes);
  EXPECT_LE(r.arena_bytes, r.naive_bytes);
  EXPECT_EQ(LiveAt(b, r.peak_step), lb) << "peak step " << r.peak_step;
  int32_t peak = -2;
  EXPECT_EQ(ArenaLowerBound(SpanOf(b), &peak), lb);
  EXPECT_EQ(LiveAt(b, peak), lb);
  if (naive > 0) {
    EXPECT_GE(r.order, 0);
    EXPECT_LT(r.order, ArenaPlanner::OrderCount());
  } else {
    EXPECT_EQ(r.order, -1);  // nothing to place
  }
  if (r.arena_bytes > r.lower_bound_bytes) {
    EXPECT_GE(r.first_above_bound, 0);
    if (r.first_above_bound >= 0) {
      const size_t f = static_cast<size_t>(r.first_above_bound);
      EXPECT_GT(p.offsets[f] + b[f].size, r.lower_bound_bytes);
    }
  } else {
    EXPECT_EQ(r.first_above_bound, -1);
  }

  if (reference) {
    const Reference ref = ReferencePlan(b, lb);
    EXPECT_EQ(r.order, ref.order);
    EXPECT_EQ(r.arena_bytes, ref.arena);
    EXPECT_EQ(r.first_above_bound, ref.first_above_bound);
    EXPECT_TRUE(p.offsets == ref.offsets) << "the placement differs from the reference rule";
  }

  int32_t a = -2, c = -2;
  EXPECT_TRUE(CheckPlacement(SpanOf(b), p.offsets.data(), &a, &c));
  EXPECT_EQ(a, -1);
  EXPECT_EQ(c, -1);

  // Broken on purpose: move one buffer of a conflicting pair onto the other.
  std::vector<std::pair<size_t, size_t>> conflicts;
  for (size_t x = 0; x < b.size(); ++x) {
    for (size_t y = x + 1; y < b.size(); ++y) {
      if (b[x].size && b[y].size && Share(b[x], b[y])) conflicts.emplace_back(x, y);
    }
  }
  if (!conflicts.empty()) {
    const auto pick = conflicts[rng.Below(conflicts.size())];
    std::vector<uint64_t> broken = p.offsets;
    broken[pick.second] = broken[pick.first] + rng.Below(b[pick.first].size);
    EXPECT_TRUE(BruteOverlap(b, broken, &i, &j));
    a = c = -2;
    EXPECT_FALSE(CheckPlacement(SpanOf(b), broken.data(), &a, &c));
    EXPECT_LT(a, c);
    if (a >= 0 && c >= 0 && a < c && static_cast<size_t>(c) < b.size()) {
      EXPECT_TRUE(Clash(b, broken, static_cast<size_t>(a), static_cast<size_t>(c))) << a << " vs " << c;
    }
  }
  // Every buffer in its own place (the naive layout) never clashes.
  std::vector<uint64_t> own(b.size());
  for (size_t k = 1; k < b.size(); ++k) own[k] = own[k - 1] + b[k - 1].size;
  EXPECT_TRUE(CheckPlacement(SpanOf(b), own.data(), nullptr, nullptr));
  // Random placements (mostly clashing, small sets sometimes not): the
  // verdicts agree.
  std::vector<uint64_t> random(b.size());
  const uint64_t span = naive / 16 + 1;
  for (uint64_t& o : random) o = 64 * rng.Below(span);
  const bool brute_clash = BruteOverlap(b, random, &i, &j);
  a = c = -2;
  EXPECT_EQ(CheckPlacement(SpanOf(b), random.data(), &a, &c), !brute_clash);
  if (brute_clash && a >= 0 && c >= 0) EXPECT_TRUE(Clash(b, random, static_cast<size_t>(a), static_cast<size_t>(c)));

  return lb ? static_cast<double>(r.arena_bytes) / static_cast<double>(lb) : 1.0;
}

TEST(ArenaPlanner, PropertiesOnRandomGraphs) {
  constexpr int kSets = 3000;
  ArenaPlanner planner;  // reused: it must not carry anything over
  Rng rng(20261122);
  double arena_sum = 0, bound_sum = 0, worst = 1.0;
  int worst_set = -1, above_bound = 0;
  std::vector<int> wins(static_cast<size_t>(ArenaPlanner::OrderCount()), 0);
  for (int s = 0; s < kSets; ++s) {
    const int n = rng.Range(5, 300);
    std::vector<PlanBuffer> b = RandomGraph(rng, n);
    // Every 8th set in larger units (up to 64 TiB): the order keys above 32
    // bits. Placement is scale-free, so the sums below divide the unit out
    // and every set weighs the same whatever its unit.
    const int shift = s % 8 == 7 ? 26 : 0;
    for (PlanBuffer& x : b) x.size <<= shift;
    const double ratio = CheckSet(planner, b, rng, "set " + std::to_string(s) + " (" + std::to_string(n) + " buffers)");
    if (HasFailure()) return;  // one set's messages are enough
    const Planned p = Plan(planner, b);
    arena_sum += static_cast<double>(p.result.arena_bytes >> shift);
    bound_sum += static_cast<double>(p.result.lower_bound_bytes >> shift);
    if (p.result.arena_bytes > p.result.lower_bound_bytes) ++above_bound;
    if (p.result.order >= 0) ++wins[static_cast<size_t>(p.result.order)];
    if (ratio > worst) {
      worst = ratio;
      worst_set = s;
    }
  }
  const double aggregate = arena_sum / bound_sum;
  std::printf("arena planner: %d sets, sum(arena)/sum(lower bound) = %.4f, worst set %d at %.4f, %d above the bound\n",
              kSets, aggregate, worst_set, worst, above_bound);
  for (int o = 0; o < ArenaPlanner::OrderCount(); ++o) {
    std::printf("arena planner: order %-8s won %d sets\n", ArenaPlanner::OrderName(o), wins[static_cast<size_t>(o)]);
  }
  EXPECT_LE(aggregate, 1.05);
  EXPECT_LE(worst, 1.5);
}

TEST(ArenaPlanner, OrderNames) {
  ASSERT_EQ(ArenaPlanner::OrderCount(), 3);
  EXPECT_STREQ(ArenaPlanner::OrderName(0), "size");
  EXPECT_STREQ(ArenaPlanner::OrderName(1), "lifetime");
  EXPECT_STREQ(ArenaPlanner::OrderName(2), "area");
  EXPECT_NE(ArenaPlanner::OrderName(-1), nullptr);
  EXPECT_NE(ArenaPlanner::OrderName(ArenaPlanner::OrderCount()), nullptr);
}

TEST(ArenaPlanner, DisjointLifetimesShareTheLargestSlot) {
  std::vector<PlanBuffer> b;
  for (int32_t s = 0; s < 50; ++s) b.push_back(PlanBuffer{64u * (1 + (s * 37) % 23), s, s});
  ArenaPlanner planner;
  const Planned p = Plan(planner, b);
  ASSERT_EQ(p.status, TINYAI_OK);
  EXPECT_EQ(p.result.arena_bytes, 64u * 23);
  EXPECT_EQ(p.result.lower_bound_bytes, 64u * 23);
  EXPECT_EQ(p.result.first_above_bound, -1);
  for (uint64_t o : p.offsets) EXPECT_EQ(o, 0u);
}

TEST(ArenaPlanner, OneSharedStepStacksEverything) {
  std::vector<PlanBuffer> b;
  uint64_t sum = 0;
  int32_t all_live = 0;  // the first step where every buffer is live
  Rng rng(7);
  for (int i = 0; i < 200; ++i) {
    b.push_back(PlanBuffer{RandomSize(rng), rng.Range(0, 10), 0});
    b.back().last = 10 + rng.Range(0, 5);  // all live at step 10
    sum += b.back().size;
    all_live = std::max(all_live, b.back().first);
  }
  ArenaPlanner planner;
  const Planned p = Plan(planner, b);
  ASSERT_EQ(p.status, TINYAI_OK);
  EXPECT_EQ(p.result.arena_bytes, sum);
  EXPECT_EQ(p.result.lower_bound_bytes, sum);
  EXPECT_EQ(p.result.naive_bytes, sum);
  EXPECT_EQ(p.result.peak_step, all_live);
  EXPECT_TRUE(CheckPlacement(SpanOf(b), p.offsets.data(), nullptr, nullptr));
}

// A small network: a chain of alternating 1000- and 500-byte activations and
// a 200-byte skip across all of it. The bound (1700 at steps 1..3) is
// reachable: the 1000s share offset 0, the 500s sit at 1000, the skip at 1500.
TEST(ArenaPlanner, TextbookChainReachesTheBound) {
  const std::vector<PlanBuffer> b = {
      {1000, 0, 1}, {500, 1, 2}, {1000, 2, 3}, {500, 3, 4}, {200, 0, 4},
  };
  ArenaPlanner planner;
  const Planned p = Plan(planner, b);
  ASSERT_EQ(p.status, TINYAI_OK);
  EXPECT_EQ(p.result.lower_bound_bytes, 1700u);
  EXPECT_EQ(p.result.arena_bytes, 1700u);
  EXPECT_EQ(p.result.naive_bytes, 3200u);
  EXPECT_EQ(p.result.order, 0);  // "size" reaches the bound, so it wins
  EXPECT_EQ(p.result.first_above_bound, -1);
  EXPECT_EQ(p.offsets, (std::vector<uint64_t>{0, 1000, 0, 1000, 1500}));
  EXPECT_GE(p.result.peak_step, 1);
  EXPECT_LE(p.result.peak_step, 3);
}

// First fit takes the lowest gap that holds a buffer, not the top.
TEST(ArenaPlanner, FirstFitUsesALowGap) {
  // Placed by size: A (400, step 0) at 0; B (300, steps 0..2) above A at 400;
  // C (200, step 2) conflicts only with B, so it takes [0, 200) under B;
  // D (150, step 2) conflicts with B and C and takes the gap [200, 400)
  // between them.
  const std::vector<PlanBuffer> b = {{400, 0, 0}, {300, 0, 2}, {200, 2, 2}, {150, 2, 2}};
  ArenaPlanner planner;
  const Planned p = Plan(planner, b);
  ASSERT_EQ(p.status, TINYAI_OK);
  EXPECT_EQ(p.offsets, (std::vector<uint64_t>{0, 400, 0, 200}));
  EXPECT_EQ(p.result.arena_bytes, 700u);
  EXPECT_EQ(p.result.lower_bound_bytes, 700u);
  EXPECT_EQ(p.result.peak_step, 0);
}

// Ties in the size order go to the longer-lived buffer, then the earlier one.
TEST(ArenaPlanner, SizeTiesGoToLongerThenEarlier) {
  ArenaPlanner planner;
  const std::vector<PlanBuffer> longer = {{128, 0, 0}, {128, 0, 3}};
  const Planned a = Plan(planner, longer);
  ASSERT_EQ(a.status, TINYAI_OK);
  EXPECT_EQ(a.result.order, 0);
  EXPECT_EQ(a.offsets, (std::vector<uint64_t>{128, 0}));
  const std::vector<PlanBuffer> earlier = {{128, 1, 2}, {128, 0, 1}};
  const Planned b = Plan(planner, earlier);
  ASSERT_EQ(b.status, TINYAI_OK);
  EXPECT_EQ(b.result.order, 0);
  EXPECT_EQ(b.offsets, (std::vector<uint64_t>{128, 0}));
}

// Sets where one order beats the others (found by a search over small sets;
// sizes in units). Each runs with 64-byte units and with 4 GiB units, so the
// orders' keys are exercised above 32 bits too.
std::vector<PlanBuffer> Scaled(std::vector<PlanBuffer> b, uint64_t unit) {
  for (PlanBuffer& x : b) x.size *= unit;
  return b;
}

constexpr uint64_t kUnits[] = {64, uint64_t{1} << 32};

TEST(ArenaPlanner, LifetimeOrderCanWin) {
  for (uint64_t unit : kUnits) {
    SCOPED_TRACE(unit);
    // By size: 11 units; longest-lived first reaches the bound, 10.
    const std::vector<PlanBuffer> b = Scaled({{3, 1, 1}, {1, 0, 2}, {3, 0, 0}, {4, 1, 3}, {6, 3, 4}, {5, 0, 0}}, unit);
    ArenaPlanner planner;
    const Planned p = Plan(planner, b);
    ASSERT_EQ(p.status, TINYAI_OK);
    EXPECT_EQ(p.result.lower_bound_bytes, 10 * unit);
    EXPECT_EQ(p.result.arena_bytes, 10 * unit);
    EXPECT_STREQ(ArenaPlanner::OrderName(p.result.order), "lifetime");
    // Longest first, larger first among equal lifetimes.
    EXPECT_EQ(p.offsets, (std::vector<uint64_t>{5 * unit, 4 * unit, 0, 0, 4 * unit, 5 * unit}));
  }
}

TEST(ArenaPlanner, AreaOrderCanWin) {
  for (uint64_t unit : kUnits) {
    SCOPED_TRACE(unit);
    // By size and by lifetime: 10 units; by size x lifetime: the bound, 9.
    const std::vector<PlanBuffer> b = Scaled({{5, 3, 4}, {1, 2, 4}, {5, 0, 1}, {4, 0, 2}}, unit);
    ArenaPlanner planner;
    const Planned p = Plan(planner, b);
    ASSERT_EQ(p.status, TINYAI_OK);
    EXPECT_EQ(p.result.lower_bound_bytes, 9 * unit);
    EXPECT_EQ(p.result.arena_bytes, 9 * unit);
    EXPECT_STREQ(ArenaPlanner::OrderName(p.result.order), "area");
  }
}

TEST(ArenaPlanner, TiedOrdersKeepTheFirst) {
  for (uint64_t unit : kUnits) {
    SCOPED_TRACE(unit);
    // Every order gives 13 units against a bound of 10 (which a chain
    // placement would reach: the greedy orders are heuristics); the first
    // order wins.
    const std::vector<PlanBuffer> b = Scaled({{4, 3, 5}, {5, 4, 6}, {4, 2, 3}, {6, 0, 2}}, unit);
    ArenaPlanner planner;
    const Planned p = Plan(planner, b);
    ASSERT_EQ(p.status, TINYAI_OK);
    EXPECT_EQ(p.result.lower_bound_bytes, 10 * unit);
    EXPECT_EQ(p.result.arena_bytes, 13 * unit);
    EXPECT_EQ(p.result.order, 0);
    // By size: 6 at 0, 5 at 0, the 4 at steps 3..5 at 5, the 4 at steps 2..3
    // on top at 9, the first past the bound.
    EXPECT_EQ(p.offsets, (std::vector<uint64_t>{5 * unit, 0, 9 * unit, 0}));
    EXPECT_EQ(p.result.first_above_bound, 2);
  }
}

TEST(ArenaPlanner, ZeroSizeBuffersTakeNothing) {
  const std::vector<PlanBuffer> b = {{0, 0, 9}, {128, 0, 1}, {0, 1, 1}, {64, 1, 2}, {0, 5, 5}};
  ArenaPlanner planner;
  const Planned p = Plan(planner, b);
  ASSERT_EQ(p.status, TINYAI_OK);
  EXPECT_EQ(p.offsets[0], 0u);
  EXPECT_EQ(p.offsets[2], 0u);
  EXPECT_EQ(p.offsets[4], 0u);
  EXPECT_EQ(p.result.arena_bytes, 192u);
  EXPECT_EQ(p.result.lower_bound_bytes, 192u);
  EXPECT_EQ(p.result.naive_bytes, 192u);
  EXPECT_EQ(p.result.peak_step, 1);
  EXPECT_TRUE(CheckPlacement(SpanOf(b), p.offsets.data(), nullptr, nullptr));

  // Only zero sizes: nothing to place.
  const std::vector<PlanBuffer> zeros = {{0, 3, 4}, {0, 2, 2}};
  const Planned z = Plan(planner, zeros);
  ASSERT_EQ(z.status, TINYAI_OK);
  EXPECT_EQ(z.offsets, (std::vector<uint64_t>{0, 0}));
  EXPECT_EQ(z.result.arena_bytes, 0u);
  EXPECT_EQ(z.result.lower_bound_bytes, 0u);
  EXPECT_EQ(z.result.naive_bytes, 0u);
  EXPECT_EQ(z.result.first_above_bound, -1);
  EXPECT_EQ(z.result.order, -1);  // nothing was placed
  EXPECT_EQ(z.result.peak_step, 2);
  EXPECT_EQ(ArenaLowerBound(SpanOf(zeros), nullptr), 0u);
}

TEST(ArenaPlanner, SingleBuffer) {
  const std::vector<PlanBuffer> b = {{4096, 3, 7}};
  ArenaPlanner planner;
  const Planned p = Plan(planner, b);
  ASSERT_EQ(p.status, TINYAI_OK);
  EXPECT_EQ(p.offsets[0], 0u);
  EXPECT_EQ(p.result.arena_bytes, 4096u);
  EXPECT_EQ(p.result.lower_bound_bytes, 4096u);
  EXPECT_EQ(p.result.naive_bytes, 4096u);
  EXPECT_EQ(p.result.peak_step, 3);
  EXPECT_EQ(p.result.order, 0);
  EXPECT_EQ(p.result.first_above_bound, -1);
}

TEST(ArenaPlanner, NoBuffers) {
  ArenaPlanner planner;
  ArenaPlanResult r;
  r.arena_bytes = 1;
  EXPECT_EQ(planner.Plan(Span<const PlanBuffer>(), nullptr, &r), TINYAI_OK);
  EXPECT_EQ(r.arena_bytes, 0u);
  EXPECT_EQ(r.lower_bound_bytes, 0u);
  EXPECT_EQ(r.naive_bytes, 0u);
  EXPECT_EQ(r.peak_step, -1);
  EXPECT_EQ(r.order, -1);
  EXPECT_EQ(r.first_above_bound, -1);
  int32_t peak = 5;
  EXPECT_EQ(ArenaLowerBound(Span<const PlanBuffer>(), &peak), 0u);
  EXPECT_EQ(peak, -1);
  EXPECT_TRUE(CheckPlacement(Span<const PlanBuffer>(), nullptr, nullptr, nullptr));
}

TEST(ArenaPlanner, RejectsEndBeforeStart) {
  const std::vector<PlanBuffer> b = {{64, 0, 1}, {64, 1, 2}, {64, 2, 3}, {64, 9, 4}};
  ArenaPlanner planner;
  tinyaiClearLastError();
  EXPECT_EQ(Plan(planner, b).status, TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiGetLastError(), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(tinyaiGetLastErrorMessage(), "buffer 3"), nullptr) << tinyaiGetLastErrorMessage();
}

TEST(ArenaPlanner, RejectsNegativeSteps) {
  ArenaPlanner planner;
  const std::vector<PlanBuffer> first_negative = {{64, 0, 1}, {64, -1, 2}};
  tinyaiClearLastError();
  EXPECT_EQ(Plan(planner, first_negative).status, TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(tinyaiGetLastErrorMessage(), "buffer 1"), nullptr) << tinyaiGetLastErrorMessage();
  const std::vector<PlanBuffer> both_negative = {{64, 0, 1}, {64, 1, 1}, {64, -5, -3}};
  tinyaiClearLastError();
  EXPECT_EQ(Plan(planner, both_negative).status, TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(tinyaiGetLastErrorMessage(), "buffer 2"), nullptr) << tinyaiGetLastErrorMessage();
  // Zero-size buffers are validated too.
  const std::vector<PlanBuffer> zero = {{0, 4, 1}};
  EXPECT_EQ(Plan(planner, zero).status, TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(tinyaiGetLastErrorMessage(), "buffer 0"), nullptr) << tinyaiGetLastErrorMessage();
}

TEST(ArenaPlanner, RejectsSizesThatOverflow) {
  ArenaPlanner planner;
  const std::vector<PlanBuffer> b = {{64, 0, 0}, {UINT64_MAX / 2 + 1, 1, 1}, {UINT64_MAX / 2 + 1, 5, 5}};
  tinyaiClearLastError();
  EXPECT_EQ(Plan(planner, b).status, TINYAI_ERR_OVERFLOW);
  EXPECT_EQ(tinyaiGetLastError(), TINYAI_ERR_OVERFLOW);
  EXPECT_NE(std::strstr(tinyaiGetLastErrorMessage(), "buffer 2"), nullptr) << tinyaiGetLastErrorMessage();
  // Right at the limit is fine: the sum is exactly UINT64_MAX.
  const std::vector<PlanBuffer> edge = {{UINT64_MAX / 2, 0, 1}, {UINT64_MAX / 2 + 1, 1, 2}};
  const Planned p = Plan(planner, edge);
  ASSERT_EQ(p.status, TINYAI_OK) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(p.result.arena_bytes, UINT64_MAX);
  EXPECT_EQ(p.result.lower_bound_bytes, UINT64_MAX);
  EXPECT_TRUE(CheckPlacement(SpanOf(edge), p.offsets.data(), nullptr, nullptr));
}

TEST(ArenaPlanner, RejectsMissingArrays) {
  ArenaPlanner planner;
  const std::vector<PlanBuffer> b = {{64, 0, 0}};
  EXPECT_EQ(planner.Plan(SpanOf(b), nullptr, nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  ArenaPlanResult r;
  EXPECT_EQ(planner.Plan(SpanOf(b), nullptr, &r), TINYAI_ERR_INVALID_ARGUMENT);
}

TEST(ArenaPlanner, CheckPlacementHandlesHugeOffsets) {
  // Ends past 2^64 must not wrap around into a false "no overlap".
  const std::vector<PlanBuffer> b = {{128, 0, 1}, {128, 1, 2}};
  const uint64_t clash[] = {UINT64_MAX - 100, UINT64_MAX - 50};
  int32_t a = -2, c = -2;
  EXPECT_FALSE(CheckPlacement(SpanOf(b), clash, &a, &c));
  EXPECT_EQ(a, 0);
  EXPECT_EQ(c, 1);
  const uint64_t apart[] = {0, UINT64_MAX - 127};
  EXPECT_TRUE(CheckPlacement(SpanOf(b), apart, &a, &c));
  // Touching is not overlapping.
  const uint64_t touching[] = {128, 0};
  EXPECT_TRUE(CheckPlacement(SpanOf(b), touching, nullptr, nullptr));
}

TEST(ArenaPlanner, Deterministic) {
  Rng rng(99);
  const std::vector<PlanBuffer> b = RandomGraph(rng, 500);
  ArenaPlanner one, two;
  const Planned p1 = Plan(one, b), p2 = Plan(one, b), p3 = Plan(two, b);
  ASSERT_EQ(p1.status, TINYAI_OK);
  EXPECT_EQ(p1.offsets, p2.offsets);
  EXPECT_EQ(p1.offsets, p3.offsets);
  EXPECT_EQ(p1.result.arena_bytes, p2.result.arena_bytes);
  EXPECT_EQ(p1.result.order, p3.result.order);
  EXPECT_EQ(p1.result.peak_step, p3.result.peak_step);
  EXPECT_EQ(p1.result.first_above_bound, p3.result.first_above_bound);
}

TEST(ArenaPlanner, ReusedForDifferentSizes) {
  ArenaPlanner reused;
  EXPECT_EQ(reused.working_bytes(), 0u);
  Rng rng(5);
  uint64_t grown = 0;
  for (int n : {300, 5, 2000, 0, 1, 40, 2000, 300}) {
    SCOPED_TRACE(n);
    const std::vector<PlanBuffer> b = RandomGraph(rng, n);
    ArenaPlanner fresh;
    const Planned a = Plan(reused, b), f = Plan(fresh, b);
    ASSERT_EQ(a.status, TINYAI_OK);
    ASSERT_EQ(f.status, TINYAI_OK);
    EXPECT_EQ(a.offsets, f.offsets);
    EXPECT_EQ(a.result.arena_bytes, f.result.arena_bytes);
    EXPECT_EQ(a.result.lower_bound_bytes, f.result.lower_bound_bytes);
    EXPECT_EQ(a.result.order, f.result.order);
    EXPECT_GE(reused.working_bytes(), grown);  // kept, never shrunk
    grown = reused.working_bytes();
  }
  EXPECT_GT(grown, 0u);
}

// Thousands of buffers live at once take the fallback without a pair table;
// it must place exactly as the table does. A graph planned alone (table) and
// the same graph next to a dense clique of tiny buffers at an earlier step
// (fallback for everything) get the same offsets: the clique conflicts with
// none of the graph's buffers and stays below the graph's arena.
TEST(ArenaPlanner, DenseFallbackPlacesLikeTheTable) {
  Rng rng(31337);
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    std::vector<PlanBuffer> graph = RandomGraph(rng, 300);
    graph.push_back(PlanBuffer{64 * 100, 0, 0});  // every arena is above the clique's 1500
    std::vector<PlanBuffer> dense = graph;
    for (PlanBuffer& b : dense) {
      b.first += 1;
      b.last += 1;
    }
    constexpr size_t kClique = 1500;  // 1.1 million conflicting pairs
    for (size_t i = 0; i < kClique; ++i) dense.push_back(PlanBuffer{1, 0, 0});

    ArenaPlanner alone, with_clique;
    const Planned a = Plan(alone, graph), d = Plan(with_clique, dense);
    ASSERT_EQ(a.status, TINYAI_OK);
    ASSERT_EQ(d.status, TINYAI_OK);
    // No per-pair memory: a pair table alone would take 4.5 MB.
    EXPECT_LT(with_clique.working_bytes(), kClique * kClique / 2);
    EXPECT_EQ(std::vector<uint64_t>(d.offsets.begin(), d.offsets.begin() + static_cast<long>(graph.size())), a.offsets);
    EXPECT_EQ(d.result.arena_bytes, a.result.arena_bytes);
    EXPECT_EQ(d.result.order, a.result.order);
    EXPECT_TRUE(CheckPlacement(SpanOf(dense), d.offsets.data(), nullptr, nullptr));
    std::vector<uint64_t> clique(d.offsets.begin() + static_cast<long>(graph.size()), d.offsets.end());
    std::sort(clique.begin(), clique.end());
    for (size_t i = 0; i < kClique; ++i) ASSERT_EQ(clique[i], i);  // packed: the sum of sizes
  }
}

// Dense random sets (long lifetimes, about a million conflicting pairs each)
// through the fallback, checked by brute force.
TEST(ArenaPlanner, DenseRandomSets) {
  Rng rng(4242);
  ArenaPlanner planner;
  double arena_sum = 0, bound_sum = 0;
  for (int s = 0; s < 3; ++s) {
    std::vector<PlanBuffer> b;
    for (int i = 0; i < 1500; ++i) {
      const int32_t first = rng.Range(0, 40);
      b.push_back(PlanBuffer{RandomSize(rng), first, first + rng.Range(20, 60)});
    }
    // No reference here (it is O(n^3) on dense sets); the fallback is held
    // to the table by DenseFallbackPlacesLikeTheTable.
    const double ratio = CheckSet(planner, b, rng, "dense set " + std::to_string(s), false);
    const Planned p = Plan(planner, b);
    arena_sum += static_cast<double>(p.result.arena_bytes);
    bound_sum += static_cast<double>(p.result.lower_bound_bytes);
    EXPECT_GE(ratio, 1.0);
    EXPECT_LT(planner.working_bytes(), 1500u * 1500u / 2);  // no pair table (about 4 MB)
  }
  std::printf("arena planner: dense sets sum(arena)/sum(lower bound) = %.4f\n", arena_sum / bound_sum);
}

// 20,000 buffers of a chain-like graph: correctness only (speed is measured
// by benchmarks). Checked step by step: the buffers live at each step, sorted
// by offset, must not overlap, and the largest per-step sum is the bound.
TEST(ArenaPlanner, LargeChain) {
  Rng rng(2026);
  const std::vector<PlanBuffer> b = RandomGraph(rng, 20000);
  ArenaPlanner planner;
  const Planned p = Plan(planner, b);
  ASSERT_EQ(p.status, TINYAI_OK) << tinyaiGetLastErrorMessage();
  int32_t steps = 0;
  for (const PlanBuffer& x : b) steps = std::max(steps, x.last + 1);
  std::vector<std::vector<size_t>> live(static_cast<size_t>(steps));
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i].size == 0) continue;
    for (int32_t s = b[i].first; s <= b[i].last; ++s) live[static_cast<size_t>(s)].push_back(i);
  }
  uint64_t bound = 0, top = 0;
  for (size_t i = 0; i < b.size(); ++i) top = std::max(top, p.offsets[i] + b[i].size);
  for (std::vector<size_t>& at : live) {
    uint64_t sum = 0;
    for (size_t i : at) sum += b[i].size;
    bound = std::max(bound, sum);
    std::sort(at.begin(), at.end(), [&](size_t x, size_t y) { return p.offsets[x] < p.offsets[y]; });
    for (size_t k = 1; k < at.size(); ++k) {
      ASSERT_LE(p.offsets[at[k - 1]] + b[at[k - 1]].size, p.offsets[at[k]])
          << "buffers " << at[k - 1] << " and " << at[k] << " overlap";
    }
  }
  EXPECT_EQ(p.result.lower_bound_bytes, bound);
  EXPECT_EQ(p.result.arena_bytes, top);
  EXPECT_GE(p.result.arena_bytes, bound);
  EXPECT_TRUE(CheckPlacement(SpanOf(b), p.offsets.data(), nullptr, nullptr));
  std::printf("arena planner: 20000 buffers, arena %llu, lower bound %llu (%.4f), naive %llu, order %s\n",
              static_cast<unsigned long long>(p.result.arena_bytes),
              static_cast<unsigned long long>(p.result.lower_bound_bytes),
              static_cast<double>(p.result.arena_bytes) / static_cast<double>(p.result.lower_bound_bytes),
              static_cast<unsigned long long>(p.result.naive_bytes), ArenaPlanner::OrderName(p.result.order));
}

}  // namespace
}  // namespace tinyai
