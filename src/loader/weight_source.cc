#include "loader/weight_source.h"

#include <cstring>

namespace tinyai {

TinyAIStatus WeightSource::Read(uint64_t offset, size_t size, void* dst, const char* source) const {
  if (memory_) {
    std::memcpy(dst, memory_ + offset, size);
    return TINYAI_OK;
  }
  return port::ReadAt(file_, offset, dst, size, source);
}

}  // namespace tinyai
