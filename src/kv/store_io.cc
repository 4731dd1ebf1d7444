// Saving and loading a persistent store.
//
// The file (all numbers little-endian):
//   "TPS1"  u32 version (1)  u64 body bytes
//   body:
//     u32 entries, then each entry's declaration:
//       u8 name bytes, name; i32 dtype, rank; i64 shape[4]; i32 indices,
//       each u8 name bytes, name; i64 fixed[4]; i32 auto dims; u8 has
//       init; f64 init
//     then each entry's contents:
//       scalar, tensor   its element
//       table            i64 extent per index; i64 run (rows the last index
//                        is cut into: the saving store's chunk); for every
//                        prefix tuple inside the extents, every run of the
//                        last index: u8 present, then its rows when present
//       auto-dim         i64 extent per table index; for every tuple inside
//                        them: i64 rows, cols, then rows x cols values
//   u32 CRC-32C of everything before it.
// A load checks the whole file's checksum before it reads a declaration,
// builds a store of the file's declarations and contents beside this one,
// compares the declarations, and only then swaps the contents in.
#include <cstring>

#include "common/array.h"
#include "common/checked_math.h"
#include "common/crc32c.h"
#include "common/status.h"
#include "kv/store.h"
#include "kv/store_internal.h"
#include "port/port.h"

namespace tinyai {

namespace {

constexpr char kMagic[4] = {'T', 'P', 'S', '1'};
constexpr uint32_t kVersion = 1;
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

}  // namespace

// Reads a body in order, past the checksum already checked; every read
// stays inside the body (TINYAI_ERR_BAD_FORMAT past it: the checksum held,
// so the writer wrote something else than a store).
struct StoreReader {
  PersistentStore::Source source = nullptr;
  void* user = nullptr;
  uint64_t at = 0, end = 0;
  const char* what = "";

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
  // Reads into dst, or (a dry run: dst null) only checks the bytes are there.
  TinyAIStatus ReadOrSkip(void* dst, uint64_t size) { return dst ? Read(dst, size) : Skip(size); }
  template <typename T>
  TinyAIStatus Get(T* value) {
    return Read(value, sizeof *value);
  }
  TinyAIStatus Name(char (&out)[kMaxPName + 1]) {
    uint8_t n = 0;
    TINYAI_RETURN_IF_ERROR(Get(&n));
    if (n > kMaxPName) return SetError(TINYAI_ERR_BAD_FORMAT, "%s: a name of %u bytes", what, static_cast<unsigned>(n));
    TINYAI_RETURN_IF_ERROR(Read(out, n));
    out[n] = '\0';
    return TINYAI_OK;
  }
};

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
    const PDecl& d = x->d;
    if (d.index_count == 0) {
      TINYAI_RETURN_IF_ERROR(sink(user, x->single, static_cast<size_t>(x->elem_bytes)));
      continue;
    }
    const int32_t table = d.table_indices();
    int64_t extent[kMaxPIndices] = {0, 0, 0, 0};
    for (int32_t i = 0; i < table; ++i) {
      extent[i] = d.fixed[i] > 0 ? d.fixed[i] : x->extent[i];
      TINYAI_RETURN_IF_ERROR(Put(sink, user, extent[i]));
    }
    int64_t at[kMaxPIndices] = {0, 0, 0, 0};
    uint64_t tuples = 1;
    if (d.auto_count == 0) {
      // Prefix tuples (all indices but the last), then runs of the last.
      const int64_t run = x->chunk, last = extent[table - 1];
      TINYAI_RETURN_IF_ERROR(Put(sink, user, run));
      for (int32_t i = 0; i + 1 < table; ++i) {
        if (!CheckedMul(tuples, static_cast<uint64_t>(extent[i]), &tuples)) {
          return SetError(TINYAI_ERR_OVERFLOW, "'%s': its rows to save overflow 64 bits", d.name);
        }
      }
      for (uint64_t t = 0; t < tuples && last > 0; ++t) {
        for (int64_t r0 = 0; r0 < last; r0 += run) {
          at[table - 1] = r0;
          const uint8_t* first = Row(x, at);
          TINYAI_RETURN_IF_ERROR(Put(sink, user, static_cast<uint8_t>(first ? 1 : 0)));
          if (!first) continue;
          const int64_t rows = last - r0 < run ? last - r0 : run;  // a chunk's rows are contiguous
          TINYAI_RETURN_IF_ERROR(sink(user, first, static_cast<size_t>(static_cast<uint64_t>(rows) * x->elem_bytes)));
        }
        for (int32_t i = table - 2; i >= 0; --i) {
          if (++at[i] < extent[i]) break;
          at[i] = 0;
        }
      }
      continue;
    }
    for (int32_t i = 0; i < table; ++i) {
      if (!CheckedMul(tuples, static_cast<uint64_t>(extent[i]), &tuples)) {
        return SetError(TINYAI_ERR_OVERFLOW, "'%s': its matrices to save overflow 64 bits", d.name);
      }
    }
    const size_t each = PTypeBytes(d.dtype);
    const uint8_t zeros[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (uint64_t t = 0; t < tuples; ++t) {
      const Matrix* m = MatrixAt(x, at);
      const int64_t rows = m ? m->rows : d.shape[0], cols = m ? m->cols : (d.rank == 2 ? d.shape[1] : 1);
      TINYAI_RETURN_IF_ERROR(Put(sink, user, rows));
      TINYAI_RETURN_IF_ERROR(Put(sink, user, cols));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          TinyAIStatus unused = TINYAI_OK;
          const uint8_t* cell = m ? const_cast<PersistentStore*>(this)->Cell(x, const_cast<Matrix*>(m), r, c, false, &unused)
                                  : nullptr;
          TINYAI_RETURN_IF_ERROR(sink(user, cell ? cell : zeros, each));
        }
      }
      for (int32_t i = table - 1; i >= 0; --i) {
        if (++at[i] < extent[i]) break;
        at[i] = 0;
      }
    }
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

TinyAIStatus PersistentStore::ReadDecls(StoreReader* in, Vector<PDecl>* decls) {
  uint32_t n = 0;
  TINYAI_RETURN_IF_ERROR(in->Get(&n));
  // As many as the body holds (a declaration takes kMinDecl bytes or
  // more): a store of any size loads what it saved.
  constexpr uint64_t kMinDecl = 1 + 4 + 4 + 8 * kMaxPRank + 4 + 8 * kMaxPIndices + 4 + 1 + 8;
  if (n > (in->end - in->at) / kMinDecl) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "%s: %u entries in %llu bytes of declarations", in->what,
                    static_cast<unsigned>(n), static_cast<unsigned long long>(in->end - in->at));
  }
  for (uint32_t e = 0; e < n; ++e) {
    PDecl d;
    uint8_t init = 0;
    TINYAI_RETURN_IF_ERROR(in->Name(d.name));
    TINYAI_RETURN_IF_ERROR(in->Get(&d.dtype));
    TINYAI_RETURN_IF_ERROR(in->Get(&d.rank));
    for (int i = 0; i < kMaxPRank; ++i) TINYAI_RETURN_IF_ERROR(in->Get(&d.shape[i]));
    TINYAI_RETURN_IF_ERROR(in->Get(&d.index_count));
    if (d.index_count < 0 || d.index_count > kMaxPIndices) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "%s: entry %u has %d indices", in->what, static_cast<unsigned>(e),
                      static_cast<int>(d.index_count));
    }
    for (int32_t i = 0; i < d.index_count; ++i) TINYAI_RETURN_IF_ERROR(in->Name(d.index_names[i]));
    for (int i = 0; i < kMaxPIndices; ++i) TINYAI_RETURN_IF_ERROR(in->Get(&d.fixed[i]));
    TINYAI_RETURN_IF_ERROR(in->Get(&d.auto_count));
    TINYAI_RETURN_IF_ERROR(in->Get(&init));
    TINYAI_RETURN_IF_ERROR(in->Get(&d.init));
    d.has_init = init != 0;
    TINYAI_RETURN_IF_ERROR(decls->Push(d, "persistent store declarations"));
  }
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::ReadContents(StoreReader* in, bool apply) {
  for (Entry* x : entries_) {
    const PDecl& d = x->d;
    if (d.index_count == 0) {
      TINYAI_RETURN_IF_ERROR(in->ReadOrSkip(apply ? x->single : nullptr, x->elem_bytes));
      continue;
    }
    const int32_t table = d.table_indices();
    int64_t extent[kMaxPIndices] = {0, 0, 0, 0};
    for (int32_t i = 0; i < table; ++i) {
      TINYAI_RETURN_IF_ERROR(in->Get(&extent[i]));
      const bool bad = d.fixed[i] > 0 ? extent[i] != d.fixed[i] : (extent[i] < 0 || extent[i] > kMaxPIndex);
      if (bad) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s' index %s has extent %lld", in->what, d.name, d.index_names[i],
                        static_cast<long long>(extent[i]));
      }
    }
    int64_t at[kMaxPIndices] = {0, 0, 0, 0};
    uint64_t tuples = 1;
    TinyAIStatus status = TINYAI_OK;
    if (d.auto_count == 0) {
      int64_t run = 0;
      TINYAI_RETURN_IF_ERROR(in->Get(&run));
      const int64_t last = extent[table - 1];
      if (run < 1 || run > kMaxPIndex || (last > 0 && run > last && d.fixed[table - 1] > 0)) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s' is saved in runs of %lld rows", in->what, d.name,
                        static_cast<long long>(run));
      }
      for (int32_t i = 0; i + 1 < table; ++i) {
        if (!CheckedMul(tuples, static_cast<uint64_t>(extent[i]), &tuples)) {
          return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s': its extents' rows overflow 64 bits", in->what, d.name);
        }
      }
      for (uint64_t t = 0; t < tuples && last > 0; ++t) {
        for (int64_t r0 = 0; r0 < last; r0 += run) {
          uint8_t present = 0;
          TINYAI_RETURN_IF_ERROR(in->Get(&present));
          if (present > 1) return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s': a run marked %u", in->what, d.name, present);
          const int64_t rows = last - r0 < run ? last - r0 : run;
          if (!present) {
            // Never written when saved: zeros here too (a store loaded in
            // place may hold rows there).
            for (int64_t r = r0; r < r0 + rows && apply; ++r) {
              at[table - 1] = r;
              uint8_t* row = Row(x, at, false, &status);
              if (row) std::memset(row, 0, static_cast<size_t>(x->elem_bytes));
            }
            continue;
          }
          if (!apply) {
            uint64_t bytes = 0;
            if (!CheckedMul(static_cast<uint64_t>(rows), x->elem_bytes, &bytes)) {
              return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s': a run of %lld rows overflows 64 bits", in->what,
                              d.name, static_cast<long long>(rows));
            }
            TINYAI_RETURN_IF_ERROR(in->Skip(bytes));
            continue;
          }
          for (int64_t r = r0; r < r0 + rows; ++r) {
            at[table - 1] = r;
            uint8_t* row = Row(x, at, true, &status);
            if (!row) return status;
            TINYAI_RETURN_IF_ERROR(in->Read(row, x->elem_bytes));
          }
        }
        for (int32_t i = table - 2; i >= 0; --i) {
          if (++at[i] < extent[i]) break;
          at[i] = 0;
        }
      }
      if (apply) {
        for (int32_t i = 0; i < table; ++i) x->extent[i] = extent[i];
      }
      continue;
    }
    for (int32_t i = 0; i < table; ++i) {
      if (!CheckedMul(tuples, static_cast<uint64_t>(extent[i]), &tuples)) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s': its extents' matrices overflow 64 bits", in->what, d.name);
      }
    }
    const size_t each = PTypeBytes(d.dtype);
    for (uint64_t t = 0; t < tuples; ++t) {
      int64_t rows = 0, cols = 0;
      TINYAI_RETURN_IF_ERROR(in->Get(&rows));
      TINYAI_RETURN_IF_ERROR(in->Get(&cols));
      const int64_t base_r = d.shape[0], base_c = d.rank == 2 ? d.shape[1] : 1;
      const int64_t max_r = d.fixed[table] > 0 ? base_r + d.fixed[table] : (int64_t{1} << 32);
      const int64_t max_c = d.rank == 2 ? (d.fixed[table + 1] > 0 ? base_c + d.fixed[table + 1] : (int64_t{1} << 32)) : 1;
      if (rows < base_r || rows > max_r || cols < base_c || cols > max_c) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s': a matrix of %lld x %lld", in->what, d.name,
                        static_cast<long long>(rows), static_cast<long long>(cols));
      }
      if (!apply) {
        uint64_t bytes = 0;
        if (!CheckedMul(static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), &bytes) ||
            !CheckedMul(bytes, each, &bytes)) {
          return SetError(TINYAI_ERR_BAD_FORMAT, "%s: '%s': a matrix of %lld x %lld overflows 64 bits", in->what,
                          d.name, static_cast<long long>(rows), static_cast<long long>(cols));
        }
        TINYAI_RETURN_IF_ERROR(in->Skip(bytes));
        for (int32_t i = table - 1; i >= 0; --i) {
          if (++at[i] < extent[i]) break;
          at[i] = 0;
        }
        continue;
      }
      Matrix* m = MatrixAt(x, at, true, &status);
      if (!m) return status;
      uint8_t value[8];
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          TINYAI_RETURN_IF_ERROR(in->Read(value, each));
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
      for (int32_t i = table - 1; i >= 0; --i) {
        if (++at[i] < extent[i]) break;
        at[i] = 0;
      }
    }
    if (apply) {
      for (int32_t i = 0; i < table; ++i) x->extent[i] = extent[i];
    }
  }
  return TINYAI_OK;
}

namespace {

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
  if (a.has_init != b.has_init || (a.has_init && a.init != b.init)) return "@init";
  return nullptr;
}

}  // namespace

// The header and the checksum of a saved store at offset: its body's bytes.
static TinyAIStatus VerifySaved(PersistentStore::Source source, void* user, uint64_t offset, uint64_t size,
                                const char* what, uint64_t* body_bytes) {
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
  if (version != kVersion) {
    return SetError(TINYAI_ERR_UNSUPPORTED_VERSION, "%s: store version %u; this build reads version %u", what,
                    static_cast<unsigned>(version), static_cast<unsigned>(kVersion));
  }
  if (body > size - kHeader - 4) {
    return SetError(TINYAI_ERR_TRUNCATED, "%s: the store says %llu bytes of body; %llu are there", what,
                    static_cast<unsigned long long>(body), static_cast<unsigned long long>(size - kHeader - 4));
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
  *body_bytes = body;
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::CheckSavedDecls(StoreReader* in) const {
  Vector<PDecl> decls;
  TINYAI_RETURN_IF_ERROR(ReadDecls(in, &decls));
  if (static_cast<int32_t>(decls.size()) != count()) {
    return SetError(TINYAI_ERR_MISMATCH, "%s holds %d entries; this store declares %d", in->what,
                    static_cast<int>(decls.size()), static_cast<int>(count()));
  }
  for (int32_t e = 0; e < count(); ++e) {
    const char* diff = Differs(decls[static_cast<size_t>(e)], decl(e));
    if (diff) {
      return SetError(TINYAI_ERR_MISMATCH, "%s: entry %d ('%s' in the file, '%s' here) differs in its %s", in->what,
                      static_cast<int>(e), decls[static_cast<size_t>(e)].name, decl(e).name, diff);
    }
  }
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::Deserialize(Source source, void* user, uint64_t offset, uint64_t size, const char* what) {
  uint64_t body = 0;
  TINYAI_RETURN_IF_ERROR(VerifySaved(source, user, offset, size, what, &body));
  StoreReader in;
  in.source = source;
  in.user = user;
  in.at = offset + kHeader;
  in.end = offset + kHeader + body;
  in.what = what;
  TINYAI_RETURN_IF_ERROR(CheckSavedDecls(&in));
  // The structure, read through without keeping anything.
  StoreReader dry = in;
  TINYAI_RETURN_IF_ERROR(const_cast<PersistentStore*>(this)->ReadContents(&dry, false));
  if (dry.at != dry.end) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "%s: %llu bytes after the store's contents", what,
                    static_cast<unsigned long long>(dry.end - dry.at));
  }
  bool fixed = true;  // nothing to allocate: read straight into place
  for (const Entry* x : entries_) fixed &= x->d.index_count == 0 || x->block != nullptr;
  if (fixed) {
    // Checked whole: only a read that fails now (a failing disk, a file
    // changed since) can stop it part way.
    const TinyAIStatus s = ReadContents(&in, true);
    return s == TINYAI_OK ? s : AddErrorContext(s, "%s: the store is partly loaded: ", what);
  }
  // Otherwise the contents are built beside this store's and swapped in.
  PersistentStore loaded;
  TINYAI_RETURN_IF_ERROR(loaded.Init(limit_, chunk_rows_));
  for (const Entry* x : entries_) {
    const TinyAIStatus s = loaded.Declare(x->d);
    if (s != TINYAI_OK) return s;
  }
  TINYAI_RETURN_IF_ERROR(loaded.ReadContents(&in, true));
  SwapContents(&loaded);
  return TINYAI_OK;
}

void PersistentStore::SwapContents(PersistentStore* other) {
  // The same declarations in the same order: each name table finds the
  // other's entries at the same positions. Named dimensions stay.
  Vector<Entry*> mine = static_cast<Vector<Entry*>&&>(entries_);
  entries_ = static_cast<Vector<Entry*>&&>(other->entries_);
  other->entries_ = static_cast<Vector<Entry*>&&>(mine);
  const uint64_t held = used_ - dims_bytes_;
  used_ = other->used_ - other->dims_bytes_ + dims_bytes_;
  other->used_ = held + other->dims_bytes_;
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
