// <tinyai/persistent.h>: the persistent store's C API over
// tinyai::PersistentStore (src/kv/store.h).
#include <cstring>

#include "common/live_list.h"
#include "common/memory.h"
#include "common/status.h"
#include "common/struct_size.h"
#include "kv/store.h"
#include "tinyai/persistent.h"

using tinyai::SetError;

struct TinyAIPersistentStore {
  tinyai::PersistentStore impl;
  TinyAIPersistentStore* next_live = nullptr;
};

namespace {

tinyai::LiveList<TinyAIPersistentStore> g_stores;

TinyAIStatus Check(const TinyAIPersistentStore* store, const char* call) {
  if (!store) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: store is NULL", call);
  if (!g_stores.Contains(store)) {
    return SetError(TINYAI_ERR_MISUSE, "%s: %p is not a live persistent store (destroyed already?)", call,
                    static_cast<const void*>(store));
  }
  return TINYAI_OK;
}

TinyAIStatus CheckText(const char* text, const char* what, const char* call) {
  if (!text) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: %s is NULL", call, what);
  return TINYAI_OK;
}

}  // namespace

extern "C" {

const char* tinyaiPersistentTypeName(TinyAIPersistentType type) { return tinyai::PTypeName(type); }

TinyAIPersistentConfig tinyaiCreateDefaultPersistentConfig(void) {
  TinyAIPersistentConfig c;
  std::memset(&c, 0, sizeof c);
  c.structSize = sizeof c;
  c.memoryLimit = 0;
  c.chunkRows = 64;
  return c;
}

TinyAIStatus tinyaiCreatePersistentStore(const TinyAIPersistentConfig* config, TinyAIPersistentStore** out) {
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiCreatePersistentStore: out is NULL");
  *out = nullptr;
  TinyAIPersistentConfig cfg = tinyaiCreateDefaultPersistentConfig();
  TINYAI_RETURN_IF_ERROR(tinyai::ReadVersioned(config, &cfg, TINYAI_STRUCT_MIN(TinyAIPersistentConfig, memoryLimit),
                                               "tinyaiCreatePersistentStore: config"));
  TinyAIPersistentStore* s = tinyai::New<TinyAIPersistentStore>();
  if (!s) return SetError(TINYAI_ERR_OUT_OF_MEMORY, "tinyaiCreatePersistentStore: cannot allocate the store");
  const TinyAIStatus status = s->impl.Init(cfg.memoryLimit, cfg.chunkRows);
  if (status != TINYAI_OK) {
    tinyai::Delete(s);
    return status;
  }
  g_stores.Add(s);
  *out = s;
  return TINYAI_OK;
}

void tinyaiDestroyPersistentStore(TinyAIPersistentStore* store) {
  if (!store) return;
  if (!g_stores.Remove(store)) {
    SetError(TINYAI_ERR_MISUSE, "tinyaiDestroyPersistentStore: %p is not a live persistent store (destroyed twice?)",
             static_cast<void*>(store));
    return;
  }
  tinyai::Delete(store);
}

TinyAIStatus tinyaiSetPersistentDim(TinyAIPersistentStore* store, const char* name, int64_t value) {
  TINYAI_RETURN_IF_ERROR(Check(store, "tinyaiSetPersistentDim"));
  return store->impl.SetDim(name, value);
}

TinyAIStatus tinyaiDeclarePersistent(TinyAIPersistentStore* store, const char* text) {
  TINYAI_RETURN_IF_ERROR(Check(store, "tinyaiDeclarePersistent"));
  TINYAI_RETURN_IF_ERROR(CheckText(text, "text", "tinyaiDeclarePersistent"));
  return store->impl.DeclareText(text);
}

TinyAIStatus tinyaiDeclarePersistentEntry(TinyAIPersistentStore* store, const TinyAIPersistentEntry* entry) {
  TINYAI_RETURN_IF_ERROR(Check(store, "tinyaiDeclarePersistentEntry"));
  if (!entry) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiDeclarePersistentEntry: entry is NULL");
  TinyAIPersistentEntry in;
  std::memset(&in, 0, sizeof in);
  TINYAI_RETURN_IF_ERROR(tinyai::ReadVersioned(entry, &in, TINYAI_STRUCT_MIN(TinyAIPersistentEntry, init),
                                               "tinyaiDeclarePersistentEntry: entry"));
  tinyai::PDecl d;
  if (const char* problem = tinyai::PNameProblem(in.name)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiDeclarePersistentEntry: the name '%s' %s",
                    tinyai::Excerpt(in.name).text, problem);
  }
  std::memcpy(d.name, in.name, std::strlen(in.name));
  d.dtype = in.dtype;
  d.rank = in.rank;
  d.index_count = in.indexCount;
  d.auto_count = in.autoDimCount;
  d.has_init = in.hasInit != 0;
  d.init = in.init;
  if (d.rank < 0 || d.rank > tinyai::kMaxPRank || d.index_count < 0 || d.index_count > tinyai::kMaxPIndices) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiDeclarePersistentEntry: '%s': rank %d, %d indices (at most "
                    "%d and %d)", d.name, static_cast<int>(d.rank), static_cast<int>(d.index_count), tinyai::kMaxPRank,
                    tinyai::kMaxPIndices);
  }
  for (int32_t i = 0; i < d.rank; ++i) d.shape[i] = in.shape[i];
  for (int32_t i = 0; i < d.index_count; ++i) {
    const char* n = in.indexNames[i];
    if (const char* problem = tinyai::PNameProblem(n)) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiDeclarePersistentEntry: '%s': index %d's name '%s' %s",
                      d.name, static_cast<int>(i), tinyai::Excerpt(n).text, problem);
    }
    std::memcpy(d.index_names[i], n, std::strlen(n));
    d.fixed[i] = in.fixedExtent[i];
  }
  return store->impl.Declare(d);
}

TinyAIStatus tinyaiPersistentRead(const TinyAIPersistentStore* store, const char* ref, TinyAIPersistentType dtype,
                                  void* out, size_t capacity, size_t* bytes) {
  if (bytes) *bytes = 0;
  TINYAI_RETURN_IF_ERROR(Check(store, "tinyaiPersistentRead"));
  TINYAI_RETURN_IF_ERROR(CheckText(ref, "ref", "tinyaiPersistentRead"));
  return store->impl.Read(ref, dtype, out, capacity, bytes);
}

TinyAIStatus tinyaiPersistentWrite(TinyAIPersistentStore* store, const char* ref, TinyAIPersistentType dtype,
                                   const void* data, size_t bytes) {
  TINYAI_RETURN_IF_ERROR(Check(store, "tinyaiPersistentWrite"));
  TINYAI_RETURN_IF_ERROR(CheckText(ref, "ref", "tinyaiPersistentWrite"));
  return store->impl.Write(ref, dtype, data, bytes);
}

TinyAIStatus tinyaiPersistentIncrement(TinyAIPersistentStore* store, const char* name, int64_t n) {
  TINYAI_RETURN_IF_ERROR(Check(store, "tinyaiPersistentIncrement"));
  TINYAI_RETURN_IF_ERROR(CheckText(name, "name", "tinyaiPersistentIncrement"));
  if (n < 0) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiPersistentIncrement: n is %lld; it is at least 0 "
                             "(tinyaiPersistentDecrement goes down)", static_cast<long long>(n));
  return store->impl.Add(name, n);
}

TinyAIStatus tinyaiPersistentDecrement(TinyAIPersistentStore* store, const char* name, int64_t n) {
  TINYAI_RETURN_IF_ERROR(Check(store, "tinyaiPersistentDecrement"));
  TINYAI_RETURN_IF_ERROR(CheckText(name, "name", "tinyaiPersistentDecrement"));
  if (n < 0) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiPersistentDecrement: n is %lld; it is at least 0",
                             static_cast<long long>(n));
  return store->impl.Add(name, -n);
}

TinyAIStatus tinyaiPersistentReset(TinyAIPersistentStore* store, const char* ref) {
  TINYAI_RETURN_IF_ERROR(Check(store, "tinyaiPersistentReset"));
  return store->impl.Reset(ref);
}

TinyAIStatus tinyaiGetPersistentEntry(const TinyAIPersistentStore* store, const char* name, TinyAIPersistentEntry* out) {
  TINYAI_RETURN_IF_ERROR(Check(store, "tinyaiGetPersistentEntry"));
  TINYAI_RETURN_IF_ERROR(CheckText(name, "name", "tinyaiGetPersistentEntry"));
  TINYAI_RETURN_IF_ERROR(tinyai::CheckOutputSize(out, TINYAI_STRUCT_MIN(TinyAIPersistentEntry, name),
                                                 "tinyaiGetPersistentEntry: out"));
  const tinyai::PersistentStore& s = store->impl;
  int32_t e = -1;
  TINYAI_RETURN_IF_ERROR(s.FindEntry(name, "tinyaiGetPersistentEntry", &e));
  const tinyai::PDecl& d = s.decl(e);
  TinyAIPersistentEntry info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  info.name = d.name;
  info.dtype = static_cast<TinyAIPersistentType>(d.dtype);
  info.rank = d.rank;
  for (int32_t i = 0; i < d.rank; ++i) info.shape[i] = d.shape[i];
  info.indexCount = d.index_count;
  for (int32_t i = 0; i < d.index_count; ++i) {
    info.indexNames[i] = d.index_names[i];
    info.fixedExtent[i] = d.fixed[i];
  }
  info.autoDimCount = d.auto_count;
  info.hasInit = d.has_init ? 1 : 0;
  info.init = d.init;
  s.Extents(e, info.extent);
  s.AutoShape(e, nullptr, info.currentShape);
  info.bytes = s.EntryBytes(e);
  tinyai::WriteVersioned(info, out);
  return TINYAI_OK;
}

int32_t tinyaiGetPersistentEntryCount(const TinyAIPersistentStore* store) {
  if (Check(store, "tinyaiGetPersistentEntryCount") != TINYAI_OK) return -1;
  return store->impl.count();
}

const char* tinyaiGetPersistentEntryName(const TinyAIPersistentStore* store, int32_t index) {
  if (Check(store, "tinyaiGetPersistentEntryName") != TINYAI_OK) return nullptr;
  if (index < 0 || index >= store->impl.count()) {
    SetError(TINYAI_ERR_OUT_OF_BOUNDS, "tinyaiGetPersistentEntryName: index %d of %d entries", static_cast<int>(index),
             static_cast<int>(store->impl.count()));
    return nullptr;
  }
  return store->impl.decl(index).name;
}

uint64_t tinyaiGetPersistentMemoryUsage(const TinyAIPersistentStore* store) {
  if (Check(store, "tinyaiGetPersistentMemoryUsage") != TINYAI_OK) return 0;
  return store->impl.used();
}

TinyAIStatus tinyaiSavePersistentStore(const TinyAIPersistentStore* store, const char* path) {
  TINYAI_RETURN_IF_ERROR(Check(store, "tinyaiSavePersistentStore"));
  return store->impl.Save(path);
}

TinyAIStatus tinyaiLoadPersistentStore(TinyAIPersistentStore* store, const char* path) {
  TINYAI_RETURN_IF_ERROR(Check(store, "tinyaiLoadPersistentStore"));
  return store->impl.Load(path);
}

}  // extern "C"
