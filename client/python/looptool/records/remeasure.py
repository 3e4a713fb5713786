"""Recorded kernels timed again, alone, with the server's full budget.

The searches time most kernels adaptively (backend/timing/local_timer.cc): a measurement stops
after a few runs once their fastest is 1.25x slower than the program's best so far, and a kernel
whose first (verification) run alone takes 4x the best is not timed at all, its cold run's speed
kept. Both favour search speed over each reading, so a reading can be far below what the kernel
does (on the 2026-12-05 records, 1.7% of memory-bound kernels measured in two runs differ by more
than 2x). `remeasure()` rebuilds each kernel of a split in a fresh session (its program and
actions) and times it with the session parameter `looptool.remeasure` (the full fixed budget, no
cache, no early stop, as the searches re-time their winners), and keeps the reading in the file's
`remeasurements` table, one row per measurement: a kernel already there is not timed again, so an
interrupted run goes on where it stopped. `looptool.records.load()` gives it as
`Record.remeasured_gflops`; `python3 -m looptool.rl.rank_eval --labels=remeasured` ranks against
it. Remeasure on the host that recorded the kernels: the readings are that host's.

Each kernel is timed `timings` times (2 by default) and the fastest reading kept. One fixed budget
is a window of about 10 ms: a kernel of milliseconds runs a few times in it, and a transient
stall of the core (another guest, the host) slows every one of them. Seen on a 2-vCPU Zen 4 VM
(2026-12-06): one timing each, 9% of the validation kernels the searches had left untimed read
more than 1.41x slower than the search had them, most by 2x; 40 timings in a row of three of
them in a fresh server read the search's speed but for 1-2 windows each (0.60x, 0.75x, 0.70x).
"""
import sqlite3
from typing import Any, Callable, Dict, List, Optional

from looptool import records as records_lib

TABLE = "remeasurements"
MAX_TIMINGS = 16
SCHEMA = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
  measurement_id INTEGER PRIMARY KEY REFERENCES measurements(id),
  gflops         REAL NOT NULL,  -- the full-budget reading; 0 where the kernel was not rebuilt
  peak_gflops    REAL NOT NULL   -- the FMA peak measured right after it on the same core
)"""


def schedule_of_ir(ir: str) -> str:
    """The lines of a program's `ir` from its first `compute 1:` on, cursor lines left out: what
    the records keep as a kernel's schedule (client/cpp/tuning_records.cc's ScheduleOfIr)."""
    out, schedule = [], False
    for line in ir.split("\n"):
        if not line:
            continue
        schedule = schedule or line.startswith("compute 1:")
        if schedule and not line.startswith("cursor"):
            out.append(line + "\n")
    return "".join(out)


def remeasure(path: str, address: str, split: str = "validation", limit: int = 0,
              log: Optional[Callable[[str], None]] = None, timings: int = 2) -> Dict[str, int]:
    """Times again every kernel of `split` in the records at `path` (positive GFLOPS, not yet in
    the remeasurements table; the first `limit` of them where limit > 0) on the server at
    `address`, committing every 100. Returns {"kernels": timed now, "failed": not rebuilt (their
    row reads 0: its actions failed or are not its space's, or gave another schedule than the
    record's), "kept": already there}. Each kernel is timed `timings` times (1..MAX_TIMINGS), the
    fastest reading kept with the peak measured beside it. RecordsError for a file that is not
    records, ValueError for an unknown split or timings; a ServiceError or sqlite3.Error midway
    keeps the rows written before it."""
    from looptool.env import LoopToolEnv  # (grpc only where kernels are timed)
    if not 1 <= timings <= MAX_TIMINGS:
        raise ValueError(f"timings must be 1..{MAX_TIMINGS}, not {timings}")
    rows = [r for r in records_lib.load(path, split=split) if r.gflops > 0]
    db = sqlite3.connect(path)
    try:
        db.execute(SCHEMA)
        done = {int(x) for (x,) in db.execute(f"SELECT measurement_id FROM {TABLE}")}
        todo = [r for r in rows if r.id not in done]
        if limit > 0:
            todo = todo[:limit]
        envs: Dict[str, Any] = {}
        failed = 0
        try:
            for i, r in enumerate(todo):
                if r.action_space not in envs:
                    envs[r.action_space] = LoopToolEnv(address, action_space=r.action_space,
                                                       observation_space=None, reward_space=None)
                env = envs[r.action_space]
                gflops = peak = 0.0
                env.reset(f"benchmark://user-v0/records_{r.program_id}", program=r.program,
                          observation_spaces=[])
                try:
                    env.multistep(r.actions)
                    rebuilt = env.last_error is None and schedule_of_ir(
                        str(env.observe(["ir"])["ir"])) == r.schedule
                except ValueError:  # an action its space does not have
                    rebuilt = False
                if rebuilt:
                    gflops, peak = max(env.remeasure() for _ in range(timings))
                else:
                    failed += 1
                db.execute(f"INSERT INTO {TABLE} VALUES (?, ?, ?)", (r.id, gflops, peak))
                if (i + 1) % 100 == 0:
                    db.commit()
                    if log is not None:
                        log(f"remeasured {i + 1} of {len(todo)}")
        finally:
            db.commit()
            for env in envs.values():
                env.close()
    finally:
        db.close()
    return {"kernels": len(todo), "failed": failed,
            "kept": len([r for r in rows if r.id in done])}


def with_remeasured_labels(rows: List[records_lib.Record]) -> List[records_lib.Record]:
    """The rows that have a remeasured reading, each with it as its gflops (what the cost
    model's evaluation ranks against)."""
    import dataclasses
    return [dataclasses.replace(r, gflops=r.remeasured_gflops) for r in rows
            if r.remeasured_gflops is not None and r.remeasured_gflops > 0]
