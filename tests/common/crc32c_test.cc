#include "common/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace tinyai {
namespace {

TEST(Crc32c, KnownVectors) {
  // RFC 3720 (iSCSI) B.4 test vectors.
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), inc(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Crc32c(0, zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(0, ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(0, inc.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(0, "123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c(0, nullptr, 0), 0u);
}

TEST(Crc32c, HardwareAndSoftwareAgreeAtEveryAlignmentAndLength) {
  std::vector<uint8_t> buf(4096 + 16);
  uint32_t x = 1;
  for (auto& b : buf) b = static_cast<uint8_t>((x = x * 1664525u + 1013904223u) >> 24);
  for (size_t offset = 0; offset < 16; ++offset) {
    for (size_t len : {0u, 1u, 7u, 8u, 9u, 63u, 64u, 65u, 1000u, 4096u}) {
      ASSERT_EQ(Crc32c(0, buf.data() + offset, len), Crc32cSoftware(0, buf.data() + offset, len))
          << "offset " << offset << " len " << len;
    }
  }
}

TEST(Crc32c, ContinuesAcrossChunks) {
  const char* text = "The quick brown fox jumps over the lazy dog";
  size_t n = std::strlen(text);
  uint32_t whole = Crc32c(0, text, n);
  for (size_t split = 0; split <= n; ++split) {
    EXPECT_EQ(Crc32c(Crc32c(0, text, split), text + split, n - split), whole) << split;
  }
}

}  // namespace
}  // namespace tinyai
