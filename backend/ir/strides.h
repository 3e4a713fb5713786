// RowMajorStrides: element strides of a row-major (C-order) array, the layout of every tensor of
// a Program. The one place that layout is spelled out; everything that turns an access into
// element offsets (Program::ElementStride, the kernel plan, the interpreter) goes through it.
#ifndef LOOPTOOL_BACKEND_IR_STRIDES_H_
#define LOOPTOOL_BACKEND_IR_STRIDES_H_

#include <cstdint>
#include <vector>

namespace looptool {

// strides[d] = shape[d+1] * ... * shape[rank-1]: elements between consecutive values of index d.
// The last dimension's stride is 1; a rank-0 shape has no strides. Does not check for overflow
// (Program's limits keep every product far below int64's range).
std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& shape);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_IR_STRIDES_H_
