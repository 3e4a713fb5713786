#include "backend/ir/program.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace looptool {
namespace {

template <typename... Args>
absl::Status Invalid(const Args&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(parts...));
}

// Saturating multiply for size checks: products of caps cannot overflow int64.
int64_t SatMul(int64_t a, int64_t b) {
  if (a != 0 && b > (int64_t{1} << 62) / a) return int64_t{1} << 62;
  return a * b;
}

int64_t MaxValue(const AffineIndex& idx, const std::vector<IndexVar>& vars) {
  int64_t v = idx.offset;
  for (const auto& t : idx.terms) v += t.coeff * (vars[t.var].extent - 1);
  return v;
}

// The box an output access writes: per dimension [offset, offset + extent).
struct Box {
  std::vector<int64_t> lo, hi;
};

Box OutputBox(const Access& out, const std::vector<IndexVar>& vars) {
  Box b;
  for (const auto& idx : out.index) {
    b.lo.push_back(idx.offset);
    b.hi.push_back(idx.offset + vars[idx.terms[0].var].extent);
  }
  return b;
}

bool Overlap(const Box& a, const Box& b) {
  for (size_t d = 0; d < a.lo.size(); ++d) {
    if (a.hi[d] <= b.lo[d] || b.hi[d] <= a.lo[d]) return false;
  }
  return true;
}

}  // namespace

int64_t AffineIndex::Coefficient(int var) const {
  for (const auto& t : terms) {
    if (t.var == var) return t.coeff;
  }
  return 0;
}

absl::StatusOr<Program> Program::Create(std::vector<IndexVar> vars,
                                        std::vector<std::string> tensor_names,
                                        std::vector<Statement> statements,
                                        const Limits& limits) {
  Program p;
  if (statements.empty()) return Invalid("the program has no statement");
  if (static_cast<int>(statements.size()) > limits.max_statements) {
    return Invalid("the program has ", statements.size(), " statements; the limit is ",
                   limits.max_statements);
  }
  if (static_cast<int>(vars.size()) > limits.max_vars) {
    return Invalid("the program has ", vars.size(), " index variables; the limit is ",
                   limits.max_vars);
  }
  for (const auto& v : vars) {
    if (v.extent < 1) return Invalid("size of '", v.name, "' must be at least 1, not ", v.extent);
    if (v.extent > limits.max_extent) {
      return Invalid("size of '", v.name, "' is ", v.extent, "; the limit is ", limits.max_extent);
    }
    if (std::find(tensor_names.begin(), tensor_names.end(), v.name) != tensor_names.end()) {
      return Invalid("'", v.name, "' is used both as a tensor and as an index variable");
    }
  }

  // Per-statement rules.
  std::vector<int> used(vars.size(), 0);
  std::vector<int> rank(tensor_names.size(), -1);
  std::vector<int> written_by(tensor_names.size(), -1), read_by(tensor_names.size(), -1);
  for (size_t s = 0; s < statements.size(); ++s) {
    const Statement& st = statements[s];
    const std::string where = absl::StrCat("statement ", s + 1);
    if (st.output.index.empty() && [&] {
          for (const auto& in : st.inputs) {
            for (const auto& idx : in.index) {
              if (!idx.terms.empty()) return false;
            }
          }
          return true;
        }()) {
      return Invalid(where, " uses no index variable; it needs at least one loop");
    }
    const size_t want_inputs = st.combiner == Combiner::kIdentity ? 1 : 2;
    if (st.inputs.size() != want_inputs) {
      return Invalid(where, " has ", st.inputs.size(), " operands; expected ", want_inputs);
    }
    std::vector<const Access*> accesses = {&st.output};
    for (const auto& in : st.inputs) accesses.push_back(&in);
    for (size_t a = 0; a < accesses.size(); ++a) {
      const Access& acc = *accesses[a];
      const std::string& tname = tensor_names[acc.tensor];
      const int r = static_cast<int>(acc.index.size());
      if (r > limits.max_tensor_rank) {
        return Invalid("tensor '", tname, "' has ", r, " dimensions; the limit is ",
                       limits.max_tensor_rank);
      }
      if (rank[acc.tensor] >= 0 && rank[acc.tensor] != r) {
        return Invalid("tensor '", tname, "' is used with ", rank[acc.tensor], " indices and with ",
                       r);
      }
      rank[acc.tensor] = r;
      for (const auto& idx : acc.index) {
        std::set<int> seen;
        for (const auto& t : idx.terms) {
          if (t.coeff < 1) return Invalid("coefficients in '", tname, "' must be positive");
          if (t.coeff > limits.max_extent) {
            return Invalid("coefficient ", t.coeff, " in '", tname, "' is over the limit of ",
                           limits.max_extent);
          }
          if (!seen.insert(t.var).second) {
            return Invalid("variable '", vars[t.var].name, "' appears twice in one index of '",
                           tname, "'; write its coefficient once");
          }
          ++used[t.var];
        }
        if (idx.offset < 0) return Invalid("index offsets in '", tname, "' must not be negative");
        if (idx.offset > limits.max_extent) {
          return Invalid("index offset ", idx.offset, " in '", tname, "' is over the limit of ",
                         limits.max_extent);
        }
      }
      if (a == 0) {
        if (read_by[acc.tensor] >= 0) {
          return Invalid("tensor '", tname, "' is written by statement ", s + 1,
                         " and read by statement ", read_by[acc.tensor] + 1,
                         "; a program's outputs cannot be its inputs");
        }
        written_by[acc.tensor] = static_cast<int>(s);
      } else {
        if (written_by[acc.tensor] >= 0) {
          return Invalid("tensor '", tname, "' is read by statement ", s + 1,
                         " and written by statement ", written_by[acc.tensor] + 1,
                         "; a program's outputs cannot be its inputs");
        }
        read_by[acc.tensor] = static_cast<int>(s);
      }
    }
    std::set<int> out_vars;
    for (size_t d = 0; d < st.output.index.size(); ++d) {
      const AffineIndex& idx = st.output.index[d];
      if (idx.terms.size() != 1 || idx.terms[0].coeff != 1) {
        return Invalid("output index ", d + 1, " of '", tensor_names[st.output.tensor], "' in ",
                       where, " must be one variable, optionally plus a constant");
      }
      if (!out_vars.insert(idx.terms[0].var).second) {
        return Invalid("output variable '", vars[idx.terms[0].var].name, "' appears twice in '",
                       tensor_names[st.output.tensor], "'");
      }
    }
    std::set<int> reduction;
    for (const auto& in : st.inputs) {
      for (const auto& idx : in.index) {
        for (const auto& t : idx.terms) {
          if (!out_vars.count(t.var)) reduction.insert(t.var);
        }
      }
    }
    if (st.reduction == Reduction::kAssign && !reduction.empty()) {
      return Invalid(where, " assigns with '=' but '", vars[*reduction.begin()].name,
                     "' appears only on the right-hand side; use '+=' or 'max=' to reduce over it");
    }
  }
  for (size_t v = 0; v < vars.size(); ++v) {
    if (!used[v]) return Invalid("size given for '", vars[v].name, "', which no statement uses");
  }
  for (size_t t = 0; t < tensor_names.size(); ++t) {
    if (rank[t] < 0) return Invalid("tensor '", tensor_names[t], "' is never used");
  }

  // Shapes: one past the largest index of each dimension.
  p.tensors_.resize(tensor_names.size());
  for (size_t t = 0; t < tensor_names.size(); ++t) {
    p.tensors_[t].name = tensor_names[t];
    p.tensors_[t].shape.assign(rank[t], 1);
    p.tensors_[t].is_output = written_by[t] >= 0;
  }
  for (const auto& st : statements) {
    std::vector<const Access*> accesses = {&st.output};
    for (const auto& in : st.inputs) accesses.push_back(&in);
    for (const Access* acc : accesses) {
      auto& shape = p.tensors_[acc->tensor].shape;
      for (size_t d = 0; d < acc->index.size(); ++d) {
        shape[d] = std::max(shape[d], MaxValue(acc->index[d], vars) + 1);
      }
    }
  }
  int64_t total = 0;
  for (const auto& t : p.tensors_) {
    int64_t n = 1;
    for (int64_t e : t.shape) n = SatMul(n, e);
    if (n > limits.max_tensor_elements) {
      return Invalid("tensor '", t.name, "' has ", n, " elements; the limit is ",
                     limits.max_tensor_elements);
    }
    total += n;
  }
  if (total > limits.max_total_elements) {
    return Invalid("the program's tensors have ", total, " elements together; the limit is ",
                   limits.max_total_elements);
  }

  // Outputs: the boxes the statements write must tile each output exactly.
  for (size_t t = 0; t < tensor_names.size(); ++t) {
    if (written_by[t] < 0) continue;
    std::vector<std::pair<int, Box>> boxes;
    int64_t covered = 0;
    for (size_t s = 0; s < statements.size(); ++s) {
      if (statements[s].output.tensor != static_cast<int>(t)) continue;
      Box b = OutputBox(statements[s].output, vars);
      for (const auto& [other, ob] : boxes) {
        if (Overlap(b, ob)) {
          return Invalid("statements ", other + 1, " and ", s + 1, " both write elements of '",
                         tensor_names[t], "'");
        }
      }
      int64_t vol = 1;
      for (size_t d = 0; d < b.lo.size(); ++d) vol *= b.hi[d] - b.lo[d];
      covered += vol;
      boxes.emplace_back(static_cast<int>(s), std::move(b));
    }
    int64_t n = 1;
    for (int64_t e : p.tensors_[t].shape) n *= e;
    if (covered != n) {
      return Invalid("the statements writing '", tensor_names[t], "' leave ", n - covered, " of its ",
                     n, " elements unwritten");
    }
  }

  p.vars_ = std::move(vars);
  p.statements_ = std::move(statements);
  for (int s = 0; s < p.num_statements(); ++s) {
    const Statement& st = p.statements_[s];
    std::vector<int> order;
    auto add = [&](int v) {
      if (std::find(order.begin(), order.end(), v) == order.end()) order.push_back(v);
    };
    std::set<int> input_vars;
    for (const auto& in : st.inputs) {
      for (const auto& idx : in.index) {
        for (const auto& t : idx.terms) input_vars.insert(t.var);
      }
    }
    for (int v : p.OutputVars(s)) {
      if (!input_vars.count(v)) add(v);
    }
    for (const auto& in : st.inputs) {
      for (const auto& idx : in.index) {
        for (const auto& t : idx.terms) add(t.var);
      }
    }
    p.loop_vars_.push_back(std::move(order));
  }
  if (p.Flops() > limits.max_flops) {
    return Invalid("the program needs ", p.Flops(), " operations per run; the limit is ",
                   limits.max_flops);
  }
  return p;
}

std::vector<int> Program::OutputVars(int stmt) const {
  std::vector<int> out;
  for (const auto& idx : statements_[stmt].output.index) out.push_back(idx.terms[0].var);
  return out;
}

bool Program::IsReductionVar(int stmt, int var) const {
  for (const auto& idx : statements_[stmt].output.index) {
    if (idx.terms[0].var == var) return false;
  }
  const auto& lv = loop_vars_[stmt];
  return std::find(lv.begin(), lv.end(), var) != lv.end();
}

int64_t Program::ElementStride(const Access& access, int var) const {
  const auto& shape = tensors_[access.tensor].shape;
  int64_t stride = 0, dim_stride = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    stride += access.index[d].Coefficient(var) * dim_stride;
    dim_stride *= shape[d];
  }
  return stride;
}

int64_t Program::NumElements(int tensor) const {
  int64_t n = 1;
  for (int64_t e : tensors_[tensor].shape) n *= e;
  return n;
}

std::vector<int> Program::InputTensors() const {
  std::vector<int> out;
  for (const auto& st : statements_) {
    for (const auto& in : st.inputs) {
      if (std::find(out.begin(), out.end(), in.tensor) == out.end()) out.push_back(in.tensor);
    }
  }
  return out;
}

std::vector<int> Program::OutputTensors() const {
  std::vector<int> out;
  for (const auto& st : statements_) {
    if (std::find(out.begin(), out.end(), st.output.tensor) == out.end()) {
      out.push_back(st.output.tensor);
    }
  }
  return out;
}

int64_t Program::IterationVolume(int stmt) const {
  int64_t n = 1;
  for (int v : loop_vars_[stmt]) n = SatMul(n, vars_[v].extent);
  return n;
}

int64_t Program::StatementFlops(int stmt) const {
  const Statement& st = statements_[stmt];
  int64_t per_point = (st.combiner != Combiner::kIdentity ? 1 : 0) +
                      (st.reduction != Reduction::kAssign ? 1 : 0);
  if (per_point == 0) per_point = 1;  // a copy: one per element moved
  int64_t flops = SatMul(IterationVolume(stmt), per_point);
  if (st.post_op != PostOp::kNone) {
    int64_t out = 1;
    for (int v : OutputVars(stmt)) out *= vars_[v].extent;
    flops += out;
  }
  return flops;
}

int64_t Program::Flops() const {
  int64_t f = 0;
  for (int s = 0; s < num_statements(); ++s) f += StatementFlops(s);
  return f;
}

}  // namespace looptool
