// The forward scheduler behind <tinyai/utils/forward_scheduler.h>, and the
// one execution path of every model: TinyAILLM runs its language model
// through one too.
//
// Plan() turns the schedule into an activation graph (the program emits each
// layer's operators, in dependency order), plans the arena for every max
// shape, sums what the mode needs - weights (all of them for NORMAL, the
// largest row slice for the streaming modes), the arena, persistent state,
// tables - against the limit, and settles the mode and the rows per pass.
// Prepare() then allocates the arena and the program's state, sets the
// weight cache's cap to what the rest leaves, and in NORMAL mode loads every
// weight. Nothing is allocated after that: a pass runs its operators on
// pointers into the arena.
//
// Passes: BeginPass() picks the smallest plan whose shape covers the pass,
// StepNode() runs one layer's operators, and after the last one the program
// ends the pass (a language model advances its position). The drivers above
// decide what passes to run: the runtime's loop behind the guide's
// tinyaiExecuteNextLayer (text for a language model, model/runtime.h; rows
// for a dense network, scheduler/batch_loop.h) and the LLM API's text
// session.
//
// The scheduler knows no model: it runs a LayerProgram. Init() without a
// model plans memory only; with one, the model's runtime is picked for its
// architecture by model/runtime.h and handed over with Adopt().
#ifndef TINYAI_SCHEDULER_SCHEDULER_H_
#define TINYAI_SCHEDULER_SCHEDULER_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "common/array.h"
#include "common/format.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "loader/mapped_model.h"
#include "planner/activation_graph.h"
#include "planner/arena_planner.h"
#include "scheduler/cache_budget.h"
#include "scheduler/layer_graph.h"
#include "scheduler/program.h"
#include "tinyai/utils/forward_scheduler.h"

namespace tinyai {

class AbstractProgram;
class BatchLoop;

class ForwardScheduler : private OpNamer {
 public:
  ForwardScheduler();
  ForwardScheduler(const ForwardScheduler&) = delete;
  ForwardScheduler& operator=(const ForwardScheduler&) = delete;
  ~ForwardScheduler();

  // Checks the arguments and binds model. Without a model the schedule
  // plans memory and runs nothing; with one, the model's runtime must be
  // adopted before anything else (model/runtime.h does both). config must
  // be a full struct.
  TinyAIStatus Init(TinyAIMappedModel* model, TinyAIExecutionMode mode, uint64_t limit,
                    const TinyAISchedulerConfig& config);
  // Takes ownership of the runtime that runs the model (once, after Init).
  void Adopt(ModelRuntime* runtime);
  // Tests: runs `program` (borrowed; it must outlive the scheduler) over
  // model (may be null), with the batch loop (scheduler/batch_loop.h).
  TinyAIStatus InitWithProgram(LayerProgram* program, TinyAIMappedModel* model, TinyAIExecutionMode mode,
                               uint64_t limit, const TinyAISchedulerConfig& config);
  // What Init() was given (threads, context length); the pool the
  // runtime's program computes on (started at Prepare).
  const TinyAISchedulerConfig& config() const { return config_; }
  ThreadPool* pool() { return &pool_; }

  TinyAIStatus AddLayer(int32_t layer, int32_t depends_on, TinyAIDependencyType type, uint64_t output_size);
  TinyAIStatus AddModelLayers();
  TinyAIStatus SetBatchSize(int32_t batch);

  // Everything but allocation (see above); again after a change restarts.
  TinyAIStatus Plan();
  TinyAIStatus Prepare();
  // The recording allocator's reading (LedgerThreadBytes) on the creating
  // thread before anything of this runner was allocated: Prepare() then
  // compares what was taken with the plan, and the weight cache gets the
  // limit less what is really held (tables the plan's count missed, the
  // allocator's headers), never more.
  void set_created_at(int64_t ledger_bytes) { created_at_ = ledger_bytes; }
  // The object that holds this scheduler (an LLM's handle), counted in the
  // tables; set before Plan().
  void set_runner_bytes(uint64_t bytes) { runner_bytes_ = bytes; }
  // Plans the model's tables as if its weight cache kept at most `sets`
  // staging sets (0: as it keeps now; a fallback chain's prefetch step).
  void set_staging_sets(size_t sets) { staging_sets_ = sets; }
  // How the mode came to be asked for, in the plan's reason (" (requested)"
  // by default; a fallback chain's level says so).
  void set_mode_origin(const char* how) { tinyai::Format(mode_origin_, sizeof mode_origin_, "%s", how); }
  // What Prepare() found held beyond the plan (0: the plan counted it all).
  uint64_t unplanned_bytes() const { return unplanned_; }
  bool planned() const { return planned_; }
  bool prepared() const { return prepared_; }

  // ---- passes ----
  // The most rows a pass starting at `position` can take (a plan covers
  // rows and position + rows); 0 when no plan covers position + 1.
  int32_t MaxRows(int32_t position) const;
  TinyAIStatus BeginPass(const PassContext& pass, const void* input);
  bool in_pass() const { return cursor_ >= 0; }
  // Runs the next layer's operators; *layer (may be null) gets its index.
  TinyAIStatus StepNode(int32_t* layer);
  // Begins a pass and runs it to the end.
  TinyAIStatus RunPass(const PassContext& pass, const void* input);
  // Abandons a pass in progress (after a failure).
  void AbortPass();
  // The k-th graph output of the last pass (valid until the next pass).
  void* OutputData(size_t k) const;

  // ---- the guide's execution loop ----
  bool ExecuteNext(const void* input, void* output, int32_t* layer);
  TinyAIStatus status() const { return status_; }

  // ---- memory ----
  uint64_t memory_usage() const;
  uint64_t peak_memory_usage() const;
  // The most the weight cache has held since this runner was prepared.
  uint64_t weight_peak() const;
  uint64_t arena_bytes() const { return arena_bytes_; }
  uint64_t fixed_bytes() const { return arena_bytes_ + memory_.persistent + tables_bytes_; }
  TinyAIStatus OptimalBatch(uint64_t input_size, uint64_t output_size, int32_t max_batch, int32_t* best);
  TinyAIStatus Report(TinyAISchedulerReport* out) const;
  TinyAIStatus DumpDag(char* buf, size_t capacity, size_t* needed) const;

  // What the scheduled layers' weights take (the model's; zeros without).
  const WeightTotals& weights() const { return weights_; }
  // The tensor that names the largest row slice ("" without a model).
  const char* largest_slice_tensor() const;
  // The runner's link to its model (shared weight cache, orphaning, busy).
  RunnerLink& link() { return link_; }
  const RunnerLink& link() const { return link_; }
  // TINYAI_ERR_MISUSE naming call when this runner cannot take a call: its
  // model was closed, or (unless allow_busy) it is in the middle of a
  // generation (a text callback calling back into it).
  TinyAIStatus CheckUsable(const char* call, bool allow_busy = false) const;
  // Bytes tinyaiExecuteNextLayer() may write at output (text loops).
  TinyAIStatus SetOutputCapacity(size_t capacity);
  // Whether tinyaiExecuteNextLayer() writes text at output.
  bool writes_text() const { return loop_ && loop_->writes_text(); }

  // The weight cache's cap the plan gives it (0: none).
  uint64_t planned_cache_cap() const { return cache_cap_; }
  TinyAIExecutionMode mode() const { return mode_; }
  int32_t rows_per_pass() const { return rows_per_pass_; }
  int32_t batch_size() const { return batch_; }
  uint64_t limit() const { return limit_; }
  uint64_t minimum_limit() const { return minimum_limit_; }
  uint64_t tables_bytes() const { return tables_bytes_; }
  const ProgramMemory& program_memory() const { return memory_; }
  // The persistent state held now and at most so far (a growable KV cache
  // holds less than program_memory().persistent until it is full).
  uint64_t persistent_held() const { return program_->PersistentHeld(); }
  // Claims the model's weight cache for this runner (once prepared): what
  // the limit leaves beside the plan, plus the room the persistent state
  // (a growable KV cache) does not take while it holds `persistent` bytes.
  // Called with what it is about to hold before it takes more, and with
  // what it holds after it gave some back.
  TinyAIStatus ClaimWeightCache(uint64_t persistent);
  uint64_t persistent_peak() const { return program_->PersistentPeak(); }
  // The most the weight cache and the persistent state have held at once
  // since this runner claimed the cache (a growable KV cache grows as the
  // weight cache's cap shrinks: their peaks are not at the same time).
  uint64_t joint_peak() const;
  LayerProgram* program() const { return program_; }
  TinyAIMappedModel* model() const { return model_; }
  // A plan that runs, but much slower than it could (the weight cache's cap
  // keeps the weights from staying resident): resource NONE when none.
  const ErrorDetail& warning() const { return warning_; }
  const char* warning_text() const { return warning_text_; }
  const ActivationGraph& graph() const { return act_; }
  int32_t shape_count() const { return static_cast<int32_t>(plans_.size()); }
  const ShapePlan& plan(int32_t i) const { return plans_[static_cast<size_t>(i)]; }

 private:
  TinyAIStatus BuildGraph();
  // Shapes with rows capped at max_rows (0 = as configured).
  TinyAIStatus MakeShapes(int32_t max_rows, Array<PassShape>* shapes) const;
  TinyAIStatus PlanShapes(const Array<PassShape>& shapes, Array<ShapePlan>* plans, uint64_t* arena) const;
  TinyAIStatus ChooseMode();
  ErrorDetail LimitDetail(uint64_t needed) const;
  void SliceDetail(int32_t slice, ErrorDetail* d) const;
  // Switches the program to persistent option `option`, builds and plans.
  TinyAIStatus PlanOption(int32_t option);
  // How good the chosen mode is: NORMAL > MEMORY_OPT > STREAMING by its
  // rows per pass.
  static constexpr int64_t kNormalRank = int64_t{3} << 32;
  static constexpr int64_t kMemoryOptRank = int64_t{2} << 32;
  int64_t ModeRank() const;
  // Bytes of tables held with `plans` plans (see TinyAISchedulerReport.tableBytes).
  uint64_t TablesBytes(size_t plans) const;
  // TINYAI_ERR_RESOURCE_EXHAUSTED: the limit is below `needed`, the least
  // of any mode (`for_mode`: of the requested one, the remedy's limit).
  TinyAIStatus TooSmall(uint64_t needed, uint64_t for_mode) const;
  TinyAIStatus RunOp(int32_t op);
  void Name(const GraphOp& op, char* out, size_t capacity) const override;

  TinyAIMappedModel* model_ = nullptr;
  RunnerLink link_;
  LayerProgram* program_ = nullptr;
  ExecutionLoop* loop_ = nullptr;        // the runtime's; nullptr without a model
  ModelRuntime* runtime_ = nullptr;      // owned, with a model
  AbstractProgram* abstract_ = nullptr;  // owned, without a model
  BatchLoop* batch_loop_ = nullptr;      // owned, InitWithProgram's
  ThreadPool pool_;
  TinyAISchedulerConfig config_{};
  TinyAIExecutionMode requested_mode_ = TINYAI_EXEC_ADAPTIVE;
  TinyAIExecutionMode mode_ = TINYAI_EXEC_ADAPTIVE;
  uint64_t limit_ = 0;

  LayerGraph graph_;
  ActivationGraph act_;
  ArenaPlanner planner_;
  Array<int32_t> node_output_;  // per node: its output tensor
  Array<uint8_t> scheduled_layers_;  // per model layer: 1 when the schedule has it
  WeightTotals weights_;
  const char* cap_source_ = "maxCacheSize";  // what caps the cache when ChooseMode ran
  ErrorDetail warning_;       // the plan's warning (resource NONE: none)
  char warning_text_[384] = {0};
  Array<ShapePlan> plans_;
  AlignedBuffer arena_;
  uint64_t arena_bytes_ = 0;
  uint64_t lower_bound_bytes_ = 0;
  uint64_t naive_bytes_ = 0;
  ProgramMemory memory_;
  uint64_t tables_bytes_ = 0;
  int64_t created_at_ = -1;  // set_created_at's reading; -1: not taken
  uint64_t runner_bytes_ = 0;
  bool cap_from_limit_ = false;  // cache_cap_ is limit_allows_ (not maxCacheSize or another runner's)
  uint64_t unplanned_ = 0;
  // Prepare(): what is held beyond the plan goes to the tables, out of the weights' share.
  TinyAIStatus CountUnplanned();
  uint64_t minimum_limit_ = 0;
  uint64_t cache_cap_ = 0;     // the cache's cap when prepared (this runner's allowance and the others')
  uint64_t limit_allows_ = 0;  // what this runner's own limit leaves the cache (0 = no limit)
  uint64_t claimed_allows_ = 0;  // what it last claimed: that and the KV cache's room not yet taken
  // The persistent state's bytes as of the last claim (the most it holds
  // until the next), the weights' peak in earlier intervals between claims,
  // and the most weights and state held together in them.
  uint64_t state_bytes_ = 0;
  uint64_t earlier_weight_peak_ = 0;
  uint64_t earlier_joint_peak_ = 0;
  int32_t rows_per_pass_ = 1;
  char reason_[448] = {0};
  char mode_origin_[40] = " (requested)";
  size_t staging_sets_ = 0;
  char plan_note_[384] = {0};  // the longest note (a 95-character op name, the widest numbers): 367 bytes
  bool graph_ready_ = false;  // BuildGraph() has succeeded
  bool planned_ = false;
  bool prepared_ = false;
  bool threads_started_ = false;

  // The pass in progress.
  PassContext pass_;
  const void* pass_input_ = nullptr;
  const ShapePlan* pass_plan_ = nullptr;
  const ShapePlan* last_plan_ = nullptr;
  int32_t cursor_ = -1;  // next operator, -1 when no pass runs

  // The guide's loop.
  TinyAIStatus status_ = TINYAI_OK;
  int32_t batch_ = 1;
};

// Marks a runner busy for the scope of a call that runs the caller's
// callbacks, so that calls back into it are refused (CheckUsable).
class BusyScope {
 public:
  explicit BusyScope(RunnerLink& link) : link_(link) { link_.busy.store(true); }
  ~BusyScope() { link_.busy.store(false); }
  BusyScope(const BusyScope&) = delete;
  BusyScope& operator=(const BusyScope&) = delete;

 private:
  RunnerLink& link_;
};

}  // namespace tinyai

#endif  // TINYAI_SCHEDULER_SCHEDULER_H_
