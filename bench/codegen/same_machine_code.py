"""same_machine_code: do two server binaries emit the same machine code for every sketch of a
few matmul, convolution, transpose and elementwise programs? A check that a code-generator
change left those kernels as they were (bench/results/codegen_before_after.md).

    /usr/bin/python3 bench/codegen/same_machine_code.py OLD_SERVER NEW_SERVER

Each program's sketches (the `sketches` observation of the first server) are applied in a
`loop_nest` session on each server and their `machine_code` observations compared byte for byte.
Exits 1 when any differs.
"""
import hashlib
import os
import sys
from typing import List

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "bazel-bin/client/python"), os.path.join(ROOT, "client/python")]

import looptool  # noqa: E402
from looptool.server import LocalServer  # noqa: E402

PROGRAMS = [
    "C[m,n] += A[m,k] * B[k,n]; m=112 n=208 k=256",
    "C[m,n] += A[m,k] * B[k,n] -> relu; m=37 n=61 k=97",
    "O[h,w,k] += I[h+r, w+s, c] * W[r,s,c,k]; k=64 h=56 w=56 c=64 r=3 s=3",
    "O[h,w,c] += I[h+r, w+s, c] * W[r,s,c]; c=96 h=28 w=28 r=3 s=3",
    "O[h,w,k] += I[2*h+r, 2*w+s, c] * W[r,s,c,k]; k=128 h=28 w=28 c=64 r=3 s=3",
    "B[n,m] = A[m,n]; m=1024 n=512",
    "C[m,n] = A[m,n] + B[m,n] -> relu; m=512 n=1024",
]


def hashes(server: str, sketches: List[List[str]]) -> List[str]:
    out = []
    with LocalServer(server) as srv:
        env = looptool.LoopToolEnv(srv.address, action_space="loop_nest")
        for program, lines in zip(PROGRAMS, sketches):
            for line in lines:
                env.reset("benchmark://user-v0/x", program=program)
                for action in line.split():
                    env.step(action)
                code = env.observe(["machine_code"])["machine_code"]
                data = code if isinstance(code, bytes) else str(code).encode()
                out.append(hashlib.sha256(data).hexdigest())
        env.close()
    return out


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    old, new = sys.argv[1], sys.argv[2]
    with LocalServer(old) as srv:
        env = looptool.LoopToolEnv(srv.address, action_space="loop_nest")
        sketches = []
        for program in PROGRAMS:
            env.reset("benchmark://user-v0/x", program=program)
            sketches.append(env.observe(["sketches"])["sketches"].splitlines())
        env.close()
    a, b = hashes(old, sketches), hashes(new, sketches)
    same = sum(x == y for x, y in zip(a, b))
    print(f"{same} of {len(a)} sketch kernels byte-identical")
    sys.exit(0 if same == len(a) else 1)


if __name__ == "__main__":
    main()
