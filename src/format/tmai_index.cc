// The .tmai index, laid out and sealed (tmai_format.h): the one serializer of
// the header, the layer table and the tensor directory.
#include <cstring>

#include "common/crc32c.h"
#include "format/tmai_format.h"

namespace tinyai {
namespace tmai {
namespace {

uint64_t AlignTo(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

IndexLayout LayOutIndex(uint64_t metadata_size, uint64_t layer_count, uint64_t tensor_count,
                        uint32_t group_alignment) {
  // Sizes are bounded by the format (kMaxLayers, kMaxTensors, 32-bit
  // metadata lengths): no sum here can overflow.
  IndexLayout l;
  l.group_alignment = group_alignment;
  l.metadata_size = metadata_size;
  l.layers_offset = AlignTo(kHeaderSize + metadata_size, 8);
  l.tensors_offset = l.layers_offset + layer_count * kLayerEntrySize;
  l.data_offset = AlignTo(l.tensors_offset + tensor_count * kTensorEntrySize, group_alignment);
  return l;
}

void SealIndex(const IndexLayout& layout, const uint8_t* metadata, const LayerEntry* layers, uint32_t layer_count,
               const TensorEntry* tensors, uint32_t tensor_count, uint64_t file_size, uint16_t version_major,
               uint16_t version_minor, uint8_t* out, uint32_t flags) {
  std::memset(out, 0, static_cast<size_t>(layout.data_offset));
  if (layout.metadata_size > 0) std::memcpy(out + kHeaderSize, metadata, static_cast<size_t>(layout.metadata_size));
  if (layer_count > 0) std::memcpy(out + layout.layers_offset, layers, layer_count * sizeof(LayerEntry));
  if (tensor_count > 0) std::memcpy(out + layout.tensors_offset, tensors, tensor_count * sizeof(TensorEntry));
  Header h;
  std::memset(&h, 0, sizeof h);
  std::memcpy(h.magic, kMagic, 4);
  h.version_major = version_major;
  h.version_minor = version_minor;
  h.endian_tag = kEndianTag;
  h.header_size = kHeaderSize;
  h.file_size = file_size;
  h.metadata_offset = kHeaderSize;
  h.metadata_size = layout.metadata_size;
  h.layers_offset = layout.layers_offset;
  h.layer_count = layer_count;
  h.tensor_count = tensor_count;
  h.tensors_offset = layout.tensors_offset;
  h.data_offset = layout.data_offset;
  h.data_alignment = kDataAlignment;
  h.group_alignment = layout.group_alignment;
  h.flags = flags;
  h.index_crc = Crc32c(0, out + kHeaderSize, static_cast<size_t>(layout.data_offset - kHeaderSize));
  h.header_crc = Crc32c(0, &h, sizeof h);
  std::memcpy(out, &h, sizeof h);
}

}  // namespace tmai
}  // namespace tinyai
