// Build-time platform switches. The build system defines TINYAI_WITH_THREADS
// (0 for ports without threads, e.g. bare metal).
#ifndef TINYAI_COMMON_CONFIG_H_
#define TINYAI_COMMON_CONFIG_H_

#ifndef TINYAI_WITH_THREADS
#define TINYAI_WITH_THREADS 1
#endif

#if TINYAI_WITH_THREADS
#define TINYAI_THREAD_LOCAL thread_local
#else
#define TINYAI_THREAD_LOCAL
#endif

#if defined(NDEBUG)
#define TINYAI_DCHECK(cond) ((void)0)
#else
#include <cassert>
#define TINYAI_DCHECK(cond) assert(cond)
#endif

#endif  // TINYAI_COMMON_CONFIG_H_
