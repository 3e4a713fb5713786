"""Imitation: a loop_set policy (loop_set.py) learns to build the best recorded schedules.

    PYTHONPATH=bazel-bin/client/python:client/python /usr/bin/python3 -m looptool.rl.imitate \
        --records=records.db --out=loop_set.json [--servers=HOST:PORT] [--top=3] [--epochs=300]

For each program of the records' train split, the `--top` fastest distinct schedules (by re-timed
GFLOPS where there is one) are replayed on a server from the untiled nest: every state on the way
gives a (loop_features, action_mask) -> action example, the final state -> stop. The network
learns them by cross-entropy over the allowed actions (a demonstration's rank r weighs 1/(r+1)).
Then every validation program is tuned greedily by the policy and its final state timed beside
the best recorded schedule's, in the same run: the table is the ratio of the two.

With --rounds=N, N rounds of expert iteration follow: per train program the policy's greedy
episode and --samples sampled ones (softmax at --temperature) are timed beside the recorded best
(re-timed in the same run); an episode faster than it (by 2%) becomes the program's first
demonstration; the network trains on the new set (--round-epochs, half the learning rate).
With --actors=N the proposals run on N Dask actors (a LocalCluster, or the cluster of
--scheduler), a task per program; a task lost for good costs only that program's proposal.

Imitation is checkpointed every --checkpoint-every epochs (<out>.checkpoint.pt: weights, Adam's
state, the schedule and the sampler's generator); --resume goes on from there and ends with the
weights of a run never stopped. --curve-every=N writes the learning curve (the greedy policy on
the validation programs every N epochs, against epochs, examples, environment steps and wall
time with the records' generation beside it) as <out's name>_curve.csv and .png. --progress (the
default on a terminal) shows a progress bar over the epochs.
"""

import argparse
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np
import numpy.typing as npt

from looptool import records as records_lib
from looptool.connection import Connection
from looptool.env import LoopToolEnv
from looptool.rl import loop_set, plan_cost, policy_file

Array = npt.NDArray[Any]
OBSERVE = [loop_set.OBSERVATION, "action_mask"]


@dataclass
class Demo:
    """A recorded schedule to imitate: its program and the actions that build it."""
    program_id: int
    program: str
    actions: List[str]
    gflops: float
    rank: int = 0   # 0: the program's fastest
    schedule: str = ""  # the compute and write lines of its ir ("" when unknown)


@dataclass
class Examples:
    obs: List[Array] = field(default_factory=list)
    mask: List[Array] = field(default_factory=list)    # NUM_ACTIONS + 1 (stop is always allowed)
    target: List[int] = field(default_factory=list)
    weight: List[float] = field(default_factory=list)
    program: List[int] = field(default_factory=list)

    def add(self, obs: Array, mask: Array, target: int, weight: float, program: int) -> None:
        self.obs.append(obs)
        self.mask.append(mask)
        self.target.append(target)
        self.weight.append(weight)
        self.program.append(program)

    def arrays(self) -> Tuple[Array, Array, Array, Array]:
        return (np.stack(self.obs).astype(np.float32), np.stack(self.mask).astype(bool),
                np.asarray(self.target, np.int64), np.asarray(self.weight, np.float32))


def best_demos(path: str, split: Optional[str], top: int = 1,
               kinds: Optional[Sequence[str]] = None, host: Optional[str] = None) -> List[Demo]:
    """The `top` fastest distinct schedules of every program of `split` (None: every split),
    fastest first, leaving out those whose actions are not all loop_nest's."""
    db = records_lib.connect(path)
    try:
        rows = db.execute(
            "SELECT program_id, program, actions, schedule, "
            "coalesce(retimed_gflops, gflops) AS g, benchmark, host_cpu FROM records "
            "WHERE ? IS NULL OR split = ? ORDER BY program_id, g DESC", (split, split)).fetchall()
    finally:
        db.close()
    out: List[Demo] = []
    seen: Dict[int, Set[str]] = {}
    known = set(loop_set.action_names())
    for pid, program, actions, schedule, g, benchmark, host_cpu in rows:
        if host is not None and host not in host_cpu:
            continue
        if kinds and records_lib._kind(benchmark) not in kinds:
            continue
        s = seen.setdefault(pid, set())
        names = json.loads(actions)
        if len(s) >= top or schedule in s or not set(names) <= known:
            continue  # (a cursor action an evolution seed took is not the policy's to take)
        out.append(Demo(pid, program, names, float(g), len(s), schedule))
        s.add(schedule)
    return out


_LOOP = re.compile(r"(\w+)\((\d+)(?: r (\d+))?((?: unroll| vectorize)*)\)")


def _orders(ir: str) -> Dict[int, List[Tuple[str, int, int, bool, bool]]]:
    """{statement: its compute loops (var, size, tail, unroll, vectorize)} from `ir` text."""
    out = {}
    for line in ir.splitlines():
        m = re.match(r"compute (\d+): (.*)$", line.strip())
        if m:
            out[int(m.group(1))] = [(v, int(n), int(t or 0), "unroll" in f, "vectorize" in f)
                                    for v, n, t, f in _LOOP.findall(m.group(2))]
    return out


def canonical_path(initial_ir: str, schedule: str) -> Optional[List[str]]:
    """The actions that build `schedule` (compute lines as `ir` prints them) from the untiled
    nest in one fixed order: per statement, each variable's tiles innermost first (every tile on
    the variable's outermost loop), then interchanges that place the loops outermost first, then
    the unroll and vectorize marks. None when the schedule is not so built (a tile size outside
    loop_nest's, or a tail on a loop that is not its variable's outermost). A search's path
    reaches the same schedule in whatever order its mutations came; imitating that order would
    teach noise, this order is one the policy can learn."""
    start, final = _orders(initial_ir), _orders(schedule)
    if not final:
        return None
    path: List[str] = []
    base = 0
    for stmt in sorted(start):
        init = [v for v, *_ in start[stmt]]
        want = final.get(stmt, start[stmt])
        current: List[Tuple[str, int]] = []  # (var, depth among the var's loops)
        for v in init:
            loops = [lp for lp in want if lp[0] == v]
            if not loops or any(lp[2] for lp in loops[1:]):
                return None
            level = base + len(current)
            for lp in reversed(loops[1:]):
                if lp[1] not in loop_set.TILE_SIZES:
                    return None
                path.append(f"tile_L{level}_{lp[1]}")
            current += [(v, i) for i in range(len(loops))]
        seen: Dict[str, int] = {}
        target = []
        for v, *_ in want:
            target.append((v, seen.get(v, 0)))
            seen[v] = seen.get(v, 0) + 1
        if sorted(target) != sorted(current):
            return None
        for i, key in enumerate(target):
            j = current.index(key)
            if j != i:
                path.append(f"interchange_L{base + j}_L{base + i}")
                current.insert(i, current.pop(j))
        for i, (_, _, _, unroll, vectorize) in enumerate(want):
            if unroll:
                path.append(f"unroll_L{base + i}")
            if vectorize:
                path.append(f"vectorize_L{base + i}")
        base += len(want)
    return path


def _schedule_lines(ir: str, prefixes: Tuple[str, ...] = ("compute ", "write ")) -> str:
    return "\n".join(ln.strip() for ln in ir.splitlines() if ln.strip().startswith(prefixes))


def _uri(program_id: int) -> str:
    return f"benchmark://user-v0/records_{program_id}"


def _state(values: Sequence[Any]) -> Tuple[Array, Array]:
    obs = np.asarray(values[0], np.float32).reshape(-1)
    # The policy's actions (loop_nest's first NUM_ACTIONS; the space's later stream_L<p> and
    # fold_L<p> are not the policy's), then stop.
    mask = np.append(np.asarray(values[1], bool)[:loop_set.NUM_ACTIONS], True)
    return obs, mask


def _walk(env: LoopToolEnv, d: Demo, actions: Sequence[str], index: Dict[str, int],
          ex: Examples) -> str:
    """Replays `actions` from the untiled nest, adding an example per action that changes the
    state and one for stop; returns the final state's compute lines."""
    obs, mask = _state(env.reset(_uri(d.program_id), program=d.program,
                                 observation_spaces=OBSERVE))
    w = 1.0 / (d.rank + 1)
    for a in actions:
        if not mask[index[a]]:
            continue  # it would change nothing (the search's path kept a no-op)
        ex.add(obs, mask, index[a], w, d.program_id)
        values, _, _, info = env.step(a, observation_spaces=OBSERVE)
        if info["action_had_no_effect"]:
            raise RuntimeError(f"{a} changed nothing though the mask allowed it")
        obs, mask = _state(values)
    ex.add(obs, mask, loop_set.STOP, w, d.program_id)
    return _schedule_lines(str(env.observe(["ir"])["ir"]), ("compute ",))


def replay(conn: Connection, demos: Sequence[Demo], progress: bool = False,
           canonical: bool = True) -> Examples:
    """The examples of every demonstration (replayed on the server behind `conn`): along
    canonical_path() when it rebuilds the demonstration's compute nests (the write-back nest
    may come out split where the search's had merged it), else along its own path."""
    ex = Examples()
    env = LoopToolEnv(conn, action_space="loop_nest", observation_space=None, reward_space=None)
    index = {n: i for i, n in enumerate(env.action_space.names) if i < loop_set.NUM_ACTIONS}
    try:
        for n, d in enumerate(demos):
            path = None
            if canonical and d.schedule:
                env.reset(_uri(d.program_id), program=d.program, observation_spaces=[])
                path = canonical_path(str(env.observe(["ir"])["ir"]), d.schedule)
            if path is not None and all(a in index for a in path):
                trial = Examples()
                if _walk(env, d, path, index, trial) == _schedule_lines(d.schedule, ("compute ",)):
                    for row in zip(trial.obs, trial.mask, trial.target, trial.weight,
                                   trial.program):
                        ex.add(*row)
                    continue
            _walk(env, d, d.actions, index, ex)
            if progress and n % 50 == 0:
                print(f"replayed {n}/{len(demos)} demonstrations", file=sys.stderr)
    finally:
        env.close()
    return ex


def train(net: Any, data: Tuple[Array, Array, Array, Array], epochs: int, lr: float = 1e-3,
          batch: int = 256, seed: int = 0, log: Any = None,
          on_epoch: Optional[Callable[[int, float, Callable[[], Dict[str, Any]]], None]] = None,
          resume: Optional[Dict[str, Any]] = None, progress: bool = False) -> List[float]:
    """Cross-entropy over the allowed actions; returns the mean loss of each epoch.

    After each epoch, on_epoch(epoch, loss, state) where state() is everything `resume` needs to
    go on as if never stopped: the weights, Adam's moments, the cosine schedule, the sampler's
    generator and the losses so far (train(..., resume=state()) on a network of the same shape
    ends with the same weights, bit for bit, as the run that was not stopped)."""
    import torch
    torch.manual_seed(seed)
    obs, mask, target, weight = (torch.from_numpy(a) for a in data)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(epochs, 1))
    gen = torch.Generator().manual_seed(seed)
    losses: List[float] = []
    first = 0
    if resume is not None:
        net.load_state_dict(resume["net"])
        opt.load_state_dict(resume["opt"])
        sched.load_state_dict(resume["sched"])
        gen.set_state(resume["gen"])
        losses = list(resume["losses"])
        first = int(resume["epoch"])

    def state() -> Dict[str, Any]:
        return {"epoch": len(losses), "net": net.state_dict(), "opt": opt.state_dict(),
                "sched": sched.state_dict(), "gen": gen.get_state(), "losses": list(losses)}

    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=epochs, initial=first, unit="epoch", file=sys.stderr)
    for epoch in range(first, epochs):
        perm = torch.randperm(len(target), generator=gen)
        total, count = 0.0, 0
        for i in range(0, len(perm), batch):
            idx = perm[i:i + batch]
            logits = net(obs[idx]).masked_fill(~mask[idx], -1e9)
            loss_each = torch.nn.functional.cross_entropy(logits, target[idx], reduction="none")
            loss = (loss_each * weight[idx]).sum() / weight[idx].sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss) * len(idx)
            count += len(idx)
        sched.step()
        losses.append(total / count)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.4f}")
        if log is not None and (epoch % 25 == 0 or epoch == epochs - 1):
            log(f"epoch {epoch}: loss {losses[-1]:.4f}")
        if on_epoch is not None:
            on_epoch(epoch, losses[-1], state)
    if bar is not None:
        bar.close()
    return losses


def accuracy(policy: loop_set.LoopSetPolicy, data: Tuple[Array, Array, Array, Array]) -> float:
    """Fraction of examples whose greedy choice is the demonstrated one."""
    obs, mask, target, _ = data
    s = np.where(mask, policy.scores(obs), -np.inf)
    return float((s.argmax(axis=1) == target).mean())


@dataclass
class Rollout:
    actions: List[str]
    gflops: float
    seconds: float
    schedule: str = ""  # the final state's compute lines (as Demo.schedule)


def _sample(policy: loop_set.LoopSetPolicy, obs: Array, mask: Array, temperature: float,
            rng: np.random.Generator) -> Optional[int]:
    """An action drawn from softmax(scores / temperature) over the allowed ones and stop (None)."""
    s = policy.scores(obs).astype(np.float64)
    allowed = np.flatnonzero(mask)  # mask includes stop at STOP
    if allowed.size == 0:
        return None
    z = s[allowed] / temperature
    prob = np.exp(z - z.max())
    a = int(rng.choice(allowed, p=prob / prob.sum()))
    return None if a == loop_set.STOP else a


def rollout(env: LoopToolEnv, uri: str, program: str, policy: loop_set.LoopSetPolicy,
            max_steps: int = 16, temperature: float = 0.0,
            rng: Optional[np.random.Generator] = None) -> Rollout:
    """An episode from the untiled nest, greedy (temperature 0) or sampled, of one action at
    least, stopping when it comes back to a state; the final state is timed (flops
    observation)."""
    t0 = time.perf_counter()
    obs, mask = _state(env.reset(uri, program=program, observation_spaces=OBSERVE))
    names = env.action_space.names
    actions: List[str] = []
    visited: Set[bytes] = set()
    for step in range(max_steps):
        if obs.tobytes() in visited:
            break  # back in a state it has been in: stop (as client/cpp/search/policy_episode.cc)
        visited.add(obs.tobytes())
        # (one action at least, as client/cpp/search/policy_episode.cc: never the untiled nest)
        allowed = mask if step else np.append(mask[:loop_set.NUM_ACTIONS], False)
        if temperature > 0:
            a = _sample(policy, obs, allowed, temperature, rng or np.random.default_rng())
        elif step == 0:
            a = policy_file.masked_argmax(policy.scores(obs)[:loop_set.NUM_ACTIONS],
                                          allowed[:loop_set.NUM_ACTIONS])
        else:
            a = policy.act(obs, mask[:loop_set.NUM_ACTIONS])
        if a is None:
            break
        actions.append(names[a])
        values, _, _, _ = env.step(a, observation_spaces=OBSERVE)
        obs, mask = _state(values)
    final = env.observe(["flops", "ir"])
    return Rollout(actions, float(final["flops"]), time.perf_counter() - t0,
                   _schedule_lines(str(final["ir"]), ("compute ",)))


def timed(env: LoopToolEnv, uri: str, program: str, actions: Sequence[str]) -> float:
    """GFLOPS of the state `actions` reach from the untiled nest."""
    env.reset(uri, program=program, observation_spaces=[])
    if actions:
        env.multistep(list(actions), observation_spaces=[])
    return float(env.observe(["flops"])["flops"])


def evaluate(conn: Connection, demos: Sequence[Demo], policy: loop_set.LoopSetPolicy,
             max_steps: int = 16,
             record_gflops: Optional[Dict[int, float]] = None) -> List[Dict[str, Any]]:
    """Per program: the policy's greedy schedule and the best record's, both timed now (the
    record's taken from `record_gflops` where it has the program: a curve times them once)."""
    env = LoopToolEnv(conn, action_space="loop_nest", observation_space=None, reward_space=None)
    rows = []
    try:
        for d in demos:
            r = rollout(env, _uri(d.program_id), d.program, policy, max_steps)
            if record_gflops is not None and d.program_id in record_gflops:
                best = record_gflops[d.program_id]
            else:
                best = timed(env, _uri(d.program_id), d.program, d.actions)
            rows.append({"program_id": d.program_id, "policy_gflops": r.gflops,
                         "record_gflops": best, "ratio": r.gflops / best if best > 0 else 0.0,
                         # the record's path replayed here at under half its recorded speed:
                         # no yardstick (left out of the summary, counted)
                         "reproduced": best >= 0.5 * d.gflops,
                         "seconds": r.seconds, "actions": r.actions, "record": d.actions})
    finally:
        env.close()
    return rows


@dataclass
class Proposal:
    """What expert iteration's proposal step made of one program."""
    demos: List[Demo]      # the program's demonstrations, a faster episode first if one was
    greedy_ratio: float    # the greedy episode over the best demo, both timed now
    improved: bool         # an episode beat the best demo (by 2%)
    steps: int             # environment steps the episodes took


def propose(env: LoopToolEnv, ds: Sequence[Demo], policy: loop_set.LoopSetPolicy, samples: int,
            temperature: float, rng: np.random.Generator, max_steps: int = 16) -> Proposal:
    """Expert iteration's proposal step for one program, whose demonstrations `ds` are ranked
    (rank 0 first): the policy's greedy episode and `samples` sampled ones are timed beside the
    best demo, re-timed now; the fastest of them all becomes the program's rank-0
    demonstration (the others follow it)."""
    best = ds[0]
    uri = _uri(best.program_id)
    best_now = timed(env, uri, best.program, best.actions)
    episodes = [rollout(env, uri, best.program, policy, max_steps)]
    episodes += [rollout(env, uri, best.program, policy, max_steps, temperature, rng)
                 for _ in range(samples)]
    steps = sum(len(e.actions) for e in episodes)
    greedy = episodes[0].gflops / best_now if best_now > 0 else 1.0
    top = max(episodes, key=lambda e: e.gflops)
    if top.gflops <= 1.02 * best_now:  # within timing noise
        return Proposal(list(ds), greedy, False, steps)
    # (its schedule too: replay() teaches it along the canonical path, not the sampled
    # episode's order, which would teach noise)
    out = [Demo(best.program_id, best.program, top.actions, top.gflops, 0, top.schedule)]
    out += [Demo(d.program_id, d.program, d.actions, d.gflops, d.rank + 1) for d in ds]
    return Proposal(out, greedy, True, steps)


def _program_seed(seed: int, program_id: int) -> int:
    """A program's own sampling seed in a round: the same wherever its proposal runs."""
    return (seed * 1_000_003 + program_id) % (1 << 63)


def dask_propose(server: str, ds: Sequence[Demo], policy: loop_set.LoopSetPolicy, samples: int,
                 temperature: float, seed: int, max_steps: int,
                 auth_token: Optional[str] = None) -> Proposal:
    """propose() as a Dask task, on the worker's Connection to `server`."""
    from looptool.rl import rollout as rollout_lib
    env = LoopToolEnv(rollout_lib.worker_connection(server, auth_token), action_space="loop_nest",
                      observation_space=None, reward_space=None)
    try:
        return propose(env, ds, policy, samples, temperature, np.random.default_rng(seed),
                       max_steps)
    finally:
        env.close()


@dataclass
class Actors:
    """Dask actors for expert iteration's proposals: `client` (a distributed.Client) runs one
    program's proposal per task against `server`. A task lost for good (its worker killed
    twice, a connection lost) costs only that program's proposal: it keeps its demos."""
    client: Any
    server: str
    auth_token: Optional[str] = None
    lost: int = 0
    last_error: str = ""


def expert_round(conn: Connection, demos: Sequence[Demo], policy: loop_set.LoopSetPolicy,
                 samples: int, temperature: float, seed: int, max_steps: int = 16,
                 actors: Optional[Actors] = None) -> Tuple[List[Demo], Dict[str, float]]:
    """One round of expert iteration's proposal step over every program of `demos` (propose()),
    here on `conn` or, given `actors`, on Dask actors, a task per program. Returns the new demos
    and what happened (greedy / best ratio, the share of programs where a policy episode beat
    the records, the episodes' steps, proposals lost)."""
    by_program: Dict[int, List[Demo]] = {}
    for d in demos:
        by_program.setdefault(d.program_id, []).append(d)
    proposals: List[Optional[Proposal]] = []
    lost = 0
    if actors is None:
        env = LoopToolEnv(conn, action_space="loop_nest", observation_space=None,
                          reward_space=None)
        try:
            for pid, ds in by_program.items():
                proposals.append(propose(env, ds, policy, samples, temperature,
                                         np.random.default_rng(_program_seed(seed, pid)),
                                         max_steps))
        finally:
            env.close()
    else:
        futures = [actors.client.submit(dask_propose, actors.server, ds, policy, samples,
                                        temperature, _program_seed(seed, pid), max_steps,
                                        actors.auth_token, pure=False, retries=2)
                   for pid, ds in by_program.items()]
        for f in futures:
            try:
                proposals.append(f.result())
            except Exception as e:  # KilledWorker, CommClosedError, a service error
                proposals.append(None)
                lost += 1
                actors.lost += 1
                actors.last_error = f"{type(e).__name__}: {e}"
    out: List[Demo] = []
    greedy_ratios, improved, steps = [], 0, 0
    for ds, proposal in zip(by_program.values(), proposals):
        if proposal is None:
            out += ds
            continue
        out += proposal.demos
        greedy_ratios.append(proposal.greedy_ratio)
        improved += proposal.improved
        steps += proposal.steps
    return out, {"greedy_geomean": geomean(greedy_ratios),
                 "improved": improved / max(len(by_program), 1), "steps": steps, "lost": lost}


def geomean(xs: Sequence[float]) -> float:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else 0.0


def summarize(rows: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """evaluate()'s rows as the validation line: geomean, min and count below 0.8 of the ratios
    whose record reproduced."""
    ratios = [row["ratio"] for row in rows if row["reproduced"]]
    return {"validation_programs": len(rows), "records_not_reproduced": len(rows) - len(ratios),
            "geomean": geomean(ratios), "min": min(ratios, default=0),
            "below_0.8": sum(1 for x in ratios if x < 0.8),
            "mean_seconds": float(np.mean([r["seconds"] for r in rows])) if rows else 0.0}


class Curve:
    """The learning curve: at chosen epochs the greedy policy on the validation programs (each
    record timed once, at the first point), against epochs, examples seen, environment steps and
    wall time (the records' generation and the curve's own evaluations apart), written as
    CSV and PNG after every point."""

    def __init__(self, conn: Connection, val: Sequence[Demo], records_path: str, out_dir: str,
                 name: str, max_steps: int) -> None:
        self.conn, self.val, self.max_steps = conn, list(val), max_steps
        self.out_dir, self.name = out_dir, name
        info = records_lib.summary(records_path)
        self.records_kernels = int(sum(info["kernels"].values()))  # type: ignore[attr-defined]
        self.records_seconds = float(info["span_seconds"])  # type: ignore[arg-type]
        self.record_gflops: Optional[Dict[int, float]] = None
        self.rows: List[Dict[str, Any]] = []
        self.evaluation_seconds = 0.0
        self.offset = 0.0

    def keep_until(self, epoch: int) -> None:
        """Resuming: the points already written up to `epoch` stay (their records' times do
        not: the next point times the records again)."""
        import csv
        path = os.path.join(self.out_dir, self.name + ".csv")
        if not os.path.exists(path):
            return
        with open(path, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                if row["phase"] == "imitation" and int(row["epoch"]) <= epoch:
                    self.rows.append({k: (v if k == "phase" else float(v))
                                      for k, v in row.items()})
        if self.rows:  # the stopped run's training time counts
            self.offset = float(self.rows[-1]["train_seconds"])

    def point(self, phase: str, epoch: int, examples_seen: int, env_steps: int, loss: float,
              policy: loop_set.LoopSetPolicy, since: float) -> Dict[str, Any]:
        t = time.time()
        rows = evaluate(self.conn, self.val, policy, self.max_steps, self.record_gflops)
        if self.record_gflops is None:
            self.record_gflops = {r["program_id"]: r["record_gflops"] for r in rows}
        v = summarize(rows)
        row = {"phase": phase, "epoch": epoch, "examples_seen": examples_seen,
               "env_steps": env_steps,
               "train_seconds": round(self.offset + t - since - self.evaluation_seconds, 1),
               "records_kernels": self.records_kernels,
               "records_seconds": round(self.records_seconds, 1), "loss": round(loss, 5),
               "validation_greedy_geomean": round(v["geomean"], 4),
               "validation_below_0.8": v["below_0.8"],
               # records whose path, timed here, ran under half their recorded speed (a slower
               # or busy host): left out of the geomean, which is 0 when all are
               "validation_records_not_reproduced": v["records_not_reproduced"]}
        self.evaluation_seconds += time.time() - t
        self.rows.append(row)
        self.write()
        return row

    def write(self) -> None:
        from looptool.rl import report
        os.makedirs(self.out_dir, exist_ok=True)
        report.write_csv(os.path.join(self.out_dir, self.name + ".csv"), self.rows)
        plt = report.pyplot()
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
        hours = [(self.records_seconds + r["train_seconds"]) / 3600 for r in self.rows]
        vals = [r["validation_greedy_geomean"] for r in self.rows]
        ax1.plot([r["epoch"] for r in self.rows], vals, "o-")
        ax1.set_xlabel("epoch")
        ax1.set_ylabel("greedy episode / best record (geomean)")
        ax2.plot(hours, vals, "o-")
        ax2.set_xlabel("hours, records' generation included")
        for ax in (ax1, ax2):
            ax.grid(alpha=0.3)
        fig.suptitle(f"loop_set imitation: {len(self.val)} validation programs; "
                     f"{report.host_label()}", fontsize=9)
        fig.tight_layout()
        fig.savefig(os.path.join(self.out_dir, self.name + ".png"), dpi=110)
        plt.close(fig)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m looptool.rl.imitate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", required=True)
    p.add_argument("--out", required=True, help="the policy file to write")
    p.add_argument("--servers", default="", help="HOST:PORT (default: a server started here)")
    p.add_argument("--top", type=int, default=3, help="schedules imitated per program")
    p.add_argument("--epochs", type=int, default=300)
    p.add_argument("--hidden", default="128,128")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=16)
    p.add_argument("--validate", type=int, default=1000, help="validation programs at most")
    p.add_argument("--rounds", type=int, default=0,
                   help="expert iteration rounds after imitation (propose, time, retrain)")
    p.add_argument("--samples", type=int, default=4, help="sampled episodes per program a round")
    p.add_argument("--actors", type=int, default=0,
                   help="Dask actors for the rounds' proposals (0: in this process)")
    p.add_argument("--scheduler", default="",
                   help="a Dask scheduler's address (tcp://HOST:8786) for the actors "
                        "(default: a LocalCluster of --actors workers)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--round-epochs", type=int, default=100)
    p.add_argument("--cost-epochs", type=int, default=80,
                   help="the cost model (plan_cost.py) trained on every train record and kept "
                        "in the policy file; 0: none")
    p.add_argument("--cost-hidden", default="128,128", help="its hidden layers")
    p.add_argument("--cost-episode-share", type=float, default=0.0,
                   help="its share of training pairs from runs over policy episodes "
                        "(plan_cost.py --episode-share)")
    p.add_argument("--curve-every", type=int, default=0,
                   help="every N epochs (and before the first, after the last and after each "
                        "round) the greedy policy on the validation programs: the learning "
                        "curve, <curve-dir>/<out's name>_curve.csv and .png; 0: none")
    p.add_argument("--curve-dir", default="", help="where the curve goes (default: beside --out)")
    p.add_argument("--checkpoint-every", type=int, default=25,
                   help="imitation epochs between checkpoints (<out>.checkpoint.pt); 0: none")
    p.add_argument("--resume", action="store_true",
                   help="continue imitation from <out>.checkpoint.pt where it stopped (the same "
                        "weights as a run never stopped)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction,
                   default=sys.stderr.isatty(),
                   help="a progress bar over the epochs (default: when stderr is a terminal)")
    args = p.parse_args(argv)
    if args.curve_every < 0 or args.checkpoint_every < 0:
        p.error("--curve-every and --checkpoint-every take 0 or more epochs")
    if args.actors < 0:
        p.error("--actors takes 0 or more")
    if not 0 <= args.cost_episode_share <= 1:
        p.error("--cost-episode-share must be between 0 and 1")
    if args.scheduler and not args.servers:
        p.error("--scheduler needs --servers: a Dask cluster's workers cannot reach a server "
                "started here on loopback")
    checkpoint_path = args.out + ".checkpoint.pt"
    if args.resume and not os.path.exists(checkpoint_path):
        p.error(f"--resume: no checkpoint at {checkpoint_path}")
    import torch
    from looptool.server import LocalServer
    torch.manual_seed(args.seed)
    t0 = time.time()
    server = None if args.servers else LocalServer()
    address = args.servers.split(",")[0] if args.servers else server.address  # type: ignore
    try:
        with Connection(address) as conn:
            demos = best_demos(args.records, "train", args.top)
            print(f"{len(demos)} demonstrations of {len({d.program_id for d in demos})} "
                  "programs", file=sys.stderr)
            data = replay(conn, demos, progress=True).arrays()
            print(f"{len(data[2])} examples", file=sys.stderr)
            net = loop_set.network(hidden=[int(h) for h in args.hidden.split(",")])
            val = best_demos(args.records, "validation", 1)[:args.validate]
            examples = int(len(data[2]))
            env_steps = examples  # states visited replaying the demonstrations
            curve = None
            if args.curve_every > 0:
                curve = Curve(conn, val, args.records,
                              args.curve_dir or os.path.dirname(os.path.abspath(args.out)),
                              os.path.splitext(os.path.basename(args.out))[0] + "_curve",
                              args.max_steps)
            resume = None
            if args.resume:
                import torch
                try:
                    resume = torch.load(checkpoint_path)
                except Exception as e:  # (pickle, zip and torch errors alike)
                    raise SystemExit(f"{checkpoint_path} is not an imitation checkpoint: {e}")
                keys = {"epoch", "epochs", "examples", "net", "opt", "sched", "gen", "losses"}
                if not isinstance(resume, dict) or not keys <= set(resume):
                    raise SystemExit(f"{checkpoint_path} is not an imitation checkpoint (it "
                                     f"lacks {sorted(keys - set(resume or {}))})")
                if resume.get("examples") != examples or resume.get("epochs") != args.epochs:
                    raise SystemExit(f"{checkpoint_path} is of a run of {resume.get('epochs')} "
                                     f"epochs over {resume.get('examples')} examples, not "
                                     f"{args.epochs} over {examples}: resume with its flags")
                print(f"resumed from {checkpoint_path} at epoch {resume['epoch']}",
                      file=sys.stderr)
                if curve is not None:
                    curve.keep_until(int(resume["epoch"]))
            elif curve is not None:
                curve.point("imitation", 0, 0, env_steps, float("nan"), net.to_policy(), t0)

            def on_epoch(epoch: int, loss: float, state: Callable[[], Dict[str, Any]]) -> None:
                done = epoch + 1
                if args.checkpoint_every and (done % args.checkpoint_every == 0
                                              or done == args.epochs):
                    import torch
                    tmp = checkpoint_path + ".tmp"
                    torch.save(dict(state(), examples=examples, epochs=args.epochs), tmp)
                    os.replace(tmp, checkpoint_path)
                if curve is not None and (done % args.curve_every == 0 or done == args.epochs):
                    row = curve.point("imitation", done, done * examples, env_steps, loss,
                                      net.to_policy(), t0)
                    print(f"curve: {json.dumps(row)}", file=sys.stderr)

            losses = train(net, data, args.epochs, args.lr, seed=args.seed,
                           log=lambda m: print(m, file=sys.stderr), on_epoch=on_epoch,
                           resume=resume, progress=args.progress)
            history: List[Dict[str, Any]] = []
            seen = args.epochs * examples
            actors: Optional[Actors] = None
            dask_client, dask_cluster = None, None
            if args.rounds > 0 and (args.actors > 0 or args.scheduler):
                from looptool.rl import cluster
                dask_client, dask_cluster = cluster.start_dask(max(args.actors, 1),
                                                               args.scheduler or None)
                actors = Actors(dask_client, address)
            try:
                for r in range(args.rounds):
                    demos, stats = expert_round(conn, demos, net.to_policy(), args.samples,
                                                args.temperature, args.seed + r, args.max_steps,
                                                actors)
                    if actors is not None and stats["lost"] and \
                            stats["lost"] == len({d.program_id for d in demos}):
                        raise SystemExit(f"round {r}: every proposal was lost on the Dask "
                                         f"actors (the last: {actors.last_error})")
                    data = replay(conn, demos).arrays()
                    env_steps += int(stats["steps"]) + int(len(data[2]))
                    losses += train(net, data, args.round_epochs, args.lr / 2,
                                    seed=args.seed + r)
                    seen += args.round_epochs * int(len(data[2]))
                    history.append(dict(stats, round=r, examples=int(len(data[2]))))
                    print(f"round {r}: {json.dumps(history[-1])}", file=sys.stderr)
                    if curve is not None:
                        curve.point(f"round {r}", args.epochs + (r + 1) * args.round_epochs,
                                    seen, env_steps, losses[-1], net.to_policy(), t0)
            finally:
                if dask_client is not None:
                    dask_client.close()
                if dask_cluster is not None:
                    dask_cluster.close()
            cost: Optional[plan_cost.PlanCost] = None
            cost_stats: Dict[str, Any] = {}
            if args.cost_epochs > 0:
                cost, cost_stats = plan_cost.fit_records(
                    args.records, args.cost_epochs,
                    [int(h) for h in args.cost_hidden.split(",")], seed=args.seed,
                    episode_share=args.cost_episode_share)
                print(f"cost model: {json.dumps(cost_stats)}", file=sys.stderr)
            seconds = time.time() - t0 - (curve.evaluation_seconds if curve else 0.0)
            policy = net.to_policy({
                "cost": cost_stats,
                "expert_iteration": history,
                "command": "python3 -m looptool.rl.imitate " + " ".join(argv or sys.argv[1:]),
                "records": os.path.basename(args.records), "seed": args.seed,
                # the ISAs its demonstrations were timed at (a built-in policy serves servers
                # of that ISA: client/cpp/policy.h's LoopSetFor)
                "records_isa": ",".join(records_lib.isas(args.records)),
                "demonstrations": len(demos), "examples": int(len(data[2])),
                "epochs": args.epochs, "final_loss": losses[-1],
                "train_seconds": round(seconds, 1)})
            policy.cost = cost
            policy.save(args.out)
            print(f"train accuracy {accuracy(policy, data):.3f}; wrote {args.out}",
                  file=sys.stderr)
            rows = evaluate(conn, val, policy, args.max_steps)
            for row in rows:
                print(f"{row['program_id']:5d} {row['ratio']:.3f} {row['policy_gflops']:8.2f} "
                      f"{row['record_gflops']:8.2f} {row['seconds']:.3f}s "
                      f"{' '.join(row['actions'])}")
            print(json.dumps(summarize(rows)))
    finally:
        if server is not None:
            server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
