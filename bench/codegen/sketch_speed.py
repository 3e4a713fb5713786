"""sketch_speed: two server binaries' kernels for the same schedules, timed in one run. A check
that a code-generator change made the kernels it changes faster, free of the search's run-to-run
spread (a tuned result depends on which schedules a 10 s search happened to time).

    /usr/bin/python3 bench/codegen/sketch_speed.py OLD_SERVER NEW_SERVER [--isa=avx2]
        [--sketches=4] [--rounds=2] [--out=FILE.md]

For each program (ResNet-18's convolutions, channels last, as valid convolutions over the padded
input), the first --sketches of the `sketches` observation are applied in `loop_nest` sessions
and timed (`flops`) on a fresh server of each binary in turn, OLD, NEW, OLD, NEW ... (--rounds
each): a server's kernel cache never answers for the other round. Per schedule the best of the
rounds; per program the best schedule of each binary, and their ratio; the FMA peak each server
measured at its start beside them.
"""
import argparse
import os
import sys
from typing import Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "bazel-bin/client/python"), os.path.join(ROOT, "client/python")]

import looptool  # noqa: E402
from ab_report import finish  # noqa: E402
from looptool.server import LocalServer  # noqa: E402

# ResNet-18's distinct convolutions, NHWC (k output channels, c input channels, output map h x w).
PROGRAMS = {
    "conv_c3_k64_112x112_7x7_s2":
        "O[h,w,k] += I[2*h+r, 2*w+s, c] * W[r,s,c,k]; k=64 h=112 w=112 c=3 r=7 s=7",
    "conv_c64_k64_56x56_3x3_s1": "O[h,w,k] += I[h+r, w+s, c] * W[r,s,c,k]; k=64 h=56 w=56 c=64 r=3 s=3",
    "conv_c64_k128_28x28_3x3_s2":
        "O[h,w,k] += I[2*h+r, 2*w+s, c] * W[r,s,c,k]; k=128 h=28 w=28 c=64 r=3 s=3",
    "conv_c128_k128_28x28_3x3_s1":
        "O[h,w,k] += I[h+r, w+s, c] * W[r,s,c,k]; k=128 h=28 w=28 c=128 r=3 s=3",
    "conv_c64_k128_28x28_1x1_s2": "O[h,w,k] += I[2*h, 2*w, c] * W[c,k]; k=128 h=28 w=28 c=64",
    "conv_c128_k256_14x14_3x3_s2":
        "O[h,w,k] += I[2*h+r, 2*w+s, c] * W[r,s,c,k]; k=256 h=14 w=14 c=128 r=3 s=3",
    "conv_c256_k256_14x14_3x3_s1":
        "O[h,w,k] += I[h+r, w+s, c] * W[r,s,c,k]; k=256 h=14 w=14 c=256 r=3 s=3",
    "conv_c128_k256_14x14_1x1_s2": "O[h,w,k] += I[2*h, 2*w, c] * W[c,k]; k=256 h=14 w=14 c=128",
    "conv_c256_k512_7x7_3x3_s2":
        "O[h,w,k] += I[2*h+r, 2*w+s, c] * W[r,s,c,k]; k=512 h=7 w=7 c=256 r=3 s=3",
    "conv_c512_k512_7x7_3x3_s1": "O[h,w,k] += I[h+r, w+s, c] * W[r,s,c,k]; k=512 h=7 w=7 c=512 r=3 s=3",
    "conv_c256_k512_7x7_1x1_s2": "O[h,w,k] += I[2*h, 2*w, c] * W[c,k]; k=512 h=7 w=7 c=256",
}


def sketches(server: str, isa: str, count: int) -> Dict[str, List[str]]:
    with LocalServer(server, flags=[f"--isa={isa}"]) as srv:
        env = looptool.LoopToolEnv(srv.address, action_space="loop_nest")
        out = {}
        for name, program in PROGRAMS.items():
            env.reset(f"benchmark://user-v0/{name}", program=program)
            out[name] = env.observe(["sketches"])["sketches"].splitlines()[:count]
        env.close()
    return out


def timed(server: str, isa: str, plans: Dict[str, List[str]]) -> Tuple[Dict[str, List[float]],
                                                                      float]:
    """GFLOPS of every schedule on a fresh server, and the FMA peak it measured."""
    with LocalServer(server, flags=[f"--isa={isa}"]) as srv:
        env = looptool.LoopToolEnv(srv.address, action_space="loop_nest")
        out: Dict[str, List[float]] = {}
        peak = 0.0
        for name, lines in plans.items():
            out[name] = []
            for line in lines:
                env.reset(f"benchmark://user-v0/{name}", program=PROGRAMS[name])
                env.multistep(line.split())
                values = env.observe(["flops", "peak_gflops"]) if not peak else \
                    env.observe(["flops"])
                peak = peak or float(values.get("peak_gflops", 0.0))
                out[name].append(float(values["flops"]))
        env.close()
    return out, peak


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--isa", default="avx2")
    p.add_argument("--sketches", type=int, default=4)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", default="")
    args = p.parse_args()
    plans = sketches(args.old, args.isa, args.sketches)
    best = {"old": {n: [0.0] * len(v) for n, v in plans.items()},
            "new": {n: [0.0] * len(v) for n, v in plans.items()}}
    peaks: Dict[str, List[float]] = {"old": [], "new": []}
    for _ in range(args.rounds):
        for which, binary in (("old", args.old), ("new", args.new)):
            got, peak = timed(binary, args.isa, plans)
            peaks[which].append(peak)
            for n, v in got.items():
                best[which][n] = [max(a, b) for a, b in zip(best[which][n], v)]
    lines = [f"`bench/codegen/sketch_speed.py OLD NEW --isa={args.isa} "
             f"--sketches={args.sketches} --rounds={args.rounds}`: the first {args.sketches} "
             "sketches of each program, best of the rounds per schedule, best schedule per "
             "binary. FMA peaks measured by the servers at start: old "
             + ", ".join(f"{x:.1f}" for x in peaks["old"]) + "; new "
             + ", ".join(f"{x:.1f}" for x in peaks["new"]) + " GFLOPS.", "",
             "| program | old GFLOPS | new GFLOPS | new / old | per sketch new / old |",
             "|---|---:|---:|---:|---|"]
    ratios = []
    for n in plans:
        o, w = max(best["old"][n]), max(best["new"][n])
        ratios.append(w / o)
        per = " ".join(f"{b / a:.2f}" for a, b in zip(best["old"][n], best["new"][n]))
        lines.append(f"| {n} | {o:.1f} | {w:.1f} | {w / o:.3f} | {per} |")
    finish(lines, ratios, "new / old", args.out)

if __name__ == "__main__":
    main()
