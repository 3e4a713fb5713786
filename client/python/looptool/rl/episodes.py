"""A loop_set policy's episodes from Python, as `looptool tune --search=policy` plays them in C++
(client/cpp/search/policy_rollouts.cc): the likeliest episodes, untimed, and those the
policy's cost model ranks first timed while the budget lasts, the fastest kept.

    from looptool.rl import episodes, loop_set
    policy = loop_set.load("datasets/policies/loop_set.json")
    with LoopToolEnv(conn, action_space="loop_nest", observation_space=None,
                     reward_space=None) as env:
        r = episodes.ranked_rollout(env, uri, program, policy, count=16, seconds=0.3)
        r.actions, r.gflops

`likely_episodes` plays the greedy episode, then the episodes that leave it (or each other) for
one of the next three choices at a step (an action the mask allows, or stop) and go on
greedily, the most likely first (by the log-probability given up, under the softmax of the
policy's scores), each ending in a state no other ended in. Like the greedy episode: one action
at least, at most `max_steps`, stopping where a state comes back.
"""

import heapq
import itertools
import json
import time
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Set, Tuple

import numpy as np

from looptool.env import LoopToolEnv
from looptool.rl import loop_set
from looptool.rl.imitate import OBSERVE, Rollout, _state

ALTERNATIVES_PER_STEP = 3


@dataclass
class Episode:
    actions: List[str]
    loss: float            # nats below the greedy episode's log-probability (0: greedy)
    env: LoopToolEnv       # a fork in the final state (the caller closes it)
    features: bytes        # the final state's loop_features


def _observed(env: LoopToolEnv) -> List[Any]:
    got = env.observe(OBSERVE)
    return [got[n] for n in OBSERVE]


def choices(policy: loop_set.LoopSetPolicy, obs: Any, mask: Any,
            must_act: bool) -> List[Tuple[Optional[int], float]]:
    """The allowed choices (action index, or None for stop unless `must_act`), most likely first
    (ties: the lower index; stop after the actions scoring as much), with log-probabilities."""
    s = policy.scores(obs).astype(np.float64)
    allowed = np.flatnonzero(np.asarray(mask, bool)[:loop_set.NUM_ACTIONS])
    ranked = sorted(allowed.tolist(), key=lambda a: (-s[a], a))
    out: List[Tuple[Optional[int], float]] = [(int(a), float(s[a])) for a in ranked]
    if not must_act:
        stop = float(s[loop_set.STOP])
        at = next((i for i, (_, v) in enumerate(out) if v < stop), len(out))
        out.insert(at, (None, stop))
    if out:
        top = out[0][1]
        log_z = top + float(np.log(sum(np.exp(v - top) for _, v in out)))
        out = [(a, v - log_z) for a, v in out]
    return out


def likely_episodes(env: LoopToolEnv, uri: str, program: str, policy: loop_set.LoopSetPolicy,
                    count: int = 16, max_steps: int = 16) -> List[Episode]:
    """Up to `count` episodes from the untiled nest, the greedy one first, then the likeliest
    others (none timed); each Episode holds a fork of `env` in its final state. A policy with
    members plays each network's in turn, each with an even share of `count` (the first ones
    one more where they do not divide), none ending where an earlier one ended: C++'s
    LikelyEpisodes (client/cpp/search/algorithms.h), without its deadline. (Unlike C++, which
    leaves out a member whose greedy episode fails, a server error here is raised whichever
    network's episode met it.)"""
    networks = [policy] + list(policy.members)
    env.reset(uri, program=program, observation_spaces=[])
    finals: Set[bytes] = set()
    out: List[Episode] = []
    for i, net in enumerate(networks):
        share = count // len(networks) + (1 if i < count % len(networks) else 0)
        if share > 0:
            out += _network_episodes(env, net, share, max_steps, finals)
    return out


def _network_episodes(env: LoopToolEnv, policy: loop_set.LoopSetPolicy, count: int,
                      max_steps: int, finals: Set[bytes]) -> List[Episode]:
    """One network's episodes from `env`'s (reset) state, none ending in a state of `finals`,
    which gains theirs."""
    names = env.action_space.names
    branches: List[Tuple[float, int, List[int], Optional[int]]] = []
    tie = itertools.count()

    def go_on(e: LoopToolEnv, path: List[int], loss: float, values: Sequence[Any]) -> bytes:
        visited: Set[bytes] = set()
        while True:
            obs, mask = _state(values)
            key = obs.tobytes()
            if len(path) >= max_steps or key in visited:
                return key
            visited.add(key)
            cs = choices(policy, obs, mask, must_act=not path)
            if not cs:
                return key
            for a, logp in cs[1:ALTERNATIVES_PER_STEP + 1]:
                heapq.heappush(branches, (loss + cs[0][1] - logp, next(tie), list(path), a))
            best = cs[0][0]
            if best is None:
                return key
            values, _, _, _ = e.step(best, observation_spaces=OBSERVE)
            path.append(best)

    out: List[Episode] = []
    greedy = env.fork()
    path: List[int] = []
    key = go_on(greedy, path, 0.0, _observed(greedy))
    if key in finals:
        greedy.close()
    else:
        out.append(Episode([names[a] for a in path], 0.0, greedy, key))
        finals.add(key)
    while len(out) < count and branches:
        loss, _, prefix, action = heapq.heappop(branches)
        path = prefix + ([action] if action is not None else [])
        e = env.fork()
        if path:
            e.multistep([names[a] for a in path], observation_spaces=[])
        values = _observed(e)
        key = _state(values)[0].tobytes() if action is None else go_on(e, path, loss, values)
        if key in finals:
            e.close()
            continue
        finals.add(key)
        out.append(Episode([names[a] for a in path], loss, e, key))
    return out


RETIME_RESERVE = 0.05  # ranked_rollout: the budget's share kept for re-timing the fastest
RETIMED_FINALISTS = 2


def ranked_rollout(env: LoopToolEnv, uri: str, program: str, policy: loop_set.LoopSetPolicy,
                   count: int = 16, max_steps: int = 16, timed: int = 16,
                   seconds: float = 0.3) -> Rollout:
    """The likeliest `count` episodes ranked by the policy's cost model (its score less
    loss_weight times the episode's loss; only the greedy one when the policy has no cost model),
    timed in that order, `timed` at most, the first whatever the time and the others while
    `seconds` from the start (less 5%) last; the two fastest re-timed where a timing still fits
    (each the faster of its timing and its re-timing); the fastest kept: `looptool tune --search=policy` with
    --policy_candidates=count --policy_timed=timed --policy_seconds=seconds (Python's episodes
    take longer than C++'s, so fewer may be timed). ValueError: `timed` below 1 or `seconds` not
    above 0."""
    if timed < 1 or not seconds > 0:
        raise ValueError(f"ranked_rollout times 1 episode or more within more than 0 s, not "
                         f"timed={timed} within seconds={seconds}")
    t0 = time.perf_counter()
    eps = likely_episodes(env, uri, program, policy, count if policy.cost else 1, max_steps)
    try:
        order = list(range(len(eps)))
        if policy.cost is not None and len(eps) > 1:
            features = [json.loads(str(e.env.observe(["plan_features"])["plan_features"]))
                        for e in eps]
            scores = policy.cost.predict(features) - policy.cost.loss_weight * np.array(
                [e.loss for e in eps])
            order.sort(key=lambda i: -float(scores[i]))  # stable: C++'s order on ties
        # New timings stop RETIME_RESERVE of the budget early; the fastest RETIMED_FINALISTS are
        # then re-timed where a call as long as the longest timing still fits (as C++'s
        # TimeRankedEpisodes): each kernel's GFLOPS the faster of its timing and re-timing.
        measured: List[Tuple[float, int]] = []
        longest = 0.0
        for i in order[:timed]:
            if measured and time.perf_counter() - t0 >= (1 - RETIME_RESERVE) * seconds:
                break
            called = time.perf_counter()
            measured.append((float(eps[i].env.observe(["flops"])["flops"]), i))
            longest = max(longest, time.perf_counter() - called)
        measured.sort(key=lambda m: -m[0])  # stable: the earlier of equals first
        for k, (gflops, i) in enumerate(measured[:RETIMED_FINALISTS]):
            if gflops <= 0 or time.perf_counter() - t0 + longest > seconds:
                break
            measured[k] = (max(gflops, eps[i].env.remeasure()[0]), i)
        gflops, i = max(measured, key=lambda m: m[0])
        return Rollout(eps[i].actions, gflops, time.perf_counter() - t0)
    finally:
        for e in eps:
            e.env.close()
