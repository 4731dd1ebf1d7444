#include "import/reencode.h"

#include <cstring>
#include <string>
#include <vector>

#include "common/array.h"
#include "common/checked_math.h"
#include "common/groups.h"
#include "common/half.h"
#include "common/status.h"
#include "format/tmai_reader.h"
#include "format/tmai_writer.h"
#include "kernels/kernels.h"
#include "loader/mapped_model.h"

namespace tinyai {

namespace {

// The input model's tensors are read through the loader with this cap on
// its weight cache, so converting holds one row slice at a time, not a model.
constexpr uint64_t kReencodeCacheCap = 64u << 20;

void CopyMetadata(const TmaiReader& r, const WriteOptions& options, TmaiWriter* w) {
  for (const MetaEntry& m : r.metadata()) {
    const std::string key(m.key.data, m.key.size);
    switch (m.type) {
      case tmai::kMetaInt:
        w->AddMetaInt(key, m.int_value);
        break;
      case tmai::kMetaFloat:
        w->AddMetaFloat(key, m.float_value);
        break;
      case tmai::kMetaString:
        w->AddMetaString(key, key == "general.name" && !options.name.empty()
                                  ? options.name
                                  : std::string(reinterpret_cast<const char*>(m.payload), m.count));
        break;
      case tmai::kMetaFloatArray: {
        std::vector<float> v(m.count);
        if (m.count > 0) TmaiReader::CopyFloatArray(m, v.data());
        w->AddMetaFloatArray(key, v);
        break;
      }
      case tmai::kMetaStringArray: {
        std::vector<StringView> views(m.count);
        if (m.count > 0) TmaiReader::GetStringArray(m, views.data());
        std::vector<std::string> v;
        v.reserve(m.count);
        for (const StringView& sv : views) v.emplace_back(sv.data, sv.size);
        w->AddMetaStringArray(key, v);
        break;
      }
      default:
        break;  // the reader refuses other types
    }
  }
}

}  // namespace

TinyAIStatus ReencodeModel(const char* inPath, const char* outPath, const WriteOptions& options, bool keep_dtypes,
                           TmaiWriteStats* stats) {
  TINYAI_RETURN_IF_ERROR(CheckWriteOptions(options));
  if (SameFile(outPath, inPath)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                    "the output '%s' is the input '%s' (the same file); refusing to overwrite an input", outPath, inPath);
  }
  TinyAIMmapConfig cfg = tinyaiCreateDefaultMmapConfig();
  cfg.maxCacheSize = static_cast<size_t>(kReencodeCacheCap);
  TinyAIMappedModel* model = tinyaiOpenMappedModel(inPath, &cfg);
  if (model == nullptr) return tinyaiGetLastError();
  struct Close {
    TinyAIMappedModel* m;
    ~Close() { tinyaiCloseMappedModel(m); }
  } close{model};
  return ReencodeModel(model, outPath, options, keep_dtypes, stats);
}

TinyAIStatus ReencodeModel(TinyAIMappedModel* model, const char* outPath, const WriteOptions& options,
                           bool keep_dtypes, TmaiWriteStats* stats) {
  TINYAI_RETURN_IF_ERROR(CheckWriteOptions(options));
  const TmaiReader& r = model->reader();
  const char* inPath = r.source();
  const auto tensors = r.tensors();
  auto dtype_of = [&](const tmai::TensorEntry& e) {
    return e.ndims == 2 && !keep_dtypes ? options.matrix_dtype : static_cast<TinyAIDType>(e.dtype);
  };
  // A grouped tensor is copied, or dequantized exactly to f32 or f16; it is
  // never quantized again to another grouped dtype (that would add a second
  // rounding to the first): quantize from the f32 or f16 original instead.
  for (const tmai::TensorEntry& e : tensors) {
    if (GroupBytes(e.dtype) != 0 && GroupBytes(dtype_of(e)) != 0 && dtype_of(e) != e.dtype) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' is already %s; quantize to %s from the f32 or f16 model",
                      inPath, e.name, tinyaiDTypeName(static_cast<TinyAIDType>(e.dtype)),
                      tinyaiDTypeName(dtype_of(e)));
    }
  }
  TmaiWriter w;
  UseRowEncoder(&w, options);
  w.SetCompression(options.codec, options.level);
  CopyMetadata(r, options, &w);
  if (!options.name.empty() && r.FindMeta("general.name") == nullptr) w.AddMetaString("general.name", options.name);
  for (const tmai::LayerEntry& l : r.layers()) {
    w.AddLayer(static_cast<TinyAILayerKind>(l.kind), l.block_index);
    for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) {
      const tmai::TensorEntry& e = tensors[t];
      w.AddTensor(e.name, static_cast<TinyAITensorRole>(e.role), dtype_of(e),
                  std::vector<uint64_t>(e.shape, e.shape + e.ndims));
    }
  }
  TINYAI_RETURN_IF_ERROR(w.Open(outPath));
  std::vector<float> values;
  std::vector<uint8_t> rows_out;
  for (const tmai::LayerEntry& l : r.layers()) {
    for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) {
      const tmai::TensorEntry& e = tensors[t];
      const int32_t tensor = static_cast<int32_t>(t);
      const uint64_t rows = model->slices().rows(tensor), row_bytes = model->slices().row_bytes(tensor);
      const bool same = dtype_of(e) == e.dtype;
      // Copied out in the row layout (the cache may hold rows in panels).
      const uint64_t most = (1u << 20) / row_bytes > 0 ? (1u << 20) / row_bytes : 1;
      rows_out.resize(static_cast<size_t>(most * row_bytes));
      for (uint64_t row = 0; row < rows;) {
        const uint8_t* p = rows_out.data();
        uint64_t got = 0;
        TINYAI_RETURN_IF_ERROR(model->CopyRows(tensor, row, most, rows_out.data(), &got));
        const size_t bytes = static_cast<size_t>(got * row_bytes);
        TinyAIStatus s;
        if (same) {
          s = w.Write(p, bytes);
        } else {  // decoded to fp32 a row at a time, then stored in the new dtype
          const kernels::WeightKernels* decode = kernels::WeightKernelsFor(kernels::Ref(), e.dtype);
          const size_t cols = static_cast<size_t>(e.shape[e.ndims - 1]);
          values.resize(static_cast<size_t>(got) * cols);
          for (uint64_t i = 0; i < got; ++i) decode->dequantize_row(p + i * row_bytes, values.data() + i * cols, cols);
          s = w.WriteValues(values.data(), values.size());
        }
        TINYAI_RETURN_IF_ERROR(s);
        row += got;
      }
    }
  }
  TINYAI_RETURN_IF_ERROR(w.Finish());
  if (stats) *stats = w.stats();
  return TINYAI_OK;
}

}  // namespace tinyai
