"""Trains a tuning policy by distributed RL over LoopTool servers.

    export PYTHONPATH=bazel-bin/client/python:client/python
    export LOOPTOOL_SERVER=bazel-bin/service/looptool-server
    /usr/bin/python3 -m looptool.rl.train --algo=apex-dqn --dataset=mm64_256_16_range-v0 \
        --time-limit=3600 --actors=2 --timing-cores=1 --out=runs/dqn

Actors are Dask tasks (a LocalCluster here, or `--scheduler=tcp://HOST:8786`) that play episodes
on the servers (`--servers=HOST:PORT,...`, else one started here with `--timing-cores` kernel
workers) with the learner's latest weights; the learner and the replay live in this process.
Episodes use the dataset's train split only; the greedy policy is evaluated on its test split
(every `--eval-every` seconds on `--eval-count` benchmarks, and at the end on
`--final-test-count` of them and `--final-offgrid-count` of matmul_offgrid-v0), every list as
the first server serves it. Writes to `--out`: policy.json (what `looptool tune
--search=policy --policy=FILE` reads), checkpoint.pt (`--resume` continues from it), curve.csv/png,
eval.csv/md/png and train.log. A progress bar (tqdm) shows steps, steps/s and the latest numbers.
"""

import argparse
import dataclasses
import json
import os
import shlex
import signal
import sys
import threading
import time
from types import FrameType
from typing import IO, Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from looptool import auth
from looptool.connection import Connection
from looptool.errors import ServiceError
from looptool.server import ServerStartError
from looptool.rl import apex_dqn
from looptool.rl import benchmarks as benchmarks_lib
from looptool.rl import cluster
from looptool.rl import evaluate as evaluate_lib
from looptool.rl import ppo
from looptool.rl.learner import Learner
from looptool.rl import replay as replay_lib
from looptool.rl import report
from looptool.rl import sketch_value

ALGOS = ("apex-dqn", "ppo", "sketch-value")
MAX_ACTORS = 256


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Train a LoopTool tuning policy (Ape-X DQN, PPO, or a sketch value).")
    p.add_argument("--algo", choices=ALGOS, default="apex-dqn")
    p.add_argument("--dataset", default=benchmarks_lib.DATASET)
    p.add_argument("--action-space", default="loop_tune", choices=("loop_tune", "loop_tool"),
                   help="loop_tune (LoopTune's 7 actions, as the paper trains) or loop_tool "
                        "(sketch-value always chooses among loop_nest sketches)")
    p.add_argument("--steps", type=int, default=0, help="environment steps to train (0: no cap)")
    p.add_argument("--time-limit", type=float, default=0, help="seconds to train (0: no cap)")
    p.add_argument("--actors", type=int, default=2)
    p.add_argument("--episodes-per-call", type=int, default=2)
    p.add_argument("--timing-cores", type=int, default=1,
                   help="kernel workers of the local server (its last CPUs)")
    p.add_argument("--servers", default="", help="HOST:PORT,... (default: start one here)")
    p.add_argument("--auth-token-file", default="",
                   help="a file whose first line is the token --servers want (sent by the "
                        "learner and every actor)")
    p.add_argument("--scheduler", default="", help="tcp://HOST:8786 (default: a LocalCluster)")
    p.add_argument("--max-steps", type=int, default=10, help="actions per episode")
    p.add_argument("--reward", choices=replay_lib.REWARDS, default="dgflops_peak")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hidden", default="128,128")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--gamma", type=float, default=0.95)
    p.add_argument("--learning-starts", type=int, default=None)
    p.add_argument("--ppo-batch-episodes", type=int, default=64, help="ppo: episodes per update")
    p.add_argument("--out", default="")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    p.add_argument("--checkpoint-every", type=float, default=60)
    p.add_argument("--eval-every", type=float, default=120)
    p.add_argument("--eval-count", type=int, default=8)
    p.add_argument("--final-test-count", type=int, default=25)
    p.add_argument("--final-offgrid-count", type=int, default=12)
    p.add_argument("--log-every", type=float, default=10)
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.steps <= 0 and args.time_limit <= 0:
        p.error("give --steps or --time-limit (or both)")
    if not 1 <= args.actors <= MAX_ACTORS:
        p.error(f"--actors must be 1..{MAX_ACTORS}")
    if not 1 <= args.episodes_per_call <= 1000 or not 1 <= args.max_steps <= 1000:
        p.error("--episodes-per-call and --max-steps must be 1..1000")
    try:
        hidden = [int(h) for h in args.hidden.split(",")]
    except ValueError:
        hidden = []
    if not hidden or not all(1 <= h <= 4096 for h in hidden):
        p.error(f"--hidden takes layer widths in 1..4096, e.g. 128,128; got {args.hidden!r}")
    if args.ppo_batch_episodes < 1 or args.eval_count < 0:
        p.error("--ppo-batch-episodes must be at least 1 and --eval-count at least 0")
    args.auth_token = None
    if args.auth_token_file:
        try:
            args.auth_token = auth.read_auth_token_file(args.auth_token_file)
        except ValueError as e:
            p.error(f"--auth-token-file: {e}")
    servers = [s for s in args.servers.split(",") if s]
    if len(servers) > args.actors:
        # Actor i tunes on servers[i % len(servers)]: the rest would sit idle.
        p.error(f"--actors={args.actors} is fewer than the {len(servers)} --servers: actor i "
                f"uses server i mod {len(servers)}, so give at least one actor per server")
    if not args.servers:
        try:
            cluster.default_timing_cores(args.timing_cores)
        except ValueError as e:
            p.error(f"--timing-cores: {e}")
    if args.algo == "sketch-value":
        args.action_space = sketch_value.SPACE
    args.out = args.out or os.path.join("runs", args.algo)
    return args


def make_learner(args: argparse.Namespace, input_size: int, num_actions: int) -> Learner:
    hidden = tuple(int(h) for h in args.hidden.split(","))
    if args.algo == "sketch-value":
        sketch = sketch_value.SketchValueConfig(hidden=hidden)
        if args.lr is not None:
            sketch.lr = args.lr
        if args.learning_starts is not None:
            sketch.learning_starts = args.learning_starts
        return sketch_value.SketchValueLearner(input_size, 1, sketch, args.seed)
    if args.algo == "apex-dqn":
        apex = apex_dqn.ApexConfig(hidden=hidden, gamma=args.gamma, reward=args.reward)
        if args.lr is not None:
            apex.lr = args.lr
        if args.learning_starts is not None:
            apex.learning_starts = args.learning_starts
        return apex_dqn.ApexLearner(input_size, num_actions, apex, args.seed, args.action_space)
    c = ppo.PPOConfig(hidden=hidden, gamma=args.gamma, reward=args.reward,
                      batch_episodes=args.ppo_batch_episodes)
    if args.lr is not None:
        c.lr = args.lr
    return ppo.PPOLearner(input_size, num_actions, c, args.seed, args.action_space)


class Trainer:
    """The driver: keeps actors busy, feeds the learner, logs, evaluates, checkpoints."""

    def __init__(self, args: argparse.Namespace, addresses: Sequence[str], dask_client: Any,
                 log: Callable[[str], None]) -> None:
        import torch
        torch.set_num_threads(1)
        self.args = args
        self.log = log
        self.addresses = list(addresses)
        self.connections = {a: Connection(a, auth_token=args.auth_token)
                            for a in addresses}
        # The first server's lists (every server serves the same datasets).
        self.connection = self.connections[self.addresses[0]]
        spaces = self.connection.spaces()
        self.num_actions = len(spaces.action_space(args.action_space))
        self.train_set = benchmarks_lib.split(self.connection, "train", args.dataset)
        self.input_size = self._probe_input_size()  # loops_tensor's width: the server's max_loops
        self.learner = make_learner(args, self.input_size, self.num_actions)
        self.pool = cluster.ActorPool(dask_client, addresses, args.actors, args.auth_token)
        self.by_server = {a: [b for b in self.train_set if cluster.route(b, addresses) == a]
                          for a in addresses}
        test = benchmarks_lib.split(self.connection, "test", args.dataset)
        self.eval_set = [("test", test[i * len(test) // args.eval_count])
                         for i in range(args.eval_count)]
        self.rng = np.random.default_rng(args.seed)
        self.env_steps = 0
        self.episodes = 0
        self.elapsed = 0.0          # training seconds, over every resumed run
        self.curve: List[Dict[str, Any]] = []
        self.recent_final: List[float] = []      # training episodes' final fraction of peak
        self.recent_loss: List[float] = []
        self.checkpoint = os.path.join(args.out, "checkpoint.pt")

    def _probe_input_size(self) -> int:
        from looptool import LoopToolEnv
        bench = self.train_set[0]
        with LoopToolEnv(self.connections[cluster.route(bench, self.addresses)], bench.uri,
                         action_space=self.args.action_space, reward_space=None) as env:
            return int(np.asarray(env.reset()).size)

    # --- checkpoints ----------------------------------------------------------------------------

    def save_checkpoint(self) -> None:
        import torch
        state = {"algo": self.args.algo, "learner": self.learner.state_dict(),
                 "env_steps": self.env_steps, "episodes": self.episodes,
                 "elapsed": self.elapsed, "curve": self.curve,
                 "rng": self.rng.bit_generator.state}
        tmp = self.checkpoint + ".tmp"
        torch.save(state, tmp)
        os.replace(tmp, self.checkpoint)

    def load_checkpoint(self) -> None:
        import torch
        state = torch.load(self.checkpoint)
        if state["algo"] != self.args.algo:
            raise SystemExit(f"{self.checkpoint} is a {state['algo']} run, not {self.args.algo}")
        self.learner.load_state_dict(state["learner"])
        self.env_steps, self.episodes = state["env_steps"], state["episodes"]
        self.elapsed, self.curve = state["elapsed"], state["curve"]
        self.rng.bit_generator.state = state["rng"]
        kept = self.learner.kept_replay()
        self.log(f"resumed from {self.checkpoint}: {self.env_steps} steps, "
                 f"{self.elapsed:.0f} s trained, {kept} transitions in the replay buffer")

    # --- the loop -------------------------------------------------------------------------------

    def _submit(self, actor: int) -> None:
        server = self.pool.server_of(actor)
        pool = self.by_server[server]
        picks = [pool[i] for i in self.rng.integers(len(pool), size=self.args.episodes_per_call)]
        self.pool.submit(actor, picks, self.learner.policy(), self.learner.mode,
                         self.learner.epsilon(actor, self.args.actors), self.args.max_steps,
                         int(self.rng.integers(1 << 31)))

    def _finished(self) -> bool:
        a = self.args
        return bool((a.steps > 0 and self.env_steps >= a.steps)
                    or (a.time_limit > 0 and self.elapsed >= a.time_limit))

    def evaluate(self, sets: evaluate_lib.Sets) -> List[Dict[str, Any]]:
        return evaluate_lib.evaluate(self.connections, sets, self.learner.policy(),
                                     self.args.max_steps)

    def run(self) -> None:
        a = self.args
        progress = None
        if not a.no_progress:
            from tqdm import tqdm
            progress = tqdm(total=a.steps or None, initial=self.env_steps, unit="step",
                            dynamic_ncols=True, desc=a.algo)
        start = time.monotonic()
        base_elapsed = self.elapsed
        last_log = last_eval = last_ckpt = start
        window_steps, window_start = 0, start
        while not self._finished():
            for actor in self.pool.idle():
                if self.learner.wants_episodes(len(self.pool.busy) * a.episodes_per_call):
                    self._submit(actor)
            results = self.pool.done(block=False)
            for _, r in results:
                if r is None:
                    continue
                self.learner.add(r.episodes)
                for e in r.episodes:
                    self.recent_final.append(e.final_gflops / e.peak)
                self.recent_final = self.recent_final[-200:]
                self.env_steps += r.steps
                window_steps += r.steps
                self.episodes += len(r.episodes)
                if progress is not None:
                    progress.update(r.steps)
            if not results:
                if self.learner.can_update():
                    self.recent_loss.append(self.learner.update())
                    self.recent_loss = self.recent_loss[-200:]
                else:
                    self.pool.wait(0.05)
            now = time.monotonic()
            self.elapsed = base_elapsed + now - start
            eval_value = None
            if a.eval_every > 0 and now - last_eval >= a.eval_every:
                rows = self.evaluate(self.eval_set)
                eval_value = evaluate_lib.geomean([r["fraction_of_peak"] for r in rows])
                last_eval = time.monotonic()
            if now - last_log >= a.log_every or eval_value is not None:
                self._log_row(now - window_start, window_steps, eval_value, progress)
                last_log, window_steps, window_start = now, 0, now
            if a.checkpoint_every > 0 and now - last_ckpt >= a.checkpoint_every:
                self.save_checkpoint()
                last_ckpt = time.monotonic()
        self.pool.drain()
        if window_steps or not self.curve:
            self._log_row(time.monotonic() - window_start, window_steps, None, progress)
        if progress is not None:
            progress.close()
        self.save_checkpoint()

    def _log_row(self, seconds: float, steps: int, eval_value: Optional[float],
                 progress: Any) -> None:
        """One row of the learning curve (curve.csv), logged and shown on the progress bar."""
        row = {
            "env_steps": self.env_steps, "seconds": round(self.elapsed, 1),
            "episodes": self.episodes, "updates": self.learner.updates,
            "steps_per_second": round(steps / max(seconds, 1e-9), 1),
            "train_fraction_of_peak": round(evaluate_lib.geomean(self.recent_final), 4)
            if self.recent_final else "",
            "loss": round(float(np.mean(self.recent_loss)), 5) if self.recent_loss else "",
            "eval_fraction_of_peak": round(eval_value, 4) if eval_value else "",
            "lost_calls": self.pool.lost, "dropped_episodes": self.pool.errors,
        }
        self.curve.append(row)
        self.log(json.dumps(row))
        if progress is not None:
            progress.set_postfix(peak=row["train_fraction_of_peak"],
                                 eval=row["eval_fraction_of_peak"], lost=self.pool.lost)


def _exit_on_sigterm(signum: int, frame: Optional[FrameType]) -> None:
    raise SystemExit(128 + signum)  # unwinds: the local server and the Dask cluster are stopped


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "train.log"), "a", encoding="utf-8") as log_file:
        try:
            return _main(args, argv, log_file)
        except (ServiceError, ServerStartError) as e:
            # An unreachable or failing server: say so in one line, as argparse does.
            print(f"looptool.rl.train: error: {e}", file=sys.stderr)
            return 1


def _main(args: argparse.Namespace, argv: Optional[Sequence[str]], log_file: IO[str]) -> int:

    def log(msg: str) -> None:
        log_file.write(f"{time.strftime('%H:%M:%S')} {msg}\n")
        log_file.flush()

    command = "/usr/bin/python3 -m looptool.rl.train " + " ".join(
        shlex.quote(x) for x in (sys.argv[1:] if argv is None else argv))
    log(f"command: {command}")
    wall = time.monotonic()
    with cluster.Servers([s for s in args.servers.split(",") if s],
                         args.timing_cores) as servers:
        dask_client, local_cluster = cluster.start_dask(args.actors, args.scheduler or None)
        try:
            trainer = Trainer(args, servers.addresses, dask_client, log)
            if args.resume and os.path.exists(trainer.checkpoint):
                trainer.load_checkpoint()
            trainer.run()
            steps_per_second = trainer.env_steps / max(trainer.elapsed, 1e-9)
            meta = {
                "algo": args.algo, "command": command, "seed": args.seed,
                "dataset": args.dataset, "split": "train",
                "env_steps": trainer.env_steps, "episodes": trainer.episodes,
                "updates": trainer.learner.updates,
                "training_seconds": round(trainer.elapsed, 1),
                "steps_per_second": round(steps_per_second, 1),
                "actors": args.actors, "timing_cores": servers.timing_cores,
                "reward": args.reward, "config": dataclasses.asdict(trainer.learner.config),
                "date": time.strftime("%Y-%m-%d"),
            }
            policy = trainer.learner.policy(meta=meta)
            policy.save(os.path.join(args.out, "policy.json"))
            sets = evaluate_lib.default_sets(trainer.connection, args.final_test_count,
                                             args.final_offgrid_count, args.dataset)
            rows = trainer.evaluate(sets) if sets else []
            host = report.host_label(rows[0]["peak"] if rows else None)
            report.learning_curve(args.out, trainer.curve,
                                  f"{args.algo} on {args.dataset} (train split), "
                                  f"{args.actors} actors, {trainer.env_steps} steps\n{host}")
            how = ("one sketch chosen" if args.algo == "sketch-value"
                   else f"{args.max_steps} steps")
            report.evaluation_table(args.out, rows, f"{args.algo} policy, greedy, {how}\n{host}")
            summary = {"env_steps": trainer.env_steps, "episodes": trainer.episodes,
                       "updates": trainer.learner.updates,
                       "training_seconds": round(trainer.elapsed, 1),
                       "steps_per_second": round(steps_per_second, 1),
                       "lost_calls": trainer.pool.lost,
                       "dropped_episodes": trainer.pool.errors,
                       "wall_seconds": round(time.monotonic() - wall, 1)}
            for which in ("test", "offgrid"):
                sel = [r["fraction_of_peak"] for r in rows if r["set"] == which]
                if sel:
                    summary[f"{which}_fraction_of_peak"] = round(evaluate_lib.geomean(sel), 4)
            log("summary: " + json.dumps(summary))
            with open(os.path.join(args.out, "summary.json"), "w", encoding="utf-8") as f:
                json.dump(summary, f, indent=1)
            print(json.dumps(summary))
        finally:
            dask_client.close()
            if local_cluster is not None:
                local_cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
