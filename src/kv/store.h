// The persistent store behind <tinyai/persistent.h>: entries that keep
// their values across inference steps (scalars, tensors, tables indexed by
// one or more indices, auto-dim matrices), their storage, the memory they
// hold against a limit, references with the document's slice forms, and
// saving / loading. Core code: no exceptions, every allocation a status.
//
// Storage:
//   scalar, tensor   one element's bytes.
//   table            rows of one element each. The indices but the last
//                    are the row's "prefix", laid out densely over their
//                    capacities; the last index is cut into chunks of
//                    chunk_rows rows, each allocated when first written.
//                    A directory (prefix x chunk -> chunk memory) grows by
//                    doubling when an index grows past it, copying only its
//                    pointers: stored rows never move. A table whose every
//                    index is fixed is one block [prefix][last][row], laid
//                    out at declaration (the KV cache's layout: a head's
//                    rows contiguous).
//   auto-dim         per table row, a matrix of the element's shape that
//                    gains rows and columns: blocks of kAutoBlock x
//                    kAutoBlock elements allocated as the matrix grows into
//                    them, under a grid directory that doubles likewise.
//   names            entries and named dimensions are found through a hash
//                    table of their positions (PNameIndex): declaring or
//                    setting n names takes time linear in n. Each name is
//                    charged a fixed share that bounds its place in the
//                    store's lists and table (kEntryListBytes, kDimBytes).
//
// Numbers: every index, extent, size and offset is checked against the
// bounds below before it is used (src/common/checked_math.h where a
// product or a sum could pass 64 bits); a scalar's arithmetic is exact in
// its own type (PersistentStore::Add).
#ifndef TINYAI_KV_STORE_H_
#define TINYAI_KV_STORE_H_

#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/vector.h"
#include "port/port.h"
#include "tinyai/persistent.h"
#include "tinyai/status.h"

namespace tinyai {

constexpr int kMaxPRank = TINYAI_PERSISTENT_MAX_RANK;
constexpr int kMaxPIndices = TINYAI_PERSISTENT_MAX_INDICES;
constexpr size_t kMaxPName = TINYAI_PERSISTENT_MAX_NAME;
constexpr int64_t kAutoBlock = 16;
// An index (of a table, or of an auto-dim matrix's rows or columns) is
// below kMaxPIndex; a declared dimension, named dimension and @fixed
// extent is at most kMaxPIndex. Everything the store computes from them
// then fits 64 bits, and a reference to a larger index is
// TINYAI_ERR_OUT_OF_BOUNDS, whatever number it gives. An auto-dim
// matrix's rows and columns are indices too: it holds at most kMaxPIndex
// of each (PersistentStore::AutoMax), whether declared, grown or loaded.
constexpr int64_t kMaxPIndex = int64_t{1} << 40;
// A growable table's chunk: 1..kMaxPChunkRows rows (TinyAIPersistentConfig.chunkRows).
constexpr int32_t kMaxPChunkRows = 65536;

// Up to 64 bytes of a text (a name, a reference) for a message, with
// "..." when it is longer, so that a long text leaves room for the cause.
struct PExcerpt {
  char text[72];
};
PExcerpt Excerpt(const char* s, size_t n = static_cast<size_t>(-1));
// What is wrong with a name ("is longer than 63 bytes (...)", ...), or
// nullptr for a valid one: letters, digits and '_', not a digit first, 1
// to kMaxPName bytes. Names compare whole: one longer than kMaxPName is
// refused by name, never cut to its first kMaxPName bytes.
const char* PNameProblem(const char* s);

// Bytes of one value of a type (0 for an unknown type).
size_t PTypeBytes(int32_t type);
const char* PTypeName(int32_t type);  // "f32" .. "bool", "?"
bool PTypeIsFloat(int32_t type);
bool PTypeIsUnsigned(int32_t type);  // u8..u64 and bool

// What a declaration says.
struct PDecl {
  char name[kMaxPName + 1] = {};
  int32_t dtype = TINYAI_PTYPE_F32;
  int32_t rank = 0;
  int64_t shape[kMaxPRank] = {1, 1, 1, 1};
  int32_t index_count = 0;
  char index_names[kMaxPIndices][kMaxPName + 1] = {};
  int64_t fixed[kMaxPIndices] = {0, 0, 0, 0};  // 0: grows
  int32_t auto_count = 0;                      // the last auto_count indices grow element dims 0..
  bool has_init = false;
  double init = 0.0;

  bool table() const { return index_count > auto_count; }
  int32_t table_indices() const { return index_count - auto_count; }
};

// One index of a reference: a position, a range a..b (half-open; b may
// count back from the extent), all of it, or absent (an auto-dim matrix's
// `A[r, ]`).
// A bound may name a scalar entry (`K[l, step]`): its offset in the
// reference's text, bound to the scalar's value before use (-1: a number).
struct PIndex {
  enum Kind { kAt, kRange, kAll, kNone } kind = kAt;
  int64_t at = 0, from = 0, to = 0;
  bool to_from_end = false;  // `to` counts back from the extent (a negative end or `a..`)
  int64_t at_sym = -1, from_sym = -1, to_sym = -1;
};

struct PRef {
  const char* text = nullptr;  // what was parsed (symbols point into it)
  char name[kMaxPName + 1] = {};
  bool has_brackets = false;
  int32_t count = 0;
  PIndex index[kMaxPIndices + kMaxPRank];
};

struct StoreReader;  // store_io.cc

// A hash table of positions (0..n-1) in a list of named records, at most
// half full: Find and Add take constant time on average. The names live in
// the records; NameOf reads one. Memory: 4 bytes a slot, fewer than 4n
// slots for n names (kNameIndexBytes a name).
class PNameIndex {
 public:
  using NameOf = const char* (*)(const void* owner, int32_t position);
  PNameIndex() = default;
  PNameIndex(const PNameIndex&) = delete;
  PNameIndex& operator=(const PNameIndex&) = delete;

  // The position of name, or -1.
  int32_t Find(const char* name, NameOf name_of, const void* owner) const;
  // Adds position `count - 1` (the list's newest record), the table grown
  // (and rebuilt over positions 0..count-1) when it would pass half full.
  TinyAIStatus Add(int32_t count, NameOf name_of, const void* owner);
  // Rebuilt over positions 0..count-1 (after the list lost its newest
  // records), at the size they need; count 0 frees it.
  void Rebuild(int32_t count, NameOf name_of, const void* owner);

 private:
  static size_t SlotsFor(int32_t count);
  void Place(Array<int32_t>* slots, int32_t position, NameOf name_of, const void* owner) const;
  Array<int32_t> slots_;  // -1: empty
};
constexpr uint64_t kNameIndexBytes = 4 * sizeof(int32_t);

class PersistentStore {
 public:
  PersistentStore() = default;
  PersistentStore(const PersistentStore&) = delete;
  PersistentStore& operator=(const PersistentStore&) = delete;
  ~PersistentStore();

  // memory_limit 0: none; chunk_rows 1..65536. zero_fixed false leaves a
  // fixed table's block as the allocator gives it (the KV cache writes a
  // row before it reads one, and a large cache's untouched pages then stay
  // uncommitted); everything else starts at zeros.
  TinyAIStatus Init(uint64_t memory_limit, int32_t chunk_rows, bool zero_fixed = true);

  TinyAIStatus SetDim(const char* name, int64_t value);
  // Looks a dimension name up (false when there is none).
  bool Dim(const char* name, int64_t* value) const;
  // Declares one entry (checked: TINYAI_ERR_INVALID_ARGUMENT naming what is
  // wrong); a fixed table is laid out now (TINYAI_ERR_RESOURCE_EXHAUSTED
  // past the limit).
  TinyAIStatus Declare(const PDecl& decl);
  // What Declare checks of a declaration by itself (not whether its name is
  // taken), and its element's bytes: TINYAI_ERR_INVALID_ARGUMENT or
  // TINYAI_ERR_OVERFLOW naming what is wrong. A load checks a saved
  // declaration with it too.
  static TinyAIStatus CheckDecl(const PDecl& decl, uint64_t* elem_bytes);
  // The most rows (k 0) or columns (k 1) an auto-dim matrix of decl holds:
  // its declared size plus its @fixed growth, at most kMaxPIndex. Writes,
  // loads and saves use this one bound (a store loads what it saved).
  static int64_t AutoMax(const PDecl& decl, int32_t k);
  // Whether an entry's storage is laid out at declaration and never grows:
  // a scalar, a tensor, a table whose every index is fixed.
  static bool HeldInPlace(const PDecl& decl);
  // What Declare(decl) takes from the limit (a valid declaration): all of a
  // scalar, tensor or fixed table; a growable entry's record alone (each
  // with its share of the store's list and table of names).
  static uint64_t DeclaredBytes(const PDecl& decl);
  // What SetDim charges for a new name (its record, and its share of the
  // list and the table that find it).
  static uint64_t DimBytes();
  // The document's declaration text (store_text.cc): all or nothing.
  TinyAIStatus DeclareText(const char* text);
  // Forgets the entries declared after the first `count` (undoes a failed
  // DeclareText).
  void Truncate(int32_t count);

  int32_t count() const { return static_cast<int32_t>(entries_.size()); }
  // An entry by its whole name (-1: none, or not a name).
  int32_t Find(const char* name) const;
  // The same with the cause: TINYAI_ERR_INVALID_ARGUMENT for what is not a
  // name (too long: refused by name), TINYAI_ERR_NOT_FOUND for no entry
  // (call names the caller).
  TinyAIStatus FindEntry(const char* name, const char* call, int32_t* e) const;
  const PDecl& decl(int32_t e) const;
  uint64_t used() const { return used_; }
  uint64_t limit() const { return limit_; }

  // `ref` as text (store_text.cc): TINYAI_ERR_INVALID_ARGUMENT for bad syntax.
  static TinyAIStatus ParseRef(const char* text, PRef* out);

  TinyAIStatus Read(const char* ref, int32_t dtype, void* out, size_t capacity, size_t* bytes) const;
  TinyAIStatus Write(const char* ref, int32_t dtype, const void* data, size_t bytes);
  TinyAIStatus Add(const char* name, int64_t delta);  // increment (> 0) or decrement (< 0)
  TinyAIStatus Reset(const char* ref);                // nullptr / "": everything
  // A scalar's value (integer or float; u64 above 2^53 rounded).
  TinyAIStatus ScalarValue(int32_t e, double* value) const;
  // A scalar's value as an index (`K[l, step]`): exact, and
  // TINYAI_ERR_OUT_OF_BOUNDS (naming ref and the scalar) for a value that
  // is no index: negative, not whole, not finite, or past INT64_MAX.
  TinyAIStatus ScalarIndex(int32_t e, const char* ref, int64_t* index) const;

  // Each index's extent now, and an auto-dim matrix's shape (the first
  // table row's, or `tuple`'s).
  void Extents(int32_t e, int64_t* extent) const;
  void AutoShape(int32_t e, const int64_t* tuple, int64_t* shape) const;
  uint64_t EntryBytes(int32_t e) const;

  // Direct rows (the KV cache): the row `tuple` of a table whose indices
  // are all fixed, or nullptr.
  uint8_t* FixedRow(int32_t e, const int64_t* tuple);
  // The row `tuple` of a plain table (no auto-dim indices), its chunk
  // allocated and charged when first reached (and the extents grown to hold
  // it, as a write would); the chunk's rows follow it in memory up to the
  // next multiple of chunk_rows() in the last index. nullptr with *status
  // set: an index out of its fixed range (TINYAI_ERR_OUT_OF_BOUNDS), the
  // limit (TINYAI_ERR_RESOURCE_EXHAUSTED) or the allocator.
  uint8_t* TableRow(int32_t e, const int64_t* tuple, TinyAIStatus* status);
  int32_t chunk_rows() const { return chunk_rows_; }

  // Saved form (store_io.cc): declarations and contents, CRC-32C at the
  // end; only what the store holds is written (the chunks and blocks it
  // allocated, with their places), so a file is at most 24 bytes plus 4
  // times used(). Load checks the checksum, then everything the file says
  // (its declarations as Declare would and against this store's, every
  // count, place and extent, bool values) before it changes anything. The
  // growable entries' contents are then built beside this store's, under
  // what memoryLimit leaves beside what this store holds (both are held
  // until they are swapped in); the entries held in place (HeldInPlace)
  // are read last, straight into place (a read that fails there, after
  // the checks - a failing disk, a file changed meanwhile - leaves the
  // store partly loaded, and says so). Serialize streams to a sink,
  // Deserialize reads a store of exactly size bytes from a source at an
  // offset.
  TinyAIStatus Save(const char* path) const;
  TinyAIStatus Load(const char* path);
  using Sink = TinyAIStatus (*)(void* user, const void* data, size_t size);
  TinyAIStatus Serialize(Sink sink, void* user) const;
  uint64_t SerializedSize() const;
  // Reads size bytes at offset into dst (TINYAI_ERR_TRUNCATED past the end).
  using Source = TinyAIStatus (*)(void* user, uint64_t offset, void* dst, size_t size);
  TinyAIStatus Deserialize(Source source, void* user, uint64_t offset, uint64_t size, const char* what);

 private:
  struct Matrix;  // an auto-dim matrix
  struct Entry;

  struct Cells;     // an auto-dim reference's cells in one matrix
  struct AutoSlice; // an auto-dim reference over its matrices

  TinyAIStatus WriteBody(Sink sink, void* user) const;
  TinyAIStatus WriteTable(const Entry* x, Sink sink, void* user) const;
  TinyAIStatus WriteMatrices(const Entry* x, Sink sink, void* user) const;
  // The file's declarations: each checked as Declare checks one
  // (TINYAI_ERR_BAD_FORMAT), then against this store's
  // (TINYAI_ERR_MISMATCH naming the first difference).
  TinyAIStatus CheckSavedDecls(StoreReader* in) const;
  // The file's contents, every entry's checked. kCheck keeps nothing;
  // kBuild reads the growable entries into `into` (a store of those
  // entries alone, in order); kInPlace reads the entries held in place
  // into this store. Each skips the others' values.
  enum class LoadPass { kCheck, kBuild, kInPlace };
  TinyAIStatus ReadContents(StoreReader* in, LoadPass pass, PersistentStore* into);
  // One entry's contents (declared d), read into x of this store, or
  // (x null) checked; values skipped unread when `skip`.
  TinyAIStatus ReadTable(StoreReader* in, const PDecl& d, Entry* x, bool skip);
  TinyAIStatus ReadMatrices(StoreReader* in, const PDecl& d, Entry* x, bool skip);
  // Rows of a table at `tuple` (the last index from r0), read into place.
  TinyAIStatus ReadRows(StoreReader* in, const PDecl& d, Entry* x, int64_t* tuple, int64_t r0, int64_t rows, bool skip);
  // The growable entries' contents from `into` (built by kBuild),
  // giving it this store's.
  void SwapGrowable(PersistentStore* into);
  // What tinyaiPersistentReset(store, NULL) would free now.
  uint64_t ResetFrees() const;
  TinyAIStatus Charge(uint64_t bytes, const char* what);
  void Refund(uint64_t bytes);
  // Replaces the symbols of ref by their scalars' values.
  TinyAIStatus BindSymbols(PRef* ref) const;
  // Every index of ref as a half-open range [from, to): a plain table's
  // (count: its indices), an auto-dim entry's table indices (count: those;
  // its matrix's rows and columns are resolved per matrix: MatrixCells).
  TinyAIStatus Resolve(const PRef& ref, int32_t* e, int64_t from[], int64_t to[], int32_t* count,
                       bool writing) const;
  // Index i of ref over an extent (tuple: the matrix's table indices, for
  // the message; nullptr for a matrix not yet written).
  TinyAIStatus ResolveIndex(const PRef& ref, const Entry* x, int32_t i, int64_t extent, bool writing,
                            const int64_t* tuple, int64_t* from, int64_t* to) const;
  // ref's cells in matrix m (nullptr: one at its declared shape), against
  // that matrix's own rows and columns.
  TinyAIStatus MatrixCells(const PRef& ref, const Entry* x, const Matrix* m, const int64_t* tuple, bool writing,
                           Cells* cells) const;
  // ref over an auto-dim entry's matrices [from, to): its cells in all,
  // every matrix's resolved (the first refusal returned).
  TinyAIStatus PlanAuto(const PRef& ref, const Entry* x, const int64_t* from, const int64_t* to, bool writing,
                        AutoSlice* plan) const;
  // Calls fn(tuple, matrix or nullptr) for the table tuples in [from, to)
  // in index order: every one (dense), or only those the matrices' array
  // holds (a walk bounded by the memory they hold).
  template <class F>
  TinyAIStatus ForEachMatrix(const Entry* x, const int64_t* from, const int64_t* to, bool dense, F&& fn) const;
  TinyAIStatus Access(const char* ref_text, bool writing, int32_t dtype, uint8_t* out, const uint8_t* in,
                      size_t size, size_t* bytes);
  // A slice's size against the call's (and a write's bool values).
  TinyAIStatus CheckSize(const PDecl& d, bool writing, const uint8_t* in, size_t size, uint64_t need) const;
  TinyAIStatus AccessAuto(const PRef& ref, Entry* x, const int64_t* from, const int64_t* to, bool writing,
                          uint8_t* out, const uint8_t* in, size_t size, size_t* bytes);
  TinyAIStatus ResetAuto(const PRef& ref, Entry* x, const int64_t* from, const int64_t* to);
  TinyAIStatus ResetEntry(int32_t e);
  // A table's row at `tuple` (in range), its chunk allocated (and the
  // directory grown) when `create`; nullptr when never written (or on a
  // failed allocation, with *status).
  uint8_t* Row(Entry* x, const int64_t* tuple, bool create, TinyAIStatus* status);
  // A table's (or an auto-dim entry's matrix) directory grown to hold
  // `where` (its table indices; a plain table's last one in chunks).
  bool DirFor(const Entry* x, const int64_t* where, int64_t* cap, uint64_t* entries) const;
  TinyAIStatus GrowDir(Entry* x, const int64_t* where);
  TinyAIStatus GrowMats(Entry* x, const int64_t* tuple);
  TinyAIStatus CheckWriteFits(const Entry* x, const int64_t* from, const int64_t* to) const;
  TinyAIStatus CheckAutoWriteFits(const PRef& ref, const Entry* x, const AutoSlice& plan) const;
  // An auto-dim write of `cells` grows matrix m (nullptr: one at its
  // declared shape) by whole rows or whole columns only (checked before
  // anything is created).
  TinyAIStatus CheckMatrixGrowth(const Entry* x, const Matrix* m, const Cells& cells) const;
  const uint8_t* Row(const Entry* x, const int64_t* tuple) const;
  // The auto-dim matrix of a table tuple (created when `create`).
  Matrix* MatrixAt(Entry* x, const int64_t* tuple, bool create, TinyAIStatus* status);
  const Matrix* MatrixAt(const Entry* x, const int64_t* tuple) const;
  // A matrix element's bytes, its block allocated when `create`.
  uint8_t* Cell(const Entry* x, Matrix* m, int64_t r, int64_t c, bool create, TinyAIStatus* status);
  TinyAIStatus GrowGrid(const Entry* x, Matrix* m, int64_t rows, int64_t cols);
  void FreeMatrix(const Entry* x, Matrix* m);

  // The entries' list and name table grown for one more (the list's
  // capacity stays below twice its size: kEntryListBytes bounds it).
  TinyAIStatus AddEntry(Entry* x);
  static const char* EntryName(const void* store, int32_t position);
  static const char* DimName(const void* store, int32_t position);

  uint64_t limit_ = 0;
  uint64_t used_ = 0;        // everything: entries and named dimensions
  uint64_t dims_bytes_ = 0;  // named dimensions' part of used_
  int32_t chunk_rows_ = 64;
  bool zero_fixed_ = true;
  Vector<Entry*> entries_;
  PNameIndex entry_index_;
  struct NamedDim {
    char name[kMaxPName + 1];
    int64_t value;
  };
  Vector<NamedDim> dims_;
  PNameIndex dim_index_;
};

// Each entry's and each named dimension's charge beyond its record: a
// list's slot (the list at most doubles: two) and its name table's.
constexpr uint64_t kEntryListBytes = 2 * sizeof(void*) + kNameIndexBytes;

// Files the store and sessions write and read (store_io.cc). fill writes
// the contents through the sink into a temporary that is put in place over
// path only when all went well (port::BeginOutput: what is refused, and
// why nothing else is ever touched); call names the caller in messages.
using FillFile = TinyAIStatus (*)(PersistentStore::Sink sink, void* sink_user, const void* what);
TinyAIStatus WriteFileAtomically(const char* path, FillFile fill, const void* what, const char* call);
// A PersistentStore::Source over an open file.
struct FileSource {
  port::File file;
  const char* name = "";
};
TinyAIStatus ReadFileSource(void* user, uint64_t offset, void* dst, size_t size);

}  // namespace tinyai

#endif  // TINYAI_KV_STORE_H_
