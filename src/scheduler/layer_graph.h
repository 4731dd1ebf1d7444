// The schedule as the guide's API builds it: layers and the dependencies
// between them, one tinyaiAddLayerToSchedule() call per dependency.
//
// Add() checks what one call can tell on its own (indices, types, sizes, a
// layer on itself); Build() checks the whole - every producer was added, an
// outputSize stayed the same, no dependency twice, no cycle - and orders the
// layers so every producer runs before its consumers, keeping the order they
// were added in wherever the dependencies allow (so "add layers in execution
// order", as the guide says, is the order they run in; a dependency on a
// layer added later is satisfied by running that layer first).
#ifndef TINYAI_SCHEDULER_LAYER_GRAPH_H_
#define TINYAI_SCHEDULER_LAYER_GRAPH_H_

#include <cstdint>

#include "common/array.h"
#include "common/span.h"
#include "common/vector.h"
#include "tinyai/utils/forward_scheduler.h"

namespace tinyai {

struct LayerDep {
  int32_t producer = -1;  // node index; -1 = the scheduler's input
  TinyAIDependencyType type = TINYAI_DEP_NONE;
};

struct LayerNode {
  int32_t layer = -1;
  uint64_t output_size = 0;  // bytes per row
  int32_t first_dep = 0;     // deps()[first_dep .. first_dep + dep_count)
  int32_t dep_count = 0;
  int32_t consumers = 0;     // nodes that read its output
};

class LayerGraph {
 public:
  LayerGraph() = default;
  LayerGraph(const LayerGraph&) = delete;
  LayerGraph& operator=(const LayerGraph&) = delete;

  // Layers must lie in [0, layer_limit) when layer_limit > 0.
  TinyAIStatus Add(int32_t layer, int32_t depends_on, TinyAIDependencyType type, uint64_t output_size,
                   int32_t layer_limit);
  TinyAIStatus Build();
  bool built() const { return built_; }
  size_t added() const { return adds_.size(); }

  int32_t node_count() const { return static_cast<int32_t>(nodes_.size()); }
  const LayerNode& node(int32_t n) const { return nodes_[static_cast<size_t>(n)]; }
  Span<const LayerDep> deps(int32_t n) const {
    const LayerNode& x = nodes_[static_cast<size_t>(n)];
    return Span<const LayerDep>(deps_.data() + x.first_dep, static_cast<size_t>(x.dep_count));
  }
  // Node indices in execution order.
  Span<const int32_t> order() const { return Span<const int32_t>(order_.data(), order_.size()); }
  // Position of a node in order().
  int32_t position(int32_t n) const { return position_[static_cast<size_t>(n)]; }
  // The node of a layer, or -1.
  int32_t NodeOf(int32_t layer) const;

  uint64_t bytes() const;

 private:
  struct AddRecord {
    int32_t layer;
    int32_t depends_on;  // layer index or -1
    TinyAIDependencyType type;
    uint64_t output_size;
  };
  TinyAIStatus Order();
  TinyAIStatus ReportCycle(const Array<int32_t>& indegree);

  Vector<AddRecord> adds_;
  Array<LayerNode> nodes_;   // in first-added order
  Array<LayerDep> deps_;
  Array<int32_t> by_layer_;  // node indices sorted by layer (NodeOf)
  Array<int32_t> order_;
  Array<int32_t> position_;
  bool built_ = false;
};

const char* DependencyTypeName(TinyAIDependencyType type);

}  // namespace tinyai

#endif  // TINYAI_SCHEDULER_LAYER_GRAPH_H_
