// The activation graph of one forward pass: operators in execution order,
// the tensors they read and write, and each operator's scratch buffer - and
// the static plans that place all of them in one arena (000_*.txt, 001_*.txt).
//
// Sizes are rules over the pass's shape (rows = tokens of a prompt chunk or
// samples of a batch; context = positions attended to), so one graph is
// planned for several maximum shapes - e.g. the first step of decoding (a
// 16-token prompt chunk) and the last (one token at the end of the context)
// - and any pass whose shape is at most one of them runs in that shape's
// plan without reallocating.
//
// Lifetimes: a tensor is live from the step of the operator that writes it
// to the step of its last reader; so a residual stream read again several
// operators later stays live until then, and a graph output stays live to
// the end of the pass (step op_count()). Scratch is live only during its
// operator's step, so the scratch of different operators shares one region
// of the arena instead of each owning its own.
//
// In place: an operator may name one input whose buffer its output takes
// over (RMSNorm over the residual stream, an elementwise add, RoPE, SwiGLU).
// Finish() grants it when that is the input's last use, the input is neither
// the caller's memory nor a graph output, and the output is no larger under
// every shape; the two tensors then form one buffer group. Debug mode grants
// nothing, so every tensor has its own buffer (000_*.txt's execution_mode
// 'debug'): its results must equal the planned mode's exactly.
#ifndef TINYAI_PLANNER_ACTIVATION_GRAPH_H_
#define TINYAI_PLANNER_ACTIVATION_GRAPH_H_

#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/span.h"
#include "common/vector.h"
#include "planner/arena_planner.h"
#include "tinyai/status.h"

namespace tinyai {

// Every planned buffer starts on, and is rounded up to, this many bytes.
constexpr uint64_t kArenaAlignment = 64;

struct PassShape {
  int32_t rows = 1;     // tokens of a prompt chunk, or samples of a batch
  int32_t context = 0;  // positions attended to (0 for networks without attention)
};

// True when a pass of shape `s` fits a plan made for `max`.
inline bool ShapeFits(const PassShape& s, const PassShape& max) {
  return s.rows <= max.rows && s.context <= max.context;
}

// Bytes of a buffer as a function of the pass shape:
// per_row * rows + per_context * round_up(context, context_round) + fixed.
struct SizeRule {
  uint64_t per_row = 0;
  uint64_t per_context = 0;
  uint64_t fixed = 0;
  uint32_t context_round = 1;

  static SizeRule Rows(uint64_t bytes_per_row) {
    SizeRule r;
    r.per_row = bytes_per_row;
    return r;
  }
  static SizeRule Fixed(uint64_t bytes) {
    SizeRule r;
    r.fixed = bytes;
    return r;
  }
  bool empty() const { return per_row == 0 && per_context == 0 && fixed == 0; }
  // False when the size overflows 64 bits.
  bool Eval(const PassShape& s, uint64_t* bytes) const;
  // True when this rule is at most `o` under every shape (rows >= 1).
  bool AtMost(const SizeRule& o) const;
};

constexpr int kMaxOpInputs = 4;

struct GraphTensor {
  SizeRule size;
  int32_t producer = -1;  // operator index; -1 for a graph input
  int32_t last_use = -1;  // last operator reading it (Finish)
  bool external = false;  // a graph input in the caller's memory: not in the arena
  bool output = false;    // a graph output: live to the end of the pass
};

struct GraphOp {
  int32_t kind = 0;   // the program's operator kind (it names it)
  int32_t layer = -1; // the model layer (or schedule layer) it belongs to
  int32_t node = -1;  // the position of that layer in the schedule's order
  int32_t arg = 0;    // for the program (e.g. a transformer block number)
  int32_t inputs[kMaxOpInputs] = {-1, -1, -1, -1};
  int32_t input_count = 0;
  int32_t output = -1;
  SizeRule scratch;   // bytes of scratch the operator needs while it runs
  int32_t in_place = -1;  // index into inputs[] of an input the output may overwrite; -1 none
};

// One plan: where every buffer group and every operator's scratch lives for
// passes up to `shape`. result.naive_bytes counts every tensor (in-place
// ones included) and every scratch in its own place.
struct ShapePlan {
  PassShape shape;
  ArenaPlanResult result;
  Array<uint64_t> offsets;       // planned buffers: groups, then scratches
  Array<PlanBuffer> buffers;     // their sizes and lifetimes (for dumps and checks)
};

class ActivationGraph {
 public:
  ActivationGraph() = default;
  ActivationGraph(const ActivationGraph&) = delete;
  ActivationGraph& operator=(const ActivationGraph&) = delete;

  void Clear();

  // A graph input held by the caller (token ids, a batch of samples).
  TinyAIStatus AddInput(const SizeRule& size, int32_t* tensor);
  // Appends an operator (after every operator already added) writing a new
  // tensor of out_size; op.inputs must name existing tensors. Sets
  // op.output and returns the tensor in *output.
  TinyAIStatus AddOp(GraphOp op, const SizeRule& out_size, int32_t* output);
  TinyAIStatus MarkOutput(int32_t tensor);

  // Derives lifetimes and buffer groups (in-place takeovers unless debug).
  TinyAIStatus Finish(bool debug);

  // Plans the arena for passes up to shape.
  TinyAIStatus Plan(const PassShape& shape, ArenaPlanner* planner, ShapePlan* out) const;

  Span<const GraphOp> ops() const { return ops_.span(); }
  Span<const GraphTensor> tensors() const { return tensors_.span(); }
  Span<const int32_t> outputs() const { return outputs_.span(); }
  int32_t op_count() const { return static_cast<int32_t>(ops_.size()); }
  bool debug() const { return debug_; }

  // The buffer group of a tensor (-1 for an external one); groups are the
  // first planned buffers, so this is also its index in ShapePlan::offsets.
  int32_t group(int32_t tensor) const { return group_of_[static_cast<size_t>(tensor)]; }
  int32_t group_count() const { return group_count_; }
  // Index in ShapePlan::offsets of an operator's scratch; -1 when it has none.
  int32_t scratch_buffer(int32_t op) const { return scratch_of_[static_cast<size_t>(op)]; }
  int32_t buffer_count() const { return group_count_ + scratch_count_; }
  // Operators granted in place.
  int32_t in_place_count() const { return in_place_count_; }

  // Bytes this graph holds (for memory accounting).
  uint64_t bytes() const;

 private:
  Vector<GraphOp> ops_;
  Vector<GraphTensor> tensors_;
  Vector<int32_t> outputs_;
  Array<int32_t> group_of_;    // per tensor
  Array<int32_t> scratch_of_;  // per op
  int32_t group_count_ = 0;
  int32_t scratch_count_ = 0;
  int32_t in_place_count_ = 0;
  bool debug_ = false;
  bool finished_ = false;
};

// Bounded text output for dumps: writes what fits (always NUL-terminated
// when capacity > 0) and counts the length the whole text needs.
class TextBuffer {
 public:
  TextBuffer(char* buf, size_t capacity) : buf_(buf), capacity_(capacity) {
    if (buf_ && capacity_) buf_[0] = '\0';
  }
  void Printf(const char* format, ...)
#if defined(__GNUC__)
      __attribute__((format(printf, 2, 3)))
#endif
      ;
  size_t length() const { return length_; }
  bool truncated() const { return length_ + 1 > capacity_; }

 private:
  char* buf_;
  size_t capacity_;
  size_t length_ = 0;
};

// Names operators for dumps and messages, e.g. "block.3/attention".
class OpNamer {
 public:
  virtual void Name(const GraphOp& op, char* out, size_t capacity) const = 0;

 protected:
  ~OpNamer() = default;
};

// Writes the activation DAG and every plan as YAML (000_*.txt's
// dump_activation_dag): operators with their inputs, output and scratch;
// tensors with lifetimes and buffer groups; per plan, each buffer's offset,
// size and lifetime, the arena, the lower bound and the naive total.
void DumpActivationDagYaml(const ActivationGraph& graph, Span<const ShapePlan* const> plans, const OpNamer& namer,
                           TextBuffer* out);

}  // namespace tinyai

#endif  // TINYAI_PLANNER_ACTIVATION_GRAPH_H_
