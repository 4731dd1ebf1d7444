#include "format/tmai_reader.h"

#include <algorithm>
#include <cstring>

#include "common/checked_math.h"
#include "common/crc32c.h"
#include "common/groups.h"
#include "common/printable.h"
#include "format/zstd_frames.h"
#include "tinyai/types.h"

namespace tinyai {
namespace {

using tmai::Header;
using tmai::LayerEntry;
using tmai::TensorEntry;

uint32_t ReadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Fuzzing builds accept wrong checksums so mutated inputs reach the
// structural checks behind them (the usual libFuzzer convention).
#if defined(FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
constexpr bool kEnforceChecksums = false;
#else
constexpr bool kEnforceChecksums = true;
#endif

bool IsPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

bool KeyEquals(StringView key, const char* name) {
  size_t n = std::strlen(name);
  return key.size == n && std::memcmp(key.data, name, n) == 0;
}

bool StartsWith(StringView key, const char* prefix) {
  size_t n = std::strlen(prefix);
  return key.size >= n && std::memcmp(key.data, prefix, n) == 0;
}

}  // namespace

namespace tmai {

uint64_t DecodedBytes(uint32_t dtype, const uint64_t* shape, uint32_t ndims, bool* overflow) {
  *overflow = false;
  uint64_t elements = 1;
  for (uint32_t d = 0; d < ndims; ++d) {
    if (!CheckedMul(elements, shape[d], &elements)) {
      *overflow = true;
      return 0;
    }
  }
  uint64_t bytes = 0;
  switch (dtype) {
    case TINYAI_DTYPE_F32:
    case TINYAI_DTYPE_F16:
      if (!CheckedMul(elements, dtype == TINYAI_DTYPE_F32 ? 4 : 2, &bytes)) *overflow = true;
      return *overflow ? 0 : bytes;
    case TINYAI_DTYPE_Q8_G32:
    case TINYAI_DTYPE_Q4_G32:
    case TINYAI_DTYPE_Q4NL_G32:
    case TINYAI_DTYPE_Q4_K:
    case TINYAI_DTYPE_Q5_K:
    case TINYAI_DTYPE_Q6_K:
    case TINYAI_DTYPE_Q5_G32:
    case TINYAI_DTYPE_Q5M_G32: {
      // Rows of blocks along the innermost dimension (src/common/groups.h):
      // each row rounds up to whole blocks, the last one padded (a K-quant
      // row is whole blocks: ParseTensors checks it).
      if (ndims == 0 || shape[ndims - 1] == 0) return 0;
      const uint64_t cols = shape[ndims - 1];
      const uint64_t values = BlockValues(static_cast<int32_t>(dtype));
      const uint64_t row_bytes = ((cols - 1) / values + 1) * GroupBytes(static_cast<int32_t>(dtype));
      if (!CheckedMul(elements / cols, row_bytes, &bytes)) *overflow = true;
      return *overflow ? 0 : bytes;
    }
    default:
      return 0;
  }
}

}  // namespace tmai

TinyAIStatus TmaiReader::Parse(const uint8_t* index, uint64_t indexSize, uint64_t fileSize,
                               const char* source, bool in_place) {
  source_ = source ? source : "<memory>";
  in_place_ = in_place;
  file_size_ = fileSize;
  TINYAI_RETURN_IF_ERROR(ParseHeader(index, indexSize, fileSize));
  TINYAI_RETURN_IF_ERROR(ParseMetadata(index));
  TINYAI_RETURN_IF_ERROR(ParseLayers());
  TINYAI_RETURN_IF_ERROR(ParseTensors());
  TINYAI_RETURN_IF_ERROR(CheckUniqueNames());
  file_layers_ = layers_;
  file_tensors_ = tensors_;
  return TINYAI_OK;
}

void TmaiReader::UseDirectory(Span<const tmai::LayerEntry> layers, Span<const tmai::TensorEntry> tensors) {
  layers_ = layers.empty() ? file_layers_ : layers;
  tensors_ = tensors.empty() ? file_tensors_ : tensors;
}

TinyAIStatus TmaiReader::ParseHeader(const uint8_t* index, uint64_t indexSize, uint64_t fileSize) {
  const char* src = source_;
  if (fileSize == 0) return SetError(TINYAI_ERR_TRUNCATED, "'%s': file is empty (0 bytes)", src);
  if (reinterpret_cast<uintptr_t>(index) % 8 != 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s': image is not 8-byte aligned", src);
  }
  if (indexSize < sizeof tmai::kMagic) {
    return SetError(TINYAI_ERR_TRUNCATED, "'%s': %llu bytes cannot hold a .tmai header", src,
                    static_cast<unsigned long long>(indexSize));
  }
  if (std::memcmp(index, tmai::kMagic, sizeof tmai::kMagic) != 0) {
    // The formats the converters read, named with the way to a .tmai.
    if (std::memcmp(index, "GGUF", 4) == 0) {
      return SetError(TINYAI_ERR_BAD_MAGIC, "'%s' is a GGUF file, not a .tmai: convert it once with tinyai-convert "
                      "--from gguf '%s' OUT.tmai (its tensors are copied as they are)", src, src);
    }
    if (indexSize > 9 && index[8] == '{' && index[9] == '"') {
      return SetError(TINYAI_ERR_BAD_MAGIC, "'%s' is a safetensors file, not a .tmai: convert its checkpoint with "
                      "tinyai-convert --from safetensors FOLDER OUT.tmai (the folder holding config.json)", src);
    }
    return SetError(TINYAI_ERR_BAD_MAGIC,
                    "'%s': not a .tmai file (magic %02x %02x %02x %02x, expected 'TMAI')", src,
                    index[0], index[1], index[2], index[3]);
  }
  if (indexSize < tmai::kHeaderSize) {
    return SetError(TINYAI_ERR_TRUNCATED, "'%s': %llu bytes, shorter than the %u-byte header", src,
                    static_cast<unsigned long long>(indexSize), tmai::kHeaderSize);
  }
  const Header* h = reinterpret_cast<const Header*>(index);
  header_ = h;
  // Endianness first: in a byte-swapped file every other field reads wrong.
  if (h->endian_tag != tmai::kEndianTag) {
    if (h->endian_tag == 0x04030201u) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': big-endian file; TinyAI reads little-endian", src);
    }
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': bad endianness tag 0x%08x", src, h->endian_tag);
  }
  if (h->version_major > tmai::kVersionMajor) {
    return SetError(TINYAI_ERR_UNSUPPORTED_VERSION,
                    "'%s': format version %u.%u is newer than this library reads (%u.%u)", src,
                    h->version_major, h->version_minor, tmai::kVersionMajor, tmai::kVersionMinor);
  }
  if (h->version_major == 0) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': format version 0 does not exist", src);
  }
  if (h->header_size != tmai::kHeaderSize) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': header size %u, expected %u", src, h->header_size,
                    tmai::kHeaderSize);
  }
  Header copy;
  std::memcpy(&copy, h, sizeof copy);
  copy.header_crc = 0;
  uint32_t crc = Crc32c(0, &copy, sizeof copy);
  if (crc != h->header_crc && kEnforceChecksums) {
    return SetError(TINYAI_ERR_CHECKSUM, "'%s': header checksum mismatch (stored %08x, computed %08x)",
                    src, h->header_crc, crc);
  }
  bool reserved_zero = h->flags == (in_place_ ? tmai::kHeaderFlagInPlace : 0u);
  for (uint8_t b : h->reserved) reserved_zero = reserved_zero && b == 0;
  if (!reserved_zero) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': header flags or reserved bytes are not zero (v1 defines none)", src);
  }
  if (h->file_size > fileSize) {
    return SetError(TINYAI_ERR_TRUNCATED, "'%s': file has %llu bytes but its header claims %llu", src,
                    static_cast<unsigned long long>(fileSize),
                    static_cast<unsigned long long>(h->file_size));
  }
  if (h->file_size < fileSize) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': %llu trailing bytes after the declared end (%llu)",
                    src, static_cast<unsigned long long>(fileSize - h->file_size),
                    static_cast<unsigned long long>(h->file_size));
  }
  if (h->data_alignment != tmai::kDataAlignment || !IsPowerOfTwo(h->group_alignment) ||
      h->group_alignment < tmai::kDataAlignment || h->group_alignment > (1u << 20)) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': bad alignments (data %u, group %u)", src,
                    h->data_alignment, h->group_alignment);
  }
  if (h->data_offset % h->group_alignment != 0 || (h->data_offset > fileSize && !in_place_) ||
      h->data_offset < tmai::kHeaderSize) {
    return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "'%s': data offset %llu is misaligned or outside the file",
                    src, static_cast<unsigned long long>(h->data_offset));
  }
  if (h->data_offset > indexSize) {
    return SetError(TINYAI_ERR_TRUNCATED, "'%s': index needs %llu bytes, %llu available", src,
                    static_cast<unsigned long long>(h->data_offset),
                    static_cast<unsigned long long>(indexSize));
  }
  // Every section of the index lies between the header and the data.
  struct Section {
    const char* name;
    uint64_t offset;
    uint64_t count;
    uint64_t entry;
  } sections[] = {
      {"metadata", h->metadata_offset, h->metadata_size, 1},
      {"layer table", h->layers_offset, h->layer_count, tmai::kLayerEntrySize},
      {"tensor directory", h->tensors_offset, h->tensor_count, tmai::kTensorEntrySize},
  };
  if (h->layer_count > tmai::kMaxLayers || h->tensor_count > tmai::kMaxTensors) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': %u layers / %u tensors exceed the limits (%u / %u)",
                    src, h->layer_count, h->tensor_count, tmai::kMaxLayers, tmai::kMaxTensors);
  }
  for (const Section& s : sections) {
    uint64_t bytes;
    if (!CheckedMul(s.count, s.entry, &bytes)) {
      return SetError(TINYAI_ERR_OVERFLOW, "'%s': %s size overflows", src, s.name);
    }
    if (s.offset < tmai::kHeaderSize || !RangeInside(s.offset, bytes, h->data_offset)) {
      return SetError(TINYAI_ERR_OUT_OF_BOUNDS,
                      "'%s': %s [%llu, +%llu) lies outside the index [%u, %llu)", src, s.name,
                      static_cast<unsigned long long>(s.offset), static_cast<unsigned long long>(bytes),
                      tmai::kHeaderSize, static_cast<unsigned long long>(h->data_offset));
    }
    if (s.entry > 1 && s.offset % 8 != 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': %s offset %llu is not 8-byte aligned", src, s.name,
                      static_cast<unsigned long long>(s.offset));
    }
  }
  uint32_t index_crc = Crc32c(0, index + tmai::kHeaderSize,
                              static_cast<size_t>(h->data_offset - tmai::kHeaderSize));
  if (index_crc != h->index_crc && kEnforceChecksums) {
    return SetError(TINYAI_ERR_CHECKSUM,
                    "'%s': index checksum mismatch (stored %08x, computed %08x): metadata or "
                    "directory is corrupt",
                    src, h->index_crc, index_crc);
  }
  layers_ = Span<const LayerEntry>(reinterpret_cast<const LayerEntry*>(index + h->layers_offset),
                                   h->layer_count);
  tensors_ = Span<const TensorEntry>(reinterpret_cast<const TensorEntry*>(index + h->tensors_offset),
                                     h->tensor_count);
  return TINYAI_OK;
}

TinyAIStatus TmaiReader::ParseMetadata(const uint8_t* index) {
  const char* src = source_;
  const uint8_t* p = index + header_->metadata_offset;
  uint64_t remaining = header_->metadata_size;
  if (remaining < 4) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': metadata section has no count", src);
  uint32_t count = ReadU32(p);
  p += 4;
  remaining -= 4;
  // The smallest entry is a 2-byte key length, a 1-byte key, a type and a 4-byte float.
  if (count > remaining / 8) {
    return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "'%s': %u metadata entries cannot fit in %llu bytes", src,
                    count, static_cast<unsigned long long>(remaining));
  }
  TINYAI_RETURN_IF_ERROR(meta_.Allocate(count, "metadata index"));
  for (uint32_t i = 0; i < count; ++i) {
    MetaEntry& e = meta_[i];
    if (remaining < 3) {
      return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "'%s': metadata entry %u runs past the section", src, i);
    }
    uint16_t key_len;
    std::memcpy(&key_len, p, 2);
    if (key_len == 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': metadata entry %u has an empty key", src, i);
    }
    if (key_len + 3u > remaining) {
      return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "'%s': metadata entry %u has a bad key length %u", src,
                      i, key_len);
    }
    e.key.data = reinterpret_cast<const char*>(p + 2);
    e.key.size = key_len;
    e.type = p[2 + key_len];
    p += 3u + key_len;
    remaining -= 3u + key_len;
    const bool tokenizer = StartsWith(e.key, "tokenizer.");
    const TinyAIStatus overrun = tokenizer ? TINYAI_ERR_BAD_TOKENIZER : TINYAI_ERR_OUT_OF_BOUNDS;
    switch (e.type) {
      case tmai::kMetaInt:
        if (remaining < 8) return SetError(overrun, "'%s': metadata '%s' is truncated", src, Printable(e.key).c_str());
        std::memcpy(&e.int_value, p, 8);
        p += 8;
        remaining -= 8;
        break;
      case tmai::kMetaFloat:
        if (remaining < 4) return SetError(overrun, "'%s': metadata '%s' is truncated", src, Printable(e.key).c_str());
        std::memcpy(&e.float_value, p, 4);
        p += 4;
        remaining -= 4;
        break;
      case tmai::kMetaString:
      case tmai::kMetaFloatArray:
      case tmai::kMetaStringArray: {
        if (remaining < 4) return SetError(overrun, "'%s': metadata '%s' is truncated", src, Printable(e.key).c_str());
        e.count = ReadU32(p);
        p += 4;
        remaining -= 4;
        e.payload = p;
        uint64_t bytes = 0;
        if (e.type == tmai::kMetaString) {
          bytes = e.count;
        } else if (e.type == tmai::kMetaFloatArray) {
          bytes = uint64_t{e.count} * 4;
        } else {
          // Walk the strings: each a uint32 length then the bytes.
          for (uint32_t s = 0; s < e.count; ++s) {
            if (remaining - bytes < 4) {
              return SetError(overrun, "'%s': metadata '%s': string %u of %u runs past the section",
                              src, Printable(e.key).c_str(), s, e.count);
            }
            uint32_t len = ReadU32(p + bytes);
            if (len > remaining - bytes - 4) {
              return SetError(overrun,
                              "'%s': metadata '%s': string %u claims %u bytes but only %llu remain",
                              src, Printable(e.key).c_str(), s, len,
                              static_cast<unsigned long long>(remaining - bytes - 4));
            }
            bytes += 4 + uint64_t{len};
          }
        }
        if (bytes > remaining) {
          return SetError(overrun, "'%s': metadata '%s' claims %llu bytes but only %llu remain", src,
                          Printable(e.key).c_str(), static_cast<unsigned long long>(bytes),
                          static_cast<unsigned long long>(remaining));
        }
        p += bytes;
        remaining -= bytes;
        break;
      }
      default:
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': metadata '%s' has unknown type %u", src,
                        Printable(e.key).c_str(), e.type);
    }
    for (uint32_t j = 0; j < i; ++j) {
      if (meta_[j].key.size == e.key.size && std::memcmp(meta_[j].key.data, e.key.data, e.key.size) == 0) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': metadata key '%s' appears twice", src, Printable(e.key).c_str());
      }
    }
  }
  if (remaining != 0) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': %llu stray bytes after the last metadata entry", src,
                    static_cast<unsigned long long>(remaining));
  }
  return TINYAI_OK;
}

TinyAIStatus TmaiReader::ParseLayers() {
  const char* src = source_;
  // Read in place, a GGUF's layers lie where its tensors do (checked not
  // to overlap when the index was built).
  uint64_t prev_end = in_place_ ? 0 : header_->data_offset;
  uint64_t next_tensor = 0;
  for (uint32_t i = 0; i < layers_.size(); ++i) {
    const LayerEntry& l = layers_[i];
    if (l.reserved != 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': layer %u reserved field is not zero", src, i);
    }
    if (l.kind > TINYAI_LAYER_DENSE) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': layer %u has unknown kind %u", src, i, l.kind);
    }
    if (l.offset % header_->group_alignment != 0 && !in_place_) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': layer %u offset %llu is not %u-aligned", src, i,
                      static_cast<unsigned long long>(l.offset), header_->group_alignment);
    }
    if (!RangeInside(l.offset, l.stored_size, file_size_)) {
      return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "'%s': layer %u [%llu, +%llu) lies outside the file (%llu bytes)",
                      src, i, static_cast<unsigned long long>(l.offset),
                      static_cast<unsigned long long>(l.stored_size),
                      static_cast<unsigned long long>(file_size_));
    }
    if (l.offset < prev_end) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': layer %u overlaps the data before it", src, i);
    }
    if (!in_place_) prev_end = l.offset + l.stored_size;
    if (l.first_tensor != next_tensor || l.tensor_count > tensors_.size() - next_tensor) {
      return SetError(TINYAI_ERR_BAD_FORMAT,
                      "'%s': layer %u lists tensors [%u, +%u) but its tensors start at %llu of %zu",
                      src, i, l.first_tensor, l.tensor_count, static_cast<unsigned long long>(next_tensor),
                      tensors_.size());
    }
    next_tensor += l.tensor_count;
  }
  if (next_tensor != tensors_.size()) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': %zu tensors belong to no layer", src,
                    tensors_.size() - static_cast<size_t>(next_tensor));
  }
  return TINYAI_OK;
}

TinyAIStatus TmaiReader::ParseTensors() {
  const char* src = source_;
  for (uint32_t li = 0; li < layers_.size(); ++li) {
    const LayerEntry& l = layers_[li];
    uint64_t prev_stored_end = l.offset;
    uint64_t prev_decoded_end = 0;
    for (uint32_t ti = l.first_tensor; ti < l.first_tensor + l.tensor_count; ++ti) {
      const TensorEntry& t = tensors_[ti];
      const void* nul = std::memchr(t.name, '\0', tmai::kTensorNameCapacity);
      if (!nul || t.name[0] == '\0') {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor %u has an empty or unterminated name", src, ti);
      }
      // NUL-padded: nothing but NULs after the first one, so no reader sees
      // a name cut short.
      const size_t name_len = static_cast<size_t>(static_cast<const char*>(nul) - t.name);
      for (size_t k = name_len + 1; k < tmai::kTensorNameCapacity; ++k) {
        if (t.name[k] != '\0') {
          return SetError(TINYAI_ERR_BAD_FORMAT,
                          "'%s': tensor %u has a byte 0x%02x at %zu after the NUL that ends its name '%s' "
                          "(a name is NUL-padded)",
                          src, ti, static_cast<unsigned char>(t.name[k]), k, t.name);
        }
      }
      const char* name = t.name;
      if ((t.flags & ~kTensorFlagBlockSparse) != 0) {
        return SetError(TINYAI_ERR_BAD_FORMAT,
                        "'%s': tensor %u ('%s') has flags 0x%02x (defined: 0x01, block-sparse; the rest must be 0)",
                        src, ti, name, t.flags);
      }
      const bool sparse = tmai::IsBlockSparse(t);
      if (t.layer != li) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' says layer %u but sits in layer %u",
                        src, name, t.layer, li);
      }
      if (t.ndims < 1 || t.ndims > tmai::kMaxDims) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' has %u dimensions (1..4 allowed)", src,
                        name, t.ndims);
      }
      if (sparse && t.ndims != 2) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': block-sparse tensor '%s' has %u dimensions (a matrix: 2)", src,
                        name, t.ndims);
      }
      // A block-sparse matrix's dimensions 2 and 3 are its block and the
      // blocks a band keeps (checked with its layout below).
      for (uint32_t d = 0; d < (sparse ? 2u : tmai::kMaxDims); ++d) {
        if ((d < t.ndims) != (t.shape[d] != 0)) {
          return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' dimension %u is %llu", src, name, d,
                          static_cast<unsigned long long>(t.shape[d]));
        }
      }
      if (t.dtype > TINYAI_DTYPE_Q5M_G32) {
        return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' has unknown dtype %u", src, name, t.dtype);
      }
      if (IsSuperBlockDType(static_cast<int32_t>(t.dtype)) &&
          (sparse || t.ndims == 0 || t.shape[t.ndims - 1] % kSuperBlock != 0)) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' is %s with rows of %llu values; %s", src, name,
                        tinyaiDTypeName(static_cast<TinyAIDType>(t.dtype)),
                        static_cast<unsigned long long>(t.ndims == 0 ? 0 : t.shape[sparse ? 1 : t.ndims - 1]),
                        sparse ? "a block-sparse matrix cannot be a K-quant (its rows are groups of 32)"
                               : "a K-quant's rows are whole blocks of 256 values");
      }
      if (t.codec > TINYAI_CODEC_TILE_SPARSE) {
        return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' has unknown codec %u", src, name, t.codec);
      }
      bool overflow = false;
      uint64_t bytes = 0;
      if (sparse) {
        SparseLayout layout;
        if (!IsSparseBlock(t.shape[2])) {
          return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': block-sparse tensor '%s' has block %llu (1, 2, 4, 8, 16 or 32)",
                          src, name, static_cast<unsigned long long>(t.shape[2]));
        }
        if (!tmai::SparseLayoutOf(t, &layout)) {
          return SetError(TINYAI_ERR_BAD_FORMAT,
                          "'%s': block-sparse tensor '%s' [%llu, %llu] keeps %llu blocks of %llu a band: more than "
                          "its %llu, or sizes past 64 bits",
                          src, name, static_cast<unsigned long long>(t.shape[0]),
                          static_cast<unsigned long long>(t.shape[1]), static_cast<unsigned long long>(t.shape[3]),
                          static_cast<unsigned long long>(t.shape[2]),
                          static_cast<unsigned long long>((t.shape[1] + t.shape[2] - 1) / t.shape[2]));
        }
        if (t.codec != TINYAI_CODEC_NONE) {
          return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': block-sparse tensor '%s' is stored with codec %s (only none)",
                          src, name, tinyaiCodecName(static_cast<TinyAICodec>(t.codec)));
        }
        bytes = layout.bytes();
      } else {
        bytes = tmai::DecodedBytes(t.dtype, t.shape, t.ndims, &overflow);
      }
      if (overflow) {
        return SetError(TINYAI_ERR_OVERFLOW,
                        "'%s': tensor '%s' shape [%llu, %llu, %llu, %llu] overflows 64-bit sizes", src, name,
                        static_cast<unsigned long long>(t.shape[0]), static_cast<unsigned long long>(t.shape[1]),
                        static_cast<unsigned long long>(t.shape[2]), static_cast<unsigned long long>(t.shape[3]));
      }
      if (bytes == 0 || bytes != t.decoded_size) {
        return SetError(TINYAI_ERR_BAD_FORMAT,
                        "'%s': tensor '%s' (%s) needs %llu bytes but declares %llu", src, name,
                        tinyaiDTypeName(static_cast<TinyAIDType>(t.dtype)),
                        static_cast<unsigned long long>(bytes),
                        static_cast<unsigned long long>(t.decoded_size));
      }
      const uint32_t stored_alignment = in_place_ ? 32 : tmai::kDataAlignment;
      if (t.offset % stored_alignment != 0 || t.decoded_offset % tmai::kDataAlignment != 0) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' data is not %u-byte aligned", src, name,
                        stored_alignment);
      }
      if (!RangeInside(t.offset, t.stored_size, file_size_)) {
        return SetError(TINYAI_ERR_OUT_OF_BOUNDS,
                        "'%s': tensor '%s' data [%llu, +%llu) lies outside the file (%llu bytes)", src, name,
                        static_cast<unsigned long long>(t.offset),
                        static_cast<unsigned long long>(t.stored_size),
                        static_cast<unsigned long long>(file_size_));
      }
      if (t.offset < l.offset || !RangeInside(t.offset - l.offset, t.stored_size, l.stored_size)) {
        return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "'%s': tensor '%s' data lies outside its layer %u", src,
                        name, li);
      }
      if (!RangeInside(t.decoded_offset, t.decoded_size, l.decoded_size)) {
        return SetError(TINYAI_ERR_OUT_OF_BOUNDS,
                        "'%s': tensor '%s' decoded range [%llu, +%llu) exceeds its layer's %llu bytes", src,
                        name, static_cast<unsigned long long>(t.decoded_offset),
                        static_cast<unsigned long long>(t.decoded_size),
                        static_cast<unsigned long long>(l.decoded_size));
      }
      if (t.offset < prev_stored_end || t.decoded_offset < prev_decoded_end) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' overlaps the tensor before it", src, name);
      }
      if (t.codec == TINYAI_CODEC_NONE &&
          (t.stored_size != t.decoded_size || (t.offset - l.offset != t.decoded_offset && !in_place_))) {
        return SetError(TINYAI_ERR_BAD_FORMAT,
                        "'%s': uncompressed tensor '%s' must be stored exactly as it is loaded", src, name);
      }
      if (t.codec == TINYAI_CODEC_NONE && t.codec_param != 0) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': uncompressed tensor '%s' has codec_param %u (must be 0)", src,
                        name, t.codec_param);
      }
      if (t.codec == TINYAI_CODEC_ZSTD) TINYAI_RETURN_IF_ERROR(CheckZstdTensor(t));
      prev_stored_end = t.offset + t.stored_size;
      prev_decoded_end = t.decoded_offset + t.decoded_size;
    }
    // A layer is exactly its tensors: the sizes the loader accounts with.
    if (l.stored_size != prev_stored_end - l.offset || l.decoded_size != prev_decoded_end) {
      return SetError(TINYAI_ERR_BAD_FORMAT,
                      "'%s': layer %u declares %llu stored / %llu decoded bytes but its tensors end at %llu / %llu",
                      src, li, static_cast<unsigned long long>(l.stored_size),
                      static_cast<unsigned long long>(l.decoded_size),
                      static_cast<unsigned long long>(prev_stored_end - l.offset),
                      static_cast<unsigned long long>(prev_decoded_end));
    }
  }
  return TINYAI_OK;
}

// The zstd layout as far as the index shows it: the data (frame table and
// frames) is not read here, it may not even be in memory; the weight cache
// checks the table with ParseZstdFrameTable when it loads the tensor.
TinyAIStatus TmaiReader::CheckZstdTensor(const TensorEntry& t) const {
  const char* src = source_;
  if (t.codec_param == 0) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': zstd tensor '%s' has codec_param 0 (rows per frame must be >= 1)",
                    src, t.name);
  }
  uint64_t rows = 0, row_bytes = 0;
  if (TensorRowLayout(t, &rows, &row_bytes) != TINYAI_OK) return AddErrorContext(TINYAI_ERR_BAD_FORMAT, "'%s': ", src);
  const uint32_t frames = ZstdFrameCount(t);
  if (frames == 0) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': zstd tensor '%s' has too many frames (%llu rows, %u per frame)",
                    src, t.name, static_cast<unsigned long long>(rows), t.codec_param);
  }
  // The table (8 bytes per frame, plus one) and the smallest possible frames.
  const uint64_t least = (uint64_t{frames} + 1) * 8 + uint64_t{frames} * tmai::kZstdMinFrameBytes;
  if (t.stored_size < least) {
    return SetError(TINYAI_ERR_BAD_FORMAT,
                    "'%s': zstd tensor '%s' stores %llu bytes, too few for %u frames and their table (%llu at least)",
                    src, t.name, static_cast<unsigned long long>(t.stored_size), frames,
                    static_cast<unsigned long long>(least));
  }
  return TINYAI_OK;
}

TinyAIStatus TmaiReader::CheckUniqueNames() {
  TINYAI_RETURN_IF_ERROR(sorted_names_.Allocate(tensors_.size(), "tensor name index"));
  for (uint32_t i = 0; i < sorted_names_.size(); ++i) sorted_names_[i] = i;
  const TensorEntry* t = tensors_.data();
  std::sort(sorted_names_.begin(), sorted_names_.end(),
            [t](uint32_t a, uint32_t b) { return std::strcmp(t[a].name, t[b].name) < 0; });
  for (size_t i = 1; i < sorted_names_.size(); ++i) {
    if (std::strcmp(t[sorted_names_[i - 1]].name, t[sorted_names_[i]].name) == 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor name '%s' appears twice", source_,
                      t[sorted_names_[i]].name);
    }
  }
  return TINYAI_OK;
}

const MetaEntry* TmaiReader::FindMeta(const char* key) const {
  for (const MetaEntry& e : meta_) {
    if (KeyEquals(e.key, key)) return &e;
  }
  return nullptr;
}

TinyAIStatus TmaiReader::GetInt(const char* key, int64_t* out) const {
  const MetaEntry* e = FindMeta(key);
  if (!e) return SetError(TINYAI_ERR_NOT_FOUND, "'%s': metadata '%s' is missing", source_, key);
  if (e->type != tmai::kMetaInt) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': metadata '%s' is not an integer", source_, key);
  }
  *out = e->int_value;
  return TINYAI_OK;
}

TinyAIStatus TmaiReader::GetFloat(const char* key, float* out) const {
  const MetaEntry* e = FindMeta(key);
  if (!e) return SetError(TINYAI_ERR_NOT_FOUND, "'%s': metadata '%s' is missing", source_, key);
  if (e->type != tmai::kMetaFloat) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': metadata '%s' is not a float", source_, key);
  }
  *out = e->float_value;
  return TINYAI_OK;
}

TinyAIStatus TmaiReader::GetString(const char* key, StringView* out) const {
  const MetaEntry* e = FindMeta(key);
  if (!e) return SetError(TINYAI_ERR_NOT_FOUND, "'%s': metadata '%s' is missing", source_, key);
  if (e->type != tmai::kMetaString) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': metadata '%s' is not a string", source_, key);
  }
  out->data = reinterpret_cast<const char*>(e->payload);
  out->size = e->count;
  return TINYAI_OK;
}

void TmaiReader::CopyFloatArray(const MetaEntry& entry, float* out) {
  std::memcpy(out, entry.payload, size_t{entry.count} * 4);
}

void TmaiReader::GetStringArray(const MetaEntry& entry, StringView* out) {
  const uint8_t* p = entry.payload;
  for (uint32_t i = 0; i < entry.count; ++i) {
    uint32_t len = ReadU32(p);
    out[i].data = reinterpret_cast<const char*>(p + 4);
    out[i].size = len;
    p += 4 + size_t{len};
  }
}

int32_t TmaiReader::FindTensor(const char* name) const {
  const TensorEntry* t = tensors_.data();
  const uint32_t* begin = sorted_names_.begin();
  const uint32_t* end = sorted_names_.end();
  const uint32_t* it = std::lower_bound(
      begin, end, name, [t](uint32_t a, const char* n) { return std::strcmp(t[a].name, n) < 0; });
  if (it != end && std::strcmp(t[*it].name, name) == 0) return static_cast<int32_t>(*it);
  return -1;
}

TinyAIStatus TmaiReader::VerifyTensor(uint32_t tensorIndex, const uint8_t* data) const {
  return CheckTensorChecksum(tensorIndex,
                             Crc32c(0, data, static_cast<size_t>(tensors_[tensorIndex].stored_size)));
}

TinyAIStatus TmaiReader::CheckTensorChecksum(uint32_t tensorIndex, uint32_t crc) const {
  const TensorEntry& t = tensors_[tensorIndex];
  if (in_place_) return TINYAI_OK;  // a GGUF records no checksums
  if (crc != t.checksum && kEnforceChecksums) {
    return SetError(TINYAI_ERR_CHECKSUM,
                    "'%s': tensor '%s' data checksum mismatch (stored %08x, computed %08x): the file is "
                    "corrupt",
                    source_, t.name, t.checksum, crc);
  }
  return TINYAI_OK;
}

}  // namespace tinyai
