#include "planner/activation_graph.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "common/checked_math.h"
#include "common/format.h"
#include "common/status.h"

namespace tinyai {

bool SizeRule::Eval(const PassShape& s, uint64_t* bytes) const {
  const uint64_t rows = s.rows > 0 ? static_cast<uint64_t>(s.rows) : 0;
  const uint64_t round = context_round ? context_round : 1;
  const uint64_t ctx = s.context > 0 ? (static_cast<uint64_t>(s.context) + round - 1) / round * round : 0;
  uint64_t a = 0, b = 0, sum = 0;
  if (!CheckedMul(per_row, rows, &a) || !CheckedMul(per_context, ctx, &b) || !CheckedAdd(a, b, &sum) ||
      !CheckedAdd(sum, fixed, &sum)) {
    return false;
  }
  *bytes = sum;
  return true;
}

// a*r + b*C + d <= a'*r + b'*C + d' for every r >= 1 and C >= 0 holds when
// b <= b' (C is unbounded), a <= a' (so is r), and it holds at r = 1, C = 0.
bool SizeRule::AtMost(const SizeRule& o) const {
  if (per_context != 0 && context_round != o.context_round) return false;
  uint64_t mine = 0, theirs = 0;
  if (!CheckedAdd(per_row, fixed, &mine) || !CheckedAdd(o.per_row, o.fixed, &theirs)) return false;
  return per_row <= o.per_row && per_context <= o.per_context && mine <= theirs;
}

void ActivationGraph::Clear() {
  ops_.Clear();
  tensors_.Clear();
  outputs_.Clear();
  group_count_ = scratch_count_ = in_place_count_ = 0;
  finished_ = false;
}

TinyAIStatus ActivationGraph::AddInput(const SizeRule& size, int32_t* tensor) {
  GraphTensor t;
  t.size = size;
  t.external = true;
  *tensor = static_cast<int32_t>(tensors_.size());
  return tensors_.Push(t, "activation graph tensors");
}

TinyAIStatus ActivationGraph::AddOp(GraphOp op, const SizeRule& out_size, int32_t* output) {
  if (op.input_count < 0 || op.input_count > kMaxOpInputs) {
    return SetError(TINYAI_ERR_INTERNAL, "operator of layer %d has %d inputs (at most %d)", op.layer, op.input_count,
                    kMaxOpInputs);
  }
  for (int i = 0; i < op.input_count; ++i) {
    if (op.inputs[i] < 0 || static_cast<size_t>(op.inputs[i]) >= tensors_.size()) {
      return SetError(TINYAI_ERR_INTERNAL, "operator of layer %d reads tensor %d, which does not exist", op.layer,
                      op.inputs[i]);
    }
  }
  if (op.in_place >= op.input_count) op.in_place = -1;
  const int32_t index = static_cast<int32_t>(ops_.size());
  GraphTensor t;
  t.size = out_size;
  t.producer = index;
  op.output = static_cast<int32_t>(tensors_.size());
  TINYAI_RETURN_IF_ERROR(tensors_.Push(t, "activation graph tensors"));
  TINYAI_RETURN_IF_ERROR(ops_.Push(op, "activation graph operators"));
  finished_ = false;
  *output = op.output;
  return TINYAI_OK;
}

TinyAIStatus ActivationGraph::MarkOutput(int32_t tensor) {
  if (tensor < 0 || static_cast<size_t>(tensor) >= tensors_.size()) {
    return SetError(TINYAI_ERR_INTERNAL, "graph output %d is not a tensor", tensor);
  }
  if (tensors_[static_cast<size_t>(tensor)].output) return TINYAI_OK;
  tensors_[static_cast<size_t>(tensor)].output = true;
  finished_ = false;
  return outputs_.Push(tensor, "activation graph outputs");
}

TinyAIStatus ActivationGraph::Finish(bool debug) {
  debug_ = debug;
  const size_t nt = tensors_.size(), no = ops_.size();
  for (GraphTensor& t : tensors_) t.last_use = -1;
  for (size_t o = 0; o < no; ++o) {
    const GraphOp& op = ops_[o];
    for (int i = 0; i < op.input_count; ++i) tensors_[static_cast<size_t>(op.inputs[i])].last_use = static_cast<int32_t>(o);
  }
  TINYAI_RETURN_IF_ERROR(group_of_.Allocate(nt, "buffer groups"));
  TINYAI_RETURN_IF_ERROR(scratch_of_.Allocate(no, "operator scratch"));
  group_count_ = 0;
  in_place_count_ = 0;
  // Graph inputs are the caller's; every other tensor starts a group when its
  // operator runs, unless the operator takes over an input's group.
  for (size_t t = 0; t < nt; ++t) group_of_[t] = -1;
  for (size_t o = 0; o < no; ++o) {
    GraphOp& op = ops_[o];
    const int32_t out = op.output;
    int32_t g = -1;
    if (!debug && op.in_place >= 0) {
      const int32_t in = op.inputs[op.in_place];
      const GraphTensor& ti = tensors_[static_cast<size_t>(in)];
      if (!ti.external && !ti.output && ti.last_use == static_cast<int32_t>(o) &&
          tensors_[static_cast<size_t>(out)].size.AtMost(ti.size)) {
        g = group_of_[static_cast<size_t>(in)];
        ++in_place_count_;
      }
    }
    if (g < 0) g = group_count_++;
    group_of_[static_cast<size_t>(out)] = g;
  }
  scratch_count_ = 0;
  for (size_t o = 0; o < no; ++o) {
    scratch_of_[o] = ops_[o].scratch.empty() ? -1 : group_count_ + scratch_count_++;
  }
  finished_ = true;
  return TINYAI_OK;
}

TinyAIStatus ActivationGraph::Plan(const PassShape& shape, ArenaPlanner* planner, ShapePlan* out) const {
  if (!finished_) return SetError(TINYAI_ERR_INTERNAL, "activation graph planned before Finish()");
  const size_t groups = static_cast<size_t>(group_count_);
  const size_t total = groups + static_cast<size_t>(scratch_count_);
  out->shape = shape;
  TINYAI_RETURN_IF_ERROR(out->buffers.Allocate(total, "arena plan buffers"));
  TINYAI_RETURN_IF_ERROR(out->offsets.Allocate(total, "arena plan offsets"));
  const int32_t end = op_count();  // graph outputs live past the last operator
  for (size_t g = 0; g < groups; ++g) {
    out->buffers[g].first = INT32_MAX;
    out->buffers[g].last = -1;
  }
  auto rounded = [&](const SizeRule& rule, uint64_t* bytes) -> TinyAIStatus {
    uint64_t b = 0;
    if (!rule.Eval(shape, &b) || b > UINT64_MAX - kArenaAlignment) {
      return SetError(TINYAI_ERR_OVERFLOW, "an activation of %d rows and %d positions overflows 64 bits", shape.rows,
                      shape.context);
    }
    *bytes = AlignUp(b, kArenaAlignment);
    return TINYAI_OK;
  };
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const int32_t g = group_of_[t];
    if (g < 0) continue;
    const GraphTensor& ten = tensors_[t];
    PlanBuffer& b = out->buffers[static_cast<size_t>(g)];
    uint64_t bytes = 0;
    TINYAI_RETURN_IF_ERROR(rounded(ten.size, &bytes));
    if (bytes > b.size) b.size = bytes;
    const int32_t first = ten.producer;
    const int32_t last = ten.output ? end : (ten.last_use > first ? ten.last_use : first);
    if (first < b.first) b.first = first;
    if (last > b.last) b.last = last;
  }
  for (size_t o = 0; o < ops_.size(); ++o) {
    const int32_t s = scratch_of_[o];
    if (s < 0) continue;
    PlanBuffer& b = out->buffers[static_cast<size_t>(s)];
    TINYAI_RETURN_IF_ERROR(rounded(ops_[o].scratch, &b.size));
    b.first = b.last = static_cast<int32_t>(o);
  }
  TINYAI_RETURN_IF_ERROR(
      planner->Plan(Span<const PlanBuffer>(out->buffers.data(), total), out->offsets.data(), &out->result));
  // Naive: every tensor (in-place ones too) and every scratch in its own place.
  uint64_t naive = 0;
  for (size_t t = 0; t < tensors_.size(); ++t) {
    if (group_of_[t] < 0) continue;
    uint64_t bytes = 0;
    TINYAI_RETURN_IF_ERROR(rounded(tensors_[t].size, &bytes));
    if (!CheckedAdd(naive, bytes, &naive)) return SetError(TINYAI_ERR_OVERFLOW, "the activations' total overflows 64 bits");
  }
  for (size_t b = groups; b < total; ++b) {
    if (!CheckedAdd(naive, out->buffers[b].size, &naive)) {
      return SetError(TINYAI_ERR_OVERFLOW, "the activations' total overflows 64 bits");
    }
  }
  out->result.naive_bytes = naive;
  return TINYAI_OK;
}

uint64_t ActivationGraph::bytes() const {
  return ops_.capacity() * sizeof(GraphOp) + tensors_.capacity() * sizeof(GraphTensor) +
         outputs_.capacity() * sizeof(int32_t) + (group_of_.size() + scratch_of_.size()) * sizeof(int32_t);
}

void TextBuffer::Printf(const char* format, ...) {
  char* at = nullptr;
  size_t room = 0;
  if (buf_ && length_ + 1 < capacity_) {
    at = buf_ + length_;
    room = capacity_ - length_;
  }
  va_list args;
  va_start(args, format);
  char dummy[1];
  int n = tinyai::VFormat(at ? at : dummy, at ? room : sizeof dummy, format, args);
  va_end(args);
  if (n > 0) length_ += static_cast<size_t>(n);
  if (buf_ && capacity_ && length_ + 1 > capacity_) buf_[capacity_ - 1] = '\0';
}

namespace {

void PrintRule(TextBuffer* out, const SizeRule& r) {
  out->Printf("{per_row: %llu, per_context: %llu, context_round: %u, fixed: %llu}",
              static_cast<unsigned long long>(r.per_row), static_cast<unsigned long long>(r.per_context),
              r.context_round, static_cast<unsigned long long>(r.fixed));
}

}  // namespace

void DumpActivationDagYaml(const ActivationGraph& graph, Span<const ShapePlan* const> plans, const OpNamer& namer,
                           TextBuffer* out) {
  char name[96];
  const Span<const GraphOp> ops = graph.ops();
  const Span<const GraphTensor> tensors = graph.tensors();
  out->Printf("# TinyAI activation DAG (dump_activation_dag)\n");
  out->Printf("activation_dag:\n  execution_mode: %s\n  alignment: %llu\n", graph.debug() ? "debug" : "planned",
              static_cast<unsigned long long>(kArenaAlignment));
  out->Printf("  operators:\n");
  for (size_t o = 0; o < ops.size(); ++o) {
    const GraphOp& op = ops[o];
    namer.Name(op, name, sizeof name);
    out->Printf("    - step: %zu\n      name: \"%s\"\n      layer: %d\n      inputs: [", o, name, op.layer);
    for (int i = 0; i < op.input_count; ++i) out->Printf("%s%d", i ? ", " : "", op.inputs[i]);
    out->Printf("]\n      output: %d\n", op.output);
    if (op.in_place >= 0) {
      const bool granted = graph.group(op.output) == graph.group(op.inputs[op.in_place]);
      out->Printf("      in_place: {input: %d, granted: %s}\n", op.inputs[op.in_place], granted ? "true" : "false");
    }
    if (!op.scratch.empty()) {
      out->Printf("      scratch: ");
      PrintRule(out, op.scratch);
      out->Printf("\n");
    }
  }
  out->Printf("  tensors:\n");
  for (size_t t = 0; t < tensors.size(); ++t) {
    const GraphTensor& ten = tensors[t];
    out->Printf("    - id: %zu\n", t);
    if (ten.external) {
      out->Printf("      kind: input\n");
    } else {
      namer.Name(ops[static_cast<size_t>(ten.producer)], name, sizeof name);
      out->Printf("      producer: \"%s\"\n", name);
    }
    out->Printf("      last_use: %d\n      output: %s\n      group: %d\n      bytes: ", ten.last_use,
                ten.output ? "true" : "false", graph.group(static_cast<int32_t>(t)));
    PrintRule(out, ten.size);
    out->Printf("\n");
  }
  out->Printf("  plans:\n");
  for (const ShapePlan* p : plans) {
    const ArenaPlanResult& r = p->result;
    out->Printf("    - shape: {rows: %d, context: %d}\n", p->shape.rows, p->shape.context);
    out->Printf("      arena_bytes: %llu\n      lower_bound_bytes: %llu\n      naive_bytes: %llu\n      peak_step: %d\n",
                static_cast<unsigned long long>(r.arena_bytes), static_cast<unsigned long long>(r.lower_bound_bytes),
                static_cast<unsigned long long>(r.naive_bytes), r.peak_step);
    out->Printf("      order: %s\n      buffers:\n", r.order >= 0 ? ArenaPlanner::OrderName(r.order) : "none");
    for (size_t b = 0; b < p->buffers.size(); ++b) {
      const PlanBuffer& pb = p->buffers[b];
      const bool scratch = static_cast<int32_t>(b) >= graph.group_count();
      out->Printf("        - {buffer: %zu, kind: %s, offset: %llu, bytes: %llu, first: %d, last: %d}\n", b,
                  scratch ? "scratch" : "activation", static_cast<unsigned long long>(p->offsets[b]),
                  static_cast<unsigned long long>(pb.size), pb.first, pb.last);
    }
  }
}

}  // namespace tinyai
