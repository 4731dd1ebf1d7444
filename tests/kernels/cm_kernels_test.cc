// The Cortex-M tables (kernels/mcu/kernels_cm.h: the DSP extension's SMLAD
// products and Helium's VMLADAVA) against the reference, bit for bit: on the
// host their instructions run as C with the same meaning, on a Cortex-M
// (the firmware's emulated runs, scripts/firmware-test.sh) as themselves.
// Rows of every grouped dtype with random and extreme codes, odd shapes,
// strides that leave rows unaligned, one input and several.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "common/groups.h"
#include "common/half.h"
#include "kernels/kernels.h"
#include "kernels/mcu/kernels_cm.h"

namespace tinyai {
namespace kernels {
namespace {

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Rows of random groups; extreme: every code at its most negative value
// (q8: -128; q4: code 0, value -8; q4nl: the grid's -127).
std::vector<uint8_t> Rows(std::mt19937& rng, int32_t dtype, size_t rows, size_t cols, size_t row_bytes,
                          bool extreme) {
  std::vector<uint8_t> w(rows * row_bytes + 3, 0xa5);
  const size_t gb = GroupBytes(dtype);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t g = 0; g < GroupsPerRow(cols); ++g) {
      uint8_t* p = w.data() + r * row_bytes + g * gb;
      const uint16_t h = FloatToHalf(std::uniform_real_distribution<float>(-0.05f, 0.05f)(rng));
      std::memcpy(p, &h, 2);
      for (size_t j = 2; j < gb; ++j) p[j] = extreme ? (dtype == TINYAI_DTYPE_Q8_G32 ? 0x80 : 0x00) : static_cast<uint8_t>(rng());
    }
  }
  return w;
}

void ExpectTableEqualsRef(const KernelTable& table) {
  std::mt19937 rng(7);
  const KernelTable& ref = Ref();
  for (int32_t dtype : {TINYAI_DTYPE_Q8_G32, TINYAI_DTYPE_Q4_G32, TINYAI_DTYPE_Q4NL_G32}) {
    const WeightKernels* mine = WeightKernelsFor(table, dtype);
    const WeightKernels* theirs = WeightKernelsFor(ref, dtype);
    ASSERT_NE(mine, nullptr);
    ASSERT_NE(theirs, nullptr);
    ASSERT_EQ(mine->input, theirs->input);
    for (size_t cols : {32u, 64u, 100u, 288u, 1024u}) {
      for (size_t rows : {1u, 3u, 17u}) {
        for (int extreme = 0; extreme < 2; ++extreme) {
          const size_t row_bytes = GroupsPerRow(cols) * GroupBytes(dtype) + (rows % 2);  // odd: unaligned rows
          const std::vector<uint8_t> w = Rows(rng, dtype, rows, cols, row_bytes, extreme != 0);
          const size_t n = 5, groups = GroupsPerRow(cols);
          std::vector<float> x(n * cols);
          for (float& v : x) v = extreme ? 3.0f : std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
          // Quantized by the reference (every table writes its bytes).
          const size_t group_bytes = mine->input == kInputInt16 ? sizeof(InputGroup16) : sizeof(InputGroup);
          std::vector<uint8_t> q(n * groups * group_bytes);
          for (size_t j = 0; j < n; ++j) {
            if (mine->input == kInputInt16) {
              ref.quantize_input16(x.data() + j * cols, cols, reinterpret_cast<InputGroup16*>(q.data()) + j * groups);
            } else {
              ref.quantize_input(x.data() + j * cols, cols, reinterpret_cast<InputGroup*>(q.data()) + j * groups);
            }
          }
          std::vector<float> want(n * rows), got(n * rows, -1.0f), got1(rows, -1.0f);
          theirs->matmul_q(w.data(), row_bytes, q.data(), groups, want.data(), rows, rows, cols, n);
          mine->matmul_q(w.data(), row_bytes, q.data(), groups, got.data(), rows, rows, cols, n);
          mine->matvec_q(w.data(), row_bytes, q.data() + 2 * groups * group_bytes, got1.data(), rows, cols);
          for (size_t i = 0; i < n * rows; ++i) {
            ASSERT_EQ(Bits(got[i]), Bits(want[i])) << table.name << " dtype " << dtype << " cols " << cols << " rows "
                                                   << rows << " extreme " << extreme << " at " << i << ": " << got[i]
                                                   << " vs " << want[i];
          }
          for (size_t r = 0; r < rows; ++r) ASSERT_EQ(Bits(got1[r]), Bits(want[2 * rows + r])) << table.name;
        }
      }
    }
  }
}

TEST(CortexMKernels, DspEqualsReferenceBitForBit) { ExpectTableEqualsRef(CortexMDspTable()); }
TEST(CortexMKernels, MveEqualsReferenceBitForBit) { ExpectTableEqualsRef(CortexMMveTable()); }

TEST(CortexMKernels, OfferedOnlyWhereTheInstructionsRun) {
  const KernelTable* tables[16];
  const size_t n = AvailableTables(tables, 16);
  bool dsp = false, mve = false;
  for (size_t i = 0; i < n && i < 16; ++i) {
    dsp = dsp || std::strcmp(tables[i]->name, "cm-dsp") == 0;
    mve = mve || std::strcmp(tables[i]->name, "cm-mve") == 0;
  }
  EXPECT_EQ(dsp, CortexMDspNative() && std::getenv("TINYAI_KERNELS") == nullptr);
  EXPECT_EQ(mve, CortexMMveNative() && std::getenv("TINYAI_KERNELS") == nullptr);
}

}  // namespace
}  // namespace kernels
}  // namespace tinyai
