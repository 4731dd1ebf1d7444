/*
 * tinyai/status.h - status codes and the per-thread last error.
 *
 * Every TinyAI function either returns a TinyAIStatus or, where the guide's
 * contract returns a pointer or a count, records one: after a NULL handle or
 * a negative count, tinyaiGetLastError() says what failed and
 * tinyaiGetLastErrorMessage() says why (errno / dlerror style).
 *
 * Values are pinned forever: 0 is success, errors are negative, and new codes
 * are only ever appended. Positive values are outcomes that are not errors
 * but not a plain success either (TINYAI_STOPPED): test `status < 0` for
 * failure, `status != TINYAI_OK` for anything but a plain success.
 */
#ifndef TINYAI_STATUS_H
#define TINYAI_STATUS_H

#include "api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The public enums have int as their fixed underlying type in C++, as they
 * have in C: any int a C caller stores in one (a mode of 7 in a config) is a
 * value C++ may load, and TinyAI checks it and answers with
 * TINYAI_ERR_INVALID_ARGUMENT, instead of the undefined behaviour of an
 * enum read outside its enumerators' range. */
#ifndef TINYAI_ENUM_BASE
#ifdef __cplusplus
#define TINYAI_ENUM_BASE : int
#else
#define TINYAI_ENUM_BASE
#endif
#endif

typedef enum TinyAIStatus TINYAI_ENUM_BASE {
    TINYAI_OK = 0,
    TINYAI_ERR_INVALID_ARGUMENT = -1,    /* NULL or out-of-range argument */
    TINYAI_ERR_OUT_OF_MEMORY = -2,       /* the allocator returned NULL */
    TINYAI_ERR_RESOURCE_EXHAUSTED = -3,  /* a memory budget (limit, cache cap, arena) is too small */
    TINYAI_ERR_FILE_NOT_FOUND = -4,      /* no file at the given path */
    TINYAI_ERR_IO = -5,                  /* open/read/map failed */
    TINYAI_ERR_BAD_MAGIC = -6,           /* not a .tmai file */
    TINYAI_ERR_UNSUPPORTED_VERSION = -7, /* .tmai version newer than this library */
    TINYAI_ERR_TRUNCATED = -8,           /* file shorter than its contents claim (empty included) */
    TINYAI_ERR_OUT_OF_BOUNDS = -9,       /* an offset or size points outside its section */
    TINYAI_ERR_OVERFLOW = -10,           /* a size or element count overflows */
    TINYAI_ERR_CHECKSUM = -11,           /* stored data does not match its checksum */
    TINYAI_ERR_BAD_FORMAT = -12,         /* any other malformed structure */
    TINYAI_ERR_BAD_TOKENIZER = -13,      /* impossible tokenizer data */
    TINYAI_ERR_CONTEXT_OVERFLOW = -14,   /* more tokens than the context holds */
    TINYAI_ERR_UNSUPPORTED = -15,        /* valid but not supported (dtype, codec, arch) */
    TINYAI_ERR_MISUSE = -16,             /* API called in the wrong state, or given a handle that
                                            is not live (closed, destroyed, never created) */
    TINYAI_ERR_NOT_FOUND = -17,          /* a named tensor or key does not exist */
    TINYAI_ERR_INTERNAL = -18,           /* a bug in TinyAI: please report it */
    TINYAI_ERR_GRAPH_CYCLE = -19,        /* a schedule's dependencies form a cycle (a layer on itself included) */
    TINYAI_ERR_MISSING_DEPENDENCY = -20, /* a scheduled layer depends on a layer never added to the schedule */
    TINYAI_ERR_NOT_FINITE = -21,         /* a computation produced NaN or infinity (bad weights or inputs) */
    TINYAI_ERR_BUFFER_TOO_SMALL = -22,   /* the caller's buffer is too small; the call's size argument
                                            (count, len, needed, outLen) says how much it needs */
    TINYAI_ERR_MISMATCH = -23,           /* saved state belongs to another model or declaration
                                            (a session of another model, KV type or layout) */
    TINYAI_STOPPED = 1                   /* not an error: the caller's callback asked to stop; what was
                                            produced so far is complete and valid */
} TinyAIStatus;

/* Static name of a status, e.g. "TINYAI_ERR_BAD_MAGIC". Never NULL. */
TINYAI_API const char* tinyaiStatusString(TinyAIStatus status);

/* Status recorded by the last failing TinyAI call on this thread
 * (TINYAI_OK if none failed since tinyaiClearLastError()). */
TINYAI_API TinyAIStatus tinyaiGetLastError(void);

/* Human-readable cause of the last failure on this thread, naming the file,
 * tensor, argument or byte counts involved. Owned by TinyAI, valid until the
 * next failing call on this thread. Never NULL ("" when there is none). */
TINYAI_API const char* tinyaiGetLastErrorMessage(void);

TINYAI_API void tinyaiClearLastError(void);

#ifdef __cplusplus
}
#endif

#endif /* TINYAI_STATUS_H */
