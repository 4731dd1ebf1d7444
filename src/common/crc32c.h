// CRC-32C (Castagnoli), the checksum of every tensor in a .tmai file.
#ifndef TINYAI_COMMON_CRC32C_H_
#define TINYAI_COMMON_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace tinyai {

// Continues a CRC: Crc32c(Crc32c(0, a), b) == CRC of a followed by b.
// Uses the CPU's CRC instruction where the build has one (x86-64 SSE4.2,
// checked at run time), else slicing-by-8 tables.
uint32_t Crc32c(uint32_t crc, const void* data, size_t size);

// The table implementation, always available (the oracle in tests).
uint32_t Crc32cSoftware(uint32_t crc, const void* data, size_t size);

}  // namespace tinyai

#endif  // TINYAI_COMMON_CRC32C_H_
