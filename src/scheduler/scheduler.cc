#include "scheduler/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>

#include "common/checked_math.h"
#include "common/format.h"
#include "common/memory.h"
#include "common/status.h"
#include "port/port.h"
#include "scheduler/mode_table.h"
#include "scheduler/batch_loop.h"

namespace tinyai {

// The program of a schedule without a model: it plans memory and runs
// nothing. Each layer is one operator writing outputSize bytes per row from
// the sum of its inputs, which it may overwrite in place unless an input is
// an ATTENTION one.
class AbstractProgram final : public LayerProgram {
 public:
  enum Op : int32_t { kSum, kLayer };

  TinyAIStatus OutputRowBytes(int32_t, uint64_t* bytes) const override {
    *bytes = 0;  // any size
    return TINYAI_OK;
  }
  SizeRule InputSize() const override { return SizeRule(); }
  TinyAIStatus CheckSchedule(const LayerGraph&) const override { return TINYAI_OK; }
  TinyAIStatus EmitLayer(const LayerGraph& graph, int32_t node, const int32_t* inputs, int32_t count,
                         ActivationGraph* g, int32_t* output) override {
    const LayerNode& n = graph.node(node);
    const Span<const LayerDep> deps = graph.deps(node);
    GraphOp op;
    op.layer = n.layer;
    op.node = graph.position(node);
    Array<TinyAIDependencyType> types;
    TINYAI_RETURN_IF_ERROR(types.Allocate(static_cast<size_t>(count), "schedule dependencies"));
    SizeRule sum;  // as large as the largest input
    for (int32_t i = 0; i < count; ++i) {
      types[static_cast<size_t>(i)] = deps[static_cast<size_t>(i)].type;
      const SizeRule& r = g->tensors()[static_cast<size_t>(inputs[i])].size;
      if (r.per_row > sum.per_row) sum.per_row = r.per_row;
    }
    int32_t x = inputs[0];
    TINYAI_RETURN_IF_ERROR(EmitSum(g, op, kSum, inputs, types.data(), count, sum, &x));
    op.kind = kLayer;
    op.inputs[0] = x;
    op.input_count = 1;
    op.in_place = count > 1 || types[0] != TINYAI_DEP_ATTENTION ? 0 : -1;
    return g->AddOp(op, SizeRule::Rows(n.output_size), output);
  }
  void NameOp(const GraphOp& op, char* out, size_t capacity) const override {
    tinyai::Format(out, capacity, "layer.%d/%s", op.layer, op.kind == kSum ? "sum" : "layer");
  }
  TinyAIStatus RunOp(const GraphOp&, const OpIo&, const PassContext&) override {
    return SetError(TINYAI_ERR_UNSUPPORTED, "this schedule has no model: it plans memory and runs nothing");
  }
  void EndPass(const PassContext&) override {}
  ProgramWeights* weights() override { return nullptr; }
  ProgramMemory Memory() const override { return ProgramMemory(); }
  TinyAIStatus AllocateState() override { return TINYAI_OK; }
  int32_t context_length() const override { return 0; }
};

namespace {

double Mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// a + b + ... with overflow saturating at UINT64_MAX (compared against limits).
uint64_t SatAdd(uint64_t a, uint64_t b) {
  uint64_t s = 0;
  return CheckedAdd(a, b, &s) ? s : UINT64_MAX;
}

}  // namespace

ForwardScheduler::ForwardScheduler() = default;

ForwardScheduler::~ForwardScheduler() {
  if (model_ && !link_.orphaned.load()) UnbindRunner(model_, &link_);
  if (runtime_) runtime_->Destroy();
  Delete(abstract_);
  Delete(batch_loop_);
}

TinyAIStatus ForwardScheduler::Init(TinyAIMappedModel* model, TinyAIExecutionMode mode, uint64_t limit,
                                    const TinyAISchedulerConfig& config) {
  if (static_cast<int>(mode) < TINYAI_EXEC_NORMAL || static_cast<int>(mode) > TINYAI_EXEC_ADAPTIVE) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "execution mode %d is not a TinyAIExecutionMode",
                    static_cast<int>(mode));
  }
  if (config.threads < 0 || config.threads > 256) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "threads %d is out of range 0..256", config.threads);
  }
  if (config.batchSize < 1) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "batchSize %d is below 1", config.batchSize);
  if (config.contextLength < 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "contextLength %d is negative", config.contextLength);
  }
  if (config.maxShapeCount < 0 || config.maxShapeCount > TINYAI_MAX_SHAPES) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "maxShapeCount %d is out of range 0..%d", config.maxShapeCount,
                    TINYAI_MAX_SHAPES);
  }
  for (int32_t i = 0; i < config.maxShapeCount; ++i) {
    const TinyAIMaxShape& s = config.maxShapes[i];
    if (s.rows < 1 || s.context < 0) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "maxShapes[%d] is (%d rows, %d positions): rows must be >= 1 and "
                      "context >= 0", i, s.rows, s.context);
    }
  }
  if (config.outputCapacity == 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "outputCapacity 0 cannot hold even the text's terminating NUL");
  }
  config_ = config;
  requested_mode_ = mode_ = mode;
  limit_ = limit;
  batch_ = config.batchSize;
  model_ = model;
  if (model) {
    BindRunner(model, &link_);
    return TINYAI_OK;
  }
  abstract_ = New<AbstractProgram>();
  if (!abstract_) return SetError(TINYAI_ERR_OUT_OF_MEMORY, "cannot allocate the scheduler's program");
  program_ = abstract_;
  return TINYAI_OK;
}

TinyAIStatus ForwardScheduler::InitWithProgram(LayerProgram* program, TinyAIMappedModel* model,
                                               TinyAIExecutionMode mode, uint64_t limit,
                                               const TinyAISchedulerConfig& config) {
  TINYAI_RETURN_IF_ERROR(Init(model, mode, limit, config));
  batch_loop_ = New<BatchLoop>(this);
  if (!batch_loop_) return SetError(TINYAI_ERR_OUT_OF_MEMORY, "cannot allocate the scheduler's loop");
  program_ = program;
  loop_ = batch_loop_;
  return TINYAI_OK;
}

void ForwardScheduler::Adopt(ModelRuntime* runtime) {
  runtime_ = runtime;
  program_ = runtime->program();
  loop_ = runtime->loop();
}

TinyAIStatus ForwardScheduler::CheckUsable(const char* call, bool allow_busy) const {
  if (link_.orphaned.load()) {
    return SetError(TINYAI_ERR_MISUSE, "%s: the model this runner was created on has been closed; destroy the runner",
                    call);
  }
  if (!allow_busy && link_.busy.load()) {
    return SetError(TINYAI_ERR_MISUSE,
                    "%s: called from this runner's own text callback, in the middle of its generation; call it after "
                    "the generation returns", call);
  }
  return TINYAI_OK;
}

TinyAIStatus ForwardScheduler::SetOutputCapacity(size_t capacity) {
  if (capacity == 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "an output capacity of 0 cannot hold even the text's terminating NUL");
  }
  if (loop_ && loop_->running()) {
    return SetError(TINYAI_ERR_MISUSE, "the output capacity is set between generations, not during one");
  }
  config_.outputCapacity = capacity;
  return TINYAI_OK;
}

const char* ForwardScheduler::largest_slice_tensor() const {
  const ProgramWeights* stream = const_cast<ForwardScheduler*>(this)->program_->weights();
  const int32_t t = stream ? stream->MainTensor(weights_.slice) : -1;
  // The file's entry: its name lives as long as the model (a directory
  // with precisions applied is replaced by the next tinyaiApplyMixedPrecision).
  return t >= 0 ? model_->reader().file_tensors()[static_cast<size_t>(t)].name : "";
}

TinyAIStatus ForwardScheduler::AddLayer(int32_t layer, int32_t depends_on, TinyAIDependencyType type,
                                        uint64_t output_size) {
  if (planned_) {
    return SetError(TINYAI_ERR_MISUSE, "layer %d added after the schedule was prepared; create a new scheduler", layer);
  }
  const int32_t layers = model_ ? model_->layer_count() : 0;
  if (model_ && layer >= 0 && layer < layers && output_size > 0) {
    uint64_t expect = 0;
    TINYAI_RETURN_IF_ERROR(program_->OutputRowBytes(layer, &expect));
    if (expect != 0 && expect != output_size) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                      "layer %d (%s) produces %llu bytes per row; outputSize is %llu (tinyaiGetLayerOutputSize)",
                      layer, model_->descriptor(layer).name, static_cast<unsigned long long>(expect),
                      static_cast<unsigned long long>(output_size));
    }
  }
  return graph_.Add(layer, depends_on, type, output_size, layers);
}

TinyAIStatus ForwardScheduler::AddModelLayers() {
  if (planned_) return SetError(TINYAI_ERR_MISUSE, "layers added after the schedule was prepared");
  return program_->AddModelLayers(&graph_);
}

TinyAIStatus ForwardScheduler::SetBatchSize(int32_t batch) {
  if (planned_) return SetError(TINYAI_ERR_MISUSE, "the batch size is set before the schedule is prepared");
  if (batch < 1) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "batch size %d is below 1", batch);
  batch_ = batch;
  config_.batchSize = batch;
  return TINYAI_OK;
}

// ---- planning ----

TinyAIStatus ForwardScheduler::BuildGraph() {
  // Built only when every step below succeeded: a schedule the program
  // refused (after the layer graph itself was built) is refused again, the
  // same way, however it is asked next.
  if (graph_ready_) return TINYAI_OK;
  if (!graph_.built()) TINYAI_RETURN_IF_ERROR(graph_.Build());
  TINYAI_RETURN_IF_ERROR(program_->CheckSchedule(graph_));
  act_.Clear();
  int32_t input = -1;  // the caller's input
  TINYAI_RETURN_IF_ERROR(act_.AddInput(program_->InputSize(), &input));
  const size_t nodes = static_cast<size_t>(graph_.node_count());
  TINYAI_RETURN_IF_ERROR(node_output_.Allocate(nodes, "schedule outputs"));
  Array<int32_t> inputs;
  for (int32_t node : graph_.order()) {
    const Span<const LayerDep> deps = graph_.deps(node);
    TINYAI_RETURN_IF_ERROR(inputs.Allocate(deps.size(), "layer inputs"));
    for (size_t i = 0; i < deps.size(); ++i) {
      inputs[i] = deps[i].producer < 0 ? input : node_output_[static_cast<size_t>(deps[i].producer)];
    }
    TINYAI_RETURN_IF_ERROR(program_->EmitLayer(graph_, node, inputs.data(), static_cast<int32_t>(deps.size()), &act_,
                                               &node_output_[static_cast<size_t>(node)]));
  }
  // The layers nobody reads are the schedule's output, in layer order.
  Array<int32_t> sinks;
  TINYAI_RETURN_IF_ERROR(sinks.Allocate(nodes, "schedule outputs"));
  size_t sink_count = 0;
  for (size_t n = 0; n < nodes; ++n) {
    if (graph_.node(static_cast<int32_t>(n)).consumers == 0) sinks[sink_count++] = static_cast<int32_t>(n);
  }
  std::sort(sinks.begin(), sinks.begin() + sink_count,
            [this](int32_t a, int32_t b) { return graph_.node(a).layer < graph_.node(b).layer; });
  for (size_t i = 0; i < sink_count; ++i) {
    TINYAI_RETURN_IF_ERROR(act_.MarkOutput(node_output_[static_cast<size_t>(sinks[i])]));
  }
  TINYAI_RETURN_IF_ERROR(act_.Finish(config_.debugExecution));
  memory_ = program_->Memory();
  // The weights counted are the scheduled layers' (a partial schedule of a
  // dense network needs only its own).
  weights_ = WeightTotals();
  if (const ProgramWeights* stream = program_->weights()) {
    TINYAI_RETURN_IF_ERROR(scheduled_layers_.Allocate(static_cast<size_t>(model_->layer_count()), "schedule layers"));
    for (size_t n = 0; n < nodes; ++n) {
      const int32_t layer = graph_.node(static_cast<int32_t>(n)).layer;
      if (layer >= 0 && layer < model_->layer_count()) scheduled_layers_[static_cast<size_t>(layer)] = 1;
    }
    weights_ = stream->Sum(scheduled_layers_.data());
  }
  graph_ready_ = true;
  return TINYAI_OK;
}

TinyAIStatus ForwardScheduler::MakeShapes(int32_t max_rows, Array<PassShape>* shapes) const {
  const int32_t context = program_->context_length();
  const size_t count = config_.maxShapeCount > 0 ? static_cast<size_t>(config_.maxShapeCount) : 1;
  TINYAI_RETURN_IF_ERROR(shapes->Allocate(count, "max shapes"));
  for (size_t i = 0; i < count; ++i) {
    PassShape& s = (*shapes)[i];
    if (config_.maxShapeCount > 0) {
      s.rows = config_.maxShapes[i].rows;
      s.context = config_.maxShapes[i].context == 0 ? context : config_.maxShapes[i].context;
      if (s.context > context) {
        return SetError(TINYAI_ERR_INVALID_ARGUMENT, "maxShapes[%zu] attends to %d positions; the context holds %d", i,
                        s.context, context);
      }
      if (context == 0) s.context = 0;
    } else {
      s.rows = program_->DefaultRows(batch_);
      s.context = context;
    }
    if (max_rows > 0 && s.rows > max_rows) s.rows = max_rows;
  }
  return TINYAI_OK;
}

TinyAIStatus ForwardScheduler::PlanShapes(const Array<PassShape>& shapes, Array<ShapePlan>* plans,
                                          uint64_t* arena) const {
  ArenaPlanner planner;  // working memory only while planning
  TINYAI_RETURN_IF_ERROR(plans->Allocate(shapes.size(), "arena plans"));
  *arena = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    TINYAI_RETURN_IF_ERROR(act_.Plan(shapes[i], &planner, &(*plans)[i]));
    if ((*plans)[i].result.arena_bytes > *arena) *arena = (*plans)[i].result.arena_bytes;
  }
  return TINYAI_OK;
}

uint64_t ForwardScheduler::TablesBytes(size_t plans) const {
  // The program's, the loader's index and cache bookkeeping, and the
  // scheduler's graphs and plans (offsets and buffers of every planned buffer).
  const uint64_t per_plan =
      sizeof(ShapePlan) + static_cast<uint64_t>(act_.buffer_count()) * (sizeof(uint64_t) + sizeof(PlanBuffer));
  // And the recording allocator's headers: 16 bytes an allocation (64 for
  // the KV store's and the arena's), for the few dozen a runner holds (about
  // 2.1 KB on the test models; Prepare() checks what it really took).
  constexpr uint64_t kHeaders = 4096;
  return memory_.tables + (model_ ? model_->overhead_bytes(staging_sets_) : 0) + graph_.bytes() + act_.bytes() +
         node_output_.size() * sizeof(int32_t) + scheduled_layers_.size() + plans * per_plan + runner_bytes_ +
         kHeaders;
}

// d's tensor and layer: row slice `slice`'s main tensor and its transformer
// block (-1 for none).
void ForwardScheduler::SliceDetail(int32_t slice, ErrorDetail* d) const {
  const ProgramWeights* stream = const_cast<ForwardScheduler*>(this)->program_->weights();
  if (stream == nullptr || model_ == nullptr || slice < 0) return;
  const int32_t main = stream->MainTensor(slice);
  if (main < 0) return;
  tinyai::Format(d->tensor, sizeof d->tensor, "%s", model_->reader().tensors()[static_cast<size_t>(main)].name);
  const RowSlice& b = model_->slices().slice(slice);
  d->layer = model_->reader().layers()[static_cast<size_t>(b.layer)].block_index;
}

// The detail of a limit below what the configuration needs: needed, the
// least limit that runs it in the requested mode. (A less faithful KV type
// that would fit is found by planning it: the C API's tinyaiCreateLLM.)
ErrorDetail ForwardScheduler::LimitDetail(uint64_t needed) const {
  ErrorDetail d;
  SliceDetail(weights_.slice, &d);
  d.resource = TINYAI_RESOURCE_MEMORY_LIMIT;
  d.stage = TINYAI_STAGE_PLAN;
  d.needed = needed;
  d.limit = limit_;
  d.remedy = TINYAI_REMEDY_RAISE_LIMIT;
  d.remedy_value = needed;
  return d;
}

// needed: the least limit of any mode; for_mode: of the requested one.
TinyAIStatus ForwardScheduler::TooSmall(uint64_t needed, uint64_t for_mode) const {
  const ProgramWeights* stream = const_cast<ForwardScheduler*>(this)->program_->weights();
  const ErrorDetail d = LimitDetail(for_mode > needed ? for_mode : needed);
  char more[96] = "";
  if (for_mode > needed) {
    tinyai::Format(more, sizeof more, "; %s as requested needs %llu",
                  requested_mode_ == TINYAI_EXEC_NORMAL ? "NORMAL" : "MEMORY_OPT",
                  static_cast<unsigned long long>(for_mode));
  }
  if (stream && model_) {
    char what[160];
    stream->DescribeSlice(weights_.slice, what, sizeof what);
    SetError(TINYAI_ERR_RESOURCE_EXHAUSTED,
             "memory limit of %llu bytes is below this model's minimum of %llu: its largest row slice (%s) "
             "takes %llu bytes, on top of %llu bytes of KV cache (context %d), %llu of activations and "
             "scratch (the arena for 1 row per pass) and %llu of tables%s",
             static_cast<unsigned long long>(limit_), static_cast<unsigned long long>(needed), what,
             static_cast<unsigned long long>(weights_.largest_slice),
             static_cast<unsigned long long>(memory_.persistent), program_->context_length(),
             static_cast<unsigned long long>(needed - weights_.largest_slice - memory_.persistent -
                                             tables_bytes_),
             static_cast<unsigned long long>(tables_bytes_), more);
    return SetErrorDetail(d);
  }
  SetError(TINYAI_ERR_RESOURCE_EXHAUSTED,
           "memory limit of %llu bytes is below this schedule's minimum of %llu: an arena of %llu bytes "
           "for 1 row per pass and %llu of tables%s",
           static_cast<unsigned long long>(limit_), static_cast<unsigned long long>(needed),
           static_cast<unsigned long long>(needed - tables_bytes_), static_cast<unsigned long long>(tables_bytes_),
           more);
  return SetErrorDetail(d);
}

TinyAIStatus ForwardScheduler::ChooseMode() {
  const ProgramWeights* stream = program_->weights();
  const uint64_t all_weights = weights_.resident;
  const uint64_t slice = weights_.largest_slice;
  // The cache may be shared with other runners on the model: its cap is the
  // least of maxCacheSize and their memory limits' allowances.
  const uint64_t configured_cap = model_ ? SharedCacheCap(*model_, &link_, &cap_source_) : 0;

  if (configured_cap != 0 && slice > configured_cap) {
    char what[192];
    stream->DescribeSlice(weights_.slice, what, sizeof what);
    SetError(TINYAI_ERR_RESOURCE_EXHAUSTED,
             "the model's weight cache is capped at %llu bytes (%s), below its largest row slice of %llu (%s); "
             "raise the cap or lower rowSliceSize",
             static_cast<unsigned long long>(configured_cap), cap_source_, static_cast<unsigned long long>(slice), what);
    ErrorDetail d;
    d.resource = TINYAI_RESOURCE_WEIGHT_CACHE;
    d.stage = TINYAI_STAGE_PLAN;
    d.needed = slice;
    d.limit = configured_cap;
    SliceDetail(weights_.slice, &d);
    d.remedy = TINYAI_REMEDY_RAISE_CACHE;
    d.remedy_value = slice;
    return SetErrorDetail(d);
  }
  Array<PassShape> shapes;
  TINYAI_RETURN_IF_ERROR(MakeShapes(0, &shapes));
  uint64_t arena_full = 0;
  TINYAI_RETURN_IF_ERROR(PlanShapes(shapes, &plans_, &arena_full));
  int32_t full_rows = 0;
  for (const PassShape& s : shapes) full_rows = s.rows > full_rows ? s.rows : full_rows;

  tables_bytes_ = TablesBytes(plans_.size());
  const uint64_t rest = SatAdd(memory_.persistent, tables_bytes_);
  auto need = [&](uint64_t weights, uint64_t arena) { return SatAdd(SatAdd(weights, arena), rest); };

  // The least limit: streaming, one row per pass.
  Array<PassShape> one;
  Array<ShapePlan> one_plans;
  uint64_t arena_one = 0;
  TINYAI_RETURN_IF_ERROR(MakeShapes(1, &one));
  TINYAI_RETURN_IF_ERROR(PlanShapes(one, &one_plans, &arena_one));
  minimum_limit_ = need(slice, arena_one);

  ModeNeeds n;
  n.limit = limit_;
  n.cache_cap = configured_cap;
  n.all_weights = all_weights;
  n.largest_slice = slice;
  n.arena_full = arena_full;
  n.arena_one = arena_one;
  n.rest = rest;
  const ModeStrategy& normal_s = Strategy(StrategyOf(TINYAI_EXEC_NORMAL));
  const ModeStrategy& memopt_s = Strategy(StrategyOf(TINYAI_EXEC_MEMORY_OPT));
  // Below the least limit nothing runs, whatever the mode.
  if (limit_ != 0 && minimum_limit_ > limit_) {
    const int32_t asked = StrategyOf(requested_mode_);
    const uint64_t for_mode = asked < 0 ? minimum_limit_ : StrategyNeeds(Strategy(asked), n);
    return TooSmall(minimum_limit_, for_mode);
  }
  const bool normal = StrategyFits(normal_s, n);
  const bool memopt = StrategyFits(memopt_s, n);
  const ModeChoice choice = ChooseStrategy(n, requested_mode_);
  const char* how = requested_mode_ == TINYAI_EXEC_ADAPTIVE ? "" : mode_origin_;
  const double limit_mib = Mib(limit_);
  rows_per_pass_ = full_rows;
  uint64_t arena = arena_full;
  // A requested mode that does not fit says why and what would (ADAPTIVE
  // always finds one above the least limit and a slice within the cap).
  if (choice.chosen < 0 && requested_mode_ == TINYAI_EXEC_NORMAL) {
    if (choice.cache_cap) {
      SetError(TINYAI_ERR_RESOURCE_EXHAUSTED,
               "NORMAL keeps all %llu bytes of weights resident, but the model's weight cache is capped at "
               "%llu (%s); MEMORY_OPT streams them (ADAPTIVE chooses for you)",
               static_cast<unsigned long long>(all_weights), static_cast<unsigned long long>(configured_cap),
               cap_source_);
      ErrorDetail d;
      d.resource = TINYAI_RESOURCE_WEIGHT_CACHE;
      d.stage = TINYAI_STAGE_PLAN;
      d.needed = all_weights;
      d.limit = configured_cap;
      d.remedy = TINYAI_REMEDY_MODE;
      d.remedy_value = memopt ? TINYAI_EXEC_MEMORY_OPT : TINYAI_EXEC_STREAMING;
      d.remedy2 = TINYAI_REMEDY_RAISE_CACHE;
      d.remedy2_value = all_weights;
      return SetErrorDetail(d);
    }
    SetError(TINYAI_ERR_RESOURCE_EXHAUSTED,
             "NORMAL keeps all %llu bytes of weights resident: with the arena's %llu, %llu of KV cache and "
             "%llu of tables that is %llu, over the memory limit of %llu; MEMORY_OPT needs %llu and STREAMING "
             "%llu (ADAPTIVE chooses for you)",
             static_cast<unsigned long long>(all_weights), static_cast<unsigned long long>(arena_full),
             static_cast<unsigned long long>(memory_.persistent), static_cast<unsigned long long>(tables_bytes_),
             static_cast<unsigned long long>(need(all_weights, arena_full)), static_cast<unsigned long long>(limit_),
             static_cast<unsigned long long>(need(slice, arena_full)),
             static_cast<unsigned long long>(minimum_limit_));
    ErrorDetail d;
    d.resource = TINYAI_RESOURCE_MEMORY_LIMIT;
    d.stage = TINYAI_STAGE_PLAN;
    d.needed = need(all_weights, arena_full);
    d.limit = limit_;
    d.remedy = TINYAI_REMEDY_MODE;
    d.remedy_value = memopt ? TINYAI_EXEC_MEMORY_OPT : TINYAI_EXEC_STREAMING;
    d.remedy2 = TINYAI_REMEDY_RAISE_LIMIT;
    d.remedy2_value = d.needed;
    return SetErrorDetail(d);
  }
  if (choice.chosen < 0 && requested_mode_ == TINYAI_EXEC_MEMORY_OPT) {
    SetError(TINYAI_ERR_RESOURCE_EXHAUSTED,
             "MEMORY_OPT with %d rows per pass needs %llu bytes (a row slice of %llu, an arena of %llu, "
             "%llu of KV cache, %llu of tables), over the memory limit of %llu; STREAMING needs %llu",
             full_rows, static_cast<unsigned long long>(need(slice, arena_full)),
             static_cast<unsigned long long>(slice), static_cast<unsigned long long>(arena_full),
             static_cast<unsigned long long>(memory_.persistent), static_cast<unsigned long long>(tables_bytes_),
             static_cast<unsigned long long>(limit_), static_cast<unsigned long long>(minimum_limit_));
    ErrorDetail d;
    d.resource = TINYAI_RESOURCE_MEMORY_LIMIT;
    d.stage = TINYAI_STAGE_PLAN;
    d.needed = need(slice, arena_full);
    d.limit = limit_;
    d.remedy = TINYAI_REMEDY_MODE;
    d.remedy_value = TINYAI_EXEC_STREAMING;
    d.remedy2 = TINYAI_REMEDY_RAISE_LIMIT;
    d.remedy2_value = d.needed;
    return SetErrorDetail(d);
  }
  if (choice.chosen < 0) return TooSmall(minimum_limit_, minimum_limit_);
  mode_ = Strategy(choice.chosen).mode;
  if (mode_ == TINYAI_EXEC_NORMAL) {
    if (limit_ == 0) {
      tinyai::Format(reason_, sizeof reason_, "NORMAL%s: no memory limit%s, so all %.2f MiB of weights stay resident",
                    how, configured_cap ? " and the weights fit the weight cache's cap" : "", Mib(all_weights));
    } else {
      tinyai::Format(reason_, sizeof reason_,
                    "NORMAL%s: all %.2f MiB of weights fit beside the %.3f MiB arena, %.2f MiB of KV cache and %.3f "
                    "MiB of tables in the limit of %.2f MiB",
                    how, Mib(all_weights), Mib(arena_full), Mib(memory_.persistent), Mib(tables_bytes_), limit_mib);
    }
  } else if (mode_ == TINYAI_EXEC_MEMORY_OPT) {
    if (normal) {  // requested, though NORMAL fits
      tinyai::Format(reason_, sizeof reason_,
                    "MEMORY_OPT%s: weights streamed in row slices of at most %.3f MiB, though all %.2f MiB of them "
                    "would fit %s (NORMAL keeps them resident)",
                    how, Mib(slice), Mib(all_weights),
                    limit_ == 0 ? "with no memory limit" : "beside the rest in the memory limit");
    } else if (limit_ != 0 && need(all_weights, arena_full) > limit_) {
      tinyai::Format(reason_, sizeof reason_,
                    "MEMORY_OPT%s: the %.2f MiB of weights do not fit beside the rest (%.3f MiB) in the limit of %.2f "
                    "MiB; streamed in row slices of at most %.3f MiB",
                    how, Mib(all_weights), Mib(SatAdd(arena_full, rest)), limit_mib, Mib(slice));
    } else {  // the cache's cap rules NORMAL out
      tinyai::Format(reason_, sizeof reason_,
                    "MEMORY_OPT%s: the %.2f MiB of weights do not fit the weight cache's cap of %.2f MiB (%s); "
                    "streamed in row slices of at most %.3f MiB",
                    how, Mib(all_weights), Mib(configured_cap), cap_source_, Mib(slice));
    }
  } else {
    // STREAMING: the most rows per pass whose arena fits beside one row slice.
    Array<PassShape> trial;
    Array<ShapePlan> trial_plans;
    TinyAIStatus planned = TINYAI_OK;
    const int32_t lo = MostRowsThatFit(n, full_rows, [&](int32_t rows, uint64_t* a) {
      planned = MakeShapes(rows, &trial);
      if (planned == TINYAI_OK) planned = PlanShapes(trial, &trial_plans, a);
      return planned == TINYAI_OK;
    });
    TINYAI_RETURN_IF_ERROR(planned);
    if (lo < 1) return TooSmall(minimum_limit_, minimum_limit_);
    rows_per_pass_ = lo;
    TINYAI_RETURN_IF_ERROR(MakeShapes(lo, &shapes));
    TINYAI_RETURN_IF_ERROR(PlanShapes(shapes, &plans_, &arena));
    tinyai::Format(reason_, sizeof reason_,
                  "STREAMING%s: with %d rows per pass the arena (%.3f MiB) does not fit beside a %.3f MiB row slice "
                  "in the limit of %.2f MiB; %d row%s per pass (arena %.3f MiB) %s",
                  how, full_rows, Mib(arena_full), Mib(slice), limit_mib, lo, lo == 1 ? "" : "s", Mib(arena),
                  lo == 1 ? "does" : "do");
    if (lo == full_rows && limit_ == 0) {
      tinyai::Format(reason_, sizeof reason_, "STREAMING%s: no memory limit; %d rows per pass (arena %.3f MiB), "
                    "weights streamed in row slices of at most %.3f MiB", how, lo, Mib(arena), Mib(slice));
    } else if (lo == full_rows) {
      tinyai::Format(reason_, sizeof reason_, "STREAMING%s: %d rows per pass (arena %.3f MiB) fit beside a %.3f MiB "
                    "row slice in the limit of %.2f MiB", how, lo, Mib(arena), Mib(slice), limit_mib);
    }
  }

  arena_bytes_ = arena;
  lower_bound_bytes_ = naive_bytes_ = 0;
  plan_note_[0] = '\0';
  for (const ShapePlan& p : plans_) {
    if (p.result.lower_bound_bytes > lower_bound_bytes_) lower_bound_bytes_ = p.result.lower_bound_bytes;
    if (p.result.naive_bytes > naive_bytes_) naive_bytes_ = p.result.naive_bytes;
    if (p.result.arena_bytes > p.result.lower_bound_bytes && plan_note_[0] == '\0') {
      char op_name[96] = "-";
      const int32_t b = p.result.first_above_bound;
      if (b >= 0) {
        const PlanBuffer& pb = p.buffers[static_cast<size_t>(b)];
        Name(act_.ops()[static_cast<size_t>(pb.first < act_.op_count() ? pb.first : act_.op_count() - 1)], op_name,
             sizeof op_name);
      }
      tinyai::Format(plan_note_, sizeof plan_note_,
                    "shape (%d rows, %d positions): the arena is %llu bytes above the lower bound of %llu; no placement "
                    "order tried fits every buffer under it (the best, '%s', places a buffer live from step %d, op "
                    "'%s', above it)",
                    p.shape.rows, p.shape.context,
                    static_cast<unsigned long long>(p.result.arena_bytes - p.result.lower_bound_bytes),
                    static_cast<unsigned long long>(p.result.lower_bound_bytes),
                    p.result.order >= 0 ? ArenaPlanner::OrderName(p.result.order) : "-",
                    b >= 0 ? p.buffers[static_cast<size_t>(b)].first : -1, op_name);
    }
  }
  // The weight cache gets what the rest leaves (never more than configured,
  // or than another runner on the model allows).
  cache_cap_ = configured_cap;
  limit_allows_ = 0;
  cap_from_limit_ = false;
  if (limit_ != 0) {
    limit_allows_ = limit_ - need(0, arena_bytes_);
    cap_from_limit_ = !(configured_cap != 0 && configured_cap < limit_allows_);
    cache_cap_ = cap_from_limit_ ? limit_allows_ : configured_cap;
  }
  // A run that will be much slower than it could: the cache's cap alone
  // keeps the weights from staying resident (the memory limit, if any,
  // would hold them), so every token reads them all from storage again.
  warning_ = ErrorDetail();
  warning_text_[0] = '\0';
  if (mode_ != TINYAI_EXEC_NORMAL && requested_mode_ == TINYAI_EXEC_ADAPTIVE && configured_cap != 0 &&
      all_weights > configured_cap && (limit_ == 0 || need(all_weights, arena_full) <= limit_)) {
    warning_.resource = TINYAI_RESOURCE_WEIGHT_CACHE;
    warning_.stage = TINYAI_STAGE_PLAN;
    warning_.needed = all_weights;
    warning_.limit = configured_cap;
    // Another runner's limit can take the cap lower than maxCacheSize:
    // raising maxCacheSize would not help then.
    if (std::strcmp(cap_source_, "maxCacheSize") == 0) {
      warning_.remedy = TINYAI_REMEDY_RAISE_CACHE;
      warning_.remedy_value = all_weights;
    }
    tinyai::Format(warning_text_, sizeof warning_text_,
                  "the weight cache's cap of %.2f MiB (%s; 256 MB unless set) is below the model's %.2f MiB of "
                  "weights%s: every token reads them from storage again (%s), many times slower than with them "
                  "resident; raise the cap to %llu bytes or more (maxCacheSize, or 0 for none)",
                  Mib(configured_cap), cap_source_, Mib(all_weights),
                  limit_ != 0 ? ", which the memory limit would hold" : "",
                  mode_ == TINYAI_EXEC_MEMORY_OPT ? "MEMORY_OPT" : "STREAMING",
                  static_cast<unsigned long long>(all_weights));
  }
  return TINYAI_OK;
}

int64_t ForwardScheduler::ModeRank() const {
  // NORMAL keeps every weight resident; MEMORY_OPT streams them in whole
  // passes; STREAMING in fewer rows per pass, each pass reading every
  // weight once (a prompt's cost). Equal ranks go to precision.
  if (mode_ == TINYAI_EXEC_NORMAL) return kNormalRank;
  if (mode_ == TINYAI_EXEC_MEMORY_OPT) return kMemoryOptRank;
  return rows_per_pass_;
}

TinyAIStatus ForwardScheduler::PlanOption(int32_t option) {
  minimum_limit_ = 0;
  TINYAI_RETURN_IF_ERROR(program_->UsePersistentOption(option));
  graph_ready_ = false;  // the operators' scratch follows the option
  TINYAI_RETURN_IF_ERROR(BuildGraph());
  return ChooseMode();
}

TinyAIStatus ForwardScheduler::Plan() {
  if (planned_) return TINYAI_OK;
  const int32_t options = program_->PersistentOptions();
  if (options <= 1) {
    TINYAI_RETURN_IF_ERROR(BuildGraph());
    TINYAI_RETURN_IF_ERROR(ChooseMode());
    planned_ = true;
    return TINYAI_OK;
  }
  // The persistent state is the program's to offer in several forms (the
  // KV cache's types): the most faithful one that reaches the best mode
  // the limit allows - a smaller state is taken only when it buys a better
  // mode (or more rows per pass streaming), or any mode at all. One too
  // large for this target's address space does not fit.
  SavedError before;
  SaveLastError(&before);
  int32_t best = -1;
  int64_t best_rank = -1;
  uint64_t least = 0;  // the least limit any option runs under
  Array<int64_t> ranks;
  TINYAI_RETURN_IF_ERROR(ranks.Allocate(static_cast<size_t>(options), "persistent option ranks"));
  TinyAIStatus refused = TINYAI_OK;
  for (int32_t i = 0; i < options; ++i) {
    const TinyAIStatus s = PlanOption(i);
    ranks[static_cast<size_t>(i)] = -1;
    if (minimum_limit_ != 0 && (least == 0 || minimum_limit_ < least)) least = minimum_limit_;
    if (s == TINYAI_ERR_RESOURCE_EXHAUSTED || s == TINYAI_ERR_OVERFLOW) {
      refused = s;
      continue;
    }
    TINYAI_RETURN_IF_ERROR(s);
    ranks[static_cast<size_t>(i)] = ModeRank();
    if (ModeRank() > best_rank) {
      best = i;
      best_rank = ModeRank();
    }
  }
  char name[64];
  if (best < 0) {
    minimum_limit_ = least;
    program_->NamePersistentOption(options - 1, name, sizeof name);
    return AddErrorContext(refused, "even with the smallest state the scheduler may choose (%s): ", name);
  }
  TINYAI_RETURN_IF_ERROR(PlanOption(best));
  RestoreLastError(before);  // the trials' refusals were answered
  minimum_limit_ = least;
  // The reason says which state and why.
  const size_t used = std::strlen(reason_);
  program_->NamePersistentOption(best, name, sizeof name);
  if (best == 0) {
    tinyai::Format(reason_ + used, sizeof reason_ - used, "; %s, the most precise choice", name);
  } else {
    char better[64];
    program_->NamePersistentOption(best - 1, better, sizeof better);
    const int64_t r = ranks[static_cast<size_t>(best - 1)];
    char what[64];
    if (r < 0) tinyai::Format(what, sizeof what, "it does not fit the limit");
    else if (r == kMemoryOptRank) tinyai::Format(what, sizeof what, "only MEMORY_OPT fits");
    else tinyai::Format(what, sizeof what, "only STREAMING with %lld rows per pass fits", static_cast<long long>(r));
    tinyai::Format(reason_ + used, sizeof reason_ - used, "; %s chosen: with %s %s", name, better, what);
  }
  planned_ = true;
  return TINYAI_OK;
}

TinyAIStatus ForwardScheduler::Prepare() {
  if (prepared_) {
    // Again: restart execution.
    if (loop_) loop_->Cancel();
    AbortPass();
    status_ = TINYAI_OK;
    program_->Reset();
    return TINYAI_OK;
  }
  TINYAI_RETURN_IF_ERROR(Plan());
  if (!threads_started_) {
    TINYAI_RETURN_IF_ERROR(pool_.Start(config_.threads == 0 ? port::CpuCount() : config_.threads));
    threads_started_ = true;
  }
  size_t arena_size = 0;
  if (!CheckedSize(arena_bytes_, &arena_size)) {
    return SetError(TINYAI_ERR_OVERFLOW, "the activation arena of %llu bytes exceeds this target's address space",
                    static_cast<unsigned long long>(arena_bytes_));
  }
  {
    MemScope scope(kMemActivations);
    TINYAI_RETURN_IF_ERROR(arena_.Allocate(arena_size, "activation arena"));
  }
  TINYAI_RETURN_IF_ERROR(program_->AllocateState());
  if (loop_) {
    MemScope scope(kMemKv);  // the batch loop's per-sequence state
    TINYAI_RETURN_IF_ERROR(loop_->Reserve());
  }
  TINYAI_RETURN_IF_ERROR(CountUnplanned());
  ProgramWeights* stream = program_->weights();
  if (model_) {
    claimed_allows_ = 0;
    TINYAI_RETURN_IF_ERROR(ClaimWeightCache(program_->PersistentHeld()));
  }
  LedgerMark(TINYAI_MEMORY_STAGE_PLAN, -1);
  if (stream) {
    stream->UpdateStreaming();
    if (mode_ == TINYAI_EXEC_NORMAL) TINYAI_RETURN_IF_ERROR(stream->Preload(scheduled_layers_.data()));
  }
  LedgerMark(TINYAI_MEMORY_STAGE_WARMUP, -1);
  prepared_ = true;
  return TINYAI_OK;
}

TinyAIStatus ForwardScheduler::CountUnplanned() {
  if (created_at_ < 0) return TINYAI_OK;
  // Everything this runner holds but weights was allocated on this thread
  // since creation began: the runner, its tables, arena and state.
  const int64_t taken = LedgerThreadBytes() - created_at_;
  const uint64_t model_part = model_ ? model_->overhead_bytes() : 0;
  const uint64_t own_tables = tables_bytes_ > model_part ? tables_bytes_ - model_part : 0;
  const uint64_t planned = arena_bytes_ + program_->PersistentHeld() + own_tables;
  if (taken <= 0) return TINYAI_OK;
  if (static_cast<uint64_t>(taken) <= planned) {
    // The plan's allowance (the allocator's headers) was more than taken:
    // the tables are what was taken, and the weights get the rest - never
    // more than the plan's own tables' count.
    uint64_t spare = planned - static_cast<uint64_t>(taken);
    if (spare > own_tables) spare = own_tables;
    tables_bytes_ -= spare;
    if (limit_ != 0) {
      if (cap_from_limit_) cache_cap_ += spare;
      limit_allows_ += spare;
    }
    return TINYAI_OK;
  }
  const uint64_t extra = static_cast<uint64_t>(taken) - planned;
  unplanned_ += extra;
  tables_bytes_ += extra;
  if (limit_ == 0) return TINYAI_OK;
  const uint64_t weights_need = mode_ == TINYAI_EXEC_NORMAL ? weights_.resident : weights_.largest_slice;
  if (limit_allows_ < extra + weights_need) {
    ErrorDetail d;
    d.resource = TINYAI_RESOURCE_MEMORY_LIMIT;
    d.stage = TINYAI_STAGE_PLAN;
    d.needed = limit_ - limit_allows_ + extra + weights_need;
    d.limit = limit_;
    d.remedy = TINYAI_REMEDY_RAISE_LIMIT;
    d.remedy_value = d.needed;
    SetError(TINYAI_ERR_RESOURCE_EXHAUSTED,
                    "memory limit of %llu bytes: once planned, TinyAI holds %llu bytes of tables and state more than "
                    "its plan counted, which leaves the weights %llu of the %llu %s needs; a limit of %llu runs",
                    static_cast<unsigned long long>(limit_), static_cast<unsigned long long>(extra),
                    static_cast<unsigned long long>(limit_allows_ > extra ? limit_allows_ - extra : 0),
                    static_cast<unsigned long long>(weights_need), tinyaiExecutionModeName(mode_),
                    static_cast<unsigned long long>(limit_ - limit_allows_ + extra + weights_need));
    return SetErrorDetail(d);
  }
  limit_allows_ -= extra;
  if (cache_cap_ > limit_allows_) cache_cap_ = limit_allows_;
  return TINYAI_OK;
}

TinyAIStatus ForwardScheduler::ClaimWeightCache(uint64_t persistent) {
  if (!model_) return TINYAI_OK;
  if (link_.claimed && persistent == state_bytes_) return TINYAI_OK;
  // The interval that ends: the weights' peak in it beside the state it had.
  auto fold = [&]() {
    const uint64_t w = model_->cache().RestartPeakWatch(&link_.peak);
    if (w > earlier_weight_peak_) earlier_weight_peak_ = w;
    if (w + state_bytes_ > earlier_joint_peak_) earlier_joint_peak_ = w + state_bytes_;
  };
  const bool was_claimed = link_.claimed;
  if (was_claimed) fold();
  // The cache is shared: its cap becomes the least any runner allows. A
  // growable KV cache lends the weights what it has not taken yet, and
  // takes it back as it grows: never below what the plan leaves them (the
  // floor other runners are checked against).
  uint64_t allows = limit_allows_;
  if (limit_ != 0 && memory_.persistent > persistent) allows += memory_.persistent - persistent;
  if (!link_.claimed || allows != claimed_allows_) {
    const uint64_t needs = mode_ == TINYAI_EXEC_NORMAL ? weights_.resident : weights_.largest_slice;
    TINYAI_RETURN_IF_ERROR(ClaimCache(model_, &link_, allows, limit_allows_, needs, tinyaiExecutionModeName(mode_)));
    claimed_allows_ = allows;
    if (ProgramWeights* stream = program_->weights()) stream->UpdateStreaming();
  }
  // While the cap came down the state was still the old one; from here on
  // (the weights evicted to the new cap) it may be the new one.
  if (was_claimed) fold();
  state_bytes_ = persistent;
  return TINYAI_OK;
}

// ---- passes ----

int32_t ForwardScheduler::MaxRows(int32_t position) const {
  int32_t best = 0;
  for (const ShapePlan& p : plans_) {
    int32_t rows = p.shape.rows;
    if (p.shape.context > 0) {
      if (p.shape.context <= position) continue;
      if (p.shape.context - position < rows) rows = p.shape.context - position;
    }
    if (rows > best) best = rows;
  }
  return best;
}

TinyAIStatus ForwardScheduler::BeginPass(const PassContext& pass, const void* input) {
  if (!prepared_) return SetError(TINYAI_ERR_MISUSE, "a pass begun before tinyaiPrepareForwardPass");
  if (in_pass()) return SetError(TINYAI_ERR_MISUSE, "a pass begun while another is in progress");
  const ShapePlan* best = nullptr;
  for (const ShapePlan& p : plans_) {
    if (!ShapeFits(pass.shape, p.shape)) continue;
    if (!best || p.result.arena_bytes < best->result.arena_bytes) best = &p;
  }
  if (!best || pass.shape.rows < 1) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "a pass of %d rows over %d positions fits no planned max shape",
                    pass.shape.rows, pass.shape.context);
  }
  // Room for the state the pass takes (a growable KV cache's chunks) comes
  // out of the weight cache first, so the two never sum past the limit.
  TINYAI_RETURN_IF_ERROR(ClaimWeightCache(program_->PersistentFor(pass)));
  const TinyAIStatus began = program_->BeginPass(pass);
  const TinyAIStatus claimed = ClaimWeightCache(program_->PersistentHeld());  // what it holds now, taken or not
  TINYAI_RETURN_IF_ERROR(began);
  TINYAI_RETURN_IF_ERROR(claimed);
  pass_ = pass;
  pass_input_ = input;
  pass_plan_ = best;
  cursor_ = 0;
  return TINYAI_OK;
}

void ForwardScheduler::AbortPass() { cursor_ = -1; }

TinyAIStatus ForwardScheduler::RunOp(int32_t o) {
  const GraphOp& op = act_.ops()[static_cast<size_t>(o)];
  const ShapePlan& plan = *pass_plan_;
  uint8_t* base = static_cast<uint8_t*>(arena_.data());
  OpIo io;
  for (int i = 0; i < op.input_count; ++i) {
    const int32_t g = act_.group(op.inputs[i]);
    io.inputs[i] = g < 0 ? pass_input_ : base + plan.offsets[static_cast<size_t>(g)];
  }
  io.output = base + plan.offsets[static_cast<size_t>(act_.group(op.output))];
  const int32_t s = act_.scratch_buffer(o);
  if (s >= 0) {
    io.scratch = base + plan.offsets[static_cast<size_t>(s)];
    io.scratch_bytes = plan.buffers[static_cast<size_t>(s)].size;
  }
  return program_->RunOp(op, io, pass_);
}

TinyAIStatus ForwardScheduler::StepNode(int32_t* layer) {
  if (!in_pass()) return SetError(TINYAI_ERR_MISUSE, "no pass is in progress");
  const Span<const GraphOp> ops = act_.ops();
  const int32_t node = ops[static_cast<size_t>(cursor_)].node;
  if (layer) *layer = ops[static_cast<size_t>(cursor_)].layer;
  while (cursor_ < act_.op_count() && ops[static_cast<size_t>(cursor_)].node == node) {
    TinyAIStatus s = RunOp(cursor_);
    if (s != TINYAI_OK) {
      AbortPass();
      return s;
    }
    ++cursor_;
  }
  if (cursor_ == act_.op_count()) {
    program_->EndPass(pass_);
    last_plan_ = pass_plan_;
    cursor_ = -1;
  }
  return TINYAI_OK;
}

TinyAIStatus ForwardScheduler::RunPass(const PassContext& pass, const void* input) {
  TINYAI_RETURN_IF_ERROR(BeginPass(pass, input));
  while (in_pass()) TINYAI_RETURN_IF_ERROR(StepNode(nullptr));
  return TINYAI_OK;
}

void* ForwardScheduler::OutputData(size_t k) const {
  if (!last_plan_ || k >= act_.outputs().size()) return nullptr;
  const int32_t g = act_.group(act_.outputs()[k]);
  return static_cast<uint8_t*>(arena_.data()) + last_plan_->offsets[static_cast<size_t>(g)];
}

// ---- the guide's loop ----

bool ForwardScheduler::ExecuteNext(const void* input, void* output, int32_t* layer) {
  if (!prepared_) {
    status_ = SetError(TINYAI_ERR_MISUSE, "tinyaiExecuteNextLayer called before tinyaiPrepareForwardPass");
  } else if (!loop_) {
    status_ = SetError(TINYAI_ERR_UNSUPPORTED, "this schedule has no model: it plans memory and runs nothing");
  } else if (loop_->Next(input, output, config_.outputCapacity, layer, &status_)) {
    return true;
  }
  // A failed text run leaves an empty string (the guide prints output after
  // its loop); a finished one leaves the text.
  if (writes_text() && output && status_ < 0) static_cast<char*>(output)[0] = '\0';
  return false;
}

// ---- memory and reports ----

uint64_t ForwardScheduler::memory_usage() const {
  const uint64_t weights = model_ ? model_->cache().held_bytes() : 0;
  return prepared_ ? weights + arena_bytes_ + program_->PersistentHeld() + tables_bytes_ : weights;
}

uint64_t ForwardScheduler::weight_peak() const {
  if (!model_) return 0;
  // Since this runner claimed the cache: what others held before is theirs.
  if (!link_.claimed) return model_->cache().stats().peak_held_bytes;
  const uint64_t now = model_->cache().WatchedPeak(link_.peak);
  return now > earlier_weight_peak_ ? now : earlier_weight_peak_;
}

uint64_t ForwardScheduler::joint_peak() const {
  const uint64_t weights = !model_ ? 0
                           : link_.claimed ? model_->cache().WatchedPeak(link_.peak)
                                           : model_->cache().stats().peak_held_bytes;
  // The state this interval may have had: what the last claim allowed for, or
  // more if it has grown since without one (it has not: every growth claims).
  uint64_t state = prepared_ ? program_->PersistentHeld() : 0;
  if (state_bytes_ > state) state = state_bytes_;
  return weights + state > earlier_joint_peak_ ? weights + state : earlier_joint_peak_;
}

uint64_t ForwardScheduler::peak_memory_usage() const {
  return prepared_ ? joint_peak() + arena_bytes_ + tables_bytes_ : weight_peak();
}

TinyAIStatus ForwardScheduler::OptimalBatch(uint64_t input_size, uint64_t output_size, int32_t max_batch,
                                            int32_t* best) {
  if (max_batch < 1) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "maxBatch %d is below 1", max_batch);
  TINYAI_RETURN_IF_ERROR(BuildGraph());
  const uint64_t weights = requested_mode_ == TINYAI_EXEC_NORMAL ? weights_.resident : weights_.largest_slice;
  const uint64_t configured_cap = model_ ? SharedCacheCap(*model_, &link_, nullptr) : 0;
  if (configured_cap != 0 && weights > configured_cap) {
    return SetError(TINYAI_ERR_RESOURCE_EXHAUSTED, "%s needs %llu bytes of weights in the cache, which is capped at %llu",
                    tinyaiExecutionModeName(requested_mode_), static_cast<unsigned long long>(weights),
                    static_cast<unsigned long long>(configured_cap));
  }
  if (limit_ == 0) {
    *best = max_batch;
    return TINYAI_OK;
  }
  // Tables as Plan() counts them (one plan per max shape).
  Array<PassShape> shapes;
  TINYAI_RETURN_IF_ERROR(MakeShapes(1, &shapes));
  int32_t context = 0;
  for (const PassShape& s : shapes) context = s.context > context ? s.context : context;
  const uint64_t tables = TablesBytes(shapes.size());
  const uint64_t fixed = SatAdd(SatAdd(weights, memory_.persistent), tables);
  ArenaPlanner planner;
  ShapePlan plan;
  // need(b) for the plan of b rows, from its arena or (bound) its lower bound.
  auto need = [&](int32_t b, bool bound, uint64_t* out) -> TinyAIStatus {
    PassShape s;
    s.rows = b;
    s.context = context;
    TINYAI_RETURN_IF_ERROR(act_.Plan(s, &planner, &plan));
    uint64_t io = 0;
    if (!CheckedMul(static_cast<uint64_t>(b), SatAdd(input_size, output_size), &io)) io = UINT64_MAX;
    *out = SatAdd(SatAdd(fixed, bound ? plan.result.lower_bound_bytes : plan.result.arena_bytes), io);
    return TINYAI_OK;
  };
  // The lower bound grows with the rows, so the largest batch whose bound
  // fits is found by bisection: no larger batch can fit. The planned arena
  // (at or above the bound) grows with the rows too, so a second bisection
  // below it finds the largest batch whose plan fits; a few batches above
  // that are tried as well, in case a placement is not monotone. Every step
  // plans once: even a maxBatch of INT_MAX takes some 70 plans.
  int32_t lo = 0, hi = max_batch;
  while (lo < hi) {
    const int32_t mid = static_cast<int32_t>(lo + (static_cast<int64_t>(hi) - lo + 1) / 2);  // no int overflow
    uint64_t n = 0;
    TINYAI_RETURN_IF_ERROR(need(mid, true, &n));
    if (n <= limit_) lo = mid;
    else hi = mid - 1;
  }
  int32_t fit = 0;
  // In 64 bits: a passes INT_MAX when every batch fits.
  for (int64_t a = 1, b = lo; a <= b;) {
    const int32_t mid = static_cast<int32_t>(a + (b - a) / 2);
    uint64_t n = 0;
    TINYAI_RETURN_IF_ERROR(need(mid, false, &n));
    if (n <= limit_) {
      fit = mid;
      a = int64_t{mid} + 1;
    } else {
      b = mid - 1;
    }
  }
  for (int64_t b = int64_t{fit} + 1; fit > 0 && b <= lo && b <= int64_t{fit} + 8; ++b) {
    uint64_t n = 0;
    TINYAI_RETURN_IF_ERROR(need(static_cast<int32_t>(b), false, &n));
    if (n <= limit_) fit = static_cast<int32_t>(b);
  }
  if (fit > 0) {
    *best = fit;
    return TINYAI_OK;
  }
  uint64_t n = 0;
  TINYAI_RETURN_IF_ERROR(need(1, false, &n));
  return SetError(TINYAI_ERR_RESOURCE_EXHAUSTED,
                  "even a batch of 1 does not fit: it needs %llu bytes (weights %llu in %s mode, an arena of %llu, "
                  "%llu of KV cache, %llu of tables, %llu of input and output), over the memory limit of %llu",
                  static_cast<unsigned long long>(n), static_cast<unsigned long long>(weights),
                  tinyaiExecutionModeName(requested_mode_), static_cast<unsigned long long>(plan.result.arena_bytes),
                  static_cast<unsigned long long>(memory_.persistent), static_cast<unsigned long long>(tables),
                  static_cast<unsigned long long>(SatAdd(input_size, output_size)),
                  static_cast<unsigned long long>(limit_));
}

TinyAIStatus ForwardScheduler::Report(TinyAISchedulerReport* out) const {
  if (!planned_) return SetError(TINYAI_ERR_MISUSE, "the schedule has not been planned or prepared yet");
  std::memset(out, 0, sizeof *out);
  out->structSize = sizeof *out;
  out->requestedMode = requested_mode_;
  out->mode = mode_;
  out->reason = reason_;
  out->memoryLimit = limit_;
  out->minimumMemoryLimit = minimum_limit_;
  out->arenaBytes = arena_bytes_;
  out->lowerBoundBytes = lower_bound_bytes_;
  out->naiveBytes = naive_bytes_;
  out->weightBytes = weights_.decoded;
  out->weightResidentBytes = weights_.resident;
  // Once prepared, the cap in force: other runners on the model may lower it.
  out->weightCacheCap = prepared_ && model_ ? model_->cache().stats().capacity : cache_cap_;
  out->kvCacheBytes = memory_.persistent;
  out->tableBytes = tables_bytes_;
  out->largestSliceBytes = weights_.largest_slice;
  out->rowsPerPass = rows_per_pass_;
  out->layerCount = graph_.node_count();
  out->opCount = act_.op_count();
  out->bufferCount = act_.buffer_count();
  out->inPlaceCount = act_.in_place_count();
  out->shapeCount = static_cast<int32_t>(plans_.size());
  out->atLowerBound = plan_note_[0] == '\0' ? 1 : 0;
  out->planNote = plan_note_;
  out->memoryUsage = memory_usage();
  out->peakMemoryUsage = peak_memory_usage();
  return TINYAI_OK;
}

void ForwardScheduler::Name(const GraphOp& op, char* out, size_t capacity) const {
  program_->NameOp(op, out, capacity);
}

TinyAIStatus ForwardScheduler::DumpDag(char* buf, size_t capacity, size_t* needed) const {
  if (!planned_) return SetError(TINYAI_ERR_MISUSE, "the activation DAG exists once the schedule is prepared");
  TextBuffer text(buf, capacity);
  text.Printf("# mode: %s; %s\n", tinyaiExecutionModeName(mode_), reason_);
  const ShapePlan* plans[TINYAI_MAX_SHAPES];
  size_t n = 0;
  for (const ShapePlan& p : plans_) plans[n++] = &p;
  DumpActivationDagYaml(act_, Span<const ShapePlan* const>(plans, n), *this, &text);
  *needed = text.length() + 1;
  if (text.length() + 1 > capacity) {
    return SetError(TINYAI_ERR_BUFFER_TOO_SMALL, "the activation DAG needs %zu bytes; the buffer holds %zu",
                    text.length() + 1, capacity);
  }
  return TINYAI_OK;
}

}  // namespace tinyai
