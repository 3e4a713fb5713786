// ProgramGraph: the LoopTune paper's graph of a LoopTree, kept in Boost.Graph. Loop nodes (one
// per loop of the tree), compute nodes (one per leaf) and data nodes (one per tensor, and one per
// statement for its accumulator); nesting edges from each loop to what it encloses, access edges
// from each loop to the data its leaves read with a non-zero stride along it, and data-flow
// edges from data into the operations that read it and from operations to the data they write.
#ifndef LOOPTOOL_BACKEND_GRAPH_PROGRAM_GRAPH_H_
#define LOOPTOOL_BACKEND_GRAPH_PROGRAM_GRAPH_H_

#include <cstdint>
#include <string>

#include <boost/graph/adjacency_list.hpp>

#include "backend/schedule/loop_tree.h"

namespace looptool {

struct GraphNode {
  enum class Type { kLoop = 0, kCompute = 1, kData = 2 };
  Type type = Type::kLoop;
  std::string label;  // loop header ("n' in 8"), operation text, or tensor name
  // Loops.
  int ref = -1;  // TreeRef of loops and compute nodes
  std::string var;
  int64_t size = 0, tail = 0;
  bool cursor = false, unroll = false, vectorize = false, in_compute = false;
  // Compute nodes: "multiply", "add", "max", "copy", "write".
  std::string op;
  // Data nodes.
  std::vector<int64_t> shape;
};

struct GraphEdge {
  enum class Type { kNest = 0, kAccess = 1, kFlow = 2 };
  Type type = Type::kNest;
  int64_t stride = 0;     // access edges: elements per iteration of the loop
  int64_t frequency = 0;  // access edges: iterations of the loop per run
};

using ProgramGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS,
                                           GraphNode, GraphEdge>;

// `ir_graph_networkx`: loops, compute and data nodes with all three edge types.
ProgramGraph BuildProgramGraph(const LoopTree& tree);

// `ir_tree_networkx`: the loop tree alone, loop and compute nodes with nesting edges.
ProgramGraph BuildTreeGraph(const LoopTree& tree);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_GRAPH_PROGRAM_GRAPH_H_
