#include "tests/backend/schedule/initial_tree.h"

#include <memory>

#include "backend/ir/parser.h"
#include "gtest/gtest.h"

namespace looptool::testing {

LoopTree Initial(const std::string& program) {
  auto p = ParseProgram(program, Limits{});
  EXPECT_TRUE(p.ok()) << p.status();
  return LoopTree::Initial(std::make_shared<const Program>(*std::move(p)));
}

}  // namespace looptool::testing
