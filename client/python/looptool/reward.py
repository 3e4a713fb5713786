"""The rewards, defined once: LoopToolEnv's `flops` reward space and the RL learners use these.

* "dgflops_peak" (LoopTune's, the environment's `flops` reward space): the GFLOPS gained over the
  previous state divided by the machine's peak, `(gflops_after - gflops_before) / peak_gflops`.
* "dlog_gflops" (MLIR-RL's log speed-up): `log(gflops_after) - log(gflops_before)`, GFLOPS taken
  as at least 1e-9.

`reward(kind, before, after, peak)` gives one step's reward (a float); `episode_rewards(kind,
gflops, peak)` the T rewards of an episode's T + 1 GFLOPS (float32), by the same formula.
"""

from typing import Any, Sequence, Union

import numpy as np
import numpy.typing as npt

DGFLOPS_PEAK = "dgflops_peak"
DLOG_GFLOPS = "dlog_gflops"
KINDS = (DGFLOPS_PEAK, DLOG_GFLOPS)
MIN_GFLOPS = 1e-9  # the floor under log GFLOPS

def _check(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"Unknown reward {kind!r}; known: {', '.join(KINDS)}")


def _formula(kind: str, before: Any, after: Any, peak: float) -> Any:
    """The reward of going from `before` to `after` GFLOPS: floats or arrays, elementwise."""
    if kind == DGFLOPS_PEAK:
        return (after - before) / peak
    return (np.log(np.maximum(after, MIN_GFLOPS)) - np.log(np.maximum(before, MIN_GFLOPS)))


def reward(kind: str, before: float, after: float, peak: float) -> float:
    """One step's reward: from a state measured at `before` GFLOPS to one at `after`."""
    _check(kind)
    return float(_formula(kind, before, after, peak))


def episode_rewards(kind: str, gflops: Union[Sequence[float], "npt.NDArray[Any]"],
                    peak: float) -> "npt.NDArray[np.float32]":
    """The rewards of an episode whose states (the start first) measured `gflops`: T + 1
    numbers give T rewards, float32."""
    _check(kind)
    g = np.asarray(gflops, np.float64)
    if g.ndim != 1:
        raise ValueError(f"gflops must be one number per state, got shape {g.shape}")
    return np.asarray(_formula(kind, g[:-1], g[1:], peak), dtype=np.float32)
