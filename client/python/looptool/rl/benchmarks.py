"""The benchmarks RL trains and evaluates on, named as the service names them.

mm64_256_16_range-v0 is LoopTune's 2197 matmuls (M, N, K in 64, 80, ..., 256) with a fixed
80/20 train/test split: a shape is in the test split when the 64-bit FNV-1a hash of its name is
0 mod 5. These functions mirror datasets/matmul_range.cc and datasets/split.h (the service's
source of truth) so a trainer can list the splits without a round trip; tests check the two agree.

A benchmark is a (uri, program) pair: `program` is None for the service's own benchmarks and
the loop-nest text for shapes off the dataset's grid, which the service adds on StartSession.
"""

import collections

DATASET = "mm64_256_16_range-v0"
OFFGRID_DATASET = "tune_bench-offgrid"  # the same URIs as bench/tune_bench.cc uses

# Off the dataset's grid: odd, prime and rectangular sizes (bench/tune_bench.cc's list).
OFFGRID_SHAPES = (
    (37, 61, 97), (127, 131, 139), (100, 100, 100), (53, 200, 311),
    (250, 70, 190), (512, 32, 64), (32, 512, 128), (96, 384, 48),
    (199, 211, 223), (300, 300, 45), (64, 450, 333), (481, 97, 257),
)

Benchmark = collections.namedtuple("Benchmark", ["uri", "program"])


def matmul_name(m, n, k):
    return f"mm{m}_{n}_{k}"


def matmul_program(m, n, k):
    return f"C[m,n] += A[m,k] * B[k,n]\nm={m} n={n} k={k}\n"


def fnv1a64(name):
    """The 64-bit FNV-1a hash of a name (datasets/split.h's)."""
    h = 1469598103934665603
    for byte in name.encode("utf-8"):
        h ^= byte
        h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def in_test_split(name):
    """datasets/split.h: test when the name's FNV-1a hash is 0 mod 5."""
    return fnv1a64(name) % 5 == 0


def matmul_range():
    """The 2197 shapes in the generator's order (m, then n, then k ascending)."""
    sizes = range(64, 257, 16)
    return [(m, n, k) for m in sizes for n in sizes for k in sizes]


def split(which, dataset=DATASET):
    """"train" or "test": the split's benchmarks, in generator order."""
    if dataset != DATASET:
        raise ValueError(f"Unknown dataset {dataset!r}; known: {DATASET}")
    if which not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {which!r}")
    want_test = which == "test"
    return [Benchmark(f"benchmark://{dataset}/{matmul_name(*s)}", None)
            for s in matmul_range() if in_test_split(matmul_name(*s)) == want_test]


def test_benchmarks(count=25, dataset=DATASET):
    """`count` test-split benchmarks spread evenly over the split (tune_bench's choice)."""
    test = split("test", dataset)
    return [test[i * len(test) // count] for i in range(min(count, len(test)))]


def offgrid_benchmarks(count=len(OFFGRID_SHAPES)):
    """Shapes training never sees: the first `count` of OFFGRID_SHAPES, with their programs."""
    return [Benchmark(f"benchmark://{OFFGRID_DATASET}/{matmul_name(*s)}", matmul_program(*s))
            for s in OFFGRID_SHAPES[:count]]


def name_of(benchmark):
    return benchmark.uri.rsplit("/", 1)[-1]
