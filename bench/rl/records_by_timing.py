"""Search readings against full-budget re-timings, by how the search timed each kernel.

    PYTHONPATH=bazel-bin/client/python:client/python /usr/bin/python3 \\
        bench/rl/records_by_timing.py records.db [split]

Reads a records file whose kernels were remeasured (`python3 -m looptool.records remeasure`) and
prints a markdown table: per `timing` class (datasets/records/README.md), how far the search's
reading is from the remeasured one (log2 of remeasured / search).
"""
import collections
import math
import sys
from typing import Dict, List, Optional

from looptool import records


def main(argv: List[str]) -> int:
    if not 2 <= len(argv) <= 3:
        print(__doc__, file=sys.stderr)
        return 2
    rows = [r for r in records.load(argv[1], split=argv[2] if len(argv) > 2 else None)
            if r.remeasured_gflops]
    by: Dict[Optional[str], List[float]] = collections.defaultdict(list)
    for r in rows:
        assert r.remeasured_gflops is not None
        by[r.timing].append(math.log2(r.remeasured_gflops / r.gflops))
    print(f"{len(rows)} kernels remeasured\n")
    print("| timing | kernels | median remeasured / search | median abs log2 | remeasured > 1.41x "
          "faster | > 2x faster | > 1.41x slower |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for t in (*records.TIMINGS, None):
        v = sorted(by.get(t, []))
        if not v:
            continue
        n = len(v)
        share = lambda ok: f"{100 * sum(1 for x in v if ok(x)) / n:.1f}%"  # noqa: E731
        print(f"| {t or 'unknown'} | {n} | {2 ** v[n // 2]:.3f} | "
              f"{sorted(abs(x) for x in v)[n // 2]:.3f} | {share(lambda x: x > 0.5)} | "
              f"{share(lambda x: x > 1)} | {share(lambda x: x < -0.5)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
