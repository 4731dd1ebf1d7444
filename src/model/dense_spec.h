// A dense network as a .tmai file describes it (docs/format.md, "Dense
// networks"): layers of y = act(W x + b), where a layer's input x is the sum
// of the outputs of the layers it names (or of the network's input), so
// residual blocks are written as a layer that takes two inputs.
//
// DenseNetSpec::Load reads and checks the "dense.*" metadata and the tensors
// of every layer against each other; the runtime (model/dense.h) and the
// scheduler's AddModelLayers use what it found.
#ifndef TINYAI_MODEL_DENSE_SPEC_H_
#define TINYAI_MODEL_DENSE_SPEC_H_

#include <cstdint>

#include "common/array.h"
#include "common/span.h"
#include "format/tmai_reader.h"
#include "tinyai/status.h"

namespace tinyai {

enum class DenseActivation : int32_t { kNone = 0, kRelu = 1, kTanh = 2 };

// "none", "relu", "tanh"; "?" for anything else.
const char* DenseActivationName(DenseActivation a);

struct DenseLayerSpec {
  int32_t layer = -1;        // the file's layer index (every layer of a dense model is one)
  int32_t in = 0;            // input width (columns of the weight)
  int32_t out = 0;           // output width (rows of the weight)
  DenseActivation activation = DenseActivation::kNone;
  int32_t weight = -1;       // tensor index of dense.<l>.weight, f32 [out, in]
  int32_t bias = -1;         // tensor index of dense.<l>.bias, f32 [out]; -1 when the layer has none
  int32_t first_input = 0;   // its inputs are inputs()[first_input .. first_input + input_count)
  int32_t input_count = 0;   // >= 1
  bool is_output = false;    // no later layer reads it: part of the network's output
};

class DenseNetSpec {
 public:
  // Reads "general.architecture" == "dense", "dense.input_dim", "dense.layers"
  // and per layer l "dense.<l>.activation" and "dense.<l>.inputs", and binds
  // the tensors. Errors, each naming the file, the layer and the value:
  // TINYAI_ERR_UNSUPPORTED for another architecture, an unknown activation,
  // or a dtype/codec other than f32 with codec none or zstd;
  // TINYAI_ERR_BAD_FORMAT for a missing or mistyped key, a layer that is not
  // of kind dense, a missing weight, a shape that disagrees with the widths,
  // an input that names a later layer or itself or is out of range, or inputs
  // of different widths.
  TinyAIStatus Load(const TmaiReader& reader);

  int32_t input_dim() const { return input_dim_; }
  Span<const DenseLayerSpec> layers() const { return Span<const DenseLayerSpec>(layers_.data(), layers_.size()); }
  // Producer layer indices (into layers()); -1 is the network's input.
  Span<const int32_t> inputs() const { return Span<const int32_t>(inputs_.data(), input_count_); }
  // Sum of the output widths of the output layers (floats per row of the
  // network's output).
  int32_t output_dim() const { return output_dim_; }
  // Bytes this spec holds (for memory accounting).
  uint64_t bytes() const;

 private:
  int32_t input_dim_ = 0;
  int32_t output_dim_ = 0;
  Array<DenseLayerSpec> layers_;
  Array<int32_t> inputs_;
  size_t input_count_ = 0;
};

}  // namespace tinyai

#endif  // TINYAI_MODEL_DENSE_SPEC_H_
