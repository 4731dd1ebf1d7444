// The forward scheduler's planner and executor on thousands of random DAGs
// with sequential, residual and attention dependencies: every plan keeps
// simultaneously live buffers apart (checked here independently of the
// planner), covers every tensor's lifetime, serves every pass shape up to its
// max shapes, gives results bitwise equal to the debug mode (no in-place
// reuse), and comes close to the lower bound in aggregate.
//
// The layers are a test program's: each reads the sum of its inputs, fills
// its scratch from it, and writes a function of both - so a buffer that
// another live buffer overwrote would change the result.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "format/test_models.h"
#include "scheduler/program.h"
#include "scheduler/scheduler.h"

namespace tinyai {
namespace {

using testing::LastMessage;

struct TestLayer {
  int32_t id = 0;
  uint32_t out_floats = 1;      // per row
  uint32_t scratch_floats = 0;  // per row
  bool in_place = false;        // may overwrite its (summed) input
  std::vector<std::pair<int32_t, TinyAIDependencyType>> deps;  // producer id (-1: the input), type
};

// Floats per row of a tensor.
uint32_t Floats(const GraphTensor& t) { return static_cast<uint32_t>(t.size.per_row / sizeof(float)); }

class TestProgram final : public LayerProgram {
 public:
  enum Op : int32_t { kSum, kLayer };
  uint32_t input_floats = 8;
  std::map<int32_t, TestLayer> layers;

  TinyAIStatus OutputRowBytes(int32_t, uint64_t* bytes) const override {
    *bytes = 0;
    return TINYAI_OK;
  }
  SizeRule InputSize() const override { return SizeRule::Rows(input_floats * sizeof(float)); }
  TinyAIStatus CheckSchedule(const LayerGraph&) const override { return TINYAI_OK; }
  TinyAIStatus EmitLayer(const LayerGraph& graph, int32_t node, const int32_t* inputs, int32_t count,
                         ActivationGraph* g, int32_t* output) override {
    const LayerNode& n = graph.node(node);
    const TestLayer& l = layers.at(n.layer);
    std::vector<TinyAIDependencyType> types;
    uint64_t widest = 0;
    for (int32_t i = 0; i < count; ++i) {
      types.push_back(graph.deps(node)[static_cast<size_t>(i)].type);
      widest = std::max(widest, g->tensors()[static_cast<size_t>(inputs[i])].size.per_row);
    }
    GraphOp op;
    op.layer = n.layer;
    op.node = graph.position(node);
    int32_t x = inputs[0];
    TINYAI_RETURN_IF_ERROR(EmitSum(g, op, kSum, inputs, types.data(), count, SizeRule::Rows(widest), &x));
    op.kind = kLayer;
    op.inputs[0] = x;
    op.input_count = 1;
    op.scratch = SizeRule::Rows(l.scratch_floats * sizeof(float));
    op.in_place = l.in_place && (count > 1 || types[0] != TINYAI_DEP_ATTENTION) ? 0 : -1;
    return g->AddOp(op, SizeRule::Rows(n.output_size), output);
  }
  void NameOp(const GraphOp& op, char* out, size_t capacity) const override {
    std::snprintf(out, capacity, "t%d/%s", op.layer, op.kind == kSum ? "sum" : "layer");
  }
  // Reads every input before writing the same position of the output, so it
  // is correct in place whenever the output is no larger than the input.
  TinyAIStatus RunOp(const GraphOp& op, const OpIo& io, const PassContext& pass) override {
    const auto tensors = graph->tensors();
    const size_t rows = static_cast<size_t>(pass.shape.rows);
    float* out = static_cast<float*>(io.output);
    const size_t n_out = rows * Floats(tensors[static_cast<size_t>(op.output)]);
    if (op.kind == kSum) {
      for (size_t j = 0; j < n_out; ++j) {
        float acc = 0.0f;
        for (int i = 0; i < op.input_count; ++i) {
          const size_t n_in = rows * Floats(tensors[static_cast<size_t>(op.inputs[i])]);
          acc += static_cast<const float*>(io.inputs[i])[j % n_in];
        }
        out[j] = acc;
      }
      return TINYAI_OK;
    }
    const float* in = static_cast<const float*>(io.inputs[0]);
    const size_t n_in = rows * Floats(tensors[static_cast<size_t>(op.inputs[0])]);
    float* scratch = static_cast<float*>(io.scratch);
    const size_t n_scratch = rows * layers.at(op.layer).scratch_floats;
    if (n_scratch > io.scratch_bytes / sizeof(float)) {
      return SetError(TINYAI_ERR_INTERNAL, "scratch of %llu bytes for %zu floats",
                      static_cast<unsigned long long>(io.scratch_bytes), n_scratch);
    }
    float s = 0.0f;
    for (size_t k = 0; k < n_scratch; ++k) scratch[k] = in[k % n_in] * 0.5f + static_cast<float>(k) * 1e-3f;
    for (size_t k = 0; k < n_scratch; ++k) s += scratch[k];
    const float bias = static_cast<float>(op.layer) * 0.01f + s * 1e-4f;
    const size_t row = Floats(tensors[static_cast<size_t>(op.output)]);
    for (size_t j = 0; j < n_out; ++j) {
      out[j] = std::tanh(in[j % n_in] * 0.9f + bias + static_cast<float>((j % row) % 7) * 0.1f);
    }
    return TINYAI_OK;
  }
  void EndPass(const PassContext&) override {}
  ProgramWeights* weights() override { return nullptr; }
  ProgramMemory Memory() const override { return ProgramMemory(); }
  TinyAIStatus AllocateState() override { return TINYAI_OK; }
  int32_t context_length() const override { return 0; }

  const ActivationGraph* graph = nullptr;
};

// A random network: a chain with residual skips, attention-like reads of a
// recent layer, extra reads of the input, several widths; added in a
// shuffled order now and then (a dependency on a later-added layer).
void RandomNetwork(std::mt19937* rng, int n, TestProgram* p, std::vector<int32_t>* add_order) {
  auto chance = [&](double q) { return std::uniform_real_distribution<double>(0.0, 1.0)(*rng) < q; };
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(*rng); };
  static const uint32_t kWidths[] = {1, 3, 8, 16, 24, 64, 96, 256};
  p->layers.clear();
  p->input_floats = kWidths[pick(1, 7)];
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) {
    TestLayer l;
    l.id = 3 * i + pick(0, 2);  // ids need not be contiguous
    l.out_floats = chance(0.6) && i > 0 ? p->layers.at(ids.back()).out_floats : kWidths[pick(0, 7)];
    l.scratch_floats = chance(0.5) ? static_cast<uint32_t>(pick(1, 300)) : 0;
    l.in_place = chance(0.6);
    if (i == 0 || chance(0.05)) l.deps.push_back({-1, TINYAI_DEP_NONE});
    if (i > 0 && (l.deps.empty() || chance(0.9))) l.deps.push_back({ids[i - 1], TINYAI_DEP_SEQUENTIAL});
    // Skips reach back up to 24 layers, now and then to anywhere.
    if (i > 2 && chance(0.3)) {
      const int back = chance(0.02) ? i : std::min(i, 24);
      l.deps.push_back({ids[static_cast<size_t>(pick(i - back, i - 2))], TINYAI_DEP_RESIDUAL});
    }
    if (i > 1 && chance(0.15)) {
      const int32_t from = ids[static_cast<size_t>(pick(std::max(0, i - 6), i - 1))];
      bool dup = false;
      for (auto& d : l.deps) dup = dup || d.first == from;
      if (!dup) l.deps.push_back({from, TINYAI_DEP_ATTENTION});
    }
    if (i > 6 && chance(0.05)) {  // a wide merge: more inputs than one operator takes
      for (int k = 0; k < 5; ++k) {
        const int32_t from = ids[static_cast<size_t>(pick(std::max(0, i - 32), i - 1))];
        bool dup = false;
        for (auto& d : l.deps) dup = dup || d.first == from;
        if (!dup) l.deps.push_back({from, TINYAI_DEP_RESIDUAL});
      }
    }
    ids.push_back(l.id);
    p->layers[l.id] = l;
  }
  *add_order = ids;
  if (chance(0.2)) std::shuffle(add_order->begin(), add_order->end(), *rng);
}

TinyAIStatus AddNetwork(ForwardScheduler* s, const TestProgram& p, const std::vector<int32_t>& order) {
  for (int32_t id : order) {
    const TestLayer& l = p.layers.at(id);
    for (auto& d : l.deps) {
      TINYAI_RETURN_IF_ERROR(s->AddLayer(id, d.first, d.second, l.out_floats * sizeof(float)));
    }
  }
  return TINYAI_OK;
}

// Independent check of one plan: buffers whose lifetimes share a step do not
// overlap, and every tensor's and scratch's lifetime lies inside its
// buffer's. Returns "" or what is wrong.
std::string CheckPlan(const ActivationGraph& g, const ShapePlan& plan) {
  const size_t n = plan.buffers.size();
  std::vector<size_t> idx(n);
  for (size_t i = 0; i < n; ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return plan.buffers[a].first < plan.buffers[b].first; });
  for (size_t a = 0; a < n; ++a) {
    const PlanBuffer& x = plan.buffers[idx[a]];
    for (size_t b = a + 1; b < n && plan.buffers[idx[b]].first <= x.last; ++b) {
      const PlanBuffer& y = plan.buffers[idx[b]];
      if (x.size == 0 || y.size == 0) continue;
      const uint64_t xo = plan.offsets[idx[a]], yo = plan.offsets[idx[b]];
      if (xo < yo + y.size && yo < xo + x.size) {
        return "buffers " + std::to_string(idx[a]) + " and " + std::to_string(idx[b]) + " overlap while both live";
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (plan.offsets[i] + plan.buffers[i].size > plan.result.arena_bytes) return "a buffer ends past the arena";
    if (plan.offsets[i] % kArenaAlignment) return "an unaligned buffer";
  }
  const auto tensors = g.tensors();
  for (size_t t = 0; t < tensors.size(); ++t) {
    const int32_t grp = g.group(static_cast<int32_t>(t));
    if (grp < 0) continue;
    const PlanBuffer& b = plan.buffers[static_cast<size_t>(grp)];
    const int32_t last = tensors[t].output ? g.op_count() : std::max(tensors[t].last_use, tensors[t].producer);
    if (b.first > tensors[t].producer || b.last < last) return "tensor " + std::to_string(t) + " outlives its buffer";
    uint64_t bytes = 0;
    tensors[t].size.Eval(plan.shape, &bytes);
    if (b.size < bytes) return "tensor " + std::to_string(t) + " is larger than its buffer";
  }
  for (int32_t o = 0; o < g.op_count(); ++o) {
    const int32_t sb = g.scratch_buffer(o);
    if (sb >= 0 && (plan.buffers[static_cast<size_t>(sb)].first != o || plan.buffers[static_cast<size_t>(sb)].last != o)) {
      return "scratch of operator " + std::to_string(o) + " lives beyond its step";
    }
  }
  return "";
}

// The outputs of every pass shape 1..rows over the same input, flattened.
std::vector<float> RunAll(ForwardScheduler* s, const std::vector<float>& input, int32_t rows) {
  std::vector<float> all;
  for (int32_t r = 1; r <= rows; ++r) {
    PassContext pass;
    pass.shape.rows = r;
    TinyAIStatus st = s->RunPass(pass, input.data());
    EXPECT_EQ(st, TINYAI_OK) << LastMessage();
    if (st != TINYAI_OK) return all;
    const auto outs = s->graph().outputs();
    for (size_t k = 0; k < outs.size(); ++k) {
      const float* data = static_cast<const float*>(s->OutputData(k));
      const size_t n = static_cast<size_t>(r) * Floats(s->graph().tensors()[static_cast<size_t>(outs[k])]);
      all.insert(all.end(), data, data + n);
    }
  }
  return all;
}

TEST(RandomDagTest, PlansKeepLiveBuffersApartAndResultsEqualDebugMode) {
  std::mt19937 rng(20261122);
  constexpr int kDags = 2500;
  double arena_sum = 0, bound_sum = 0, naive_sum = 0, worst = 1.0;
  int at_bound = 0, plans = 0, in_place_ops = 0;
  std::string worst_case;
  for (int dag = 0; dag < kDags; ++dag) {
    SCOPED_TRACE("dag " + std::to_string(dag));
    const int n = dag % 10 == 0 ? std::uniform_int_distribution<int>(60, 200)(rng)
                                : std::uniform_int_distribution<int>(2, 40)(rng);
    TestProgram program;
    std::vector<int32_t> order;
    RandomNetwork(&rng, n, &program, &order);
    // One or two max shapes (rows only: these layers do not attend).
    TinyAISchedulerConfig cfg = tinyaiCreateDefaultSchedulerConfig();
    const int32_t rows = std::uniform_int_distribution<int32_t>(1, 4)(rng);
    cfg.maxShapeCount = 1 + (dag % 3 == 0);
    cfg.maxShapes[0].rows = rows;
    cfg.maxShapes[1].rows = 1;
    std::vector<float> input(static_cast<size_t>(rows) * program.input_floats);
    for (float& v : input) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);

    std::vector<float> results[2];
    for (int debug = 0; debug < 2; ++debug) {
      cfg.debugExecution = debug == 1;
      ForwardScheduler s;
      ASSERT_EQ(s.InitWithProgram(&program, nullptr, TINYAI_EXEC_ADAPTIVE, 0, cfg), TINYAI_OK) << LastMessage();
      program.graph = &s.graph();
      ASSERT_EQ(AddNetwork(&s, program, order), TINYAI_OK) << LastMessage();
      ASSERT_EQ(s.Prepare(), TINYAI_OK) << LastMessage();
      // Execution order: every producer before its consumers.
      std::map<int32_t, int32_t> position;
      for (const GraphOp& op : s.graph().ops()) position.emplace(op.layer, op.node);
      for (auto& [id, l] : program.layers) {
        for (auto& d : l.deps) {
          if (d.first >= 0) ASSERT_LT(position.at(d.first), position.at(id));
        }
      }
      for (int32_t i = 0; i < s.shape_count(); ++i) {
        const ShapePlan& plan = s.plan(i);
        ASSERT_EQ(CheckPlan(s.graph(), plan), "");
        ASSERT_GE(plan.result.arena_bytes, plan.result.lower_bound_bytes);
        ASSERT_LE(plan.result.arena_bytes, plan.result.naive_bytes);
        if (!debug) {
          const double ratio = static_cast<double>(plan.result.arena_bytes) /
                               static_cast<double>(std::max<uint64_t>(plan.result.lower_bound_bytes, 1));
          arena_sum += static_cast<double>(plan.result.arena_bytes);
          bound_sum += static_cast<double>(plan.result.lower_bound_bytes);
          naive_sum += static_cast<double>(plan.result.naive_bytes);
          at_bound += plan.result.arena_bytes == plan.result.lower_bound_bytes;
          ++plans;
          if (ratio > worst) {
            worst = ratio;
            worst_case = "dag " + std::to_string(dag) + " (" + std::to_string(n) + " layers, " +
                         std::to_string(s.graph().buffer_count()) + " buffers)";
          }
        }
      }
      if (debug) EXPECT_EQ(s.graph().in_place_count(), 0);
      else in_place_ops += s.graph().in_place_count();
      results[debug] = RunAll(&s, input, rows);
      // The guide's loop over a batch of `rows` gives the same as one pass.
      if (dag % 50 == 0) {
        ASSERT_EQ(s.SetBatchSize(rows), TINYAI_ERR_MISUSE);
      }
    }
    ASSERT_EQ(results[0].size(), results[1].size());
    ASSERT_EQ(std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(float)), 0)
        << "planned and debug execution differ";
  }
  const double aggregate = arena_sum / bound_sum;
  std::printf("%d random DAGs, %d plans: arena / lower bound = %.4f in aggregate, worst %.4f (%s); %d plans (%.1f%%) "
              "exactly at the bound; naive / arena = %.2f; %d operators in place\n",
              kDags, plans, aggregate, worst, worst_case.c_str(), at_bound, 100.0 * at_bound / plans,
              naive_sum / arena_sum, in_place_ops);
  EXPECT_LE(aggregate, 1.05);
}

TEST(RandomDagTest, TheGuidesLoopRunsABatchInPassesOfThePlannedRows) {
  // STREAMING splits a batch of 7 into passes of at most the rows that fit;
  // for row-wise layers the result equals one pass over all 7.
  std::mt19937 rng(7);
  TestProgram program;
  std::vector<int32_t> order;
  RandomNetwork(&rng, 30, &program, &order);
  // Row-wise only: no scratch (its sum spans rows) and every width equal, so
  // "j % n_in" never crosses rows.
  program.input_floats = 64;
  for (auto& [id, l] : program.layers) {
    l.scratch_floats = 0;
    l.out_floats = program.input_floats;
  }
  const int32_t batch = 7;
  std::vector<float> input(static_cast<size_t>(batch) * program.input_floats);
  for (float& v : input) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
  std::vector<float> outputs[2];
  for (int split = 0; split < 2; ++split) {
    TinyAISchedulerConfig cfg = tinyaiCreateDefaultSchedulerConfig();
    cfg.batchSize = batch;
    ForwardScheduler probe;
    ASSERT_EQ(probe.InitWithProgram(&program, nullptr, TINYAI_EXEC_ADAPTIVE, 0, cfg), TINYAI_OK);
    program.graph = &probe.graph();
    ASSERT_EQ(AddNetwork(&probe, program, order), TINYAI_OK);
    ASSERT_EQ(probe.Plan(), TINYAI_OK);
    // A limit that fits 3 rows per pass but not 7.
    uint64_t limit = 0;
    {
      TinyAISchedulerConfig c3 = cfg;
      c3.batchSize = 3;
      ForwardScheduler s3;
      ASSERT_EQ(s3.InitWithProgram(&program, nullptr, TINYAI_EXEC_ADAPTIVE, 0, c3), TINYAI_OK);
      program.graph = &s3.graph();
      ASSERT_EQ(AddNetwork(&s3, program, order), TINYAI_OK);
      ASSERT_EQ(s3.Plan(), TINYAI_OK);
      limit = s3.fixed_bytes();
    }
    ForwardScheduler s;
    ASSERT_EQ(s.InitWithProgram(&program, nullptr, split ? TINYAI_EXEC_STREAMING : TINYAI_EXEC_NORMAL,
                                split ? limit : 0, cfg),
              TINYAI_OK);
    program.graph = &s.graph();
    ASSERT_EQ(AddNetwork(&s, program, order), TINYAI_OK);
    ASSERT_EQ(s.Prepare(), TINYAI_OK) << LastMessage();
    if (split) {
      EXPECT_EQ(s.mode(), TINYAI_EXEC_STREAMING);
      EXPECT_GE(s.rows_per_pass(), 3);
      EXPECT_LT(s.rows_per_pass(), batch);
      EXPECT_LE(s.peak_memory_usage(), limit);
    }
    uint64_t out_row = 0;
    for (int32_t t : s.graph().outputs()) out_row += s.graph().tensors()[static_cast<size_t>(t)].size.per_row;
    outputs[split].assign(static_cast<size_t>(batch) * out_row / sizeof(float), -7.0f);
    int32_t layer = -1;
    int steps = 0;
    while (s.ExecuteNext(input.data(), outputs[split].data(), &layer)) ++steps;
    ASSERT_EQ(s.status(), TINYAI_OK) << LastMessage();
    const int passes = (batch + s.rows_per_pass() - 1) / s.rows_per_pass();
    EXPECT_EQ(steps, passes * static_cast<int>(program.layers.size()));
  }
  ASSERT_EQ(outputs[0].size(), outputs[1].size());
  for (size_t i = 0; i < outputs[0].size(); ++i) ASSERT_NEAR(outputs[0][i], outputs[1][i], 1e-6f) << i;
}

TEST(RandomDagTest, TenThousandLayersPlanCorrectly) {
  // Correctness at the size the benchmark times (tinyai-bench-scheduler).
  std::mt19937 rng(10000);
  TestProgram program;
  std::vector<int32_t> order;
  RandomNetwork(&rng, 10000, &program, &order);
  TinyAISchedulerConfig cfg = tinyaiCreateDefaultSchedulerConfig();
  ForwardScheduler s;
  ASSERT_EQ(s.InitWithProgram(&program, nullptr, TINYAI_EXEC_ADAPTIVE, 0, cfg), TINYAI_OK);
  program.graph = &s.graph();
  ASSERT_EQ(AddNetwork(&s, program, order), TINYAI_OK);
  ASSERT_EQ(s.Prepare(), TINYAI_OK) << LastMessage();
  EXPECT_EQ(CheckPlan(s.graph(), s.plan(0)), "");
  const ArenaPlanResult& r = s.plan(0).result;
  std::printf("10,000 layers: %d operators, %d buffers; arena %llu, lower bound %llu (%.4f), naive %llu\n",
              s.graph().op_count(), s.graph().buffer_count(), static_cast<unsigned long long>(r.arena_bytes),
              static_cast<unsigned long long>(r.lower_bound_bytes),
              static_cast<double>(r.arena_bytes) / static_cast<double>(r.lower_bound_bytes),
              static_cast<unsigned long long>(r.naive_bytes));
  EXPECT_LE(static_cast<double>(r.arena_bytes), 1.05 * static_cast<double>(r.lower_bound_bytes));
  std::vector<float> input(program.input_floats, 0.25f);
  EXPECT_FALSE(RunAll(&s, input, 1).empty());
}

}  // namespace
}  // namespace tinyai
