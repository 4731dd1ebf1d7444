// CRC-32C with the SSE4.2 crc32 instruction (compiled with -msse4.2; called
// only after a run-time check), 8 bytes per instruction in one stream.
#include <nmmintrin.h>

#include <cstring>

#include "common/crc32c.h"

namespace tinyai {
namespace crc32c_internal {

uint32_t Crc32cSse42(uint32_t crc, const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint64_t c = ~crc & 0xffffffffu;
  while (size > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --size;
  }
  while (size >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    size -= 8;
  }
  while (size-- > 0) c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
  return ~static_cast<uint32_t>(c);
}

}  // namespace crc32c_internal
}  // namespace tinyai
