/*
 * tinyai/tinyai.h - the umbrella header: version, status codes, process
 * memory figures, and every public API.
 *
 * TinyAI runs LLaMA-style language models (and small dense networks) inside a
 * named memory budget. Start with <tinyai/utils/mmap_loader.h> to open a
 * .tmai model and <tinyai/llm.h> to generate text with it.
 */
#ifndef TINYAI_TINYAI_H
#define TINYAI_TINYAI_H

#include <stdint.h>

#include "llm.h"
#include "memory.h"
#include "persistent.h"
#include "platform.h"
#include "status.h"
#include "types.h"
#include "utils/forward_scheduler.h"
#include "utils/mmap_loader.h"
#include "utils/prune.h"
#include "utils/quantize_mixed.h"

#define TINYAI_VERSION_MAJOR 0
#define TINYAI_VERSION_MINOR 1
#define TINYAI_VERSION_PATCH 0
#define TINYAI_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the library linked in, e.g. "0.1.0". */
TINYAI_API const char* tinyaiVersionString(void);

/* Highest .tmai format version this library reads. */
TINYAI_API uint32_t tinyaiFormatVersion(void);

/* Peak and current resident set size of this process in bytes, as the OS
 * reports them (VmHWM / VmRSS on Linux); 0 where the port cannot tell. */
TINYAI_API uint64_t tinyaiGetProcessPeakRss(void);
TINYAI_API uint64_t tinyaiGetProcessCurrentRss(void);

#ifdef __cplusplus
}
#endif

#endif /* TINYAI_TINYAI_H */
