"""Tuning a model's tasks on LoopTool servers through Dask, then exporting their kernels.

Each task is tuned in *slices*: a Dask task (`run_slice`) runs one `looptool tune` of the task's
program on one server for a slice of seconds with the schedule store, so a slice starts from the
best schedule stored for the server's CPU and keeps what it finds. The driver (`tune_tasks`)
keeps one slice in flight per server and chooses the next task with Ansor's scheduler
(looptool.model.allot): every task once, then by weight and current latency, until the time
limit; a slice is not started past the limit (first slices aside: every task gets one).

Routing is training's (looptool.rl.cluster): a task goes to the server its name hashes to among
the servers still answering; a server with none of its tasks to run takes the best of any.

Faults: a Dask worker killed mid-slice is restarted by its nanny and Dask reruns the slice; a
slice that still fails is put back. A slice that fails on a server is put back after a probe of
that server (GetVersion): a server that does not answer is dropped for the rest of the run and its
tasks go to the others; a task whose slices fail twice on servers that answer is reported failed
with the error, except that a slice too short for the start kernel's first measurement (a big
untuned layer) only doubles that task's slice, up to 64 s. A slice that ends without storing
its schedule (its server killed before the re-time) probes the server the same way, and so does
the end of the run, so the export never goes to a server that died. Every task is reported once.

The store must be a file every Dask worker can open (a LocalCluster's workers share this machine;
with --scheduler, a path on a shared filesystem). The kernels are exported at the end by
`looptool export --store` against one server that still answers, which times each again.
"""

import dataclasses
import json
import os
import subprocess
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from looptool.model.allot import Allotment
from looptool.model.extract import Plan
from looptool.server import default_cli

MAX_SLICE_SECONDS = 64.0


@dataclasses.dataclass
class SliceResult:
    """What one slice found: the best schedule's GFLOPS and where it was timed, or an error."""
    task: str
    server: str
    seconds: float                  # wall time of the slice
    gflops: float = 0.0
    peak_gflops: float = 0.0
    host_cpu: str = ""
    actions: List[str] = dataclasses.field(default_factory=list)
    kept: bool = False              # the store holds a schedule of the task after the slice
    error: str = ""


def run_slice(cli: str, server: str, task: str, program: str, seconds: float, store: str,
              auth_token_file: str = "", seed: int = 0) -> SliceResult:
    """One `looptool tune` of `program` (as <task>.lt) on `server` for `seconds` (a Dask task)."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="looptool-slice-") as d:
        path = os.path.join(d, task + ".lt")
        with open(path, "w") as f:
            f.write(program)
        cmd = [cli, "tune", f"--server={server}", f"--benchmark={path}",
               f"--time_limit={seconds:.3f}", f"--seed={seed}", "--json", f"--store={store}"]
        if auth_token_file:
            cmd.append(f"--auth_token_file={auth_token_file}")
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 180)
        except subprocess.TimeoutExpired:
            return SliceResult(task, server, time.monotonic() - start,
                               error=f"looptool tune ran past {seconds + 180:.0f} s")
        except OSError as e:
            return SliceResult(task, server, time.monotonic() - start,
                               error=f"cannot run {cli}: {e}")
    wall = time.monotonic() - start
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        why = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        return SliceResult(task, server, wall, error=why)
    r = json.loads(lines[-1])
    if "error" in r:
        return SliceResult(task, server, wall, error=f"{r.get('code', '')}: {r['error']}")
    # Kept: stored now, or replayed from the store (a search cut short, e.g. by its server
    # dying before it re-timed its best, is not stored).
    kept = bool(r.get("stored")) or int(r.get("stored_prefix", 0)) > 0
    return SliceResult(task, server, wall, gflops=float(r["gflops"]),
                       peak_gflops=float(r["peak_gflops"]), host_cpu=str(r.get("host_cpu", "")),
                       actions=list(r.get("actions", [])), kept=kept)


def answers(server: str, auth_token: Optional[str] = None, timeout: float = 5.0) -> bool:
    """Whether the server answers GetVersion within `timeout` seconds."""
    from looptool.connection import Connection
    try:
        with Connection(server, timeout=timeout, auth_token=auth_token) as c:
            c.get_version(timeout=timeout)
        return True
    except Exception:  # ServiceError, grpc errors: not answering is all that matters here
        return False


def route(task: str, servers: Sequence[str]) -> str:
    """The server a task goes to: training's routing, the FNV-1a hash of its name."""
    from looptool.rl.cluster import fnv1a64
    return servers[fnv1a64(task) % len(servers)]


def task_flops(plan: Plan, server: str, auth_token: Optional[str] = None) -> Dict[str, float]:
    """Each task's flops as the server counts them (flop_count), which also checks its program:
    a program the server refuses raises ValueError naming the task."""
    from looptool.connection import Connection
    from looptool.env import LoopToolEnv
    from looptool.errors import ServiceError
    flops: Dict[str, float] = {}
    with Connection(server, auth_token=auth_token) as connection, LoopToolEnv(
            connection, observation_space=None, reward_space=None) as env:
        for task in plan.tasks.values():
            try:
                obs = env.reset(benchmark=f"benchmark://user-v0/{task.name}", program=task.program,
                                observation_spaces=["flop_count"])
            except ServiceError as e:
                raise ValueError(f"the server refused task {task.name} "
                                 f"({task.program.splitlines()[0]}): {e.details}") from e
            flops[task.name] = float(obs[0])
    return flops


@dataclasses.dataclass
class TaskReport:
    """One task after tuning: its best slice and every slice's server."""
    name: str
    weight: int
    flops: float
    best: Optional[SliceResult] = None
    slices: int = 0
    seconds: float = 0.0
    servers: List[str] = dataclasses.field(default_factory=list)
    errors: List[str] = dataclasses.field(default_factory=list)
    failed: bool = False


@dataclasses.dataclass
class TuneRun:
    tasks: Dict[str, TaskReport]
    seconds: float
    dropped_servers: List[str]
    lost_slices: int


@dataclasses.dataclass
class TuneOptions:
    time_limit: float            # seconds for the whole run's slices
    slice_seconds: float         # one slice's search time
    store: str                   # the schedule store (a path every worker can open)
    cli: str = dataclasses.field(default_factory=default_cli)
    auth_token_file: str = ""
    auth_token: Optional[str] = None
    seed: int = 0


def tune_tasks(plan: Plan, servers: Sequence[str], client: Any, options: TuneOptions,
               flops: Dict[str, float],
               on_progress: Optional[Callable[[float, Allotment], None]] = None,
               on_slice: Optional[Callable[[SliceResult], None]] = None) -> TuneRun:
    """Tunes every task of the plan (see the module's doc). `client`: a distributed.Client;
    `on_progress(elapsed seconds, allotment)` about twice a second, `on_slice(result)` as each
    slice comes back."""
    from distributed import wait
    allot = Allotment({n: (plan.weight(n), flops[n]) for n in plan.tasks})
    reports = {n: TaskReport(n, plan.weight(n), flops[n]) for n in plan.tasks}
    live = list(servers)
    dropped: List[str] = []
    busy: Dict[str, Tuple[Any, str]] = {}    # server -> (future, task)
    lost: Dict[str, int] = {}
    lost_total = 0
    start = time.monotonic()
    seed = options.seed
    slice_of: Dict[str, float] = {}          # tasks whose slices were lengthened
    attempts: Dict[str, int] = {}            # slices started per task
    strikes: Dict[str, int] = {}             # slices failed on a server that answers

    def fail(name: str, why: str) -> None:
        reports[name].failed = True
        reports[name].errors.append(why)
        allot.fail(name)

    while True:
        elapsed = time.monotonic() - start
        in_flight = {task for _, task in busy.values()}
        for server in live:
            if server in busy:
                continue
            free = [n for n in plan.tasks if n not in in_flight]
            if elapsed + options.slice_seconds > options.time_limit:
                # first slices are owed (a few tries each)
                free = [n for n in free if n in allot.untuned() and attempts.get(n, 0) < 4]
            mine = [n for n in free if route(n, live) == server]
            name = allot.next(mine) or allot.next(free)
            if name is None:
                continue
            seed += 1
            future = client.submit(run_slice, options.cli, server, name,
                                   plan.tasks[name].program,
                                   slice_of.get(name, options.slice_seconds),
                                   options.store, options.auth_token_file, seed,
                                   pure=False, retries=1)
            busy[server] = (future, name)
            in_flight.add(name)
            attempts[name] = attempts.get(name, 0) + 1
        if not busy:
            break
        if on_progress is not None:
            on_progress(time.monotonic() - start, allot)
        try:
            wait([f for f, _ in busy.values()], timeout=0.5, return_when="FIRST_COMPLETED")
        except TimeoutError:  # (asyncio's, which is the builtin's since Python 3.11)
            pass
        for server, (future, name) in list(busy.items()):
            if not future.done():
                continue
            del busy[server]
            try:
                result: SliceResult = future.result()
            except Exception as e:  # KilledWorker, a lost connection to the worker
                lost_total += 1
                lost[name] = lost.get(name, 0) + 1
                if lost[name] >= 3:
                    fail(name, f"its slices were lost {lost[name]} times: {type(e).__name__}")
                continue
            if on_slice is not None:
                on_slice(result)
            report = reports[name]
            if not result.error and not result.kept:
                allot.record(name, 0.0, result.seconds)  # a slice, but nothing to export
                report.errors.append(f"{server}: its best schedule was not stored")
                if not answers(server, options.auth_token) and server in live:
                    live.remove(server)   # killed before its re-time
                    dropped.append(server)
                continue
            if not result.error:
                allot.record(name, result.gflops, result.seconds)
                report.slices += 1
                report.seconds += result.seconds
                if server not in report.servers:
                    report.servers.append(server)
                if report.best is None or result.gflops > report.best.gflops:
                    report.best = result
                continue
            if answers(server, options.auth_token):
                report.errors.append(f"{server}: {result.error}")
                if ("time limit" in result.error
                        and slice_of.get(name, options.slice_seconds) < MAX_SLICE_SECONDS):
                    # The start kernel's first measurement outlasted the slice: a longer one.
                    slice_of[name] = min(MAX_SLICE_SECONDS,
                                         2 * slice_of.get(name, options.slice_seconds))
                else:
                    strikes[name] = strikes.get(name, 0) + 1
                    if strikes[name] >= 2:
                        fail(name, f"its slices failed on servers that answer: {result.error}")
            elif server in live:
                live.remove(server)
                dropped.append(server)
        if not live:
            for name in plan.tasks:
                if reports[name].best is None and not reports[name].failed:
                    fail(name, "no server answers")
            break
    # A server that died after its last slice came back is not offered to the export.
    for server in [s for s in live if not answers(s, options.auth_token)]:
        live.remove(server)
        dropped.append(server)
    if on_progress is not None:
        on_progress(time.monotonic() - start, allot)
    return TuneRun(reports, time.monotonic() - start, dropped, lost_total)


def stored_tasks(options: TuneOptions) -> List[str]:
    """The tasks the store holds a schedule of (`looptool schedules --json`)."""
    p = subprocess.run([options.cli, "schedules", f"--store={options.store}", "--json"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"looptool schedules failed: {p.stderr.strip()}")
    prefix = "benchmark://user-v0/"
    names = []
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            key = str(json.loads(line).get("benchmark", ""))
            if key.startswith(prefix):
                names.append(key[len(prefix):].split("#", 1)[0])
    return names


def export(plan: Plan, run: TuneRun, task_dir: str, output: str, library: str, server: str,
           options: TuneOptions) -> Dict[str, Any]:
    """`looptool export --store` of every task with a schedule in the store into `output`; the
    manifest. A tuned task the store lacks is reported failed (its layers stay in PyTorch)."""
    stored = set(stored_tasks(options))
    for name, r in run.tasks.items():
        if r.best is not None and name not in stored:
            r.failed = True
            r.errors.append("the store has no schedule of it")
    files = [os.path.join(task_dir, n + ".lt") for n, r in run.tasks.items()
             if r.best is not None and n in stored]
    if not files:
        raise RuntimeError("no task was tuned: nothing to export")
    cmd = [options.cli, "export", f"--server={server}", f"--store={options.store}",
           f"--benchmark={','.join(files)}", f"--output={output}", f"--library={library}"]
    if options.auth_token_file:
        cmd.append(f"--auth_token_file={options.auth_token_file}")
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"looptool export failed: {p.stderr.strip()}")
    with open(os.path.join(output, library + ".json")) as f:
        manifest: Dict[str, Any] = json.load(f)
    return manifest


def write_tasks(plan: Plan, task_dir: str) -> None:
    """Each task's program as <task_dir>/<name>.lt (what export reads, and the store's key)."""
    os.makedirs(task_dir, exist_ok=True)
    for task in plan.tasks.values():
        with open(os.path.join(task_dir, task.name + ".lt"), "w") as f:
            f.write(task.program)
