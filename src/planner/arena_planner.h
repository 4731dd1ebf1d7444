// Static arena offsets for buffers with known lifetimes (000_*.txt's
// "static compressed buffer", TFLite-Micro's GreedyMemoryPlanner).
//
// Input: buffers, each a size in bytes and a lifetime [first, last] of steps
// (inclusive). Two buffers conflict when their lifetimes share a step; the
// planner gives every buffer an offset so that no two conflicting buffers
// overlap in memory, and makes the arena (the end of the highest buffer) as
// small as it can.
//
// How: greedy placement, as in "Efficient Memory Management for Deep Neural
// Net Inference" (Pisarchyk and Lee, 2020) - buffers are taken in an order
// and each goes into the lowest gap (first fit) between the already placed
// buffers it conflicts with that holds it, or on top of them. Several orders
// are tried (largest first; longest-lived first; largest size x lifetime
// first) and the smallest arena wins. The conflicts of each buffer are found
// with a sweep over the steps (once, into a table; or, when thousands of
// buffers are live at once, by walking a segment tree per order), so
// planning costs about O(n log n + conflicts) per order rather than O(n^2).
//
// The lower bound is the largest sum of sizes of buffers live at one step:
// no placement can use less. The naive total is every buffer in its own
// place (the sum of all sizes).
//
//   ArenaPlanner planner;
//   Array<uint64_t> offsets;  // one per buffer
//   ArenaPlanResult r;
//   TINYAI_RETURN_IF_ERROR(offsets.Allocate(n, "offsets"));
//   TINYAI_RETURN_IF_ERROR(planner.Plan(buffers, offsets.data(), &r));
//   // r.arena_bytes >= r.lower_bound_bytes; buffer i lives at base + offsets[i]
//
// Sizes are used as given; callers round them to their alignment first
// (every offset is then a sum of sizes, so as aligned as the sizes are).
// A buffer of size 0 gets offset 0 and conflicts with nothing.
#ifndef TINYAI_PLANNER_ARENA_PLANNER_H_
#define TINYAI_PLANNER_ARENA_PLANNER_H_

#include <cstddef>
#include <cstdint>
#include <utility>

#include "common/array.h"
#include "common/span.h"
#include "tinyai/status.h"

namespace tinyai {

struct PlanBuffer {
  uint64_t size = 0;
  int32_t first = 0;  // first step the buffer is live
  int32_t last = 0;   // last step it is live (>= first)
};

struct ArenaPlanResult {
  uint64_t arena_bytes = 0;        // max over buffers of offset + size
  uint64_t lower_bound_bytes = 0;  // max over steps of the live bytes
  uint64_t naive_bytes = 0;        // sum of all sizes
  int32_t peak_step = -1;          // a step where the lower bound is reached (-1 with no buffers; the
                                   // earliest first step when every size is 0)
  int32_t order = -1;              // which order won (an index into OrderName()); -1 when no buffer
                                   // has a size
  // When arena_bytes > lower_bound_bytes: the first buffer the winning order
  // placed above the lower bound (its end is past it), else -1.
  int32_t first_above_bound = -1;
};

class ArenaPlanner {
 public:
  ArenaPlanner() = default;
  ArenaPlanner(const ArenaPlanner&) = delete;
  ArenaPlanner& operator=(const ArenaPlanner&) = delete;

  // Plans buffers; offsets has room for buffers.size() entries.
  // TINYAI_ERR_INVALID_ARGUMENT for a buffer with last < first or a negative
  // step (naming its index), TINYAI_ERR_OVERFLOW when sizes overflow 64 bits,
  // TINYAI_ERR_OUT_OF_MEMORY when the planner's own tables cannot be
  // allocated. The planner's working memory is kept between calls and grows
  // as needed.
  TinyAIStatus Plan(Span<const PlanBuffer> buffers, uint64_t* offsets, ArenaPlanResult* out);

  // Number of orders Plan() tries, and a name for each ("size", "lifetime",
  // "area"; "unknown" out of range, never NULL).
  static int OrderCount();
  static const char* OrderName(int order);

  // Bytes of working memory the planner holds now.
  uint64_t working_bytes() const;

 private:
  // implementation-defined working arrays (Array<...>), reused between calls.
  // m = the buffers of nonzero size; a "position" is a rank among them sorted
  // by first step (then index). arena_planner.cc describes their use.
  Array<uint64_t> keys_;       // m: sort keys (step << 32 | id)
  Array<int32_t> index_;       // m: position -> buffer index
  Array<uint64_t> size_;       // m: per position
  Array<int32_t> first_;       // m
  Array<int32_t> last_;        // m
  Array<int32_t> fwd_end_;     // m: end of the positions whose first step lies in the lifetime
  Array<int32_t> order_;       // m: positions in placement order
  Array<int32_t> rank_;        // m: position -> placement rank
  Array<uint64_t> trial_;      // m: offsets of the order being tried
  Array<uint64_t> best_;       // m: offsets of the best order so far
  Array<std::pair<uint64_t, uint64_t>> gaps_;  // m: order sort keys, then (offset, end) of conflicts
  Array<size_t> back_begin_;   // m+1: earlier conflicting positions (CSR), or empty
  Array<int32_t> back_;        //   one entry per conflicting pair
  Array<int32_t> tree_;        // 2 * pow2(m): max last step per range (fallback), or empty
};

// The lower bound alone: max over steps of the sum of sizes of the buffers
// live at that step; *peak_step (may be null) gets a step where it is reached.
// Returns 0 for no buffers. Buffers must be valid (first <= last, first >= 0).
uint64_t ArenaLowerBound(Span<const PlanBuffer> buffers, int32_t* peak_step);

// Checks a placement: true when no two buffers whose lifetimes share a step
// overlap in memory. On false, *a and *b (may be null) name one such pair.
// O(n log n + conflicts); used by tests and by debug builds after planning.
bool CheckPlacement(Span<const PlanBuffer> buffers, const uint64_t* offsets, int32_t* a, int32_t* b);

}  // namespace tinyai

#endif  // TINYAI_PLANNER_ARENA_PLANNER_H_
