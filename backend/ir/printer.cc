#include "backend/ir/printer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace looptool {

std::string PrintAccess(const Program& program, const Access& access) {
  std::vector<std::string> dims;
  for (const AffineIndex& idx : access.index) {
    std::vector<std::string> terms;
    for (const auto& t : idx.terms) {
      const std::string& name = program.var(t.var).name;
      terms.push_back(t.coeff == 1 ? name : absl::StrCat(t.coeff, "*", name));
    }
    if (idx.offset != 0 || terms.empty()) terms.push_back(absl::StrCat(idx.offset));
    dims.push_back(absl::StrJoin(terms, " + "));
  }
  return absl::StrCat(program.tensor(access.tensor).name, "[", absl::StrJoin(dims, ", "), "]");
}

std::string PrintStatement(const Program& program, const Statement& st) {
  static constexpr const char* kReduction[] = {" = ", " += ", " max= "};
  static constexpr const char* kCombiner[] = {"", " * ", " + "};
  std::string out = absl::StrCat(PrintAccess(program, st.output),
                                 kReduction[static_cast<int>(st.reduction)],
                                 PrintAccess(program, st.inputs[0]));
  if (st.combiner != Combiner::kIdentity) {
    absl::StrAppend(&out, kCombiner[static_cast<int>(st.combiner)],
                    PrintAccess(program, st.inputs[1]));
  }
  if (st.post_op == PostOp::kRelu) absl::StrAppend(&out, " -> relu");
  return out;
}

std::string PrintProgram(const Program& program) {
  std::string out;
  for (const Statement& st : program.statements()) {
    absl::StrAppend(&out, PrintStatement(program, st), "\n");
  }
  std::vector<std::string> sizes;
  for (const IndexVar& v : program.vars()) sizes.push_back(absl::StrCat(v.name, "=", v.extent));
  absl::StrAppend(&out, absl::StrJoin(sizes, " "), "\n");
  return out;
}

}  // namespace looptool
