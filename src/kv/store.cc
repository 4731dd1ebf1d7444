#include "kv/store.h"

#include "common/format.h"
#include "kv/store_internal.h"

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/checked_math.h"
#include "common/crc32c.h"
#include "common/half.h"
#include "common/memory.h"
#include "common/status.h"
#include "port/port.h"

#define TINYAI_STORE_STR2(x) #x
#define TINYAI_STORE_STR(x) TINYAI_STORE_STR2(x)

namespace tinyai {

size_t PTypeBytes(int32_t t) {
  switch (t) {
    case TINYAI_PTYPE_F64: case TINYAI_PTYPE_I64: case TINYAI_PTYPE_U64: return 8;
    case TINYAI_PTYPE_F32: case TINYAI_PTYPE_I32: case TINYAI_PTYPE_U32: return 4;
    case TINYAI_PTYPE_F16: case TINYAI_PTYPE_I16: case TINYAI_PTYPE_U16: return 2;
    case TINYAI_PTYPE_I8: case TINYAI_PTYPE_U8: case TINYAI_PTYPE_BOOL: return 1;
    default: return 0;
  }
}

const char* PTypeName(int32_t t) {
  static const char* const kNames[] = {"f32", "f16", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool"};
  return t >= 0 && t < 12 ? kNames[t] : "?";
}

bool PTypeIsFloat(int32_t t) { return t == TINYAI_PTYPE_F32 || t == TINYAI_PTYPE_F16 || t == TINYAI_PTYPE_F64; }

bool PTypeIsUnsigned(int32_t t) {
  return t == TINYAI_PTYPE_U8 || t == TINYAI_PTYPE_U16 || t == TINYAI_PTYPE_U32 || t == TINYAI_PTYPE_U64 ||
         t == TINYAI_PTYPE_BOOL;
}

PExcerpt Excerpt(const char* s, size_t n) {
  PExcerpt e;
  if (s == nullptr) {
    std::memcpy(e.text, "(null)", 7);
    return e;
  }
  size_t len = 0;
  while (len < n && len <= 64 && s[len] != '\0') ++len;
  if (len > 64) {
    std::memcpy(e.text, s, 64);
    std::memcpy(e.text + 64, "...", 4);
  } else {
    std::memcpy(e.text, s, len);
    e.text[len] = '\0';
  }
  return e;
}

const char* PNameProblem(const char* s) {
  if (s == nullptr) return "is NULL";
  if (s[0] == '\0') return "is empty";
  size_t n = 0;
  while (n <= kMaxPName && s[n] != '\0') ++n;
  if (n > kMaxPName) return "is longer than " TINYAI_STORE_STR(TINYAI_PERSISTENT_MAX_NAME) " bytes (TINYAI_PERSISTENT_MAX_NAME)";
  if (s[0] >= '0' && s[0] <= '9') return "starts with a digit";
  for (size_t i = 0; i < n; ++i) {
    const char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) {
      return "holds a character other than letters, digits and '_'";
    }
  }
  return nullptr;
}

// ---- the name table -----------------------------------------------------------------------------

namespace {

uint64_t HashName(const char* s) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  for (; *s; ++s) h = (h ^ static_cast<uint8_t>(*s)) * 1099511628211ull;
  return h;
}

}  // namespace

size_t PNameIndex::SlotsFor(int32_t count) {
  size_t n = 4;
  while (n < 2 * static_cast<size_t>(count)) n *= 2;
  return n;
}

void PNameIndex::Place(Array<int32_t>* slots, int32_t position, NameOf name_of, const void* owner) const {
  const size_t mask = slots->size() - 1;
  size_t at = static_cast<size_t>(HashName(name_of(owner, position))) & mask;
  while ((*slots)[at] >= 0) at = (at + 1) & mask;
  (*slots)[at] = position;
}

int32_t PNameIndex::Find(const char* name, NameOf name_of, const void* owner) const {
  if (slots_.size() == 0 || name == nullptr) return -1;
  const size_t mask = slots_.size() - 1;
  for (size_t at = static_cast<size_t>(HashName(name)) & mask;; at = (at + 1) & mask) {
    const int32_t p = slots_[at];
    if (p < 0) return -1;
    if (std::strcmp(name_of(owner, p), name) == 0) return p;
  }
}

TinyAIStatus PNameIndex::Add(int32_t count, NameOf name_of, const void* owner) {
  const size_t want = SlotsFor(count);
  if (slots_.size() >= want) {
    Place(&slots_, count - 1, name_of, owner);
    return TINYAI_OK;
  }
  Array<int32_t> grown;
  MemScope scope(kMemKv);
  TINYAI_RETURN_IF_ERROR(grown.Allocate(want, "persistent store name table"));
  for (int32_t& s : grown) s = -1;
  for (int32_t p = 0; p < count; ++p) Place(&grown, p, name_of, owner);
  slots_ = static_cast<Array<int32_t>&&>(grown);
  return TINYAI_OK;
}

void PNameIndex::Rebuild(int32_t count, NameOf name_of, const void* owner) {
  MemScope scope(kMemKv);
  Array<int32_t> fresh;
  if (count == 0 || fresh.Allocate(SlotsFor(count), "persistent store name table") != TINYAI_OK) {
    // No names, or no memory for a smaller table: the one there is holds them.
    if (count == 0) {
      slots_ = Array<int32_t>();
      return;
    }
    for (int32_t& s : slots_) s = -1;
    for (int32_t p = 0; p < count; ++p) Place(&slots_, p, name_of, owner);
    return;
  }
  for (int32_t& s : fresh) s = -1;
  for (int32_t p = 0; p < count; ++p) Place(&fresh, p, name_of, owner);
  slots_ = static_cast<Array<int32_t>&&>(fresh);
}

namespace {

// The smallest power of two at least n (1 for 0).
size_t PowerOfTwo(size_t n) {
  size_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// ---- values -------------------------------------------------------------------------------------

// The range of an integer type.
void SignedRange(int32_t t, int64_t* lo, int64_t* hi) {
  switch (t) {
    case TINYAI_PTYPE_I8: *lo = INT8_MIN; *hi = INT8_MAX; return;
    case TINYAI_PTYPE_I16: *lo = INT16_MIN; *hi = INT16_MAX; return;
    case TINYAI_PTYPE_I32: *lo = INT32_MIN; *hi = INT32_MAX; return;
    default: *lo = INT64_MIN; *hi = INT64_MAX; return;
  }
}

uint64_t UnsignedMax(int32_t t) {
  switch (t) {
    case TINYAI_PTYPE_U8: return UINT8_MAX;
    case TINYAI_PTYPE_U16: return UINT16_MAX;
    case TINYAI_PTYPE_U32: return UINT32_MAX;
    case TINYAI_PTYPE_BOOL: return 1;
    default: return UINT64_MAX;
  }
}

// An integer type's value, exactly: signed types as int64, unsigned ones
// (and bool) as uint64.
int64_t LoadSigned(int32_t t, const uint8_t* p) {
  switch (t) {
    case TINYAI_PTYPE_I8: { int8_t x; std::memcpy(&x, p, 1); return x; }
    case TINYAI_PTYPE_I16: { int16_t x; std::memcpy(&x, p, 2); return x; }
    case TINYAI_PTYPE_I32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    default: { int64_t x; std::memcpy(&x, p, 8); return x; }
  }
}

uint64_t LoadUnsigned(int32_t t, const uint8_t* p) {
  switch (t) {
    case TINYAI_PTYPE_U8: case TINYAI_PTYPE_BOOL: { uint8_t x; std::memcpy(&x, p, 1); return x; }
    case TINYAI_PTYPE_U16: { uint16_t x; std::memcpy(&x, p, 2); return x; }
    case TINYAI_PTYPE_U32: { uint32_t x; std::memcpy(&x, p, 4); return x; }
    default: { uint64_t x; std::memcpy(&x, p, 8); return x; }
  }
}

// Stores an integer already checked to fit type t (its low bytes).
void StoreSigned(int32_t t, int64_t v, uint8_t* p) {
  switch (t) {
    case TINYAI_PTYPE_I8: { const int8_t x = static_cast<int8_t>(v); std::memcpy(p, &x, 1); return; }
    case TINYAI_PTYPE_I16: { const int16_t x = static_cast<int16_t>(v); std::memcpy(p, &x, 2); return; }
    case TINYAI_PTYPE_I32: { const int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); return; }
    default: std::memcpy(p, &v, 8); return;
  }
}

void StoreUnsigned(int32_t t, uint64_t v, uint8_t* p) {
  switch (t) {
    case TINYAI_PTYPE_U8: case TINYAI_PTYPE_BOOL: { const uint8_t x = static_cast<uint8_t>(v); std::memcpy(p, &x, 1); return; }
    case TINYAI_PTYPE_U16: { const uint16_t x = static_cast<uint16_t>(v); std::memcpy(p, &x, 2); return; }
    case TINYAI_PTYPE_U32: { const uint32_t x = static_cast<uint32_t>(v); std::memcpy(p, &x, 4); return; }
    default: std::memcpy(p, &v, 8); return;
  }
}

double LoadFloat(int32_t t, const uint8_t* p) {
  if (t == TINYAI_PTYPE_F32) { float f; std::memcpy(&f, p, 4); return f; }
  if (t == TINYAI_PTYPE_F64) { double d; std::memcpy(&d, p, 8); return d; }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return HalfToFloat(h);
}

// A double as float type t, rounded to nearest (ties to even) once, to
// infinity past the type's range; returns what was stored, as a double.
double RoundTo(int32_t t, double v, uint8_t* p) {
  if (t == TINYAI_PTYPE_F64) {
    std::memcpy(p, &v, 8);
    return v;
  }
  // From FLT_MAX's rounding edge up the float is infinity (C++ leaves the
  // cast of a double past float's range undefined: not done).
  const bool inf = !std::isnan(v) && std::fabs(v) >= 3.4028235677973366e38;
  float f = inf ? (v < 0 ? -HUGE_VALF : HUGE_VALF) : static_cast<float>(v);
  if (t == TINYAI_PTYPE_F32) {
    std::memcpy(p, &f, 4);
    return f;
  }
  // f16 through a float rounded to odd (toward zero, then the last bit set
  // when inexact): with 13 bits more than a half, it then rounds to the
  // half the double itself rounds to (no double rounding).
  if (!inf && !std::isnan(v) && static_cast<double>(f) != v) {
    if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits |= 1u;
    std::memcpy(&f, &bits, 4);
  }
  const uint16_t h = FloatToHalf(f);
  std::memcpy(p, &h, 2);
  return HalfToFloat(h);
}

// Whether a double is exactly a value of integer type t (a whole number in
// its range; 64-bit bounds compared exactly, since 2^63 - 1 and 2^64 - 1
// are no doubles).
bool IntegerFits(int32_t t, double v) {
  if (!std::isfinite(v) || v != std::floor(v)) return false;
  if (PTypeIsUnsigned(t)) return v >= 0 && (t == TINYAI_PTYPE_U64 ? v < 18446744073709551616.0 : v <= static_cast<double>(UnsignedMax(t)));
  int64_t lo, hi;
  SignedRange(t, &lo, &hi);
  if (t == TINYAI_PTYPE_I64) return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
  return v >= static_cast<double>(lo) && v <= static_cast<double>(hi);
}

// Stores a declaration's @init (checked by Declare) as type t at p.
void StoreInit(int32_t t, double v, uint8_t* p) {
  if (PTypeIsFloat(t)) {
    RoundTo(t, v, p);
  } else if (PTypeIsUnsigned(t)) {
    StoreUnsigned(t, static_cast<uint64_t>(v), p);
  } else {
    StoreSigned(t, static_cast<int64_t>(v), p);
  }
}

uint8_t* AllocZeroed(uint64_t bytes) {
  if (bytes > SIZE_MAX) return nullptr;
  MemScope scope(kMemKv);
  void* p = LedgerAlloc(64, static_cast<size_t>(bytes == 0 ? 1 : bytes));
  if (p) std::memset(p, 0, static_cast<size_t>(bytes == 0 ? 1 : bytes));
  return static_cast<uint8_t*>(p);
}

}  // namespace

PersistentStore::~PersistentStore() { Truncate(0); }

TinyAIStatus PersistentStore::Init(uint64_t memory_limit, int32_t chunk_rows, bool zero_fixed) {
  if (chunk_rows < 1 || chunk_rows > kMaxPChunkRows) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: chunkRows %d is outside 1..%d",
                    static_cast<int>(chunk_rows), static_cast<int>(kMaxPChunkRows));
  }
  Truncate(0);
  dims_ = Vector<NamedDim>();
  dim_index_.Rebuild(0, &DimName, this);
  limit_ = memory_limit;
  chunk_rows_ = chunk_rows;
  zero_fixed_ = zero_fixed;
  used_ = 0;
  dims_bytes_ = 0;
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::Charge(uint64_t bytes, const char* what) {
  if (limit_ != 0 && (bytes > limit_ || used_ > limit_ - bytes)) {
    return SetError(TINYAI_ERR_RESOURCE_EXHAUSTED, "persistent store: %s needs %llu bytes more; %llu of its memoryLimit "
                    "%llu are in use", what, static_cast<unsigned long long>(bytes),
                    static_cast<unsigned long long>(used_), static_cast<unsigned long long>(limit_));
  }
  used_ += bytes;
  return TINYAI_OK;
}

void PersistentStore::Refund(uint64_t bytes) { used_ = bytes > used_ ? 0 : used_ - bytes; }

const char* PersistentStore::EntryName(const void* store, int32_t position) {
  return static_cast<const PersistentStore*>(store)->entries_[static_cast<size_t>(position)]->d.name;
}

const char* PersistentStore::DimName(const void* store, int32_t position) {
  return static_cast<const PersistentStore*>(store)->dims_[static_cast<size_t>(position)].name;
}

uint64_t PersistentStore::DimBytes() { return 2 * sizeof(NamedDim) + kNameIndexBytes; }

TinyAIStatus PersistentStore::SetDim(const char* name, int64_t value) {
  if (const char* problem = PNameProblem(name)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: the dimension name '%s' %s", Excerpt(name).text,
                    problem);
  }
  if (value < 0 || value > kMaxPIndex) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: dimension %s = %lld is outside 0..2^40", name,
                    static_cast<long long>(value));
  }
  const int32_t at = dim_index_.Find(name, &DimName, this);
  if (at >= 0) {
    dims_[static_cast<size_t>(at)].value = value;
    return TINYAI_OK;
  }
  // A new name: its record and its share of the list and the table, the
  // list kept below twice its size (DimBytes bounds what it holds).
  const uint64_t bytes = DimBytes();
  char what[kMaxPName + 32];
  tinyai::Format(what, sizeof what, "dimension %s", name);
  TINYAI_RETURN_IF_ERROR(Charge(bytes, what));
  NamedDim d;
  std::memset(&d, 0, sizeof d);
  std::memcpy(d.name, name, std::strlen(name));
  d.value = value;
  TinyAIStatus s = dims_.Reserve(PowerOfTwo(dims_.size() + 1), "persistent store dimensions");
  if (s == TINYAI_OK) s = dims_.Push(d, "persistent store dimensions");
  if (s == TINYAI_OK) {
    s = dim_index_.Add(static_cast<int32_t>(dims_.size()), &DimName, this);
    if (s != TINYAI_OK) dims_.PopBack();
  }
  if (s != TINYAI_OK) {
    Refund(bytes);
    return s;
  }
  dims_bytes_ += bytes;
  return TINYAI_OK;
}

bool PersistentStore::Dim(const char* name, int64_t* value) const {
  const int32_t at = dim_index_.Find(name, &DimName, this);
  if (at < 0) return false;
  *value = dims_[static_cast<size_t>(at)].value;
  return true;
}

int32_t PersistentStore::Find(const char* name) const { return entry_index_.Find(name, &EntryName, this); }

TinyAIStatus PersistentStore::FindEntry(const char* name, const char* call, int32_t* e) const {
  if (const char* problem = PNameProblem(name)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: the name '%s' %s", call, Excerpt(name).text, problem);
  }
  *e = Find(name);
  if (*e < 0) return SetError(TINYAI_ERR_NOT_FOUND, "%s: no entry '%s'", call, name);
  return TINYAI_OK;
}

const PDecl& PersistentStore::decl(int32_t e) const { return entries_[static_cast<size_t>(e)]->d; }

void PersistentStore::Truncate(int32_t count) {
  if (count < 0) count = 0;
  if (static_cast<int32_t>(entries_.size()) <= count) return;
  while (static_cast<int32_t>(entries_.size()) > count) {
    Entry* x = entries_.back();
    // Frees chunks and matrices' blocks. A fixed block or a single value is
    // freed below as it is: zeroing it first wrote every page of a KV cache
    // the model never reached (a 75 MB cache faulted in at close).
    if (!x->single && !x->block) ResetEntry(static_cast<int32_t>(entries_.size()) - 1);
    if (x->single) { LedgerFree(x->single); Refund(x->elem_bytes); }
    if (x->block) {
      LedgerFree(x->block);
      uint64_t n = x->elem_bytes;
      for (int32_t i = 0; i < x->d.index_count; ++i) n *= static_cast<uint64_t>(x->d.fixed[i]);  // checked at Declare
      Refund(n);
    }
    if (x->dir) { LedgerFree(x->dir); Refund(x->dir_entries * sizeof(uint8_t*)); }
    if (x->mats) { LedgerFree(x->mats); Refund(x->mat_entries * sizeof(Matrix)); }
    Refund(sizeof(Entry) + kEntryListBytes);
    Delete(x);
    entries_.PopBack();
  }
  // The list and the name table shrink with it (kEntryListBytes bounds them).
  if (count == 0) {
    entries_ = Vector<Entry*>();
  } else if (entries_.capacity() >= 2 * static_cast<size_t>(count)) {
    Vector<Entry*> kept;
    if (kept.Reserve(PowerOfTwo(static_cast<size_t>(count)), "persistent store entries") == TINYAI_OK) {
      for (Entry* x : entries_) (void)kept.Push(x, "persistent store entries");  // reserved: cannot fail
      entries_ = static_cast<Vector<Entry*>&&>(kept);
    }
  }
  entry_index_.Rebuild(count, &EntryName, this);
}

TinyAIStatus PersistentStore::AddEntry(Entry* x) {
  TINYAI_RETURN_IF_ERROR(entries_.Reserve(PowerOfTwo(entries_.size() + 1), "persistent store entries"));
  TINYAI_RETURN_IF_ERROR(entries_.Push(x, "persistent store entries"));
  const TinyAIStatus s = entry_index_.Add(count(), &EntryName, this);
  if (s != TINYAI_OK) entries_.PopBack();
  return s;
}

uint64_t PersistentStore::DeclaredBytes(const PDecl& d) {
  const uint64_t record = sizeof(Entry) + kEntryListBytes;
  uint64_t elem = PTypeBytes(d.dtype);
  for (int32_t i = 0; i < d.rank; ++i) elem *= static_cast<uint64_t>(d.shape[i] < 1 ? 1 : d.shape[i]);
  if (d.index_count == 0) return record + elem;
  uint64_t rows = 1;
  for (int32_t i = 0; i < d.index_count; ++i) {
    if (d.fixed[i] <= 0 || d.auto_count > 0) return record;
    rows *= static_cast<uint64_t>(d.fixed[i]);
  }
  const uint64_t prefixes = rows / static_cast<uint64_t>(d.fixed[d.index_count - 1]);
  return record + rows * elem + prefixes * sizeof(uint8_t*);
}

TinyAIStatus PersistentStore::CheckDecl(const PDecl& d, uint64_t* elem_bytes) {
  const char* n = d.name;
  if (const char* problem = PNameProblem(n)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "the name '%s' %s (a name is letters, digits and _, not a digit "
                    "first)", Excerpt(n, sizeof d.name).text, problem);
  }
  const size_t each = PTypeBytes(d.dtype);
  if (each == 0) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s': type %d is not a persistent type", n, static_cast<int>(d.dtype));
  if (d.rank < 0 || d.rank > kMaxPRank) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s': %d dimensions (0..%d)", n, static_cast<int>(d.rank), kMaxPRank);
  }
  if (d.index_count < 0 || d.index_count > kMaxPIndices || d.auto_count < 0 || d.auto_count > d.index_count) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s': %d indices, %d of them auto dims (at most %d indices)", n,
                    static_cast<int>(d.index_count), static_cast<int>(d.auto_count), kMaxPIndices);
  }
  if (d.auto_count > 0 && (d.auto_count != d.rank || d.rank > 2)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s': @auto_dim grows a vector or a matrix, one index a dimension: "
                    "%d auto indices for %d dimensions", n, static_cast<int>(d.auto_count), static_cast<int>(d.rank));
  }
  uint64_t elem = each;
  for (int32_t i = 0; i < d.rank; ++i) {
    const bool grows = d.auto_count > 0;
    if (d.shape[i] < (grows ? 0 : 1) || d.shape[i] > kMaxPIndex) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s': dimension %d is %lld (%d..2^40)", n, static_cast<int>(i),
                      static_cast<long long>(d.shape[i]), grows ? 0 : 1);
    }
    if (!CheckedMul(elem, static_cast<uint64_t>(d.shape[i] < 1 ? 1 : d.shape[i]), &elem)) {
      return SetError(TINYAI_ERR_OVERFLOW, "'%s': an element of its shape overflows 64 bits", n);
    }
  }
  for (int32_t i = 0; i < d.index_count; ++i) {
    if (const char* problem = PNameProblem(d.index_names[i])) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s': index %d's name '%s' %s", n, static_cast<int>(i),
                      Excerpt(d.index_names[i], sizeof d.index_names[i]).text, problem);
    }
    for (int32_t j = 0; j < i; ++j) {
      if (std::strcmp(d.index_names[i], d.index_names[j]) == 0) {
        return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s': index '%s' is named twice", n, d.index_names[i]);
      }
    }
    if (d.fixed[i] < 0 || d.fixed[i] > kMaxPIndex) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s': @fixed(%s=%lld) is outside 0..2^40", n, d.index_names[i],
                      static_cast<long long>(d.fixed[i]));
    }
  }
  if (d.has_init) {
    if (d.rank != 0 || d.index_count != 0) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s': @init goes with a scalar", n);
    uint8_t probe[8];
    const bool fits = PTypeIsFloat(d.dtype) ? std::isfinite(d.init) && std::isfinite(RoundTo(d.dtype, d.init, probe))
                                            : IntegerFits(d.dtype, d.init);
    if (!fits) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s': @init(%.17g) is not a %s value%s", n, d.init,
                      PTypeName(d.dtype),
                      PTypeIsFloat(d.dtype) ? " (past its finite range)" : " (a whole number in its range)");
    }
  }
  *elem_bytes = elem;
  return TINYAI_OK;
}

int64_t PersistentStore::AutoMax(const PDecl& d, int32_t k) {
  if (k >= d.rank) return 1;  // a vector's one column
  const int64_t fixed = d.fixed[d.table_indices() + k];
  // Both at most kMaxPIndex: the sum fits.
  const int64_t most = fixed > 0 ? d.shape[k] + fixed : kMaxPIndex;
  return most < kMaxPIndex ? most : kMaxPIndex;
}

bool PersistentStore::HeldInPlace(const PDecl& d) {
  if (d.index_count == 0) return true;
  if (d.auto_count > 0) return false;
  for (int32_t i = 0; i < d.index_count; ++i) {
    if (d.fixed[i] <= 0) return false;
  }
  return true;
}

TinyAIStatus PersistentStore::Declare(const PDecl& given) {
  const char* n = given.name;
  if (const char* problem = PNameProblem(n)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "the name '%s' %s (a name is letters, digits and _, not a digit "
                    "first)", Excerpt(n, sizeof given.name).text, problem);
  }
  if (Find(n) >= 0) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s' is declared twice", n);
  uint64_t elem = 0;
  TINYAI_RETURN_IF_ERROR(CheckDecl(given, &elem));
  // Kept as saved (and as a load compares it): what the declaration does
  // not use at its defaults (no @init: 0; shape past the rank: 1; indices
  // past the count: unnamed, not fixed).
  PDecl d = given;
  if (!d.has_init) d.init = 0.0;
  for (int32_t i = d.rank; i < kMaxPRank; ++i) d.shape[i] = 1;
  for (int32_t i = d.index_count; i < kMaxPIndices; ++i) {
    std::memset(d.index_names[i], 0, sizeof d.index_names[i]);
    d.fixed[i] = 0;
  }
  const size_t name_bytes = std::strlen(d.name);
  std::memset(d.name + name_bytes, 0, sizeof d.name - name_bytes);
  for (int32_t i = 0; i < d.index_count; ++i) {
    const size_t b = std::strlen(d.index_names[i]);
    std::memset(d.index_names[i] + b, 0, sizeof d.index_names[i] - b);
  }
  MemScope scope(kMemKv);  // a store is state: the KV cache's, or one the caller made
  Entry* x = New<Entry>();
  if (!x) return OutOfMemory("persistent store entry", sizeof(Entry));
  x->d = d;
  x->elem_bytes = elem;
  x->chunk = chunk_rows_;
  TinyAIStatus s = Charge(sizeof(Entry) + kEntryListBytes, n);
  if (s != TINYAI_OK) { Delete(x); return s; }
  auto fail = [&](TinyAIStatus status) {
    if (x->single) { LedgerFree(x->single); Refund(x->elem_bytes); }
    if (x->dir) { LedgerFree(x->dir); Refund(x->dir_entries * sizeof(uint8_t*)); }
    if (x->block) LedgerFree(x->block);
    if (x->mats) { LedgerFree(x->mats); Refund(x->mat_entries * sizeof(Matrix)); }
    Refund(sizeof(Entry) + kEntryListBytes);
    Delete(x);
    return status;
  };
  if (d.index_count == 0) {  // a scalar or a tensor
    if ((s = Charge(elem, n)) != TINYAI_OK) return fail(s);
    x->single = AllocZeroed(elem);
    if (!x->single) { Refund(elem); return fail(OutOfMemory(n, static_cast<size_t>(elem))); }
    if (d.has_init) StoreInit(d.dtype, d.init, x->single);
  } else if (d.auto_count == 0) {
    bool all_fixed = true;
    for (int32_t i = 0; i < d.index_count; ++i) all_fixed &= d.fixed[i] > 0;
    for (int32_t i = 0; i < d.index_count; ++i) x->extent[i] = d.fixed[i];
    // A growable table's chunk is allocated whole: its bytes must fit (every
    // product of a chunk's rows and the row's bytes after this is bounded).
    uint64_t chunk_bytes = 0;
    if (!all_fixed && (!CheckedMul(static_cast<uint64_t>(x->chunk), elem, &chunk_bytes) || chunk_bytes > SIZE_MAX)) {
      return fail(SetError(TINYAI_ERR_OVERFLOW, "'%s': a chunk of %lld rows of %llu bytes overflows the address space", n,
                           static_cast<long long>(x->chunk), static_cast<unsigned long long>(elem)));
    }
    if (all_fixed) {  // one block, [prefix][last][row]; the directory points into it
      uint64_t rows = 1, bytes = 0;
      for (int32_t i = 0; i < d.index_count; ++i) {
        if (!CheckedMul(rows, static_cast<uint64_t>(d.fixed[i]), &rows)) return fail(SetError(TINYAI_ERR_OVERFLOW, "'%s' overflows", n));
      }
      if (!CheckedMul(rows, elem, &bytes) || bytes > SIZE_MAX) return fail(SetError(TINYAI_ERR_OVERFLOW, "'%s' overflows", n));
      if ((s = Charge(bytes, n)) != TINYAI_OK) return fail(s);
      x->block = zero_fixed_ ? AllocZeroed(bytes)
                             : static_cast<uint8_t*>(LedgerAlloc(64, static_cast<size_t>(bytes == 0 ? 1 : bytes)));
      if (!x->block) { Refund(bytes); return fail(OutOfMemory(n, static_cast<size_t>(bytes))); }
      const int64_t last = d.fixed[d.index_count - 1];
      x->chunk = last;
      uint64_t prefixes = rows / static_cast<uint64_t>(last);
      for (int32_t i = 0; i + 1 < d.index_count; ++i) x->cap[i] = d.fixed[i];
      x->cap[d.index_count - 1] = 1;
      if ((s = Charge(prefixes * sizeof(uint8_t*), n)) != TINYAI_OK) { Refund(bytes); return fail(s); }
      x->dir = static_cast<uint8_t**>(static_cast<void*>(AllocZeroed(prefixes * sizeof(uint8_t*))));
      if (!x->dir) { Refund(bytes + prefixes * sizeof(uint8_t*)); return fail(OutOfMemory(n, static_cast<size_t>(prefixes * sizeof(uint8_t*)))); }
      x->dir_entries = prefixes;
      for (uint64_t p = 0; p < prefixes; ++p) x->dir[p] = x->block + p * static_cast<uint64_t>(last) * elem;
    }
  }
  s = AddEntry(x);
  if (s != TINYAI_OK) {
    if (x->block) {  // fail() frees the block; its bytes are refunded here
      uint64_t rows = 1;
      for (int32_t i = 0; i < d.index_count; ++i) rows *= static_cast<uint64_t>(d.fixed[i]);
      Refund(rows * elem);
    }
    return fail(s);
  }
  return TINYAI_OK;
}

// ---- tables -------------------------------------------------------------------------------------

namespace {

// The dense number of a tuple's first k indices over capacities cap.
uint64_t DenseIndex(const int64_t* tuple, const int64_t* cap, int32_t k) {
  uint64_t p = 0;
  for (int32_t i = 0; i < k; ++i) p = p * static_cast<uint64_t>(cap[i]) + static_cast<uint64_t>(tuple[i]);
  return p;
}

// The next capacity for an index that must hold `at`.
int64_t Grown(int64_t cap, int64_t at) {
  int64_t c = cap < 1 ? 1 : cap;
  while (c <= at) c *= 2;
  return c;
}

}  // namespace

// The directory's capacities to hold `where` (prefix indices, then the
// chunk), and its entries then.
bool PersistentStore::DirFor(const Entry* x, const int64_t* where, int64_t* cap, uint64_t* entries) const {
  const int32_t k = x->d.table_indices();
  *entries = 1;
  for (int32_t i = 0; i < k; ++i) {
    cap[i] = where[i] < x->cap[i] ? x->cap[i] : Grown(x->cap[i], where[i]);
    if (!CheckedMul(*entries, static_cast<uint64_t>(cap[i]), entries) || *entries > (uint64_t{1} << 40)) return false;
  }
  return true;
}

TinyAIStatus PersistentStore::GrowDir(Entry* x, const int64_t* where) {
  const int32_t k = x->d.table_indices();
  bool fits = x->dir != nullptr;
  for (int32_t i = 0; i < k && fits; ++i) fits = where[i] < x->cap[i];
  if (fits) return TINYAI_OK;
  int64_t cap[kMaxPIndices];
  uint64_t entries = 1;
  if (!DirFor(x, where, cap, &entries)) return SetError(TINYAI_ERR_OVERFLOW, "'%s': its directory overflows", x->d.name);
  TINYAI_RETURN_IF_ERROR(Charge(entries * sizeof(uint8_t*), x->d.name));
  uint8_t** dir = static_cast<uint8_t**>(static_cast<void*>(AllocZeroed(entries * sizeof(uint8_t*))));
  if (!dir) {
    Refund(entries * sizeof(uint8_t*));
    return OutOfMemory(x->d.name, static_cast<size_t>(entries * sizeof(uint8_t*)));
  }
  // The old pointers to their places in the new directory: no row moves.
  if (x->dir) {
    int64_t at[kMaxPIndices] = {0, 0, 0, 0};
    for (uint64_t old = 0; old < x->dir_entries; ++old) {
      uint64_t rest = old;
      for (int32_t i = k - 1; i >= 0; --i) {
        at[i] = static_cast<int64_t>(rest % static_cast<uint64_t>(x->cap[i]));
        rest /= static_cast<uint64_t>(x->cap[i]);
      }
      dir[DenseIndex(at, cap, k)] = x->dir[old];
    }
    LedgerFree(x->dir);
    Refund(x->dir_entries * sizeof(uint8_t*));
  }
  x->dir = dir;
  x->dir_entries = entries;
  for (int32_t i = 0; i < k; ++i) x->cap[i] = cap[i];
  return TINYAI_OK;
}

uint8_t* PersistentStore::Row(Entry* x, const int64_t* tuple, bool create, TinyAIStatus* status) {
  const int32_t k = x->d.index_count;
  int64_t where[kMaxPIndices];
  for (int32_t i = 0; i + 1 < k; ++i) where[i] = tuple[i];
  where[k - 1] = tuple[k - 1] / x->chunk;
  bool fits = x->dir != nullptr;
  for (int32_t i = 0; i < k && fits; ++i) fits = where[i] < x->cap[i];
  if (!fits) {
    if (!create) return nullptr;
    if ((*status = GrowDir(x, where)) != TINYAI_OK) return nullptr;
  }
  uint8_t*& slot = x->dir[DenseIndex(where, x->cap, k)];
  if (!slot) {
    if (!create) return nullptr;
    const uint64_t bytes = static_cast<uint64_t>(x->chunk) * x->elem_bytes;
    if ((*status = Charge(bytes, x->d.name)) != TINYAI_OK) return nullptr;
    slot = AllocZeroed(bytes);
    if (!slot) {
      Refund(bytes);
      *status = OutOfMemory(x->d.name, static_cast<size_t>(bytes));
      return nullptr;
    }
  }
  return slot + static_cast<uint64_t>(tuple[k - 1] % x->chunk) * x->elem_bytes;
}

const uint8_t* PersistentStore::Row(const Entry* x, const int64_t* tuple) const {
  TinyAIStatus unused = TINYAI_OK;
  return const_cast<PersistentStore*>(this)->Row(const_cast<Entry*>(x), tuple, false, &unused);
}

// ---- auto-dim matrices --------------------------------------------------------------------------

TinyAIStatus PersistentStore::GrowMats(Entry* x, const int64_t* tuple) {
  const int32_t k = x->d.table_indices();
  bool fits = x->mats != nullptr;
  for (int32_t i = 0; i < k && fits; ++i) fits = tuple[i] < x->cap[i];
  if (fits) return TINYAI_OK;
  int64_t cap[kMaxPIndices];
  uint64_t entries = 1;
  if (!DirFor(x, tuple, cap, &entries)) return SetError(TINYAI_ERR_OVERFLOW, "'%s': its directory overflows", x->d.name);
  TINYAI_RETURN_IF_ERROR(Charge(entries * sizeof(Matrix), x->d.name));
  Matrix* mats = static_cast<Matrix*>(static_cast<void*>(AllocZeroed(entries * sizeof(Matrix))));
  if (!mats) {
    Refund(entries * sizeof(Matrix));
    return OutOfMemory(x->d.name, static_cast<size_t>(entries * sizeof(Matrix)));
  }
  for (uint64_t i = 0; i < entries; ++i) {  // each starts at the declared shape
    mats[i].rows = x->d.shape[0];
    mats[i].cols = x->d.rank == 2 ? x->d.shape[1] : 1;
  }
  if (x->mats) {
    int64_t at[kMaxPIndices] = {0, 0, 0, 0};
    for (uint64_t old = 0; old < x->mat_entries; ++old) {
      uint64_t rest = old;
      for (int32_t i = k - 1; i >= 0; --i) {
        at[i] = static_cast<int64_t>(rest % static_cast<uint64_t>(x->cap[i]));
        rest /= static_cast<uint64_t>(x->cap[i]);
      }
      mats[DenseIndex(at, cap, k)] = x->mats[old];
    }
    LedgerFree(x->mats);
    Refund(x->mat_entries * sizeof(Matrix));
  }
  x->mats = mats;
  x->mat_entries = entries;
  for (int32_t i = 0; i < k; ++i) x->cap[i] = cap[i];
  return TINYAI_OK;
}

PersistentStore::Matrix* PersistentStore::MatrixAt(Entry* x, const int64_t* tuple, bool create, TinyAIStatus* status) {
  const int32_t k = x->d.table_indices();
  bool fits = x->mats != nullptr;
  for (int32_t i = 0; i < k && fits; ++i) fits = tuple[i] < x->cap[i];
  if (!fits) {
    if (!create) return nullptr;
    if ((*status = GrowMats(x, tuple)) != TINYAI_OK) return nullptr;
  }
  return &x->mats[DenseIndex(tuple, x->cap, k)];
}

const PersistentStore::Matrix* PersistentStore::MatrixAt(const Entry* x, const int64_t* tuple) const {
  TinyAIStatus unused = TINYAI_OK;
  return const_cast<PersistentStore*>(this)->MatrixAt(const_cast<Entry*>(x), tuple, false, &unused);
}

TinyAIStatus PersistentStore::GrowGrid(const Entry* x, Matrix* m, int64_t rows, int64_t cols) {
  const int64_t br = (rows + kAutoBlock - 1) / kAutoBlock, bc = (cols + kAutoBlock - 1) / kAutoBlock;
  if (br <= m->grid_rows && bc <= m->grid_cols) return TINYAI_OK;
  const int64_t gr = br <= m->grid_rows ? m->grid_rows : Grown(m->grid_rows, br - 1);
  const int64_t gc = bc <= m->grid_cols ? m->grid_cols : Grown(m->grid_cols, bc - 1);
  uint64_t entries = 0, bytes = 0;
  if (!CheckedMul(static_cast<uint64_t>(gr), static_cast<uint64_t>(gc), &entries) ||
      !CheckedMul(entries, sizeof(uint8_t*), &bytes) || bytes > SIZE_MAX) {
    return SetError(TINYAI_ERR_OVERFLOW, "'%s': a matrix of %lld x %lld blocks overflows", x->d.name,
                    static_cast<long long>(gr), static_cast<long long>(gc));
  }
  TINYAI_RETURN_IF_ERROR(Charge(bytes, x->d.name));
  uint8_t** grid = static_cast<uint8_t**>(static_cast<void*>(AllocZeroed(entries * sizeof(uint8_t*))));
  if (!grid) {
    Refund(entries * sizeof(uint8_t*));
    return OutOfMemory(x->d.name, static_cast<size_t>(entries * sizeof(uint8_t*)));
  }
  for (int64_t r = 0; r < m->grid_rows; ++r) {
    for (int64_t c = 0; c < m->grid_cols; ++c) grid[r * gc + c] = m->grid[r * m->grid_cols + c];
  }
  if (m->grid) {
    LedgerFree(m->grid);
    Refund(static_cast<uint64_t>(m->grid_rows) * static_cast<uint64_t>(m->grid_cols) * sizeof(uint8_t*));
  }
  m->grid = grid;
  m->grid_rows = gr;
  m->grid_cols = gc;
  return TINYAI_OK;
}

uint8_t* PersistentStore::Cell(const Entry* x, Matrix* m, int64_t r, int64_t c, bool create, TinyAIStatus* status) {
  const uint64_t each = PTypeBytes(x->d.dtype);
  const int64_t br = r / kAutoBlock, bc = c / kAutoBlock;
  if (br >= m->grid_rows || bc >= m->grid_cols) {
    if (!create) return nullptr;
    if ((*status = GrowGrid(x, m, r + 1, c + 1)) != TINYAI_OK) return nullptr;
  }
  uint8_t*& block = m->grid[br * m->grid_cols + bc];
  if (!block) {
    if (!create) return nullptr;
    const uint64_t bytes = static_cast<uint64_t>(kAutoBlock * kAutoBlock) * each;
    if ((*status = Charge(bytes, x->d.name)) != TINYAI_OK) return nullptr;
    block = AllocZeroed(bytes);
    if (!block) {
      Refund(bytes);
      *status = OutOfMemory(x->d.name, static_cast<size_t>(bytes));
      return nullptr;
    }
  }
  return block + static_cast<uint64_t>((r % kAutoBlock) * kAutoBlock + c % kAutoBlock) * each;
}

void PersistentStore::FreeMatrix(const Entry* x, Matrix* m) {
  const uint64_t block = static_cast<uint64_t>(kAutoBlock * kAutoBlock) * PTypeBytes(x->d.dtype);
  for (int64_t i = 0; i < m->grid_rows * m->grid_cols; ++i) {
    if (m->grid[i]) {
      LedgerFree(m->grid[i]);
      Refund(block);
    }
  }
  if (m->grid) {
    LedgerFree(m->grid);
    Refund(static_cast<uint64_t>(m->grid_rows) * static_cast<uint64_t>(m->grid_cols) * sizeof(uint8_t*));
  }
  m->grid = nullptr;
  m->grid_rows = m->grid_cols = 0;
  m->rows = x->d.shape[0];
  m->cols = x->d.rank == 2 ? x->d.shape[1] : 1;
}

// ---- walks and checks ---------------------------------------------------------------------------

template <class F>
TinyAIStatus PersistentStore::ForEachMatrix(const Entry* x, const int64_t* from, const int64_t* to, bool dense,
                                            F&& fn) const {
  const int32_t k = x->d.table_indices();
  if (!dense && !x->mats) return TINYAI_OK;
  int64_t at[kMaxPIndices] = {0, 0, 0, 0}, end[kMaxPIndices] = {0, 0, 0, 0};
  for (int32_t i = 0; i < k; ++i) {
    end[i] = dense || to[i] < x->cap[i] ? to[i] : x->cap[i];
    if (end[i] <= from[i]) return TINYAI_OK;
    at[i] = from[i];
  }
  for (;;) {
    const Matrix* m = dense ? MatrixAt(x, at) : &x->mats[DenseIndex(at, x->cap, k)];
    TINYAI_RETURN_IF_ERROR(fn(static_cast<const int64_t*>(at), m));
    int32_t i = k - 1;
    for (; i >= 0; --i) {
      if (++at[i] < end[i]) break;
      at[i] = from[i];
    }
    if (i < 0) return TINYAI_OK;
  }
}

// Whether writing [from, to) fits the memory limit, every transient peak
// included, when the directories and grids are grown to their final size
// first (PrepareWrite) and then the chunks or blocks allocated: a write
// past the limit is refused before anything changes.
TinyAIStatus PersistentStore::CheckWriteFits(const Entry* x, const int64_t* from, const int64_t* to) const {
  if (limit_ == 0 || x->block) return TINYAI_OK;
  const PDecl& d = x->d;
  const int32_t k = d.table_indices();
  uint64_t running = used_;
  bool over = false;
  auto hold = [&](uint64_t bytes) {
    over |= !CheckedAdd(running, bytes, &running) || running > limit_;
  };
  auto drop = [&](uint64_t bytes) { running -= bytes < running ? bytes : running; };
  int64_t at[kMaxPIndices] = {0, 0, 0, 0}, where[kMaxPIndices] = {0, 0, 0, 0}, cap[kMaxPIndices];
  uint64_t entries = 0;
  for (int32_t i = 0; i < k; ++i) where[i] = i + 1 < k ? to[i] - 1 : (to[i] - 1) / x->chunk;
  bool fits = x->dir != nullptr;
  for (int32_t i = 0; i < k && fits; ++i) fits = where[i] < x->cap[i];
  if (!fits) {
    if (!DirFor(x, where, cap, &entries)) return SetError(TINYAI_ERR_OVERFLOW, "'%s': its directory overflows", d.name);
    hold(entries * sizeof(uint8_t*));
    drop(x->dir_entries * sizeof(uint8_t*));
  }
  uint64_t prefixes = 1;
  for (int32_t i = 0; i + 1 < k; ++i) {
    at[i] = from[i];
    prefixes *= static_cast<uint64_t>(to[i] - from[i]);
  }
  const uint64_t chunk_bytes = static_cast<uint64_t>(x->chunk) * x->elem_bytes;
  for (uint64_t p = 0; p < prefixes && !over; ++p) {
    for (int64_t c = from[k - 1] / x->chunk; c <= (to[k - 1] - 1) / x->chunk && !over; ++c) {
      at[k - 1] = c;
      bool exists = x->dir != nullptr;
      for (int32_t i = 0; i < k && exists; ++i) exists = at[i] < x->cap[i];
      if (!exists || !x->dir[DenseIndex(at, x->cap, k)]) hold(chunk_bytes);
    }
    for (int32_t i = k - 2; i >= 0; --i) {
      if (++at[i] < to[i]) break;
      at[i] = from[i];
    }
  }
  if (over) {
    return SetError(TINYAI_ERR_RESOURCE_EXHAUSTED, "persistent store: writing '%s' needs more memory than its "
                    "memoryLimit %llu leaves (%llu bytes in use); nothing was written", d.name,
                    static_cast<unsigned long long>(limit_), static_cast<unsigned long long>(used_));
  }
  return TINYAI_OK;
}

// The same for an auto-dim write: the matrices' array grown to its final
// size first (a dense write creates every matrix of its range), then per
// matrix written its grid, then the blocks its cells reach.
TinyAIStatus PersistentStore::CheckAutoWriteFits(const PRef& ref, const Entry* x, const AutoSlice& plan) const {
  if (limit_ == 0) return TINYAI_OK;
  const PDecl& d = x->d;
  const int32_t k = d.table_indices();
  uint64_t running = used_;
  bool over = false;
  auto hold = [&](uint64_t bytes) {
    over |= !CheckedAdd(running, bytes, &running) || running > limit_;
  };
  auto drop = [&](uint64_t bytes) { running -= bytes < running ? bytes : running; };
  if (plan.dense) {
    int64_t where[kMaxPIndices] = {0, 0, 0, 0}, cap[kMaxPIndices];
    for (int32_t i = 0; i < k; ++i) where[i] = plan.to[i] - 1;
    bool fits = x->mats != nullptr;
    for (int32_t i = 0; i < k && fits; ++i) fits = where[i] < x->cap[i];
    if (!fits) {
      uint64_t entries = 0;
      if (!DirFor(x, where, cap, &entries)) return SetError(TINYAI_ERR_OVERFLOW, "'%s': its directory overflows", d.name);
      hold(entries * sizeof(Matrix));
      drop(x->mat_entries * sizeof(Matrix));
    }
  }
  const uint64_t block_bytes = static_cast<uint64_t>(kAutoBlock * kAutoBlock) * PTypeBytes(d.dtype);
  TINYAI_RETURN_IF_ERROR(ForEachMatrix(x, plan.from, plan.to, plan.dense, [&](const int64_t* tuple, const Matrix* m) {
    if (over) return TINYAI_OK;
    Cells c;
    uint64_t n = 0;
    TINYAI_RETURN_IF_ERROR(MatrixCells(ref, x, m, tuple, true, &c));
    if (!c.Count(&n) || n == 0) return TINYAI_OK;
    const int64_t gr = m ? m->grid_rows : 0, gc = m ? m->grid_cols : 0;
    const int64_t br = (c.r1 + kAutoBlock - 1) / kAutoBlock, bc = (c.c1 + kAutoBlock - 1) / kAutoBlock;
    if (br > gr || bc > gc) {
      const int64_t ngr = br <= gr ? gr : Grown(gr, br - 1), ngc = bc <= gc ? gc : Grown(gc, bc - 1);
      uint64_t grid = 0;
      if (!CheckedMul(static_cast<uint64_t>(ngr), static_cast<uint64_t>(ngc), &grid) ||
          !CheckedMul(grid, sizeof(uint8_t*), &grid)) {
        over = true;  // no memory holds it
        return TINYAI_OK;
      }
      hold(grid);
      drop(static_cast<uint64_t>(gr) * static_cast<uint64_t>(gc) * sizeof(uint8_t*));
    }
    // Blocks: at most one per cell written, and the cells are the data's.
    for (int64_t r = c.r0 / kAutoBlock; r <= (c.r1 - 1) / kAutoBlock && !over; ++r) {
      for (int64_t q = c.c0 / kAutoBlock; q <= (c.c1 - 1) / kAutoBlock && !over; ++q) {
        if (!m || r >= gr || q >= gc || !m->grid[r * gc + q]) hold(block_bytes);
      }
    }
    return TINYAI_OK;
  }));
  if (over) {
    return SetError(TINYAI_ERR_RESOURCE_EXHAUSTED, "persistent store: writing '%s' needs more memory than its "
                    "memoryLimit %llu leaves (%llu bytes in use); nothing was written", d.name,
                    static_cast<unsigned long long>(limit_), static_cast<unsigned long long>(used_));
  }
  return TINYAI_OK;
}

void PersistentStore::AutoShape(int32_t e, const int64_t* tuple, int64_t* shape) const {
  const Entry* x = entries_[static_cast<size_t>(e)];
  int64_t zero[kMaxPIndices] = {0, 0, 0, 0};
  const Matrix* m = x->d.auto_count > 0 ? MatrixAt(x, tuple ? tuple : zero) : nullptr;
  for (int32_t i = 0; i < kMaxPRank; ++i) shape[i] = i < x->d.rank ? x->d.shape[i] : 0;
  if (m) {
    shape[0] = m->rows;
    if (x->d.rank == 2) shape[1] = m->cols;
  }
}

uint64_t PersistentStore::EntryBytes(int32_t e) const {
  const Entry* x = entries_[static_cast<size_t>(e)];
  uint64_t n = sizeof(Entry) + kEntryListBytes + (x->single ? x->elem_bytes : 0) + x->dir_entries * sizeof(uint8_t*) +
               x->mat_entries * sizeof(Matrix);
  if (x->block) {
    uint64_t rows = 1;
    for (int32_t i = 0; i < x->d.index_count; ++i) rows *= static_cast<uint64_t>(x->d.fixed[i]);
    n += rows * x->elem_bytes;
  } else if (x->dir) {
    for (uint64_t i = 0; i < x->dir_entries; ++i) n += x->dir[i] ? static_cast<uint64_t>(x->chunk) * x->elem_bytes : 0;
  }
  const uint64_t block = static_cast<uint64_t>(kAutoBlock * kAutoBlock) * PTypeBytes(x->d.dtype);
  for (uint64_t i = 0; i < x->mat_entries; ++i) {
    const Matrix& m = x->mats[i];
    n += static_cast<uint64_t>(m.grid_rows) * static_cast<uint64_t>(m.grid_cols) * sizeof(uint8_t*);
    for (int64_t j = 0; j < m.grid_rows * m.grid_cols; ++j) n += m.grid[j] ? block : 0;
  }
  return n;
}

// ---- references ---------------------------------------------------------------------------------

namespace {

// A matrix's table tuple for a message: " (the matrix at NAME[a, b])".
struct TupleText {
  char text[160];
};

TupleText MatrixAtText(const char* name, const int64_t* tuple, int32_t k) {
  TupleText t;
  int n = tinyai::Format(t.text, sizeof t.text, " (the matrix at %s[", name);
  for (int32_t i = 0; i < k && n > 0 && static_cast<size_t>(n) < sizeof t.text; ++i) {
    n += tinyai::Format(t.text + n, sizeof t.text - static_cast<size_t>(n), "%s%lld", i ? ", " : "",
                       static_cast<long long>(tuple[i]));
  }
  if (n > 0 && static_cast<size_t>(n) < sizeof t.text) tinyai::Format(t.text + n, sizeof t.text - static_cast<size_t>(n), "])");
  return t;
}

}  // namespace

TinyAIStatus PersistentStore::ResolveIndex(const PRef& ref, const Entry* x, int32_t i, int64_t extent, bool writing,
                                           const int64_t* tuple, int64_t* from, int64_t* to) const {
  const PDecl& d = x->d;
  const int32_t table = d.table_indices();
  const bool matrix = d.auto_count > 0 && i >= table;
  // The most `to` may reach: reading, what exists; writing, a fixed extent
  // or any index below kMaxPIndex (a table index), or one row or column
  // past the matrix's, up to AutoMax.
  const int64_t cap = matrix ? AutoMax(d, i - table) : d.fixed[i] > 0 ? d.fixed[i] : kMaxPIndex;
  const int64_t limit = !writing ? extent : !matrix ? cap : (extent < cap ? extent + 1 : cap);
  const bool all = !ref.has_brackets || ref.count == 0;
  PIndex whole;
  whole.kind = PIndex::kAll;
  const PIndex& ix = all || i >= ref.count ? whole : ref.index[i];
  PIndex::Kind kind = ix.kind;
  if (kind == PIndex::kNone) kind = PIndex::kAll;
  const PExcerpt shown = Excerpt(ref.text);
  // Which matrix, when the entry has several.
  TupleText which;
  which.text[0] = '\0';
  if (matrix && table > 0) {
    if (tuple) {
      which = MatrixAtText(d.name, tuple, table);
    } else {
      tinyai::Format(which.text, sizeof which.text, " (a matrix not yet written, at its declared shape)");
    }
  }
  // Refused as given (no sum is formed from a number past the limit).
  auto past = [&](int64_t reaches) {
    char why[96];
    if (!writing) {
      tinyai::Format(why, sizeof why, "it has %lld", static_cast<long long>(extent));
    } else if (!matrix) {
      if (d.fixed[i] > 0) tinyai::Format(why, sizeof why, "it is fixed at %lld", static_cast<long long>(cap));
      else tinyai::Format(why, sizeof why, "an index is below 2^40");
    } else if (extent >= cap) {
      if (cap < kMaxPIndex) tinyai::Format(why, sizeof why, "the matrix is fixed at %lld", static_cast<long long>(cap));
      else tinyai::Format(why, sizeof why, "a matrix holds at most 2^40");
    } else {
      tinyai::Format(why, sizeof why, "the matrix has %lld; a write adds one more at most",
                    static_cast<long long>(extent));
    }
    return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "persistent store: '%s': index %d (%s) reaches %lld; %s%s", shown.text,
                    static_cast<int>(i), d.index_names[i], static_cast<long long>(reaches), why, which.text);
  };
  if (kind == PIndex::kAll) {
    *from = 0;
    *to = extent;
  } else if (kind == PIndex::kAt) {
    if (ix.at < 0) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s': index %d (%s) is %lld", shown.text,
                      static_cast<int>(i), d.index_names[i], static_cast<long long>(ix.at));
    }
    if (ix.at >= limit) return past(ix.at);
    *from = ix.at;
    *to = ix.at + 1;
  } else {
    *from = ix.from;
    if (ix.to_from_end && ix.to < -extent) {  // ix.to <= 0: back from the extent
      return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "persistent store: '%s': index %d (%s) counts back %llu from an "
                      "extent of %lld%s", shown.text, static_cast<int>(i), d.index_names[i],
                      static_cast<unsigned long long>(0ull - static_cast<uint64_t>(ix.to)),
                      static_cast<long long>(extent), which.text);
    }
    *to = ix.to_from_end ? extent + ix.to : ix.to;
    if (*from < 0 || *to < *from) {
      return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "persistent store: '%s': index %d (%s) is the range %lld..%lld of "
                      "0..%lld, which ends before it starts%s", shown.text, static_cast<int>(i), d.index_names[i],
                      static_cast<long long>(*from), static_cast<long long>(*to), static_cast<long long>(extent),
                      which.text);
    }
    if (*to > limit) return past(*to - 1);
  }
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::Resolve(const PRef& ref, int32_t* e, int64_t from[], int64_t to[], int32_t* count,
                                      bool writing) const {
  *e = Find(ref.name);
  if (*e < 0) return SetError(TINYAI_ERR_NOT_FOUND, "persistent store: no entry '%s'", ref.name);
  const Entry* x = entries_[static_cast<size_t>(*e)];
  const PDecl& d = x->d;
  const int32_t table = d.table_indices(), autos = d.auto_count;
  if (d.index_count == 0) {
    if (ref.has_brackets && ref.count > 0) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s' is a %s: it takes no indices", d.name,
                      d.rank == 0 ? "scalar" : "tensor");
    }
    *count = 0;
    return TINYAI_OK;
  }
  // `A` or `A[]`: all of it. Fewer indices than it has: the ones left out
  // are whole (`K[l]`).
  const bool all = !ref.has_brackets || ref.count == 0;
  const int32_t want = table + autos;
  if (!all && ref.count > want) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s' takes at most %d indices (%s); the reference gives %d", d.name,
                    static_cast<int>(want), autos > 0 ? "its table's, then its matrix's rows and columns" : "one per index",
                    static_cast<int>(ref.count));
  }
  // A table index's extent: its rows (or its fixed extent). A matrix's
  // rows and columns are each matrix's own (MatrixCells).
  *count = table;
  for (int32_t i = 0; i < table; ++i) {
    const int64_t extent = d.fixed[i] > 0 ? d.fixed[i] : x->extent[i];
    TINYAI_RETURN_IF_ERROR(ResolveIndex(ref, x, i, extent, writing, nullptr, &from[i], &to[i]));
  }
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::MatrixCells(const PRef& ref, const Entry* x, const Matrix* m, const int64_t* tuple,
                                          bool writing, Cells* cells) const {
  const PDecl& d = x->d;
  const int32_t table = d.table_indices();
  const int64_t rows = m ? m->rows : d.shape[0], cols = m ? m->cols : (d.rank == 2 ? d.shape[1] : 1);
  TINYAI_RETURN_IF_ERROR(ResolveIndex(ref, x, table, rows, writing, m ? tuple : nullptr, &cells->r0, &cells->r1));
  if (d.rank == 2) return ResolveIndex(ref, x, table + 1, cols, writing, m ? tuple : nullptr, &cells->c0, &cells->c1);
  cells->c0 = 0;
  cells->c1 = 1;
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::PlanAuto(const PRef& ref, const Entry* x, const int64_t* from, const int64_t* to,
                                       bool writing, AutoSlice* plan) const {
  const int32_t k = x->d.table_indices();
  for (int32_t i = 0; i < k; ++i) {
    plan->from[i] = from[i];
    plan->to[i] = to[i];
  }
  // Tuples in the range, and those the matrices' array holds (at most its
  // entries: the walk over them is bounded by the memory they hold).
  uint64_t tuples = 1, held = x->mats ? 1 : 0;
  bool many = false;  // more tuples than 64 bits count
  for (int32_t i = 0; i < k; ++i) {
    many |= !CheckedMul(tuples, static_cast<uint64_t>(to[i] - from[i]), &tuples);
    const int64_t end = x->mats && to[i] > x->cap[i] ? x->cap[i] : to[i];
    held *= end > from[i] ? static_cast<uint64_t>(end - from[i]) : 0;
  }
  if (tuples == 0 && !many) {  // no matrix: the rows and columns as a declared one's (refused as before)
    Cells c;
    plan->cells = 0;
    plan->dense = false;
    return MatrixCells(ref, x, nullptr, nullptr, writing, &c);
  }
  uint64_t cells = 0;
  bool overflow = false;
  TINYAI_RETURN_IF_ERROR(ForEachMatrix(x, from, to, false, [&](const int64_t* tuple, const Matrix* m) {
    Cells c;
    uint64_t n = 0;
    TINYAI_RETURN_IF_ERROR(MatrixCells(ref, x, m, tuple, writing, &c));
    overflow |= !c.Count(&n) || !CheckedAdd(cells, n, &cells);
    return TINYAI_OK;
  }));
  plan->dense = false;
  if (many || tuples > held) {
    // The others are at the declared shape.
    Cells c;
    uint64_t n = 0, more = 0;
    TINYAI_RETURN_IF_ERROR(MatrixCells(ref, x, nullptr, nullptr, writing, &c));
    overflow |= !c.Count(&n);
    if (n > 0) {
      overflow |= many || !CheckedMul(tuples - held, n, &more) || !CheckedAdd(cells, more, &cells);
      plan->dense = true;
    }
  }
  if (overflow) return SetError(TINYAI_ERR_OVERFLOW, "'%s': the slice's size overflows", x->d.name);
  plan->cells = cells;
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::Access(const char* ref_text, bool writing, int32_t dtype, uint8_t* out,
                                     const uint8_t* in, size_t size, size_t* bytes) {
  PRef ref;
  TINYAI_RETURN_IF_ERROR(ParseRef(ref_text, &ref));
  TINYAI_RETURN_IF_ERROR(BindSymbols(&ref));
  int32_t e = -1, count = 0;
  int64_t from[kMaxPIndices], to[kMaxPIndices];
  TINYAI_RETURN_IF_ERROR(Resolve(ref, &e, from, to, &count, writing));
  Entry* x = entries_[static_cast<size_t>(e)];
  const PDecl& d = x->d;
  if (dtype != d.dtype) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s' holds %s values; the call passes %s", d.name,
                    PTypeName(d.dtype),
                    PTypeName(dtype));
  }
  if (d.auto_count > 0) return AccessAuto(ref, x, from, to, writing, out, in, size, bytes);
  const int32_t table = d.table_indices();
  // Bytes the slice holds.
  uint64_t units = 1, need = 0;
  bool fits = true;
  for (int32_t i = 0; i < count; ++i) fits &= CheckedMul(units, static_cast<uint64_t>(to[i] - from[i]), &units);
  fits &= CheckedMul(units, x->elem_bytes, &need) && need <= SIZE_MAX;
  if (!fits) return SetError(TINYAI_ERR_OVERFLOW, "'%s': the slice's size overflows", d.name);
  if (count == 0) need = x->elem_bytes;
  if (bytes) *bytes = static_cast<size_t>(need);
  TINYAI_RETURN_IF_ERROR(CheckSize(d, writing, in, size, need));
  if (count == 0 && d.index_count == 0) {  // a scalar or a tensor
    if (writing) std::memcpy(x->single, in, static_cast<size_t>(x->elem_bytes));
    else std::memcpy(out, x->single, static_cast<size_t>(x->elem_bytes));
    return TINYAI_OK;
  }
  // Walk the tuples in index order (the last index fastest).
  int64_t at[kMaxPIndices];
  for (int32_t i = 0; i < count; ++i) at[i] = from[i];
  if (units == 0) return TINYAI_OK;
  uint64_t done = 0;
  TinyAIStatus status = TINYAI_OK;
  if (writing && !x->block) {
    // Refused before anything changes when it does not fit; the directory
    // then grows once to its final size.
    TINYAI_RETURN_IF_ERROR(CheckWriteFits(x, from, to));
    int64_t last[kMaxPIndices];
    for (int32_t i = 0; i < table; ++i) last[i] = to[i] - 1;
    last[table - 1] /= x->chunk;
    TINYAI_RETURN_IF_ERROR(GrowDir(x, last));
  }
  // Writing: every chunk first (a failure then leaves the values), then the rows.
  for (int pass = writing ? 0 : 1; pass < 2; ++pass) {
    for (int32_t i = 0; i < count; ++i) at[i] = from[i];
    for (uint64_t n = 0; n < units; ++n) {
      if (pass == 0) {
        if (!Row(x, at, true, &status)) return status;
      } else if (writing) {
        std::memcpy(Row(x, at, true, &status), in + done, static_cast<size_t>(x->elem_bytes));
        done += x->elem_bytes;
      } else {
        const uint8_t* row = Row(x, at);
        if (row) std::memcpy(out + done, row, static_cast<size_t>(x->elem_bytes));
        else std::memset(out + done, 0, static_cast<size_t>(x->elem_bytes));
        done += x->elem_bytes;
      }
      for (int32_t i = count - 1; i >= 0; --i) {
        if (++at[i] < to[i]) break;
        at[i] = from[i];
      }
    }
  }
  if (writing) {
    for (int32_t i = 0; i < table; ++i) x->extent[i] = to[i] > x->extent[i] ? to[i] : x->extent[i];
  }
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::CheckSize(const PDecl& d, bool writing, const uint8_t* in, size_t size,
                                        uint64_t need) const {
  const uint64_t each = PTypeBytes(d.dtype);
  if (writing && size != need) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s': the slice holds %llu bytes (%llu %s values); the write gives "
                    "%zu", d.name, static_cast<unsigned long long>(need), static_cast<unsigned long long>(need / each),
                    PTypeName(d.dtype), size);
  }
  if (writing && d.dtype == TINYAI_PTYPE_BOOL) {
    for (size_t b = 0; b < size; ++b) {
      if (in[b] > 1) {
        return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s' holds bool values (0 or 1); value %zu of the write is %u",
                        d.name, b, static_cast<unsigned>(in[b]));
      }
    }
  }
  if (!writing && size < need) {
    return SetError(TINYAI_ERR_BUFFER_TOO_SMALL, "'%s': the slice holds %llu bytes; the buffer has %zu", d.name,
                    static_cast<unsigned long long>(need), size);
  }
  return TINYAI_OK;
}

// An auto-dim entry: per table tuple, its matrix's cells [r0, r1) x [c0,
// c1), resolved against that matrix's own rows and columns (matrices of one
// entry grow apart: `C[]` is each one whole, one after the other).
TinyAIStatus PersistentStore::AccessAuto(const PRef& ref, Entry* x, const int64_t* from, const int64_t* to,
                                         bool writing, uint8_t* out, const uint8_t* in, size_t size, size_t* bytes) {
  const PDecl& d = x->d;
  const int32_t table = d.table_indices();
  const uint64_t each = PTypeBytes(d.dtype);
  AutoSlice plan;
  TINYAI_RETURN_IF_ERROR(PlanAuto(ref, x, from, to, writing, &plan));
  uint64_t need = 0;
  if (!CheckedMul(plan.cells, each, &need) || need > SIZE_MAX) {
    return SetError(TINYAI_ERR_OVERFLOW, "'%s': the slice's size overflows", d.name);
  }
  if (bytes) *bytes = static_cast<size_t>(need);
  TINYAI_RETURN_IF_ERROR(CheckSize(d, writing, in, size, need));
  if (need == 0) return TINYAI_OK;  // no values: nothing changes, nothing grows
  uint64_t done = 0;
  TinyAIStatus status = TINYAI_OK;
  if (!writing) {
    return ForEachMatrix(x, plan.from, plan.to, plan.dense, [&](const int64_t* tuple, const Matrix* m) {
      Cells c;
      TINYAI_RETURN_IF_ERROR(MatrixCells(ref, x, m, tuple, false, &c));
      for (int64_t r = c.r0; r < c.r1; ++r) {
        for (int64_t q = c.c0; q < c.c1; ++q) {
          const uint8_t* cell = m ? Cell(x, const_cast<Matrix*>(m), r, q, false, &status) : nullptr;
          if (cell) std::memcpy(out + done, cell, static_cast<size_t>(each));
          else std::memset(out + done, 0, static_cast<size_t>(each));
          done += each;
        }
      }
      return TINYAI_OK;
    });
  }
  // A matrix grows by whole rows or columns, and the write must fit the
  // limit: both refused before anything is created or grown.
  TINYAI_RETURN_IF_ERROR(ForEachMatrix(x, plan.from, plan.to, plan.dense, [&](const int64_t* tuple, const Matrix* m) {
    Cells c;
    uint64_t n = 0;
    TINYAI_RETURN_IF_ERROR(MatrixCells(ref, x, m, tuple, true, &c));
    return c.Count(&n) && n == 0 ? TINYAI_OK : CheckMatrixGrowth(x, m, c);
  }));
  TINYAI_RETURN_IF_ERROR(CheckAutoWriteFits(ref, x, plan));
  if (plan.dense) {  // the matrices' array grows once, to its final size
    int64_t last[kMaxPIndices] = {0, 0, 0, 0};
    for (int32_t i = 0; i < table; ++i) last[i] = plan.to[i] - 1;
    TINYAI_RETURN_IF_ERROR(GrowMats(x, last));
  }
  // Every cell first (a failure then leaves the values), then the values.
  int64_t grown[kMaxPIndices] = {0, 0, 0, 0};  // the extents the written tuples reach
  for (int pass = 0; pass < 2; ++pass) {
    TINYAI_RETURN_IF_ERROR(ForEachMatrix(x, plan.from, plan.to, plan.dense, [&](const int64_t* tuple, const Matrix* held) {
      Cells c;
      uint64_t n = 0;
      TINYAI_RETURN_IF_ERROR(MatrixCells(ref, x, held, tuple, true, &c));
      if (c.Count(&n) && n == 0) return TINYAI_OK;
      Matrix* m = MatrixAt(x, tuple, true, &status);
      if (!m) return status;
      if (pass == 0) {
        TINYAI_RETURN_IF_ERROR(GrowGrid(x, m, c.r1, c.c1));
        for (int64_t r = c.r0; r < c.r1; ++r) {
          for (int64_t q = c.c0; q < c.c1; ++q) {
            if (!Cell(x, m, r, q, true, &status)) return status;
          }
        }
        return TINYAI_OK;
      }
      for (int64_t r = c.r0; r < c.r1; ++r) {
        for (int64_t q = c.c0; q < c.c1; ++q) {
          std::memcpy(Cell(x, m, r, q, true, &status), in + done, static_cast<size_t>(each));
          done += each;
        }
      }
      if (c.r1 > m->rows) m->rows = c.r1;
      if (c.c1 > m->cols) m->cols = c.c1;
      for (int32_t i = 0; i < table; ++i) grown[i] = tuple[i] + 1 > grown[i] ? tuple[i] + 1 : grown[i];
      return TINYAI_OK;
    }));
  }
  for (int32_t i = 0; i < table; ++i) x->extent[i] = grown[i] > x->extent[i] ? grown[i] : x->extent[i];
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::CheckMatrixGrowth(const Entry* x, const Matrix* m, const Cells& cells) const {
  const PDecl& d = x->d;
  // A matrix not yet created starts at the declared shape (GrowMats).
  const int64_t rows = m ? m->rows : d.shape[0], cols = m ? m->cols : (d.rank == 2 ? d.shape[1] : 1);
  const int64_t r0 = cells.r0, r1 = cells.r1, c0 = cells.c0, c1 = cells.c1;
  // At its edge the matrix gains whole rows (every column it has then)
  // and whole columns (every row it has then), with no gap: the write
  // covers every cell the matrix gains. An empty matrix's first element
  // is its first row and its first column at once.
  const bool new_row = r1 > rows, new_col = c1 > cols;
  const bool rows_whole = r0 == 0 && r1 >= rows, cols_whole = c0 == 0 && c1 >= cols;
  if ((new_row && (!cols_whole || r0 > rows)) || (new_col && (!rows_whole || c0 > cols))) {
    return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "'%s': a matrix of %lld x %lld grows by a whole row at row %lld or "
                    "a whole column at column %lld (the write covers rows %lld..%lld, columns %lld..%lld)", d.name,
                    static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(rows),
                    static_cast<long long>(cols), static_cast<long long>(r0), static_cast<long long>(r1 - 1),
                    static_cast<long long>(c0), static_cast<long long>(c1 - 1));
  }
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::ScalarValue(int32_t e, double* value) const {
  const Entry* x = entries_[static_cast<size_t>(e)];
  if (x->d.index_count != 0 || x->d.rank != 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s' is not a scalar", x->d.name);
  }
  const int32_t t = x->d.dtype;
  *value = PTypeIsFloat(t) ? LoadFloat(t, x->single)
           : PTypeIsUnsigned(t) ? static_cast<double>(LoadUnsigned(t, x->single))
                                : static_cast<double>(LoadSigned(t, x->single));
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::ScalarIndex(int32_t e, const char* ref, int64_t* index) const {
  const Entry* x = entries_[static_cast<size_t>(e)];
  const PDecl& d = x->d;
  if (d.index_count != 0 || d.rank != 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s': index '%s' names no scalar entry",
                    Excerpt(ref).text, d.name);
  }
  const int32_t t = d.dtype;
  if (PTypeIsFloat(t)) {
    const double v = LoadFloat(t, x->single);
    // 2^63 and up (and what is not a whole number) is no int64.
    if (!(v >= 0) || v != std::floor(v) || v >= 9223372036854775808.0) {
      return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "persistent store: '%s': index '%s' is %.17g, not a row number",
                      Excerpt(ref).text, d.name, v);
    }
    *index = static_cast<int64_t>(v);
  } else if (PTypeIsUnsigned(t)) {
    const uint64_t v = LoadUnsigned(t, x->single);
    if (v > static_cast<uint64_t>(INT64_MAX)) {
      return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "persistent store: '%s': index '%s' is %llu, past any row",
                      Excerpt(ref).text, d.name, static_cast<unsigned long long>(v));
    }
    *index = static_cast<int64_t>(v);
  } else {
    const int64_t v = LoadSigned(t, x->single);
    if (v < 0) {
      return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "persistent store: '%s': index '%s' is %lld, not a row number",
                      Excerpt(ref).text, d.name, static_cast<long long>(v));
    }
    *index = v;
  }
  return TINYAI_OK;
}

void PersistentStore::Extents(int32_t e, int64_t* extent) const {
  const Entry* x = entries_[static_cast<size_t>(e)];
  for (int32_t i = 0; i < kMaxPIndices; ++i) {
    if (i >= x->d.index_count) {
      extent[i] = 0;
    } else if (i < x->d.table_indices()) {
      extent[i] = x->d.fixed[i] > 0 ? x->d.fixed[i] : x->extent[i];
    } else {
      int64_t shape[kMaxPRank];
      AutoShape(e, nullptr, shape);
      extent[i] = shape[i - x->d.table_indices()];
    }
  }
}

uint8_t* PersistentStore::FixedRow(int32_t e, const int64_t* tuple) {
  Entry* x = entries_[static_cast<size_t>(e)];
  if (!x->block) return nullptr;
  uint64_t p = 0;
  for (int32_t i = 0; i < x->d.index_count; ++i) {
    if (tuple[i] < 0 || tuple[i] >= x->d.fixed[i]) return nullptr;
    p = p * static_cast<uint64_t>(x->d.fixed[i]) + static_cast<uint64_t>(tuple[i]);
  }
  return x->block + p * x->elem_bytes;
}

uint8_t* PersistentStore::TableRow(int32_t e, const int64_t* tuple, TinyAIStatus* status) {
  Entry* x = entries_[static_cast<size_t>(e)];
  const PDecl& d = x->d;
  if (!d.table() || d.auto_count != 0) {
    *status = SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s' is not a plain table", d.name);
    return nullptr;
  }
  for (int32_t i = 0; i < d.index_count; ++i) {
    const int64_t end = d.fixed[i] > 0 ? d.fixed[i] : kMaxPIndex;
    if (tuple[i] < 0 || tuple[i] >= end) {
      *status = SetError(TINYAI_ERR_OUT_OF_BOUNDS, "'%s': index %s = %lld is outside 0..%lld", d.name,
                         d.index_names[i], static_cast<long long>(tuple[i]), static_cast<long long>(end - 1));
      return nullptr;
    }
  }
  if (x->block) return FixedRow(e, tuple);
  uint8_t* row = Row(x, tuple, true, status);
  if (row) {
    for (int32_t i = 0; i < d.index_count; ++i) x->extent[i] = tuple[i] + 1 > x->extent[i] ? tuple[i] + 1 : x->extent[i];
  }
  return row;
}

TinyAIStatus PersistentStore::Read(const char* ref, int32_t dtype, void* out, size_t capacity, size_t* bytes) const {
  if (out == nullptr && capacity > 0) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiPersistentRead: out is NULL");
  return const_cast<PersistentStore*>(this)->Access(ref, false, dtype, static_cast<uint8_t*>(out), nullptr, capacity,
                                                    bytes);
}

TinyAIStatus PersistentStore::Write(const char* ref, int32_t dtype, const void* data, size_t bytes) {
  if (data == nullptr && bytes > 0) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiPersistentWrite: data is NULL");
  return Access(ref, true, dtype, nullptr, static_cast<const uint8_t*>(data), bytes, nullptr);
}

TinyAIStatus PersistentStore::Add(const char* name, int64_t delta) {
  int32_t e = -1;
  TINYAI_RETURN_IF_ERROR(FindEntry(name, "persistent store", &e));
  Entry* x = entries_[static_cast<size_t>(e)];
  const PDecl& d = x->d;
  if (d.index_count != 0 || d.rank != 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s' is not a scalar: only scalars are incremented", d.name);
  }
  const int32_t t = d.dtype;
  const char* verb = delta < 0 ? "decrementing" : "incrementing";
  // |delta| as a u64 (INT64_MIN's too).
  const uint64_t by = delta < 0 ? 0ull - static_cast<uint64_t>(delta) : static_cast<uint64_t>(delta);
  if (PTypeIsFloat(t)) {
    // Rounded once to the type. Refused: a result past its finite range,
    // and an increment the type cannot tell from the value (lost to
    // rounding: f16 counts by 1 up to 2048, f32 up to 2^24, f64 up to 2^53).
    const double v = LoadFloat(t, x->single);
    uint8_t next[8];
    const double r = RoundTo(t, v + static_cast<double>(delta), next);
    const bool lost = delta != 0 && r == v;
    if (!std::isfinite(v) || !std::isfinite(r) || lost) {
      return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "'%s' (%s) is %.17g: %s by %llu %s", d.name, PTypeName(t), v, verb,
                      static_cast<unsigned long long>(by),
                      !std::isfinite(v) ? "is no number (it is not finite)"
                      : lost ? "is lost to rounding (the type's step there is larger)"
                             : "would take it past its range");
    }
    std::memcpy(x->single, next, PTypeBytes(t));
    return TINYAI_OK;
  }
  if (PTypeIsUnsigned(t)) {  // u8 .. u64 and bool, exactly in u64
    const uint64_t v = LoadUnsigned(t, x->single), hi = UnsignedMax(t);
    const bool below = delta < 0 && by > v;
    if (below || (delta >= 0 && (v > hi || by > hi - v))) {
      return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "'%s' (%s) is %llu: %s by %llu would take it %s (0..%llu)", d.name,
                      PTypeName(t), static_cast<unsigned long long>(v), verb, static_cast<unsigned long long>(by),
                      below ? "below 0, which the type forbids" : "past its range", static_cast<unsigned long long>(hi));
    }
    StoreUnsigned(t, delta < 0 ? v - by : v + by, x->single);
    return TINYAI_OK;
  }
  // i8 .. i64, exactly in i64.
  const int64_t v = LoadSigned(t, x->single);
  int64_t lo = 0, hi = 0, r = 0;
  SignedRange(t, &lo, &hi);
  if (__builtin_add_overflow(v, delta, &r) || r < lo || r > hi) {
    return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "'%s' (%s) is %lld: %s by %llu would take it %s (%lld..%lld)", d.name,
                    PTypeName(t), static_cast<long long>(v), verb, static_cast<unsigned long long>(by),
                    delta < 0 ? "below its range" : "past its range", static_cast<long long>(lo),
                    static_cast<long long>(hi));
  }
  StoreSigned(t, r, x->single);
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::ResetEntry(int32_t e) {
  Entry* x = entries_[static_cast<size_t>(e)];
  const PDecl& d = x->d;
  if (x->single) {
    std::memset(x->single, 0, static_cast<size_t>(x->elem_bytes));
    if (d.has_init) StoreInit(d.dtype, d.init, x->single);
    return TINYAI_OK;
  }
  if (x->block) {  // fixed: zeros, the same extents
    uint64_t rows = 1;
    for (int32_t i = 0; i < d.index_count; ++i) rows *= static_cast<uint64_t>(d.fixed[i]);
    std::memset(x->block, 0, static_cast<size_t>(rows * x->elem_bytes));
    return TINYAI_OK;
  }
  if (x->dir) {
    for (uint64_t i = 0; i < x->dir_entries; ++i) {
      if (x->dir[i]) {
        LedgerFree(x->dir[i]);
        Refund(static_cast<uint64_t>(x->chunk) * x->elem_bytes);
        x->dir[i] = nullptr;
      }
    }
  }
  for (uint64_t i = 0; i < x->mat_entries; ++i) FreeMatrix(x, &x->mats[i]);
  for (int32_t i = 0; i < d.index_count; ++i) x->extent[i] = d.fixed[i] > 0 && i < d.table_indices() ? d.fixed[i] : 0;
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::Reset(const char* ref_text) {
  if (ref_text == nullptr || ref_text[0] == '\0') {
    for (int32_t e = 0; e < count(); ++e) ResetEntry(e);
    return TINYAI_OK;
  }
  PRef ref;
  TINYAI_RETURN_IF_ERROR(ParseRef(ref_text, &ref));
  TINYAI_RETURN_IF_ERROR(BindSymbols(&ref));
  int32_t e = -1;
  TINYAI_RETURN_IF_ERROR(FindEntry(ref.name, "persistent store", &e));
  if (!ref.has_brackets) return ResetEntry(e);
  // A row or a slice: zeros over what is there (nothing grows, nothing is
  // allocated: a row never written already reads as zeros).
  int32_t found = -1, n = 0;
  int64_t from[kMaxPIndices], to[kMaxPIndices];
  TINYAI_RETURN_IF_ERROR(Resolve(ref, &found, from, to, &n, false));
  Entry* x = entries_[static_cast<size_t>(e)];
  const PDecl& d = x->d;
  if (d.index_count == 0) return ResetEntry(e);
  // Only what was ever allocated is walked (the directory's and the grids'
  // reach): a slice over a fixed index of 2^40 rows takes no 2^40 steps.
  if (d.auto_count > 0) return ResetAuto(ref, x, from, to);
  // A plain table: chunk by chunk of the last index, per prefix tuple.
  if (!x->dir) return TINYAI_OK;
  const int32_t last = n - 1;
  for (int32_t i = 0; i < last; ++i) to[i] = to[i] < x->cap[i] ? to[i] : x->cap[i];
  const int64_t rows_end = x->cap[last] * x->chunk;  // at most 2^40 x 65536, or a fixed table's extent
  to[last] = to[last] < rows_end ? to[last] : rows_end;
  int64_t at[kMaxPIndices];
  uint64_t prefixes = 1;
  for (int32_t i = 0; i <= last; ++i) {
    if (to[i] <= from[i]) return TINYAI_OK;
    at[i] = from[i];
    if (i < last) prefixes *= static_cast<uint64_t>(to[i] - from[i]);  // at most the directory's entries
  }
  for (uint64_t p = 0; p < prefixes; ++p) {
    for (int64_t c = from[last] / x->chunk; c <= (to[last] - 1) / x->chunk; ++c) {
      at[last] = c * x->chunk;
      uint8_t* chunk = const_cast<uint8_t*>(Row(x, at));
      if (!chunk) continue;
      const int64_t r0 = from[last] > at[last] ? from[last] : at[last];
      const int64_t r1 = to[last] < at[last] + x->chunk ? to[last] : at[last] + x->chunk;
      std::memset(chunk + static_cast<uint64_t>(r0 - at[last]) * x->elem_bytes, 0,
                  static_cast<size_t>(static_cast<uint64_t>(r1 - r0) * x->elem_bytes));
    }
    for (int32_t i = last - 1; i >= 0; --i) {
      if (++at[i] < to[i]) break;
      at[i] = from[i];
    }
  }
  return TINYAI_OK;
}

// Zeros over the cells the reference names in each matrix (its own rows
// and columns), block by block of those held: a matrix never written, or a
// block never allocated, already reads as zeros.
TinyAIStatus PersistentStore::ResetAuto(const PRef& ref, Entry* x, const int64_t* from, const int64_t* to) {
  AutoSlice plan;
  TINYAI_RETURN_IF_ERROR(PlanAuto(ref, x, from, to, false, &plan));  // every refusal before a change
  const uint64_t each = PTypeBytes(x->d.dtype);
  return ForEachMatrix(x, plan.from, plan.to, false, [&](const int64_t* tuple, const Matrix* held) {
    Matrix* m = const_cast<Matrix*>(held);
    if (!m->grid) return TINYAI_OK;
    Cells c;
    TINYAI_RETURN_IF_ERROR(MatrixCells(ref, x, m, tuple, false, &c));
    const int64_t r1 = c.r1 < m->grid_rows * kAutoBlock ? c.r1 : m->grid_rows * kAutoBlock;
    const int64_t c1 = c.c1 < m->grid_cols * kAutoBlock ? c.c1 : m->grid_cols * kAutoBlock;
    if (r1 <= c.r0 || c1 <= c.c0) return TINYAI_OK;
    for (int64_t br = c.r0 / kAutoBlock; br <= (r1 - 1) / kAutoBlock; ++br) {
      for (int64_t bc = c.c0 / kAutoBlock; bc <= (c1 - 1) / kAutoBlock; ++bc) {
        uint8_t* block = m->grid[br * m->grid_cols + bc];
        if (!block) continue;
        const int64_t ra = br * kAutoBlock > c.r0 ? br * kAutoBlock : c.r0;
        const int64_t rb = (br + 1) * kAutoBlock < r1 ? (br + 1) * kAutoBlock : r1;
        const int64_t ca = bc * kAutoBlock > c.c0 ? bc * kAutoBlock : c.c0;
        const int64_t cb = (bc + 1) * kAutoBlock < c1 ? (bc + 1) * kAutoBlock : c1;
        for (int64_t r = ra; r < rb; ++r) {
          std::memset(block + static_cast<uint64_t>((r % kAutoBlock) * kAutoBlock + ca % kAutoBlock) * each, 0,
                      static_cast<size_t>(static_cast<uint64_t>(cb - ca) * each));
        }
      }
    }
    return TINYAI_OK;
  });
}

}  // namespace tinyai
