"""The programs tuning records are generated over: a broad, seeded distribution of what the
language writes (matmuls of every shape, convolutions of every stride, kernel size and channel
count, depthwise and 1x1, pooling, reductions, GEMV, transposes, elementwise) and the layers of
torchvision's AlexNet, VGG-16, GoogLeNet, DenseNet-121 and MNASNet-1.0.

ResNet-18, MobileNetV2 and BERT-base are for evaluation only and never generated here; a
generated program that happens to equal a program of the servers' test splits (a model layer, a
test matmul) is recorded in the "evaluation" split all the same (client/cpp/tuning_records.h),
so nothing of those is ever trained on.

Every program's FLOPs are capped (`max_flops`), so that its untuned start state is measured in
well under a second and a search of a few seconds gets somewhere.
"""
import dataclasses
import math
import random
import re
from typing import Callable, Dict, Iterator, List, Sequence

TRAINING_MODELS = ("alexnet", "vgg16", "googlenet", "densenet121", "mnasnet1_0")
EVALUATION_MODELS = ("resnet18", "mobilenet_v2", "bert_base")
KINDS = ("matmul", "bmm", "linear", "conv", "depthwise", "pool", "reduction", "gemv", "transpose", "elementwise",
         "attention", "large_transpose")
DEFAULT_MAX_FLOPS = 3e8

PRIMES = [p for p in range(2, 1025) if all(p % d for d in range(2, int(p ** 0.5) + 1))]


@dataclasses.dataclass(frozen=True)
class Program:
    """One program to tune: a file name (a C identifier) and its text."""
    name: str
    kind: str
    text: str


def _extent(rng: random.Random, low: int = 1, high: int = 1024) -> int:
    """Odd, prime, power-of-two-ish, multiple of 16 or anything, in [low, high]."""
    style = rng.random()
    if style < 0.2:
        choices = [p for p in PRIMES if low <= p <= high] or [low]
        return rng.choice(choices)
    if style < 0.4:
        return rng.randrange(low | 1, high + 1, 2) if high > low else low
    if style < 0.6:
        powers = [1 << e for e in range(11) if low <= 1 << e <= high] or [low]
        return rng.choice(powers)
    if style < 0.8:
        sixteens = list(range(16 * -(-low // 16), high + 1, 16)) or [low]
        return rng.choice(sixteens)
    return rng.randint(low, high)


def _fit(rng: random.Random, sizes: Dict[str, int], flops_per_point: int, max_flops: float,
         keep: Sequence[str] = ()) -> Dict[str, int]:
    """Halves random sizes (not those in `keep`) until the program's FLOPs fit."""
    def flops() -> float:
        total = float(flops_per_point)
        for v in sizes.values():
            total *= v
        return total
    while flops() > max_flops:
        free = [k for k, v in sizes.items() if k not in keep and v > 1]
        if not free:
            break
        k = rng.choice(free)
        sizes[k] = max(1, sizes[k] // 2)
    return sizes


def _sizes(sizes: Dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in sizes.items())


def matmul(rng: random.Random, max_flops: float) -> Program:
    s = _fit(rng, {"m": _extent(rng), "n": _extent(rng), "k": _extent(rng)}, 2, max_flops)
    relu = " -> relu" if rng.random() < 0.15 else ""
    return Program(f"mm_{s['m']}x{s['n']}x{s['k']}{'_relu' if relu else ''}", "matmul",
                   f"C[m,n] += A[m,k] * B[k,n]{relu}\n{_sizes(s)}\n")


# A linear layer's FLOPs may reach this many times --max-flops: transformer and MLP layers are
# larger than the cap the other kinds keep, and a policy never shown one leaves them untuned.
LINEAR_FLOPS_FACTOR = 5.0
FEATURES = [256, 384, 512, 768, 1024, 1280, 1536, 2048, 2560, 3072, 4096]


def linear(rng: random.Random, max_flops: float) -> Program:
    """A transformer's or an MLP's linear layer over a few tokens: Y = X W with 16..512 rows
    and 256..4096 features in and out (common widths, or any), up to LINEAR_FLOPS_FACTOR times
    the cap (so its untuned start is measured in a second or two, with the longer search time
    the generator gives programs above the cap)."""
    def width() -> int:
        return rng.choice(FEATURES) if rng.random() < 0.7 else _extent(rng, 256, 4096)
    m = rng.choice([16, 32, 49, 64, 96, 128, 196, 256, 384, 512, _extent(rng, 16, 512)])
    s = _fit(rng, {"m": m, "n": width(), "k": width()}, 2, LINEAR_FLOPS_FACTOR * max_flops)
    relu = " -> relu" if rng.random() < 0.15 else ""
    return Program(f"linear_{s['m']}x{s['n']}x{s['k']}{'_relu' if relu else ''}", "linear",
                   f"Y[m,n] += X[m,k] * W[k,n]{relu}\n{_sizes(s)}\n")


def bmm(rng: random.Random, max_flops: float) -> Program:
    """Batched matmuls, and matmuls whose B is stored transposed (C = A B^T: a product of two
    row-major activations, as attention's scores read their keys), with or without a batch."""
    s = _fit(rng, {"b": rng.choice([1, 1, 2, 4, 8, 12, 16]), "m": _extent(rng, 1, 512),
                   "n": _extent(rng, 1, 512), "k": _extent(rng, 1, 512)}, 2, max_flops, ("b",))
    nt = rng.random() < 0.6
    batch = "b," if s["b"] > 1 else ""
    rhs = f"B[{batch}n,k]" if nt else f"B[{batch}k,n]"
    sizes = {k: v for k, v in s.items() if k != "b" or s["b"] > 1}
    return Program(f"bmm_{s['b']}x{s['m']}x{s['n']}x{s['k']}_{'nt' if nt else 'nn'}", "bmm",
                   f"C[{batch}m,n] += A[{batch}m,k] * {rhs}\n{_sizes(sizes)}\n")


# BERT-base's attention products (bert_base-v0's scores and context: 12 heads, 128 x 128, head
# width 64) as (heads, m, n, head width): never drawn, since the records' evaluation split is
# matched by program text and these would be written with other names.
EVALUATION_ATTENTION = {(12, 128, 128, 64)}


def attention(rng: random.Random, max_flops: float) -> Program:
    """Attention's scores and context products at random shapes: C = A B^T per head (both
    operands row-major activations) or C = A B, with a head width (the reduction of the scores,
    the output of the context) a multiple of 8 from 16 to 128, as attention layers have, where
    `bmm`'s reductions are anything. Sequences (m, n) are drawn as `bmm` draws them, heads from
    1 to 16; EVALUATION_ATTENTION's shapes are drawn again."""
    while True:
        d = 8 * rng.randint(2, 16)
        s = _fit(rng, {"b": rng.choice([1, 2, 4, 8, 12, 16]), "m": _extent(rng, 1, 512),
                       "n": _extent(rng, 1, 512)}, 2 * d, max_flops, ("b",))
        if (s["b"], s["m"], s["n"], d) not in EVALUATION_ATTENTION:
            break
    scores = rng.random() < 0.7
    batch = "b," if s["b"] > 1 else ""
    sizes = {k: v for k, v in s.items() if k != "b" or s["b"] > 1}
    if scores:
        text = f"C[{batch}m,n] += A[{batch}m,k] * B[{batch}n,k]\n{_sizes({**sizes, 'k': d})}\n"
        name = f"scores_{s['b']}x{s['m']}x{s['n']}x{d}"
    else:  # the context: the scores (m x n) times the values (n x d)
        text = f"C[{batch}m,k] += A[{batch}m,n] * B[{batch}n,k]\n{_sizes({**sizes, 'k': d})}\n"
        name = f"context_{s['b']}x{s['m']}x{d}x{s['n']}"
    return Program(name, "attention", text)


def _index(stride: int, var: str, tap: str) -> str:
    return f"{var}+{tap}" if stride == 1 else f"{stride}*{var}+{tap}"


def conv(rng: random.Random, max_flops: float) -> Program:
    r = rng.choice([1, 1, 3, 3, 3, 5, 7])
    stride = rng.choice([1, 1, 1, 2, 2, 3, 4])
    hw = rng.choice([7, 8, 13, 14, 17, 28, 32, 56, 112])
    c = rng.choice([1, 3, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, _extent(rng, 1, 512)])
    k = rng.choice([8, 16, 32, 64, 96, 128, 256, 512, _extent(rng, 1, 512)])
    keep = ("r", "s")
    if r == 1:
        s = _fit(rng, {"k": k, "h": hw, "w": hw, "c": c}, 2, max_flops)
        ih = "h" if stride == 1 else f"{stride}*h"
        iw = "w" if stride == 1 else f"{stride}*w"
        text = f"O[k,h,w] += I[c, {ih}, {iw}] * W[k,c]\n{_sizes(s)}\n"
        name = f"conv_c{s['c']}_k{s['k']}_{s['h']}x{s['w']}_1x1_s{stride}"
    else:
        s = _fit(rng, {"k": k, "h": hw, "w": hw, "c": c, "r": r, "s": r}, 2, max_flops, keep)
        text = (f"O[k,h,w] += I[c, {_index(stride, 'h', 'r')}, {_index(stride, 'w', 's')}]"
                f" * W[k,c,r,s]\n{_sizes(s)}\n")
        name = f"conv_c{s['c']}_k{s['k']}_{s['h']}x{s['w']}_{r}x{r}_s{stride}"
    return Program(name, "conv", text)


def depthwise(rng: random.Random, max_flops: float) -> Program:
    r = rng.choice([3, 3, 5, 7])
    stride = rng.choice([1, 1, 2, 2, 3])
    hw = rng.choice([7, 14, 28, 56, 112])
    c = rng.choice([16, 32, 64, 96, 144, 192, 240, 384, 480, 576, 960, _extent(rng, 1, 1024)])
    s = _fit(rng, {"c": c, "h": hw, "w": hw, "r": r, "s": r}, 2, max_flops, ("r", "s"))
    return Program(f"dw_c{s['c']}_{s['h']}x{s['w']}_{r}x{r}_s{stride}", "depthwise",
                   f"O[c,h,w] += I[c, {_index(stride, 'h', 'r')}, {_index(stride, 'w', 's')}]"
                   f" * W[c,r,s]\n{_sizes(s)}\n")


def pool(rng: random.Random, max_flops: float) -> Program:
    op = rng.choice(["max=", "+="])
    if rng.random() < 0.25:  # global: a sum over the map
        s = _fit(rng, {"c": _extent(rng, 1, 2048), "h": rng.choice([7, 8, 14]),
                       "w": rng.choice([7, 8, 14])}, 1, max_flops)
        return Program(f"gpool_c{s['c']}_{s['h']}x{s['w']}", "pool",
                       f"O[c] += I[c,h,w]\n{_sizes(s)}\n")
    r = rng.choice([2, 3, 3, 5])
    stride = rng.choice([1, 2, 2, 3])
    hw = rng.choice([7, 13, 14, 27, 28, 55, 56, 112])
    s = _fit(rng, {"c": _extent(rng, 1, 512), "h": hw, "w": hw, "r": r, "s": r}, 1, max_flops,
             ("r", "s"))
    if rng.random() < 0.3:  # channels last
        return Program(f"pool_hwc_c{s['c']}_{hw}_{r}x{r}_s{stride}", "pool",
                       f"O[h,w,c] {op} I[{_index(stride, 'h', 'r')}, "
                       f"{_index(stride, 'w', 's')}, c]\nh={s['h']} w={s['w']} c={s['c']} "
                       f"r={r} s={r}\n")
    return Program(f"pool_c{s['c']}_{s['h']}x{s['w']}_{r}x{r}_s{stride}", "pool",
                   f"O[c,h,w] {op} I[c, {_index(stride, 'h', 'r')}, {_index(stride, 'w', 's')}]"
                   f"\n{_sizes(s)}\n")


def reduction(rng: random.Random, max_flops: float) -> Program:
    op = rng.choice(["+=", "max="])
    s = _fit(rng, {"r": _extent(rng, 1, 4096), "c": _extent(rng, 1, 4096)}, 1, max_flops)
    if rng.random() < 0.5:
        return Program(f"rowreduce_{s['r']}x{s['c']}", "reduction",
                       f"O[r] {op} I[r,c]\n{_sizes(s)}\n")
    return Program(f"colreduce_{s['r']}x{s['c']}", "reduction",
                   f"O[c] {op} I[r,c]\n{_sizes(s)}\n")


def gemv(rng: random.Random, max_flops: float) -> Program:
    s = _fit(rng, {"k": _extent(rng, 1, 4096), "n": _extent(rng, 1, 4096)}, 2, max_flops)
    if rng.random() < 0.5:
        return Program(f"gemv_{s['k']}x{s['n']}", "gemv", f"y[n] += x[k] * W[k,n]\n{_sizes(s)}\n")
    return Program(f"gemvt_{s['n']}x{s['k']}", "gemv",
                   f"y[m] += A[m,k] * x[k]\nm={s['n']} k={s['k']}\n")


def transpose(rng: random.Random, max_flops: float) -> Program:
    if rng.random() < 0.5:
        s = _fit(rng, {"m": _extent(rng, 1, 2048), "n": _extent(rng, 1, 2048)}, 1, max_flops / 4)
        return Program(f"transpose_{s['m']}x{s['n']}", "transpose",
                       f"B[n,m] = A[m,n]\n{_sizes(s)}\n")
    s = _fit(rng, {"c": _extent(rng, 1, 512), "h": rng.choice([7, 14, 28, 56]),
                   "w": rng.choice([7, 14, 28, 56])}, 1, max_flops / 4)
    if rng.random() < 0.5:
        return Program(f"chw_to_hwc_{s['c']}x{s['h']}x{s['w']}", "transpose",
                       f"B[h,w,c] = A[c,h,w]\n{_sizes(s)}\n")
    return Program(f"hwc_to_chw_{s['c']}x{s['h']}x{s['w']}", "transpose",
                   f"B[c,h,w] = A[h,w,c]\n{_sizes(s)}\n")


# The catalog's 2-D transposes (transpose-v0: 256 x 256, 512 x 1024, 1024 x 512), evaluated by
# policy_search_bench: large_transpose draws again where it would draw one of them.
EVALUATION_TRANSPOSES = {(256, 256), (512, 1024), (1024, 512)}


def large_transpose(rng: random.Random, max_flops: float) -> Program:
    """Transposes of 0.5-4 M elements, whose rows lie far apart: 2-D with extents 128..4096
    (powers of two half the time), or CHW <-> HWC with 64..1024 channels on 14..112 maps.
    `transpose` draws few so large (2 of its 45 in the AVX2 records past 2 M elements), and the
    policies learned from its draws tiled such transposes poorly (1-3 GFLOPS on 1024 x 1024 and
    3072 x 768 ones, where a 3 s search reaches 5-11 on such shapes). EVALUATION_TRANSPOSES are
    drawn again, and so is a draw past the size range (after `_fit`; a fixed 1000 x 2000 one,
    fitted, after 100 tries)."""
    def extent(low: int, high: int) -> int:
        if rng.random() < 0.5:
            return rng.choice([1 << e for e in range(16) if low <= 1 << e <= high])
        return rng.randint(low, high)
    for _ in range(100):
        if rng.random() < 0.7:
            s = {"m": extent(128, 4096), "n": extent(128, 4096)}
        else:
            side = rng.choice([14, 28, 56, 112])
            s = {"c": extent(64, 1024), "h": side, "w": side}
        s = _fit(rng, s, 1, max_flops / 4)
        if "m" in s and (s["m"], s["n"]) in EVALUATION_TRANSPOSES:
            continue
        if (1 << 19) <= math.prod(s.values()) <= (1 << 22):
            break
    else:
        s = _fit(rng, {"m": 1000, "n": 2000}, 1, max_flops / 4)
    if "m" in s:
        return Program(f"transpose_{s['m']}x{s['n']}", "large_transpose",
                       f"B[n,m] = A[m,n]\n{_sizes(s)}\n")
    if rng.random() < 0.5:
        return Program(f"chw_to_hwc_{s['c']}x{s['h']}x{s['w']}", "large_transpose",
                       f"B[h,w,c] = A[c,h,w]\n{_sizes(s)}\n")
    return Program(f"hwc_to_chw_{s['c']}x{s['h']}x{s['w']}", "large_transpose",
                   f"B[c,h,w] = A[h,w,c]\n{_sizes(s)}\n")


def elementwise(rng: random.Random, max_flops: float) -> Program:
    s = _fit(rng, {"m": _extent(rng, 1, 2048), "n": _extent(rng, 1, 2048)}, 1, max_flops / 4)
    style = rng.choice(["add", "add_relu", "broadcast", "concat"])
    if style == "add":
        return Program(f"add_{s['m']}x{s['n']}", "elementwise",
                       f"C[m,n] = A[m,n] + B[m,n]\n{_sizes(s)}\n")
    if style == "add_relu":
        return Program(f"add_relu_{s['m']}x{s['n']}", "elementwise",
                       f"C[m,n] = A[m,n] + B[m,n] -> relu\n{_sizes(s)}\n")
    if style == "broadcast":
        return Program(f"broadcast_{s['m']}x{s['n']}", "elementwise",
                       f"B[m,n] = a[n]\n{_sizes(s)}\n")
    b = _extent(rng, 1, 1024)
    return Program(f"concat_{s['m']}x{s['n']}x{b}", "elementwise",
                   f"C[m,a] = A[m,a]\nC[m,b+{s['n']}] = B[m,b]\nm={s['m']} a={s['n']} b={b}\n")


GENERATORS: Dict[str, Callable[[random.Random, float], Program]] = {
    "matmul": matmul, "bmm": bmm, "linear": linear, "conv": conv, "depthwise": depthwise, "pool": pool,
    "reduction": reduction, "gemv": gemv, "transpose": transpose, "elementwise": elementwise,
    "attention": attention, "large_transpose": large_transpose,
}
# How often each kind is drawn: the compute-bound kinds most, where schedules matter most.
WEIGHTS = {"matmul": 4, "bmm": 2, "linear": 1, "conv": 4, "depthwise": 2, "pool": 2, "reduction": 1, "gemv": 1,
           "transpose": 1, "elementwise": 1, "attention": 1, "large_transpose": 1}


# The server's default limits (backend/ir/limits.h) a program must keep.
MAX_EXTENT = 8192
MAX_TENSOR_ELEMENTS = 1 << 24


def index_span(index: str, sizes: Dict[str, int]) -> int:
    """How many positions an index expression reaches: `2*h+r` spans 2*(h-1) + (r-1) + 1, and a
    constant term shifts it (`b+512` reaches b + 512)."""
    span = 1
    for term in index.replace(" ", "").split("+"):
        coef, _, var = term.rpartition("*")
        if var in sizes:
            span += int(coef or 1) * (sizes[var] - 1)
        elif var.isdigit():
            span += int(var)
    return span


def within_limits(program: str) -> bool:
    """Whether every loop extent and every tensor of `program` (read off its accesses,
    index_span) is within the server's default limits."""
    lines = program.strip().splitlines()
    sizes = {k: int(v) for k, v in (item.split("=") for item in lines[-1].split())}
    if any(v > MAX_EXTENT for v in sizes.values()):
        return False
    for line in lines[:-1]:
        for access in re.findall(r"[A-Za-z_]\w*\[([^\]]*)\]", line):
            elements = 1
            for index in access.split(","):
                elements *= index_span(index, sizes)
            if elements > MAX_TENSOR_ELEMENTS:
                return False
    return True


def synthetic(count: int, seed: int = 0, max_flops: float = DEFAULT_MAX_FLOPS,
              kinds: Sequence[str] = KINDS) -> List[Program]:
    """`count` distinct programs drawn from the kinds by WEIGHTS, reproducibly from `seed`."""
    unknown = sorted(set(kinds) - set(GENERATORS))
    if unknown:
        raise ValueError(f"unknown program kinds {unknown}; known: {', '.join(KINDS)}")
    if count < 0:
        raise ValueError("the number of programs must be >= 0")
    rng = random.Random(seed)
    weights = [WEIGHTS[k] for k in kinds]
    out: List[Program] = []
    texts = set()
    tries = 0
    while len(out) < count and tries < 100 * count + 100:
        tries += 1
        kind = rng.choices(list(kinds), weights)[0]
        p = GENERATORS[kind](rng, max_flops)
        if p.text in texts or not within_limits(p.text):
            continue
        texts.add(p.text)
        out.append(dataclasses.replace(p, name=f"{len(out):05d}_{p.name}"))
    return out


def model_layers(models: Sequence[str] = TRAINING_MODELS, max_flops: float = 0) -> List[Program]:
    """Every distinct layer of torchvision `models` (batch 1, 3x224x224, extracted as the model
    states it: looptool.model.extract(rewrite=False)); those above `max_flops` (when positive) or
    the server's limits (within_limits) left out. Evaluation models are refused."""
    refused = sorted(set(models) & set(EVALUATION_MODELS))
    if refused:
        raise ValueError(f"{', '.join(refused)}: for evaluation only, never for training records")
    import torch
    import torchvision
    from looptool.model import extract as extract_lib
    out: List[Program] = []
    texts = set()
    for name in models:
        if not hasattr(torchvision.models, name):
            raise ValueError(f"{name}: not a torchvision model")
        kwargs = {"aux_logits": False, "init_weights": False} if name == "googlenet" else {}
        model = getattr(torchvision.models, name)(weights=None, **kwargs).eval()
        plan = extract_lib.extract(model, torch.zeros(1, 3, 224, 224), rewrite=False)
        for task_name, task in plan.tasks.items():
            if (task.program in texts or not within_limits(task.program)
                    or (max_flops > 0 and flops(task.program) > max_flops)):
                continue
            texts.add(task.program)
            out.append(Program(f"{name}_{task_name}", task.kind, task.program))
    return out


def flops(program: str) -> float:
    """At most 2 x the product of each statement's sizes, summed: what the caps compare."""
    lines = program.strip().splitlines()
    sizes = {k: int(v) for k, v in (item.split("=") for item in lines[-1].split())}
    total = 0.0
    for line in lines[:-1]:
        names = set(re.findall(r"[A-Za-z_]\w*'*", line))
        product = 2.0
        for var, size in sizes.items():
            if var in names:
                product *= size
        total += product
    return total


def iterate(programs: Sequence[Program], chunk: int) -> Iterator[List[Program]]:
    for i in range(0, len(programs), chunk):
        yield list(programs[i:i + chunk])
