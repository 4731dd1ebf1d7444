// Slicing-by-8 software CRC-32C (reflected polynomial 0x82F63B78).
#include "common/crc32c.h"

#include <cstring>

namespace tinyai {
namespace {

struct Tables {
  uint32_t t[8][256];
  constexpr Tables() : t() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
    }
  }
};

constexpr Tables kTables;

}  // namespace

#if defined(TINYAI_CRC32C_SSE42)
namespace crc32c_internal {
uint32_t Crc32cSse42(uint32_t crc, const void* data, size_t size);
}  // namespace crc32c_internal
#endif

uint32_t Crc32cSoftware(uint32_t crc, const void* data, size_t size);

uint32_t Crc32c(uint32_t crc, const void* data, size_t size) {
#if defined(TINYAI_CRC32C_SSE42)
  static const bool hardware = __builtin_cpu_supports("sse4.2");
  if (hardware) return crc32c_internal::Crc32cSse42(crc, data, size);
#endif
  return Crc32cSoftware(crc, data, size);
}

uint32_t Crc32cSoftware(uint32_t crc, const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (size > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = kTables.t[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    --size;
  }
  const auto& t = kTables.t;
  while (size >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;  // little-endian hosts; see the static_assert in format/tmai_format.h
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    p += 8;
    size -= 8;
  }
  while (size-- > 0) c = kTables.t[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  return ~c;
}

}  // namespace tinyai
