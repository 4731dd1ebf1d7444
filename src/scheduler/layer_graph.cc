#include "scheduler/layer_graph.h"

#include <algorithm>
#include <cstdio>

#include "common/format.h"
#include "common/status.h"

namespace tinyai {

const char* DependencyTypeName(TinyAIDependencyType type) {
  switch (type) {
    case TINYAI_DEP_NONE: return "NONE";
    case TINYAI_DEP_SEQUENTIAL: return "SEQUENTIAL";
    case TINYAI_DEP_RESIDUAL: return "RESIDUAL";
    case TINYAI_DEP_ATTENTION: return "ATTENTION";
  }
  return "?";
}

TinyAIStatus LayerGraph::Add(int32_t layer, int32_t depends_on, TinyAIDependencyType type, uint64_t output_size,
                             int32_t layer_limit) {
  if (built_) return SetError(TINYAI_ERR_MISUSE, "layer %d added after the schedule was prepared", layer);
  if (layer < 0 || (layer_limit > 0 && layer >= layer_limit)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "layer %d is out of range: the model has %d layers (0..%d)", layer,
                    layer_limit, layer_limit - 1);
  }
  if (static_cast<int>(type) < TINYAI_DEP_NONE || static_cast<int>(type) > TINYAI_DEP_ATTENTION) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "layer %d: dependency type %d is not a TinyAIDependencyType", layer,
                    static_cast<int>(type));
  }
  if (type == TINYAI_DEP_NONE && depends_on != -1) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                    "layer %d: TINYAI_DEP_NONE takes dependsOn -1 (it reads the scheduler's input), not %d", layer,
                    depends_on);
  }
  if (type != TINYAI_DEP_NONE) {
    if (depends_on == layer) {
      return SetError(TINYAI_ERR_GRAPH_CYCLE, "layer %d depends on itself (%s)", layer, DependencyTypeName(type));
    }
    if (depends_on < 0 || (layer_limit > 0 && depends_on >= layer_limit)) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "layer %d: dependsOn %d is out of range for a %s dependency%s",
                      layer, depends_on, DependencyTypeName(type), layer_limit > 0 ? " on this model" : "");
    }
  }
  if (output_size == 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "layer %d: outputSize is 0; a layer produces at least one byte per row",
                    layer);
  }
  // Sizes are rounded to the arena's alignment and multiplied by rows and
  // summed; 2^48 bytes per row (256 TiB) is beyond any device.
  if (output_size > (uint64_t{1} << 48)) {
    return SetError(TINYAI_ERR_OVERFLOW, "layer %d: outputSize %llu bytes per row overflows the planner's sizes", layer,
                    static_cast<unsigned long long>(output_size));
  }
  return adds_.Push(AddRecord{layer, depends_on, type, output_size}, "schedule");
}

int32_t LayerGraph::NodeOf(int32_t layer) const {
  size_t lo = 0, hi = by_layer_.size();
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int32_t l = nodes_[static_cast<size_t>(by_layer_[mid])].layer;
    if (l == layer) return by_layer_[mid];
    if (l < layer) lo = mid + 1;
    else hi = mid;
  }
  return -1;
}

TinyAIStatus LayerGraph::Build() {
  const size_t n_adds = adds_.size();
  if (n_adds == 0) return SetError(TINYAI_ERR_MISUSE, "the schedule is empty: add layers before preparing it");
  // Adds sorted by (layer, order added): each run is one node.
  Array<int32_t> sorted;
  TINYAI_RETURN_IF_ERROR(sorted.Allocate(n_adds, "schedule index"));
  for (size_t i = 0; i < n_adds; ++i) sorted[i] = static_cast<int32_t>(i);
  const AddRecord* adds = adds_.data();
  std::sort(sorted.begin(), sorted.end(), [adds](int32_t a, int32_t b) {
    return adds[a].layer != adds[b].layer ? adds[a].layer < adds[b].layer : a < b;
  });
  // Runs, then nodes numbered by their first add.
  size_t runs = 0;
  for (size_t i = 0; i < n_adds; ++i) runs += i == 0 || adds[sorted[i]].layer != adds[sorted[i - 1]].layer;
  Array<int32_t> run_start;  // per run: index into sorted
  TINYAI_RETURN_IF_ERROR(run_start.Allocate(runs + 1, "schedule index"));
  runs = 0;
  for (size_t i = 0; i < n_adds; ++i) {
    if (i == 0 || adds[sorted[i]].layer != adds[sorted[i - 1]].layer) run_start[runs++] = static_cast<int32_t>(i);
  }
  run_start[runs] = static_cast<int32_t>(n_adds);
  Array<int32_t> run_order;  // runs by first add
  TINYAI_RETURN_IF_ERROR(run_order.Allocate(runs, "schedule index"));
  for (size_t r = 0; r < runs; ++r) run_order[r] = static_cast<int32_t>(r);
  std::sort(run_order.begin(), run_order.end(),
            [&](int32_t a, int32_t b) { return sorted[static_cast<size_t>(run_start[a])] < sorted[static_cast<size_t>(run_start[b])]; });

  TINYAI_RETURN_IF_ERROR(nodes_.Allocate(runs, "schedule nodes"));
  TINYAI_RETURN_IF_ERROR(deps_.Allocate(n_adds, "schedule dependencies"));
  TINYAI_RETURN_IF_ERROR(by_layer_.Allocate(runs, "schedule index"));
  int32_t dep_at = 0;
  for (size_t k = 0; k < runs; ++k) {
    const int32_t r = run_order[k];
    LayerNode& node = nodes_[k];
    const AddRecord& first = adds[sorted[static_cast<size_t>(run_start[r])]];
    node.layer = first.layer;
    node.output_size = first.output_size;
    node.first_dep = dep_at;
    node.dep_count = run_start[r + 1] - run_start[r];
    by_layer_[static_cast<size_t>(r)] = static_cast<int32_t>(k);  // runs are in layer order
    for (int32_t i = run_start[r]; i < run_start[r + 1]; ++i) {
      const AddRecord& a = adds[sorted[static_cast<size_t>(i)]];
      if (a.output_size != node.output_size) {
        return SetError(TINYAI_ERR_INVALID_ARGUMENT, "layer %d was added with outputSize %llu and then %llu", a.layer,
                        static_cast<unsigned long long>(node.output_size), static_cast<unsigned long long>(a.output_size));
      }
      deps_[static_cast<size_t>(dep_at)].type = a.type;
      deps_[static_cast<size_t>(dep_at)].producer = a.depends_on;  // a layer for now
      ++dep_at;
    }
  }
  // Producers: layers to nodes.
  for (size_t k = 0; k < runs; ++k) {
    LayerNode& node = nodes_[k];
    for (int32_t i = node.first_dep; i < node.first_dep + node.dep_count; ++i) {
      LayerDep& d = deps_[static_cast<size_t>(i)];
      if (d.producer < 0) continue;
      const int32_t p = NodeOf(d.producer);
      if (p < 0) {
        return SetError(TINYAI_ERR_MISSING_DEPENDENCY,
                        "layer %d depends on layer %d (%s), which was never added to the schedule", node.layer,
                        d.producer, DependencyTypeName(d.type));
      }
      for (int32_t j = node.first_dep; j < i; ++j) {
        if (deps_[static_cast<size_t>(j)].producer == p) {
          return SetError(TINYAI_ERR_INVALID_ARGUMENT, "layer %d depends on layer %d twice", node.layer, d.producer);
        }
      }
      d.producer = p;
      ++nodes_[static_cast<size_t>(p)].consumers;
    }
    for (int32_t j = node.first_dep; j < node.first_dep + node.dep_count; ++j) {
      const LayerDep& d = deps_[static_cast<size_t>(j)];
      for (int32_t i = j + 1; d.producer < 0 && i < node.first_dep + node.dep_count; ++i) {
        if (deps_[static_cast<size_t>(i)].producer < 0) {
          return SetError(TINYAI_ERR_INVALID_ARGUMENT, "layer %d reads the scheduler's input twice (TINYAI_DEP_NONE)",
                          node.layer);
        }
      }
    }
  }
  TINYAI_RETURN_IF_ERROR(Order());
  built_ = true;
  return TINYAI_OK;
}

// Kahn's algorithm; among the layers ready to run, the one added first runs
// first (a binary min-heap of node indices, which are in first-added order).
TinyAIStatus LayerGraph::Order() {
  const size_t n = nodes_.size();
  Array<int32_t> indegree, heap, consumer_start, consumer_list;
  TINYAI_RETURN_IF_ERROR(indegree.Allocate(n, "schedule order"));
  TINYAI_RETURN_IF_ERROR(heap.Allocate(n, "schedule order"));
  TINYAI_RETURN_IF_ERROR(consumer_start.Allocate(n + 1, "schedule order"));
  TINYAI_RETURN_IF_ERROR(consumer_list.Allocate(deps_.size(), "schedule order"));
  TINYAI_RETURN_IF_ERROR(order_.Allocate(n, "schedule order"));
  TINYAI_RETURN_IF_ERROR(position_.Allocate(n, "schedule order"));
  for (size_t k = 0; k < n; ++k) consumer_start[k + 1] = consumer_start[k] + nodes_[k].consumers;
  Array<int32_t> fill;
  TINYAI_RETURN_IF_ERROR(fill.Allocate(n, "schedule order"));
  for (size_t k = 0; k < n; ++k) {
    for (const LayerDep& d : deps(static_cast<int32_t>(k))) {
      if (d.producer < 0) continue;
      ++indegree[k];
      const size_t p = static_cast<size_t>(d.producer);
      consumer_list[static_cast<size_t>(consumer_start[p] + fill[p]++)] = static_cast<int32_t>(k);
    }
  }
  size_t heap_size = 0;
  auto push = [&](int32_t v) {
    size_t i = heap_size++;
    heap[i] = v;
    while (i > 0 && heap[(i - 1) / 2] > heap[i]) {
      std::swap(heap[(i - 1) / 2], heap[i]);
      i = (i - 1) / 2;
    }
  };
  auto pop = [&]() {
    int32_t top = heap[0];
    heap[0] = heap[--heap_size];
    size_t i = 0;
    for (;;) {
      size_t l = 2 * i + 1, r = l + 1, m = i;
      if (l < heap_size && heap[l] < heap[m]) m = l;
      if (r < heap_size && heap[r] < heap[m]) m = r;
      if (m == i) break;
      std::swap(heap[i], heap[m]);
      i = m;
    }
    return top;
  };
  for (size_t k = 0; k < n; ++k) {
    if (indegree[k] == 0) push(static_cast<int32_t>(k));
  }
  size_t done = 0;
  while (heap_size > 0) {
    const int32_t v = pop();
    position_[static_cast<size_t>(v)] = static_cast<int32_t>(done);
    order_[done++] = v;
    for (int32_t i = consumer_start[static_cast<size_t>(v)]; i < consumer_start[static_cast<size_t>(v) + 1]; ++i) {
      const int32_t c = consumer_list[static_cast<size_t>(i)];
      if (--indegree[static_cast<size_t>(c)] == 0) push(c);
    }
  }
  if (done < n) return ReportCycle(indegree);
  return TINYAI_OK;
}

// Every layer Kahn's algorithm left has a producer that was left too, so
// walking producers from one of them must come back to a layer already seen.
TinyAIStatus LayerGraph::ReportCycle(const Array<int32_t>& indegree) {
  const size_t n = nodes_.size();
  Array<int32_t> seen_at;
  TINYAI_RETURN_IF_ERROR(seen_at.Allocate(n, "schedule order"));
  for (int32_t& s : seen_at) s = -1;
  int32_t v = -1;
  for (size_t k = 0; k < n && v < 0; ++k) {
    if (indegree[k] > 0) v = static_cast<int32_t>(k);
  }
  Array<int32_t> path;
  TINYAI_RETURN_IF_ERROR(path.Allocate(n + 1, "schedule order"));
  size_t len = 0;
  while (seen_at[static_cast<size_t>(v)] < 0) {
    seen_at[static_cast<size_t>(v)] = static_cast<int32_t>(len);
    path[len++] = v;
    int32_t next = -1;
    for (const LayerDep& d : deps(v)) {
      if (d.producer >= 0 && indegree[static_cast<size_t>(d.producer)] > 0) {
        next = d.producer;
        break;
      }
    }
    v = next;
  }
  // path[seen_at[v] .. len) is the cycle, each depending on the next.
  char text[256];
  size_t used = 0;
  const size_t start = static_cast<size_t>(seen_at[static_cast<size_t>(v)]);
  for (size_t i = start; i <= len && used + 16 < sizeof text; ++i) {
    const int32_t node = i < len ? path[i] : path[start];
    int w = tinyai::Format(text + used, sizeof text - used, "%s%d", i > start ? " -> " : "", nodes_[static_cast<size_t>(node)].layer);
    if (w > 0) used += static_cast<size_t>(w);
  }
  if (used + 16 >= sizeof text) tinyai::Format(text + used, sizeof text - used, " ...");
  return SetError(TINYAI_ERR_GRAPH_CYCLE,
                  "the schedule's dependencies form a cycle: layer %s (each depends on the next)", text);
}

uint64_t LayerGraph::bytes() const {
  return adds_.capacity() * sizeof(AddRecord) + nodes_.size() * sizeof(LayerNode) + deps_.size() * sizeof(LayerDep) +
         (by_layer_.size() + order_.size() + position_.size()) * sizeof(int32_t);
}

}  // namespace tinyai
