// Program: a tensor computation in LoopTool's loop-nest language. Index variables with extents,
// tensors with row-major shapes, and statements; each statement is one loop nest that maps or
// reduces one or two input accesses into a box of an output tensor. Create() is the only way to
// make one and checks every rule of the language, so a Program in hand is always well formed.
#ifndef LOOPTOOL_BACKEND_IR_PROGRAM_H_
#define LOOPTOOL_BACKEND_IR_PROGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/ir/limits.h"

namespace looptool {

struct IndexVar {
  std::string name;
  int64_t extent = 1;  // the variable runs over [0, extent)
  bool operator==(const IndexVar& o) const { return name == o.name && extent == o.extent; }
};

// sum(coeff * var) + offset, coefficients >= 1 and each variable at most once.
struct AffineIndex {
  struct Term {
    int var;
    int64_t coeff;
    bool operator==(const Term& o) const { return var == o.var && coeff == o.coeff; }
  };
  std::vector<Term> terms;
  int64_t offset = 0;

  int64_t Coefficient(int var) const;  // 0 when `var` does not occur
  bool operator==(const AffineIndex& o) const { return terms == o.terms && offset == o.offset; }
};

struct Access {
  int tensor = 0;
  std::vector<AffineIndex> index;  // one per dimension of the tensor
  bool operator==(const Access& o) const { return tensor == o.tensor && index == o.index; }
};

// How the statement's values combine into the output element: `=`, `+=`, `max=`.
enum class Reduction { kAssign, kSum, kMax };
// How the right-hand side combines its operands: `X`, `X * Y`, `X + Y`.
enum class Combiner { kIdentity, kMultiply, kAdd };
// An elementwise function applied to each output element once it is final: `-> relu`.
enum class PostOp { kNone, kRelu };

struct Statement {
  Access output;
  Reduction reduction = Reduction::kAssign;
  Combiner combiner = Combiner::kIdentity;
  std::vector<Access> inputs;  // 1 operand for kIdentity, else 2
  PostOp post_op = PostOp::kNone;
  bool operator==(const Statement& o) const {
    return output == o.output && reduction == o.reduction && combiner == o.combiner &&
           inputs == o.inputs && post_op == o.post_op;
  }
};

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;  // row-major; derived from the accesses
  bool is_output = false;
  bool operator==(const Tensor& o) const {
    return name == o.name && shape == o.shape && is_output == o.is_output;
  }
};

class Program {
 public:
  // Checks the rules of the language and derives tensor shapes (one past the largest index each
  // dimension is accessed with). Tensor names are given in the order their ids are used.
  // Returns INVALID_ARGUMENT with a sentence naming the offending variable, tensor or statement
  // (1-based), or when a cap of `limits` is exceeded.
  static absl::StatusOr<Program> Create(std::vector<IndexVar> vars,
                                        std::vector<std::string> tensor_names,
                                        std::vector<Statement> statements,
                                        const Limits& limits);

  const std::vector<IndexVar>& vars() const { return vars_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }
  const std::vector<Statement>& statements() const { return statements_; }
  const IndexVar& var(int v) const { return vars_[v]; }
  const Tensor& tensor(int t) const { return tensors_[t]; }
  const Statement& statement(int s) const { return statements_[s]; }
  int num_statements() const { return static_cast<int>(statements_.size()); }

  // The statement's variables in the order of its initial, untiled loop nest: output variables
  // that no input uses first (broadcast dimensions, in output order), then every variable in
  // order of first appearance reading the inputs left to right. For `C[m,n] += A[m,k] * B[k,n]`
  // that is m, k, n: the order loop_tool builds for `(A.to(m,k) * B.to(k,n)).sum(k)`.
  const std::vector<int>& LoopVars(int stmt) const { return loop_vars_[stmt]; }
  // The output's index variables, in output-dimension order.
  std::vector<int> OutputVars(int stmt) const;
  bool IsReductionVar(int stmt, int var) const;

  // Elements of the tensor's row-major storage between consecutive values of `var` in `access`.
  int64_t ElementStride(const Access& access, int var) const;
  int64_t NumElements(int tensor) const;
  // Tensors read by some statement, in order of first appearance (their reads are %0, %1, ...).
  std::vector<int> InputTensors() const;
  std::vector<int> OutputTensors() const;

  // Arithmetic operations of one run: per iteration point, one per binary combiner and one per
  // reduction (matmul: 2*M*N*K); a pure copy counts one per element moved; relu adds one per
  // output element.
  int64_t Flops() const;
  int64_t StatementFlops(int stmt) const;
  // Iteration points of the statement's loop nest (product of its variables' extents).
  int64_t IterationVolume(int stmt) const;

  bool operator==(const Program& o) const {
    return vars_ == o.vars_ && tensors_ == o.tensors_ && statements_ == o.statements_;
  }

 private:
  Program() = default;

  std::vector<IndexVar> vars_;
  std::vector<Tensor> tensors_;
  std::vector<Statement> statements_;
  std::vector<std::vector<int>> loop_vars_;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_IR_PROGRAM_H_
