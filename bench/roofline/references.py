"""Library references for the catalog's memory-bound kernels: each benchmark of roofline_bench
computed the library way (PyTorch 1.13, one thread; OpenBLAS's cblas_somatcopy for the 2-D
transposes, the faster of the two), on the same data layout as the program (a CHW program is
not allowed a channels-last library call: that would need a reorder), timed as the best of 7
batches after a warm-up. The GFLOPS use the server's flop_count of the program, so they compare
with its kernels' directly.

    REFERENCES[name]() -> (label, callable, check)

`check()` returns the largest difference between the library's result and the program's
definition computed another way (numpy), relative to the largest value, so a wrong mapping shows.
"""
import ctypes
import os
import time
from typing import Callable, Dict, Optional, Tuple

# One thread for every pool the libraries may use, set before torch (and its BLAS) is loaded:
# torch.set_num_threads does not reach OpenBLAS's own pool (torch.mv ran on both cores of the
# VM, 1.6x as fast), and pinning the calling thread later does not pin threads made before.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

Reference = Tuple[str, Callable[[], object], Callable[[], float]]


def _openblas() -> Optional[ctypes.CDLL]:
    """The OpenBLAS torch calls (Debian's torch reaches BLAS through libblas.so.3), one-threaded,
    or None."""
    try:
        lib = ctypes.CDLL("libblas.so.3")
        lib.openblas_set_num_threads(1)
        lib.cblas_somatcopy  # noqa: B018 (only OpenBLAS has it)
        return lib
    except (OSError, AttributeError):
        return None


def _rand(*shape: int) -> torch.Tensor:
    return torch.rand(*shape, dtype=torch.float32)


def _close(a: torch.Tensor, b: np.ndarray) -> float:
    """max |a - b| / max |b|."""
    return float(np.max(np.abs(a.numpy() - b)) / max(float(np.max(np.abs(b))), 1e-30))


def _reduce(shape, label, fn, ref) -> Reference:
    x = _rand(*shape)
    return (label, lambda: fn(x), lambda: _close(fn(x), ref(x.numpy())))


def _gemv(m: int, k: int, transposed: bool) -> Reference:
    a = _rand(m, k) if not transposed else _rand(k, m)
    x = _rand(k)
    y = torch.empty(m)
    if transposed:  # y[n] += x[k] * A[k,n]
        def run(): return torch.mv(a.t(), x, out=y)
        want = lambda: x.numpy() @ a.numpy()
    else:
        def run(): return torch.mv(a, x, out=y)
        want = lambda: a.numpy() @ x.numpy()
    return ("torch.mv" if not transposed else "torch.mv(A.t(), x)", run,
            lambda: _close(run(), want()))


def _transpose(m: int, n: int) -> Reference:
    """B[n,m] = A[m,n]: the faster of PyTorch's copy and OpenBLAS's out-of-place transpose."""
    a = _rand(m, n)
    b = torch.empty(n, m)
    lib = _openblas()
    candidates = [("torch copy_(A.t())", lambda: b.copy_(a.t()))]
    if lib is not None:
        p = ctypes.c_void_p
        ap, bp = ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(b.data_ptr())
        lib.cblas_somatcopy.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                        ctypes.c_float, p, ctypes.c_int, p, ctypes.c_int]
        # CblasRowMajor (101), CblasTrans (112): rows m, cols n of A, lda n, ldb m.
        candidates.append(("OpenBLAS cblas_somatcopy",
                           lambda: lib.cblas_somatcopy(101, 112, m, n, 1.0, ap, n, bp, m)))
    label, run = min(candidates, key=lambda c: seconds(c[1]))
    return (label, run, lambda: (run(), _close(b, a.numpy().T))[1])


def _permute(shape, dims) -> Reference:
    a = _rand(*shape)
    b = torch.empty(*[shape[d] for d in dims])
    return ("torch copy_(A.permute)", lambda: b.copy_(a.permute(*dims)),
            lambda: _close(b.copy_(a.permute(*dims)), np.transpose(a.numpy(), dims)))


def _np_maxpool(x: np.ndarray, k: int, out_h: int, out_w: int) -> np.ndarray:
    """x [..., H, W] -> [..., out_h, out_w], window k, stride 2."""
    best = None
    for r in range(k):
        for s in range(k):
            tap = x[..., r:r + 2 * out_h:2, s:s + 2 * out_w:2]
            best = tap if best is None else np.maximum(best, tap)
    return best


def _maxpool_chw(c: int, h: int, w: int, k: int) -> Reference:
    """O[c,h,w] max= I[c, 2*h+r, 2*w+s]: NCHW max_pool2d over the input the program reads."""
    x = _rand(1, c, 2 * (h - 1) + k, 2 * (w - 1) + k)
    run = lambda: F.max_pool2d(x, k, 2)
    return ("torch max_pool2d (NCHW)", run,
            lambda: _close(run()[0], _np_maxpool(x.numpy()[0], k, h, w)))


def _maxpool_hwc(h: int, w: int, c: int, k: int) -> Reference:
    """O[h,w,c] max= I[2*h+r, 2*w+s, c]: channels-last max_pool2d (PyTorch's NHWC path)."""
    hwc = _rand(2 * (h - 1) + k, 2 * (w - 1) + k, c)
    x = hwc.permute(2, 0, 1)[None]  # a channels-last view of the HWC data
    run = lambda: F.max_pool2d(x, k, 2)
    want = lambda: np.transpose(_np_maxpool(np.transpose(hwc.numpy(), (2, 0, 1)), k, h, w),
                                (1, 2, 0))
    return ("torch max_pool2d (channels last)", run,
            lambda: _close(run()[0].permute(1, 2, 0).contiguous(), want()))


def _maxpool_2d(r: int, c: int, k: int) -> Reference:
    x = _rand(1, 1, 2 * (r - 1) + k, 2 * (c - 1) + k)
    run = lambda: F.max_pool2d(x, k, 2)
    return ("torch max_pool2d", run, lambda: _close(run()[0, 0], _np_maxpool(x.numpy()[0, 0], k, r, c)))


def _broadcast(m: int, n: int) -> Reference:
    a = _rand(n)
    b = torch.empty(m, n)
    return ("torch copy_(a.expand)", lambda: b.copy_(a.expand(m, n)),
            lambda: _close(b.copy_(a.expand(m, n)), np.broadcast_to(a.numpy(), (m, n))))


def _concat(m: int, na: int, nb: int) -> Reference:
    a, b = _rand(m, na), _rand(m, nb)
    c = torch.empty(m, na + nb)
    run = lambda: torch.cat([a, b], 1, out=c)
    return ("torch.cat", run,
            lambda: _close(run(), np.concatenate([a.numpy(), b.numpy()], 1)))


def _add_relu(m: int, n: int) -> Reference:
    a, b = _rand(m, n) - 0.5, _rand(m, n) - 0.5
    c = torch.empty(m, n)
    def run():
        torch.add(a, b, out=c)
        return c.relu_()
    return ("torch add + relu_", run,
            lambda: _close(run(), np.maximum(a.numpy() + b.numpy(), 0)))


REFERENCES: Dict[str, Callable[[], Reference]] = {
    "reduce-v0/rowsum_1024_1024": lambda: _reduce(
        (1024, 1024), "torch.sum(I, 1)", lambda x: torch.sum(x, 1), lambda x: x.sum(1)),
    "reduce-v0/colsum_1024_1024": lambda: _reduce(
        (1024, 1024), "torch.sum(I, 0)", lambda x: torch.sum(x, 0), lambda x: x.sum(0)),
    "reduce-v0/rowmax_512_2048": lambda: _reduce(
        (512, 2048), "torch.amax(I, 1)", lambda x: torch.amax(x, 1), lambda x: x.max(1)),
    "reduce-v0/batchsum_64_64_256": lambda: _reduce(
        (64, 64, 256), "torch.sum(I, 0)", lambda x: torch.sum(x, 0), lambda x: x.sum(0)),
    "reduce-v0/gemv_1024_1024": lambda: _gemv(1024, 1024, False),
    "reduce-v0/gevm_1024_1024": lambda: _gemv(1024, 1024, True),
    "transpose-v0/transpose_256_256": lambda: _transpose(256, 256),
    "transpose-v0/transpose_512_1024": lambda: _transpose(512, 1024),
    "transpose-v0/transpose_1024_512": lambda: _transpose(1024, 512),
    "transpose-v0/hwc_to_chw_56_56_64": lambda: _permute((56, 56, 64), (2, 0, 1)),
    "transpose-v0/chw_to_hwc_64_56_56": lambda: _permute((64, 56, 56), (1, 2, 0)),
    "pool-v0/resnet_maxpool_3x3s2_64_56": lambda: _maxpool_chw(64, 56, 56, 3),
    "pool-v0/vgg_maxpool_2x2s2_128_56": lambda: _maxpool_chw(128, 56, 56, 2),
    "pool-v0/maxpool_nhwc_3x3s2_64_56": lambda: _maxpool_hwc(56, 56, 64, 3),
    "pool-v0/maxpool_nhwc_2x2s2_256_28": lambda: _maxpool_hwc(28, 28, 256, 2),
    "pool-v0/maxpool2d_3x3s2_128": lambda: _maxpool_2d(128, 128, 3),
    "pool-v0/global_sumpool_512_7": lambda: _reduce(
        (512, 7, 7), "torch.sum(I, (1, 2))", lambda x: torch.sum(x, (1, 2)),
        lambda x: x.sum((1, 2))),
    "elementwise-v0/broadcast_rows_512_1024": lambda: _broadcast(512, 1024),
    "elementwise-v0/concat_cols_256_512_512": lambda: _concat(256, 512, 512),
    "elementwise-v0/add_relu_512_1024": lambda: _add_relu(512, 1024),
}


def seconds(run: Callable[[], object], batch_seconds: float = 0.05, batches: int = 7) -> float:
    """Seconds per call: the best of `batches` batches of about `batch_seconds`, after a warm-up."""
    t0 = time.perf_counter()
    calls = 0
    while time.perf_counter() - t0 < batch_seconds:
        run()
        calls += 1
    n = max(1, calls)
    best = float("inf")
    for _ in range(batches):
        t = time.perf_counter()
        for _ in range(n):
            run()
        best = min(best, (time.perf_counter() - t) / n)
    return best


def measure(name: str, flop_count: float) -> Optional[Dict[str, object]]:
    """The reference's label, GFLOPS (the program's flop_count over its time) and check, or None
    when the benchmark has no reference."""
    if name not in REFERENCES:
        return None
    torch.set_num_threads(1)
    blas = _openblas()
    if blas is not None:
        blas.openblas_set_num_threads(1)
    label, run, check = REFERENCES[name]()
    error = check()
    return {"label": label, "gflops": flop_count / seconds(run) / 1e9, "relative_error": error}
