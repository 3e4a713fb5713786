// NodeLinkJson: a ProgramGraph as networkx node-link JSON, the payload CompilerGym's clients turn
// into an nx.MultiDiGraph (format "json://networkx/MultiDiGraph").
#ifndef LOOPTOOL_BACKEND_GRAPH_NODE_LINK_JSON_H_
#define LOOPTOOL_BACKEND_GRAPH_NODE_LINK_JSON_H_

#include <string>

#include "backend/graph/program_graph.h"

namespace looptool {

// {"directed": true, "multigraph": true, "graph": {}, "nodes": [{"id": 0, "type": "loop",
// "features": [...], ...}], "links": [{"source": 0, "target": 1, "key": 0, "type": "nest"}]}.
// Every node also carries a numeric "features" list for graph networks:
// [type, size, tail, cursor, unroll, vectorize, is compute loop]; every link a numeric
// "features" list [type, stride, frequency].
std::string NodeLinkJson(const ProgramGraph& graph);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_GRAPH_NODE_LINK_JSON_H_
