// Checks for NaN and infinity in computed values (logits, network outputs).
#ifndef TINYAI_COMMON_FINITE_H_
#define TINYAI_COMMON_FINITE_H_

#include <cmath>
#include <cstddef>

#include "tinyai/status.h"

namespace tinyai {

// TINYAI_ERR_NOT_FINITE (no message) with *at the first of n values that is
// NaN or infinite; TINYAI_OK when every one is finite.
inline TinyAIStatus CheckFinite(const float* values, size_t n, size_t* at) {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(values[i])) {
      *at = i;
      return TINYAI_ERR_NOT_FINITE;
    }
  }
  return TINYAI_OK;
}

}  // namespace tinyai

#endif  // TINYAI_COMMON_FINITE_H_
