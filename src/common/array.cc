#include "common/array.h"

#include <cstring>

#include "common/checked_math.h"
#include "common/seam.h"

namespace tinyai {

TinyAIStatus OutOfMemory(const char* what, size_t bytes) {
  char room[160];
  port::DescribeMemory(room, sizeof room);
  return SetError(TINYAI_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes%s", what, bytes, room);
}

TinyAIStatus AlignedBuffer::Allocate(size_t bytes, const char* what, Fill fill) {
  Free();
  if (bytes == 0) return TINYAI_OK;
  uint64_t rounded = AlignUp(bytes, kAlignment);
  if (rounded < bytes || rounded > SIZE_MAX) {
    return SetError(TINYAI_ERR_OVERFLOW, "%s: %zu bytes overflow the address space", what, bytes);
  }
  data_ = LedgerAlloc(kAlignment, static_cast<size_t>(rounded));
  if (!data_) return OutOfMemory(what, bytes);
  if (fill == kZeroed) std::memset(data_, 0, static_cast<size_t>(rounded));
  bytes_ = bytes;
  return TINYAI_OK;
}

void AlignedBuffer::Free() {
  if (data_) LedgerFree(data_);
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace tinyai
