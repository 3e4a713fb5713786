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
"""

import argparse
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

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
    mask = np.append(np.asarray(values[1], bool), True)
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
    index = {n: i for i, n in enumerate(env.action_space.names)}
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
          batch: int = 256, seed: int = 0, log: Any = None) -> List[float]:
    """Cross-entropy over the allowed actions; returns the mean loss of each epoch."""
    import torch
    torch.manual_seed(seed)
    obs, mask, target, weight = (torch.from_numpy(a) for a in data)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(epochs, 1))
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for epoch in range(epochs):
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
        if log is not None and (epoch % 25 == 0 or epoch == epochs - 1):
            log(f"epoch {epoch}: loss {losses[-1]:.4f}")
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
             max_steps: int = 16) -> List[Dict[str, Any]]:
    """Per program: the policy's greedy schedule and the best record's, both timed now."""
    env = LoopToolEnv(conn, action_space="loop_nest", observation_space=None, reward_space=None)
    rows = []
    try:
        for d in demos:
            r = rollout(env, _uri(d.program_id), d.program, policy, max_steps)
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


def expert_round(conn: Connection, demos: Sequence[Demo], policy: loop_set.LoopSetPolicy,
                 samples: int, temperature: float, seed: int,
                 max_steps: int = 16) -> Tuple[List[Demo], Dict[str, float]]:
    """One round of expert iteration's proposal step: per program of `demos` (rank 0 ones), the
    policy's greedy episode and `samples` sampled ones are timed beside the program's best demo,
    re-timed now; the fastest of them all becomes the program's rank-0 demonstration (the others
    of `demos` follow it). Returns the new demos and what happened (greedy / best ratio, the
    share of programs where a policy episode beat the records)."""
    rng = np.random.default_rng(seed)
    env = LoopToolEnv(conn, action_space="loop_nest", observation_space=None, reward_space=None)
    by_program: Dict[int, List[Demo]] = {}
    for d in demos:
        by_program.setdefault(d.program_id, []).append(d)
    out: List[Demo] = []
    greedy_ratios, improved = [], 0
    try:
        for pid, ds in by_program.items():
            best = ds[0]
            uri = _uri(pid)
            best_now = timed(env, uri, best.program, best.actions)
            episodes = [rollout(env, uri, best.program, policy, max_steps)]
            episodes += [rollout(env, uri, best.program, policy, max_steps, temperature, rng)
                         for _ in range(samples)]
            greedy_ratios.append(episodes[0].gflops / best_now if best_now > 0 else 1.0)
            top = max(episodes, key=lambda e: e.gflops)
            if top.gflops > 1.02 * best_now:  # beyond timing noise
                improved += 1
                # (its schedule too: replay() teaches it along the canonical path, not the
                # sampled episode's order, which would teach noise)
                out.append(Demo(pid, best.program, top.actions, top.gflops, 0, top.schedule))
                out += [Demo(d.program_id, d.program, d.actions, d.gflops, d.rank + 1) for d in ds]
            else:
                out += ds
    finally:
        env.close()
    return out, {"greedy_geomean": geomean(greedy_ratios),
                 "improved": improved / max(len(by_program), 1)}


def geomean(xs: Sequence[float]) -> float:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else 0.0


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
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--round-epochs", type=int, default=100)
    p.add_argument("--cost-epochs", type=int, default=80,
                   help="the cost model (plan_cost.py) trained on every train record and kept "
                        "in the policy file; 0: none")
    p.add_argument("--cost-hidden", default="128,128", help="its hidden layers")
    args = p.parse_args(argv)
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
            losses = train(net, data, args.epochs, args.lr, seed=args.seed,
                           log=lambda m: print(m, file=sys.stderr))
            history: List[Dict[str, Any]] = []
            for r in range(args.rounds):
                demos, stats = expert_round(conn, demos, net.to_policy(), args.samples,
                                            args.temperature, args.seed + r, args.max_steps)
                data = replay(conn, demos).arrays()
                losses += train(net, data, args.round_epochs, args.lr / 2, seed=args.seed + r)
                history.append(dict(stats, round=r, examples=int(len(data[2]))))
                print(f"round {r}: {json.dumps(history[-1])}", file=sys.stderr)
            cost: Optional[plan_cost.PlanCost] = None
            cost_stats: Dict[str, Any] = {}
            if args.cost_epochs > 0:
                cost, cost_stats = plan_cost.fit_records(
                    args.records, args.cost_epochs,
                    [int(h) for h in args.cost_hidden.split(",")], seed=args.seed)
                print(f"cost model: {json.dumps(cost_stats)}", file=sys.stderr)
            seconds = time.time() - t0
            policy = net.to_policy({
                "cost": cost_stats,
                "expert_iteration": history,
                "command": "python3 -m looptool.rl.imitate " + " ".join(argv or sys.argv[1:]),
                "records": os.path.basename(args.records), "seed": args.seed,
                "demonstrations": len(demos), "examples": int(len(data[2])),
                "epochs": args.epochs, "final_loss": losses[-1],
                "train_seconds": round(seconds, 1)})
            policy.cost = cost
            policy.save(args.out)
            print(f"train accuracy {accuracy(policy, data):.3f}; wrote {args.out}",
                  file=sys.stderr)
            val = best_demos(args.records, "validation", 1)[:args.validate]
            rows = evaluate(conn, val, policy, args.max_steps)
            for row in rows:
                print(f"{row['program_id']:5d} {row['ratio']:.3f} {row['policy_gflops']:8.2f} "
                      f"{row['record_gflops']:8.2f} {row['seconds']:.3f}s "
                      f"{' '.join(row['actions'])}")
            ratios = [row["ratio"] for row in rows if row["reproduced"]]
            print(json.dumps({"validation_programs": len(rows),
                              "records_not_reproduced": len(rows) - len(ratios),
                              "geomean": geomean(ratios),
                              "min": min(ratios, default=0), "below_0.8":
                              sum(1 for x in ratios if x < 0.8),
                              "mean_seconds": float(np.mean([r["seconds"] for r in rows]))
                              if rows else 0.0}))
    finally:
        if server is not None:
            server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
