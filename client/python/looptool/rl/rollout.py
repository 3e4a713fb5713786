"""Episodes on a LoopTool server, acted by a `Policy` (numpy): what an RL actor does.

`run_episodes` plays one episode per benchmark: StartSession, then `max_steps` Steps of one
action each, observing `loops_tensor`, `action_mask` and `flops` after every action (an unchanged
schedule's `flops` is the server's cached measurement, so cursor moves cost no timing). Actions:
"greedy" (the policy's best allowed action), "epsilon" (a uniformly random allowed action with
probability `epsilon`, else greedy: Ape-X's exploration) or "sample" (from the softmax of the
allowed logits: PPO's). A sketch_value policy plays sketch_value.run_sketch_episode instead.
An episode whose RPC fails on the service's side (server restarted, session gone, kernel
crashed) is dropped and counted in `errors`; the next one reconnects.

`dask_run_episodes` is the same as a Dask task: it keeps one Connection per server address on
the Dask worker that runs it, so a worker's gRPC channels live across tasks.
"""

import time

import grpc
import numpy as np

from looptool import convert
from looptool import errors
from looptool.connection import Connection
from looptool.rl import policy_file

OBSERVATIONS = ("loops_tensor", "action_mask", "flops")
MODES = ("greedy", "epsilon", "sample")


class Episode:
    """One episode: T actions; obs/masks/gflops have T + 1 rows (the start state first)."""

    def __init__(self, benchmark, obs, masks, actions, gflops, logp, peak, seconds):
        self.benchmark = benchmark
        self.obs = obs            # float32 (T + 1, input_size)
        self.masks = masks        # bool (T + 1, num_actions)
        self.actions = actions    # int64 (T,)
        self.gflops = gflops      # float64 (T + 1,)
        self.logp = logp          # float32 (T,): log-probability of each action ("sample")
        self.peak = peak          # the server's peak GFLOPS
        self.seconds = seconds

    def __len__(self):
        return len(self.actions)

    @property
    def final_gflops(self):
        return float(self.gflops[-1])


class Rollouts:
    """What one call returns: the finished episodes and how many were lost to errors."""

    def __init__(self, episodes, errors_seen, seconds):
        self.episodes = episodes
        self.errors = errors_seen      # [(benchmark uri, "CODE: details")]
        self.seconds = seconds

    @property
    def steps(self):
        return sum(len(e) for e in self.episodes)


def _values(reply_observations, names):
    if len(reply_observations) != len(names):
        raise errors.ServiceError(grpc.StatusCode.INTERNAL,
                                  f"Asked for {len(names)} observations, got "
                                  f"{len(reply_observations)}", "Step")
    return [convert.event_to_python(e) for e in reply_observations]


def _choose(policy, obs, mask, mode, epsilon, rng):
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


def run_one(connection, benchmark, policy, mode="greedy", epsilon=0.0, max_steps=10, rng=None,
            timeout=60.0):
    """One episode on `benchmark` (a benchmarks.Benchmark). Raises ServiceError (and
    ServiceTransportError) for failures on the service's side."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    rng = rng if rng is not None else np.random.default_rng()
    if policy.kind == "sketch_value":  # one decision among the server's sketches
        from looptool.rl import sketch_value
        return sketch_value.run_sketch_episode(connection, benchmark, policy, mode, epsilon,
                                               rng, timeout)
    spaces = connection.spaces(timeout)
    space = spaces.action_space(policy.action_space)
    names = list(OBSERVATIONS) + ["peak_gflops"]
    indices = [spaces.observation_space(n).index for n in names]
    start = time.perf_counter()
    reply = connection.start_session(benchmark.uri, space.space_index, indices,
                                     program=benchmark.program, timeout=timeout)
    session = reply.session_id
    try:
        obs, mask, gflops, peak = _values(reply.observation, names)
        obs_rows, mask_rows, gflops_rows = [obs.reshape(-1)], [mask.reshape(-1)], [gflops]
        actions, logps = [], []
        for _ in range(max_steps):
            action, logp = _choose(policy, obs_rows[-1], mask_rows[-1], mode, epsilon, rng)
            if action is None:
                break
            reply = connection.step(session, [action], indices[:3], timeout=timeout)
            obs, mask, gflops = _values(reply.observation, names[:3])
            actions.append(action)
            logps.append(logp)
            obs_rows.append(obs.reshape(-1))
            mask_rows.append(mask.reshape(-1))
            gflops_rows.append(gflops)
    finally:
        try:
            connection.end_session(session, timeout=timeout)
        except (errors.ServiceError, RuntimeError):
            pass
    return Episode(benchmark.uri, np.asarray(obs_rows, np.float32),
                   np.asarray(mask_rows, bool), np.asarray(actions, np.int64),
                   np.asarray(gflops_rows, np.float64), np.asarray(logps, np.float32),
                   float(peak), time.perf_counter() - start)


def run_episodes(connection, benchmarks, policy, mode="greedy", epsilon=0.0, max_steps=10,
                 seed=None, timeout=60.0):
    """One episode per benchmark; episodes that fail on the service's side are dropped and
    listed in `Rollouts.errors` (the connection retries and reconnects by itself)."""
    rng = np.random.default_rng(seed)
    episodes, failed = [], []
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


def dask_run_episodes(server, benchmarks, policy, mode, epsilon, max_steps, seed,
                      auth_token=None):
    """run_episodes as a Dask task: the worker keeps one Connection per server address (sending
    `auth_token` with every call when given)."""
    from distributed import get_worker  # only inside a Dask worker

    worker = get_worker()
    cache = getattr(worker, "looptool_connections", None)
    if cache is None:
        cache = worker.looptool_connections = {}
    if server not in cache:
        cache[server] = Connection(server, auth_token=auth_token)
    return run_episodes(cache[server], benchmarks, policy, mode, epsilon, max_steps, seed)
