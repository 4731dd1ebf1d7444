#include "format/zstd_frames.h"

#ifndef TINYAI_WITH_ZSTD
#define TINYAI_WITH_ZSTD 1
#endif
#if TINYAI_WITH_ZSTD
// The buffer-less streaming API (ZSTD_decompressBegin/Continue,
// ZSTD_getFrameHeader) is in zstd's "static linking only" part; Debian's
// shared library exports it.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>
#endif

#include <cstring>

#include "common/checked_math.h"
#include "common/status.h"
#include "tinyai/types.h"

namespace tinyai {
namespace {

// Entries may come from a file nobody validated yet: print at most the name's
// capacity, NUL or not.
constexpr int kNameWidth = static_cast<int>(tmai::kTensorNameCapacity);

const char* Src(const char* source) { return source ? source : "<memory>"; }

uint64_t FrameCount64(uint64_t rows, uint64_t rows_per_frame) {
  return rows / rows_per_frame + (rows % rows_per_frame != 0 ? 1 : 0);
}

}  // namespace

TinyAIStatus TensorRowLayout(const tmai::TensorEntry& e, uint64_t* rows, uint64_t* row_bytes) {
  SparseLayout sparse;
  if (tmai::SparseLayoutOf(e, &sparse)) {  // a band is a row
    *rows = sparse.bands;
    *row_bytes = sparse.band_bytes;
    return TINYAI_OK;
  }
  const uint64_t r = e.ndims >= 2 ? e.shape[0] : 1;
  if (r == 0 || e.decoded_size == 0 || e.decoded_size % r != 0) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "tensor '%.*s': %llu decoded bytes do not split into %llu whole rows",
                    kNameWidth, e.name, static_cast<unsigned long long>(e.decoded_size),
                    static_cast<unsigned long long>(r));
  }
  *rows = r;
  *row_bytes = e.decoded_size / r;
  return TINYAI_OK;
}

uint32_t ZstdFrameCount(const tmai::TensorEntry& e) {
  if (e.codec != TINYAI_CODEC_ZSTD || e.codec_param == 0) return 0;
  const uint64_t r = e.ndims >= 2 ? e.shape[0] : 1;
  if (r == 0 || e.decoded_size == 0 || e.decoded_size % r != 0) return 0;
  const uint64_t frames = FrameCount64(r, e.codec_param);
  return frames > UINT32_MAX - 1 ? 0 : static_cast<uint32_t>(frames);
}

TinyAIStatus ZstdFrameRows(const tmai::TensorEntry& e, uint32_t frame, uint64_t* first_row, uint64_t* row_count) {
  const uint32_t frames = ZstdFrameCount(e);
  if (frame >= frames) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tensor '%.*s': zstd frame %u does not exist (%u frames)",
                    kNameWidth, e.name, frame, frames);
  }
  const uint64_t rows = e.ndims >= 2 ? e.shape[0] : 1;
  const uint64_t first = uint64_t{frame} * e.codec_param;  // < rows: frame < ceil(rows / codec_param)
  *first_row = first;
  *row_count = rows - first < e.codec_param ? rows - first : e.codec_param;
  return TINYAI_OK;
}

TinyAIStatus ParseZstdFrameTable(const tmai::TensorEntry& e, const uint8_t* table, size_t table_bytes,
                                 uint64_t* offsets, const char* source) {
  const char* src = Src(source);
  const uint32_t frames = ZstdFrameCount(e);
  if (frames == 0) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%.*s' is not a valid zstd tensor (codec %u, codec_param %u)",
                    src, kNameWidth, e.name, e.codec, e.codec_param);
  }
  const uint64_t entries = uint64_t{frames} + 1;
  const uint64_t need = entries * 8;  // frames < 2^32: no overflow
  if (table == nullptr || offsets == nullptr || table_bytes < need) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                    "'%s': tensor '%.*s': its zstd frame table needs %llu bytes, %zu were given", src, kNameWidth,
                    e.name, static_cast<unsigned long long>(need), table ? table_bytes : size_t{0});
  }
  std::memcpy(offsets, table, static_cast<size_t>(need));  // little-endian hosts only (tmai_format.h)
  if (offsets[0] != need) {
    return SetError(TINYAI_ERR_BAD_FORMAT,
                    "'%s': tensor '%.*s': zstd frame 0 starts at %llu, not right after the %llu-byte frame table",
                    src, kNameWidth, e.name, static_cast<unsigned long long>(offsets[0]),
                    static_cast<unsigned long long>(need));
  }
  for (uint32_t i = 0; i < frames; ++i) {
    // Strictly increasing by at least a minimal frame, which also keeps every
    // end inside stored_size once the last one equals it.
    if (offsets[i + 1] < offsets[i] || offsets[i + 1] - offsets[i] < tmai::kZstdMinFrameBytes) {
      return SetError(TINYAI_ERR_BAD_FORMAT,
                      "'%s': tensor '%.*s': zstd frame %u of %u spans [%llu, %llu), less than a %llu-byte zstd frame",
                      src, kNameWidth, e.name, i, frames, static_cast<unsigned long long>(offsets[i]),
                      static_cast<unsigned long long>(offsets[i + 1]),
                      static_cast<unsigned long long>(tmai::kZstdMinFrameBytes));
    }
  }
  if (offsets[frames] != e.stored_size) {
    return SetError(TINYAI_ERR_BAD_FORMAT,
                    "'%s': tensor '%.*s': zstd frame %u ends at %llu but the tensor stores %llu bytes", src,
                    kNameWidth, e.name, frames - 1, static_cast<unsigned long long>(offsets[frames]),
                    static_cast<unsigned long long>(e.stored_size));
  }
  return TINYAI_OK;
}

#if TINYAI_WITH_ZSTD

namespace {

// What one frame of e decodes to: its rows and their bytes (the caller's
// buffer must hold them).
struct FrameTarget {
  uint64_t first_row = 0, row_count = 0, bytes = 0;
};

TinyAIStatus FrameTargetOf(const tmai::TensorEntry& e, uint32_t frame, const char* file, FrameTarget* t) {
  uint64_t rows = 0, row_bytes = 0;
  if (ZstdFrameRows(e, frame, &t->first_row, &t->row_count) != TINYAI_OK) {
    return AddErrorContext(TINYAI_ERR_INVALID_ARGUMENT, "'%s': ", file);
  }
  TINYAI_RETURN_IF_ERROR(TensorRowLayout(e, &rows, &row_bytes));
  if (!CheckedMul(t->row_count, row_bytes, &t->bytes) || t->bytes > SIZE_MAX) {
    return SetError(TINYAI_ERR_OVERFLOW, "'%s': tensor '%.*s' zstd frame %u: %llu rows of %llu bytes overflow",
                    file, kNameWidth, e.name, frame, static_cast<unsigned long long>(t->row_count),
                    static_cast<unsigned long long>(row_bytes));
  }
  return TINYAI_OK;
}

// The frame's first bytes (head_bytes of them) start a zstd frame: skippable
// frames and other magics would otherwise pass as empty content.
TinyAIStatus CheckMagic(const tmai::TensorEntry& e, uint32_t frame, const char* file, const uint8_t* head,
                        size_t head_bytes, size_t src_size) {
  uint32_t magic = 0;
  if (head != nullptr && head_bytes >= 4) std::memcpy(&magic, head, 4);
  if (src_size < tmai::kZstdMinFrameBytes || magic != ZSTD_MAGICNUMBER) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%.*s' zstd frame %u (%zu bytes) is not a zstd frame",
                    file, kNameWidth, e.name, frame, src_size);
  }
  return TINYAI_OK;
}

TinyAIStatus CheckContentSize(const tmai::TensorEntry& e, uint32_t frame, const char* file,
                              unsigned long long content, const FrameTarget& t) {
  if (content != t.bytes) {
    return SetError(TINYAI_ERR_BAD_FORMAT,
                    "'%s': tensor '%.*s' zstd frame %u declares %llu bytes, its %llu rows need %llu", file,
                    kNameWidth, e.name, frame, content, static_cast<unsigned long long>(t.row_count),
                    static_cast<unsigned long long>(t.bytes));
  }
  return TINYAI_OK;
}

// A zstd error code from decoding the frame: a bad checksum is its own status.
TinyAIStatus DecodeError(const tmai::TensorEntry& e, uint32_t frame, const char* file, const FrameTarget& t,
                         size_t code) {
  const bool checksum = ZSTD_getErrorCode(code) == ZSTD_error_checksum_wrong;
  return SetError(checksum ? TINYAI_ERR_CHECKSUM : TINYAI_ERR_BAD_FORMAT,
                  "'%s': tensor '%.*s' zstd frame %u (rows %llu..%llu) does not decode: %s", file, kNameWidth, e.name,
                  frame, static_cast<unsigned long long>(t.first_row),
                  static_cast<unsigned long long>(t.first_row + t.row_count - 1), ZSTD_getErrorName(code));
}

TinyAIStatus CheckDecoded(const tmai::TensorEntry& e, uint32_t frame, const char* file, size_t produced,
                          const FrameTarget& t) {
  if (produced != t.bytes) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%.*s' zstd frame %u decoded to %zu bytes, expected %llu",
                    file, kNameWidth, e.name, frame, produced, static_cast<unsigned long long>(t.bytes));
  }
  return TINYAI_OK;
}

}  // namespace

ZstdDecoder::~ZstdDecoder() { ZSTD_freeDCtx(dctx_); }

TinyAIStatus ZstdDecoder::Init() {
  if (dctx_) return TINYAI_OK;
  dctx_ = ZSTD_createDCtx();
  if (!dctx_) return SetError(TINYAI_ERR_OUT_OF_MEMORY, "cannot allocate a zstd decompression context");
  return TINYAI_OK;
}

size_t ZstdDecoder::bytes() const { return dctx_ ? ZSTD_sizeof_DCtx(dctx_) : 0; }

TinyAIStatus ZstdDecoder::DecodeFrame(const tmai::TensorEntry& e, uint32_t frame, const uint8_t* src,
                                      size_t src_size, uint8_t* dst, size_t dst_capacity, const char* source) {
  const char* file = Src(source);
  if (!dctx_) return SetError(TINYAI_ERR_MISUSE, "'%s': ZstdDecoder::DecodeFrame before Init", file);
  FrameTarget t;
  TINYAI_RETURN_IF_ERROR(FrameTargetOf(e, frame, file, &t));
  const uint64_t expected = t.bytes;
  if (dst == nullptr || dst_capacity < expected) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                    "'%s': tensor '%.*s' zstd frame %u decodes to %llu bytes but the destination holds %zu", file,
                    kNameWidth, e.name, frame, static_cast<unsigned long long>(expected),
                    dst ? dst_capacity : size_t{0});
  }
  TINYAI_RETURN_IF_ERROR(CheckMagic(e, frame, file, src, src_size, src ? src_size : size_t{0}));
  const unsigned long long content = ZSTD_getFrameContentSize(src, src_size);
  if (content == ZSTD_CONTENTSIZE_ERROR || content == ZSTD_CONTENTSIZE_UNKNOWN) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%.*s' zstd frame %u %s", file, kNameWidth, e.name, frame,
                    content == ZSTD_CONTENTSIZE_ERROR ? "has a malformed frame header"
                                                      : "does not declare its content size");
  }
  TINYAI_RETURN_IF_ERROR(CheckContentSize(e, frame, file, content, t));
  // ZSTD_decompressDCtx would also decode frames concatenated after the
  // first: the table says where each frame ends, so the frame must end there.
  const size_t frame_size = ZSTD_findFrameCompressedSize(src, src_size);
  if (ZSTD_isError(frame_size) || frame_size != src_size) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%.*s' zstd frame %u: %s (%zu bytes in the table)", file,
                    kNameWidth, e.name, frame,
                    ZSTD_isError(frame_size) ? ZSTD_getErrorName(frame_size) : "the frame ends before its table entry",
                    src_size);
  }
  const size_t got = ZSTD_decompressDCtx(dctx_, dst, static_cast<size_t>(expected), src, src_size);
  if (ZSTD_isError(got)) return DecodeError(e, frame, file, t, got);
  return CheckDecoded(e, frame, file, got, t);
}

size_t ZstdFrameBlockBound(const uint8_t* head, size_t size) {
  constexpr size_t kMaxBlock = size_t{1} << 17;  // ZSTD_BLOCKSIZE_MAX
  ZSTD_frameHeader h;
  if (!head || ZSTD_getFrameHeader(&h, head, size) != 0 || h.frameType != ZSTD_frame) return kMaxBlock;
  return h.blockSizeMax == 0 || h.blockSizeMax > kMaxBlock ? kMaxBlock : h.blockSizeMax;
}

TinyAIStatus ZstdDecoder::DecodeFrameStreaming(const tmai::TensorEntry& e, uint32_t frame, ZstdReadFn read, void* ctx,
                                               uint64_t src_offset, size_t src_size, uint8_t* bounce,
                                               size_t bounce_size, uint8_t* dst, size_t dst_capacity,
                                               const char* source) {
  const char* file = Src(source);
  if (!dctx_) return SetError(TINYAI_ERR_MISUSE, "'%s': ZstdDecoder::DecodeFrameStreaming before Init", file);
  FrameTarget t;
  TINYAI_RETURN_IF_ERROR(FrameTargetOf(e, frame, file, &t));
  const uint64_t expected = t.bytes;
  if (dst == nullptr || dst_capacity < expected || bounce == nullptr || bounce_size < ZSTD_FRAMEHEADERSIZE_MAX) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                    "'%s': tensor '%.*s' zstd frame %u decodes to %llu bytes through a %zu-byte buffer; the "
                    "destination holds %zu", file, kNameWidth, e.name, frame, static_cast<unsigned long long>(expected),
                    bounce ? bounce_size : size_t{0}, dst ? dst_capacity : size_t{0});
  }
  // The header: the magic (no skippable frame), and the content size the rows need.
  const size_t head = src_size < ZSTD_FRAMEHEADERSIZE_MAX ? src_size : ZSTD_FRAMEHEADERSIZE_MAX;
  TINYAI_RETURN_IF_ERROR(read(ctx, src_offset, head, bounce));
  TINYAI_RETURN_IF_ERROR(CheckMagic(e, frame, file, bounce, head, src_size));
  ZSTD_frameHeader h;
  if (ZSTD_getFrameHeader(&h, bounce, head) != 0) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%.*s' zstd frame %u has a malformed frame header", file,
                    kNameWidth, e.name, frame);
  }
  if (h.frameContentSize == ZSTD_CONTENTSIZE_UNKNOWN) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%.*s' zstd frame %u does not declare its content size", file,
                    kNameWidth, e.name, frame);
  }
  TINYAI_RETURN_IF_ERROR(CheckContentSize(e, frame, file, h.frameContentSize, t));
  // Block by block: each read is exactly what the decoder asks for next.
  size_t r = ZSTD_decompressBegin(dctx_);
  size_t consumed = 0, produced = 0;
  while (!ZSTD_isError(r)) {
    const size_t need = ZSTD_nextSrcSizeToDecompress(dctx_);
    if (need == 0) break;  // the frame is complete
    if (need > src_size - consumed) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%.*s' zstd frame %u runs past its %zu bytes in the table",
                      file, kNameWidth, e.name, frame, src_size);
    }
    if (need > bounce_size) {
      return SetError(TINYAI_ERR_BAD_FORMAT,
                      "'%s': tensor '%.*s' zstd frame %u has a block of %zu bytes, larger than its first frame's "
                      "window allows (%zu)", file, kNameWidth, e.name, frame, need, bounce_size);
    }
    TINYAI_RETURN_IF_ERROR(read(ctx, src_offset + consumed, need, bounce));
    r = ZSTD_decompressContinue(dctx_, dst + produced, static_cast<size_t>(expected) - produced, bounce, need);
    if (!ZSTD_isError(r)) produced += r;
    consumed += need;
  }
  if (ZSTD_isError(r)) return DecodeError(e, frame, file, t, r);
  if (consumed != src_size) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%.*s' zstd frame %u: the frame ends before its table entry "
                    "(%zu of %zu bytes)", file, kNameWidth, e.name, frame, consumed, src_size);
  }
  return CheckDecoded(e, frame, file, produced, t);
}

#else  // !TINYAI_WITH_ZSTD: a build without the codec (e.g. for a microcontroller).

size_t ZstdFrameBlockBound(const uint8_t*, size_t) { return size_t{1} << 17; }

TinyAIStatus ZstdDecoder::DecodeFrameStreaming(const tmai::TensorEntry&, uint32_t, ZstdReadFn, void*, uint64_t, size_t,
                                               uint8_t*, size_t, uint8_t*, size_t, const char*) {
  return Init();
}

ZstdDecoder::~ZstdDecoder() {}

TinyAIStatus ZstdDecoder::Init() {
  return SetError(TINYAI_ERR_UNSUPPORTED, "this build of TinyAI has no zstd codec (TINYAI_WITH_ZSTD=OFF); convert "
                  "the model without --compress");
}

size_t ZstdDecoder::bytes() const { return 0; }

TinyAIStatus ZstdDecoder::DecodeFrame(const tmai::TensorEntry& e, uint32_t frame, const uint8_t* src,
                                      size_t src_size, uint8_t* dst, size_t dst_capacity, const char* source) {
  return Init();
}

#endif  // TINYAI_WITH_ZSTD

}  // namespace tinyai
