// libFuzzer target: the persistent store (<tinyai/persistent.h>) - its
// declaration text, its references, and its saved files.
//
// The input is DECLARATIONS '\0' REST. DECLARATIONS may start with lines
// "=NAME VALUE" that set named dimensions (besides D = 3 and H = 2); an
// empty rest stands for a set of every kind of entry (every scalar type,
// tables, fixed tables, auto-dim matrices, empty ones too). REST is either
// a saved store (starting with "TPS1", loaded into the declared store) or
// lines of operations, each an op letter and a reference: r(ead) w(rite)
// z (reset), s (save, then load into a store of the same declarations);
// i(ncrement) and d(ecrement) take "NAME[ N]" (N: any int64,
// else the line's length); v writes "REF K": the K-th edge value of the
// entry's type (0, 1, its largest and smallest, one inside them, infinity
// and NaN for floats) into every element.
//
//  - Every call returns TINYAI_OK or a specific error with a message.
//  - The store never holds more than its memoryLimit, and the bytes its
//    entries report add up to what it says it holds, less what its named
//    dimensions hold (what a store of those dimensions alone holds).
//  - A write that fails changes nothing, nor does one of no values; one
//    that writes values reads them back.
//  - An increment or a decrement of an integer scalar gives the exact sum,
//    or (past the type's range) an error that leaves the value; of a float
//    one, a finite value that moved, or an error that leaves it.
//  - The message of a reference of numbers shows no number the reference
//    does not give (INT64_MIN: a wrapped range).
//  - A load that fails leaves the store as it was; one that succeeds saves
//    and loads again to the same contents.
//  - A save (the op s, and after every load) writes at most 24 bytes plus 4
//    times the memory the store holds, and loads into a store of the same
//    declarations to the same contents.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_util.h"
#include "tinyai/persistent.h"

namespace {

using tinyai_fuzz::CheckFailure;

constexpr size_t kLimit = 64 * 1024;

// Every kind of entry: F and G have fixed indices of 2^40 rows (for the
// walks of resets, reads and saves, which take what the store holds).
const char* kDefault =
    "persistent {\n"
    "  step: i32 @init(0)\n"
    "  n: u8\n"
    "  T: f64[2]\n"
    "  A(i): f32[3] @table\n"
    "  B(i, j): i16[2] @table\n"
    "  K(l, t): f16[2] @table @fixed(l=2, t=8)\n"
    "  M(i, j): f32[2, 2] @auto_dim(i, j)\n"
    "  N(i, j): u8[1, 1] @auto_dim(i, j) @fixed(i=3, j=2)\n"
    "  C(l, i): u8[1] @table @auto_dim(i)\n"
    "  E(i, j): f32[0, 0] @auto_dim(i, j)\n"
    "  F(l, i, j): i8[0, 1] @table @auto_dim(i, j) @fixed(l=1099511627776)\n"
    "  G(i, j): u8 @table @fixed(i=1099511627776)\n"
    "  h: f16 @init(65504.0)\n"
    "  f: f32 @init(16777216.0)\n"
    "  g: f64 @init(9007199254740992.0)\n"
    "  a: i8 @init(-128)\n"
    "  b: i16 @init(32767)\n"
    "  c: i32 @init(-2147483648)\n"
    "  e: i64 @init(-9223372036854775808)\n"
    "  u: u16 @init(65535)\n"
    "  w: u32 @init(4294967295)\n"
    "  q: u64 @init(9223372036854775808)\n"
    "  t: bool @init(true)\n"
    "}";

// Named dimensions of an input ("=NAME VALUE" lines at the start of the
// declarations, which are cut off), besides D and H.
using Dims = std::vector<std::pair<std::string, int64_t>>;

Dims TakeDims(std::string* text) {
  Dims dims = {{"D", 3}, {"H", 2}};
  while (!text->empty() && (*text)[0] == '=') {
    size_t end = text->find('\n');
    const std::string line = text->substr(1, end == std::string::npos ? std::string::npos : end - 1);
    text->erase(0, end == std::string::npos ? text->size() : end + 1);
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    dims.emplace_back(line.substr(0, space), std::strtoll(line.c_str() + space + 1, nullptr, 10));
  }
  return dims;
}

TinyAIPersistentStore* Created(size_t limit = kLimit) {
  TinyAIPersistentConfig cfg = tinyaiCreateDefaultPersistentConfig();
  cfg.memoryLimit = limit;
  cfg.chunkRows = 4;
  TinyAIPersistentStore* s = nullptr;
  FUZZ_CHECK(tinyaiCreatePersistentStore(&cfg, &s) == TINYAI_OK, "create");
  return s;
}

void SetDims(TinyAIPersistentStore* s, const Dims& dims) {
  for (const auto& d : dims) {
    const TinyAIStatus st = tinyaiSetPersistentDim(s, d.first.c_str(), d.second);
    if (st != TINYAI_OK) CheckFailure(st, "tinyaiSetPersistentDim");
  }
}

// What the named dimensions hold: a store of them alone.
uint64_t DimsBytes(const Dims& dims) {
  TinyAIPersistentStore* s = Created();
  SetDims(s, dims);
  FUZZ_CHECK(tinyaiGetPersistentEntryCount(s) == 0, "dimensions made entries");
  const uint64_t bytes = tinyaiGetPersistentMemoryUsage(s);
  tinyaiDestroyPersistentStore(s);
  return bytes;
}

uint64_t g_dims_bytes = 0;  // the input's DimsBytes

// Buffers reused from input to input (a fresh 128 KiB one per call was
// most of the target's time under ASan: page faults).
std::vector<uint8_t>& Buffer(int which) {
  static std::vector<uint8_t>* buffers[2] = {new std::vector<uint8_t>(kLimit * 2), new std::vector<uint8_t>(kLimit * 2)};
  return *buffers[which];
}

std::string Contents(TinyAIPersistentStore* s) {
  std::string all;
  std::vector<uint8_t>& buf = Buffer(0);
  for (int32_t i = 0; i < tinyaiGetPersistentEntryCount(s); ++i) {
    const char* name = tinyaiGetPersistentEntryName(s, i);
    TinyAIPersistentEntry e;
    std::memset(&e, 0, sizeof e);
    e.structSize = sizeof e;
    FUZZ_CHECK(tinyaiGetPersistentEntry(s, name, &e) == TINYAI_OK, "entry %s", name);
    size_t bytes = 0;
    TinyAIStatus st = tinyaiPersistentRead(s, name, e.dtype, buf.data(), buf.size(), &bytes);
    std::string part = name;
    if (st == TINYAI_ERR_BUFFER_TOO_SMALL && e.indexCount > 0) {
      // More than the buffer (a fixed index of 2^40 rows with one written):
      // its first rows, and its size.
      part += "[0.." + std::to_string(std::min<int64_t>(e.extent[0], 16)) + "]";
      all += std::to_string(bytes) + ":";
      st = tinyaiPersistentRead(s, part.c_str(), e.dtype, buf.data(), buf.size(), &bytes);
      if (st == TINYAI_ERR_BUFFER_TOO_SMALL) {
        all += part + ":" + std::to_string(bytes) + "|";
        continue;
      }
    }
    FUZZ_CHECK(st == TINYAI_OK, "reading all of %s", part.c_str());
    all += part + ":" + std::string(reinterpret_cast<const char*>(buf.data()), bytes) + "|";
  }
  return all;
}

void CheckAccounts(TinyAIPersistentStore* s, size_t limit = kLimit) {
  const uint64_t used = tinyaiGetPersistentMemoryUsage(s);
  FUZZ_CHECK(used <= limit, "the store holds %llu bytes past its limit %zu", static_cast<unsigned long long>(used), limit);
  uint64_t sum = 0;
  for (int32_t i = 0; i < tinyaiGetPersistentEntryCount(s); ++i) {
    TinyAIPersistentEntry e;
    std::memset(&e, 0, sizeof e);
    e.structSize = sizeof e;
    FUZZ_CHECK(tinyaiGetPersistentEntry(s, tinyaiGetPersistentEntryName(s, i), &e) == TINYAI_OK, "entry %d", i);
    sum += e.bytes;
  }
  FUZZ_CHECK(sum + g_dims_bytes == used, "entries hold %llu bytes and the named dimensions %llu; the store says %llu",
             static_cast<unsigned long long>(sum), static_cast<unsigned long long>(g_dims_bytes),
             static_cast<unsigned long long>(used));
}

TinyAIPersistentStore* Declared(const std::string& text, const Dims& dims, size_t limit = kLimit) {
  TinyAIPersistentStore* s = Created(limit);
  SetDims(s, dims);
  const TinyAIStatus st = tinyaiDeclarePersistent(s, text.c_str());
  FUZZ_CHECK(st == TINYAI_OK || text != kDefault || dims.size() > 2,
             "the target's own declarations are refused");
  if (st != TINYAI_OK) {
    CheckFailure(st, "tinyaiDeclarePersistent");
    FUZZ_CHECK(std::strncmp(tinyaiGetLastErrorMessage(), "line ", 5) == 0 || st == TINYAI_ERR_RESOURCE_EXHAUSTED,
               "a declaration error names no line: %s", tinyaiGetLastErrorMessage());
    FUZZ_CHECK(tinyaiGetPersistentEntryCount(s) == 0, "a refused text declared entries");
    FUZZ_CHECK(tinyaiGetPersistentMemoryUsage(s) == g_dims_bytes, "a refused text holds memory");
  }
  // Names compare whole: every entry is found by its own name.
  for (int32_t i = 0; i < tinyaiGetPersistentEntryCount(s); ++i) {
    const char* name = tinyaiGetPersistentEntryName(s, i);
    FUZZ_CHECK(name && std::strlen(name) <= TINYAI_PERSISTENT_MAX_NAME, "entry %d's name", i);
  }
  CheckAccounts(s, limit);
  return s;
}

// The input's declarations and dimensions (for a store of the same).
std::string g_text;
Dims g_dims;

// Saves s, then loads the file into a store of the same declarations (with
// room for a load's peak: 4 x the limit): the file takes at most 24 bytes
// plus 4 times what s holds, and loads to the same contents.
void SaveAndLoad(TinyAIPersistentStore* s, const char* name) {
  const std::string path = tinyai_fuzz::ScratchDir::Get().File(name);
  FUZZ_CHECK(tinyaiSavePersistentStore(s, path.c_str()) == TINYAI_OK, "a store does not save: %s",
             tinyaiGetLastErrorMessage());
  std::vector<uint8_t> file;
  FUZZ_CHECK(tinyai_fuzz::ReadFile(path, &file), "read %s", path.c_str());
  const uint64_t used = tinyaiGetPersistentMemoryUsage(s);
  FUZZ_CHECK(file.size() <= 24 + 4 * used, "a store holding %llu bytes saved %zu", static_cast<unsigned long long>(used),
             file.size());
  TinyAIPersistentStore* t = Declared(g_text, g_dims, 4 * kLimit);
  FUZZ_CHECK(tinyaiLoadPersistentStore(t, path.c_str()) == TINYAI_OK, "a saved store does not load: %s",
             tinyaiGetLastErrorMessage());
  FUZZ_CHECK(Contents(t) == Contents(s), "a store saved and loaded differs");
  CheckAccounts(t, 4 * kLimit);
  tinyaiDestroyPersistentStore(t);
}

// A scalar's value as a wide integer (integer types) or a double.
struct Scalar {
  bool is_float = false;
  __int128 i = 0;
  double f = 0;
};

Scalar ReadScalar(TinyAIPersistentStore* s, const char* name, TinyAIPersistentType t) {
  uint8_t raw[8] = {0};
  size_t bytes = 0;
  FUZZ_CHECK(tinyaiPersistentRead(s, name, t, raw, sizeof raw, &bytes) == TINYAI_OK, "reading the scalar %s", name);
  Scalar v;
  switch (t) {
    case TINYAI_PTYPE_I8: { int8_t x; std::memcpy(&x, raw, 1); v.i = x; break; }
    case TINYAI_PTYPE_I16: { int16_t x; std::memcpy(&x, raw, 2); v.i = x; break; }
    case TINYAI_PTYPE_I32: { int32_t x; std::memcpy(&x, raw, 4); v.i = x; break; }
    case TINYAI_PTYPE_I64: { int64_t x; std::memcpy(&x, raw, 8); v.i = x; break; }
    case TINYAI_PTYPE_U8: case TINYAI_PTYPE_BOOL: { uint8_t x; std::memcpy(&x, raw, 1); v.i = x; break; }
    case TINYAI_PTYPE_U16: { uint16_t x; std::memcpy(&x, raw, 2); v.i = x; break; }
    case TINYAI_PTYPE_U32: { uint32_t x; std::memcpy(&x, raw, 4); v.i = x; break; }
    case TINYAI_PTYPE_U64: { uint64_t x; std::memcpy(&x, raw, 8); v.i = x; break; }
    case TINYAI_PTYPE_F32: { float x; std::memcpy(&x, raw, 4); v.is_float = true; v.f = x; break; }
    case TINYAI_PTYPE_F64: { double x; std::memcpy(&x, raw, 8); v.is_float = true; v.f = x; break; }
    default: {  // f16: its bits (a change is a change; finiteness from the exponent)
      uint16_t x;
      std::memcpy(&x, raw, 2);
      v.is_float = true;
      v.f = (x & 0x7c00u) == 0x7c00u ? ((x & 0x3ffu) ? std::nan("") : HUGE_VAL) : static_cast<double>(x & 0x7fffu);
      v.i = x;
      break;
    }
  }
  return v;
}

void IntRange(TinyAIPersistentType t, __int128* lo, __int128* hi) {
  switch (t) {
    case TINYAI_PTYPE_I8: *lo = INT8_MIN; *hi = INT8_MAX; return;
    case TINYAI_PTYPE_I16: *lo = INT16_MIN; *hi = INT16_MAX; return;
    case TINYAI_PTYPE_I32: *lo = INT32_MIN; *hi = INT32_MAX; return;
    case TINYAI_PTYPE_I64: *lo = INT64_MIN; *hi = INT64_MAX; return;
    case TINYAI_PTYPE_U8: *lo = 0; *hi = UINT8_MAX; return;
    case TINYAI_PTYPE_U16: *lo = 0; *hi = UINT16_MAX; return;
    case TINYAI_PTYPE_U32: *lo = 0; *hi = UINT32_MAX; return;
    case TINYAI_PTYPE_U64: *lo = 0; *hi = UINT64_MAX; return;
    default: *lo = 0; *hi = 1; return;  // bool
  }
}

size_t TypeBytes(TinyAIPersistentType t) {
  switch (t) {
    case TINYAI_PTYPE_F64: case TINYAI_PTYPE_I64: case TINYAI_PTYPE_U64: return 8;
    case TINYAI_PTYPE_F32: case TINYAI_PTYPE_I32: case TINYAI_PTYPE_U32: return 4;
    case TINYAI_PTYPE_F16: case TINYAI_PTYPE_I16: case TINYAI_PTYPE_U16: return 2;
    default: return 1;
  }
}

// The K-th edge value of type t, as its bytes.
void EdgeValue(TinyAIPersistentType t, unsigned k, uint8_t* out) {
  __int128 lo = 0, hi = 0;
  switch (t) {
    case TINYAI_PTYPE_F32: {
      const float v[] = {0.0f, 1.0f, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                         16777216.0f, std::numeric_limits<float>::denorm_min(), HUGE_VALF, std::nanf("")};
      std::memcpy(out, &v[k % 8], 4);
      return;
    }
    case TINYAI_PTYPE_F64: {
      const double v[] = {0.0, 1.0, std::numeric_limits<double>::max(), -std::numeric_limits<double>::max(),
                          9007199254740992.0, std::numeric_limits<double>::denorm_min(), HUGE_VAL, std::nan("")};
      std::memcpy(out, &v[k % 8], 8);
      return;
    }
    case TINYAI_PTYPE_F16: {
      const uint16_t v[] = {0x0000, 0x3c00, 0x7bff, 0xfbff, 0x6800, 0x0001, 0x7c00, 0x7e00};
      std::memcpy(out, &v[k % 8], 2);
      return;
    }
    default: break;
  }
  IntRange(t, &lo, &hi);
  const __int128 v[] = {0, 1, hi, lo, hi - 1, lo + 1};
  const __int128 x = t == TINYAI_PTYPE_BOOL ? v[k % 2] : v[k % 6];
  const uint64_t bits = static_cast<uint64_t>(x);
  std::memcpy(out, &bits, TypeBytes(t));  // little-endian: the low bytes
}

// "NAME N" -> NAME and N (strtoll: saturated); no number: the line's length.
std::pair<std::string, int64_t> NameAndNumber(const std::string& line, int64_t otherwise) {
  const size_t space = line.rfind(' ');
  if (space == std::string::npos || space + 1 >= line.size()) return {line, otherwise};
  char* end = nullptr;
  const char* digits = line.c_str() + space + 1;
  errno = 0;
  const long long n = std::strtoll(digits, &end, 10);
  if (end == digits || *end != '\0') return {line, otherwise};
  return {line.substr(0, space), static_cast<int64_t>(n)};
}

void Operate(TinyAIPersistentStore* s, const std::string& line) {
  if (!line.empty() && line[0] == 's') {
    SaveAndLoad(s, "op.tps");
    return;
  }
  if (line.size() < 2) return;
  const char op = line[0];
  std::string ref = line.substr(1);
  int64_t number = static_cast<int64_t>(line.size());
  if (op == 'i' || op == 'd' || op == 'v') {
    const auto split = NameAndNumber(ref, op == 'd' ? static_cast<int64_t>(line.size() % 3) : number);
    ref = split.first;
    number = split.second;
  }
  std::vector<uint8_t>& buf = Buffer(1);
  TinyAIPersistentEntry e;
  std::memset(&e, 0, sizeof e);
  e.structSize = sizeof e;
  // The entry's type (the name before any '[').
  const std::string name = ref.substr(0, ref.find('['));
  const TinyAIPersistentType dtype =
      tinyaiGetPersistentEntry(s, name.c_str(), &e) == TINYAI_OK ? e.dtype : TINYAI_PTYPE_F32;
  size_t bytes = 0;
  TinyAIStatus st = TINYAI_OK;
  // A failure is checked right after the call, before anything else the
  // target calls (Contents() reads the store) records errors of its own.
  bool failure_checked = false;
  auto CheckFailureOf = [&](TinyAIStatus failed) {
    failure_checked = true;
    CheckFailure(failed, "an operation");
    // (An index naming a scalar may show the scalar's value, INT64_MIN too.)
    const size_t open = ref.find('[');
    const bool numbers_only =
        open == std::string::npos ||
        std::none_of(ref.begin() + static_cast<std::ptrdiff_t>(open), ref.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; });
    if ((op == 'r' || op == 'w' || op == 'v' || op == 'z') && numbers_only) {
      for (const char* wrapped : {"-9223372036854775808", "-9223372036854775807"}) {
        FUZZ_CHECK(std::strstr(tinyaiGetLastErrorMessage(), wrapped) == nullptr || ref.find(wrapped) != std::string::npos,
                   "%s: the message shows %s, which the reference does not give", ref.c_str(), wrapped);
      }
    }
  };
  // Writes buf's first `bytes` values' bytes to ref: a refused write or one
  // of no values changes nothing (the contents, the memory held), and a
  // write reads back as written.
  auto WriteChecked = [&] {
    const std::string before = Contents(s);
    const uint64_t used = tinyaiGetPersistentMemoryUsage(s);
    st = tinyaiPersistentWrite(s, ref.c_str(), dtype, buf.data(), bytes);
    if (st != TINYAI_OK) CheckFailureOf(st);
    if (st != TINYAI_OK || bytes == 0) {
      FUZZ_CHECK(Contents(s) == before, "a refused or empty write (%s) changed the store", ref.c_str());
      FUZZ_CHECK(tinyaiGetPersistentMemoryUsage(s) == used, "a refused or empty write (%s) changed the memory held",
                 ref.c_str());
      return;
    }
    std::vector<uint8_t> back(bytes + 1);
    size_t got = 0;
    FUZZ_CHECK(tinyaiPersistentRead(s, ref.c_str(), dtype, back.data(), back.size(), &got) == TINYAI_OK,
               "a written slice (%s) does not read", ref.c_str());
    FUZZ_CHECK(got == bytes && std::memcmp(back.data(), buf.data(), bytes) == 0, "%s reads back otherwise", ref.c_str());
  };
  switch (op) {
    case 'r':
      st = tinyaiPersistentRead(s, ref.c_str(), dtype, buf.data(), buf.size(), &bytes);
      if (st == TINYAI_OK) FUZZ_CHECK(bytes <= buf.size(), "read %zu bytes", bytes);
      break;
    case 'w': {
      // As many bytes as the slice holds now (a growing write is refused on size: still a check).
      TinyAIStatus rs = tinyaiPersistentRead(s, ref.c_str(), dtype, buf.data(), buf.size(), &bytes);
      if (rs != TINYAI_OK) bytes = line.size() * 4 % 64;
      for (size_t i = 0; i < bytes; ++i) buf[i] = static_cast<uint8_t>(i * 7 + line.size());
      WriteChecked();
      break;
    }
    case 'v': {
      // The slice's size now, every element the same edge value.
      if (tinyaiPersistentRead(s, ref.c_str(), dtype, buf.data(), buf.size(), &bytes) != TINYAI_OK) bytes = TypeBytes(dtype);
      const size_t each = TypeBytes(dtype);
      uint8_t value[8];
      EdgeValue(dtype, static_cast<unsigned>(number < 0 ? -(number + 1) : number), value);
      for (size_t i = 0; i + each <= bytes; i += each) std::memcpy(buf.data() + i, value, each);
      WriteChecked();
      break;
    }
    case 'i':
    case 'd': {
      const bool scalar = name == ref && tinyaiGetPersistentEntry(s, ref.c_str(), &e) == TINYAI_OK &&
                          e.indexCount == 0 && e.rank == 0;
      Scalar before;
      if (scalar) before = ReadScalar(s, ref.c_str(), e.dtype);
      st = op == 'i' ? tinyaiPersistentIncrement(s, ref.c_str(), number) : tinyaiPersistentDecrement(s, ref.c_str(), number);
      if (st != TINYAI_OK) CheckFailureOf(st);
      if (number < 0) FUZZ_CHECK(st == TINYAI_ERR_INVALID_ARGUMENT, "a negative count (%lld) was taken", static_cast<long long>(number));
      if (!scalar || number < 0) break;
      const Scalar after = ReadScalar(s, ref.c_str(), e.dtype);
      if (!before.is_float) {
        __int128 lo = 0, hi = 0;
        IntRange(e.dtype, &lo, &hi);
        const __int128 want = op == 'i' ? before.i + number : before.i - number;
        const bool fits = want >= lo && want <= hi;
        FUZZ_CHECK((st == TINYAI_OK) == fits, "%s %c %lld: %s for a result %s its type's range", ref.c_str(), op,
                   static_cast<long long>(number), tinyaiStatusString(st), fits ? "inside" : "outside");
        FUZZ_CHECK(after.i == (st == TINYAI_OK ? want : before.i), "%s %c %lld: the value is wrong", ref.c_str(), op,
                   static_cast<long long>(number));
        if (st != TINYAI_OK) FUZZ_CHECK(st == TINYAI_ERR_OUT_OF_BOUNDS, "%s: %s", ref.c_str(), tinyaiStatusString(st));
      } else if (st == TINYAI_OK) {
        FUZZ_CHECK(std::isfinite(after.f), "%s %c %lld: not finite, with TINYAI_OK", ref.c_str(), op, static_cast<long long>(number));
        if (number != 0) {
          const bool moved = e.dtype == TINYAI_PTYPE_F16 ? after.i != before.i : after.f != before.f;
          FUZZ_CHECK(moved, "%s %c %lld: the value did not move, with TINYAI_OK", ref.c_str(), op, static_cast<long long>(number));
        }
      } else {
        FUZZ_CHECK(st == TINYAI_ERR_OUT_OF_BOUNDS, "%s: %s", ref.c_str(), tinyaiStatusString(st));
        const bool same = e.dtype == TINYAI_PTYPE_F16 ? after.i == before.i
                                                      : (after.f == before.f || (std::isnan(after.f) && std::isnan(before.f)));
        FUZZ_CHECK(same, "%s: a refused %c changed the value", ref.c_str(), op);
      }
      break;
    }
    case 'z': st = tinyaiPersistentReset(s, ref.c_str()); break;
    default: return;
  }
  if (st != TINYAI_OK && !failure_checked) CheckFailureOf(st);
  CheckAccounts(s);
}

void WriteSeeds(const char* dir) {
  const std::string ops =
      std::string("\0", 1) +
      "wA[0]\nwA[step]\nistep\nwA[step]\nrA[0..-1]\nwB[2, 3]\nrB[1]\nwK[1, 7]\nzK[1]\nwM[2, ]\nwM[, 2]\nrM[1..3, ]\n"
      "wN[1, ]\nwN[, 1]\nwC[3, 1]\nrC[]\ns\ndstep\nzA\nz\ns\n";
  tinyai_fuzz::WriteSeed(dir, "ops.txt", ops.data(), ops.size());
  const std::string decl = "persistent {\n  x: f32 @init(1.0)\n  A(i): f32[D] @table\n}" + std::string("\0", 1) + "wA[0]\nix\nrA[]\n";
  tinyai_fuzz::WriteSeed(dir, "decl.txt", decl.data(), decl.size());
  // Numbers at their edges: indices up to INT64_MAX and past it, negative
  // ends, counts of INT64_MAX, every type's limits.
  const std::string edges =
      std::string("\0", 1) +
      "rA[9223372036854775807]\nwA[9223372036854775807]\nwA[9223372036854775806..9223372036854775807]\n"
      "rA[0..-9223372036854775808]\nwA[1099511627775]\nrA[99999999999999999999]\nrA[0..-3]\n"
      "ve 3\nde 1\nie 9223372036854775807\nie 9223372036854775807\nde 9223372036854775807\n"
      "iq 9223372036854775807\niq 1\ndq 9223372036854775807\ndq -1\n"
      "ih 1\nih 16\ndh 100000\nif 1\nif 2\nig 1\nvg 6\nig 1\nvf 7\ndf 1\n"
      "ia 255\nda 1\nib 1\nic 4294967295\niu 1\niw 1\nit 1\ndt 1\nvt 1\nvu 2\n"
      "istep 2147483647\nistep 1\nwA[step]\nvstep 2\nrA[step]\nvq 2\nrA[q]\n"
      "wE[0, 0]\nwE[1, ]\nwE[, 1]\nwE[0..3, 0..3]\nwE[3, 3]\nrE[]\nzE\nwE[0, 0]\n"
      "wF[1099511627775, 0, 0]\nwF[3, 0, 0]\nzF[]\nwG[1099511627775, 7]\nzG[]\nzG[0..1099511627776, 7]\n"
      "wM[2, 2]\nwM[0..3, 0..3]\nwN[9223372036854775807, ]\nzN[, 9223372036854775807]\n"
      "wF[3, 0, 0]\nwG[5, 0]\nwC[1, 0]\nwC[0..2, ]\nrC[]\nzC[]\ns\n";
  tinyai_fuzz::WriteSeed(dir, "edges.txt", edges.data(), edges.size());
  // Names at their edge (63 bytes whole, 64 refused), dimensions at theirs.
  const std::string n63(63, 'n'), n64 = n63 + "x";
  const std::string names = "=" + n64 + " 3\n=" + n63 + " 1099511627776\n=Z 0\n" + n63 +
                            ": i32 @init(5)\nA(i): f32[" + n63 + "] @table\nB(i): f32[Z, Z] @auto_dim(i)\n" +
                            std::string("\0", 1) + "rA[" + n64 + "]\nwA[" + n63 + "]\ni" + n64 + " 1\ni" + n63 +
                            " 1\nzA[" + n64 + "]\n";
  tinyai_fuzz::WriteSeed(dir, "names.txt", names.data(), names.size());
  const std::string bad_names = "A(" + n64 + "): f32 @table" + std::string("\0", 1) + "rA\n";
  tinyai_fuzz::WriteSeed(dir, "long-index.txt", bad_names.data(), bad_names.size());
  std::string none;
  const Dims dims = TakeDims(&none);
  g_dims_bytes = DimsBytes(dims);
  g_text = kDefault;
  g_dims = dims;
  TinyAIPersistentStore* s = Declared(kDefault, dims);
  for (const char* line : {"wA[0]", "wA[5]", "wB[1, 2]", "wK[0, 3]", "wM[2, ]", "wC[2, 1]", "wN[, 1]", "wE[0, 0]",
                           "wF[3, 0, 0]", "wG[5, 0]", "vq 2", "iq 7", "vt 1"}) {
    Operate(s, line);
  }
  tinyaiPersistentIncrement(s, "step", 3);
  const std::string path = tinyai_fuzz::ScratchDir::Get().File("seed.tps");
  FUZZ_CHECK(tinyaiSavePersistentStore(s, path.c_str()) == TINYAI_OK, "save");
  std::vector<uint8_t> file;
  FUZZ_CHECK(tinyai_fuzz::ReadFile(path, &file), "read %s", path.c_str());
  file.insert(file.begin(), 0);
  file.insert(file.begin(), kDefault, kDefault + std::strlen(kDefault));
  tinyai_fuzz::WriteSeed(dir, "saved.bin", file.data(), file.size());
  tinyaiDestroyPersistentStore(s);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tinyai_fuzz::WriteSeedsIfAsked(WriteSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint8_t* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t text_size = nul ? static_cast<size_t>(nul - data) : size;
  std::string text(reinterpret_cast<const char*>(data), text_size);
  const uint8_t* rest = nul ? nul + 1 : data + size;
  const size_t rest_size = static_cast<size_t>(data + size - rest);
  tinyaiClearLastError();
  const Dims dims = TakeDims(&text);
  if (text.empty()) text = kDefault;
  g_dims_bytes = DimsBytes(dims);
  g_text = text;
  g_dims = dims;
  TinyAIPersistentStore* s = Declared(text, dims);
  if (rest_size >= 4 && std::memcmp(rest, "TPS1", 4) == 0) {
    const tinyai_fuzz::ScratchDir& dir = tinyai_fuzz::ScratchDir::Get();
    const std::string in = dir.File("in.tps");
    FUZZ_CHECK(tinyai_fuzz::WriteFile(in, rest, rest_size), "cannot write %s", in.c_str());
    Operate(s, "wA[1]");
    const std::string before = Contents(s);
    const uint64_t used = tinyaiGetPersistentMemoryUsage(s);
    const TinyAIStatus st = tinyaiLoadPersistentStore(s, in.c_str());
    if (st != TINYAI_OK) {
      CheckFailure(st, "tinyaiLoadPersistentStore");
      FUZZ_CHECK(Contents(s) == before, "a refused load changed the store");
      FUZZ_CHECK(tinyaiGetPersistentMemoryUsage(s) == used, "a refused load changed the memory held");
    } else {
      CheckAccounts(s);
      SaveAndLoad(s, "again.tps");
    }
  } else {
    size_t at = 0;
    const std::string ops(reinterpret_cast<const char*>(rest), rest_size);
    for (int n = 0; n < 64 && at < ops.size(); ++n) {
      size_t end = ops.find('\n', at);
      if (end == std::string::npos) end = ops.size();
      std::string line = ops.substr(at, end - at);
      line.erase(std::remove(line.begin(), line.end(), '\0'), line.end());
      Operate(s, line);
      at = end + 1;
    }
  }
  tinyaiDestroyPersistentStore(s);
  return 0;
}
