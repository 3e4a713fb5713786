// Loop and LoopOrder: the schedule of one node of a loop tree, as loop_tool keeps it.
//
// A LoopOrder lists a node's loops outermost first. Several loops may run over the same
// variable (a split); each covers `Extent = size * inner + tail` elements of it, where `inner`
// is the extent of the next loop over the same variable further in (1 for the innermost one).
// A loop runs `size` full iterations of `inner` elements each, then, if `tail > 0`, one partial
// iteration of `tail` elements: `for n in 1 r 80` over `n'` of extent 128 covers 208 elements.
#ifndef LOOPTOOL_BACKEND_SCHEDULE_LOOP_H_
#define LOOPTOOL_BACKEND_SCHEDULE_LOOP_H_

#include <cstdint>
#include <vector>

namespace looptool {

struct Loop {
  int var = 0;          // index variable of the Program
  int64_t size = 1;     // full iterations, >= 1
  int64_t tail = 0;     // elements of the partial last iteration, 0 <= tail < inner
  bool unroll = false;  // code generator: emit the body `size` times instead of looping
  bool vectorize = false;  // code generator: vectorize along this (innermost-of-its-var) loop

  bool operator==(const Loop& o) const {
    return var == o.var && size == o.size && tail == o.tail && unroll == o.unroll &&
           vectorize == o.vectorize;
  }
  bool operator!=(const Loop& o) const { return !(*this == o); }
};

using LoopOrder = std::vector<Loop>;

// Elements of its variable that one iteration of order[depth] covers (the next inner same-var
// loop's extent, or 1).
int64_t InnerExtent(const LoopOrder& order, int depth);
// Elements of its variable that order[depth] covers in all: size * InnerExtent + tail.
int64_t Extent(const LoopOrder& order, int depth);
// How many loops over the same variable enclose order[depth]; printed as primes (k', k'').
int VarDepth(const LoopOrder& order, int depth);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_SCHEDULE_LOOP_H_
