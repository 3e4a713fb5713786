"""Which task gets the next slice of tuning time: Ansor's gradient-based task scheduler.

The objective is the model's latency, f = sum_i w_i * g_i, with w_i the number of layers task i
computes and g_i the latency of its best kernel so far (flops / best GFLOPS). Ansor (Zheng et al.,
OSDI 2020, section 6) gives the next slice to the task whose gradient promises the largest drop:

    df/dt_i ~ w_i * (alpha * (g_i(t_i - 1) - g_i(t_i))  +  (1 - alpha) * g_i(t_i) / t_i)

with t_i the slices task i has had: a backward term (what its last slice gained) and an
optimistic forward one (its latency could keep falling at its average rate so far); Ansor's
third term, a guess from similar tasks, is left out. Every task first gets one slice, the
heaviest (w_i * flops_i) first; a task whose slices all failed is not offered again.
"""

import dataclasses
from typing import Dict, Iterable, List, Optional, Tuple

ALPHA = 0.2  # Ansor's weight of the backward term


@dataclasses.dataclass
class TaskState:
    weight: int
    flops: float
    latencies: List[float] = dataclasses.field(default_factory=list)  # best after each slice
    slices: int = 0          # slices finished (with or without a result)
    seconds: float = 0.0     # search time they took
    best_gflops: float = 0.0
    failed: bool = False

    @property
    def latency(self) -> Optional[float]:
        return self.latencies[-1] if self.latencies else None


class Allotment:
    """The tasks' states and the choice of the next one (see the module's doc)."""

    def __init__(self, tasks: Dict[str, Tuple[int, float]]) -> None:
        """tasks: name -> (weight, flops of one kernel run)."""
        self.tasks = {name: TaskState(weight=w, flops=f) for name, (w, f) in tasks.items()}

    def record(self, name: str, gflops: float, seconds: float) -> None:
        """A slice of `name` finished with a best kernel of `gflops` (0: it found none)."""
        t = self.tasks[name]
        t.slices += 1
        t.seconds += seconds
        if gflops > t.best_gflops:
            t.best_gflops = gflops
        if t.best_gflops > 0:
            t.latencies.append(t.flops / (t.best_gflops * 1e9))

    def fail(self, name: str) -> None:
        """The task cannot be tuned (its slices fail on servers that answer)."""
        self.tasks[name].failed = True

    def priority(self, name: str) -> float:
        t = self.tasks[name]
        if not t.latencies:
            return float("inf")
        g = t.latencies[-1]
        backward = t.latencies[-2] - g if len(t.latencies) > 1 else 0.0
        forward = g / len(t.latencies)
        return t.weight * (ALPHA * backward + (1 - ALPHA) * forward)

    def next(self, candidates: Iterable[str]) -> Optional[str]:
        """The candidate to tune next, or None when none is left to tune."""
        best: Optional[str] = None
        best_key = (-1.0, -1.0)
        for name in candidates:
            t = self.tasks[name]
            if t.failed:
                continue
            key = (self.priority(name), t.weight * t.flops)
            if key > best_key:
                best, best_key = name, key
        return best

    def untuned(self) -> List[str]:
        """Tasks with no kernel yet that may still get one."""
        return [n for n, t in self.tasks.items() if not t.latencies and not t.failed]

    def latency(self) -> Optional[float]:
        """sum_i w_i * g_i in seconds, once every task that has not failed has a kernel."""
        live = [t for t in self.tasks.values() if not t.failed]
        if any(t.latency is None for t in live):
            return None
        return sum(t.weight * (t.latency or 0.0) for t in live)
