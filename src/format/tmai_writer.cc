#include "format/tmai_writer.h"

#include <zstd.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/checked_math.h"
#include "common/crc32c.h"
#include "common/groups.h"
#include "common/half.h"
#include "common/status.h"
#include "format/zstd_frames.h"

namespace tinyai {
namespace {

void AppendBytes(std::vector<uint8_t>* out, const void* data, size_t n) {
  if (n == 0) return;
  size_t at = out->size();
  out->resize(at + n);
  std::memcpy(out->data() + at, data, n);
}

void AppendU32(std::vector<uint8_t>* out, uint32_t v) { AppendBytes(out, &v, 4); }

}  // namespace

TmaiWriter::~TmaiWriter() {
  port::AbortOutput(&out_);  // never finished: the temporary goes, the path keeps what it held
  ZSTD_freeCCtx(cctx_);
}

void TmaiWriter::SetCompression(TinyAICodec codec, int level) {
  if (open_) return Fail(TINYAI_ERR_MISUSE, "compression set after Open");
  if (codec == TINYAI_CODEC_ZSTD && (level < 1 || level > 19)) {
    return Fail(TINYAI_ERR_INVALID_ARGUMENT, "zstd level " + std::to_string(level) + " is outside 1..19");
  }
  if (codec != TINYAI_CODEC_NONE && codec != TINYAI_CODEC_ZSTD) {
    return Fail(TINYAI_ERR_UNSUPPORTED, "codec " + std::to_string(static_cast<int>(codec)) +
                                            " cannot be written (none and zstd can)");
  }
  codec_ = codec;
  level_ = level;
}

void TmaiWriter::Fail(TinyAIStatus code, const std::string& why) {
  if (first_status_ != TINYAI_OK) return;
  first_status_ = code;
  first_error_ = why;
}

void TmaiWriter::AddMetaInt(const std::string& key, int64_t value) {
  if (open_) return Fail(TINYAI_ERR_MISUSE, "metadata '" + key + "' added after Open");
  Meta m{key, tmai::kMetaInt, {}};
  AppendBytes(&m.value, &value, 8);
  meta_.push_back(std::move(m));
}

void TmaiWriter::AddMetaFloat(const std::string& key, float value) {
  if (open_) return Fail(TINYAI_ERR_MISUSE, "metadata '" + key + "' added after Open");
  Meta m{key, tmai::kMetaFloat, {}};
  AppendBytes(&m.value, &value, 4);
  meta_.push_back(std::move(m));
}

void TmaiWriter::AddMetaString(const std::string& key, const std::string& value) {
  if (open_) return Fail(TINYAI_ERR_MISUSE, "metadata '" + key + "' added after Open");
  Meta m{key, tmai::kMetaString, {}};
  AppendU32(&m.value, static_cast<uint32_t>(value.size()));
  AppendBytes(&m.value, value.data(), value.size());
  meta_.push_back(std::move(m));
}

void TmaiWriter::AddMetaFloatArray(const std::string& key, const std::vector<float>& values) {
  if (open_) return Fail(TINYAI_ERR_MISUSE, "metadata '" + key + "' added after Open");
  Meta m{key, tmai::kMetaFloatArray, {}};
  AppendU32(&m.value, static_cast<uint32_t>(values.size()));
  AppendBytes(&m.value, values.data(), values.size() * 4);
  meta_.push_back(std::move(m));
}

void TmaiWriter::AddMetaStringArray(const std::string& key, const std::vector<std::string>& values) {
  if (open_) return Fail(TINYAI_ERR_MISUSE, "metadata '" + key + "' added after Open");
  Meta m{key, tmai::kMetaStringArray, {}};
  AppendU32(&m.value, static_cast<uint32_t>(values.size()));
  for (const std::string& s : values) {
    AppendU32(&m.value, static_cast<uint32_t>(s.size()));
    AppendBytes(&m.value, s.data(), s.size());
  }
  meta_.push_back(std::move(m));
}

int32_t TmaiWriter::AddLayer(TinyAILayerKind kind, int32_t blockIndex) {
  if (open_ || layers_.size() >= tmai::kMaxLayers) {
    Fail(TINYAI_ERR_MISUSE, open_ ? "layer added after Open" : "more layers than the format allows");
    return -1;
  }
  tmai::LayerEntry l{};
  l.kind = static_cast<uint32_t>(kind);
  l.block_index = blockIndex;
  l.first_tensor = static_cast<uint32_t>(tensors_.size());
  layers_.push_back(l);
  return static_cast<int32_t>(layers_.size() - 1);
}

int32_t TmaiWriter::AddTensor(const std::string& name, TinyAITensorRole role, TinyAIDType dtype,
                              std::initializer_list<uint64_t> shape) {
  return AddTensor(name, role, dtype, std::vector<uint64_t>(shape));
}

int32_t TmaiWriter::AddTensor(const std::string& name, TinyAITensorRole role, TinyAIDType dtype,
                              const std::vector<uint64_t>& shape) {
  auto fail = [&](TinyAIStatus code, const std::string& why) {
    if (first_status_ == TINYAI_OK) {
      std::string shown;  // the name with any NUL byte spelled out, so the message is not cut short
      for (char c : name) shown += c == '\0' ? std::string("\\0") : std::string(1, c);
      first_status_ = code;
      first_error_ = "tensor '" + shown + "': " + why;
    }
    return -1;
  };
  if (layers_.empty()) return fail(TINYAI_ERR_MISUSE, "added before any layer");
  if (open_) return fail(TINYAI_ERR_MISUSE, "added after Open");
  if (tensors_.size() >= tmai::kMaxTensors) return fail(TINYAI_ERR_MISUSE, "more tensors than the format allows");
  if (name.empty() || name.size() >= tmai::kTensorNameCapacity) {
    return fail(TINYAI_ERR_INVALID_ARGUMENT, "name must have 1..47 bytes");
  }
  if (name.find('\0') != std::string::npos) {
    return fail(TINYAI_ERR_INVALID_ARGUMENT, "name holds a NUL byte (the reader would see it cut short)");
  }
  if (shape.empty() || shape.size() > tmai::kMaxDims) {
    return fail(TINYAI_ERR_INVALID_ARGUMENT, "must have 1..4 dimensions");
  }
  tmai::TensorEntry t{};
  std::memcpy(t.name, name.data(), name.size());
  t.role = static_cast<uint16_t>(role);
  t.layer = static_cast<uint16_t>(layers_.size() - 1);
  t.dtype = static_cast<uint8_t>(dtype);
  t.codec = TINYAI_CODEC_NONE;
  t.ndims = static_cast<uint8_t>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) t.shape[d] = shape[d];
  bool overflow = false;
  t.decoded_size = tmai::DecodedBytes(t.dtype, t.shape, t.ndims, &overflow);
  if (overflow || t.decoded_size == 0) return fail(TINYAI_ERR_INVALID_ARGUMENT, "bad shape for its dtype");
  t.stored_size = t.decoded_size;
  tmai::LayerEntry& l = layers_.back();
  t.decoded_offset = AlignUp(l.decoded_size, tmai::kDataAlignment);
  l.decoded_size = t.decoded_offset + t.decoded_size;
  l.tensor_count++;
  tensors_.push_back(t);
  return static_cast<int32_t>(tensors_.size() - 1);
}

std::vector<uint8_t> TmaiWriter::SerializeMetadata() const {
  std::vector<uint8_t> out;
  AppendU32(&out, static_cast<uint32_t>(meta_.size()));
  for (const Meta& m : meta_) {
    uint16_t key_len = static_cast<uint16_t>(m.key.size());
    AppendBytes(&out, &key_len, 2);
    AppendBytes(&out, m.key.data(), m.key.size());
    out.push_back(m.type);
    AppendBytes(&out, m.value.data(), m.value.size());
  }
  return out;
}

TinyAIStatus TmaiWriter::WriteAt(uint64_t pos, const void* data, size_t bytes) {
  if (bytes == 0) return TINYAI_OK;
  if (pos + bytes > high_water_) high_water_ = pos + bytes;
  if (!out_buf_.empty() && pos == out_buf_pos_ + out_buf_.size() && out_buf_.size() + bytes <= kOutBufferBytes) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    out_buf_.insert(out_buf_.end(), p, p + bytes);
    return TINYAI_OK;
  }
  TINYAI_RETURN_IF_ERROR(Flush());
  if (bytes >= kOutBufferBytes) return port::WriteAt(out_.file, pos, data, bytes, path_.c_str());
  if (out_buf_.capacity() < kOutBufferBytes) out_buf_.reserve(kOutBufferBytes);
  const uint8_t* p = static_cast<const uint8_t*>(data);
  out_buf_.assign(p, p + bytes);
  out_buf_pos_ = pos;
  return TINYAI_OK;
}

TinyAIStatus TmaiWriter::Flush() {
  if (out_buf_.empty()) return TINYAI_OK;
  const TinyAIStatus s = port::WriteAt(out_.file, out_buf_pos_, out_buf_.data(), out_buf_.size(), path_.c_str());
  out_buf_.clear();
  return s;
}

TinyAIStatus TmaiWriter::ReadAt(uint64_t pos, void* data, size_t bytes) {
  TINYAI_RETURN_IF_ERROR(Flush());
  const TinyAIStatus s = port::ReadAt(out_.file, pos, data, bytes, path_.c_str());
  if (s != TINYAI_OK) return AddErrorContext(s, "'%s': reading back what was written: ", path_.c_str());
  return TINYAI_OK;
}

TinyAIStatus TmaiWriter::WriteRaw(const void* data, size_t bytes) {
  TINYAI_RETURN_IF_ERROR(WriteAt(cursor_, data, bytes));
  cursor_ += bytes;
  return TINYAI_OK;
}

TinyAIStatus TmaiWriter::WriteZeros(uint64_t bytes) {
  static const uint8_t zeros[4096] = {0};
  while (bytes > 0) {
    size_t n = bytes < sizeof zeros ? static_cast<size_t>(bytes) : sizeof zeros;
    TINYAI_RETURN_IF_ERROR(WriteRaw(zeros, n));
    bytes -= n;
  }
  return TINYAI_OK;
}

TinyAIStatus TmaiWriter::Open(const char* path) {
  if (first_status_ != TINYAI_OK) return SetError(first_status_, "%s", first_error_.c_str());
  for (size_t i = 0; i < meta_.size(); ++i) {
    if (meta_[i].key.empty() || meta_[i].key.size() > 0xffff) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "metadata key %zu has a bad length", i);
    }
  }
  if (codec_ == TINYAI_CODEC_ZSTD && !cctx_) {
    cctx_ = ZSTD_createCCtx();
    // Every frame declares its content size (the decoder checks it against the
    // rows it must hold) and carries zstd's content checksum.
    if (!cctx_ || ZSTD_isError(ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level_)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cctx_, ZSTD_c_windowLog, kZstdWindowLog)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(cctx_, ZSTD_c_contentSizeFlag, 1))) {
      return SetError(TINYAI_ERR_OUT_OF_MEMORY, "cannot set up a zstd compression context (level %d)", level_);
    }
  }
  if (open_) return SetError(TINYAI_ERR_MISUSE, "'%s': TmaiWriter::Open twice", path_.c_str());
  path_ = path ? path : "";
  TINYAI_RETURN_IF_ERROR(port::BeginOutput(path, &out_));
  open_ = true;
  high_water_ = 0;
  out_buf_.clear();
  data_offset_ = tmai::LayOutIndex(SerializeMetadata().size(), layers_.size(), tensors_.size()).data_offset;
  // The index is written last (Finish), once every checksum is known.
  TINYAI_RETURN_IF_ERROR(WriteZeros(data_offset_));
  current_ = 0;
  written_in_current_ = 0;
  crc_ = 0;
  stats_ = TmaiWriteStats();
  for (tmai::LayerEntry& l : layers_) l.offset = 0;
  return tensors_.empty() ? TINYAI_OK : BeginTensor();
}

TinyAIStatus TmaiWriter::BeginTensor() {
  crc_ = 0;
  written_in_current_ = 0;
  pending_.clear();
  if (codec_ == TINYAI_CODEC_NONE) return PlaceTensor(current_);
  // Compressing: the raw bytes stream to where an uncompressed tensor goes,
  // the frames to the file after them; EndTensor keeps the smaller.
  tmai::TensorEntry& t = tensors_[current_];
  tmai::LayerEntry& l = layers_[t.layer];
  if (current_ == l.first_tensor) l.offset = AlignUp(cursor_, tmai::kGroupAlignment);
  zstd_offset_ = current_ == l.first_tensor ? l.offset : AlignUp(cursor_, tmai::kDataAlignment);
  t.codec = TINYAI_CODEC_NONE;
  TINYAI_RETURN_IF_ERROR(PlaceTensor(current_));
  raw_offset_ = t.offset;
  TINYAI_RETURN_IF_ERROR(TensorRowLayout(t, &rows_, &row_bytes_));
  rows_per_frame_ = tmai::kDefaultRowSliceBytes / row_bytes_;
  if (rows_per_frame_ == 0) rows_per_frame_ = 1;  // a row bigger than a slice is a frame of its own
  if (rows_per_frame_ > rows_) rows_per_frame_ = rows_;  // codec_param * row_bytes bounds a slice's buffer
  frames_ = (rows_ + rows_per_frame_ - 1) / rows_per_frame_;
  frame_index_ = 0;
  packed_total_ = 0;
  frame_offsets_.assign(1, (frames_ + 1) * 8);
  // Too small to win (the frame table and minimal frames alone are as large).
  compressing_ = (frames_ + 1) * 8 + frames_ * tmai::kZstdMinFrameBytes < t.decoded_size &&
                 rows_per_frame_ <= UINT32_MAX;
  return TINYAI_OK;
}

TinyAIStatus TmaiWriter::FeedFrames(const uint8_t* p, size_t n) {
  while (n > 0 && compressing_) {
    const uint64_t first = frame_index_ * rows_per_frame_;
    const size_t frame = static_cast<size_t>((rows_ - first < rows_per_frame_ ? rows_ - first : rows_per_frame_) *
                                             row_bytes_);
    if (pending_.empty() && n >= frame) {  // a whole frame in the caller's chunk: no copy
      TINYAI_RETURN_IF_ERROR(CompressFrame(p, frame));
      p += frame;
      n -= frame;
      continue;
    }
    if (pending_.capacity() < frame) pending_.reserve(frame);
    const size_t take = n < frame - pending_.size() ? n : frame - pending_.size();
    pending_.insert(pending_.end(), p, p + take);
    p += take;
    n -= take;
    if (pending_.size() == frame) {
      TINYAI_RETURN_IF_ERROR(CompressFrame(pending_.data(), frame));
      pending_.clear();
    }
  }
  return TINYAI_OK;
}

TinyAIStatus TmaiWriter::CompressFrame(const uint8_t* data, size_t bytes) {
  const tmai::TensorEntry& t = tensors_[current_];
  const size_t bound = ZSTD_compressBound(bytes);
  if (packed_.size() < bound) packed_.resize(bound);
  const size_t r = ZSTD_compress2(cctx_, packed_.data(), bound, data, bytes);
  if (ZSTD_isError(r)) {
    return SetError(TINYAI_ERR_INTERNAL, "'%s': tensor '%s': zstd cannot compress frame %llu: %s", path_.c_str(),
                    t.name, static_cast<unsigned long long>(frame_index_), ZSTD_getErrorName(r));
  }
  // Frames as large as the raw bytes cannot win: stop compressing this tensor.
  if (frame_offsets_.back() + r >= t.decoded_size) {
    compressing_ = false;
    return TINYAI_OK;
  }
  NoteBuffers();
  TINYAI_RETURN_IF_ERROR(WriteAt(raw_offset_ + t.decoded_size + packed_total_, packed_.data(), r));
  packed_total_ += r;
  frame_offsets_.push_back(frame_offsets_.back() + r);
  ++frame_index_;
  return TINYAI_OK;
}

TinyAIStatus TmaiWriter::EndTensor() {
  tmai::TensorEntry& t = tensors_[current_];
  if (compressing_ && frame_index_ == frames_) {
    // The frames won: the table, then the frames moved down from after the
    // raw copy (the destination ends before the source starts).
    const size_t table = static_cast<size_t>((frames_ + 1) * 8);
    t.codec = TINYAI_CODEC_ZSTD;
    t.codec_param = static_cast<uint32_t>(rows_per_frame_);
    t.offset = zstd_offset_;
    t.stored_size = frame_offsets_.back();
    TINYAI_RETURN_IF_ERROR(WriteAt(zstd_offset_, frame_offsets_.data(), table));  // little-endian (tmai_format.h)
    uint32_t crc = Crc32c(0, frame_offsets_.data(), table);
    const uint64_t from = raw_offset_ + t.decoded_size;
    if (packed_.size() < (1u << 20)) packed_.resize(1u << 20);
    NoteBuffers();
    for (uint64_t done = 0; done < packed_total_;) {
      const size_t n = static_cast<size_t>(packed_total_ - done < packed_.size() ? packed_total_ - done : packed_.size());
      TINYAI_RETURN_IF_ERROR(ReadAt(from + done, packed_.data(), n));
      TINYAI_RETURN_IF_ERROR(WriteAt(zstd_offset_ + table + done, packed_.data(), n));
      crc = Crc32c(crc, packed_.data(), n);
      done += n;
    }
    t.checksum = crc;
  } else {
    t.codec = TINYAI_CODEC_NONE;
    t.codec_param = 0;
    t.offset = raw_offset_;
    t.stored_size = t.decoded_size;
    t.checksum = crc_;
  }
  cursor_ = t.offset + t.stored_size;
  std::vector<uint8_t>().swap(pending_);
  return TINYAI_OK;
}

TinyAIStatus TmaiWriter::PlaceTensor(size_t index) {
  tmai::TensorEntry& t = tensors_[index];
  tmai::LayerEntry& l = layers_[t.layer];
  if (index == l.first_tensor) l.offset = AlignUp(cursor_, tmai::kGroupAlignment);
  // Uncompressed: stored exactly as loaded, at its decoded offset in the
  // layer. That is never behind the cursor: a compressed tensor before it in
  // the layer stored fewer bytes than it decodes to, and the gap stays as
  // padding. Compressed: at the layer's start or right after the tensor
  // before it, 64-aligned.
  uint64_t offset = t.codec == TINYAI_CODEC_NONE ? l.offset + t.decoded_offset
                    : index == l.first_tensor    ? l.offset
                                                 : AlignUp(cursor_, tmai::kDataAlignment);
  if (offset < cursor_) {
    return SetError(TINYAI_ERR_INTERNAL, "'%s': tensor '%s' would start at %llu, before the %llu bytes written",
                    path_.c_str(), t.name, static_cast<unsigned long long>(offset),
                    static_cast<unsigned long long>(cursor_));
  }
  TINYAI_RETURN_IF_ERROR(WriteZeros(offset - cursor_));
  t.offset = offset;
  return TINYAI_OK;
}

uint64_t TmaiWriter::TensorBytes(int32_t index) const {
  size_t i = index < 0 ? current_ : static_cast<size_t>(index);
  if (i >= tensors_.size()) return 0;
  return i == current_ ? tensors_[i].decoded_size - written_in_current_
                       : (i > current_ ? tensors_[i].decoded_size : 0);
}

TinyAIStatus TmaiWriter::Write(const void* data, size_t bytes) {
  if (!open_) return SetError(TINYAI_ERR_MISUSE, "TmaiWriter::Write before Open");
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    if (current_ >= tensors_.size()) {
      return SetError(TINYAI_ERR_MISUSE, "'%s': %zu bytes written past the last tensor", path_.c_str(), bytes);
    }
    tmai::TensorEntry& t = tensors_[current_];
    uint64_t left = t.decoded_size - written_in_current_;
    size_t n = bytes < left ? bytes : static_cast<size_t>(left);
    crc_ = Crc32c(crc_, p, n);
    if (codec_ == TINYAI_CODEC_NONE) {
      TINYAI_RETURN_IF_ERROR(WriteRaw(p, n));
    } else {
      TINYAI_RETURN_IF_ERROR(WriteAt(raw_offset_ + written_in_current_, p, n));
      TINYAI_RETURN_IF_ERROR(FeedFrames(p, n));
    }
    written_in_current_ += n;
    p += n;
    bytes -= n;
    if (written_in_current_ == t.decoded_size) {
      if (codec_ == TINYAI_CODEC_NONE) {
        t.checksum = crc_;
      } else {
        TINYAI_RETURN_IF_ERROR(EndTensor());
      }
      tmai::LayerEntry& l = layers_[t.layer];
      l.stored_size = t.offset + t.stored_size - l.offset;
      ++current_;
      if (current_ < tensors_.size()) TINYAI_RETURN_IF_ERROR(BeginTensor());
    }
  }
  return TINYAI_OK;
}

TinyAIStatus TmaiWriter::WriteValues(const float* values, size_t count) {
  if (!open_) return SetError(TINYAI_ERR_MISUSE, "TmaiWriter::WriteValues before Open");
  uint16_t halves[2048];
  while (count > 0) {
    if (current_ >= tensors_.size()) {
      return SetError(TINYAI_ERR_MISUSE, "'%s': %zu values written past the last tensor", path_.c_str(), count);
    }
    const tmai::TensorEntry& t = tensors_[current_];
    if (GroupBytes(t.dtype) != 0 && t.ndims > 0) {
      // Rows are collected into a batch of about kEncodeBatchBytes of
      // values, encoded on encode_threads_ threads, and written in order.
      const size_t cols = static_cast<size_t>(t.shape[t.ndims - 1]);
      const size_t row_bytes = GroupedRowBytes(t.dtype, cols);
      if (!encoder_ || (row_values_.empty() && written_in_current_ % row_bytes != 0)) {
        return SetError(TINYAI_ERR_MISUSE, "'%s': tensor '%s' (%s) cannot take values here%s", path_.c_str(), t.name,
                        tinyaiDTypeName(static_cast<TinyAIDType>(t.dtype)), encoder_ ? "" : " (no row encoder)");
      }
      const size_t rows_left = static_cast<size_t>((t.decoded_size - written_in_current_) / row_bytes);
      size_t batch_rows = kEncodeBatchBytes / sizeof(float) / cols;
      if (batch_rows == 0) batch_rows = 1;
      if (batch_rows > rows_left) batch_rows = rows_left;
      const size_t room = batch_rows * cols - row_values_.size();
      const size_t m = count < room ? count : room;
      row_values_.insert(row_values_.end(), values, values + m);
      values += m;
      count -= m;
      if (row_values_.size() == batch_rows * cols) {
        TINYAI_RETURN_IF_ERROR(EncodeBatch(static_cast<int32_t>(current_), t.dtype, cols, row_bytes, batch_rows));
        row_values_.clear();
        TINYAI_RETURN_IF_ERROR(Write(row_bytes_buf_.data(), batch_rows * row_bytes));
      }
      continue;
    }
    const uint32_t size = tinyaiDTypeSize(static_cast<TinyAIDType>(t.dtype));
    if ((t.dtype != TINYAI_DTYPE_F32 && t.dtype != TINYAI_DTYPE_F16) || written_in_current_ % size != 0) {
      return SetError(TINYAI_ERR_MISUSE, "'%s': tensor '%s' (%s) cannot take values here", path_.c_str(), t.name,
                      tinyaiDTypeName(static_cast<TinyAIDType>(t.dtype)));
    }
    const uint64_t left = (t.decoded_size - written_in_current_) / size;
    size_t m = count < left ? count : static_cast<size_t>(left);
    if (t.dtype == TINYAI_DTYPE_F32) {
      TINYAI_RETURN_IF_ERROR(Write(values, m * sizeof(float)));
    } else {
      if (m > sizeof halves / sizeof halves[0]) m = sizeof halves / sizeof halves[0];
      for (size_t i = 0; i < m; ++i) halves[i] = FloatToHalf(values[i]);
      TINYAI_RETURN_IF_ERROR(Write(halves, m * sizeof(uint16_t)));
    }
    values += m;
    count -= m;
  }
  return TINYAI_OK;
}

TinyAIStatus TmaiWriter::EncodeBatch(int32_t tensor, int32_t dtype, size_t cols, size_t row_bytes, size_t rows) {
  row_bytes_buf_.assign(rows * row_bytes, 0);
  if (!pool_started_) {
    const size_t threads = encode_threads_ > 0 ? encode_threads_ : static_cast<size_t>(port::CpuCount());
    TINYAI_RETURN_IF_ERROR(pool_.Start(threads > static_cast<size_t>(kMaxEncodeThreads) ? kMaxEncodeThreads
                                                                               : static_cast<int>(threads)));
    pool_started_ = true;
  }
  std::vector<uint8_t> failed(rows, 0);
  // The work of a value as model/save_model.cc counts it for the same encoder.
  pool_.ParallelFor(rows, 1, static_cast<uint64_t>(rows) * cols * 40, [&](size_t begin, size_t end, int) {
    for (size_t r = begin; r < end; ++r) {
      failed[r] = encoder_(tensor, dtype, row_values_.data() + r * cols, cols, row_bytes_buf_.data() + r * row_bytes) !=
                  TINYAI_OK;
    }
  });
  for (size_t r = 0; r < rows; ++r) {
    // The encoder is deterministic: its error, run again on this thread,
    // records the message here.
    if (failed[r]) {
      const TinyAIStatus s = encoder_(tensor, dtype, row_values_.data() + r * cols, cols, row_bytes_buf_.data() + r * row_bytes);
      const uint64_t row = (written_in_current_ / row_bytes) + r;
      return AddErrorContext(s, "'%s': tensor '%s', row %llu: ", path_.c_str(), tensors_[static_cast<size_t>(tensor)].name,
                             static_cast<unsigned long long>(row));
    }
  }
  return TINYAI_OK;
}

TinyAIStatus TmaiWriter::Finish() {
  if (!open_) return SetError(TINYAI_ERR_MISUSE, "TmaiWriter::Finish before Open");
  if (first_status_ != TINYAI_OK) return SetError(first_status_, "%s", first_error_.c_str());
  if (current_ < tensors_.size()) {
    return SetError(TINYAI_ERR_MISUSE, "'%s': tensor '%s' is missing %llu bytes", path_.c_str(),
                    tensors_[current_].name,
                    static_cast<unsigned long long>(tensors_[current_].decoded_size - written_in_current_));
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i].tensor_count == 0) {
      return SetError(TINYAI_ERR_MISUSE, "'%s': layer %zu has no tensors", path_.c_str(), i);
    }
  }
  const uint64_t file_size = cursor_;
  const std::vector<uint8_t> meta = SerializeMetadata();
  const tmai::IndexLayout layout = tmai::LayOutIndex(meta.size(), layers_.size(), tensors_.size());
  std::vector<uint8_t> index(static_cast<size_t>(layout.data_offset));
  tmai::SealIndex(layout, meta.data(), layers_.data(), static_cast<uint32_t>(layers_.size()), tensors_.data(),
                  static_cast<uint32_t>(tensors_.size()), file_size, version_major_, version_minor_, index.data());
  TINYAI_RETURN_IF_ERROR(WriteAt(0, index.data(), index.size()));
  TINYAI_RETURN_IF_ERROR(Flush());
  // A compressing writer's last raw copy or frames may lie past the end.
  if (high_water_ > file_size) TINYAI_RETURN_IF_ERROR(port::SetOutputSize(out_, file_size));
  open_ = false;
  TINYAI_RETURN_IF_ERROR(port::CommitOutput(&out_));
  for (const tmai::TensorEntry& t : tensors_) {
    stats_.tensors++;
    stats_.compressed_tensors += t.codec != TINYAI_CODEC_NONE ? 1 : 0;
    stats_.decoded_bytes += t.decoded_size;
    stats_.stored_bytes += t.stored_size;
  }
  stats_.file_size = file_size;
  return TINYAI_OK;
}

}  // namespace tinyai
