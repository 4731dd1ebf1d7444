// Static arena planner (see arena_planner.h for the contract).
//
// Working layout. Buffers of size 0 get offset 0 and take no further part.
// The m others are sorted by (first step, index); a buffer's rank in that
// order is its "position", and every table below is indexed by position.
//
// The sweep. With positions sorted by first step, the buffers whose first
// step lies inside p's lifetime [first[p], last[p]] are the contiguous run of
// positions p+1 .. fwd_end[p]-1 (one binary search). Two buffers conflict
// (share a step) exactly when the later-starting one starts inside the
// earlier one's lifetime, so every conflicting pair appears once, in the run
// of its earlier position: the run is p's "forward" conflicts, and p is a
// "backward" conflict of every position in its run. Forward conflicts need no
// memory. Backward conflicts are stored once per pair in a CSR table
// (back_begin_/back_), filled from the runs; their per-position counts come
// from a difference array, so building costs O(m + pairs).
//
// The fallback. When the pairs would need more than about kMaxBackPerBuffer
// entries per buffer (thousands of buffers live at once), no pair table is
// built. Instead a segment tree over positions holds the last step of every
// buffer placed so far (-1 for the others) and, per range, the maximum. The
// placed buffers conflicting with p are the positions q < fwd_end[p] with
// last[q] >= first[p]: a depth-first walk that skips every range starting at
// or past fwd_end[p] or whose maximum ends before first[p] finds them in
// O((k + 1) log m) for k of them (runs of kLeafRun leaves are scanned
// directly), with O(m) memory. It is the same set of conflicts, hence the
// same placement.
//
// The gap search. For one order, each buffer gathers the (offset, end) of the
// conflicting buffers placed before it, sorts them by offset and walks them
// with `at`, the lowest byte not yet known to be covered: the first interval
// starting at or past at + size leaves the gap [at, start) that holds the
// buffer (first fit, the lowest offset); otherwise at moves past each
// interval's end, and the buffer goes on top of them all. A shortcut skips
// the sort where many buffers are live at once: when the gathered buffers'
// lifetimes share a step (max first <= min last: intervals that pairwise
// intersect share a point, and conversely), they conflict with each other,
// so they are disjoint in memory and leave exactly top - sum(sizes) bytes
// free below their top; if that cannot hold the buffer, it goes on top.
//
// Orders. Each order is a sort of the positions; the smallest arena wins and
// ties keep the earlier order. An order stops as soon as its arena reaches
// the best one found so far (it cannot win), and no further order is tried
// once one reaches the lower bound (none can beat it).
#include "planner/arena_planner.h"

#include <algorithm>
#include <memory>
#include <new>
#include <type_traits>

#include "common/checked_math.h"
#include "common/ledger.h"
#include "common/status.h"

namespace tinyai {
namespace {

enum Order { kOrderSize = 0, kOrderLifetime = 1, kOrderArea = 2, kOrderCountValue = 3 };

// Above this many stored pairs per buffer (plus a fixed allowance) the planner
// uses the segment-tree fallback instead of a pair table.
constexpr uint64_t kMaxBackPerBuffer = 32;
constexpr uint64_t kBackAllowance = 1u << 16;

// The fallback's tree walk scans runs of this many leaves instead of
// descending to each.
constexpr size_t kLeafRun = 32;

constexpr uint64_t kLow32 = 0xffffffffu;

uint64_t StepKey(int32_t step, size_t id) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(step)) << 32) | static_cast<uint64_t>(id);
}

// Steps in the lifetime, 1 .. 2^31.
uint64_t Length(int32_t first, int32_t last) { return static_cast<uint64_t>(static_cast<int64_t>(last) - first) + 1; }

// The 128-bit product a * b as (hi, lo), without compiler extensions.
void Mul128(uint64_t a, uint64_t b, uint64_t* hi, uint64_t* lo) {
  const uint64_t a0 = a & kLow32, a1 = a >> 32, b0 = b & kLow32, b1 = b >> 32;
  const uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  const uint64_t mid = (p00 >> 32) + (p01 & kLow32) + (p10 & kLow32);
  *lo = (mid << 32) | (p00 & kLow32);
  *hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

// Does [oa, oa + sa) intersect [ob, ob + sb)? Without computing the ends, so
// arbitrary (broken) offsets cannot overflow.
bool MemoryOverlaps(uint64_t oa, uint64_t sa, uint64_t ob, uint64_t sb) {
  return oa <= ob ? ob - oa < sa : oa - ob < sb;
}

bool LifetimesShare(const PlanBuffer& a, const PlanBuffer& b) { return a.first <= b.last && b.first <= a.last; }

// An uninitialised scratch array that fails quietly (no SetError): the free
// functions below have no status channel and fall back to slower code.
struct PortFree {
  void operator()(void* p) const { LedgerFree(p); }
};
template <class T>
using Scratch = std::unique_ptr<T[], PortFree>;

template <class T>
Scratch<T> QuietAlloc(size_t n) {
  static_assert(std::is_trivial<T>::value, "uninitialised scratch of trivial types");
  if (n == 0 || n > SIZE_MAX / sizeof(T)) return nullptr;
  MemScope scope(kMemScratch);  // the planner's temporaries
  return Scratch<T>(static_cast<T*>(LedgerAlloc(kMinAlignment, n * sizeof(T))));
}

// Sorts the buffers of nonzero size by (first or last step, index) into ids;
// returns how many there are.
size_t SortedByStep(Span<const PlanBuffer> buffers, bool by_last, uint64_t* keys, int32_t* ids) {
  size_t m = 0;
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].size == 0) continue;
    keys[m++] = StepKey(by_last ? buffers[i].last : buffers[i].first, i);
  }
  std::sort(keys, keys + m);
  for (size_t k = 0; k < m; ++k) ids[k] = static_cast<int32_t>(keys[k] & kLow32);
  return m;
}

// The live bytes only grow at first steps, so the maximum is reached at one.
// by_first / by_last list the same m buffer ids sorted by first / last step;
// buffers are added as their first step comes and removed once their last
// step is behind. Returns the maximum, *peak the earliest step reaching it.
uint64_t SweepLowerBound(const PlanBuffer* b, const int32_t* by_first, const int32_t* by_last, size_t m,
                         int32_t* peak) {
  uint64_t live = 0, best = 0;
  int32_t best_step = m ? b[by_first[0]].first : -1;
  size_t r = 0;
  for (size_t p = 0; p < m;) {
    const int32_t s = b[by_first[p]].first;
    while (r < m && b[by_last[r]].last < s) live -= b[by_last[r++]].size;
    while (p < m && b[by_first[p]].first == s) live += b[by_first[p++]].size;
    if (live > best) {
      best = live;
      best_step = s;
    }
  }
  *peak = best_step;
  return best;
}

// The earliest first step of all buffers (the peak when every size is 0).
int32_t EarliestStep(Span<const PlanBuffer> buffers) {
  int32_t s = buffers.empty() ? -1 : buffers[0].first;
  for (const PlanBuffer& b : buffers) s = b.first < s ? b.first : s;
  return s;
}

// Sorts the positions into placement order, through 128-bit keys (high,
// low) that pack each order's criteria so that one plain comparison decides:
//   size:     size desc, lifetime desc, position asc
//   lifetime: lifetime desc, size desc, position asc
//   area:     size x lifetime desc (< 2^95), position asc
// Positions are in (first step, index) order, so the position tie-break is
// "earlier first step, then lower index". Descending fields are stored
// complemented. keys has room for m pairs.
void SortOrder(int order, int32_t* positions, size_t m, const uint64_t* size, const int32_t* first, const int32_t* last,
               std::pair<uint64_t, uint64_t>* keys) {
  for (size_t p = 0; p < m; ++p) {
    const uint64_t len = Length(first[p], last[p]);  // 1 .. 2^31
    const uint64_t not_len = kLow32 - len, not_size = ~size[p];
    switch (order) {
      case kOrderSize:
        keys[p] = {not_size, (not_len << 32) | p};
        break;
      case kOrderLifetime:
        keys[p] = {(not_len << 32) | (not_size >> 32), (not_size << 32) | p};
        break;
      default: {
        uint64_t hi, lo;
        Mul128(size[p], len, &hi, &lo);  // hi < 2^31
        const uint64_t not_hi = ~hi & 0x7fffffffu, not_lo = ~lo;
        keys[p] = {(not_hi << 31) | (not_lo >> 33), (not_lo << 31) | p};
        break;
      }
    }
  }
  std::sort(keys, keys + m);
  for (size_t k = 0; k < m; ++k) positions[k] = static_cast<int32_t>(keys[k].second & 0x7fffffffu);
}

// The placed buffers conflicting with the one being placed, as (offset, end)
// intervals, and what the shortcut of the file comment needs.
struct Gathered {
  std::pair<uint64_t, uint64_t>* gaps;
  size_t count;
  int32_t max_first, min_last;  // of the gathered lifetimes
  uint64_t sum, top;            // of their sizes, their highest end

  explicit Gathered(std::pair<uint64_t, uint64_t>* g)
      : gaps(g), count(0), max_first(-1), min_last(INT32_MAX), sum(0), top(0) {}
  void Add(uint64_t offset, uint64_t size, int32_t first, int32_t last) {
    gaps[count++] = {offset, offset + size};
    max_first = first > max_first ? first : max_first;
    min_last = last < min_last ? last : min_last;
    sum += size;
    top = offset + size > top ? offset + size : top;
  }

  // The lowest offset at which size bytes fit (first fit).
  uint64_t FirstFit(uint64_t size) {
    if (count == 0) return 0;
    if (max_first <= min_last && top - sum < size) return top;  // no gap can hold it
    std::sort(gaps, gaps + count);
    uint64_t at = 0;
    for (size_t i = 0; i < count; ++i) {
      if (gaps[i].first >= at + size) break;  // [at, start) holds the buffer
      if (gaps[i].second > at) at = gaps[i].second;
    }
    return at;
  }
};

template <class T>
TinyAIStatus Reserve(Array<T>* a, size_t n, const char* what) {
  if (a->size() >= n) return TINYAI_OK;
  MemScope scope(kMemScratch);  // the planner's working tables
  return a->Allocate(n, what);
}

}  // namespace

int ArenaPlanner::OrderCount() { return kOrderCountValue; }

const char* ArenaPlanner::OrderName(int order) {
  switch (order) {
    case kOrderSize:
      return "size";
    case kOrderLifetime:
      return "lifetime";
    case kOrderArea:
      return "area";
    default:
      return "unknown";
  }
}

uint64_t ArenaPlanner::working_bytes() const {
  return keys_.size() * sizeof(uint64_t) + index_.size() * sizeof(int32_t) + size_.size() * sizeof(uint64_t) +
         first_.size() * sizeof(int32_t) + last_.size() * sizeof(int32_t) + fwd_end_.size() * sizeof(int32_t) +
         order_.size() * sizeof(int32_t) + rank_.size() * sizeof(int32_t) + trial_.size() * sizeof(uint64_t) +
         best_.size() * sizeof(uint64_t) + gaps_.size() * sizeof(gaps_[0]) + back_begin_.size() * sizeof(size_t) +
         back_.size() * sizeof(int32_t) + tree_.size() * sizeof(int32_t);
}

TinyAIStatus ArenaPlanner::Plan(Span<const PlanBuffer> buffers, uint64_t* offsets, ArenaPlanResult* out) {
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "arena planner: no result to fill");
  *out = ArenaPlanResult();
  const size_t n = buffers.size();
  if (n > static_cast<size_t>(INT32_MAX)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "arena planner: %zu buffers (at most %d)", n, INT32_MAX);
  }
  if (n > 0 && (!offsets || !buffers.data())) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "arena planner: %zu buffers but no %s", n,
                    offsets ? "buffer array" : "offset array");
  }

  // Validate, total the sizes, count the buffers that take memory.
  uint64_t total = 0;
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    const PlanBuffer& b = buffers[i];
    if (b.first < 0 || b.last < 0) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "arena planner: buffer %zu has a negative step (first %d, last %d)",
                      i, b.first, b.last);
    }
    if (b.last < b.first) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                      "arena planner: buffer %zu ends before it starts (first %d, last %d)", i, b.first, b.last);
    }
    if (!CheckedAdd(total, b.size, &total)) {
      return SetError(TINYAI_ERR_OVERFLOW,
                      "arena planner: the sizes of buffers 0..%zu overflow 64 bits (buffer %zu: %llu bytes)", i, i,
                      static_cast<unsigned long long>(b.size));
    }
    if (b.size) ++m;
  }
  // Every offset is at most the sum of the other sizes, so nothing below can
  // overflow once the total fits.
  for (size_t i = 0; i < n; ++i) offsets[i] = 0;
  out->naive_bytes = total;
  if (m == 0) {
    out->peak_step = EarliestStep(buffers);
    return TINYAI_OK;
  }

  TINYAI_RETURN_IF_ERROR(Reserve(&keys_, m, "arena planner sort keys"));
  TINYAI_RETURN_IF_ERROR(Reserve(&index_, m, "arena planner positions"));
  TINYAI_RETURN_IF_ERROR(Reserve(&size_, m, "arena planner sizes"));
  TINYAI_RETURN_IF_ERROR(Reserve(&first_, m, "arena planner first steps"));
  TINYAI_RETURN_IF_ERROR(Reserve(&last_, m, "arena planner last steps"));
  TINYAI_RETURN_IF_ERROR(Reserve(&fwd_end_, m, "arena planner sweep"));
  TINYAI_RETURN_IF_ERROR(Reserve(&order_, m, "arena planner order"));
  TINYAI_RETURN_IF_ERROR(Reserve(&rank_, m, "arena planner ranks"));
  TINYAI_RETURN_IF_ERROR(Reserve(&trial_, m, "arena planner offsets"));
  TINYAI_RETURN_IF_ERROR(Reserve(&best_, m, "arena planner offsets"));
  TINYAI_RETURN_IF_ERROR(Reserve(&gaps_, m, "arena planner gaps"));

  // Positions: sorted by (first step, index).
  uint64_t* keys = keys_.data();
  int32_t* index = index_.data();
  SortedByStep(buffers, false, keys, index);
  uint64_t* size = size_.data();
  int32_t* first = first_.data();
  int32_t* last = last_.data();
  for (size_t p = 0; p < m; ++p) {
    const PlanBuffer& b = buffers[static_cast<size_t>(index[p])];
    size[p] = b.size;
    first[p] = b.first;
    last[p] = b.last;
  }

  // The lower bound (order_ holds buffer ids sorted by last step for now).
  int32_t* by_last = order_.data();
  SortedByStep(buffers, true, keys, by_last);
  const uint64_t bound = SweepLowerBound(buffers.data(), index, by_last, m, &out->peak_step);
  out->lower_bound_bytes = bound;

  // The sweep: fwd_end[p] ends the run of positions starting inside p's
  // lifetime; the pairs are the sum of the run lengths.
  int32_t* fwd_end = fwd_end_.data();
  uint64_t pairs = 0;
  for (size_t p = 0; p < m; ++p) {
    fwd_end[p] = static_cast<int32_t>(std::upper_bound(first + p + 1, first + m, last[p]) - first);
    pairs += static_cast<uint64_t>(fwd_end[p]) - p - 1;
  }

  const bool table = pairs <= kMaxBackPerBuffer * m + kBackAllowance;
  const size_t* back_begin = nullptr;
  const int32_t* back = nullptr;
  int32_t* tree = nullptr;
  size_t leaves = 1;
  if (table) {
    // Backward conflicts in CSR. count[p] = the runs covering p, from a
    // difference array (+1 at q+1, -1 at fwd_end[q]; unsigned wrap-around
    // cancels out in the prefix sums), kept in trial_.
    TINYAI_RETURN_IF_ERROR(Reserve(&back_begin_, m + 1, "arena planner conflict table"));
    TINYAI_RETURN_IF_ERROR(Reserve(&back_, static_cast<size_t>(pairs), "arena planner conflict table"));
    uint64_t* cursor = trial_.data();
    for (size_t p = 0; p < m; ++p) cursor[p] = 0;
    for (size_t q = 0; q < m; ++q) {
      const size_t end = static_cast<size_t>(fwd_end[q]);
      if (end > q + 1) {
        cursor[q + 1] += 1;
        if (end < m) cursor[end] -= 1;
      }
    }
    size_t* begin = back_begin_.data();
    uint64_t running = 0;
    size_t at = 0;
    for (size_t p = 0; p < m; ++p) {
      running += cursor[p];
      begin[p] = at;
      cursor[p] = at;
      at += static_cast<size_t>(running);
    }
    begin[m] = at;
    int32_t* entries = back_.data();
    for (size_t q = 0; q < m; ++q) {
      for (size_t p = q + 1; p < static_cast<size_t>(fwd_end[q]); ++p) entries[cursor[p]++] = static_cast<int32_t>(q);
    }
    back_begin = begin;
    back = entries;
  } else {
    // Fallback: tree[leaves + q] = last[q] once q is placed, else -1; inner
    // nodes hold the maximum of their children (reset for every order).
    while (leaves < m) leaves *= 2;
    TINYAI_RETURN_IF_ERROR(Reserve(&tree_, 2 * leaves, "arena planner interval tree"));
    tree = tree_.data();
  }

  // Try each order.
  int32_t* order = order_.data();
  int32_t* rank = rank_.data();
  std::pair<uint64_t, uint64_t>* gaps = gaps_.data();
  uint64_t best_arena = UINT64_MAX;
  int32_t best_above = -1;
  for (int o = 0; o < kOrderCountValue; ++o) {
    if (out->order >= 0 && best_arena == bound) break;  // cannot be beaten
    SortOrder(o, order, m, size, first, last, gaps_.data());
    for (size_t k = 0; k < m; ++k) rank[order[k]] = static_cast<int32_t>(k);
    if (tree) std::fill(tree, tree + 2 * leaves, -1);

    uint64_t* off = out->order >= 0 ? trial_.data() : best_.data();
    uint64_t arena = 0;
    int32_t above = -1;
    bool lost = false;
    for (size_t k = 0; k < m && !lost; ++k) {
      const size_t p = static_cast<size_t>(order[k]);
      const int32_t placed = static_cast<int32_t>(k);
      Gathered g(gaps);
      if (table) {
        // Forward conflicts: the run after p; backward: the table.
        for (size_t q = p + 1; q < static_cast<size_t>(fwd_end[p]); ++q) {
          if (rank[q] < placed) g.Add(off[q], size[q], first[q], last[q]);
        }
        for (size_t e = back_begin[p]; e < back_begin[p + 1]; ++e) {
          const size_t q = static_cast<size_t>(back[e]);
          if (rank[q] < placed) g.Add(off[q], size[q], first[q], last[q]);
        }
      } else {
        // Depth-first over the tree: node v covers positions [lo, lo + width).
        const size_t run_end = static_cast<size_t>(fwd_end[p]);
        struct Node {
          size_t v, lo, width;
        } stack[2 * 64];
        int depth = 0;
        stack[depth++] = {1, 0, leaves};
        while (depth > 0) {
          const Node nd = stack[--depth];
          if (nd.lo >= run_end || tree[nd.v] < first[p]) continue;
          if (nd.width <= kLeafRun) {  // a short run of leaves: scan it
            const size_t stop = std::min(nd.lo + nd.width, run_end);
            for (size_t q = nd.lo; q < stop; ++q) {
              if (tree[leaves + q] >= first[p]) g.Add(off[q], size[q], first[q], last[q]);
            }
            continue;
          }
          const size_t half = nd.width / 2;
          stack[depth++] = {2 * nd.v + 1, nd.lo + half, half};
          stack[depth++] = {2 * nd.v, nd.lo, half};
        }
      }
      off[p] = g.FirstFit(size[p]);
      if (tree) {
        size_t v = leaves + p;
        tree[v] = last[p];
        for (v /= 2; v >= 1 && tree[v] < last[p]; v /= 2) tree[v] = last[p];
      }
      const uint64_t end = off[p] + size[p];
      if (end > arena) arena = end;
      if (end > bound && above < 0) above = static_cast<int32_t>(p);
      if (out->order >= 0 && arena >= best_arena) lost = true;  // ties keep the earlier order
    }
    if (lost) continue;
    if (out->order >= 0) std::copy(off, off + m, best_.data());
    best_arena = arena;
    best_above = above;
    out->order = o;
  }

  out->arena_bytes = best_arena;
  out->first_above_bound = best_above >= 0 ? index[best_above] : -1;
  const uint64_t* best = best_.data();
  for (size_t p = 0; p < m; ++p) offsets[index[p]] = best[p];

#ifndef NDEBUG
  int32_t a = -1, b = -1;
  if (!CheckPlacement(buffers, offsets, &a, &b)) {
    return SetError(TINYAI_ERR_INTERNAL, "arena planner: buffers %d and %d overlap (order %s)", a, b,
                    OrderName(out->order));
  }
#endif
  return TINYAI_OK;
}

uint64_t ArenaLowerBound(Span<const PlanBuffer> buffers, int32_t* peak_step) {
  int32_t peak = EarliestStep(buffers);
  uint64_t bound = 0;
  const size_t n = buffers.size();
  Scratch<uint64_t> keys = QuietAlloc<uint64_t>(n);
  Scratch<int32_t> ids = QuietAlloc<int32_t>(2 * n);
  if (n > 0 && keys && ids) {
    const size_t m = SortedByStep(buffers, false, keys.get(), ids.get());
    SortedByStep(buffers, true, keys.get(), ids.get() + n);
    if (m > 0) bound = SweepLowerBound(buffers.data(), ids.get(), ids.get() + n, m, &peak);
  } else {
    // No memory for the sweep: the same maximum over first steps, O(n^2).
    bool any = false;
    for (const PlanBuffer& b : buffers) {
      if (b.size == 0) continue;
      uint64_t live = 0;
      for (const PlanBuffer& c : buffers) {
        if (c.first <= b.first && b.first <= c.last) live += c.size;
      }
      if (!any || live > bound || (live == bound && b.first < peak)) {
        bound = live;
        peak = b.first;
        any = true;
      }
    }
  }
  if (peak_step) *peak_step = peak;
  return bound;
}

bool CheckPlacement(Span<const PlanBuffer> buffers, const uint64_t* offsets, int32_t* a, int32_t* b) {
  const size_t n = buffers.size();
  auto report = [&](size_t i, size_t j) {
    if (a) *a = static_cast<int32_t>(std::min(i, j));
    if (b) *b = static_cast<int32_t>(std::max(i, j));
    return false;
  };
  auto clash = [&](size_t i, size_t j) {
    const PlanBuffer &x = buffers[i], &y = buffers[j];
    return x.size && y.size && LifetimesShare(x, y) && MemoryOverlaps(offsets[i], x.size, offsets[j], y.size);
  };
  Scratch<uint64_t> keys = QuietAlloc<uint64_t>(n);
  Scratch<int32_t> ids = QuietAlloc<int32_t>(n);
  if (n > 0 && keys && ids) {
    // The sweep of the file comment: each conflicting pair once, from the
    // earlier-starting buffer's run.
    const size_t m = SortedByStep(buffers, false, keys.get(), ids.get());
    for (size_t p = 0; p < m; ++p) {
      const size_t i = static_cast<size_t>(ids[p]);
      for (size_t q = p + 1; q < m; ++q) {
        const size_t j = static_cast<size_t>(ids[q]);
        if (buffers[j].first > buffers[i].last) break;
        if (clash(i, j)) return report(i, j);
      }
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = i + 1; j < n; ++j) {
        if (clash(i, j)) return report(i, j);
      }
    }
  }
  if (a) *a = -1;
  if (b) *b = -1;
  return true;
}

}  // namespace tinyai
