#include "model/dense_spec.h"

#include <cstdio>
#include <cstring>
#include <utility>

#include "common/format.h"
#include "common/printable.h"
#include "common/status.h"
#include "format/limits.h"
#include "kernels/kernels.h"
#include "tinyai/types.h"

namespace tinyai {
namespace {

// Floats per row of any layer's input or output (format/limits.h, as the
// writer keeps it).
constexpr int64_t kMaxWidth = limits::kMaxDenseWidth;
// "dense.65535.activation" and the like fit.
constexpr size_t kKeyCapacity = 48;

bool Equals(StringView s, const char* literal) {
  const size_t n = std::strlen(literal);
  return s.size == n && std::memcmp(s.data, literal, n) == 0;
}

// A required integer key in [min, max]; a missing or mistyped key is
// BAD_FORMAT (the reader's own accessors say NOT_FOUND for a missing one).
TinyAIStatus ReadInt(const TmaiReader& r, const char* key, int64_t min, int64_t max, int64_t* out) {
  const MetaEntry* e = r.FindMeta(key);
  if (!e) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': metadata '%s' is missing", r.source(), key);
  if (e->type != tmai::kMetaInt) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': metadata '%s' is not an integer", r.source(), key);
  }
  if (e->int_value < min || e->int_value > max) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': metadata '%s' is %lld; allowed %lld..%lld", r.source(), key,
                    static_cast<long long>(e->int_value), static_cast<long long>(min), static_cast<long long>(max));
  }
  *out = e->int_value;
  return TINYAI_OK;
}

// A required string key (not NUL-terminated).
TinyAIStatus ReadString(const TmaiReader& r, const char* key, StringView* out) {
  const MetaEntry* e = r.FindMeta(key);
  if (!e) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': metadata '%s' is missing", r.source(), key);
  if (e->type != tmai::kMetaString) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': metadata '%s' is not a string", r.source(), key);
  }
  out->data = reinterpret_cast<const char*>(e->payload);
  out->size = e->count;
  return TINYAI_OK;
}

// Items of a comma-separated list (empty items included).
size_t CountItems(StringView s) {
  size_t n = 1;
  for (size_t i = 0; i < s.size; ++i) n += s.data[i] == ',' ? 1 : 0;
  return n;
}

// One item of dense.<l>.inputs: an optional '-' then 1..10 digits.
bool ParseIndex(const char* p, size_t n, int64_t* out) {
  bool negative = n > 0 && p[0] == '-';
  if (negative) {
    ++p;
    --n;
  }
  if (n == 0 || n > 10) return false;
  int64_t v = 0;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] < '0' || p[i] > '9') return false;
    v = v * 10 + (p[i] - '0');
  }
  *out = negative ? -v : v;
  return true;
}

// "[64, 32]" for messages.
void FormatShape(const tmai::TensorEntry& t, char* buf, size_t cap) {
  size_t used = static_cast<size_t>(tinyai::Format(buf, cap, "["));
  for (uint32_t d = 0; d < t.ndims && d < tmai::kMaxDims && used < cap; ++d) {
    used += static_cast<size_t>(tinyai::Format(buf + used, cap - used, "%s%llu", d ? ", " : "",
                                              static_cast<unsigned long long>(t.shape[d])));
  }
  if (used < cap) tinyai::Format(buf + used, cap - used, "]");
}

}  // namespace

const char* DenseActivationName(DenseActivation a) {
  switch (a) {
    case DenseActivation::kNone:
      return "none";
    case DenseActivation::kRelu:
      return "relu";
    case DenseActivation::kTanh:
      return "tanh";
  }
  return "?";
}

uint64_t DenseNetSpec::bytes() const {
  return layers_.size() * sizeof(DenseLayerSpec) + inputs_.size() * sizeof(int32_t);
}

TinyAIStatus DenseNetSpec::Load(const TmaiReader& r) {
  // Built aside and kept only when the whole file checks out.
  input_dim_ = 0;
  output_dim_ = 0;
  layers_ = Array<DenseLayerSpec>();
  inputs_ = Array<int32_t>();
  input_count_ = 0;

  const char* src = r.source();
  StringView arch;
  TINYAI_RETURN_IF_ERROR(ReadString(r, "general.architecture", &arch));
  if (!Equals(arch, "dense")) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': architecture '%s' is not a dense network (expected 'dense')", src,
                    Printable(arch).c_str());
  }
  int64_t input_dim = 0, layer_count = 0;
  TINYAI_RETURN_IF_ERROR(ReadInt(r, "dense.input_dim", 1, kMaxWidth, &input_dim));
  TINYAI_RETURN_IF_ERROR(ReadInt(r, "dense.layers", 1, limits::kMaxDenseLayers, &layer_count));
  const auto file_layers = r.layers();
  if (file_layers.size() != static_cast<size_t>(layer_count)) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': dense.layers is %lld but the file has %zu layers", src,
                    static_cast<long long>(layer_count), file_layers.size());
  }
  const int32_t count = static_cast<int32_t>(layer_count);
  char key[kKeyCapacity];

  // Every layer's input list first, to size the one array that holds them.
  size_t total_inputs = 0;
  for (int32_t l = 0; l < count; ++l) {
    tinyai::Format(key, sizeof key, "dense.%d.inputs", l);
    StringView list;
    TINYAI_RETURN_IF_ERROR(ReadString(r, key, &list));
    total_inputs += CountItems(list);
  }
  Array<DenseLayerSpec> layers;
  Array<int32_t> inputs;
  TINYAI_RETURN_IF_ERROR(layers.Allocate(static_cast<size_t>(count), "dense layer specs"));
  TINYAI_RETURN_IF_ERROR(inputs.Allocate(total_inputs, "dense layer inputs"));

  const auto tensors = r.tensors();
  size_t next_input = 0;
  for (int32_t l = 0; l < count; ++l) {
    const tmai::LayerEntry& e = file_layers[static_cast<size_t>(l)];
    DenseLayerSpec& s = layers[static_cast<size_t>(l)];
    s.layer = l;
    if (e.kind != TINYAI_LAYER_DENSE) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': layer %d is of kind %s; every layer of a dense network is dense",
                      src, l, tinyaiLayerKindName(static_cast<TinyAILayerKind>(e.kind)));
    }
    if (e.block_index != l) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': dense layer %d has block_index %d, expected %d", src, l,
                      e.block_index, l);
    }

    StringView act;
    tinyai::Format(key, sizeof key, "dense.%d.activation", l);
    TINYAI_RETURN_IF_ERROR(ReadString(r, key, &act));
    if (Equals(act, "none")) {
      s.activation = DenseActivation::kNone;
    } else if (Equals(act, "relu")) {
      s.activation = DenseActivation::kRelu;
    } else if (Equals(act, "tanh")) {
      s.activation = DenseActivation::kTanh;
    } else {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': dense layer %d: activation '%s' is not supported (none, relu, tanh)",
                      src, l, Printable(act).c_str());
    }

    // Inputs: indices of earlier layers, or -1 for the network input, all of
    // one width, which is the layer's input width.
    StringView list;
    tinyai::Format(key, sizeof key, "dense.%d.inputs", l);
    TINYAI_RETURN_IF_ERROR(ReadString(r, key, &list));
    s.first_input = static_cast<int32_t>(next_input);
    s.input_count = 0;
    size_t begin = 0;
    while (true) {
      size_t end = begin;
      while (end < list.size && list.data[end] != ',') ++end;
      int64_t p = 0;
      if (!ParseIndex(list.data + begin, end - begin, &p)) {
        return SetError(TINYAI_ERR_BAD_FORMAT,
                        "'%s': dense layer %d: inputs '%s' is not a comma-separated list of layer indices", src, l,
                        Printable(list).c_str());
      }
      if (p < -1 || p >= count) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': dense layer %d: input %lld is out of range (-1..%d)", src, l,
                        static_cast<long long>(p), count - 1);
      }
      if (p >= l) {
        return SetError(TINYAI_ERR_BAD_FORMAT,
                        "'%s': dense layer %d: input %lld is %s; a layer reads only the network input (-1) and earlier "
                        "layers",
                        src, l, static_cast<long long>(p), p == l ? "the layer itself" : "a later layer");
      }
      // Each producer at most once, and at most kMaxDenseInputs of them: what
      // the scheduler and the runtime run (format/limits.h).
      for (int32_t k = 0; k < s.input_count; ++k) {
        if (inputs[static_cast<size_t>(s.first_input + k)] == p) {
          return SetError(TINYAI_ERR_BAD_FORMAT,
                          "'%s': dense layer %d: input %lld appears twice in '%s' (each input at most once)", src, l,
                          static_cast<long long>(p), Printable(list).c_str());
        }
      }
      if (s.input_count >= limits::kMaxDenseInputs) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': dense layer %d sums more than %d inputs", src, l,
                        limits::kMaxDenseInputs);
      }
      const int32_t width = p < 0 ? static_cast<int32_t>(input_dim) : layers[static_cast<size_t>(p)].out;
      if (s.input_count == 0) {
        s.in = width;
      } else if (width != s.in) {
        return SetError(TINYAI_ERR_BAD_FORMAT,
                        "'%s': dense layer %d: inputs of different widths: input %d is %d wide, input %lld is %d", src,
                        l, inputs[static_cast<size_t>(s.first_input)], s.in, static_cast<long long>(p), width);
      }
      inputs[next_input++] = static_cast<int32_t>(p);
      ++s.input_count;
      if (end == list.size) break;
      begin = end + 1;
    }

    // Tensors: one weight, at most one bias, nothing else.
    for (uint32_t t = e.first_tensor; t < e.first_tensor + e.tensor_count; ++t) {
      const tmai::TensorEntry& te = tensors[t];
      int32_t* slot = te.role == TINYAI_ROLE_DENSE_WEIGHT ? &s.weight : te.role == TINYAI_ROLE_DENSE_BIAS ? &s.bias : nullptr;
      if (!slot) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': dense layer %d: tensor '%s' has role %s, which a dense layer has not",
                        src, l, te.name, tinyaiTensorRoleName(static_cast<TinyAITensorRole>(te.role)));
      }
      if (*slot >= 0) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': dense layer %d has two %s tensors ('%s' and '%s')", src, l,
                        tinyaiTensorRoleName(static_cast<TinyAITensorRole>(te.role)), tensors[static_cast<size_t>(*slot)].name,
                        te.name);
      }
      if (te.codec != TINYAI_CODEC_NONE && te.codec != TINYAI_CODEC_ZSTD) {
        return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': dense layer %d: tensor '%s' is stored with codec %s, which this runner cannot read",
                        src, l, te.name, tinyaiCodecName(static_cast<TinyAICodec>(te.codec)));
      }
      // Weights may be any dtype the kernels multiply; biases stay f32.
      const bool bias = te.role != TINYAI_ROLE_DENSE_WEIGHT;
      if (bias ? te.dtype != TINYAI_DTYPE_F32 : kernels::WeightKernelsFor(kernels::Best(), te.dtype) == nullptr) {
        return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': dense layer %d: tensor '%s' is %s; %s", src, l, te.name,
                        tinyaiDTypeName(static_cast<TinyAIDType>(te.dtype)),
                        bias ? "biases must be f32" : "the kernels have no products for it");
      }
      *slot = static_cast<int32_t>(t);
    }
    if (s.weight < 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': dense layer %d has no %s tensor", src, l,
                      tinyaiTensorRoleName(TINYAI_ROLE_DENSE_WEIGHT));
    }
    char shape[96];
    const tmai::TensorEntry& w = tensors[static_cast<size_t>(s.weight)];
    if (w.ndims != 2 || w.shape[1] != static_cast<uint64_t>(s.in) || w.shape[0] < 1 ||
        w.shape[0] > static_cast<uint64_t>(kMaxWidth)) {
      FormatShape(w, shape, sizeof shape);
      return SetError(TINYAI_ERR_BAD_FORMAT,
                      "'%s': dense layer %d: tensor '%s' has shape %s, expected [out, %d] (out 1..%lld; %d is the "
                      "width of its inputs)",
                      src, l, w.name, shape, s.in, static_cast<long long>(kMaxWidth), s.in);
    }
    s.out = static_cast<int32_t>(w.shape[0]);
    if (s.bias >= 0) {
      const tmai::TensorEntry& b = tensors[static_cast<size_t>(s.bias)];
      if (b.ndims != 1 || b.shape[0] != static_cast<uint64_t>(s.out)) {
        FormatShape(b, shape, sizeof shape);
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': dense layer %d: tensor '%s' has shape %s, expected [%d] (the weight's rows)",
                        src, l, b.name, shape, s.out);
      }
    }
  }

  // Outputs: the layers no later layer reads, concatenated in layer order.
  for (DenseLayerSpec& s : layers) s.is_output = true;
  for (size_t i = 0; i < next_input; ++i) {
    if (inputs[i] >= 0) layers[static_cast<size_t>(inputs[i])].is_output = false;
  }
  int64_t output_dim = 0;
  for (const DenseLayerSpec& s : layers) output_dim += s.is_output ? s.out : 0;
  if (output_dim > limits::kMaxDenseOutputWidth) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': the network's output is %lld floats wide; at most %lld", src,
                    static_cast<long long>(output_dim), static_cast<long long>(limits::kMaxDenseOutputWidth));
  }

  input_dim_ = static_cast<int32_t>(input_dim);
  output_dim_ = static_cast<int32_t>(output_dim);
  layers_ = std::move(layers);
  inputs_ = std::move(inputs);
  input_count_ = next_input;
  return TINYAI_OK;
}

}  // namespace tinyai
