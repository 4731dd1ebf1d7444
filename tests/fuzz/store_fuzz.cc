// libFuzzer target: the persistent store (<tinyai/persistent.h>) - its
// declaration text, its references, and its saved files.
//
// The input is DECLARATIONS '\0' REST. An empty DECLARATIONS stands for a
// set of every kind of entry. REST is either a saved store (starting with
// "TPS1", loaded into the declared store) or lines of operations, each an
// op letter and a reference: r(ead) w(rite) i(ncrement) d(ecrement)
// z (reset).
//
//  - Every call returns TINYAI_OK or a specific error with a message.
//  - The store never holds more than its memoryLimit, and the bytes its
//    entries report add up to what it says it holds.
//  - A write that fails changes nothing; one that succeeds reads back.
//  - A load that fails leaves the store as it was; one that succeeds saves
//    and loads again to the same contents.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tinyai/persistent.h"

namespace {

using tinyai_fuzz::CheckFailure;

constexpr size_t kLimit = 64 * 1024;

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
    "}";

std::string Contents(TinyAIPersistentStore* s) {
  std::string all;
  std::vector<uint8_t> buf(kLimit * 2);
  for (int32_t i = 0; i < tinyaiGetPersistentEntryCount(s); ++i) {
    const char* name = tinyaiGetPersistentEntryName(s, i);
    TinyAIPersistentEntry e;
    std::memset(&e, 0, sizeof e);
    e.structSize = sizeof e;
    FUZZ_CHECK(tinyaiGetPersistentEntry(s, name, &e) == TINYAI_OK, "entry %s", name);
    size_t bytes = 0;
    const TinyAIStatus st = tinyaiPersistentRead(s, name, e.dtype, buf.data(), buf.size(), &bytes);
    FUZZ_CHECK(st == TINYAI_OK, "reading all of %s", name);
    all += std::string(name) + ":" + std::string(reinterpret_cast<const char*>(buf.data()), bytes) + "|";
  }
  return all;
}

void CheckAccounts(TinyAIPersistentStore* s) {
  const uint64_t used = tinyaiGetPersistentMemoryUsage(s);
  FUZZ_CHECK(used <= kLimit, "the store holds %llu bytes past its limit %zu", static_cast<unsigned long long>(used), kLimit);
  uint64_t sum = 0;
  for (int32_t i = 0; i < tinyaiGetPersistentEntryCount(s); ++i) {
    TinyAIPersistentEntry e;
    std::memset(&e, 0, sizeof e);
    e.structSize = sizeof e;
    FUZZ_CHECK(tinyaiGetPersistentEntry(s, tinyaiGetPersistentEntryName(s, i), &e) == TINYAI_OK, "entry %d", i);
    sum += e.bytes;
  }
  FUZZ_CHECK(sum == used, "entries hold %llu bytes; the store says %llu", static_cast<unsigned long long>(sum),
             static_cast<unsigned long long>(used));
}

TinyAIPersistentStore* Declared(const std::string& text) {
  TinyAIPersistentConfig cfg = tinyaiCreateDefaultPersistentConfig();
  cfg.memoryLimit = kLimit;
  cfg.chunkRows = 4;
  TinyAIPersistentStore* s = nullptr;
  FUZZ_CHECK(tinyaiCreatePersistentStore(&cfg, &s) == TINYAI_OK, "create");
  tinyaiSetPersistentDim(s, "D", 3);
  tinyaiSetPersistentDim(s, "H", 2);
  const TinyAIStatus st = tinyaiDeclarePersistent(s, text.c_str());
  if (st != TINYAI_OK) {
    CheckFailure(st, "tinyaiDeclarePersistent");
    FUZZ_CHECK(std::strncmp(tinyaiGetLastErrorMessage(), "line ", 5) == 0 || st == TINYAI_ERR_RESOURCE_EXHAUSTED,
               "a declaration error names no line: %s", tinyaiGetLastErrorMessage());
    FUZZ_CHECK(tinyaiGetPersistentEntryCount(s) == 0, "a refused text declared entries");
    FUZZ_CHECK(tinyaiGetPersistentMemoryUsage(s) == 0, "a refused text holds memory");
  }
  CheckAccounts(s);
  return s;
}

void Operate(TinyAIPersistentStore* s, const std::string& line) {
  if (line.size() < 2) return;
  const char op = line[0];
  const std::string ref = line.substr(1);
  std::vector<uint8_t> buf(kLimit * 2);
  TinyAIPersistentEntry e;
  std::memset(&e, 0, sizeof e);
  e.structSize = sizeof e;
  // The entry's type (the name before any '[').
  const std::string name = ref.substr(0, ref.find('['));
  const TinyAIPersistentType dtype =
      tinyaiGetPersistentEntry(s, name.c_str(), &e) == TINYAI_OK ? e.dtype : TINYAI_PTYPE_F32;
  size_t bytes = 0;
  TinyAIStatus st = TINYAI_OK;
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
      const std::string before = Contents(s);
      const uint64_t used = tinyaiGetPersistentMemoryUsage(s);
      st = tinyaiPersistentWrite(s, ref.c_str(), dtype, buf.data(), bytes);
      if (st != TINYAI_OK) {
        FUZZ_CHECK(Contents(s) == before, "a refused write (%s) changed the store", ref.c_str());
        FUZZ_CHECK(tinyaiGetPersistentMemoryUsage(s) == used, "a refused write changed the memory held");
      } else {
        std::vector<uint8_t> back(bytes + 1);
        size_t got = 0;
        FUZZ_CHECK(tinyaiPersistentRead(s, ref.c_str(), dtype, back.data(), back.size(), &got) == TINYAI_OK,
                   "a written slice (%s) does not read", ref.c_str());
        FUZZ_CHECK(got == bytes && std::memcmp(back.data(), buf.data(), bytes) == 0, "%s reads back otherwise",
                   ref.c_str());
      }
      break;
    }
    case 'i': st = tinyaiPersistentIncrement(s, ref.c_str(), static_cast<int64_t>(line.size())); break;
    case 'd': st = tinyaiPersistentDecrement(s, ref.c_str(), static_cast<int64_t>(line.size() % 3)); break;
    case 'z': st = tinyaiPersistentReset(s, ref.c_str()); break;
    default: return;
  }
  if (st != TINYAI_OK) CheckFailure(st, "an operation");
  CheckAccounts(s);
}

void WriteSeeds(const char* dir) {
  const std::string ops =
      std::string("\0", 1) +
      "wA[0]\nwA[step]\nistep\nwA[step]\nrA[0..-1]\nwB[2, 3]\nrB[1]\nwK[1, 7]\nzK[1]\nwM[2, ]\nwM[, 2]\nrM[1..3, ]\n"
      "wN[1, ]\nwN[, 1]\nwC[3, 1]\nrC[]\ndstep\nzA\nz\n";
  tinyai_fuzz::WriteSeed(dir, "ops.txt", ops.data(), ops.size());
  const std::string decl = "persistent {\n  x: f32 @init(1.0)\n  A(i): f32[D] @table\n}" + std::string("\0", 1) + "wA[0]\nix\nrA[]\n";
  tinyai_fuzz::WriteSeed(dir, "decl.txt", decl.data(), decl.size());
  TinyAIPersistentStore* s = Declared(kDefault);
  for (const char* line : {"wA[0]", "wA[5]", "wB[1, 2]", "wK[0, 3]", "wM[2, ]", "wC[2, 1]", "wN[, 1]"}) Operate(s, line);
  tinyaiPersistentIncrement(s, "step", 3);
  const std::string path = tinyai_fuzz::ScratchDir::Get().File("seed.tps");
  FUZZ_CHECK(tinyaiSavePersistentStore(s, path.c_str()) == TINYAI_OK, "save");
  std::vector<uint8_t> file;
  FUZZ_CHECK(tinyai_fuzz::ReadFile(path, &file), "read %s", path.c_str());
  file.insert(file.begin(), 0);
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
  if (text.empty()) text = kDefault;
  const uint8_t* rest = nul ? nul + 1 : data + size;
  const size_t rest_size = static_cast<size_t>(data + size - rest);
  tinyaiClearLastError();
  TinyAIPersistentStore* s = Declared(text);
  if (rest_size >= 4 && std::memcmp(rest, "TPS1", 4) == 0) {
    const tinyai_fuzz::ScratchDir& dir = tinyai_fuzz::ScratchDir::Get();
    const std::string in = dir.File("in.tps"), again = dir.File("again.tps");
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
      FUZZ_CHECK(tinyaiSavePersistentStore(s, again.c_str()) == TINYAI_OK, "a loaded store does not save");
      TinyAIPersistentStore* t = Declared(text);
      FUZZ_CHECK(tinyaiLoadPersistentStore(t, again.c_str()) == TINYAI_OK, "a saved store does not load");
      FUZZ_CHECK(Contents(t) == Contents(s), "a store saved and loaded differs");
      tinyaiDestroyPersistentStore(t);
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
