#include "quant/quantize_blocks.h"

#include <cmath>
#include <cstring>

#include "common/groups.h"
#include "common/half.h"

namespace tinyai {
namespace quant {
namespace {

// What a value's code stands for: scale * code + offset, code in [lo, hi].
struct Affine {
  float scale = 0.0f, offset = 0.0f;
  int32_t lo = 0, hi = 0;
};

int32_t Clamp(float r, int32_t lo, int32_t hi) {
  return r > static_cast<float>(hi) ? hi : (r < static_cast<float>(lo) ? lo : static_cast<int32_t>(r));
}

// The code whose value is nearest x (ties to even); with a zero scale every
// code means offset: the one nearest 0.
int32_t CodeOf(const Affine& a, float x) {
  if (a.scale == 0.0f) return Clamp(0.0f, a.lo, a.hi);
  return Clamp(std::nearbyint((x - a.offset) / a.scale), a.lo, a.hi);
}

float ValueOf(const Affine& a, int32_t code) { return a.scale * static_cast<float>(code) + a.offset; }

double Weight(const float* importance, size_t i) { return importance ? static_cast<double>(importance[i]) : 1.0; }

// x ~= d * q, q in [lo, hi]: as quantize.cc's search for the groups of 32
// (the value of largest magnitude mapped to an extreme moved by k |e| / 80,
// k = -9..9, both extremes; least squares d for each rounding; the best,
// refined once).
float FitScale(const float* x, const float* importance, size_t n, int32_t lo, int32_t hi) {
  float amax = 0.0f, extreme = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      extreme = x[i];
    }
  }
  if (amax == 0.0f) return 0.0f;
  auto fit = [&](double inverse, double* d) {
    double sxq = 0.0, sqq = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double q = Clamp(std::nearbyint(static_cast<float>(x[i] * inverse)), lo, hi);
      sxq += Weight(importance, i) * x[i] * q;
      sqq += Weight(importance, i) * q * q;
    }
    if (sqq <= 0.0) return -1.0;
    *d = sxq / sqq;
    return sxq * sxq / sqq;
  };
  double best_d = 0.0, best = -1.0;
  const int32_t extremes[2] = {hi, lo};
  for (int32_t e : extremes) {
    const double step = std::fabs(static_cast<double>(e)) * 0.0125;
    for (int32_t k = -9; k <= 9; ++k) {
      double d = 0.0;
      const double score = fit((e + k * step) / extreme, &d);
      if (score > best) {
        best = score;
        best_d = d;
      }
    }
  }
  double d = 0.0;
  if (best_d != 0.0 && fit(1.0 / best_d, &d) > best) best_d = d;
  return static_cast<float>(best_d);
}

// x ~= a * q + b, q in [0, top], a >= 0 (and b <= 0 when nonpositive: the
// K-quants store a minimum to subtract): for each candidate a = range /
// (top + k / 10), k = -10..10, every value rounded, then a and b by weighted
// least squares for those codes; the fit of least weighted squared error.
void FitAffine(const float* x, const float* importance, size_t n, int32_t top, bool nonpositive, float* a_out,
               float* b_out) {
  float lo = x[0], hi = x[0];
  for (size_t i = 1; i < n; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  if (nonpositive && lo > 0.0f) lo = 0.0f;
  *a_out = 0.0f;
  *b_out = lo;
  if (hi <= lo) return;
  auto error = [&](double a, double b) {
    double e = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double q = a > 0.0 ? Clamp(std::nearbyint(static_cast<float>((x[i] - b) / a)), 0, top) : 0.0;
      const double r = a * q + b - x[i];
      e += Weight(importance, i) * r * r;
    }
    return e;
  };
  double best_a = (static_cast<double>(hi) - lo) / top, best_b = lo, best = error(best_a, best_b);
  for (int32_t k = -10; k <= 10; ++k) {
    const double inverse = (top + 0.1 * k) / (static_cast<double>(hi) - lo);
    double sw = 0.0, sq = 0.0, sqq = 0.0, sx = 0.0, sxq = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double q = Clamp(std::nearbyint(static_cast<float>((x[i] - lo) * inverse)), 0, top), w = Weight(importance, i);
      sw += w;
      sq += w * q;
      sqq += w * q * q;
      sx += w * x[i];
      sxq += w * x[i] * q;
    }
    const double det = sw * sqq - sq * sq;
    if (det <= 0.0) continue;
    double a = (sw * sxq - sq * sx) / det, b = (sqq * sx - sq * sxq) / det;
    if (nonpositive && b > 0.0) {
      b = 0.0;
      a = sxq / sqq;
    }
    if (!(a > 0.0)) continue;
    const double e = error(a, b);
    if (e < best) {
      best = e;
      best_a = a;
      best_b = b;
    }
  }
  *a_out = static_cast<float>(best_a);
  *b_out = static_cast<float>(best_b);
}

float StoreHalf(float v, uint8_t* at) {
  const uint16_t h = FloatToHalf(v);
  std::memcpy(at, &h, sizeof h);
  return HalfToFloat(h);
}

int32_t RoundTo(float v, float unit, int32_t lo, int32_t hi) { return unit == 0.0f ? 0 : Clamp(std::nearbyint(v / unit), lo, hi); }

// A block's factors (written to out) and each of its values' Affine.
// Returns the values the block covers (n <= its size at a row's end).
void PlanBlock(int32_t dtype, const float* x, const float* importance, size_t n, uint8_t* out, Affine* plan) {
  switch (dtype) {
    case TINYAI_DTYPE_Q4_K:
    case TINYAI_DTYPE_Q5_K: {
      const int32_t top = dtype == TINYAI_DTYPE_Q4_K ? 15 : 31;
      float a[8], m[8], max_a = 0.0f, max_m = 0.0f;
      for (size_t s = 0; s < 8; ++s) {
        float b;
        FitAffine(x + 32 * s, importance ? importance + 32 * s : nullptr, 32, top, true, &a[s], &b);
        m[s] = -b;
        max_a = a[s] > max_a ? a[s] : max_a;
        max_m = m[s] > max_m ? m[s] : max_m;
      }
      const float d = StoreHalf(max_a / 63.0f, out), dmin = StoreHalf(max_m / 63.0f, out + 2);
      uint8_t* q = out + 4;
      std::memset(q, 0, 12);
      for (size_t s = 0; s < 8; ++s) {
        const int32_t sc = RoundTo(a[s], d, 0, 63), mn = RoundTo(m[s], dmin, 0, 63);
        if (s < 4) {
          q[s] = static_cast<uint8_t>(q[s] | sc);
          q[s + 4] = static_cast<uint8_t>(q[s + 4] | mn);
        } else {
          q[s + 4] = static_cast<uint8_t>((sc & 15) | ((mn & 15) << 4));
          q[s - 4] = static_cast<uint8_t>(q[s - 4] | ((sc >> 4) << 6));
          q[s] = static_cast<uint8_t>(q[s] | ((mn >> 4) << 6));
        }
        Affine v;
        v.scale = d * static_cast<float>(sc);
        v.offset = -(dmin * static_cast<float>(mn));
        v.lo = 0;
        v.hi = top;
        for (size_t j = 0; j < 32; ++j) plan[32 * s + j] = v;
      }
      return;
    }
    case TINYAI_DTYPE_Q6_K: {
      float a[16], amax = 0.0f;
      for (size_t i = 0; i < 16; ++i) {
        a[i] = FitScale(x + 16 * i, importance ? importance + 16 * i : nullptr, 16, -32, 31);
        amax = std::fabs(a[i]) > amax ? std::fabs(a[i]) : amax;
      }
      const float d = StoreHalf(amax / 127.0f, out + 208);
      for (size_t i = 0; i < 16; ++i) {
        const int32_t sc = RoundTo(a[i], d, -128, 127);
        out[192 + i] = static_cast<uint8_t>(static_cast<int8_t>(sc));
        Affine v;
        v.scale = d * static_cast<float>(sc);
        v.lo = -32;
        v.hi = 31;
        for (size_t j = 0; j < 16; ++j) plan[16 * i + j] = v;
      }
      return;
    }
    case TINYAI_DTYPE_Q5_G32: {
      Affine v;
      v.scale = StoreHalf(FitScale(x, importance, n, -16, 15), out);
      v.lo = -16;
      v.hi = 15;
      for (size_t j = 0; j < kGroup; ++j) plan[j] = v;
      return;
    }
    default: {  // q5m_g32
      float a, b;
      FitAffine(x, importance, n, 31, false, &a, &b);
      Affine v;
      v.scale = StoreHalf(a, out);
      v.offset = StoreHalf(b, out + 2);
      v.lo = 0;
      v.hi = 31;
      for (size_t j = 0; j < kGroup; ++j) plan[j] = v;
      return;
    }
  }
}

// The codes of a block (code - lo for each value: 0..15, 0..31 or 0..63)
// into its bytes.
void PackCodes(int32_t dtype, const int32_t* u, uint8_t* out) {
  switch (dtype) {
    case TINYAI_DTYPE_Q4_K:
    case TINYAI_DTYPE_Q5_K: {
      uint8_t* p = out + (dtype == TINYAI_DTYPE_Q5_K ? 48 : 16);
      if (dtype == TINYAI_DTYPE_Q5_K) std::memset(out + 16, 0, 32);
      for (size_t c = 0; c < 4; ++c) {
        for (size_t l = 0; l < 32; ++l) {
          const int32_t lo = u[64 * c + l], hi = u[64 * c + 32 + l];
          p[32 * c + l] = static_cast<uint8_t>((lo & 15) | ((hi & 15) << 4));
          if (dtype == TINYAI_DTYPE_Q5_K) {
            out[16 + l] = static_cast<uint8_t>(out[16 + l] | ((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
          }
        }
      }
      return;
    }
    case TINYAI_DTYPE_Q6_K: {
      std::memset(out, 0, 192);
      for (size_t s = 0; s < 8; ++s) {
        const size_t h = s / 4, k = s % 4;
        for (size_t l = 0; l < 32; ++l) {
          const int32_t v = u[32 * s + l];
          uint8_t& lo = out[64 * h + l + 32 * (k % 2)];
          lo = static_cast<uint8_t>(lo | (k < 2 ? (v & 15) : ((v & 15) << 4)));
          out[128 + 32 * h + l] = static_cast<uint8_t>(out[128 + 32 * h + l] | ((v >> 4) << (2 * k)));
        }
      }
      return;
    }
    default: {  // q5_g32, q5m_g32
      uint8_t* p = out + (dtype == TINYAI_DTYPE_Q5_G32 ? 2 : 4);
      uint32_t high = 0;
      for (size_t j = 0; j < 32; ++j) high |= static_cast<uint32_t>(u[j] >> 4) << j;
      std::memcpy(p, &high, sizeof high);
      for (size_t j = 0; j < 16; ++j) p[4 + j] = static_cast<uint8_t>((u[j] & 15) | ((u[j + 16] & 15) << 4));
      return;
    }
  }
}

}  // namespace

bool IsBlockEncoded(int32_t dtype) {
  return IsSuperBlockDType(dtype) || dtype == TINYAI_DTYPE_Q5_G32 || dtype == TINYAI_DTYPE_Q5M_G32;
}

void EncodeBlockRow(int32_t dtype, float* w, size_t cols, const float* importance, const float* factor,
                    uint8_t* out) {
  const size_t values = BlockValues(dtype), bytes = GroupBytes(dtype);
  Affine plan[kSuperBlock];
  int32_t codes[kSuperBlock];
  for (size_t first = 0; first < cols; first += values) {
    const size_t n = cols - first < values ? cols - first : values;
    uint8_t* block = out + (first / values) * bytes;
    PlanBlock(dtype, w + first, importance ? importance + first : nullptr, n, block, plan);
    for (size_t j = 0; j < values; ++j) {
      const size_t c = first + j;
      if (j >= n) {  // padding past the row: the code of zero
        codes[j] = CodeOf(plan[j], 0.0f) - plan[j].lo;
        continue;
      }
      const int32_t code = CodeOf(plan[j], w[c]);
      codes[j] = code - plan[j].lo;
      if (factor == nullptr) continue;
      const float* u = factor + c * cols;
      const float e = (w[c] - ValueOf(plan[j], code)) / u[c];
      for (size_t k = c + 1; k < cols; ++k) w[k] -= e * u[k];
    }
    PackCodes(dtype, codes, block);
  }
}

}  // namespace quant
}  // namespace tinyai
