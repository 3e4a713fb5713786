"""Kernels exported by `looptool export`, called from Python.

    lib = looptool.kernels.load("out/")          # a directory, its manifest or its .so
    C = lib.mm64_64_64(A, B)                     # inputs in the header's order; C allocated
    lib["mm64_64_64"](A=A, B=B, out=C)           # by name, into a given output
    run = lib.mm64_64_64.bind(A, B, out=C); run()  # checked once, then called bare

Arguments are numpy arrays or anything with `__dlpack__` (CPU torch tensors, ...): float32,
exactly the kernel's shape, C-contiguous (dense row-major), not overlapping the outputs. A kernel
overwrites every element of its outputs. A call returns its output (a tuple when the kernel has
several): the object passed as `out`, else a new numpy array (64-byte aligned: `empty`). The machine code runs through
ctypes, which releases the GIL: calls on different outputs may run in parallel threads.

Errors: `KernelLibraryError` for a library that cannot be loaded (missing or corrupt files, a
manifest of another format), `UnsupportedCpuError` when this CPU lacks a feature the kernels'
ISA needs (the message names it), `KernelArgumentError` (a ValueError) for a bad call.
"""

import ctypes
import json
import mmap
import os
from typing import Any, Dict, FrozenSet, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

MANIFEST_FORMAT = "looptool-kernels-1"

Array = npt.NDArray[Any]


class KernelLibraryError(Exception):
    """The library cannot be used: a file is missing or corrupt, or the manifest is not ours."""


class UnsupportedCpuError(KernelLibraryError):
    """This CPU lacks a feature the kernels' instruction set needs."""


class KernelArgumentError(ValueError):
    """A kernel was called with an argument of the wrong shape, dtype, layout or number."""


_PAGE = 4096
# Blocks from this size on lie in huge pages of this size (util/aligned_allocator.h's; the
# package ships without it, so tests/python/kernels_test.py checks that the two agree).
_HUGE_BYTES = 4 << 20
_HUGE_PAGE = 2 << 20


def empty(shape: Sequence[int], page_offset: Optional[int] = None) -> Array:
    """An uninitialised float32 array of `shape` starting on a 64-byte boundary (a cache line),
    as the server's timer places tensors. Kernels accept any 4-byte aligned array, but vector
    loads of arrays off a cache line touch more lines: memory-bound kernels run slower on them
    (numpy places large arrays 16 bytes past a page). With `page_offset` (a multiple of 64 below
    4096), the array starts that many bytes past a page boundary: where a tensor sits within its
    pages moves a kernel's speed by several percent (cache-set and 4 KiB aliasing between its
    tensors); `Kernel.empty_tensors` places a kernel's tensors as the server that timed it did.
    Arrays of 4 MiB or more (their whole pages, `page_offset` included) lie, as the server's
    timer holds such tensors, in fresh memory mapped for them, `page_offset` past a 2 MiB
    boundary, advised as transparent huge pages before any page is touched: in 4 KiB pages a
    kernel over them may run slower (one BERT matmul schedule at 0.62-0.96x)."""
    count = int(np.prod(shape, dtype=np.int64))
    if page_offset is not None and (not isinstance(page_offset, int)
                                    or not 0 <= page_offset < _PAGE or page_offset % 64):
        raise ValueError(f"page_offset {page_offset}: a multiple of 64 in [0, {_PAGE})")
    # The server's rule (util/aligned_allocator.h): the block's whole pages, offset included.
    block = -(-(count * 4 + (page_offset or 0)) // _PAGE) * _PAGE
    if block >= _HUGE_BYTES:
        return _huge_block(-(-block // _HUGE_PAGE) * _HUGE_PAGE, page_offset or 0,
                           count).reshape(tuple(shape))
    if page_offset is None:
        raw = np.empty(count + 16, dtype=np.float32)
        start = (-raw.ctypes.data % 64) // 4
    else:
        raw = np.empty(count + _PAGE // 4, dtype=np.float32)
        start = ((page_offset - raw.ctypes.data) % _PAGE) // 4
    return raw[start:start + count].reshape(tuple(shape))


def _huge_block(size: int, offset: int, count: int) -> Array:
    """`count` float32s `offset` bytes into `size` bytes (whole 2 MiB pages) of an anonymous
    mapping of their own, 2 MiB-aligned and advised MADV_HUGEPAGE before any page is touched
    (where the platform has no such advice, plain pages). The array holds the mapping."""
    area = mmap.mmap(-1, size + _HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    whole = np.frombuffer(area, dtype=np.uint8)
    skip = -whole.ctypes.data % _HUGE_PAGE
    if hasattr(mmap, "MADV_HUGEPAGE"):
        area.madvise(mmap.MADV_HUGEPAGE, skip, size)
    return whole[skip + offset:skip + offset + 4 * count].view(np.float32)


def server_page_offset(tensor_id: int) -> int:
    """Where the server's timer starts tensor `tensor_id` of a program (its id in the manifest's
    `tensors`) within its pages: 17 cache lines per id, modulo a page (backend/interp's
    AllocateTensors). The same place in every process, so a kernel timed there times alike."""
    return tensor_id * 17 * 64 % _PAGE


class TensorSpec:
    """One parameter of a kernel: `name`, `shape` (a tuple), `role` ("input" or "output")."""

    def __init__(self, name: str, shape: Sequence[int], role: str) -> None:
        self.name = name
        self.shape: Tuple[int, ...] = tuple(int(d) for d in shape)
        self.role = role

    def __repr__(self) -> str:
        return f"TensorSpec({self.name!r}, {self.shape}, {self.role!r})"


def _array(value: Any, what: str) -> Tuple[Array, bool]:
    """`value` as a numpy array sharing its memory, and whether it came through DLPack (whose
    arrays numpy marks read-only though their memory is the producer's to write)."""
    if isinstance(value, np.ndarray):
        return value, False
    if hasattr(value, "__dlpack__"):
        try:
            return np.from_dlpack(value), True
        except (TypeError, ValueError, RuntimeError, BufferError) as e:
            raise KernelArgumentError(f"{what}: cannot view it through __dlpack__: {e}") from e
    raise KernelArgumentError(
        f"{what}: expected a numpy array or an object with __dlpack__, got {type(value).__name__}")


class Kernel:
    """One exported kernel, callable. Attributes: `name`, `inputs` and `outputs` (TensorSpec
    lists, in call order), `flops`, `isa`, `program` (its loop-nest text), `gflops` (what the
    server measured for it at export), and `manifest` (its entry of the manifest)."""

    def __init__(self, entry: Dict[str, Any], function: Any) -> None:
        self.manifest = entry
        self.name: str = entry["name"]
        self.program: str = entry["program"]
        self.flops: int = int(entry["flops"])
        self.isa: str = entry["isa"]
        self.gflops: float = float(entry["gflops"])
        self.tensors = [TensorSpec(t["name"], t["shape"], t["role"]) for t in entry["tensors"]]
        self.inputs = [t for t in self.tensors if t.role == "input"]
        self.outputs = [t for t in self.tensors if t.role == "output"]
        self._function = function
        self._pointers = ctypes.c_void_p * len(self.tensors)
        self._input_ids = [i for i, t in enumerate(self.tensors) if t.role == "input"]
        self._output_ids = [i for i, t in enumerate(self.tensors) if t.role == "output"]

    def __repr__(self) -> str:
        ins = ", ".join(f"{t.name}{list(t.shape)}" for t in self.inputs)
        outs = ", ".join(f"{t.name}{list(t.shape)}" for t in self.outputs)
        return f"<looptool kernel {self.name}({ins}) -> {outs}, {self.isa}>"

    def _checked(self, spec: TensorSpec, value: Any, output: bool) -> Array:
        if type(value) is np.ndarray:  # the common case, without _array's checks
            array, through_dlpack = value, False
        else:
            array, through_dlpack = _array(value, f"{self.name}: {spec.role} {spec.name}")
        if array.dtype is not _FLOAT32 or array.shape != spec.shape or \
                not array.flags.c_contiguous or (output and not through_dlpack and
                                                 not array.flags.writeable):
            self._complain(spec, array, output and not through_dlpack)
        return array

    def _complain(self, spec: TensorSpec, array: Array, writable_numpy: bool) -> None:
        """Raises for what is wrong with `array` (the fast check above may also send an array
        that is right, e.g. float32 under another dtype object: nothing is raised then)."""
        what = f"{self.name}: {spec.role} {spec.name}"
        if array.dtype != np.float32:
            raise KernelArgumentError(f"{what}: dtype is {array.dtype}, the kernel takes float32")
        if array.shape != spec.shape:
            raise KernelArgumentError(
                f"{what}: shape is {tuple(array.shape)}, the kernel takes {spec.shape}")
        if not array.flags.c_contiguous:
            raise KernelArgumentError(
                f"{what}: not C-contiguous (strides {array.strides}); pass a dense row-major "
                "array (numpy.ascontiguousarray, tensor.contiguous())")
        if writable_numpy and not array.flags.writeable:
            raise KernelArgumentError(f"{what}: the array is read-only")

    def _gather(self, args: Tuple[Any, ...], named: Dict[str, Any]) -> List[Any]:
        """The inputs in call order from positional and named arguments."""
        if len(args) > len(self.inputs):
            raise KernelArgumentError(
                f"{self.name}: takes {len(self.inputs)} inputs "
                f"({', '.join(t.name for t in self.inputs)}), got {len(args)}")
        given: Dict[str, Any] = {t.name: a for t, a in zip(self.inputs, args)}
        for key, value in named.items():
            if key not in {t.name for t in self.inputs}:
                raise KernelArgumentError(
                    f"{self.name}: no input named {key!r} (inputs: "
                    f"{', '.join(t.name for t in self.inputs)})")
            if key in given:
                raise KernelArgumentError(f"{self.name}: input {key} given twice")
            given[key] = value
        missing = [t.name for t in self.inputs if t.name not in given]
        if missing:
            raise KernelArgumentError(f"{self.name}: missing input {', '.join(missing)}")
        return [given[t.name] for t in self.inputs]

    def _outputs(self, out: Any) -> List[Any]:
        """The output objects: given (one object, a sequence in order, or a dict by name), or
        new arrays."""
        if out is None:
            return [empty(t.shape) for t in self.outputs]
        if isinstance(out, dict):
            if set(out) != {t.name for t in self.outputs}:
                raise KernelArgumentError(
                    f"{self.name}: out names {sorted(out)}, the outputs are "
                    f"{[t.name for t in self.outputs]}")
            return [out[t.name] for t in self.outputs]
        if len(self.outputs) == 1 and not isinstance(out, (list, tuple)):
            return [out]
        outs = list(out)
        if len(outs) != len(self.outputs):
            raise KernelArgumentError(
                f"{self.name}: {len(self.outputs)} outputs, got {len(outs)} in out")
        return outs

    def _prepare(self, args: Tuple[Any, ...], out: Any,
                 named: Dict[str, Any]) -> Tuple[Any, List[Any], Any]:
        """Checks a call's arguments; returns the tensors' pointer array (ctypes), the output
        objects and the arrays viewing every tensor (which keep DLPack views alive)."""
        inputs = list(args) if not named and len(args) == len(self.inputs) else \
            self._gather(args, named)
        outs = self._outputs(out)
        arrays: List[Array] = [_EMPTY] * len(self.tensors)
        for i, spec, value in zip(self._input_ids, self.inputs, inputs):
            arrays[i] = self._checked(spec, value, False)
        for i, spec, value in zip(self._output_ids, self.outputs, outs):
            arrays[i] = self._checked(spec, value, True)
        addresses = [a.ctypes.data for a in arrays]
        if any(p % 4 for p in addresses):
            bad = next(t for t, p in zip(self.tensors, addresses) if p % 4)
            raise KernelArgumentError(f"{self.name}: {bad.role} {bad.name}: not aligned to 4 "
                                      "bytes")
        # No output may overlap another array (address ranges; dense arrays).
        for i in self._output_ids:
            lo, hi = addresses[i], addresses[i] + arrays[i].nbytes
            for j, other in enumerate(arrays):
                if j != i and addresses[j] < hi and lo < addresses[j] + other.nbytes:
                    raise KernelArgumentError(f"{self.name}: output {self.tensors[i].name} "
                                              f"overlaps {self.tensors[j].name}")
        return self._pointers(*addresses), outs, arrays

    def __call__(self, *args: Any, out: Any = None, **named: Any) -> Any:
        pointers, outs, _ = self._prepare(args, out, named)
        self._function(pointers)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def empty_tensors(self) -> Tuple[List[Array], List[Array]]:
        """New arrays for every input and output (in call order), each placed within its pages
        as the server's timer placed that tensor (`server_page_offset`): the placement the
        reported GFLOPS were measured with. Uninitialised."""
        arrays = [empty(t.shape, server_page_offset(i)) for i, t in enumerate(self.tensors)]
        return ([arrays[i] for i in self._input_ids], [arrays[i] for i in self._output_ids])

    def bind(self, *args: Any, out: Any = None, **named: Any) -> "BoundKernel":
        """The call with these arguments, checked once: calling the result runs the kernel on
        them again with no checks (a few hundred nanoseconds of Python, for kernels too short
        for a checked call). It holds the arguments; their memory must stay where it is (do not
        resize them)."""
        pointers, outs, arrays = self._prepare(args, out, named)
        return BoundKernel(self._function, pointers, outs[0] if len(outs) == 1 else tuple(outs),
                           (args, named, outs, arrays))


class BoundKernel:
    """A kernel call with its arguments checked once (`Kernel.bind`); `bound()` runs it and
    returns the output(s)."""

    def __init__(self, function: Any, pointers: Any, result: Any, keep: Any) -> None:
        self._function = function
        self._pointers = pointers
        self._result = result
        self._keep = keep  # the arguments, alive as long as the binding

    def __call__(self) -> Any:
        self._function(self._pointers)
        return self._result


_FLOAT32 = np.dtype(np.float32)
_EMPTY: Array = np.empty(0, dtype=np.float32)


def _cpu_flags() -> FrozenSet[str]:
    """This CPU's feature flags as Linux names them (/proc/cpuinfo), empty when unknown."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def _missing(needed: Sequence[str], flags: FrozenSet[str]) -> List[str]:
    # GCC spells SSE4 "sse4.1"; Linux "sse4_1".
    return [f for f in needed if f.replace(".", "_") not in flags]


class KernelLibrary(Mapping[str, Kernel]):
    """The kernels of one exported library, by name (also as attributes). `manifest` is the
    parsed manifest, `path` the shared library loaded."""

    def __init__(self, manifest: Dict[str, Any], path: str, kernels: Dict[str, Kernel]) -> None:
        self.manifest = manifest
        self.path = path
        self._kernels = kernels

    def __getitem__(self, name: str) -> Kernel:
        return self._kernels[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._kernels)

    def __len__(self) -> int:
        return len(self._kernels)

    def __getattr__(self, name: str) -> Kernel:
        kernels: Dict[str, Kernel] = self.__dict__.get("_kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(f"the library has no kernel {name!r} (it has {sorted(kernels)})")

    def __repr__(self) -> str:
        return f"<looptool kernel library {self.path}: {', '.join(self._kernels)}>"


def _manifest_path(path: str) -> str:
    if os.path.isdir(path):
        found = sorted(f for f in os.listdir(path) if f.endswith(".json"))
        if len(found) != 1:
            raise KernelLibraryError(
                f"{path}: expected one manifest (*.json) in the directory, found "
                f"{len(found)}; name the manifest or the .so")
        return os.path.join(path, found[0])
    if path.endswith(".so"):
        base = os.path.basename(path)
        stem = base[3:-3] if base.startswith("lib") else base[:-3]
        return os.path.join(os.path.dirname(path), stem + ".json")
    return path


def _read_manifest(path: str) -> Dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError as e:
        raise KernelLibraryError(f"no kernel manifest at {path}") from e
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise KernelLibraryError(f"{path} is not a LoopTool kernel manifest: {e}") from e
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise KernelLibraryError(
            f"{path} is not a LoopTool kernel manifest (format "
            f"{manifest.get('format') if isinstance(manifest, dict) else None!r}, expected "
            f"{MANIFEST_FORMAT!r})")
    try:
        for key in ("library", "shared_library", "check_symbol"):
            if not isinstance(manifest[key], str):
                raise TypeError(key)
        for k in manifest["kernels"]:
            for key in ("name", "tensors_symbol", "program", "isa"):
                if not isinstance(k[key], str):
                    raise TypeError(key)
            int(k["flops"])
            float(k["gflops"])
            list(k["cpu_features"])
            for t in k["tensors"]:
                if t["role"] not in ("input", "output") or t.get("dtype", "float32") != "float32":
                    raise ValueError("tensor role or dtype")
                [int(d) for d in t["shape"]]
                str(t["name"])
    except (KeyError, TypeError, ValueError) as e:
        raise KernelLibraryError(f"{path}: the manifest is incomplete or corrupt ({e!r})") from e
    return manifest


def load(path: str, cpu_features: Optional[Sequence[str]] = None) -> KernelLibrary:
    """Loads the library `looptool export` wrote: `path` is its directory, its manifest
    (<name>.json) or its shared library (lib<name>.so, the manifest beside it).

    `cpu_features`: the CPU's features as Linux names them ("avx512f", "fma", ...) to check the
    kernels' ISA against; default: this CPU's (/proc/cpuinfo, and the library's own check).
    Raises KernelLibraryError or UnsupportedCpuError (see the module's doc)."""
    manifest_path = _manifest_path(os.fspath(path))
    manifest = _read_manifest(manifest_path)
    kernels_json: List[Dict[str, Any]] = manifest["kernels"]
    flags = frozenset(cpu_features) if cpu_features is not None else _cpu_flags()
    lacking: Dict[str, List[str]] = {}
    for k in kernels_json:
        for feature in _missing(k["cpu_features"], flags):
            lacking.setdefault(feature, []).append(k["name"])
    if lacking and (cpu_features is not None or flags):
        features = ", ".join(sorted(lacking))
        users = sorted({n for names in lacking.values() for n in names})
        raise UnsupportedCpuError(
            f"this CPU lacks {features}, which the {kernels_json[0]['isa']} code of kernels "
            f"{', '.join(users)} in {manifest_path} needs; export them again on (or with "
            "--isa= for) this machine")
    so_path = os.path.join(os.path.dirname(manifest_path), manifest["shared_library"])
    try:
        library = ctypes.CDLL(os.path.abspath(so_path))
    except OSError as e:
        raise KernelLibraryError(f"cannot load {so_path}: {e}") from e
    try:
        check = library[manifest["check_symbol"]]
    except AttributeError as e:
        raise KernelLibraryError(
            f"{so_path} does not match its manifest: no {manifest['check_symbol']}") from e
    check.restype = ctypes.c_char_p
    check.argtypes = []
    message = check()
    if message is not None and cpu_features is None:
        raise UnsupportedCpuError(f"{so_path}: {message.decode()}")
    kernels: Dict[str, Kernel] = {}
    for k in kernels_json:
        try:
            function = library[k["tensors_symbol"]]
        except AttributeError as e:
            raise KernelLibraryError(
                f"{so_path} does not match its manifest: no {k['tensors_symbol']}") from e
        function.restype = None
        function.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        kernels[k["name"]] = Kernel(k, function)
    return KernelLibrary(manifest, os.path.abspath(so_path), kernels)
