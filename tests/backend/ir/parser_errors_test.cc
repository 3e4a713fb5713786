// Each malformed program gets INVALID_ARGUMENT with the exact line, column and expectation.
#include "backend/ir/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace looptool {
namespace {

std::string ErrorOf(const std::string& text, const Limits& limits = Limits{}) {
  auto p = ParseProgram(text, limits);
  EXPECT_FALSE(p.ok()) << text;
  if (p.ok()) return "";
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(p.status().message());
}

TEST(ParserErrors, SyntaxErrorsNameLineColumnAndExpectation) {
  EXPECT_EQ(ErrorOf("C[m,n] += A[m,k] * B[k,n\nm=1 n=1 k=1"),
            "line 1, column 25: expected ',' or ']', found end of line");
  EXPECT_EQ(ErrorOf("m=1 n=1\nC[m,n] == A[m,n]"),
            "line 2, column 9: expected an input tensor, found '='");
  EXPECT_EQ(ErrorOf("C[m,n] -= A[m,n]; m=1 n=1"),
            "line 1, column 8: unexpected character '-'");
  EXPECT_EQ(ErrorOf("C[m] = A[m] -> tanh; m=4"),
            "line 1, column 16: expected a post-op ('relu'), found 'tanh'");
  EXPECT_EQ(ErrorOf("C[m] = A[m] * B[m] * D[m]; m=4"),
            "line 1, column 20: a statement combines at most two operands");
  EXPECT_EQ(ErrorOf("C[m,n] += A[m,k] * B[k,n]\nm=1 n=x"),
            "line 2, column 7: expected the size of 'n', found 'x'");
  EXPECT_EQ(ErrorOf("C[m] = A[2m]; m=3"),
            "line 1, column 11: expected a separator after the number, found 'm'");
  EXPECT_EQ(ErrorOf("C[m] = A[m]; m=3 m=4"), "line 1, column 18: size of 'm' is given twice");
  EXPECT_EQ(ErrorOf("m=3"), "line 1, column 1: expected at least one statement");
  EXPECT_EQ(ErrorOf("C[m] = A[m]; m=3; 42"),
            "line 1, column 19: expected a statement such as 'C[m, n] += A[m, k] * B[k, n]' or "
            "sizes such as 'm=64 n=64 k=64', found '42'");
}

TEST(ParserErrors, RuleViolationsSayWhatIsWrong) {
  EXPECT_EQ(ErrorOf("C[m,n] += A[m,k] * B[k,n]; m=4 n=4"),
            "index variable 'k' has no size (add k=<extent>)");
  EXPECT_EQ(ErrorOf("C[m] = A[m]; m=4 q=2"), "line 1, column 18: size given for 'q', which no statement uses");
  EXPECT_EQ(ErrorOf("C[m] = A[m, k]; m=4 k=2"),
            "statement 1 assigns with '=' but 'k' appears only on the right-hand side; use '+=' or "
            "'max=' to reduce over it");
  EXPECT_EQ(ErrorOf("C[m] = A[m]; D[m] = C[m]; m=4"),
            "tensor 'C' is read by statement 2 and written by statement 1; a program's outputs "
            "cannot be its inputs");
  EXPECT_EQ(ErrorOf("C[m] = A[m]; D[m,n] = A[m,n]; m=4 n=2"),
            "tensor 'A' is used with 1 indices and with 2");
  EXPECT_EQ(ErrorOf("C[2*m] = A[m]; m=4"),
            "output index 1 of 'C' in statement 1 must be one variable, optionally plus a constant");
  EXPECT_EQ(ErrorOf("C[m, m] = A[m]; m=4"), "output variable 'm' appears twice in 'C'");
  EXPECT_EQ(ErrorOf("C[m] = A[m + m]; m=4"),
            "variable 'm' appears twice in one index of 'A'; write its coefficient once");
  EXPECT_EQ(ErrorOf("C[m + 2] = A[m]; m=4"),
            "the statements writing 'C' leave 2 of its 6 elements unwritten");
  EXPECT_EQ(ErrorOf("C[m] = A[m]; C[n + 2] = B[n]; m=4 n=4"),
            "statements 1 and 2 both write elements of 'C'");
  EXPECT_EQ(ErrorOf("C[m] = C2[m]; m=0"), "size of 'm' must be at least 1, not 0");
  EXPECT_EQ(ErrorOf("A[m] = A2[A]; m=4 A=3"),
            "'A' is used both as a tensor and as an index variable");
}

// Found by tools/fuzz.sh (ir_parser): a huge coefficient overflowed the tensor-shape arithmetic.
TEST(ParserErrors, HugeIndexConstantsAreRefusedBeforeAnyArithmetic) {
  EXPECT_EQ(ErrorOf("O[c,w] max= I[c, 399999999999999996*h, w]; c=4 h=53 w=6"),
            "line 1, column 18: expected an index constant of at most 2^31, found "
            "'399999999999999996'");
  EXPECT_EQ(ErrorOf("O[c] = I[c*90000000000000000000]; c=4"),
            "line 1, column 12: integer is too large");
  EXPECT_THAT(ErrorOf("O[c] = I[c*400000000000000000]; c=4"),
              ::testing::HasSubstr("coefficient 400000000000000000 in 'I' is over the limit"));
  EXPECT_THAT(ErrorOf("O[c] = I[c*9000]; c=4"),
              ::testing::HasSubstr("coefficient 9000 in 'I' is over the limit of 8192"));
  EXPECT_THAT(ErrorOf("O[c] = I[c + 9000]; c=4"),
              ::testing::HasSubstr("index offset 9000 in 'I' is over the limit of 8192"));
  EXPECT_THAT(ErrorOf("O[c] = I[c + 2000000000 + 2000000000 + 2000000000]; c=4"),
              ::testing::HasSubstr("expected an index constant of at most 2^31"));
}

TEST(ParserErrors, CapsAreEnforced) {
  Limits limits;
  limits.max_extent = 100;
  EXPECT_EQ(ErrorOf("C[m] = A[m]; m=101", limits), "size of 'm' is 101; the limit is 100");
  limits = Limits{};
  limits.max_flops = 1000;
  EXPECT_EQ(ErrorOf("C[m,n] += A[m,k] * B[k,n]; m=8 n=8 k=8", limits),
            "the program needs 1024 operations per run; the limit is 1000");
  limits = Limits{};
  limits.max_tensor_elements = 100;
  EXPECT_EQ(ErrorOf("C[m,n] = A[m,n]; m=10 n=11", limits),
            "tensor 'C' has 110 elements; the limit is 100");
  limits = Limits{};
  limits.max_program_bytes = 10;
  EXPECT_EQ(ErrorOf("C[m] = A[m]; m=4", limits),
            "the program text has 16 bytes; the limit is 10");
  limits = Limits{};
  limits.max_statements = 1;
  EXPECT_EQ(ErrorOf("C[m] = A[m]; D[m] = A[m]; m=4", limits),
            "the program has 2 statements; the limit is 1");
}

}  // namespace
}  // namespace looptool
