#include "backend/graph/node_link_json.h"

#include <map>
#include <utility>

#include <nlohmann/json.hpp>

namespace looptool {
namespace {

const char* NodeTypeName(GraphNode::Type t) {
  switch (t) {
    case GraphNode::Type::kLoop:
      return "loop";
    case GraphNode::Type::kCompute:
      return "compute";
    case GraphNode::Type::kData:
      return "data";
  }
  return "?";
}

const char* EdgeTypeName(GraphEdge::Type t) {
  switch (t) {
    case GraphEdge::Type::kNest:
      return "nest";
    case GraphEdge::Type::kAccess:
      return "access";
    case GraphEdge::Type::kFlow:
      return "flow";
  }
  return "?";
}

}  // namespace

std::string NodeLinkJson(const ProgramGraph& g) {
  nlohmann::json nodes = nlohmann::json::array();
  for (auto v : boost::make_iterator_range(boost::vertices(g))) {
    const GraphNode& n = g[v];
    nlohmann::json j = {{"id", v}, {"type", NodeTypeName(n.type)}, {"label", n.label}};
    switch (n.type) {
      case GraphNode::Type::kLoop:
        j.update({{"ref", n.ref}, {"var", n.var}, {"size", n.size}, {"tail", n.tail},
                  {"cursor", n.cursor}, {"unroll", n.unroll}, {"vectorize", n.vectorize},
                  {"in_compute", n.in_compute}});
        break;
      case GraphNode::Type::kCompute:
        j.update({{"ref", n.ref}, {"op", n.op}});
        break;
      case GraphNode::Type::kData:
        j["shape"] = n.shape;
        break;
    }
    j["features"] = {static_cast<int>(n.type), n.size,      n.tail,      int{n.cursor},
                     int{n.unroll},            int{n.vectorize}, int{n.in_compute}};
    nodes.push_back(std::move(j));
  }
  nlohmann::json links = nlohmann::json::array();
  std::map<std::pair<size_t, size_t>, int> keys;  // parallel edges get keys 0, 1, ...
  for (auto e : boost::make_iterator_range(boost::edges(g))) {
    const size_t s = boost::source(e, g), t = boost::target(e, g);
    const GraphEdge& edge = g[e];
    nlohmann::json j = {{"source", s}, {"target", t}, {"key", keys[{s, t}]++},
                        {"type", EdgeTypeName(edge.type)}};
    if (edge.type == GraphEdge::Type::kAccess) {
      j.update({{"stride", edge.stride}, {"frequency", edge.frequency}});
    }
    j["features"] = {static_cast<int>(edge.type), edge.stride, edge.frequency};
    links.push_back(std::move(j));
  }
  const nlohmann::json doc = {{"directed", true},
                              {"multigraph", true},
                              {"graph", nlohmann::json::object()},
                              {"nodes", std::move(nodes)},
                              {"links", std::move(links)}};
  return doc.dump();
}

}  // namespace looptool
