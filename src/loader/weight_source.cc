#include "loader/weight_source.h"

#include <cstring>

#include "common/status.h"

namespace tinyai {

TinyAIStatus WeightSource::Read(uint64_t offset, size_t size, void* dst, const char* source) const {
  if (size == 0) return TINYAI_OK;  // nothing to ask a callback (or the OS) for
  if (memory_) {
    std::memcpy(dst, memory_ + offset, size);
    return TINYAI_OK;
  }
  if (read_) {
    const int rc = read_(user_, offset, dst, size);
    if (rc != 0) {
      return SetError(TINYAI_ERR_IO, "'%s': the read callback returned %d for %zu bytes at offset %llu", source, rc,
                      size, static_cast<unsigned long long>(offset));
    }
    return TINYAI_OK;
  }
  return port::ReadAt(file_, offset, dst, size, source);
}

}  // namespace tinyai
