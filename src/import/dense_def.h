// Dense networks from a definition file (tinyai-convert --dense), with
// seeded random weights.
#ifndef TINYAI_IMPORT_DENSE_DEF_H_
#define TINYAI_IMPORT_DENSE_DEF_H_

#include <cstdint>
#include <string>
#include <vector>

#include "import/builder.h"
#include "tinyai/status.h"

namespace tinyai {

// The format: docs/format.md, "Dense networks".
//
// A definition file describes an MLP whose layers may read several earlier
// layers (their outputs are summed), which is how residual blocks are written:
//
//   # comment lines and blank lines are ignored; '#' also ends a line early
//   name mlp-residual          # optional: general.name
//   input 32                   # floats per input row (required, before the first layer)
//   seed 7                     # optional, default 1
//   layer fc_in  out=64 act=relu
//   layer b0_fc1 out=64 act=relu
//   layer b0_fc2 out=64 act=none
//   layer b1_fc1 out=64 act=relu inputs=b0_fc2,fc_in    # input = b0_fc2 + fc_in: a residual block
//   ...
//   layer head   out=10 act=none bias=0
//
// Directives are whitespace-separated tokens, one directive per line; each of
// name, input and seed appears at most once. `layer NAME key=value...` takes
// out=N (required, 1..16777216), act=none|relu|tanh (default none), bias=0|1
// (default 1) and inputs=A,B,... (no spaces; default: the previous layer, or
// the network input for the first layer). In inputs=, a name is an earlier
// layer and `input` is the network's input, each at most once and at most
// limits::kMaxDenseInputs (64) of them; the inputs must all have the same
// width, which becomes the layer's input width. The network's output (the
// layers no later layer reads) is at most limits::kMaxDenseOutputWidth floats. NAME is letters, digits, '_',
// '-' and '.', unique, and not `input`. The network's output is the
// concatenation, in layer order, of the layers no later layer reads.

struct DenseLayerDef {
  std::string name;
  int32_t out = 0;                  // output width (rows of the weight)
  std::string activation;           // "none", "relu" or "tanh"; empty means none
  std::vector<std::string> inputs;  // earlier layer names or "input"; empty: the previous layer (or the input)
  bool bias = true;
};

struct DenseNetDef {
  std::string name;       // general.name; may be empty
  int32_t input_dim = 0;  // floats per input row
  uint64_t seed = 1;      // of the random weights
  std::vector<DenseLayerDef> layers;
};

// Parses a definition (above). Errors are TINYAI_ERR_INVALID_ARGUMENT with a
// message "line N: ..." naming the problem: an unknown directive or key, a
// missing or repeated `input`, a bad number, a duplicate layer name, an input
// naming an unknown or later layer, an input named twice, more than 64
// inputs, an unknown activation, inputs of different widths, an output wider
// than limits::kMaxDenseOutputWidth, or no layers.
TinyAIStatus ParseDenseDefinition(const std::string& text, DenseNetDef* out);

// Writes a dense network with seeded random weights: each weight uniform with
// variance 1/in, each bias uniform in [-0.1, 0.1]; the same definition and
// seed give the same bytes. def is checked as ParseDenseDefinition checks a
// file (TINYAI_ERR_INVALID_ARGUMENT naming the layer). stats, when not null,
// receives what was written.
TinyAIStatus WriteDenseModel(const DenseNetDef& def, const char* outPath, const WriteOptions& options = WriteOptions(),
                             TmaiWriteStats* stats = nullptr);

}  // namespace tinyai

#endif  // TINYAI_IMPORT_DENSE_DEF_H_
