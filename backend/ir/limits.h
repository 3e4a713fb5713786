// Limits: every bound a client can push against (program text, extents, FLOPs, memory, loops),
// in one value type with the defaults the server starts with.
#ifndef LOOPTOOL_BACKEND_IR_LIMITS_H_
#define LOOPTOOL_BACKEND_IR_LIMITS_H_

#include <cstdint>

namespace looptool {

struct Limits {
  int64_t max_program_bytes = 16 * 1024;       // program text, including sizes and schedule
  int max_statements = 8;                      // statements in one program
  int max_vars = 12;                           // distinct index variables
  int max_tensor_rank = 6;                     // dimensions of one tensor
  int64_t max_extent = 8192;                   // size of one index variable
  int64_t max_tensor_elements = int64_t{1} << 24;  // 64 MiB of float per tensor
  int64_t max_total_elements = int64_t{1} << 26;   // all tensors of a program together
  int64_t max_flops = int64_t{1} << 34;        // about 17 GFLOP per kernel run
  int max_loops = 16;                          // loops of a whole loop tree (both nests)
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_IR_LIMITS_H_
