// What the forward scheduler needs from a model's runtime (a "program"): how
// each layer becomes operators of the activation graph, how those operators
// run on buffers the scheduler's plan places, and what the runtime holds
// besides the arena (weights streamed through the cache, persistent state
// such as the KV cache, tables).
//
// The scheduler owns the order, the plan, the arena and the memory budget;
// a program owns the weights' binding and the arithmetic. LlamaModel
// (model/llama.h) and DenseModel (model/dense.h) are programs; tests supply
// their own.
#ifndef TINYAI_SCHEDULER_PROGRAM_H_
#define TINYAI_SCHEDULER_PROGRAM_H_

#include <cstddef>
#include <cstdint>

#include "planner/activation_graph.h"
#include "scheduler/layer_graph.h"
#include "tinyai/status.h"

namespace tinyai {

class WeightStream;

// Where one operator's buffers are for this pass.
struct OpIo {
  const void* inputs[kMaxOpInputs] = {nullptr, nullptr, nullptr, nullptr};
  void* output = nullptr;
  void* scratch = nullptr;       // nullptr when the operator has none
  uint64_t scratch_bytes = 0;
};

// The pass being run.
struct PassContext {
  PassShape shape;        // rows in this pass (and, for attention, position + rows as context)
  int32_t position = 0;   // first position of this pass's rows (language models)
  int32_t row_offset = 0; // first row of the scheduler's input this pass covers (sub-batches)
};

// What the blocks of a schedule's layers take in the weight cache.
struct WeightTotals {
  uint64_t resident = 0;       // the cache's bytes with every one loaded (NORMAL), slot rounding included
  uint64_t decoded = 0;        // the weights themselves
  uint64_t largest_block = 0;  // the largest single block's cache bytes
  int32_t block = -1;          // that block
};

// What a program holds besides weights and the arena.
struct ProgramMemory {
  uint64_t persistent = 0;  // state kept across passes (the KV cache)
  uint64_t tables = 0;      // tokenizer, sampler scratch, tensor and block tables
};

class LayerProgram {
 public:
  // Bytes one row of the layer's output takes; TINYAI_ERR_INVALID_ARGUMENT
  // naming the layer when the program cannot run it.
  virtual TinyAIStatus OutputRowBytes(int32_t layer, uint64_t* bytes) const = 0;
  // Bytes per row of the scheduler's input (what layers added with
  // TINYAI_DEP_NONE read).
  virtual SizeRule InputSize() const = 0;
  // Checks a built schedule is one this program can run (e.g. a language
  // model's chain); a specific status naming the layer otherwise.
  virtual TinyAIStatus CheckSchedule(const LayerGraph& graph) const = 0;
  // Adds the operators of the schedule's node `node`, reading `inputs` (one
  // tensor per dependency, in the order they were added; the graph input's
  // tensor for TINYAI_DEP_NONE), and returns the tensor holding its output.
  virtual TinyAIStatus EmitLayer(const LayerGraph& graph, int32_t node, const int32_t* inputs, int32_t count,
                                 ActivationGraph* g, int32_t* output) = 0;
  virtual void NameOp(const GraphOp& op, char* out, size_t capacity) const = 0;
  // Runs one operator; may fail with a status (a weight that fails its
  // checksum as it loads).
  virtual TinyAIStatus RunOp(const GraphOp& op, const OpIo& io, const PassContext& pass) = 0;
  // Called after the last operator of a pass.
  virtual void EndPass(const PassContext& pass) = 0;

  // The weights the program streams (nullptr when it has none).
  virtual WeightStream* weights() = 0;
  // What it holds besides weights, once AllocateState() has run (and what it
  // will hold, before).
  virtual ProgramMemory Memory() const = 0;
  // Allocates persistent state (after the budget check).
  virtual TinyAIStatus AllocateState() = 0;
  // Positions attended to (0 for programs without attention).
  virtual int32_t context_length() const = 0;

 protected:
  ~LayerProgram() = default;
};

// A layer's input when it has several dependencies: their sum, as a tree of
// operators of kind `sum_kind` taking up to kMaxOpInputs inputs each (the
// first may be overwritten in place at its last use unless it is an
// ATTENTION input). `base` gives the layer, node and arg; size is the sum's.
// With one input, *out is that input and nothing is added.
TinyAIStatus EmitSum(ActivationGraph* g, const GraphOp& base, int32_t sum_kind, const int32_t* inputs,
                     const TinyAIDependencyType* types, int32_t count, const SizeRule& size, int32_t* out);

// Runs a sum operator over floats floats per input: out = the sum of the
// inputs, in input order (out may be inputs[0]).
void RunSum(const GraphOp& op, const OpIo& io, size_t floats, void (*add)(float* y, const float* x, size_t n));

}  // namespace tinyai

#endif  // TINYAI_SCHEDULER_PROGRAM_H_
