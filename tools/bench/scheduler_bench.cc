// tinyai-bench-scheduler: how long the forward scheduler takes to order,
// derive lifetimes and plan the arena of large graphs (Google Benchmark).
//
//   tinyai-bench-scheduler [--benchmark_filter=...]
//
// Graphs are planning-only schedules (no model) built through the public
// API: a chain of N layers where each layer depends on the one before, a
// third of them also on a layer up to 16 back (a residual skip), a tenth
// reading a recent layer as attention; output sizes of 1..8 KiB per row,
// fixed seed. Timed: tinyaiPlanForwardPass (validation, topological order,
// the activation graph, lifetimes, the arena plan and the mode) - the adds
// are not timed. Counters: the arena, its lower bound and naive total (bytes),
// and arena / lower bound.
#include <cstdint>
#include <random>

#include <benchmark/benchmark.h>

#include "tinyai/utils/forward_scheduler.h"

namespace {

TinyAIForwardScheduler* BuildChain(int layers, uint32_t seed) {
  std::mt19937 rng(seed);
  TinyAIForwardScheduler* s = tinyaiCreateForwardScheduler(nullptr, TINYAI_EXEC_ADAPTIVE, 0);
  for (int i = 0; i < layers; ++i) {
    const size_t size = 1024 * (1 + rng() % 8);
    if (i == 0) {
      tinyaiAddLayerToSchedule(s, 0, -1, TINYAI_DEP_NONE, size);
      continue;
    }
    tinyaiAddLayerToSchedule(s, i, i - 1, TINYAI_DEP_SEQUENTIAL, size);
    if (i > 2 && rng() % 3 == 0) {
      const int back = 2 + static_cast<int>(rng() % static_cast<uint32_t>(i - 1 < 16 ? i - 1 : 15));
      tinyaiAddLayerToSchedule(s, i, i - back, TINYAI_DEP_RESIDUAL, size);
    } else if (i > 2 && rng() % 10 == 0) {
      tinyaiAddLayerToSchedule(s, i, i - 2, TINYAI_DEP_ATTENTION, size);
    }
  }
  return s;
}

void BM_PlanChain(benchmark::State& state) {
  const int layers = static_cast<int>(state.range(0));
  TinyAISchedulerReport report;
  report.structSize = sizeof report;
  for (auto _ : state) {
    state.PauseTiming();
    TinyAIForwardScheduler* s = BuildChain(layers, 42);
    state.ResumeTiming();
    if (tinyaiPlanForwardPass(s) != TINYAI_OK) state.SkipWithError(tinyaiGetLastErrorMessage());
    state.PauseTiming();
    tinyaiGetSchedulerReport(s, &report);
    tinyaiDestroyForwardScheduler(s);
    state.ResumeTiming();
  }
  state.counters["ops"] = static_cast<double>(report.opCount);
  state.counters["buffers"] = static_cast<double>(report.bufferCount);
  state.counters["arena_bytes"] = static_cast<double>(report.arenaBytes);
  state.counters["lower_bound_bytes"] = static_cast<double>(report.lowerBoundBytes);
  state.counters["naive_bytes"] = static_cast<double>(report.naiveBytes);
  state.counters["arena_over_bound"] =
      static_cast<double>(report.arenaBytes) / static_cast<double>(report.lowerBoundBytes);
}
BENCHMARK(BM_PlanChain)->Arg(100)->Arg(1000)->Arg(10000)->Arg(20000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
