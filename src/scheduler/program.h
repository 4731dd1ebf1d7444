// What the forward scheduler needs from a model's runtime (a "program"): how
// each layer becomes operators of the activation graph, how those operators
// run on buffers the scheduler's plan places, and what the runtime holds
// besides the arena (weights streamed through the cache, persistent state
// such as the KV cache, tables).
//
// The scheduler owns the order, the plan, the arena and the memory budget;
// a program owns the weights' binding and the arithmetic. LlamaModel
// (model/llama.h) and DenseModel (model/dense.h) are programs; tests supply
// their own. The scheduler knows no model by name: a model's runtime (its
// program and the loop behind the guide's tinyaiExecuteNextLayer) is picked
// for its architecture by model/runtime.h and handed over as a ModelRuntime.
#ifndef TINYAI_SCHEDULER_PROGRAM_H_
#define TINYAI_SCHEDULER_PROGRAM_H_

#include <cstddef>
#include <cstdint>

#include "planner/activation_graph.h"
#include "scheduler/layer_graph.h"
#include "tinyai/status.h"

namespace tinyai {


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
  // False when nothing reads this pass's output: a prompt's passes before
  // its last. A language model then skips its final norm and classifier
  // (the output buffer keeps what it held).
  bool output = true;
};


// What a program holds besides weights and the arena.
struct ProgramMemory {
  uint64_t persistent = 0;  // state kept across passes (the KV cache)
  uint64_t tables = 0;      // tokenizer, sampler scratch, tensor and slice tables
};

// What the row slices of a schedule's layers take in the weight cache.
struct WeightTotals {
  uint64_t resident = 0;       // the cache's bytes with every one loaded (NORMAL), slot rounding included
  uint64_t decoded = 0;        // the weights themselves
  uint64_t largest_slice = 0;  // the largest single slice's cache bytes
  int32_t slice = -1;          // that slice
};

// The weights a program streams through the model's weight cache, as the
// scheduler sees them when it plans and prepares (model/weight_stream.h).
class ProgramWeights {
 public:
  // What the slices of the scheduled layers take (layers[l] != 0 for a
  // scheduled layer, nullptr = all).
  virtual WeightTotals Sum(const uint8_t* layers) const = 0;
  // Names what a slice holds: "tensor 'x'", or for a slice several small
  // tensors share, "tensor 'x' and 3 smaller ones of layer 'block.0'".
  virtual void DescribeSlice(int32_t slice, char* out, size_t capacity) const = 0;
  // The tensor with the most bytes in slice (-1 for none).
  virtual int32_t MainTensor(int32_t slice) const = 0;
  // Re-reads the cache's cap to size the streaming (after it changed).
  virtual void UpdateStreaming() = 0;
  // Loads every slice the scheduled layers use (NORMAL mode); the cache's
  // TINYAI_ERR_RESOURCE_EXHAUSTED when they do not fit its cap.
  virtual TinyAIStatus Preload(const uint8_t* layers) = 0;

 protected:
  ~ProgramWeights() = default;
};

// TINYAI_ERR_UNSUPPORTED: a program without layers of its own. (Defined out
// of line; LayerProgram has no key function, so tests built with RTTI get
// its typeinfo inline.)
TinyAIStatus NoModelLayers();

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
  // Called before the first operator of a pass (a growable KV cache takes
  // the room the pass's positions need); a failure refuses the pass.
  virtual TinyAIStatus BeginPass(const PassContext&) { return TINYAI_OK; }
  // Called after the last operator of a pass.
  virtual void EndPass(const PassContext& pass) = 0;

  // The weights the program streams (nullptr when it has none).
  virtual ProgramWeights* weights() = 0;
  // What it holds besides weights, once AllocateState() has run (and what it
  // will hold, before).
  virtual ProgramMemory Memory() const = 0;
  // Of Memory().persistent, what is held now (less while a growable KV
  // cache has not reached its size), and the most held so far.
  virtual uint64_t PersistentHeld() const { return Memory().persistent; }
  // The most it holds while BeginPass(pass) runs (the scheduler gives the
  // weights less room first).
  virtual uint64_t PersistentFor(const PassContext&) const { return PersistentHeld(); }
  virtual uint64_t PersistentPeak() const { return Memory().persistent; }
  // Alternative forms of the persistent state the scheduler may choose
  // among inside the memory limit, most faithful first (a KV cache in f32,
  // f16, int8 when the caller asked the scheduler to choose): 1 = none to
  // choose. UsePersistentOption(i) switches to option i before
  // AllocateState(); Memory() and the operators' sizes then follow it.
  virtual int32_t PersistentOptions() const { return 1; }
  virtual TinyAIStatus UsePersistentOption(int32_t) { return TINYAI_OK; }
  // What option i is called in a plan's reason ("f16 KV cache").
  virtual void NamePersistentOption(int32_t, char* out, size_t capacity) const {
    if (capacity > 0) out[0] = '\0';
  }
  // Allocates persistent state (after the budget check).
  virtual TinyAIStatus AllocateState() = 0;
  // Positions attended to (0 for programs without attention).
  virtual int32_t context_length() const = 0;

  // Adds the model's own layers to an empty schedule
  // (tinyaiAddModelLayersToSchedule); TINYAI_ERR_UNSUPPORTED by default.
  virtual TinyAIStatus AddModelLayers(LayerGraph*) const { return NoModelLayers(); }
  // The rows of a pass when the caller plans no max shapes: `batch` (the
  // schedule's batch size) by default; a language model's prompt chunk.
  virtual int32_t DefaultRows(int32_t batch) const { return batch; }
  // Forgets what earlier passes left (a language model's position): a
  // scheduler prepared again restarts.
  virtual void Reset() {}

 protected:
  ~LayerProgram() = default;
};

// The guide's execution loop (tinyaiExecuteNextLayer) over a prepared
// scheduler. What a run is belongs to the model: text generation for a
// language model (model/runtime.h), rows of a batch for a dense network
// (scheduler/batch_loop.h).
class ExecutionLoop {
 public:
  // Memory every run needs, allocated when the scheduler is prepared (after
  // its budget check), so that a run allocates nothing.
  virtual TinyAIStatus Reserve() { return TINYAI_OK; }
  // Runs the next layer of the run in progress, starting one from input
  // when none is; output holds output_capacity bytes (text loops). True
  // while the run goes on; false when it has ended, with *status TINYAI_OK
  // at its normal end or the status that ended it.
  virtual bool Next(const void* input, void* output, size_t output_capacity, int32_t* layer,
                    TinyAIStatus* status) = 0;
  // Abandons the run in progress, if any.
  virtual void Cancel() = 0;
  virtual bool running() const = 0;
  // True when output is NUL-terminated text (left empty by a failed run).
  virtual bool writes_text() const = 0;

 protected:
  ~ExecutionLoop() = default;
};

// What runs a model in a scheduler: its program and its loop (nullptr: the
// guide's loop is unsupported). The scheduler owns it once adopted and ends
// it with Destroy() (no virtual destructor: its deleting form would pull
// operator delete into a core that has none on bare metal).
class ModelRuntime {
 public:
  virtual LayerProgram* program() = 0;
  virtual ExecutionLoop* loop() = 0;
  // Destroys and frees this runtime (made with tinyai::New).
  virtual void Destroy() = 0;

 protected:
  ~ModelRuntime() = default;
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
