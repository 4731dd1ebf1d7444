// The recording allocator: every byte the core takes from the port passes
// through here under a category, so TinyAI's account of its memory is what
// it allocated, not a formula beside the allocations.
//
//   {
//     MemScope scope(kMemKv);                // allocations on this thread
//     void* p = LedgerAlloc(64, bytes);      // counted under kMemKv
//     ...
//     LedgerFree(p);                         // counted off kMemKv
//   }
//
// Each allocation carries a header of max(alignment, 16) bytes before it
// (its size and category); the header is counted too, so the account is
// what the port handed out. Pages of the weight cache come from
// port::PageAlloc, which their owner reports with LedgerPages.
//
// The ledger is process-wide (the port's heap is): counts are atomic where
// the port has threads. Stages mark points of a run (open, plan, first
// token, ...) and call the observer the C API installs
// (tinyaiSetMemoryObserver) with a snapshot.
#ifndef TINYAI_COMMON_LEDGER_H_
#define TINYAI_COMMON_LEDGER_H_

#include <cstddef>
#include <cstdint>

#include "tinyai/memory.h"

namespace tinyai {

enum MemCategory : uint8_t {
  kMemRuntime = TINYAI_MEMORY_RUNTIME,        // handles, scheduler tables, anything not below
  kMemModel = TINYAI_MEMORY_MODEL,            // the model's index, metadata and slice tables
  kMemWeights = TINYAI_MEMORY_WEIGHTS,        // the weight cache's slots and decoded weights
  kMemKv = TINYAI_MEMORY_KV,                  // KV cache and persistent stores
  kMemActivations = TINYAI_MEMORY_ACTIVATIONS,  // the activation arena
  kMemScratch = TINYAI_MEMORY_SCRATCH,        // per-thread and per-call scratch
  kMemText = TINYAI_MEMORY_TEXT,              // tokenizer, sampler and prompt tokens
  kMemCategories = TINYAI_MEMORY_CATEGORY_COUNT
};

// Allocations of this thread go under a category while the scope lives
// (scopes nest; the default is kMemRuntime).
class MemScope {
 public:
  explicit MemScope(MemCategory category);
  ~MemScope();
  MemScope(const MemScope&) = delete;
  MemScope& operator=(const MemScope&) = delete;

 private:
  MemCategory previous_;
};

MemCategory CurrentMemCategory();

// What this thread has taken through LedgerAlloc less what it gave back, in
// all categories: the difference of two readings is what a piece of work
// done on this thread holds (creating a model or an LLM, which the planner
// then compares with its plan).
int64_t LedgerThreadBytes();

// port::AlignedAlloc with the header and the count; NULL on failure.
void* LedgerAlloc(size_t alignment, size_t size);
void LedgerFree(void* p);  // NULL ok
// Memory taken (add) or given back outside LedgerAlloc (port::PageAlloc).
void LedgerPages(MemCategory category, uint64_t bytes, bool add);
// KV bytes written at least once (the rest of a reserved cache may be pages
// the OS has not yet given): the model adds and takes back.
void LedgerKvTouched(int64_t delta);

struct LedgerCounts {
  uint64_t bytes[kMemCategories];
  uint64_t peak[kMemCategories];  // each category's most since the last ResetLedgerPeaks
  uint64_t total;
  uint64_t peak_total;
  uint64_t stage_peak;            // the most since the last stage mark
  uint64_t header_bytes;          // of total, the allocations' headers
  uint64_t allocations;           // live
  uint64_t kv_touched;
};
void ReadLedger(LedgerCounts* out);
void ResetLedgerPeaks();

// A point of a run: the observer (if any) gets a snapshot. tokens: the
// positions the LLM has evaluated (-1: not an LLM's event).
void LedgerMark(TinyAIMemoryStage stage, int64_t tokens);
// After a pass that ended at position `position`: kTokens every N positions
// (the observer's everyTokens), kFirstToken for the first sampled token.
void LedgerTokens(int64_t previous, int64_t position);

void SetLedgerObserver(TinyAIMemoryObserver observer, void* user, int32_t every_tokens);
void FillMemorySnapshot(TinyAIMemoryStage stage, int64_t tokens, TinyAIMemorySnapshot* out);

}  // namespace tinyai

#endif  // TINYAI_COMMON_LEDGER_H_
