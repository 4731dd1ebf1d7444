#include "kv/kv_cache.h"

#include <cmath>
#include <cstring>

#include "common/checked_math.h"
#include "common/groups.h"
#include "common/half.h"
#include "common/status.h"

namespace tinyai {

namespace {

// Dequantized value rows a thread accumulates at a time (Accumulate).
constexpr int32_t kBlockRows = 32;

// A value's int8 code for scale d: to nearest, ties to even (as the other
// encoders round), within +-127; 0 for a zero or non-finite scale.
inline int32_t Code(float v, float d) {
  if (!(d > 0.0f) || !std::isfinite(d)) return 0;
  const float q = std::nearbyint(v / d);
  if (std::isnan(q)) return 0;  // a NaN value (its logits are refused as not finite anyway)
  return q > 127.0f ? 127 : q < -127.0f ? -127 : static_cast<int32_t>(q);
}

// A group's scale max|x| / 127 as an f16 (returned), and the codes for that
// stored scale (not the unrounded one) into codes when given.
inline uint16_t QuantizeGroup(const float* v, size_t n, int8_t* codes) {
  float amax = 0.0f;
  for (size_t c = 0; c < n; ++c) amax = std::fabs(v[c]) > amax ? std::fabs(v[c]) : amax;
  const uint16_t h = FloatToHalf(amax / 127.0f);
  if (codes != nullptr) {
    const float d = HalfToFloat(h);
    for (size_t c = 0; c < n; ++c) codes[c] = static_cast<int8_t>(Code(v[c], d));
  }
  return h;
}

// x = H x over blocks of n values (n a power of two): the normalized
// Walsh-Hadamard transform, its own inverse.
void Hadamard(float* x, size_t count, size_t n) {
  if (n <= 1) return;
  const float norm = 1.0f / std::sqrt(static_cast<float>(n));
  for (size_t b = 0; b < count; b += n) {
    float* v = x + b;
    for (size_t len = 1; len < n; len <<= 1) {
      for (size_t i = 0; i < n; i += 2 * len) {
        for (size_t j = i; j < i + len; ++j) {
          const float a = v[j], c = v[j + len];
          v[j] = a + c;
          v[j + len] = a - c;
        }
      }
    }
    for (size_t j = 0; j < n; ++j) v[j] *= norm;
  }
}

}  // namespace

namespace {

constexpr int kStoreEntries = 3;
// The recording allocator's header before each of the store's allocations
// (64-byte aligned: common/ledger.h).
constexpr uint64_t kAllocHeader = 64;

// The store's declarations for a cache of `slots` slots of `row` bytes:
// fixed tables, or (growable) tables of chunks.
void StoreDecls(const KvShape& s, uint64_t row, uint64_t slots, PDecl d[kStoreEntries]) {
  for (int i = 0; i < 2; ++i) {
    std::memcpy(d[i].name, i == 0 ? "K" : "V", 2);
    d[i].dtype = TINYAI_PTYPE_U8;
    if (s.growable) {
      d[i].rank = 4;
      d[i].shape[0] = s.layers;
      d[i].shape[1] = s.kv_heads;
      d[i].shape[2] = kKvChunk;
      d[i].shape[3] = static_cast<int64_t>(row);
      d[i].index_count = 1;
      std::memcpy(d[i].index_names[0], "c", 2);
      continue;
    }
    d[i].rank = 1;
    d[i].shape[0] = static_cast<int64_t>(row);
    d[i].index_count = 3;
    std::memcpy(d[i].index_names[0], "l", 2);
    std::memcpy(d[i].index_names[1], "h", 2);
    std::memcpy(d[i].index_names[2], "s", 2);
    d[i].fixed[0] = s.layers;
    d[i].fixed[1] = s.kv_heads;
    d[i].fixed[2] = static_cast<int64_t>(slots);
  }
  std::memcpy(d[2].name, "tokens", 7);
  d[2].dtype = TINYAI_PTYPE_I32;
  d[2].index_count = 1;
  if (s.growable) {
    d[2].rank = 1;
    d[2].shape[0] = kKvChunk;
    std::memcpy(d[2].index_names[0], "c", 2);
  } else {
    std::memcpy(d[2].index_names[0], "s", 2);
    d[2].fixed[0] = static_cast<int64_t>(slots);
  }
}

// The most a growable table of `chunks` chunks of `bytes` each holds: the
// chunks, and its directory (one pointer a chunk, doubling as it grows: at
// the last doubling the old and the new one are held together).
uint64_t GrowableBytes(uint64_t chunks, uint64_t bytes) {
  uint64_t cap = 1;
  while (cap < chunks) cap *= 2;
  return chunks * bytes + (cap + cap / 2) * sizeof(uint8_t*);
}

}  // namespace

const char* KvCache::TypeName(int32_t type) {
  switch (type) {
    case TINYAI_KV_F32: return "f32";
    case TINYAI_KV_F16: return "f16";
    case TINYAI_KV_INT8: return "int8";
    case TINYAI_KV_AUTO: return "auto";
    default: return "?";
  }
}

TinyAIStatus KvCache::Bytes(const KvShape& s, uint64_t* bytes) {
  if (s.layers <= 0 || s.kv_heads <= 0 || s.head_size <= 0 || s.context <= 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "KV cache: %d layers, %d KV heads of %d values, %d positions",
                    static_cast<int>(s.layers), static_cast<int>(s.kv_heads), static_cast<int>(s.head_size),
                    static_cast<int>(s.context));
  }
  if (s.type != TINYAI_KV_F32 && s.type != TINYAI_KV_F16 && s.type != TINYAI_KV_INT8) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "kvType %d is not a KV type (TINYAI_KV_F32, _F16, _INT8, _AUTO)",
                    static_cast<int>(s.type));
  }
  if (s.growable && s.window > 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "kvGrowable with kvWindow %d: a window's cache is constant already; "
                    "a growable cache is for a fixed capacity", static_cast<int>(s.window));
  }
  if (s.window < 0 || s.sinks < 0 || (s.window == 0 && s.sinks > 0) || s.pass_rows < 1) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "kvWindow %d and kvSinks %d: a window is 1 or more positions, and "
                    "sinks go with a window", static_cast<int>(s.window), static_cast<int>(s.sinks));
  }
  const uint64_t hs = static_cast<uint64_t>(s.head_size);
  uint64_t row = 0;
  switch (s.type) {
    case TINYAI_KV_F32: row = hs * 4; break;
    case TINYAI_KV_F16: row = hs * 2; break;
    default: {
      const uint64_t group = hs % kGroup == 0 ? kGroup : hs;
      row = hs / group * (group + 2);
    }
  }
  const uint64_t slots = s.window > 0 ? static_cast<uint64_t>(s.sinks) + static_cast<uint64_t>(s.window) +
                                            static_cast<uint64_t>(s.pass_rows) - 1
                                      : static_cast<uint64_t>(s.context);
  uint64_t n = 0;
  if (!CheckedMul(2u * static_cast<uint64_t>(s.layers), static_cast<uint64_t>(s.kv_heads), &n) ||
      !CheckedMul(n, slots, &n) || !CheckedMul(n, row, &n) || n > SIZE_MAX || slots > INT32_MAX) {
    return SetError(TINYAI_ERR_OVERFLOW, "a KV cache of %d layers x %d KV heads x %llu slots of %llu bytes overflows",
                    static_cast<int>(s.layers), static_cast<int>(s.kv_heads), static_cast<unsigned long long>(slots),
                    static_cast<unsigned long long>(row));
  }
  // The store's entries (the rows again, their tokens, its records).
  PDecl decls[kStoreEntries];
  StoreDecls(s, row, slots, decls);
  n = 0;
  for (const PDecl& d : decls) n += PersistentStore::DeclaredBytes(d);
  if (s.growable) {
    // Every chunk reached, and the cache's own table of them.
    const uint64_t chunks = (slots + kKvChunk - 1) / kKvChunk;
    const uint64_t rows = static_cast<uint64_t>(s.layers) * static_cast<uint64_t>(s.kv_heads) * kKvChunk * row;
    n += 2 * GrowableBytes(chunks, rows) + GrowableBytes(chunks, kKvChunk * sizeof(int32_t)) +
         3 * chunks * sizeof(uint8_t*) + ChunkHeaders(static_cast<int32_t>(chunks)) + kStoreEntries * kAllocHeader;
  }
  *bytes = n;
  return TINYAI_OK;
}

TinyAIStatus KvCache::Init(const KvShape& s) {
  uint64_t bytes = 0;
  TINYAI_RETURN_IF_ERROR(Bytes(s, &bytes));
  shape_ = s;
  bytes_ = bytes;
  ring_ = s.window > 0 ? s.window + s.pass_rows - 1 : 0;
  slots_ = s.window > 0 ? s.sinks + ring_ : s.context;
  const size_t hs = static_cast<size_t>(s.head_size);
  group_ = hs % kGroup == 0 ? kGroup : hs;
  row_bytes_ = s.type == TINYAI_KV_F32 ? hs * 4 : s.type == TINYAI_KV_F16 ? hs * 2 : hs / group_ * (group_ + 2);
  hadamard_ = 1;
  if (s.type == TINYAI_KV_INT8) {
    while (hadamard_ < 128 && hs % (hadamard_ * 2) == 0) hadamard_ *= 2;
  }
  if (hadamard_ > 1) bytes_ += hs * sizeof(float);  // the key being rotated (Store)
  k_ = &kernels::Best();
  wk_ = s.type == TINYAI_KV_F16 ? kernels::WeightKernelsFor(*k_, TINYAI_DTYPE_F16)
        : s.type == TINYAI_KV_INT8 && group_ == kGroup ? kernels::WeightKernelsFor(*k_, TINYAI_DTYPE_Q8_G32)
                                                       : nullptr;
  store_.Truncate(0);
  allocated_ = false;
  keys_ = values_ = nullptr;
  tokens_ = nullptr;
  (void)chunks_.Allocate(0, "KV cache chunk table");  // frees it
  reserved_ = 0;
  extra_ = peak_ = 0;
  key_.Free();
  return TINYAI_OK;
}

TinyAIStatus KvCache::Allocate() {
  if (allocated()) return TINYAI_OK;
  if (hadamard_ > 1) {
    TINYAI_RETURN_IF_ERROR(
        key_.Allocate(static_cast<size_t>(shape_.head_size) * sizeof(float), "KV cache key rotation"));
  }
  // Fixed rows are written before they are read (not zeroed); a growable
  // table's chunk is one row of the store's.
  TINYAI_RETURN_IF_ERROR(store_.Init(0, shape_.growable ? 1 : 64, false));
  PDecl decls[kStoreEntries];
  StoreDecls(shape_, row_bytes_, static_cast<uint64_t>(slots_), decls);
  for (const PDecl& d : decls) {
    const TinyAIStatus s = store_.Declare(d);
    if (s != TINYAI_OK) {
      store_.Truncate(0);
      return AddErrorContext(s, "KV cache: ");
    }
  }
  if (shape_.growable) {
    const TinyAIStatus s = chunks_.Allocate(3 * static_cast<size_t>(max_chunks()), "KV cache chunk table");
    if (s != TINYAI_OK) {
      store_.Truncate(0);
      return s;
    }
    extra_ = (hadamard_ > 1 ? static_cast<uint64_t>(shape_.head_size) * sizeof(float) : 0) +
             chunks_.size() * sizeof(uint8_t*);
    reserved_ = 0;
    peak_ = held();
  } else {
    const int64_t origin[3] = {0, 0, 0};
    keys_ = store_.FixedRow(0, origin);
    values_ = store_.FixedRow(1, origin);
    tokens_ = reinterpret_cast<int32_t*>(store_.FixedRow(2, origin));
  }
  allocated_ = true;
  return TINYAI_OK;
}

TinyAIStatus KvCache::Reserve(int32_t end) {
  if (!shape_.growable) return TINYAI_OK;
  if (!allocated()) TINYAI_RETURN_IF_ERROR(Allocate());  // a Release that could not allocate again
  const int32_t want = end <= 0 ? 0 : (end > slots_ ? slots_ : end);
  const int32_t need = (want + kKvChunk - 1) / kKvChunk;
  while (reserved_ < need) {
    const int64_t c = reserved_;
    for (int32_t e = 0; e < kStoreEntries; ++e) {
      TinyAIStatus s = TINYAI_OK;
      uint8_t*& slot = chunks_[static_cast<size_t>(c) * kStoreEntries + static_cast<size_t>(e)];
      if (!slot) slot = store_.TableRow(e, &c, &s);
      if (!slot) {
        return AddErrorContext(s, "KV cache: positions %lld..%lld (%llu bytes held): ",
                               static_cast<long long>(c * kKvChunk), static_cast<long long>(c * kKvChunk + kKvChunk - 1),
                               static_cast<unsigned long long>(held()));
      }
    }
    ++reserved_;
    if (held() > peak_) peak_ = held();
  }
  return TINYAI_OK;
}

uint64_t KvCache::ChunkHeaders(int32_t chunks) {
  // A chunk of each entry, and each entry's directory once it has one.
  return chunks <= 0 ? 0 : (static_cast<uint64_t>(chunks) + 1) * kStoreEntries * kAllocHeader;
}

uint64_t KvCache::HeldAfter(int32_t end) const {
  if (!shape_.growable) return held();
  const int32_t want = end <= 0 ? 0 : (end > slots_ ? slots_ : end);
  const int32_t need = (want + kKvChunk - 1) / kKvChunk;
  if (need <= reserved_) return held();
  auto pow2 = [](int32_t n) {
    int64_t c = 1;
    while (c < n) c *= 2;
    return n == 0 ? int64_t{0} : c;
  };
  const uint64_t per_chunk = 2u * static_cast<uint64_t>(shape_.layers) * static_cast<uint64_t>(shape_.kv_heads) *
                                 kKvChunk * row_bytes_ + kKvChunk * sizeof(int32_t);
  uint64_t after = held() + static_cast<uint64_t>(need - reserved_) * per_chunk + ChunkHeaders(need) -
                   ChunkHeaders(reserved_);
  const int64_t cap = pow2(need);
  // A directory that doubles holds its old and new copies for a moment (at
  // most cap / 2 and cap pointers, however many doublings it takes).
  if (cap > pow2(reserved_)) {
    after += kStoreEntries * (static_cast<uint64_t>(cap + cap / 2) * sizeof(uint8_t*) + kAllocHeader);
  }
  return after;
}

void KvCache::Release() {
  if (!shape_.growable || !allocated()) return;
  allocated_ = false;
  store_.Truncate(0);
  (void)chunks_.Allocate(0, "KV cache chunk table");  // frees it
  reserved_ = 0;
  key_.Free();
  const uint64_t peak = peak_;
  if (Allocate() != TINYAI_OK) return;  // not allocated: the next Allocate tries again
  peak_ = peak;
}

void KvCache::SetToken(int32_t position, int32_t token) {
  int32_t run = 0;
  int32_t* t = MutableTokens(Slot(position), &run);
  if (t) *t = token;
}

int32_t KvCache::Token(int32_t position) const {
  if (position < 0 || (!windowed() && position >= slots_)) return 0;
  int32_t run = 0;
  const int32_t* t = Tokens(Slot(position), &run);
  return t ? *t : 0;
}

const int32_t* KvCache::Tokens(int32_t slot, int32_t* run) const {
  *run = 0;
  if (!allocated() || slot < 0 || slot >= slots_) return nullptr;
  if (!shape_.growable) {
    *run = slots_ - slot;
    return tokens_ + slot;
  }
  const int32_t c = slot / kKvChunk;
  if (c >= reserved_) return nullptr;
  *run = kKvChunk - slot % kKvChunk;
  return reinterpret_cast<const int32_t*>(chunks_[static_cast<size_t>(c) * kStoreEntries + 2]) + slot % kKvChunk;
}

int32_t KvCache::Slot(int32_t p) const {
  if (shape_.window == 0 || p < shape_.sinks) return p;
  return shape_.sinks + (p - shape_.sinks) % ring_;
}

int32_t KvCache::Visible(int32_t position, KvSpan spans[3]) const {
  if (shape_.window == 0 || position < shape_.sinks + shape_.window) {
    // Nothing has left the window: positions 0 .. position, in slots of the same number.
    spans[0] = KvSpan{0, position + 1, false};
    return 1;
  }
  int32_t n = 0;
  if (shape_.sinks > 0) spans[n++] = KvSpan{0, shape_.sinks, true};
  const int32_t from = position - shape_.window + 1, slot = Slot(from);
  const int32_t before_wrap = shape_.sinks + ring_ - slot;
  if (shape_.window <= before_wrap) {
    spans[n++] = KvSpan{slot, shape_.window, false};
  } else {
    spans[n++] = KvSpan{slot, before_wrap, false};
    spans[n++] = KvSpan{shape_.sinks, shape_.window - before_wrap, false};
  }
  return n;
}

void KvCache::EncodeRow(const float* x, uint8_t* out) const {
  const size_t hs = static_cast<size_t>(shape_.head_size);
  switch (shape_.type) {
    case TINYAI_KV_F32:
      std::memcpy(out, x, hs * sizeof(float));
      return;
    case TINYAI_KV_F16:
      for (size_t c = 0; c < hs; ++c) {
        const uint16_t h = FloatToHalf(x[c]);
        std::memcpy(out + 2 * c, &h, 2);
      }
      return;
    default:
      for (size_t g = 0; g < hs / group_; ++g) {
        const float* v = x + g * group_;
        uint8_t* block = out + g * (group_ + 2);
        const uint16_t h = QuantizeGroup(v, group_, reinterpret_cast<int8_t*>(block + 2));
        std::memcpy(block, &h, 2);
      }
  }
}

void KvCache::EncodeKey(const float* x, uint8_t* out) {
  if (hadamard_ <= 1) return EncodeRow(x, out);
  const size_t hs = static_cast<size_t>(shape_.head_size);
  float* rotated = key_.floats();
  std::memcpy(rotated, x, hs * sizeof(float));
  Hadamard(rotated, hs, hadamard_);
  EncodeRow(rotated, out);
}

void KvCache::ReadRow(const uint8_t* row, float* out, bool key) const {
  if (key && hadamard_ > 1) {
    ReadRow(row, out, false);
    Hadamard(out, static_cast<size_t>(shape_.head_size), hadamard_);
    return;
  }
  const size_t hs = static_cast<size_t>(shape_.head_size);
  switch (shape_.type) {
    case TINYAI_KV_F32:
      std::memcpy(out, row, hs * sizeof(float));
      return;
    case TINYAI_KV_F16:
      for (size_t c = 0; c < hs; ++c) {
        uint16_t h;
        std::memcpy(&h, row + 2 * c, 2);
        out[c] = HalfToFloat(h);
      }
      return;
    default:
      for (size_t g = 0; g < hs / group_; ++g) {
        const uint8_t* block = row + g * (group_ + 2);
        uint16_t h;
        std::memcpy(&h, block, 2);
        const float d = HalfToFloat(h);
        for (size_t c = 0; c < group_; ++c) out[g * group_ + c] = d * static_cast<float>(static_cast<int8_t>(block[2 + c]));
      }
  }
}

const uint8_t* KvCache::Rows(bool values, int32_t layer, int32_t head, int32_t slot, int32_t* run) const {
  *run = 0;
  if (!allocated() || slot < 0 || slot >= slots_) return nullptr;
  const size_t lh = static_cast<size_t>(layer) * static_cast<size_t>(shape_.kv_heads) + static_cast<size_t>(head);
  if (!shape_.growable) {
    *run = slots_ - slot;
    return (values ? values_ : keys_) + (lh * static_cast<size_t>(slots_) + static_cast<size_t>(slot)) * row_bytes_;
  }
  const int32_t c = slot / kKvChunk;
  if (c >= reserved_) return nullptr;
  *run = kKvChunk - slot % kKvChunk;
  const uint8_t* chunk = chunks_[static_cast<size_t>(c) * kStoreEntries + (values ? 1 : 0)];
  return chunk + (lh * kKvChunk + static_cast<size_t>(slot % kKvChunk)) * row_bytes_;
}

void KvCache::Store(int32_t layer, int32_t position, const float* k, const float* v) {
  const int32_t slot = Slot(position);
  const size_t hs = static_cast<size_t>(shape_.head_size);
  for (int32_t h = 0; h < shape_.kv_heads; ++h) {
    EncodeKey(k + static_cast<size_t>(h) * hs, Row(false, layer, h, slot));
    EncodeRow(v + static_cast<size_t>(h) * hs, Row(true, layer, h, slot));
  }
}

size_t KvCache::ScratchBytes() const {
  // [the query rotated (int8)][the query quantized (q8_g32 rows)][a block of values]
  const size_t hs = static_cast<size_t>(shape_.head_size);
  return AlignUp(RotatedQueryBytes(), 64) + AlignUp(QueryBytes(), 64) +
         (shape_.type == TINYAI_KV_F32 ? 0 : static_cast<size_t>(kBlockRows) * hs * sizeof(float));
}

size_t KvCache::RotatedQueryBytes() const {
  return hadamard_ > 1 ? static_cast<size_t>(shape_.head_size) * sizeof(float) : 0;
}

size_t KvCache::QueryBytes() const {
  return wk_ != nullptr && wk_->quantized_input() ? QuantizedInputBytes(wk_->input, static_cast<size_t>(shape_.head_size))
                                                  : 0;
}

void KvCache::Scores(const uint8_t* rows, int32_t n, const float* q, float* att, uint8_t* scratch) const {
  if (n <= 0) return;
  const size_t hs = static_cast<size_t>(shape_.head_size);
  switch (shape_.type) {
    case TINYAI_KV_F32:
      k_->matvec(reinterpret_cast<const float*>(rows), hs, q, att, static_cast<size_t>(n), hs);
      return;
    case TINYAI_KV_F16:
      wk_->matvec(rows, row_bytes_, q, att, static_cast<size_t>(n), hs);
      return;
    default:
      if (hadamard_ > 1) {  // the keys are rotated: so is the query
        float* rotated = reinterpret_cast<float*>(scratch);
        std::memcpy(rotated, q, hs * sizeof(float));
        Hadamard(rotated, hs, hadamard_);
        q = rotated;
      }
      if (wk_ != nullptr) {  // q8_g32 blocks: the integer products
        uint8_t* quantized = scratch + AlignUp(RotatedQueryBytes(), 64);
        k_->quantize_input16(q, hs, reinterpret_cast<InputGroup16*>(quantized));
        wk_->matvec_q(rows, row_bytes_, quantized, att, static_cast<size_t>(n), hs);
        return;
      }
      // Heads narrower than a group (or not a whole number of them): one
      // scale a row, summed in fp32.
      for (int32_t j = 0; j < n; ++j) {
        const uint8_t* row = rows + static_cast<size_t>(j) * row_bytes_;
        float sum = 0.0f;
        for (size_t g = 0; g < hs / group_; ++g) {
          const uint8_t* block = row + g * (group_ + 2);
          uint16_t h;
          std::memcpy(&h, block, 2);
          float dot = 0.0f;
          for (size_t c = 0; c < group_; ++c) dot += q[g * group_ + c] * static_cast<float>(static_cast<int8_t>(block[2 + c]));
          sum += HalfToFloat(h) * dot;
        }
        att[j] = sum;
      }
  }
}

void KvCache::Accumulate(const uint8_t* rows, int32_t n, const float* att, float* out, bool first,
                         uint8_t* scratch) const {
  const size_t hs = static_cast<size_t>(shape_.head_size);
  if (n <= 0) {
    if (first) std::memset(out, 0, hs * sizeof(float));
    return;
  }
  float partial[1024];
  if (shape_.type == TINYAI_KV_F32) {
    if (first) {  // one span: exactly the product over all of them
      k_->vecmat(att, reinterpret_cast<const float*>(rows), hs, out, static_cast<size_t>(n), hs);
      return;
    }
    // vecmat overwrites: later spans are summed into a copy, then added.
    for (size_t c0 = 0; c0 < hs; c0 += 1024) {
      const size_t w = hs - c0 < 1024 ? hs - c0 : 1024;
      k_->vecmat(att, reinterpret_cast<const float*>(rows) + c0, hs, partial, static_cast<size_t>(n), w);
      k_->add(out + c0, partial, w);
    }
    return;
  }
  if (first) std::memset(out, 0, hs * sizeof(float));
  // Dequantized a block of rows at a time, then as f32.
  float* block = reinterpret_cast<float*>(scratch + AlignUp(RotatedQueryBytes(), 64) + AlignUp(QueryBytes(), 64));
  for (int32_t j0 = 0; j0 < n; j0 += kBlockRows) {
    const int32_t m = n - j0 < kBlockRows ? n - j0 : kBlockRows;
    for (int32_t j = 0; j < m; ++j) {
      const uint8_t* row = rows + static_cast<size_t>(j0 + j) * row_bytes_;
      if (wk_ != nullptr && wk_->dequantize_row != nullptr) {
        wk_->dequantize_row(row, block + static_cast<size_t>(j) * hs, hs);
      } else {
        ReadRow(row, block + static_cast<size_t>(j) * hs);
      }
    }
    for (size_t c0 = 0; c0 < hs; c0 += 1024) {
      const size_t w = hs - c0 < 1024 ? hs - c0 : 1024;
      k_->vecmat(att + j0, block + c0, hs, partial, static_cast<size_t>(m), w);
      k_->add(out + c0, partial, w);
    }
  }
}

}  // namespace tinyai
