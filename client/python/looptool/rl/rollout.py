"""Episodes on a LoopTool server, acted by a `Policy` (numpy): what an RL actor does.

`run_episodes` plays one episode per benchmark on a `LoopToolEnv` (no reward space: the episode
keeps the GFLOPS): reset, then `max_steps` steps of one action each, observing `loops_tensor`,
`action_mask` and `flops` after every action (an unchanged schedule's `flops` is the server's
cached measurement, so cursor moves cost no timing). Actions: "greedy" (the policy's best allowed
action), "epsilon" (a uniformly random allowed action with probability `epsilon`, else greedy:
Ape-X's exploration) or "sample" (from the softmax of the allowed logits: PPO's). A sketch_value
policy plays sketch_value.run_sketch_episode instead. An episode whose RPC fails on the service's
side (server restarted, session gone, kernel crashed) is dropped and counted in `errors`; the
connection reaches the server again by itself.

`dask_run_episodes` is the same as a Dask task: it keeps one Connection per server address on
the Dask worker that runs it, so a worker's gRPC channels live across tasks.
"""

import dataclasses
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import grpc
import numpy as np
import numpy.typing as npt

from looptool import errors
from looptool.connection import Connection
from looptool.env import LoopToolEnv
from looptool.rl import policy_file
from looptool.rl.benchmarks import Benchmark

OBSERVATIONS = ("loops_tensor", "action_mask", "flops")
MODES = ("greedy", "epsilon", "sample")


@dataclasses.dataclass(frozen=True, eq=False)
class Episode:
    """One episode: T actions; obs/masks/gflops have T + 1 rows (the start state first)."""
    benchmark: str                        # the URI
    obs: "npt.NDArray[np.float32]"        # (T + 1, input_size)
    masks: "npt.NDArray[np.bool_]"        # (T + 1, num_actions)
    actions: "npt.NDArray[np.int64]"      # (T,)
    gflops: "npt.NDArray[np.float64]"     # (T + 1,)
    logp: "npt.NDArray[np.float32]"       # (T,): log-probability of each action ("sample")
    peak: float                           # the server's peak GFLOPS
    seconds: float

    def __len__(self) -> int:
        return len(self.actions)

    @property
    def final_gflops(self) -> float:
        return float(self.gflops[-1])


@dataclasses.dataclass(frozen=True)
class Rollouts:
    """What one call returns: the finished episodes and how many were lost to errors."""
    episodes: List[Any]                   # Episode or sketch_value.SketchEpisode
    errors: List[Tuple[str, str]]         # [(benchmark uri, "CODE: details")]
    seconds: float

    @property
    def steps(self) -> int:
        return sum(len(e) for e in self.episodes)


def _choose(policy: policy_file.Policy, obs: "npt.NDArray[np.float32]",
            mask: "npt.NDArray[np.bool_]", mode: str, epsilon: float,
            rng: np.random.Generator) -> Tuple[Optional[int], float]:
    """(action, log-probability or 0) for one state; None when no action is allowed."""
    allowed = np.flatnonzero(mask)
    if allowed.size == 0:
        return None, 0.0
    if mode == "epsilon" and rng.random() < epsilon:
        return int(rng.choice(allowed)), 0.0
    scores = policy.scores(obs)
    if mode == "sample":
        z = scores[allowed] - scores[allowed].max()
        p = np.exp(z.astype(np.float64))
        p /= p.sum()
        i = int(rng.choice(allowed.size, p=p))
        return int(allowed[i]), float(np.log(p[i]))
    return policy_file.masked_argmax(scores, mask), 0.0


def raise_failed_step(env: LoopToolEnv) -> None:
    """Raises the ServiceError of the env's last step when it failed (the env ended the episode
    gracefully; an actor drops it instead)."""
    if env.last_error is not None:
        raise env.last_error


def run_one(connection: Connection, benchmark: Benchmark, policy: policy_file.Policy,
            mode: str = "greedy", epsilon: float = 0.0, max_steps: int = 10,
            rng: Optional[np.random.Generator] = None, timeout: Optional[float] = 60.0) -> Any:
    """One episode on `benchmark` (an Episode, or a SketchEpisode for a sketch_value policy).
    Raises ServiceError (and ServiceTransportError) for failures on the service's side."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    rng = rng if rng is not None else np.random.default_rng()
    if policy.kind == "sketch_value":  # one decision among the server's sketches
        from looptool.rl import sketch_value
        return sketch_value.run_sketch_episode(connection, benchmark, policy, mode, epsilon,
                                               rng, timeout)
    start = time.perf_counter()
    with LoopToolEnv(connection, benchmark.uri, action_space=policy.action_space,
                     observation_space=None, reward_space=None, timeout=timeout) as env:
        obs, mask, gflops, peak = env.reset(program=benchmark.program,
                                            observation_spaces=[*OBSERVATIONS, "peak_gflops"])
        obs_rows, mask_rows, gflops_rows = [obs.reshape(-1)], [mask.reshape(-1)], [gflops]
        actions: List[int] = []
        logps: List[float] = []
        for _ in range(max_steps):
            action, logp = _choose(policy, obs_rows[-1], mask_rows[-1], mode, epsilon, rng)
            if action is None:
                break
            (obs, mask, gflops), _, _, _ = env.step(action, observation_spaces=OBSERVATIONS)
            raise_failed_step(env)
            actions.append(action)
            logps.append(logp)
            obs_rows.append(obs.reshape(-1))
            mask_rows.append(mask.reshape(-1))
            gflops_rows.append(gflops)
    return Episode(benchmark.uri, np.asarray(obs_rows, np.float32),
                   np.asarray(mask_rows, bool), np.asarray(actions, np.int64),
                   np.asarray(gflops_rows, np.float64), np.asarray(logps, np.float32),
                   float(peak), time.perf_counter() - start)


def run_episodes(connection: Connection, benchmarks: Sequence[Benchmark],
                 policy: policy_file.Policy, mode: str = "greedy", epsilon: float = 0.0,
                 max_steps: int = 10, seed: Optional[int] = None,
                 timeout: Optional[float] = 60.0) -> Rollouts:
    """One episode per benchmark; episodes that fail on the service's side are dropped and
    listed in `Rollouts.errors` (the connection reconnects by itself)."""
    rng = np.random.default_rng(seed)
    episodes: List[Any] = []
    failed: List[Tuple[str, str]] = []
    start = time.perf_counter()
    for b in benchmarks:
        try:
            episodes.append(run_one(connection, b, policy, mode, epsilon, max_steps, rng,
                                    timeout))
        except (errors.ServiceError, RuntimeError) as e:
            if getattr(e, "code", None) == grpc.StatusCode.INVALID_ARGUMENT:
                raise  # the caller's bug (a policy for another action space ...), not a fault
            failed.append((b.uri, f"{type(e).__name__}: {e}"))
    return Rollouts(episodes, failed, time.perf_counter() - start)


def dask_run_episodes(server: str, benchmarks: Sequence[Benchmark], policy: policy_file.Policy,
                      mode: str, epsilon: float, max_steps: int, seed: Optional[int],
                      auth_token: Optional[str] = None) -> Rollouts:
    """run_episodes as a Dask task: the worker keeps one Connection per server address (sending
    `auth_token` with every call when given)."""
    return run_episodes(worker_connection(server, auth_token), benchmarks, policy, mode, epsilon,
                        max_steps, seed)


def worker_connection(server: str, auth_token: Optional[str] = None) -> Connection:
    """The Dask worker's Connection to `server` (one per address, kept by the worker; sending
    `auth_token` with every call when given). Only inside a Dask task."""
    from distributed import get_worker  # only inside a Dask worker

    worker = get_worker()
    cache: Optional[Dict[str, Connection]] = getattr(worker, "looptool_connections", None)
    if cache is None:
        cache = {}
        setattr(worker, "looptool_connections", cache)
    if server not in cache:
        cache[server] = Connection(server, auth_token=auth_token)
    return cache[server]

