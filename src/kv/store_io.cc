// Saving and loading a persistent store.
//
// The file (all numbers little-endian):
//   "TPS1"  u32 version (2)  u64 body bytes
//   body:
//     u32 entries, then each entry's declaration:
//       u8 name bytes, name; i32 dtype, rank; i64 shape[4] (1 past the
//       rank); i32 indices, each u8 name bytes, name; i64 fixed[4] (0 past
//       the indices); i32 auto dims; u8 has init (0 or 1); f64 init
//     then each entry's contents:
//       scalar, tensor   its element
//       table            i64 extent per index; i64 run (rows the last index
//                        is cut into: the saving store's chunk, or a fixed
//                        table's whole last index); u64 runs held, then
//                        each, in index order: i64 its indices but the
//                        last, i64 its number along the last, then its rows
//                        (up to the last index's extent)
//       auto-dim         i64 extent per table index; u64 matrices held,
//                        then each, in index order: i64 its table indices,
//                        i64 rows, cols, u64 blocks held, then each, in
//                        order: i64 block row, block column (of kAutoBlock x
//                        kAutoBlock cells), then its cells inside the matrix,
//                        row after row
//   u32 CRC-32C of everything before it.
// A save writes only what the store holds: a run or a block is written
// when the store has allocated it, and the places written are bounded by
// the directories' and grids' entries, which the store holds too. A file
// is then at most 24 bytes plus 4 times the memory the store holds (a run
// of one 1-byte row takes 1 + 8 bytes of the store and at most 33 of the
// file). Version 1 (read, never written) held instead every run inside the
// extents, each after a u8 present (0 or 1), and every matrix inside them
// with all its rows x cols values: a table of 2^40 rows never written took
// 2^40 bytes.
//
// A load checks the whole file's checksum first, then what the file says
// (ReadContents, a pass that keeps nothing): every declaration as Declare
// checks one and equal to this store's, every extent, run, place and
// shape, and that a growable index's extent is where its highest row held
// ends (what a store writes), bool values 0 or 1. Only then does it change
// anything: the growable entries are built beside this store's, under
// what its memory limit leaves beside what the store holds, and swapped
// in; the entries held in place are then read into place.
#include <cstdio>
#include <cstring>

#include "common/array.h"
#include "common/checked_math.h"
#include "common/crc32c.h"
#include "common/format.h"
#include "common/status.h"
#include "kv/store.h"
#include "kv/store_internal.h"
#include "port/port.h"

namespace tinyai {

namespace {

constexpr char kMagic[4] = {'T', 'P', 'S', '1'};
constexpr uint32_t kVersion = 2;     // written
constexpr uint32_t kOldVersion = 1;  // still read
constexpr size_t kHeader = 16;

// A sink that checksums and counts what passes to the next one.
struct CrcSink {
  PersistentStore::Sink next = nullptr;
  void* user = nullptr;
  uint32_t crc = 0;
  uint64_t bytes = 0;
};

TinyAIStatus CrcWrite(void* user, const void* data, size_t size) {
  CrcSink* s = static_cast<CrcSink*>(user);
  if (!CheckedAdd(s->bytes, size, &s->bytes)) {
    return SetError(TINYAI_ERR_OVERFLOW, "persistent store: its saved form passes 2^64 bytes");
  }
  s->crc = Crc32c(s->crc, data, size);
  return s->next ? s->next(s->user, data, size) : TINYAI_OK;
}

template <typename T>
TinyAIStatus Put(PersistentStore::Sink sink, void* user, T value) {
  return sink(user, &value, sizeof value);
}

TinyAIStatus PutName(PersistentStore::Sink sink, void* user, const char* name) {
  const uint8_t n = static_cast<uint8_t>(std::strlen(name));
  TINYAI_RETURN_IF_ERROR(sink(user, &n, 1));
  return sink(user, name, n);
}

// The next tuple of an odometer over [0, end) (the last index fastest);
// false after the last.
bool Next(int64_t* at, const int64_t* end, int32_t k) {
  for (int32_t i = k - 1; i >= 0; --i) {
    if (++at[i] < end[i]) return true;
    at[i] = 0;
  }
  return false;
}

// Whether tuple a comes after b in index order.
bool After(const int64_t* a, const int64_t* b, int32_t k) {
  for (int32_t i = 0; i < k; ++i) {
    if (a[i] != b[i]) return a[i] > b[i];
  }
  return false;
}

// An element's bytes (its declaration already checked).
uint64_t ElemBytes(const PDecl& d) {
  uint64_t n = PTypeBytes(d.dtype);
  for (int32_t i = 0; i < d.rank; ++i) n *= static_cast<uint64_t>(d.shape[i] < 1 ? 1 : d.shape[i]);
  return n;
}

}  // namespace

// Reads a body in order, past the checksum already checked; every read
// stays inside the body (TINYAI_ERR_BAD_FORMAT past it: the checksum held,
// so the writer wrote something else than a store).
struct StoreReader {
  PersistentStore::Source source = nullptr;
  void* user = nullptr;
  uint64_t at = 0, end = 0;
  uint32_t version = kVersion;
  const char* what = "";

  uint64_t left() const { return end - at; }
  TinyAIStatus Read(void* dst, uint64_t size) {
    if (size > end - at) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "%s: the store's body ends %llu bytes early", what,
                      static_cast<unsigned long long>(size - (end - at)));
    }
    TINYAI_RETURN_IF_ERROR(source(user, at, dst, static_cast<size_t>(size)));
    at += size;
    return TINYAI_OK;
  }
  TinyAIStatus Skip(uint64_t size) {
    if (size > end - at) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "%s: the store's body ends %llu bytes early", what,
                      static_cast<unsigned long long>(size - (end - at)));
    }
    at += size;
    return TINYAI_OK;
  }
  template <typename T>
  TinyAIStatus Get(T* value) {
    return Read(value, sizeof *value);
  }
  // A name: at most kMaxPName bytes, none of them NUL (a name cut short
  // would compare equal to another).
  TinyAIStatus Name(char (&out)[kMaxPName + 1]) {
    uint8_t n = 0;
    TINYAI_RETURN_IF_ERROR(Get(&n));
    if (n > kMaxPName) return SetError(TINYAI_ERR_BAD_FORMAT, "%s: a name of %u bytes", what, static_cast<unsigned>(n));
    std::memset(out, 0, sizeof out);
    TINYAI_RETURN_IF_ERROR(Read(out, n));
    if (std::strlen(out) != n) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "%s: a name of %u bytes holds a NUL byte ('%s' and more)", what,
                      static_cast<unsigned>(n), Excerpt(out).text);
    }
    return TINYAI_OK;
  }
  // Values of type t, checked (bool: 0 or 1; every other type takes any
  // bits, as a write does: a float may be NaN or infinite) and read into
  // dst, or (dst null) only checked. A value refused in place is zeroed.
  TinyAIStatus Values(int32_t t, uint8_t* dst, uint64_t bytes, const char* name) {
    if (dst) {
      TINYAI_RETURN_IF_ERROR(Read(dst, bytes));
      return CheckValues(t, dst, bytes, name, true);
    }
    if (t != TINYAI_PTYPE_BOOL) return Skip(bytes);
    uint8_t buffer[1024];
    for (uint64_t done = 0; done < bytes;) {
      const uint64_t n = bytes - done < sizeof buffer ? bytes - done : sizeof buffer;
      TINYAI_RETURN_IF_ERROR(Read(buffer, n));
      TINYAI_RETURN_IF_ERROR(CheckValues(t, buffer, n, name, false));
      done += n;
    }
    return TINYAI_OK;
  }
  TinyAIStatus CheckValues(int32_t t, uint8_t* p, uint64_t bytes, const char* name, bool zero) {
    if (t != TINYAI_PTYPE_BOOL) return TINYAI_OK;
    for (uint64_t i = 0; i < bytes; ++i) {
      if (p[i] > 1) {
        const unsigned v = p[i];
        if (zero) std::memset(p, 0, static_cast<size_t>(bytes));
        return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s' holds bool values (0 or 1, what a write takes); the file "
                        "holds %u", what, name, v);
      }
    }
    return TINYAI_OK;
  }
  // A count of records of at least `each` bytes that the body can hold.
  TinyAIStatus Count(uint64_t* n, uint64_t each, const char* name, const char* records) {
    TINYAI_RETURN_IF_ERROR(Get(n));
    if (*n > left() / each) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s' holds %llu %s in %llu bytes", what, name,
                      static_cast<unsigned long long>(*n), records, static_cast<unsigned long long>(left()));
    }
    return TINYAI_OK;
  }
};

// ---- saving -------------------------------------------------------------------------------------

TinyAIStatus PersistentStore::WriteBody(Sink sink, void* user) const {
  TINYAI_RETURN_IF_ERROR(Put(sink, user, static_cast<uint32_t>(entries_.size())));
  for (const Entry* x : entries_) {
    const PDecl& d = x->d;
    TINYAI_RETURN_IF_ERROR(PutName(sink, user, d.name));
    TINYAI_RETURN_IF_ERROR(Put(sink, user, d.dtype));
    TINYAI_RETURN_IF_ERROR(Put(sink, user, d.rank));
    for (int i = 0; i < kMaxPRank; ++i) TINYAI_RETURN_IF_ERROR(Put(sink, user, d.shape[i]));
    TINYAI_RETURN_IF_ERROR(Put(sink, user, d.index_count));
    for (int32_t i = 0; i < d.index_count; ++i) TINYAI_RETURN_IF_ERROR(PutName(sink, user, d.index_names[i]));
    for (int i = 0; i < kMaxPIndices; ++i) TINYAI_RETURN_IF_ERROR(Put(sink, user, d.fixed[i]));
    TINYAI_RETURN_IF_ERROR(Put(sink, user, d.auto_count));
    TINYAI_RETURN_IF_ERROR(Put(sink, user, static_cast<uint8_t>(d.has_init ? 1 : 0)));
    TINYAI_RETURN_IF_ERROR(Put(sink, user, d.init));
  }
  for (const Entry* x : entries_) {
    if (x->d.index_count == 0) {
      TINYAI_RETURN_IF_ERROR(sink(user, x->single, static_cast<size_t>(x->elem_bytes)));
    } else if (x->d.auto_count == 0) {
      TINYAI_RETURN_IF_ERROR(WriteTable(x, sink, user));
    } else {
      TINYAI_RETURN_IF_ERROR(WriteMatrices(x, sink, user));
    }
  }
  return TINYAI_OK;
}

// The runs the directory holds inside the extents, in its order (dense
// over its capacities, the last index fastest: index order).
TinyAIStatus PersistentStore::WriteTable(const Entry* x, Sink sink, void* user) const {
  const PDecl& d = x->d;
  const int32_t k = d.index_count;
  int64_t extent[kMaxPIndices] = {0, 0, 0, 0};
  for (int32_t i = 0; i < k; ++i) {
    extent[i] = d.fixed[i] > 0 ? d.fixed[i] : x->extent[i];
    TINYAI_RETURN_IF_ERROR(Put(sink, user, extent[i]));
  }
  const int64_t run = x->chunk, last = extent[k - 1];
  TINYAI_RETURN_IF_ERROR(Put(sink, user, run));
  for (int pass = 0; pass < 2; ++pass) {
    uint64_t held = 0;
    int64_t at[kMaxPIndices] = {0, 0, 0, 0};
    for (uint64_t p = 0; x->dir && p < x->dir_entries; ++p, Next(at, x->cap, k)) {
      bool inside = x->dir[p] != nullptr && at[k - 1] < (last + run - 1) / run;
      for (int32_t i = 0; i + 1 < k && inside; ++i) inside = at[i] < extent[i];
      if (!inside) continue;
      ++held;
      if (pass == 0) continue;
      for (int32_t i = 0; i < k; ++i) TINYAI_RETURN_IF_ERROR(Put(sink, user, at[i]));
      const int64_t r0 = at[k - 1] * run, rows = last - r0 < run ? last - r0 : run;  // a run's rows are contiguous
      TINYAI_RETURN_IF_ERROR(sink(user, x->dir[p], static_cast<size_t>(static_cast<uint64_t>(rows) * x->elem_bytes)));
    }
    if (pass == 0) TINYAI_RETURN_IF_ERROR(Put(sink, user, held));
  }
  return TINYAI_OK;
}

// The matrices the matrices' array holds inside the extents, each with
// its shape and the blocks it holds inside it.
TinyAIStatus PersistentStore::WriteMatrices(const Entry* x, Sink sink, void* user) const {
  const PDecl& d = x->d;
  const int32_t k = d.table_indices();
  int64_t extent[kMaxPIndices] = {0, 0, 0, 0};
  for (int32_t i = 0; i < k; ++i) {
    extent[i] = d.fixed[i] > 0 ? d.fixed[i] : x->extent[i];
    TINYAI_RETURN_IF_ERROR(Put(sink, user, extent[i]));
  }
  const uint64_t each = PTypeBytes(d.dtype);
  for (int pass = 0; pass < 2; ++pass) {
    uint64_t held = 0;
    int64_t at[kMaxPIndices] = {0, 0, 0, 0};
    for (uint64_t p = 0; x->mats && p < x->mat_entries; ++p, Next(at, x->cap, k)) {
      bool inside = true;
      for (int32_t i = 0; i < k && inside; ++i) inside = at[i] < extent[i];
      if (!inside) continue;
      ++held;
      if (pass == 0) continue;
      const Matrix& m = x->mats[p];
      for (int32_t i = 0; i < k; ++i) TINYAI_RETURN_IF_ERROR(Put(sink, user, at[i]));
      TINYAI_RETURN_IF_ERROR(Put(sink, user, m.rows));
      TINYAI_RETURN_IF_ERROR(Put(sink, user, m.cols));
      // Blocks inside the matrix (one past it holds zeros: a write that
      // failed part way allocates before it grows the shape).
      const int64_t br_end = (m.rows + kAutoBlock - 1) / kAutoBlock, bc_end = (m.cols + kAutoBlock - 1) / kAutoBlock;
      for (int bpass = 0; bpass < 2; ++bpass) {
        uint64_t blocks = 0;
        for (int64_t br = 0; br < m.grid_rows && br < br_end; ++br) {
          for (int64_t bc = 0; bc < m.grid_cols && bc < bc_end; ++bc) {
            const uint8_t* block = m.grid[br * m.grid_cols + bc];
            if (!block) continue;
            ++blocks;
            if (bpass == 0) continue;
            TINYAI_RETURN_IF_ERROR(Put(sink, user, br));
            TINYAI_RETURN_IF_ERROR(Put(sink, user, bc));
            const int64_t r_end = (br + 1) * kAutoBlock < m.rows ? (br + 1) * kAutoBlock : m.rows;
            const int64_t c_end = (bc + 1) * kAutoBlock < m.cols ? (bc + 1) * kAutoBlock : m.cols;
            for (int64_t r = br * kAutoBlock; r < r_end; ++r) {
              TINYAI_RETURN_IF_ERROR(sink(user, block + static_cast<uint64_t>((r % kAutoBlock) * kAutoBlock) * each,
                                          static_cast<size_t>(static_cast<uint64_t>(c_end - bc * kAutoBlock) * each)));
            }
          }
        }
        if (bpass == 0) TINYAI_RETURN_IF_ERROR(Put(sink, user, blocks));
      }
    }
    if (pass == 0) TINYAI_RETURN_IF_ERROR(Put(sink, user, held));
  }
  return TINYAI_OK;
}

uint64_t PersistentStore::SerializedSize() const {
  CrcSink count;
  WriteBody(&CrcWrite, &count);
  return kHeader + count.bytes + 4;
}

TinyAIStatus PersistentStore::Serialize(Sink sink, void* user) const {
  const uint64_t body = SerializedSize() - kHeader - 4;
  CrcSink crc;
  crc.next = sink;
  crc.user = user;
  TINYAI_RETURN_IF_ERROR(CrcWrite(&crc, kMagic, 4));
  TINYAI_RETURN_IF_ERROR(Put(&CrcWrite, &crc, kVersion));
  TINYAI_RETURN_IF_ERROR(Put(&CrcWrite, &crc, body));
  TINYAI_RETURN_IF_ERROR(WriteBody(&CrcWrite, &crc));
  return Put(sink, user, crc.crc);
}

// ---- loading ------------------------------------------------------------------------------------

namespace {

// A saved declaration: what a store writes (names whole, has-init 0 or 1,
// the slots past the rank and the indices at their defaults), and what
// Declare would take.
TinyAIStatus ReadDecl(StoreReader* in, uint32_t e, PDecl* d) {
  uint8_t init = 0;
  TINYAI_RETURN_IF_ERROR(in->Name(d->name));
  TINYAI_RETURN_IF_ERROR(in->Get(&d->dtype));
  TINYAI_RETURN_IF_ERROR(in->Get(&d->rank));
  for (int i = 0; i < kMaxPRank; ++i) TINYAI_RETURN_IF_ERROR(in->Get(&d->shape[i]));
  TINYAI_RETURN_IF_ERROR(in->Get(&d->index_count));
  if (d->index_count < 0 || d->index_count > kMaxPIndices) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "%s: entry %u ('%s') has %d indices", in->what, static_cast<unsigned>(e),
                    d->name, static_cast<int>(d->index_count));
  }
  for (int32_t i = 0; i < d->index_count; ++i) TINYAI_RETURN_IF_ERROR(in->Name(d->index_names[i]));
  for (int i = 0; i < kMaxPIndices; ++i) TINYAI_RETURN_IF_ERROR(in->Get(&d->fixed[i]));
  TINYAI_RETURN_IF_ERROR(in->Get(&d->auto_count));
  TINYAI_RETURN_IF_ERROR(in->Get(&init));
  TINYAI_RETURN_IF_ERROR(in->Get(&d->init));
  if (init > 1) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "%s: entry %u ('%s'): its @init flag is %u (0 or 1)", in->what,
                    static_cast<unsigned>(e), d->name, static_cast<unsigned>(init));
  }
  d->has_init = init != 0;
  uint64_t elem = 0;
  if (PersistentStore::CheckDecl(*d, &elem) != TINYAI_OK) {
    return AddErrorContext(TINYAI_ERR_BAD_FORMAT, "%s: entry %u, a declaration no store takes: ", in->what,
                           static_cast<unsigned>(e));
  }
  for (int32_t i = d->rank; i < kMaxPRank; ++i) {
    if (d->shape[i] != 1) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "%s: entry %u ('%s'): dimension %d past its rank %d is %lld (a store "
                      "writes 1)", in->what, static_cast<unsigned>(e), d->name, static_cast<int>(i),
                      static_cast<int>(d->rank), static_cast<long long>(d->shape[i]));
    }
  }
  for (int32_t i = d->index_count; i < kMaxPIndices; ++i) {
    if (d->fixed[i] != 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "%s: entry %u ('%s'): fixed extent %d past its %d indices is %lld (a "
                      "store writes 0)", in->what, static_cast<unsigned>(e), d->name, static_cast<int>(i),
                      static_cast<int>(d->index_count), static_cast<long long>(d->fixed[i]));
    }
  }
  return TINYAI_OK;
}

// The first difference between two declarations, or nullptr.
const char* Differs(const PDecl& a, const PDecl& b) {
  if (std::strcmp(a.name, b.name) != 0) return "name";
  if (a.dtype != b.dtype) return "type";
  if (a.rank != b.rank) return "rank";
  for (int32_t i = 0; i < a.rank; ++i) {
    if (a.shape[i] != b.shape[i]) return "shape";
  }
  if (a.index_count != b.index_count) return "indices";
  for (int32_t i = 0; i < a.index_count; ++i) {
    if (std::strcmp(a.index_names[i], b.index_names[i]) != 0) return "index names";
    if (a.fixed[i] != b.fixed[i]) return "fixed extents";
  }
  if (a.auto_count != b.auto_count) return "auto dims";
  // @init's value exactly (its bits: -0.0 is another value than 0.0).
  if (a.has_init != b.has_init || (a.has_init && std::memcmp(&a.init, &b.init, sizeof a.init) != 0)) return "@init";
  return nullptr;
}

// Each table index's extent: a fixed one's, or (growable) 0..kMaxPIndex.
TinyAIStatus ReadExtents(StoreReader* in, const PDecl& d, int64_t* extent) {
  for (int32_t i = 0; i < d.table_indices(); ++i) {
    TINYAI_RETURN_IF_ERROR(in->Get(&extent[i]));
    const bool bad = d.fixed[i] > 0 ? extent[i] != d.fixed[i] : (extent[i] < 0 || extent[i] > kMaxPIndex);
    if (bad) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s' index %s has extent %lld (%s)", in->what, d.name,
                      d.index_names[i], static_cast<long long>(extent[i]),
                      d.fixed[i] > 0 ? "it is fixed at another" : "0..2^40");
    }
  }
  return TINYAI_OK;
}

// A growable index's extent is where the highest row held ends (a store's
// extents grow only with what it writes there): `top` is that row, -1 for
// none.
TinyAIStatus CheckExtentHeld(StoreReader* in, const PDecl& d, int32_t i, int64_t extent, int64_t top) {
  if (d.fixed[i] > 0 || extent == top + 1) return TINYAI_OK;
  return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s' index %s has extent %lld, but what it holds ends at %lld (a "
                  "store's extent is one past the highest row written)", in->what, d.name, d.index_names[i],
                  static_cast<long long>(extent), static_cast<long long>(top + 1));
}

}  // namespace

// The header and the checksum of a saved store of exactly size bytes at
// offset: its version and its body's bytes.
static TinyAIStatus VerifySaved(PersistentStore::Source source, void* user, uint64_t offset, uint64_t size,
                                const char* what, uint32_t* version_out, uint64_t* body_bytes) {
  if (size < kHeader + 4) {
    uint8_t head[4] = {0, 0, 0, 0};
    if (size >= 4 && source(user, offset, head, 4) == TINYAI_OK && std::memcmp(head, kMagic, 4) != 0) {
      return SetError(TINYAI_ERR_BAD_MAGIC, "%s is not a persistent store (no TPS1 magic)", what);
    }
    return SetError(TINYAI_ERR_TRUNCATED, "%s: %llu bytes, fewer than a store's header", what,
                    static_cast<unsigned long long>(size));
  }
  uint8_t header[kHeader];
  TINYAI_RETURN_IF_ERROR(source(user, offset, header, kHeader));
  if (std::memcmp(header, kMagic, 4) != 0) {
    return SetError(TINYAI_ERR_BAD_MAGIC, "%s is not a persistent store (no TPS1 magic)", what);
  }
  uint32_t version = 0;
  uint64_t body = 0;
  std::memcpy(&version, header + 4, 4);
  std::memcpy(&body, header + 8, 8);
  if (version != kVersion && version != kOldVersion) {
    return SetError(TINYAI_ERR_UNSUPPORTED_VERSION, "%s: store version %u; this build reads versions %u and %u", what,
                    static_cast<unsigned>(version), static_cast<unsigned>(kOldVersion),
                    static_cast<unsigned>(kVersion));
  }
  if (body > size - kHeader - 4) {
    return SetError(TINYAI_ERR_TRUNCATED, "%s: the store says %llu bytes of body; %llu are there", what,
                    static_cast<unsigned long long>(body), static_cast<unsigned long long>(size - kHeader - 4));
  }
  if (body < size - kHeader - 4) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "%s: %llu bytes after the store's checksum", what,
                    static_cast<unsigned long long>(size - kHeader - 4 - body));
  }
  // The checksum first, in blocks.
  uint8_t buffer[1024];
  uint32_t crc = Crc32c(0, header, kHeader);
  for (uint64_t at = 0; at < body;) {
    const size_t n = static_cast<size_t>(body - at < sizeof buffer ? body - at : sizeof buffer);
    TINYAI_RETURN_IF_ERROR(source(user, offset + kHeader + at, buffer, n));
    crc = Crc32c(crc, buffer, n);
    at += n;
  }
  uint32_t stored = 0;
  TINYAI_RETURN_IF_ERROR(source(user, offset + kHeader + body, &stored, 4));
  if (stored != crc) {
    return SetError(TINYAI_ERR_CHECKSUM, "%s: the store's checksum is %08x; its contents hash to %08x", what,
                    static_cast<unsigned>(stored), static_cast<unsigned>(crc));
  }
  *version_out = version;
  *body_bytes = body;
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::CheckSavedDecls(StoreReader* in) const {
  uint32_t n = 0;
  TINYAI_RETURN_IF_ERROR(in->Get(&n));
  if (n != static_cast<uint32_t>(count())) {
    return SetError(TINYAI_ERR_MISMATCH, "%s holds %u entries; this store declares %d", in->what,
                    static_cast<unsigned>(n), static_cast<int>(count()));
  }
  for (int32_t e = 0; e < count(); ++e) {
    PDecl saved;
    TINYAI_RETURN_IF_ERROR(ReadDecl(in, static_cast<uint32_t>(e), &saved));
    const char* diff = Differs(saved, decl(e));
    if (diff) {
      return SetError(TINYAI_ERR_MISMATCH, "%s: entry %d ('%s' in the file, '%s' here) differs in its %s", in->what,
                      static_cast<int>(e), saved.name, decl(e).name, diff);
    }
  }
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::ReadRows(StoreReader* in, const PDecl& d, Entry* x, int64_t* tuple, int64_t r0,
                                       int64_t rows, bool skip) {
  const uint64_t elem = ElemBytes(d);
  uint64_t bytes = 0;
  if (!CheckedMul(static_cast<uint64_t>(rows), elem, &bytes)) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s': a run of %lld rows overflows 64 bits", in->what, d.name,
                    static_cast<long long>(rows));
  }
  if (skip) return in->Skip(bytes);
  if (!x) return in->Values(d.dtype, nullptr, bytes, d.name);
  TinyAIStatus status = TINYAI_OK;
  const int32_t k = d.index_count;
  for (int64_t r = r0; r < r0 + rows; ++r) {
    tuple[k - 1] = r;
    uint8_t* row = Row(x, tuple, true, &status);
    if (!row) return status;
    TINYAI_RETURN_IF_ERROR(in->Values(d.dtype, row, elem, d.name));
  }
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::ReadTable(StoreReader* in, const PDecl& d, Entry* x, bool skip) {
  const int32_t k = d.index_count;
  int64_t extent[kMaxPIndices] = {0, 0, 0, 0};
  TINYAI_RETURN_IF_ERROR(ReadExtents(in, d, extent));
  // The saving store's run: its chunk (1..kMaxPChunkRows), or a fixed
  // table's whole last index.
  int64_t run = 0;
  TINYAI_RETURN_IF_ERROR(in->Get(&run));
  const bool fixed = HeldInPlace(d);
  if (fixed ? run != d.fixed[k - 1] : (run < 1 || run > kMaxPChunkRows)) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s' is saved in runs of %lld rows (%s)", in->what, d.name,
                    static_cast<long long>(run), fixed ? "a fixed table's are its last index's extent" : "1..65536");
  }
  const int64_t last = extent[k - 1], runs = (last + run - 1) / run;
  int64_t at[kMaxPIndices] = {0, 0, 0, 0}, top[kMaxPIndices] = {-1, -1, -1, -1};
  const bool in_place = x && x->block && !skip;
  auto held = [&](int64_t r0, int64_t rows) {  // a run held at `at`: the highest row of each index
    for (int32_t i = 0; i + 1 < k; ++i) top[i] = at[i] > top[i] ? at[i] : top[i];
    top[k - 1] = r0 + rows - 1 > top[k - 1] ? r0 + rows - 1 : top[k - 1];
  };
  if (in->version == kOldVersion) {
    // Every run inside the extents, each after a present byte.
    uint64_t tuples = 1;
    for (int32_t i = 0; i + 1 < k; ++i) {
      if (!CheckedMul(tuples, static_cast<uint64_t>(extent[i]), &tuples)) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s': its extents' rows overflow 64 bits", in->what, d.name);
      }
    }
    for (uint64_t t = 0; t < tuples && last > 0; ++t) {
      for (int64_t c = 0; c < runs; ++c) {
        uint8_t present = 0;
        TINYAI_RETURN_IF_ERROR(in->Get(&present));
        if (present > 1) return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s': a run marked %u", in->what, d.name, present);
        const int64_t r0 = c * run, rows = last - r0 < run ? last - r0 : run;
        if (present) {
          held(r0, rows);
          TINYAI_RETURN_IF_ERROR(ReadRows(in, d, x, at, r0, rows, skip));
        } else if (in_place) {
          // Never written when saved: zeros here too (the store loaded in
          // place may hold rows there).
          at[k - 1] = r0;  // a fixed table's run is its prefix's rows, contiguous
          TinyAIStatus unused = TINYAI_OK;
          std::memset(Row(x, at, false, &unused), 0, static_cast<size_t>(static_cast<uint64_t>(rows) * x->elem_bytes));
        }
      }
      at[k - 1] = 0;
      Next(at, extent, k - 1);
    }
  } else {
    // The runs held, in index order: at most one per 8k bytes left.
    uint64_t n = 0;
    TINYAI_RETURN_IF_ERROR(in->Count(&n, 8 * static_cast<uint64_t>(k), d.name, "runs"));
    if (in_place) {  // what the file does not hold reads as zeros
      uint64_t bytes = x->elem_bytes;
      for (int32_t i = 0; i < k; ++i) bytes *= static_cast<uint64_t>(d.fixed[i]);  // the block Declare laid out
      std::memset(x->block, 0, static_cast<size_t>(bytes));
    }
    int64_t prev[kMaxPIndices] = {-1, -1, -1, -1};
    for (uint64_t j = 0; j < n; ++j) {
      int64_t place[kMaxPIndices] = {0, 0, 0, 0};
      for (int32_t i = 0; i < k; ++i) TINYAI_RETURN_IF_ERROR(in->Get(&place[i]));
      bool inside = place[k - 1] >= 0 && place[k - 1] < runs;
      for (int32_t i = 0; i + 1 < k && inside; ++i) inside = place[i] >= 0 && place[i] < extent[i];
      if (!inside || (j > 0 && !After(place, prev, k))) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s': run %llu is %s", in->what, d.name,
                        static_cast<unsigned long long>(j), inside ? "out of order" : "outside its extents");
      }
      for (int32_t i = 0; i < k; ++i) prev[i] = at[i] = place[i];
      const int64_t r0 = place[k - 1] * run, rows = last - r0 < run ? last - r0 : run;
      held(r0, rows);
      TINYAI_RETURN_IF_ERROR(ReadRows(in, d, x, at, r0, rows, skip));
    }
  }
  for (int32_t i = 0; i < k; ++i) TINYAI_RETURN_IF_ERROR(CheckExtentHeld(in, d, i, extent[i], top[i]));
  if (x && !skip) {
    for (int32_t i = 0; i < k; ++i) x->extent[i] = extent[i];
  }
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::ReadMatrices(StoreReader* in, const PDecl& d, Entry* x, bool skip) {
  const int32_t k = d.table_indices();
  int64_t extent[kMaxPIndices] = {0, 0, 0, 0};
  TINYAI_RETURN_IF_ERROR(ReadExtents(in, d, extent));
  const uint64_t each = PTypeBytes(d.dtype);
  const int64_t base_r = d.shape[0], base_c = d.rank == 2 ? d.shape[1] : 1;
  const int64_t max_r = AutoMax(d, 0), max_c = AutoMax(d, 1);
  const bool apply = x && !skip;
  TinyAIStatus status = TINYAI_OK;
  // A matrix's shape: its declared one grown (a row needs a column and a
  // column a row: an empty matrix gains both at once), up to AutoMax.
  auto shape = [&](int64_t rows, int64_t cols) {
    const bool bad = rows < base_r || rows > max_r || cols < base_c || cols > max_c ||
                     (rows > base_r && cols == 0) || (cols > base_c && rows == 0);
    if (!bad) return TINYAI_OK;
    return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s': a matrix of %lld x %lld (declared %lld x %lld, at most %lld x "
                    "%lld; a row grows with a column)", in->what, d.name, static_cast<long long>(rows),
                    static_cast<long long>(cols), static_cast<long long>(base_r), static_cast<long long>(base_c),
                    static_cast<long long>(max_r), static_cast<long long>(max_c));
  };
  int64_t top[kMaxPIndices] = {-1, -1, -1, -1};
  if (in->version == kOldVersion) {
    // Every matrix inside the extents, every value of it (zeros take no
    // block here).
    uint64_t tuples = 1;
    bool none = false, some = false;  // growable extents are all 0 or none is
    for (int32_t i = 0; i < k; ++i) {
      if (!CheckedMul(tuples, static_cast<uint64_t>(extent[i]), &tuples)) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s': its extents' matrices overflow 64 bits", in->what, d.name);
      }
      if (d.fixed[i] == 0) (extent[i] == 0 ? none : some) = true;
    }
    if (none && some) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s': some of its growable indices have extent 0 and others not (a "
                      "write reaches them all)", in->what, d.name);
    }
    int64_t at[kMaxPIndices] = {0, 0, 0, 0};
    for (uint64_t t = 0; t < tuples; ++t, Next(at, extent, k)) {
      int64_t rows = 0, cols = 0;
      TINYAI_RETURN_IF_ERROR(in->Get(&rows));
      TINYAI_RETURN_IF_ERROR(in->Get(&cols));
      TINYAI_RETURN_IF_ERROR(shape(rows, cols));
      uint64_t bytes = 0;
      if (!CheckedMul(static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), &bytes) ||
          !CheckedMul(bytes, each, &bytes)) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s': a matrix of %lld x %lld overflows 64 bits", in->what, d.name,
                        static_cast<long long>(rows), static_cast<long long>(cols));
      }
      if (skip) {
        TINYAI_RETURN_IF_ERROR(in->Skip(bytes));
        continue;
      }
      if (!apply) {
        TINYAI_RETURN_IF_ERROR(in->Values(d.dtype, nullptr, bytes, d.name));
        continue;
      }
      Matrix* m = MatrixAt(x, at, true, &status);
      if (!m) return status;
      uint8_t value[8];
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          TINYAI_RETURN_IF_ERROR(in->Values(d.dtype, value, each, d.name));
          bool zero = true;
          for (size_t b = 0; b < each; ++b) zero &= value[b] == 0;
          if (zero) continue;  // never written reads as zeros: no block for it
          uint8_t* cell = Cell(x, m, r, c, true, &status);
          if (!cell) return status;
          std::memcpy(cell, value, each);
        }
      }
      m->rows = rows;
      m->cols = cols;
    }
  } else {
    // The matrices held, in index order: at most one per 8k + 24 bytes left.
    uint64_t n = 0;
    TINYAI_RETURN_IF_ERROR(in->Count(&n, 8 * static_cast<uint64_t>(k) + 24, d.name, "matrices"));
    int64_t prev[kMaxPIndices] = {-1, -1, -1, -1};
    for (uint64_t j = 0; j < n; ++j) {
      int64_t at[kMaxPIndices] = {0, 0, 0, 0};
      for (int32_t i = 0; i < k; ++i) TINYAI_RETURN_IF_ERROR(in->Get(&at[i]));
      bool inside = true;
      for (int32_t i = 0; i < k && inside; ++i) inside = at[i] >= 0 && at[i] < extent[i];
      if (!inside || (j > 0 && !After(at, prev, k))) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s': matrix %llu is %s", in->what, d.name,
                        static_cast<unsigned long long>(j), inside ? "out of order" : "outside its extents");
      }
      for (int32_t i = 0; i < k; ++i) {
        prev[i] = at[i];
        top[i] = at[i] > top[i] ? at[i] : top[i];
      }
      int64_t rows = 0, cols = 0;
      TINYAI_RETURN_IF_ERROR(in->Get(&rows));
      TINYAI_RETURN_IF_ERROR(in->Get(&cols));
      TINYAI_RETURN_IF_ERROR(shape(rows, cols));
      uint64_t blocks = 0;
      TINYAI_RETURN_IF_ERROR(in->Count(&blocks, 16, d.name, "blocks"));
      Matrix* m = nullptr;
      if (apply) {
        if (!(m = MatrixAt(x, at, true, &status))) return status;
        m->rows = rows;
        m->cols = cols;
      }
      const int64_t br_end = (rows + kAutoBlock - 1) / kAutoBlock, bc_end = (cols + kAutoBlock - 1) / kAutoBlock;
      int64_t last[2] = {-1, -1};
      for (uint64_t b = 0; b < blocks; ++b) {
        int64_t place[2] = {0, 0};
        TINYAI_RETURN_IF_ERROR(in->Get(&place[0]));
        TINYAI_RETURN_IF_ERROR(in->Get(&place[1]));
        const bool in_matrix = place[0] >= 0 && place[0] < br_end && place[1] >= 0 && place[1] < bc_end;
        if (!in_matrix || (b > 0 && !After(place, last, 2))) {
          return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s': matrix %llu's block %llu is %s", in->what, d.name,
                          static_cast<unsigned long long>(j), static_cast<unsigned long long>(b),
                          in_matrix ? "out of order" : "outside its matrix");
        }
        last[0] = place[0];
        last[1] = place[1];
        const int64_t r0 = place[0] * kAutoBlock, c0 = place[1] * kAutoBlock;
        const int64_t h = rows - r0 < kAutoBlock ? rows - r0 : kAutoBlock, w = cols - c0 < kAutoBlock ? cols - c0 : kAutoBlock;
        if (!apply) {
          const uint64_t bytes = static_cast<uint64_t>(h * w) * each;
          TINYAI_RETURN_IF_ERROR(skip ? in->Skip(bytes) : in->Values(d.dtype, nullptr, bytes, d.name));
          continue;
        }
        uint8_t* block = Cell(x, m, r0, c0, true, &status);  // the block's first cell
        if (!block) return status;
        for (int64_t r = 0; r < h; ++r) {
          TINYAI_RETURN_IF_ERROR(in->Values(d.dtype, block + static_cast<uint64_t>(r * kAutoBlock) * each,
                                            static_cast<uint64_t>(w) * each, d.name));
        }
      }
    }
    for (int32_t i = 0; i < k; ++i) TINYAI_RETURN_IF_ERROR(CheckExtentHeld(in, d, i, extent[i], top[i]));
  }
  if (apply) {
    for (int32_t i = 0; i < k; ++i) x->extent[i] = extent[i];
  }
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::ReadContents(StoreReader* in, LoadPass pass, PersistentStore* into) {
  int32_t built = 0;  // the next of into's entries
  for (int32_t e = 0; e < count(); ++e) {
    const PDecl& d = decl(e);
    const bool in_place = HeldInPlace(d);
    PersistentStore* owner = this;
    Entry* x = nullptr;  // where the values go (nullptr: checked only)
    bool skip = false;   // the values skipped unread (another pass's)
    if (pass == LoadPass::kBuild) {
      skip = in_place;
      if (!in_place) {
        owner = into;
        x = into->entries_[static_cast<size_t>(built++)];
      }
    } else if (pass == LoadPass::kInPlace) {
      skip = !in_place;
      if (in_place) x = entries_[static_cast<size_t>(e)];
    }
    if (d.index_count == 0) {
      const uint64_t bytes = ElemBytes(d);
      TINYAI_RETURN_IF_ERROR(skip ? in->Skip(bytes) : in->Values(d.dtype, x ? x->single : nullptr, bytes, d.name));
    } else if (d.auto_count == 0) {
      TINYAI_RETURN_IF_ERROR(owner->ReadTable(in, d, x, skip));
    } else {
      TINYAI_RETURN_IF_ERROR(owner->ReadMatrices(in, d, x, skip));
    }
  }
  return TINYAI_OK;
}

uint64_t PersistentStore::ResetFrees() const {
  uint64_t n = 0;
  for (int32_t e = 0; e < count(); ++e) {
    const Entry* x = entries_[static_cast<size_t>(e)];
    if (HeldInPlace(x->d)) continue;
    // All it holds but its record and its directory or matrices' array.
    n += EntryBytes(e) - (sizeof(Entry) + kEntryListBytes) - x->dir_entries * sizeof(uint8_t*) -
         x->mat_entries * sizeof(Matrix);
  }
  return n;
}

void PersistentStore::SwapGrowable(PersistentStore* into) {
  // The same declarations in the same order: each name table finds the
  // other's entries at the same positions. Named dimensions stay.
  int32_t k = 0;
  for (int32_t e = 0; e < count(); ++e) {
    if (HeldInPlace(decl(e))) continue;
    const uint64_t mine = EntryBytes(e), theirs = into->EntryBytes(k);
    Entry* x = entries_[static_cast<size_t>(e)];
    entries_[static_cast<size_t>(e)] = into->entries_[static_cast<size_t>(k)];
    into->entries_[static_cast<size_t>(k)] = x;
    used_ = used_ - mine + theirs;
    into->used_ = into->used_ - theirs + mine;
    ++k;
  }
}

TinyAIStatus PersistentStore::Deserialize(Source source, void* user, uint64_t offset, uint64_t size, const char* what) {
  uint64_t body = 0;
  uint32_t version = 0;
  TINYAI_RETURN_IF_ERROR(VerifySaved(source, user, offset, size, what, &version, &body));
  StoreReader in;
  in.source = source;
  in.user = user;
  in.at = offset + kHeader;
  in.end = offset + kHeader + body;
  in.version = version;
  in.what = what;
  TINYAI_RETURN_IF_ERROR(CheckSavedDecls(&in));
  // What the file says, read through without keeping anything.
  StoreReader check = in;
  TINYAI_RETURN_IF_ERROR(ReadContents(&check, LoadPass::kCheck, nullptr));
  if (check.at != check.end) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "%s: %llu bytes after the store's contents", what,
                    static_cast<unsigned long long>(check.end - check.at));
  }
  // The growable entries, built beside this store's: both count against
  // the limit while both are held.
  bool grows = false;
  for (int32_t e = 0; e < count(); ++e) grows |= !HeldInPlace(decl(e));
  if (grows) {
    auto refuse = [&]() {
      const uint64_t frees = ResetFrees();
      char fix[160];
      if (frees > 0) {
        tinyai::Format(fix, sizeof fix, "reset the store first (tinyaiPersistentReset(store, NULL) frees %llu of "
                      "them) or raise memoryLimit", static_cast<unsigned long long>(frees));
      } else {
        tinyai::Format(fix, sizeof fix, "raise memoryLimit");
      }
      return SetError(TINYAI_ERR_RESOURCE_EXHAUSTED, "%s: its contents need more than the %llu bytes that "
                      "memoryLimit %llu leaves beside the %llu this store holds (a load holds both until it is "
                      "done); %s", what, static_cast<unsigned long long>(used_ < limit_ ? limit_ - used_ : 0),
                      static_cast<unsigned long long>(limit_), static_cast<unsigned long long>(used_), fix);
    };
    if (limit_ != 0 && used_ >= limit_) return refuse();
    PersistentStore into;
    TINYAI_RETURN_IF_ERROR(into.Init(limit_ == 0 ? 0 : limit_ - used_, chunk_rows_));
    for (int32_t e = 0; e < count(); ++e) {
      if (HeldInPlace(decl(e))) continue;
      const TinyAIStatus s = into.Declare(decl(e));
      if (s != TINYAI_OK) return s == TINYAI_ERR_RESOURCE_EXHAUSTED ? refuse() : s;
    }
    StoreReader build = in;
    const TinyAIStatus s = ReadContents(&build, LoadPass::kBuild, &into);
    if (s != TINYAI_OK) return s == TINYAI_ERR_RESOURCE_EXHAUSTED ? refuse() : s;
    SwapGrowable(&into);
  }
  // Then the entries held in place, checked whole: only a read that fails
  // now (a failing disk, a file changed since) can stop it part way.
  StoreReader place = in;
  const TinyAIStatus s = ReadContents(&place, LoadPass::kInPlace, nullptr);
  return s == TINYAI_OK ? s : AddErrorContext(s, "%s: the store is partly loaded: ", what);
}

namespace {

// The fill's small writes (a field at a time) gather in a buffer on the
// stack: a write call per field took 0.5 s for a store of 5,000 scalars.
struct FileSink {
  port::File file;
  uint64_t at = 0;  // file offset of buffer[0]
  size_t used = 0;
  const char* name = "";
  uint8_t buffer[16 * 1024];

  TinyAIStatus Flush() {
    if (used == 0) return TINYAI_OK;
    TINYAI_RETURN_IF_ERROR(port::WriteAt(file, at, buffer, used, name));
    at += used;
    used = 0;
    return TINYAI_OK;
  }
};

TinyAIStatus FileWrite(void* user, const void* data, size_t size) {
  FileSink* f = static_cast<FileSink*>(user);
  if (f->used + size > sizeof f->buffer) {
    TINYAI_RETURN_IF_ERROR(f->Flush());
    if (size >= sizeof f->buffer) {
      TINYAI_RETURN_IF_ERROR(port::WriteAt(f->file, f->at, data, size, f->name));
      f->at += size;
      return TINYAI_OK;
    }
  }
  if (size > 0) std::memcpy(f->buffer + f->used, data, size);
  f->used += size;
  return TINYAI_OK;
}

TinyAIStatus SerializeStore(PersistentStore::Sink sink, void* sink_user, const void* store) {
  return static_cast<const PersistentStore*>(store)->Serialize(sink, sink_user);
}

}  // namespace

TinyAIStatus WriteFileAtomically(const char* path, FillFile fill, const void* what, const char* call) {
  if (path == nullptr || path[0] == '\0') {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: path is %s", call, path ? "empty" : "NULL");
  }
  port::OutputFile out;
  TinyAIStatus s = port::BeginOutput(path, &out);
  if (s != TINYAI_OK) return AddErrorContext(s, "%s: ", call);
  FileSink sink;
  sink.file = out.file;
  sink.name = path;
  s = fill(&FileWrite, &sink, what);
  if (s == TINYAI_OK) s = sink.Flush();
  if (s != TINYAI_OK) {
    port::AbortOutput(&out);
    return s;
  }
  s = port::CommitOutput(&out);
  return s == TINYAI_OK ? s : AddErrorContext(s, "%s: ", call);
}

TinyAIStatus ReadFileSource(void* user, uint64_t offset, void* dst, size_t size) {
  const FileSource* f = static_cast<const FileSource*>(user);
  return port::ReadAt(f->file, offset, dst, size, f->name);
}

TinyAIStatus PersistentStore::Save(const char* path) const {
  return WriteFileAtomically(path, &SerializeStore, this, "tinyaiSavePersistentStore");
}

TinyAIStatus PersistentStore::Load(const char* path) {
  if (path == nullptr || path[0] == '\0') {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiLoadPersistentStore: path is %s", path ? "empty" : "NULL");
  }
  FileSource source;
  source.name = path;
  TINYAI_RETURN_IF_ERROR(port::OpenFile(path, &source.file));
  const TinyAIStatus s = Deserialize(&ReadFileSource, &source, 0, source.file.size, path);
  port::CloseFile(&source.file);
  return s;
}

}  // namespace tinyai
