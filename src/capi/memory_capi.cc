// extern "C" shims of <tinyai/memory.h>: the memory limit the system allows
// this process (port::ReadMemoryBounds), less the process overhead.
#include <cstdint>
#include <cstring>

#include "capi/memory_env.h"
#include "common/ledger.h"
#include "common/status.h"
#include "common/struct_size.h"
#include "port/port.h"
#include "tinyai/memory.h"

namespace tinyai {

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
}  // namespace

TinyAIStatus DetectMemoryLimit(const char* root, TinyAIMemoryEnvironment* env) {
  std::memset(env, 0, sizeof *env);
  env->structSize = sizeof *env;
  env->overheadBytes = TINYAI_PROCESS_OVERHEAD_BYTES;
  port::MemoryBounds b;
  if (port::ReadMemoryBounds(root, &b) != TINYAI_OK) {
    return SetError(TINYAI_ERR_UNSUPPORTED,
                    "tinyaiDetectMemoryLimit: this system shows no memory bound (no /proc/meminfo, no memory "
                    "cgroup with a limit); give the limit yourself (TinyAILLMConfig.memoryLimit, --mem-limit SIZE)");
  }
  uint64_t room = UINT64_MAX;
  if (b.cgroup_version != 0) {
    const uint64_t held = b.cgroup_usage - b.cgroup_reclaimable;
    room = held < b.cgroup_limit ? b.cgroup_limit - held : 0;
    env->source = b.cgroup_version == 1 ? TINYAI_MEMORY_SOURCE_CGROUP_V1 : TINYAI_MEMORY_SOURCE_CGROUP_V2;
    env->cgroupLimitBytes = b.cgroup_limit;
    env->cgroupUsageBytes = b.cgroup_usage;
    env->cgroupReclaimableBytes = b.cgroup_reclaimable;
    std::memcpy(env->cgroupPath, b.cgroup_dir, sizeof env->cgroupPath);
    env->cgroupPath[sizeof env->cgroupPath - 1] = '\0';
  }
  env->systemAvailableBytes = b.system_available;
  if (b.system_available != 0 && b.system_available < room) {
    room = b.system_available;
    env->source = TINYAI_MEMORY_SOURCE_SYSTEM;
  }
  if (room > SIZE_MAX) room = SIZE_MAX;
  env->roomBytes = static_cast<size_t>(room);
  if (env->roomBytes <= env->overheadBytes) {
    ErrorDetail d;
    d.resource = TINYAI_RESOURCE_SYSTEM;
    d.stage = TINYAI_STAGE_ENVIRONMENT;
    d.needed = env->overheadBytes + 1;  // the overhead and a byte for TinyAI
    d.limit = env->roomBytes;
    d.remedy = TINYAI_REMEDY_FREE_MEMORY;
    d.remedy_value = d.needed - d.limit;
    if (env->source == TINYAI_MEMORY_SOURCE_SYSTEM) {
      SetError(TINYAI_ERR_RESOURCE_EXHAUSTED,
                      "tinyaiDetectMemoryLimit: the system has %.1f MiB available (MemAvailable), no more than the "
                      "%.1f MiB a process needs beyond TinyAI; free memory or give a limit yourself",
                      static_cast<double>(env->roomBytes) / kMiB, static_cast<double>(env->overheadBytes) / kMiB);
      return SetErrorDetail(d);
    }
    SetError(TINYAI_ERR_RESOURCE_EXHAUSTED,
                    "tinyaiDetectMemoryLimit: the memory cgroup %s allows %.1f MiB and holds %.1f MiB (%.1f MiB of it "
                    "page cache it can give back): %.1f MiB of room, no more than the %.1f MiB a process needs beyond "
                    "TinyAI; raise the cgroup's limit by %.1f MiB or more",
                    env->cgroupPath, static_cast<double>(b.cgroup_limit) / kMiB,
                    static_cast<double>(b.cgroup_usage) / kMiB, static_cast<double>(b.cgroup_reclaimable) / kMiB,
                    static_cast<double>(env->roomBytes) / kMiB, static_cast<double>(env->overheadBytes) / kMiB,
                    static_cast<double>(env->overheadBytes - env->roomBytes) / kMiB + 1.0);
    return SetErrorDetail(d);
  }
  env->limitBytes = env->roomBytes - env->overheadBytes;
  return TINYAI_OK;
}

}  // namespace tinyai

extern "C" {

TinyAIStatus tinyaiDetectMemoryLimit(TinyAIMemoryEnvironment* out) {
  if (!out) return tinyai::SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiDetectMemoryLimit: out is NULL");
  TINYAI_RETURN_IF_ERROR(tinyai::CheckOutputSize(out, TINYAI_STRUCT_MIN(TinyAIMemoryEnvironment, limitBytes),
                                                 "tinyaiDetectMemoryLimit: out"));
  TinyAIMemoryEnvironment full;
  const TinyAIStatus s = tinyai::DetectMemoryLimit("", &full);
  tinyai::WriteVersioned(full, out);
  return s;
}

}  // extern "C"

extern "C" {

TinyAIStatus tinyaiSetMemoryObserver(TinyAIMemoryObserver observer, void* user, int32_t everyTokens) {
  if (everyTokens < 0) {
    return tinyai::SetError(TINYAI_ERR_INVALID_ARGUMENT,
                            "tinyaiSetMemoryObserver: everyTokens is %d; give 0 (stages only) or a positive count",
                            static_cast<int>(everyTokens));
  }
  tinyai::SetLedgerObserver(observer, user, everyTokens);
  return TINYAI_OK;
}

TinyAIStatus tinyaiGetMemorySnapshot(TinyAIMemorySnapshot* out) {
  if (!out) return tinyai::SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetMemorySnapshot: out is NULL");
  TINYAI_RETURN_IF_ERROR(tinyai::CheckOutputSize(out, TINYAI_STRUCT_MIN(TinyAIMemorySnapshot, peakRssBytes),
                                                  "tinyaiGetMemorySnapshot: out"));
  TinyAIMemorySnapshot s;
  tinyai::FillMemorySnapshot(TINYAI_MEMORY_STAGE_NOW, -1, &s);
  tinyai::WriteVersioned(s, out);
  return TINYAI_OK;
}

}  // extern "C"
