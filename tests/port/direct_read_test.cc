// Direct reads (port::EnableDirectReads, port::ReadDirect): where the file
// system takes them, whole aligned blocks come from storage into the
// caller's memory; a read past the file's end stops there; a misaligned
// request, a file without them or a file changed under them still reads the
// right bytes or says what went wrong. Run on the file system of the test's
// temporary folder ($TINYAI_TEST_DATA or $TMPDIR): where it has no direct
// reads (tmpfs), the fallback paths are what is checked.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/status.h"
#include "format/test_models.h"
#include "port/port.h"
#include "tinyai/tinyai.h"

namespace tt = tinyai::testing;
namespace port = tinyai::port;

namespace {

std::vector<uint8_t> Pattern(size_t n) {
  std::vector<uint8_t> b(n);
  uint32_t x = 2463534242u;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b[i] = static_cast<uint8_t>(x);
  }
  return b;
}

void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  ASSERT_EQ(std::fclose(f), 0);
}

// Memory aligned for any direct read (a page's worth is more than any
// file system asks).
struct AlignedBuffer {
  explicit AlignedBuffer(size_t n) : size(n) {
    void* p = nullptr;
    if (posix_memalign(&p, 65536, n) == 0) data = static_cast<uint8_t*>(p);
    if (data) std::memset(data, 0xAB, n);
  }
  ~AlignedBuffer() { free(data); }
  uint8_t* data = nullptr;
  size_t size;
};

class DirectReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("weights.bin");
    bytes_ = Pattern(kSize);
    ASSERT_NO_FATAL_FAILURE(WriteFile(path_, bytes_));
    ASSERT_EQ(port::OpenFile(path_.c_str(), &file_), TINYAI_OK) << tinyaiGetLastErrorMessage();
  }
  void TearDown() override { port::CloseFile(&file_); }

  // 9 blocks of 4 KiB and a tail: the last block is partial.
  static constexpr size_t kSize = 9 * 4096 + 1234;
  tt::TempDir dir_;
  std::string path_;
  std::vector<uint8_t> bytes_;
  port::File file_;
};

TEST_F(DirectReadTest, AlignedBlocksReadTheFilesBytes) {
  const bool direct = port::EnableDirectReads(path_.c_str(), &file_);
  std::printf("[ direct   ] %s: %s (alignment %u)\n", dir_.path().c_str(), direct ? "direct reads" : "none: buffered",
              file_.direct_align);
  if (direct) {
    EXPECT_GE(file_.direct_align, 512u);
    EXPECT_EQ(file_.direct_align & (file_.direct_align - 1), 0u) << "a power of two";
    EXPECT_TRUE(port::EnableDirectReads(path_.c_str(), &file_)) << "enabling twice keeps the handle";
  } else {
    EXPECT_EQ(file_.direct, -1);
    EXPECT_EQ(file_.direct_align, 0u);
  }
  const size_t a = direct ? file_.direct_align : 4096;
  AlignedBuffer buf(kSize + 2 * 65536);
  ASSERT_NE(buf.data, nullptr);
  // A run of whole blocks in the middle.
  ASSERT_EQ(port::ReadDirect(file_, a, buf.data, 2 * a, "weights.bin"), TINYAI_OK) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(std::memcmp(buf.data, bytes_.data() + a, 2 * a), 0);
  // The whole file in blocks: the last runs past its end, which the read
  // stops at (and the memory past it is not the file's).
  const size_t span = (kSize + a - 1) / a * a;
  std::memset(buf.data, 0xAB, buf.size);
  ASSERT_EQ(port::ReadDirect(file_, 0, buf.data, span, "weights.bin"), TINYAI_OK) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(std::memcmp(buf.data, bytes_.data(), kSize), 0);
  // The last block alone.
  const uint64_t last = (kSize - 1) / a * a;
  ASSERT_EQ(port::ReadDirect(file_, last, buf.data, a, "weights.bin"), TINYAI_OK) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(std::memcmp(buf.data, bytes_.data() + last, kSize - last), 0);
}

TEST_F(DirectReadTest, MisalignedRequestsAreReadBuffered) {
  port::EnableDirectReads(path_.c_str(), &file_);
  AlignedBuffer buf(kSize + 65536);
  ASSERT_NE(buf.data, nullptr);
  // An offset, a size and memory off the alignment, one at a time.
  ASSERT_EQ(port::ReadDirect(file_, 100, buf.data, 8192, "weights.bin"), TINYAI_OK) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(std::memcmp(buf.data, bytes_.data() + 100, 8192), 0);
  ASSERT_EQ(port::ReadDirect(file_, 4096, buf.data, 5000, "weights.bin"), TINYAI_OK) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(std::memcmp(buf.data, bytes_.data() + 4096, 5000), 0);
  ASSERT_EQ(port::ReadDirect(file_, 4096, buf.data + 8, 4096, "weights.bin"), TINYAI_OK)
      << tinyaiGetLastErrorMessage();
  EXPECT_EQ(std::memcmp(buf.data + 8, bytes_.data() + 4096, 4096), 0);
}

TEST_F(DirectReadTest, WithoutDirectReadsTheSameCallReadsBuffered) {
  // Never enabled: ReadDirect is ReadAt, up to the file's end.
  AlignedBuffer buf(kSize + 65536);
  ASSERT_NE(buf.data, nullptr);
  ASSERT_EQ(port::ReadDirect(file_, 8 * 4096, buf.data, 2 * 4096, "weights.bin"), TINYAI_OK)
      << tinyaiGetLastErrorMessage();
  EXPECT_EQ(std::memcmp(buf.data, bytes_.data() + 8 * 4096, kSize - 8 * 4096), 0);
}

TEST_F(DirectReadTest, AFileThatShrankIsTruncated) {
  const bool direct = port::EnableDirectReads(path_.c_str(), &file_);
  ASSERT_EQ(::truncate(path_.c_str(), 4096), 0);
  AlignedBuffer buf(kSize + 65536);
  ASSERT_NE(buf.data, nullptr);
  EXPECT_EQ(port::ReadDirect(file_, 4096, buf.data, 4096, "weights.bin"), TINYAI_ERR_TRUNCATED)
      << (direct ? "direct" : "buffered");
  const std::string msg = tinyaiGetLastErrorMessage();
  EXPECT_NE(msg.find("weights.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("was it changed"), std::string::npos) << msg;
}

TEST_F(DirectReadTest, AFileReplacedBeforeEnablingIsNotOpenedAgain) {
  // Another file renamed over the path: the second handle would read it, not
  // the file open, so direct reads stay off.
  const std::string other = dir_.File("other.bin");
  ASSERT_NO_FATAL_FAILURE(WriteFile(other, Pattern(kSize / 2)));
  ASSERT_EQ(std::rename(other.c_str(), path_.c_str()), 0);
  EXPECT_FALSE(port::EnableDirectReads(path_.c_str(), &file_));
  EXPECT_EQ(file_.direct, -1);
  AlignedBuffer buf(8192);
  ASSERT_NE(buf.data, nullptr);
  ASSERT_EQ(port::ReadDirect(file_, 4096, buf.data, 4096, "weights.bin"), TINYAI_OK) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(std::memcmp(buf.data, bytes_.data() + 4096, 4096), 0) << "the file open, not the one renamed over it";
}

TEST_F(DirectReadTest, AMissingPathHasNoDirectReads) {
  EXPECT_FALSE(port::EnableDirectReads(dir_.File("missing.bin").c_str(), &file_));
  EXPECT_EQ(file_.direct, -1);
}

}  // namespace
