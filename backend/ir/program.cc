#include "backend/ir/program.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "backend/ir/strides.h"
#include "util/status_macros.h"

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

// ---- the rules of the language, one function per rule, in the order Create applies them ----

// What the per-statement rules record for the program-wide rules and the shapes after them.
struct Usage {
  Usage(size_t num_vars, size_t num_tensors)
      : var_uses(num_vars, 0),
        rank(num_tensors, -1),
        written_by(num_tensors, -1),
        read_by(num_tensors, -1) {}
  std::vector<int> var_uses;    // per variable: index terms naming it
  std::vector<int> rank;        // per tensor: its number of indices, -1 while unused
  std::vector<int> written_by;  // per tensor: the last statement writing it so far, or -1
  std::vector<int> read_by;     // per tensor: the last statement reading it so far, or -1
};

// The statement's accesses: the output first, then its operands.
std::vector<const Access*> Accesses(const Statement& st) {
  std::vector<const Access*> accesses = {&st.output};
  for (const auto& in : st.inputs) accesses.push_back(&in);
  return accesses;
}

// At least one statement, and no more statements or index variables than the limits allow.
absl::Status CheckProgramSize(const std::vector<IndexVar>& vars,
                              const std::vector<Statement>& statements, const Limits& limits) {
  if (statements.empty()) return Invalid("the program has no statement");
  if (static_cast<int>(statements.size()) > limits.max_statements) {
    return Invalid("the program has ", statements.size(), " statements; the limit is ",
                   limits.max_statements);
  }
  if (static_cast<int>(vars.size()) > limits.max_vars) {
    return Invalid("the program has ", vars.size(), " index variables; the limit is ",
                   limits.max_vars);
  }
  return absl::OkStatus();
}

// Every extent is in [1, max_extent], and no variable shares its name with a tensor.
absl::Status CheckVars(const std::vector<IndexVar>& vars,
                       const std::vector<std::string>& tensor_names, const Limits& limits) {
  for (const auto& v : vars) {
    if (v.extent < 1) return Invalid("size of '", v.name, "' must be at least 1, not ", v.extent);
    if (v.extent > limits.max_extent) {
      return Invalid("size of '", v.name, "' is ", v.extent, "; the limit is ", limits.max_extent);
    }
    if (std::find(tensor_names.begin(), tensor_names.end(), v.name) != tensor_names.end()) {
      return Invalid("'", v.name, "' is used both as a tensor and as an index variable");
    }
  }
  return absl::OkStatus();
}

// A statement with a scalar output must read through some index variable: it needs a loop.
absl::Status CheckStatementHasLoop(const Statement& st, const std::string& where) {
  if (!st.output.index.empty()) return absl::OkStatus();
  for (const auto& in : st.inputs) {
    for (const auto& idx : in.index) {
      if (!idx.terms.empty()) return absl::OkStatus();
    }
  }
  return Invalid(where, " uses no index variable; it needs at least one loop");
}

// One operand for a copy, two for `*` and `+`.
absl::Status CheckOperandCount(const Statement& st, const std::string& where) {
  const size_t want_inputs = st.combiner == Combiner::kIdentity ? 1 : 2;
  if (st.inputs.size() != want_inputs) {
    return Invalid(where, " has ", st.inputs.size(), " operands; expected ", want_inputs);
  }
  return absl::OkStatus();
}

// A tensor has at most max_tensor_rank dimensions and the same number of indices everywhere.
absl::Status CheckTensorRank(const Access& acc, const std::string& tname, const Limits& limits,
                             Usage& usage) {
  const int r = static_cast<int>(acc.index.size());
  if (r > limits.max_tensor_rank) {
    return Invalid("tensor '", tname, "' has ", r, " dimensions; the limit is ",
                   limits.max_tensor_rank);
  }
  if (usage.rank[acc.tensor] >= 0 && usage.rank[acc.tensor] != r) {
    return Invalid("tensor '", tname, "' is used with ", usage.rank[acc.tensor],
                   " indices and with ", r);
  }
  usage.rank[acc.tensor] = r;
  return absl::OkStatus();
}

// Coefficients in [1, max_extent], each variable once per index, offsets in [0, max_extent].
absl::Status CheckCoefficients(const Access& acc, const std::string& tname,
                               const std::vector<IndexVar>& vars, const Limits& limits,
                               Usage& usage) {
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
      ++usage.var_uses[t.var];
    }
    if (idx.offset < 0) return Invalid("index offsets in '", tname, "' must not be negative");
    if (idx.offset > limits.max_extent) {
      return Invalid("index offset ", idx.offset, " in '", tname, "' is over the limit of ",
                     limits.max_extent);
    }
  }
  return absl::OkStatus();
}

// No tensor is both written (by statement s when `is_output`) and read.
absl::Status CheckOutputsAreNotInputs(const Access& acc, bool is_output, size_t s,
                                      const std::string& tname, Usage& usage) {
  if (is_output) {
    if (usage.read_by[acc.tensor] >= 0) {
      return Invalid("tensor '", tname, "' is written by statement ", s + 1,
                     " and read by statement ", usage.read_by[acc.tensor] + 1,
                     "; a program's outputs cannot be its inputs");
    }
    usage.written_by[acc.tensor] = static_cast<int>(s);
  } else {
    if (usage.written_by[acc.tensor] >= 0) {
      return Invalid("tensor '", tname, "' is read by statement ", s + 1,
                     " and written by statement ", usage.written_by[acc.tensor] + 1,
                     "; a program's outputs cannot be its inputs");
    }
    usage.read_by[acc.tensor] = static_cast<int>(s);
  }
  return absl::OkStatus();
}

// Each output index is one distinct variable with coefficient 1, plus an optional constant.
absl::Status CheckOutputIndex(const Statement& st, const std::string& where,
                              const std::vector<IndexVar>& vars,
                              const std::vector<std::string>& tensor_names) {
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
  return absl::OkStatus();
}

// `=` reduces over nothing: every variable of the operands indexes the output.
// REQUIRES: CheckOutputIndex passed.
absl::Status CheckAssignDoesNotReduce(const Statement& st, const std::string& where,
                                      const std::vector<IndexVar>& vars) {
  if (st.reduction != Reduction::kAssign) return absl::OkStatus();
  std::set<int> out_vars;
  for (const auto& idx : st.output.index) out_vars.insert(idx.terms[0].var);
  std::set<int> reduction;
  for (const auto& in : st.inputs) {
    for (const auto& idx : in.index) {
      for (const auto& t : idx.terms) {
        if (!out_vars.count(t.var)) reduction.insert(t.var);
      }
    }
  }
  if (!reduction.empty()) {
    return Invalid(where, " assigns with '=' but '", vars[*reduction.begin()].name,
                   "' appears only on the right-hand side; use '+=' or 'max=' to reduce over it");
  }
  return absl::OkStatus();
}

// Statement s (0-based) against every per-statement rule above, recording what it uses.
absl::Status CheckStatement(const Statement& st, size_t s, const std::vector<IndexVar>& vars,
                            const std::vector<std::string>& tensor_names, const Limits& limits,
                            Usage& usage) {
  const std::string where = absl::StrCat("statement ", s + 1);
  RETURN_IF_ERROR(CheckStatementHasLoop(st, where));
  RETURN_IF_ERROR(CheckOperandCount(st, where));
  const std::vector<const Access*> accesses = Accesses(st);
  for (size_t a = 0; a < accesses.size(); ++a) {
    const Access& acc = *accesses[a];
    const std::string& tname = tensor_names[acc.tensor];
    RETURN_IF_ERROR(CheckTensorRank(acc, tname, limits, usage));
    RETURN_IF_ERROR(CheckCoefficients(acc, tname, vars, limits, usage));
    RETURN_IF_ERROR(CheckOutputsAreNotInputs(acc, /*is_output=*/a == 0, s, tname, usage));
  }
  RETURN_IF_ERROR(CheckOutputIndex(st, where, vars, tensor_names));
  return CheckAssignDoesNotReduce(st, where, vars);
}

// Every index variable given a size is used by some statement.
absl::Status CheckVarsUsed(const std::vector<IndexVar>& vars, const Usage& usage) {
  for (size_t v = 0; v < vars.size(); ++v) {
    if (!usage.var_uses[v]) {
      return Invalid("size given for '", vars[v].name, "', which no statement uses");
    }
  }
  return absl::OkStatus();
}

// Every tensor named is accessed by some statement.
absl::Status CheckTensorsUsed(const std::vector<std::string>& tensor_names, const Usage& usage) {
  for (size_t t = 0; t < tensor_names.size(); ++t) {
    if (usage.rank[t] < 0) return Invalid("tensor '", tensor_names[t], "' is never used");
  }
  return absl::OkStatus();
}

// The tensors: names, whether some statement writes them, and shapes one past the largest
// index each dimension is accessed with. REQUIRES: the rules above passed.
std::vector<Tensor> DeriveTensors(const std::vector<std::string>& tensor_names,
                                  const std::vector<Statement>& statements,
                                  const std::vector<IndexVar>& vars, const Usage& usage) {
  std::vector<Tensor> tensors(tensor_names.size());
  for (size_t t = 0; t < tensor_names.size(); ++t) {
    tensors[t].name = tensor_names[t];
    tensors[t].shape.assign(usage.rank[t], 1);
    tensors[t].is_output = usage.written_by[t] >= 0;
  }
  for (const auto& st : statements) {
    for (const Access* acc : Accesses(st)) {
      auto& shape = tensors[acc->tensor].shape;
      for (size_t d = 0; d < acc->index.size(); ++d) {
        shape[d] = std::max(shape[d], MaxValue(acc->index[d], vars) + 1);
      }
    }
  }
  return tensors;
}

// Each tensor has at most max_tensor_elements elements, all of them max_total_elements.
absl::Status CheckTensorSizes(const std::vector<Tensor>& tensors, const Limits& limits) {
  int64_t total = 0;
  for (const auto& t : tensors) {
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
  return absl::OkStatus();
}

// The boxes the statements write tile each output exactly: no overlap, no element left out.
absl::Status CheckOutputsTiled(const std::vector<Tensor>& tensors,
                               const std::vector<Statement>& statements,
                               const std::vector<IndexVar>& vars) {
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (!tensors[t].is_output) continue;
    std::vector<std::pair<int, Box>> boxes;
    int64_t covered = 0;
    for (size_t s = 0; s < statements.size(); ++s) {
      if (statements[s].output.tensor != static_cast<int>(t)) continue;
      Box b = OutputBox(statements[s].output, vars);
      for (const auto& [other, ob] : boxes) {
        if (Overlap(b, ob)) {
          return Invalid("statements ", other + 1, " and ", s + 1, " both write elements of '",
                         tensors[t].name, "'");
        }
      }
      int64_t vol = 1;
      for (size_t d = 0; d < b.lo.size(); ++d) vol *= b.hi[d] - b.lo[d];
      covered += vol;
      boxes.emplace_back(static_cast<int>(s), std::move(b));
    }
    int64_t n = 1;
    for (int64_t e : tensors[t].shape) n *= e;
    if (covered != n) {
      return Invalid("the statements writing '", tensors[t].name, "' leave ", n - covered,
                     " of its ", n, " elements unwritten");
    }
  }
  return absl::OkStatus();
}

// The statement's initial loop order (see Program::LoopVars): output variables no operand uses,
// then every variable in order of first appearance in the operands.
std::vector<int> DeriveLoopVars(const Statement& st) {
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
  for (const auto& idx : st.output.index) {
    if (!input_vars.count(idx.terms[0].var)) add(idx.terms[0].var);
  }
  for (const auto& in : st.inputs) {
    for (const auto& idx : in.index) {
      for (const auto& t : idx.terms) add(t.var);
    }
  }
  return order;
}

// A run takes at most max_flops operations. REQUIRES: `p` complete but for this check.
absl::Status CheckFlops(const Program& p, const Limits& limits) {
  if (p.Flops() > limits.max_flops) {
    return Invalid("the program needs ", p.Flops(), " operations per run; the limit is ",
                   limits.max_flops);
  }
  return absl::OkStatus();
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
  RETURN_IF_ERROR(CheckProgramSize(vars, statements, limits));
  RETURN_IF_ERROR(CheckVars(vars, tensor_names, limits));
  Usage usage(vars.size(), tensor_names.size());
  for (size_t s = 0; s < statements.size(); ++s) {
    RETURN_IF_ERROR(CheckStatement(statements[s], s, vars, tensor_names, limits, usage));
  }
  RETURN_IF_ERROR(CheckVarsUsed(vars, usage));
  RETURN_IF_ERROR(CheckTensorsUsed(tensor_names, usage));

  Program p;
  p.tensors_ = DeriveTensors(tensor_names, statements, vars, usage);
  RETURN_IF_ERROR(CheckTensorSizes(p.tensors_, limits));
  RETURN_IF_ERROR(CheckOutputsTiled(p.tensors_, statements, vars));
  p.vars_ = std::move(vars);
  p.statements_ = std::move(statements);
  for (const Statement& st : p.statements_) p.loop_vars_.push_back(DeriveLoopVars(st));
  RETURN_IF_ERROR(CheckFlops(p, limits));
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
  const std::vector<int64_t> dim_stride = RowMajorStrides(tensors_[access.tensor].shape);
  int64_t stride = 0;
  for (size_t d = 0; d < dim_stride.size(); ++d) {
    stride += access.index[d].Coefficient(var) * dim_stride[d];
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
