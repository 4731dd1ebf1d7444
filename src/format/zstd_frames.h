// Row slices of a tensor and the zstd codec (codec 1, docs/format.md "codec
// zstd"). A tensor's rows are shape[0] (1 for a 1-D tensor); a compressed
// tensor stores a frame table of F+1 little-endian u64 offsets, then F zstd
// frames, frame i holding rows [i * codec_param, (i + 1) * codec_param) so
// that the weight cache can decode one row slice without the others.
//
//   uint32_t frames = ZstdFrameCount(e);                   // after TmaiReader::Parse
//   uint64_t offsets[frames + 1];                          // (caller-owned storage)
//   ParseZstdFrameTable(e, stored, 8 * (frames + 1), offsets, path);
//   ZstdDecoder dec;  dec.Init();
//   dec.DecodeFrame(e, i, stored + offsets[i], offsets[i + 1] - offsets[i], dst, cap, path);
//
// Functions that take source name it (the file) in error messages; they all
// name the tensor and, where one is involved, the frame.
#ifndef TINYAI_FORMAT_ZSTD_FRAMES_H_
#define TINYAI_FORMAT_ZSTD_FRAMES_H_

#include <cstddef>
#include <cstdint>

#include "format/tmai_format.h"
#include "tinyai/status.h"

typedef struct ZSTD_DCtx_s ZSTD_DCtx;

namespace tinyai {

// The row layout of any tensor, whatever its codec: rows = shape[0] when
// ndims >= 2, else 1; row_bytes = decoded_size / rows. A block-sparse
// matrix's rows are its bands (common/sparse.h), row_bytes a band's bytes. TINYAI_ERR_BAD_FORMAT
// when the shape has no rows or decoded_size does not split into whole rows.
TinyAIStatus TensorRowLayout(const tmai::TensorEntry& e, uint64_t* rows, uint64_t* row_bytes);

// Frames of a zstd tensor: ceil(rows / codec_param). 0 when e is not a valid
// zstd tensor (another codec, codec_param 0, a bad row layout, or more frames
// than fit 32 bits); TmaiReader::Parse rejects such entries.
uint32_t ZstdFrameCount(const tmai::TensorEntry& e);

// The rows frame holds: [*first_row, *first_row + *row_count). Multiply by
// the row bytes of TensorRowLayout for its decoded range inside the tensor.
// TINYAI_ERR_INVALID_ARGUMENT when frame >= ZstdFrameCount(e).
TinyAIStatus ZstdFrameRows(const tmai::TensorEntry& e, uint32_t frame, uint64_t* first_row, uint64_t* row_count);

// Validates a zstd tensor's frame table (the first 8 * (F + 1) of its stored
// bytes; table_bytes may be more) and copies its F + 1 offsets, relative to
// the start of the stored bytes, into offsets (caller-owned, F + 1 entries).
// The table must start its frames right after itself, grow by at least
// kZstdMinFrameBytes per frame and end at stored_size; otherwise
// TINYAI_ERR_BAD_FORMAT naming the tensor and the frame. A table_bytes
// shorter than the table is TINYAI_ERR_INVALID_ARGUMENT (the caller's buffer).
TinyAIStatus ParseZstdFrameTable(const tmai::TensorEntry& e, const uint8_t* table, size_t table_bytes,
                                 uint64_t* offsets, const char* source);

// The most compressed bytes one zstd block of a frame can take (its
// Block_Maximum_Size: the window size, at most 128 KiB), from the frame's
// first bytes (at least 18, or the whole frame when it is shorter): what a
// streaming decode must hold at once. 128 KiB when the header cannot be
// read (the decode then reports the damage).
size_t ZstdFrameBlockBound(const uint8_t* head, size_t size);

// Reads size bytes at offset of a source into dst (the weight cache's file,
// callback or image).
using ZstdReadFn = TinyAIStatus (*)(void* ctx, uint64_t offset, size_t size, uint8_t* dst);

// One zstd decompression context, reused for every frame decoded on one
// thread (not thread-safe). Owns its ZSTD_DCtx.
class ZstdDecoder {
 public:
  ZstdDecoder() = default;
  ~ZstdDecoder();
  ZstdDecoder(const ZstdDecoder&) = delete;
  ZstdDecoder& operator=(const ZstdDecoder&) = delete;

  // Creates the context (TINYAI_ERR_OUT_OF_MEMORY if zstd cannot). Calling it
  // again is a no-op.
  TinyAIStatus Init();
  // Heap bytes the context holds (ZSTD_sizeof_DCtx), for memory accounting;
  // 0 before Init. One-shot decoding into dst needs no window buffer beyond it.
  size_t bytes() const;

  // Decodes frame `frame` of tensor e, whose compressed bytes are
  // [src, src + src_size) (exactly the frame: offsets[frame] to
  // offsets[frame + 1]), into dst, which must hold the frame's
  // row_count * row_bytes bytes (TINYAI_ERR_INVALID_ARGUMENT otherwise).
  // The frame must be one zstd frame that declares exactly that content size.
  // A frame whose content checksum fails is TINYAI_ERR_CHECKSUM; any other
  // zstd failure is TINYAI_ERR_BAD_FORMAT with zstd's error name. dst is
  // unspecified after a failure.
  TinyAIStatus DecodeFrame(const tmai::TensorEntry& e, uint32_t frame, const uint8_t* src, size_t src_size,
                           uint8_t* dst, size_t dst_capacity, const char* source);

  // The same for a frame that is not in memory: [src_offset, src_offset +
  // src_size) of a source read with read(ctx, ...), one zstd block at a time
  // into bounce (bounce_size bytes: the frame's ZstdFrameBlockBound, and at
  // least 18), decoded straight into dst. A block larger than bounce is
  // TINYAI_ERR_BAD_FORMAT; a failed read, read's status.
  TinyAIStatus DecodeFrameStreaming(const tmai::TensorEntry& e, uint32_t frame, ZstdReadFn read, void* ctx,
                                    uint64_t src_offset, size_t src_size, uint8_t* bounce, size_t bounce_size,
                                    uint8_t* dst, size_t dst_capacity, const char* source);

 private:
  ZSTD_DCtx* dctx_ = nullptr;
};

}  // namespace tinyai

#endif  // TINYAI_FORMAT_ZSTD_FRAMES_H_
