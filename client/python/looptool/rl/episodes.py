"""A loop_set policy's episodes from Python, as `looptool tune --search=policy` plays them in C++
(client/cpp/search/policy_rollouts.cc): the likeliest episodes, untimed, and those the
policy's cost model ranks first timed while the budget lasts, wave after wave of the next
likeliest while time is left, the fastest kept.

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
import re
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np

from looptool.env import LoopToolEnv
from looptool.errors import ServiceError
from looptool.rl import loop_set
from looptool.rl.imitate import OBSERVE, Rollout, _state

ALTERNATIVES_PER_STEP = 3


@dataclass
class Episode:
    actions: List[str]
    loss: float            # nats below the greedy episode's log-probability (0: greedy)
    env: LoopToolEnv       # a fork in the final state (the caller closes it)
    features: bytes        # the final state's loop_features
    start: bool = False    # the start, or the start with its marks (short_candidates)
    shorter: bool = False  # one of short_candidates' (the start, prefixes of the greedy episode)


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
    return EpisodeStream(env, uri, program, policy, max_steps).next(count)


class EpisodeStream:
    """likely_episodes wave after wave: each `next` plays on where the last left off, no episode
    ending where an earlier one (of any wave) ended (C++'s waves: TimeEpisodeWaves)."""

    def __init__(self, env: LoopToolEnv, uri: str, program: str,
                 policy: loop_set.LoopSetPolicy, max_steps: int = 16):
        env.reset(uri, program=program, observation_spaces=[])
        self._env = env
        self._finals: Set[bytes] = set()
        self._networks = [_network_episodes(env, net, max_steps, self._finals)
                          for net in [policy] + list(policy.members)]
        self._exhausted = [False] * len(self._networks)
        self._started = [False] * len(self._networks)

    def next(self, count: int, until: Optional[float] = None) -> List[Episode]:
        """Up to `count` more episodes (each network its share), the greedy ones whatever the
        time, no other begun after `until` (time.perf_counter()) where given."""
        out: List[Episode] = []
        n = len(self._networks)
        for i, net in enumerate(self._networks):
            share = count // n + (1 if i < count % n else 0)
            taken = 0
            while taken < share and not self._exhausted[i]:
                if self._started[i] and until is not None and time.perf_counter() >= until:
                    break
                self._started[i] = True
                e = next(net, None)
                if e is None:
                    self._exhausted[i] = True
                    break
                out.append(e)
                taken += 1
        return out

    @property
    def exhausted(self) -> bool:
        """Every network has played all its episodes."""
        return all(self._exhausted)

    def short_candidates(self, wave: Sequence[Episode],
                         until: Optional[float] = None, rank: int = 16) -> List[Episode]:
        """Shorter candidates beside a first wave: the start (no action), the start with every
        mark its statements take (_mark_all) where any does (those two marked `start`), and
        (while `until`, time.perf_counter(), has not come, where given) the other states its
        greedy episodes (the policy's and each member's: loss 0) passed through, the shorter
        first; each as unlikely as the wave's `rank`-th likeliest episode (its least likely where
        it holds fewer), none ending where an episode of any wave (or another of them) ends (the
        marked start aside: loop_features do not show marks, and no episode takes one): C++'s
        ShortCandidates (policy_rollouts.cc) and ShortCandidateLoss (short_candidate_loss.h). A
        state the server refuses is left out; the caller closes their forks."""
        names = self._env.action_space.names
        index = {n: i for i, n in enumerate(names)}
        losses = sorted(e.loss for e in wave)
        loss = losses[min(len(losses), max(rank, 1)) - 1] if losses else 0.0
        prefixes = sorted({tuple(index[a] for a in e.actions[:n])
                           for e in wave if e.loss == 0 for n in range(len(e.actions))},
                          key=lambda p: (len(p), p))
        out: List[Episode] = []
        try:
            for prefix in prefixes:
                if prefix and until is not None and time.perf_counter() >= until:
                    break
                try:
                    e = self._env.fork()
                except ServiceError:
                    break  # as C++: what it has so far
                try:
                    if prefix:
                        e.multistep([names[a] for a in prefix], observation_spaces=[])
                    key = _state(_observed(e))[0].tobytes()
                except ServiceError:
                    e.close()
                    continue
                marked = None
                if not prefix:
                    try:
                        marked = _mark_all(e)
                    except ServiceError:
                        pass  # as C++: the start unmarked stands
                if key in self._finals:
                    e.close()
                else:
                    self._finals.add(key)
                    out.append(Episode([names[a] for a in prefix], loss, e, key, not prefix, True))
                if marked is not None:
                    out.append(Episode(marked[0], loss, marked[1], key, True, True))
        except BaseException:
            for c in out:
                c.env.close()
            raise
        return out


def _network_episodes(env: LoopToolEnv, policy: loop_set.LoopSetPolicy, max_steps: int,
                      finals: Set[bytes]) -> Iterator[Episode]:
    """One network's episodes from `env`'s (reset) state, the likeliest first, none ending in a
    state of `finals`, which gains theirs (played one by one as asked for)."""
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

    greedy = env.fork()
    path: List[int] = []
    key = go_on(greedy, path, 0.0, _observed(greedy))
    if key in finals:
        greedy.close()
    else:
        finals.add(key)
        yield Episode([names[a] for a in path], 0.0, greedy, key)
    while branches:
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
        yield Episode([names[a] for a in path], loss, e, key)


RETIME_RESERVE = 0.05  # ranked_rollout: the budget's share kept for re-timing the fastest
# ranked_rollout: a candidate scored this much below the fastest timed so far (log2 GFLOPS less
# the loss term: predicted 4x slower) is passed over (C++'s SearchOptions::pass_predicted_slower).
PASS_PREDICTED_SLOWER = 2.0
# What the marked timing (_time_marked) takes beyond its timing call, in seconds: the marking
# actions' steps and forks (C++'s kMarkSteps).
MARK_STEPS = 0.01
RETIMED_FINALISTS = 2
# What ending one session takes, in seconds: ranked_rollout ends a wave's other sessions one at a
# time before its re-timings and marked timing (C++ ends them together: kEndSession, 0.4 ms). On
# a Zen 5 host Python's took 0.2-0.4 ms each (18-28 sessions in 3.5-7.2 ms after a wave); sent
# together through grpc futures, no fewer (0.2-0.3 ms), so they stay one at a time.
END_SESSION = 0.0005
# What a re-timing may take beyond a timing: the FMA peak the server measures beside it (three
# 10 ms rounds, once a second; the first re-timing pays it), in seconds (C++'s kBesidePeak: a
# Zen 5 host's first re-timings took 32-33 ms more than the kernel's timing call).
BESIDE_PEAK = 0.04


# What a re-timing takes at least, in seconds: the server's fixed budget of runs (10 ms by
# default) and its overhead (C++'s kLeastRetiming).
LEAST_RETIMING = 0.015


# What a timing call takes beyond what the server says measuring its kernel took its worker
# (the `timing` observation's work_seconds) at least, in seconds (C++'s kStepOverhead).
STEP_OVERHEAD = 0.005

# One timing call: the seconds the client saw it take, and what the server said measuring the
# kernel took its worker (0.0 where it did not say).
Call = Tuple[float, float]


def _timed(env: LoopToolEnv) -> Tuple[float, Call]:
    """The GFLOPS of `env`'s state (its kernel timed where the server had not) and its timing
    call (_retiming_time reads it)."""
    says = "timing" in env.observation_spaces
    called = time.perf_counter()
    values = env.observe(["flops", "timing"] if says else ["flops"])
    seen = time.perf_counter() - called
    work = 0.0
    if says:
        try:
            work = float(json.loads(values["timing"]).get("work_seconds", 0.0))
        except (ValueError, TypeError, AttributeError):
            work = 0.0
    return float(values["flops"]), (seen, work if work > 0 else 0.0)


def _overhead(calls: Sequence[Call]) -> float:
    """What a timing call takes beyond what measuring its kernel took the worker: the median of
    that excess over the calls after the first (their steps, observations, waits for a worker),
    STEP_OVERHEAD at least, and where no call after the first says; the first alone waits for the
    program's reference run (C++'s EpisodeTimer::AddCall)."""
    excess = [seen - work for seen, work in calls[1:] if work > 0]
    return max(STEP_OVERHEAD, float(np.median(excess))) if excess else STEP_OVERHEAD


def _kernel_call(call: Call, overhead: float) -> float:
    """A timing call's seconds as the estimates read them: as the client saw it, or, where the
    server said what measuring the kernel took its worker, no more than that and `overhead`: a
    program's first timing waits for its reference run and buffers, which no re-timing pays
    again (C++'s EpisodeTimer::KernelCall)."""
    seen, work = call
    return min(seen, work + overhead) if work > 0 else seen


def _typical(calls: Sequence[Call]) -> float:
    """The median of the timing calls `calls` as the estimates read them (0.0 before any)."""
    if not calls:
        return 0.0
    overhead = _overhead(calls)
    return float(np.median([_kernel_call(c, overhead) for c in calls]))


def _retiming_time(call: Call, calls: Sequence[Call]) -> float:
    """What re-timing a kernel whose timing call was `call` may take (the peak beside it aside):
    as long as that call (_kernel_call), or as the typical call of all timing calls `calls`
    (_typical), or LEAST_RETIMING, where longer (a kernel the server had cached came back at
    once, and an adaptive timing may stop early; a re-timing runs the full budget); not the
    longest call, which a slow candidate sets (C++'s EpisodeTimer::RetimingTime)."""
    return max(_kernel_call(call, _overhead(calls)), _typical(calls), LEAST_RETIMING)


def _may_fold(ir: str) -> bool:
    """Whether a statement of `ir` may fold its window's rows (fold_L<p>): a sum or max of one
    operand (`max= ` or `+= `, neither `] * ` nor `] + `) whose last index steps by 2 (`2*`
    there, not `12*`: a CHW pool; a channels-last pool's last index is its channel). The server
    decides (CanFoldRows); a stride of 2 that only the tensor's extents make is missed. As C++'s
    MayFold."""
    for line in ir.split("\n"):
        for op in ("max= ", "+= "):
            rhs = line.partition(op)[2]
            if not rhs or "] * " in rhs or "] + " in rhs or "[" not in rhs:
                continue
            last = rhs.partition("[")[2].partition("]")[0].split(",")[-1]
            if re.search(r"(^|[^0-9])2\*", last.strip()):
                return True
    return False


def _may_mark(env: LoopToolEnv) -> bool:
    """Whether the program may take a statement mark the policy never takes: it assigns an
    output (a statement ` = `: stream_L<p>) or may fold a window (_may_fold: fold_L<p>)."""
    ir = str(env.observe(["ir"])["ir"])
    return "] = " in ir or _may_fold(ir)


def _mark_lines(ir: str, keyword: str) -> int:
    """The lines of an `ir` text that start with `keyword` (`stream ` or `fold `)."""
    return sum(line.startswith(keyword) for line in ir.split("\n"))


def _mark_all(env: LoopToolEnv) -> Optional[Tuple[List[str], LoopToolEnv]]:
    """The stream_L<p> that stream every output the program assigns (non-temporal stores) and
    the fold_L<p> that fold every stride-2 window's rows (both appended to loop_nest after the
    policy was trained, which never takes them), and a fork of `env` with them (the caller
    closes it); None where none is allowed (or _may_mark says none may be). As C++'s MarkAll:
    the actions the state allows, in order, each kept where it marks one more statement (a
    second loop of a marked statement would toggle the mark off); stream_L<p> until every
    statement that assigns (` = `) is streamed. ServiceError where a step fails."""
    ir = str(env.observe(["ir"])["ir"])
    if not ("] = " in ir or _may_fold(ir)):
        return None
    mask = np.asarray(env.observe(["action_mask"])["action_mask"], bool)
    names = env.action_space.names
    assigning = ir.count("] = ")
    counts = {"stream ": _mark_lines(ir, "stream "), "fold ": _mark_lines(ir, "fold ")}
    marked: Optional[LoopToolEnv] = None  # the state with the marks kept so far
    kept: List[str] = []
    try:
        for a in range(min(len(mask), len(names))):
            if not mask[a]:
                continue
            if names[a].startswith("stream_L") and counts["stream "] < assigning:
                keyword = "stream "
            elif names[a].startswith("fold_L"):
                keyword = "fold "
            else:
                continue
            fork = (marked if marked is not None else env).fork()
            try:
                fork.step(a, observation_spaces=[])
                now = _mark_lines(str(fork.observe(["ir"])["ir"]), keyword)
            except BaseException:
                fork.close()
                raise
            if now <= counts[keyword]:  # toggled a marked statement's mark off
                fork.close()
                continue
            previous, marked, counts[keyword] = marked, fork, now
            kept.append(names[a])
            if previous is not None:
                previous.close()
    except BaseException:
        if marked is not None:
            marked.close()
        raise
    return None if marked is None else (kept, marked)


def _time_marked(env: LoopToolEnv, actions: Sequence[str] = (),
                 timed: Sequence[Sequence[str]] = ()) -> Optional[Tuple[List[str], float]]:
    """The marks _mark_all sets on `env`'s state (reached by `actions`) and the GFLOPS of the
    state with them, timed once in a fork; None where none is allowed, where `actions` with them
    are among `timed` (a candidate timed already: the marked start), or where a step or the
    timing fails (the unmarked fastest stands). As C++'s EpisodeTimer::TryMarked."""
    try:
        marked = _mark_all(env)
    except ServiceError:
        return None  # as C++: the unmarked fastest stands
    if marked is None:
        return None
    if list(actions) + marked[0] in [list(t) for t in timed]:
        marked[1].close()
        return None
    try:
        return marked[0], float(marked[1].observe(["flops"])["flops"])
    except ServiceError:
        return None
    finally:
        marked[1].close()


def ranked_rollout(env: LoopToolEnv, uri: str, program: str, policy: loop_set.LoopSetPolicy,
                   count: int = 16, max_steps: int = 16, timed: int = 64,
                   seconds: float = 0.3,
                   pass_predicted_slower: float = PASS_PREDICTED_SLOWER) -> Rollout:
    """Waves of the likeliest episodes, `count` each (the first with the shorter candidates of
    EpisodeStream.short_candidates), ranked by the policy's cost model (its score less loss_weight
    times the episode's loss; only the greedy one when the policy has no cost model) and timed in
    that order (the start and its marked form right after the first, which is an episode where
    the cost model ranks a shorter candidate first), `timed` at most in all,
    the first whatever the time and the others while `seconds` from the start (less 5%) last, a
    candidate scored `pass_predicted_slower` below the fastest timed so far passed over; another
    wave (the next likeliest, played in half the time left, its
    timings stopping where the time left would no longer hold the re-timings) while that time holds
    two typical (median) timings; the two fastest re-timed where their re-timing (_retiming_time;
    the first also the peak beside it) still fits (each the faster of its timing and its re-timing);
    the fastest kept, or, where the program may take a statement mark (_may_mark) and a timing still
    fits, that one with stream_L<p> appended for every statement that assigns and fold_L<p> for
    every window that folds (_time_marked) where it times faster (the waves and re-timings keep time
    for it): `looptool tune --search=policy` with --policy_candidates=count --policy_timed=timed
    --policy_seconds=seconds (Python's first wave has no deadline, and its episodes take longer than
    C++'s, so fewer may be timed).
    ValueError: `count` or `timed` below 1, or `seconds` not above 0."""
    if count < 1:
        raise ValueError(f"ranked_rollout plays 1 episode or more a wave, not count={count}")
    if timed < 1 or not seconds > 0:
        raise ValueError(f"ranked_rollout times 1 episode or more within more than 0 s, not "
                         f"timed={timed} within seconds={seconds}")
    t0 = time.perf_counter()
    stop_timing = t0 + (1 - RETIME_RESERVE) * seconds  # the first wave's timings stop there
    stream = EpisodeStream(env, uri, program, policy, max_steps)
    wave = stream.next(count if policy.cost else 1)
    open_eps = list(wave)  # forks still open (closed at the end whatever happens)
    # Each kernel timed: (GFLOPS, its episode, its timing call), the fastest first after each
    # wave (stable: the earlier of equals first); only the RETIMED_FINALISTS' forks stay open from
    # wave to wave.
    measured: List[Tuple[float, Episode, Call]] = []
    score_of: Dict[int, float] = {}  # id(episode): the score of each ranked one timed
    calls: List[Call] = []  # every timing call
    marks: Optional[bool] = None  # the program's (_may_mark), asked once
    try:
        if policy.cost is not None and count > 1:
            shorter = stream.short_candidates(wave, rank=count)
            wave += shorter
            open_eps += shorter
        while wave:
            order = list(range(len(wave)))
            scores = None  # ranked (as C++ ranks every wave) where more than one or a later wave
            if policy.cost is not None and (len(wave) > 1 or measured):
                features = [json.loads(str(e.env.observe(["plan_features"])["plan_features"]))
                            for e in wave]
                ranked = policy.cost.predict(features) - policy.cost.loss_weight * np.array(
                    [e.loss for e in wave])
                order.sort(key=lambda i: -float(ranked[i]))  # stable: C++'s order on ties
                # The start and its marked form right after the best-ranked (C++'s
                # TimeEpisodeWaves), unless passed over as predicted far slower; where a shorter
                # candidate is the best-ranked, the best-ranked episode goes first (the first
                # timing has no fastest to cut it short, and a nest barely tiled may be slow).
                other = next((i for i in order if not wave[i].shorter), None)
                if wave[order[0]].shorter and other is not None:
                    order.remove(other)
                    order.insert(0, other)
                order = order[:1] + [i for i in order[1:] if wave[i].start] + [
                    i for i in order[1:] if not wave[i].start]
                scores = ranked
            for i in order:
                # Or where one more timing (as long as the fastest's re-timing), ending the
                # wave's other sessions and the fastest's marked timing would no longer fit.
                limit = stop_timing
                if measured and marks:
                    fastest_call = max(measured, key=lambda m: m[0])[2]
                    ending = max(0, len(open_eps) - RETIMED_FINALISTS)
                    limit = min(limit, t0 + seconds - 2 * _retiming_time(fastest_call, calls) -
                                MARK_STEPS - ending * END_SESSION)
                if len(measured) >= timed or (measured and time.perf_counter() >= limit):
                    break
                if scores is not None and measured:
                    anchor = score_of.get(id(max(measured, key=lambda m: m[0])[1]))
                    if anchor is not None and float(scores[i]) < anchor - pass_predicted_slower:
                        continue
                gflops, call = _timed(wave[i].env)
                calls.append(call)
                measured.append((gflops, wave[i], call))
                if scores is not None:
                    score_of[id(wave[i])] = float(scores[i])
                if marks is None:
                    marks = _may_mark(wave[i].env)
            measured.sort(key=lambda m: -m[0])
            finalists = [id(e) for _, e, _ in measured[:RETIMED_FINALISTS]]
            for e in [e for e in open_eps if id(e) not in finalists]:
                e.env.close()
            open_eps = [e for e in open_eps if id(e) in finalists]
            now = time.perf_counter()
            retimings = sum(_retiming_time(c, calls) for _, _, c in measured[:RETIMED_FINALISTS])
            if measured and marks is None:
                marks = _may_mark(measured[0][1].env)
            if measured and marks:  # and the fastest's marked timing
                retimings += _retiming_time(measured[0][2], calls) + MARK_STEPS
            stop_timing = min(t0 + (1 - RETIME_RESERVE) * seconds,
                              t0 + seconds - retimings - BESIDE_PEAK)
            if (policy.cost is None or len(measured) >= timed or stream.exhausted
                    or stop_timing - now < 2 * _typical(calls)):
                break
            wave = stream.next(count, until=now + (stop_timing - now) / 2)
            open_eps += wave
        # New timings stop RETIME_RESERVE of the budget early; the fastest RETIMED_FINALISTS are
        # then re-timed where their _retiming_time still fits (as C++'s TimeRankedEpisodes):
        # each kernel's GFLOPS the faster of its timing and re-timing.
        mark = _retiming_time(measured[0][2], calls) + MARK_STEPS if measured and marks else 0.0
        for k, (gflops, e, call) in enumerate(measured[:RETIMED_FINALISTS]):
            if (gflops <= 0 or time.perf_counter() - t0 + _retiming_time(call, calls) +
                    (BESIDE_PEAK if k == 0 else 0) + mark > seconds):
                break
            measured[k] = (max(gflops, e.env.remeasure()[0]), e, call)
        gflops, best, call = max(measured, key=lambda m: m[0])
        actions = list(best.actions)
        if (gflops > 0 and (marks if marks is not None else _may_mark(best.env))
                and time.perf_counter() - t0 + _retiming_time(call, calls) + MARK_STEPS
                <= seconds):
            variant = _time_marked(best.env, actions, [e.actions for _, e, _ in measured])
            if variant is not None and variant[1] > gflops:
                actions += variant[0]
                gflops = variant[1]
        return Rollout(actions, gflops, time.perf_counter() - t0)
    finally:
        for e in open_eps:
            e.env.close()
