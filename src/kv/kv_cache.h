// The LLaMA KV cache, out of the model: the keys and values of every
// (layer, position) a model has evaluated, in a storage type and a
// position policy chosen when it is made, read and written by position.
//
// Storage: a persistent store (kv/store.h) of three entries, all fixed at
// their size when the cache is allocated (rows never move, and the store
// counts every byte against the budget):
//   K(l, h, s): u8[row_bytes] @table @fixed(l=layers, h=kv_heads, s=slots)
//   V(l, h, s): the same, for values
//   tokens(s): i32 @table @fixed(s=slots)   the token at each slot
// A session (model/session.h) saves the slots in use of each, and loads
// them back in place.
//
// Growable (fixed capacity only): the same three entries as tables of
// chunks of kKvChunk positions, taken from the store as positions reach
// them (Reserve, before a pass) and given back by Release:
//   K(c): u8[layers, kv_heads, kKvChunk, row_bytes] @table   (V the same)
//   tokens(c): i32[kKvChunk] @table
// A chunk holds every layer's and head's rows of its positions, a head's
// rows contiguous within it, so attention reads a span in runs of at most
// kKvChunk rows (Rows). bytes() is the most the cache can hold (what a
// memory limit reserves); held() what it holds now.
// A fixed table is one block [l][h][s][row]: a head's rows are contiguous,
// so attention streams them. A row is one head's head_size values at one
// slot:
//   TINYAI_KV_F32   head_size floats
//   TINYAI_KV_F16   head_size IEEE halves (rounded to nearest even)
//   TINYAI_KV_INT8  groups of 32 values (one group of head_size values when
//                   head_size is not a multiple of 32): an f16 scale d =
//                   max|x| / 127, then the int8 codes round(x / d). With
//                   head_size a multiple of 32 that is GGUF's Q8_0 block,
//                   TinyAI's q8_g32, and the q8_g32 kernels score it.
//                   Keys are stored rotated: a normalized Walsh-Hadamard
//                   transform H over each block of `hadamard` values (the
//                   largest power of two dividing head_size, up to 128)
//                   spreads a key's few outlier channels over the block
//                   before it is quantized, and scores take H q instead of q
//                   (H is orthogonal and symmetric, so (H q).(H k) = q.k).
//                   On stories260K, whose 8-value heads have outlier
//                   channels, that halves int8 KV's KL divergence from f32
//                   (0.0019 to 0.0009, docs/benchmarks.md); values are
//                   stored as they are (their error costs 100x less).
//
// Positions map to slots by the policy:
//   fixed capacity   position p in slot p, for p < capacity;
//   rolling window   `sinks` first positions in slots 0..sinks-1 for good,
//                    then a ring of window + pass_rows - 1 slots: position
//                    p >= sinks in slot sinks + (p - sinks) % ring. A query
//                    at position q attends to the sinks and to positions
//                    q - window + 1 .. q, so memory stays constant however
//                    long the text. The ring's pass_rows - 1 extra slots let
//                    a pass of up to pass_rows positions store all its keys
//                    before any of its queries reads: a key it stores
//                    replaces one at least `window` positions before the
//                    pass, which none of its queries (nor any later one)
//                    sees. So every query reads one layout whatever passes
//                    the positions came in (a prompt in one pass or token by
//                    token gives the same bits), and a pass that fails part
//                    way leaves nothing a later query needs overwritten.
//
// RoPE with a window (StreamingLLM's "positions within the cache"): keys
// are cached rotated once, at their own position, and never rotated again.
// Window keys are within `window` of the query, so their distances are the
// text's. Once the window has slid past the sinks, a sink would be far from
// the query; it is attended with a copy of the query rotated to the cache
// position sinks + window - 1 instead of its own, so that every distance is
// what it would be in a cache of sinks + window consecutive positions. (The
// other policy - keys cached unrotated and rotated by their slot at every
// step - costs a rotation of every cached key each token; this costs one of
// the query.)
#ifndef TINYAI_KV_KV_CACHE_H_
#define TINYAI_KV_KV_CACHE_H_

#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "kernels/kernels.h"
#include "kv/store.h"
#include "tinyai/llm.h"
#include "tinyai/status.h"

namespace tinyai {

struct KvShape {
  int32_t layers = 0;
  int32_t kv_heads = 0;
  int32_t head_size = 0;
  int32_t context = 0;    // positions a fixed cache holds
  int32_t window = 0;     // 0: fixed capacity; else the positions a query attends to after the sinks
  int32_t sinks = 0;      // with a window: the first positions kept for good
  int32_t pass_rows = 1;  // with a window: the most positions one pass stores
  int32_t type = TINYAI_KV_F32;  // a TinyAIKVType
  bool growable = false;  // without a window: memory taken a chunk of positions at a time
};

// A span of slots a query attends to, in position order.
struct KvSpan {
  int32_t slot = 0;
  int32_t count = 0;
  bool sink = false;  // attended with the query rotated to SinkQueryPosition()
};

// Positions a growable cache takes at a time.
constexpr int32_t kKvChunk = 64;

class KvCache {
 public:
  // Checks a shape and sizes the cache: TINYAI_ERR_INVALID_ARGUMENT naming
  // the field for a bad type, window or sink count; TINYAI_ERR_OVERFLOW
  // for a size past 64 bits or this target's address space.
  static TinyAIStatus Bytes(const KvShape& shape, uint64_t* bytes);

  // Sizes the cache (allocates nothing).
  TinyAIStatus Init(const KvShape& shape);
  // Allocates it (once; again after Init): declares the store's entries
  // (a growable cache's first chunk comes with its first Reserve).
  TinyAIStatus Allocate();
  bool allocated() const { return allocated_; }
  // Makes positions 0 .. end - 1 storable (a growable cache takes the
  // chunks it lacks; a failure names the position and the bytes, and what
  // was taken stays). Nothing to do for a fixed cache or a window.
  TinyAIStatus Reserve(int32_t end);
  // The most held() reaches while Reserve(end) runs (its directories'
  // old and new copies together): held() when nothing is to be taken.
  uint64_t HeldAfter(int32_t end) const;
  // A growable cache gives back every chunk (the cache is then empty).
  void Release();
  bool growable() const { return shape_.growable; }
  // The store the cache lives in.
  PersistentStore& store() { return store_; }
  const PersistentStore& store() const { return store_; }
  // The token at a position (recorded as a pass stores it), and back
  // (0 for a position the cache no longer holds).
  void SetToken(int32_t position, int32_t token);
  int32_t Token(int32_t position) const;

  const KvShape& shape() const { return shape_; }
  // What the cache holds: its store (rows, tokens, the store's records),
  // and for int8 the key being rotated: at most (growable: when every
  // position is reached) and now, and the most it has held.
  uint64_t bytes() const { return bytes_; }
  // (Growable: with the recording allocator's header before each chunk and
  // directory the store took, which its own count leaves out.)
  uint64_t held() const { return growable() ? store_.used() + extra_ + ChunkHeaders(reserved_) : bytes_; }
  uint64_t peak() const { return growable() ? peak_ : bytes_; }
  size_t row_bytes() const { return row_bytes_; }
  int32_t slots() const { return slots_; }
  bool windowed() const { return shape_.window > 0; }
  // The most positions a text may reach: the context for a fixed cache,
  // unbounded (INT32_MAX) with a window.
  int32_t max_positions() const { return windowed() ? INT32_MAX : shape_.context; }
  static const char* TypeName(int32_t type);  // "f32", "f16", "int8"; "?" otherwise

  int32_t Slot(int32_t position) const;

  // The positions a query at `position` attends to (all stored already),
  // as at most three spans of slots in position order: the sinks (marked
  // `sink` once the window has slid past them), then the window in one or
  // two pieces (the ring wraps). Without a window, or before it has slid,
  // one span: slots 0 .. position. Returns how many spans.
  int32_t Visible(int32_t position, KvSpan spans[3]) const;
  // The position the query takes for the sinks once the window has slid.
  int32_t SinkQueryPosition() const { return shape_.sinks + shape_.window - 1; }
  // Stores one position's keys and values (kv_dim floats each) for a layer.
  void Store(int32_t layer, int32_t position, const float* k, const float* v);

  // The first row (slot 0) of a head's keys or values in a layer, rows
  // following every row_bytes() (a fixed cache's, or a growable one's first
  // chunk's).
  const uint8_t* Keys(int32_t layer, int32_t head) const {
    int32_t run = 0;
    return Rows(false, layer, head, 0, &run);
  }
  const uint8_t* Values(int32_t layer, int32_t head) const {
    int32_t run = 0;
    return Rows(true, layer, head, 0, &run);
  }
  // The row of a head's keys (or values) in a layer at a slot, and in *run
  // how many rows follow it contiguously (every row_bytes()): to the last
  // slot, or a growable cache's chunk's end. nullptr for a slot not
  // reserved.
  const uint8_t* Rows(bool values, int32_t layer, int32_t head, int32_t slot, int32_t* run) const;
  uint8_t* MutableRows(bool values, int32_t layer, int32_t head, int32_t slot, int32_t* run) {
    return const_cast<uint8_t*>(static_cast<const KvCache*>(this)->Rows(values, layer, head, slot, run));
  }
  // The tokens at slots from `slot` on, likewise.
  const int32_t* Tokens(int32_t slot, int32_t* run) const;
  int32_t* MutableTokens(int32_t slot, int32_t* run) {
    return const_cast<int32_t*>(static_cast<const KvCache*>(this)->Tokens(slot, run));
  }
  // Slots written once `positions` positions have been evaluated: a
  // position's slot is never past its own number, so slots 0 .. that - 1.
  int32_t SlotsUsed(int64_t positions) const {
    return positions < slots_ ? static_cast<int32_t>(positions < 0 ? 0 : positions) : slots_;
  }

  // Scratch one attention thread needs besides its scores (bytes): the
  // quantized query and a block of dequantized values.
  size_t ScratchBytes() const;
  // att[j] = dot(q, the key row j of `rows`) for j < n.
  void Scores(const uint8_t* rows, int32_t n, const float* q, float* att, uint8_t* scratch) const;
  // out[c] = (first) or += (later spans) the sum over j < n of att[j] *
  // value row j of `rows`, c < head_size.
  void Accumulate(const uint8_t* rows, int32_t n, const float* att, float* out, bool first, uint8_t* scratch) const;

  // Values a row is dequantized to (tests, sessions): a key's in the
  // model's own basis (H undone) when `key`.
  void ReadRow(const uint8_t* row, float* out, bool key = false) const;
  // Values per Hadamard block (1: keys stored as they are).
  size_t hadamard() const { return hadamard_; }

 private:
  uint8_t* Row(bool values, int32_t layer, int32_t head, int32_t slot) {
    int32_t run = 0;
    return MutableRows(values, layer, head, slot, &run);
  }
  // A growable cache's most chunks.
  int32_t max_chunks() const { return (slots_ + kKvChunk - 1) / kKvChunk; }
  size_t RotatedQueryBytes() const;
  size_t QueryBytes() const;
  void EncodeRow(const float* x, uint8_t* out) const;
  void EncodeKey(const float* x, uint8_t* out);

  KvShape shape_;
  int32_t slots_ = 0;
  int32_t ring_ = 0;  // with a window: the ring's slots
  size_t row_bytes_ = 0;
  size_t group_ = 0;     // int8: values a scale covers
  size_t hadamard_ = 1;  // int8: values a key's Hadamard block covers (1: none)
  AlignedBuffer key_;    // a key being rotated (Store)
  uint64_t bytes_ = 0;
  const kernels::KernelTable* k_ = nullptr;
  const kernels::WeightKernels* wk_ = nullptr;  // f16, or q8_g32 when the int8 rows are its blocks
  PersistentStore store_;
  bool allocated_ = false;
  // Fixed: the K and V blocks and the tokens. Growable: each chunk's K, V
  // and tokens (3 per chunk, nullptr until reserved), and the extra bytes
  // besides the store (the key rotation).
  uint8_t* keys_ = nullptr;
  uint8_t* values_ = nullptr;
  int32_t* tokens_ = nullptr;
  // The headers of `chunks` chunks' allocations and their directories.
  static uint64_t ChunkHeaders(int32_t chunks);
  Array<uint8_t*> chunks_;
  int32_t reserved_ = 0;  // chunks reserved
  uint64_t extra_ = 0;
  uint64_t peak_ = 0;
};

}  // namespace tinyai

#endif  // TINYAI_KV_KV_CACHE_H_
