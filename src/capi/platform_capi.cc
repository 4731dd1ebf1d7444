// extern "C" shims of <tinyai/platform.h>: the static arena and clock of
// ports without an OS.
#include <cstring>

#include "common/status.h"
#include "common/struct_size.h"
#include "port/port.h"
#include "tinyai/platform.h"

using tinyai::SetError;

namespace {

TinyAIStatus ArenaStats(const char* call, tinyai::port::ArenaStats* out) {
  const TinyAIStatus s = tinyai::port::GetArenaStats(out);
  if (s == TINYAI_ERR_UNSUPPORTED) {
    return SetError(s, "%s: this port allocates from a heap; a static arena needs the baremetal port", call);
  }
  if (s != TINYAI_OK) return SetError(s, "%s: no static arena yet; call tinyaiSetStaticArena first", call);
  return TINYAI_OK;
}

}  // namespace

extern "C" {

TinyAIStatus tinyaiSetStaticArena(void* arena, size_t size) { return tinyai::port::SetArena(arena, size); }

TinyAIStatus tinyaiGetStaticArenaStats(TinyAIArenaStats* out) {
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetStaticArenaStats: out is NULL");
  TINYAI_RETURN_IF_ERROR(
      tinyai::CheckOutputSize(out, TINYAI_STRUCT_MIN(TinyAIArenaStats, size), "tinyaiGetStaticArenaStats: out"));
  tinyai::port::ArenaStats st;
  TINYAI_RETURN_IF_ERROR(ArenaStats("tinyaiGetStaticArenaStats", &st));
  TinyAIArenaStats full;
  std::memset(&full, 0, sizeof full);
  full.structSize = sizeof full;
  full.size = st.size;
  full.usedBytes = st.used;
  full.peakBytes = st.peak;
  full.allocations = st.allocations;
  full.failures = st.failures;
  tinyai::WriteVersioned(full, out);
  return TINYAI_OK;
}

TinyAIStatus tinyaiEstimateStaticArena(const void* image, size_t size, TinyAIReadCallback read, void* user,
                                       const TinyAIMmapConfig* mmapConfig, const TinyAILLMConfig* llmConfig,
                                       size_t* bytes) {
  if (!bytes) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiEstimateStaticArena: bytes is NULL");
  *bytes = 0;
  if ((image == nullptr) == (read == nullptr)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiEstimateStaticArena: give exactly one of image and read");
  }
  tinyai::port::ArenaStats st;
  TINYAI_RETURN_IF_ERROR(ArenaStats("tinyaiEstimateStaticArena", &st));
  // Measure from the current top: what the open and the create reach.
  const size_t earlier_peak = st.peak;
  tinyai::port::SetArenaPeak(tinyai::port::ArenaTop());
  TinyAIMappedModel* model = image ? tinyaiOpenMappedModelFromMemory(image, size, mmapConfig)
                                   : tinyaiOpenMappedModelFromReader(read, user, size, mmapConfig);
  TinyAIStatus s = model ? TINYAI_OK : tinyaiGetLastError();
  TinyAILLM* llm = nullptr;
  if (s == TINYAI_OK) s = tinyaiCreateLLM(model, llmConfig, &llm);
  tinyai::port::GetArenaStats(&st);
  const size_t reached = st.peak;
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);
  tinyai::port::SetArenaPeak(reached > earlier_peak ? reached : earlier_peak);
  if (s != TINYAI_OK) return s;
  *bytes = reached;
  return TINYAI_OK;
}

TinyAIStatus tinyaiSetClock(uint64_t (*nowNanos)(void)) { return tinyai::port::SetClock(nowNanos); }

}  // extern "C"
