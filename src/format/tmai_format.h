// The .tmai file layout, version 1 (docs/format.md is the specification).
// Everything is little-endian. This header only describes bytes; the one
// validating reader is tmai_reader.h and the one writer tmai_writer.h.
#ifndef TINYAI_FORMAT_TMAI_FORMAT_H_
#define TINYAI_FORMAT_TMAI_FORMAT_H_

#include <cstdint>

#include "common/sparse.h"

namespace tinyai {
namespace tmai {

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "TinyAI reads .tmai files on little-endian hosts only"
#endif

constexpr char kMagic[4] = {'T', 'M', 'A', 'I'};
constexpr uint16_t kVersionMajor = 1;
constexpr uint16_t kVersionMinor = 0;
constexpr uint32_t kEndianTag = 0x01020304u;
constexpr uint32_t kHeaderSize = 128;
constexpr uint32_t kLayerEntrySize = 48;
constexpr uint32_t kTensorEntrySize = 128;
constexpr uint32_t kTensorNameCapacity = 48;  // bytes, NUL included
constexpr uint32_t kDataAlignment = 64;       // every tensor's data
constexpr uint32_t kGroupAlignment = 4096;    // every layer's data (a page)
constexpr uint32_t kMaxDims = 4;
constexpr uint32_t kMaxLayers = 1u << 16;
constexpr uint32_t kMaxTensors = 1u << 20;

// Codec zstd (docs/format.md, "codec zstd"): a tensor is split into row
// slices of codec_param rows, each one zstd frame that decodes on its own.
// The target decoded size of a row slice (a frame); a row bigger than it
// makes a one-row frame. The weight cache loads compressed and uncompressed
// tensors in slices of about this size.
constexpr uint64_t kDefaultRowSliceBytes = 1u << 20;
// The smallest possible zstd frame that declares its content size: a 6-byte
// frame header (magic, descriptor, 1-byte content size) and one 3-byte block
// header.
constexpr uint64_t kZstdMinFrameBytes = 9;

// Header flags. A file has none (v1); kHeaderFlagInPlace marks the index
// TinyAI builds in memory for a GGUF file it reads in place
// (format/gguf_index.h), which the reader accepts from that builder only.
constexpr uint32_t kHeaderFlagInPlace = 1;

// Header, 128 bytes at offset 0.
struct Header {
  char magic[4];             // "TMAI"
  uint16_t version_major;    // readers reject a newer major version
  uint16_t version_minor;    // additions a v1 reader may ignore
  uint32_t endian_tag;       // kEndianTag as written: bytes 04 03 02 01
  uint32_t header_size;      // 128
  uint64_t file_size;        // total bytes
  uint64_t metadata_offset;  // key/value section
  uint64_t metadata_size;
  uint64_t layers_offset;    // layer table: layer_count entries of 48 bytes
  uint32_t layer_count;
  uint32_t tensor_count;
  uint64_t tensors_offset;   // tensor directory: tensor_count entries of 128 bytes
  uint64_t data_offset;      // first layer's data; everything before it is the index
  uint32_t data_alignment;   // 64
  uint32_t group_alignment;  // 4096
  uint32_t flags;            // 0 in a file (kHeaderFlagInPlace: an index built in memory)
  uint32_t header_crc;       // CRC-32C of the 128 header bytes with this field zero
  uint32_t index_crc;        // CRC-32C of bytes [header_size, data_offset)
  uint8_t reserved[36];      // zero
};
static_assert(sizeof(Header) == kHeaderSize, "header layout");

struct LayerEntry {
  uint32_t kind;          // TinyAILayerKind
  int32_t block_index;    // transformer block, -1 for other layers
  uint32_t first_tensor;  // tensors [first_tensor, first_tensor + tensor_count)
  uint32_t tensor_count;
  uint64_t offset;        // file offset, a multiple of group_alignment
  uint64_t stored_size;   // bytes in the file
  uint64_t decoded_size;  // bytes once loaded
  uint64_t reserved;      // zero
};
static_assert(sizeof(LayerEntry) == kLayerEntrySize, "layer entry layout");

struct TensorEntry {
  char name[kTensorNameCapacity];  // NUL-terminated, NUL-padded
  uint16_t role;                   // TinyAITensorRole
  uint16_t layer;                  // index into the layer table
  uint8_t dtype;                   // TinyAIDType
  uint8_t codec;                   // TinyAICodec
  uint8_t ndims;                   // 1..4
  uint8_t flags;                   // kTensorFlagBlockSparse (common/sparse.h) or 0
  uint64_t shape[kMaxDims];        // outermost first; unused dims are 0
  uint64_t offset;                 // file offset of the stored bytes, 64-aligned
  uint64_t stored_size;            // bytes in the file
  uint64_t decoded_offset;         // bytes from the layer's loaded start, 64-aligned
  uint64_t decoded_size;           // bytes once loaded
  uint32_t checksum;               // CRC-32C of the stored bytes
  uint32_t codec_param;            // codec-specific (0 for none)
};
static_assert(sizeof(TensorEntry) == kTensorEntrySize, "tensor entry layout");

// Metadata value types (one byte after the key).
enum MetaType : uint8_t {
  kMetaInt = 1,          // int64
  kMetaFloat = 2,        // float32
  kMetaString = 3,       // uint32 length + bytes
  kMetaFloatArray = 4,   // uint32 count + count float32
  kMetaStringArray = 5,  // uint32 count + count x (uint32 length + bytes)
};

// Whether e is block-sparse (flags kTensorFlagBlockSparse: ndims 2,
// shape[2] = block, shape[3] = blocks kept a band; common/sparse.h), and
// then its layout; false for a dense entry or one whose numbers make no
// layout (the reader refuses those).
inline bool IsBlockSparse(const TensorEntry& e) { return (e.flags & kTensorFlagBlockSparse) != 0; }
inline bool SparseLayoutOf(const TensorEntry& e, SparseLayout* out) {
  return IsBlockSparse(e) && e.ndims == 2 && MakeSparseLayout(e.dtype, e.shape[0], e.shape[1], e.shape[2], e.shape[3], out);
}

// Bytes a tensor of this dtype and shape occupies decoded, or 0 when the
// dtype is unknown or the shape does not suit it (e.g. a grouped type whose
// innermost dimension is not a multiple of the group). *overflow is set when
// the size does not fit 64 bits.
uint64_t DecodedBytes(uint32_t dtype, const uint64_t* shape, uint32_t ndims, bool* overflow);

// The index (bytes [0, data_offset): header, metadata, layer table, tensor
// directory, zero padding) as every writer lays it out: the metadata at
// kHeaderSize, the layer table 8-aligned after it, the directory after the
// table, the data from the next multiple of group_alignment (kGroupAlignment
// for new files; a saved model keeps its input's). The writer and
// tinyaiSaveMappedModel both lay out and seal their index here.
struct IndexLayout {
  uint32_t group_alignment = kGroupAlignment;
  uint64_t metadata_size = 0;
  uint64_t layers_offset = 0;
  uint64_t tensors_offset = 0;
  uint64_t data_offset = 0;
};
IndexLayout LayOutIndex(uint64_t metadata_size, uint64_t layer_count, uint64_t tensor_count,
                        uint32_t group_alignment = kGroupAlignment);
// Fills out (layout.data_offset bytes) with the index: a header for a file of
// file_size bytes and the given version, the metadata, the tables and their
// checksums (index_crc, then header_crc).
void SealIndex(const IndexLayout& layout, const uint8_t* metadata, const LayerEntry* layers, uint32_t layer_count,
               const TensorEntry* tensors, uint32_t tensor_count, uint64_t file_size, uint16_t version_major,
               uint16_t version_minor, uint8_t* out, uint32_t flags = 0);

}  // namespace tmai
}  // namespace tinyai

#endif  // TINYAI_FORMAT_TMAI_FORMAT_H_
