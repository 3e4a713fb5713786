"""Tuning records: every kernel LoopTool's searches measured, for training cost models and
policies on (datasets/records/README.md documents the file).

`looptool tune --records=FILE` writes them as it searches (client/cpp/tuning_records.h);
`python3 -m looptool.records generate` runs those searches over a broad distribution of programs
(looptool.records.programs); `load()` reads them back:

    from looptool import records
    rows = records.load("records.db", split="train")
    names, X = records.feature_matrix(rows)          # plan features, one row per kernel
    y = numpy.log([r.gflops for r in rows])
    best = records.best_per_program(rows)            # for imitation: the fastest per program

Splits are by program: "train", "validation" (one program in ten, by hash) and "evaluation"
(every program of the servers' test splits: the test matmuls and the ResNet-18, MobileNetV2 and
BERT-base layers; never train on those).

`python3 -m looptool.records remeasure` times a split's kernels again, alone, with the server's
full budget (looptool.records.remeasure: the searches' own readings stop early or skip kernels
that look slow); `load()` gives those readings as `Record.remeasured_gflops`. Each search reading
says how it was timed (`Record.timing`, one of TIMINGS, with `Record.timed_runs`): a model may
drop or down-weight "slower", "once" and "untimed" readings, which are mostly low when wrong, and
"abandoned" ones, bounds above a kernel far slower than its program's best.
"""
import dataclasses
import json
import os
import sqlite3
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

FORMAT = "looptool-tuning-records 1"
SPLITS = ("train", "validation", "evaluation")
# How a search's reading was timed (the server's `timing` observation): the full fixed budget;
# adaptive runs stopped once their minimum settled; those timed again with the full budget as
# candidates near the program's best; runs stopped as clearly slower than the best; one run only
# (far slower); not timed (its cold verification run far slower: that run's time); neither timed
# nor verified (its verification run abandoned at 16x the best: an upper bound on its speed).
TIMINGS = ("full", "settled", "confirmed", "slower", "once", "untimed", "abandoned")


@dataclasses.dataclass
class Record:
    """One measured kernel, with its run's and its program's facts."""
    id: int
    program_id: int
    program: str                    # as the server prints it
    kind: str                       # the generator's kind (matmul, conv, ...) or "" if unknown
    split: str                      # train, validation or evaluation
    flops: int                      # of one run of the kernel
    run_id: int
    benchmark: str                  # the URI it was tuned under
    host_cpu: str
    isa: str                        # the code generator's target: avx512, avx2, sse
    action_space: str
    search: str
    actions: List[str]              # from the benchmark's start state to this kernel's state
    schedule: str                   # the ir's compute/write lines
    loop_tree: str
    plan_features: Dict[str, float]  # what the server's cost model sees, by name
    gflops: float                   # as the search measured it
    retimed_gflops: Optional[float]  # re-timed at the end of the search (its best few only)
    peak_gflops: float              # the measured FMA peak of the core it ran on
    roofline_gflops: float          # the program's roofline bound there (0: none)
    fraction_of_peak: float
    fraction_of_roofline: Optional[float]
    seconds: float                  # into the search
    # timed again alone with the full budget (looptool.records.remeasure; None: not)
    remeasured_gflops: Optional[float] = None
    # how `gflops` was timed (TIMINGS; None in files written before the column) and its runs
    timing: Optional[str] = None
    timed_runs: Optional[int] = None


class RecordsError(ValueError):
    """The file is missing, is not a records file, or is of another format."""


def _kind(benchmark: str) -> str:
    """The generator names its programs `<kind>__<name>` (benchmark://user-v0/<stem>)."""
    stem = benchmark.rsplit("/", 1)[-1]
    return stem.split("__", 1)[0] if "__" in stem else ""


def connect(path: str) -> sqlite3.Connection:
    """A read-only connection to the records at `path`, its format checked."""
    if not os.path.isfile(path):
        raise RecordsError(f"no tuning records at {path}")
    try:
        db = sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro", uri=True)
        row = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
    except sqlite3.DatabaseError as e:
        raise RecordsError(f"{path} is not a LoopTool tuning records file: {e}") from None
    if row is None or row[0] != FORMAT:
        db.close()
        raise RecordsError(f"{path} holds records of format {row[0] if row else 'unknown'!r}; "
                           f"this looptool reads {FORMAT!r}")
    return db


def _has_timing(db: sqlite3.Connection) -> bool:
    """Whether the file's measurements say how each was timed (files from 2026-12-06 on)."""
    return "timing" in {row[1] for row in db.execute("PRAGMA table_info(measurements)")}


def load(path: str, split: Optional[str] = None, host: Optional[str] = None,
         isa: Optional[str] = None, kinds: Optional[Sequence[str]] = None) -> List[Record]:
    """The records at `path`, in the order kept: those of `split` (train, validation or
    evaluation), of host CPUs whose name contains `host`, of `isa`, of the generator's `kinds`,
    when given."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: use {', '.join(SPLITS)}")
    db = connect(path)
    try:
        where, args = [], []
        if split is not None:
            where.append("split = ?")
            args.append(split)
        if host is not None:
            where.append("instr(host_cpu, ?) > 0")
            args.append(host)
        if isa is not None:
            where.append("isa = ?")
            args.append(isa)
        sql = ("SELECT id, program_id, program, split, flops, run_id, benchmark, host_cpu, isa, "
               "action_space, search, actions, schedule, loop_tree, plan_features, gflops, "
               "retimed_gflops, peak_gflops, roofline_gflops, fraction_of_peak, "
               "fraction_of_roofline, seconds FROM records")
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = db.execute(sql + " ORDER BY id", args).fetchall()
        remeasured: Dict[int, float] = {}
        if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                      "name = 'remeasurements'").fetchone() is not None:
            remeasured = {int(i): float(g) for i, g in db.execute(
                "SELECT measurement_id, gflops FROM remeasurements WHERE gflops > 0")}
        timings: Dict[int, Tuple[str, Optional[int]]] = {}
        if _has_timing(db):
            timings = {int(i): (str(t), None if n is None else int(n)) for i, t, n in db.execute(
                "SELECT id, timing, timed_runs FROM measurements WHERE timing IS NOT NULL")}
    finally:
        db.close()
    out = []
    for r in rows:
        rec = Record(id=r[0], program_id=r[1], program=r[2], kind=_kind(r[6]), split=r[3],
                     flops=r[4], run_id=r[5], benchmark=r[6], host_cpu=r[7], isa=r[8],
                     action_space=r[9], search=r[10], actions=json.loads(r[11]), schedule=r[12],
                     loop_tree=r[13], plan_features=json.loads(r[14]), gflops=r[15],
                     retimed_gflops=r[16], peak_gflops=r[17], roofline_gflops=r[18],
                     fraction_of_peak=r[19], fraction_of_roofline=r[20], seconds=r[21],
                     remeasured_gflops=remeasured.get(r[0]),
                     timing=timings[r[0]][0] if r[0] in timings else None,
                     timed_runs=timings[r[0]][1] if r[0] in timings else None)
        if kinds is None or rec.kind in kinds:
            out.append(rec)
    return out


def plan_feature_names(records: Iterable[Record]) -> List[str]:
    """Every plan feature name of `records`, in the order of first appearance: one server
    version's records share theirs, and a later version appends new features (streamed_output,
    folded_rows), so a file mixing versions has its newest version's names, whichever comes
    first; a record without a feature reads it as 0."""
    names: Dict[str, None] = {}
    for r in records:
        for n in r.plan_features:
            names.setdefault(n)
    return list(names)


def feature_matrix(records: Sequence[Record]) -> Tuple[List[str], npt.NDArray[np.float32]]:
    """The plan features of `records` as a float32 matrix (one row per record) with the names of
    its columns (plan_feature_names; 0 where a record lacks one)."""
    if not records:
        return [], np.zeros((0, 0), dtype=np.float32)
    names = plan_feature_names(records)
    x = np.zeros((len(records), len(names)), dtype=np.float32)
    for i, r in enumerate(records):
        for j, n in enumerate(names):
            x[i, j] = r.plan_features.get(n, 0.0)
    return names, x


def best_per_program(records: Iterable[Record], host: Optional[str] = None) -> Dict[int, Record]:
    """The fastest record of each program (by re-timed GFLOPS where there is one, else measured),
    of host CPUs whose name contains `host` when given: what imitation learns from."""
    best: Dict[int, Record] = {}

    def speed(r: Record) -> float:
        return r.retimed_gflops if r.retimed_gflops else r.gflops

    for r in records:
        if host is not None and host not in r.host_cpu:
            continue
        if r.program_id not in best or speed(r) > speed(best[r.program_id]):
            best[r.program_id] = r
    return best


def isas(path: str) -> List[str]:
    """The code generator targets (avx512, avx2, sse) the file's runs were timed at, sorted (runs
    whose server said none left out)."""
    db = connect(path)
    try:
        return sorted(r[0] for r in db.execute("SELECT DISTINCT isa FROM runs WHERE isa != ''"))
    finally:
        db.close()


def summary(path: str) -> Dict[str, object]:
    """Counts (programs, runs and kernels per split, kernels per kind, host and timing), what
    the runs cost (search_seconds: their time limits added up; span_seconds: from the first
    run's start to the last one's end, as the wall clock saw it when one generator wrote them
    all) and the best fraction of peak and of the roofline per kind."""
    db = connect(path)
    try:
        out: Dict[str, object] = {
            "format": FORMAT,
            "programs": dict(db.execute("SELECT split, count(*) FROM programs GROUP BY split")
                             .fetchall()),
            "runs": db.execute("SELECT count(*) FROM runs").fetchone()[0],
            "kernels": dict(db.execute("SELECT split, count(*) FROM records GROUP BY split")
                            .fetchall()),
            "hosts": dict(db.execute("SELECT host_cpu || ' (' || isa || ')', count(*) FROM "
                                     "records GROUP BY host_cpu, isa").fetchall()),
            "search_seconds":
                float(db.execute("SELECT coalesce(sum(time_limit), 0) FROM runs").fetchone()[0]),
            "span_seconds": float(db.execute(
                "SELECT coalesce(max(started_unix + time_limit) - min(started_unix), 0) FROM runs")
                .fetchone()[0]),
            "evaluation_programs_known":
                db.execute("SELECT count(*) FROM evaluation_programs").fetchone()[0],
            # kernels by how the search timed them ("unknown": written before it was kept)
            "timings": dict(db.execute(
                "SELECT coalesce(timing, 'unknown'), count(*) FROM measurements GROUP BY 1")
                .fetchall()) if _has_timing(db) else {"unknown": db.execute(
                    "SELECT count(*) FROM measurements").fetchone()[0]},
        }
        peaks: Dict[str, List[float]] = {}
        roofs: Dict[str, List[float]] = {}
        kernels: Dict[str, int] = {}
        rows = db.execute("SELECT benchmark, program_id, max(fraction_of_peak), "
                          "max(fraction_of_roofline), count(*) FROM records "
                          "GROUP BY program_id").fetchall()
        for benchmark, _, peak, roof, n in rows:
            kind = _kind(benchmark) or "other"
            peaks.setdefault(kind, []).append(peak)
            roofs.setdefault(kind, [])
            if roof is not None:
                roofs[kind].append(roof)
            kernels[kind] = kernels.get(kind, 0) + n
        per_kind = {kind: {"programs": len(peaks[kind]), "kernels": kernels[kind],
                           "best_fraction_of_peak": float(np.median(peaks[kind])),
                           "best_fraction_of_roofline":
                               float(np.median(roofs[kind])) if roofs[kind] else None}
                    for kind in peaks}
        out["per_kind"] = per_kind
        return out
    finally:
        db.close()
