"""A PyTorch model's layers as LoopTool programs (torch.fx).

`extract(model, example)` traces the model in eval mode (torch.fx.symbolic_trace), propagates
the example input's shapes, and walks the graph in order. A *layer* is a run of nodes one
kernel computes; its *task* is the program that kernel tunes (layers of one shape share a task).

What becomes a layer, with the program its task tunes (the batch index `n` is left out when the
batch is 1, so a layer's program is the catalog's conv2d-v0 form):

  1. nn.Conv2d, zero padding, any stride and dilation:
       groups 1               O[k,h,w] += I[c, S*h+D*r, S*w+D*s] * W[k,c,r,s]
                              (1x1: no window loops; strided, batch 1, no dilation: the
                              stride-1 convolution over the input's phases, `Layer`). With
                              `weights_k_last` (default: `rewrite`) the weights are laid out
                              W[c,r,s,k] (1x1: W[c,k]) once, at extraction, so that the output
                              channels may be the vector (`lay_out_weights_k_last`).
       groups = in = out      O[c,h,w] += I[c, S*h+D*r, S*w+D*s] * W[c,r,s]      (depthwise)
       other groups           O[g,k,h,w] += I[g,c, S*h+D*r, S*w+D*s] * W[g,k,c,r,s]
     An nn.BatchNorm2d (eval mode, running statistics) that alone reads the convolution is folded
     into its weights and bias.
  2. nn.Linear:               Y[m,n] += X[m,k] * W[k,n]  (W is the weight transposed; m leading
                              dimensions flattened; y[n] += x[k] * W[k,n] for one row)
  3. nn.MaxPool2d (zero dilation aside: any kernel, stride, padding, dilation; not ceil_mode):
                              O[c,h,w] max= I[c, S*h+D*r, S*w+D*s]  (padding is -inf)
     nn.AvgPool2d (count_include_pad, not ceil_mode): a sum pool, scaled after the kernel;
     adaptive average pooling to 1x1 (module or function): O[c] += I[c,h,w], scaled after.
  4. A sum of two tensors of one shape (operator.add, torch.add without alpha: residual adds):
                              C[...] = A[...] + B[...]
  5. After a layer, when it alone reads the layer's result: ReLU (module, F.relu, torch.relu,
     .relu()), ReLU6 and Hardtanh. The language's statements take at most two operands and no
     program reads a tensor it writes, so `conv + bias` is not one statement; instead the bias
     of a convolution (groups 1) or linear layer is one more input channel held at 1 whose
     weights are the bias at one tap (`Layer.bias_axis`; (C+1)/C the FLOPs). A relu goes into
     the kernel (`-> relu`) when nothing else comes between (no scale, no bias left outside).
     Otherwise bias (depthwise, grouped), scale and activation are the layer's *epilogue*,
     done in place by PyTorch after the kernel.

Convolution and pooling inputs are copied into a buffer that carries the padding (zeros, or
-inf for max pooling) and is cropped to the rows the kernel reads (`Layer.kernel_input_shape`).
Every other node is left to PyTorch and listed in `Plan.left` with the reason.

Layouts (`extract(..., layout=)`): "nchw" (the default, the forms above) or "nhwc", batch 1:
channels last, as oneDNN's and PyTorch's `channels_last`. Convolutions of groups 1 and depthwise
ones, pools and 4-D adds then read and write (H, W, C) and the weights are laid out for it once,
at extraction (not timed, as a library's weight reorder at load time):
       groups 1               O[h,w,k] += I[S*h+D*r, S*w+D*s, c] * W[r,s,c,k]   (1x1: W[c,k])
       depthwise              O[h,w,c] += I[S*h+D*r, S*w+D*s, c] * W[r,s,c]
       pools                  O[h,w,c] max= I[S*h+D*r, S*w+D*s, c]; global: O[c] += I[h,w,c]
       adds                   C[h,w,c] = A[h,w,c] + B[h,w,c]
The vector lanes then run along the channels, whatever the stride or the map's size (strided
convolutions need no phases; 7x7 maps leave no lanes idle). A layer's result is the kernel's
(H, W, C) output seen as the model's (1, C, H, W) tensor in PyTorch's channels_last strides (no
copy), so a chain of such layers passes its activations on without a repack; the first layer's
padding copy repacks the model's NCHW input, and nodes left to PyTorch see ordinary tensors.
Grouped convolutions and linear layers keep their forms (their inputs are copied to them).

With `out_block=B` (channels last only), a convolution of groups 1 whose K output channels are a
multiple of B above B, and whose weights take at least `block_min_bytes` (default 512 KiB, the
L2 of a Zen 3 core), also reads its weights blocked by output channel, as oneDNN's blocked
formats (OhwiXo): W[b,r,s,c,k] = W[r,s,c,B*b+k] (1x1: W[b,c,k]), and writes O[h,w,b,k], the
same bytes as O[h,w,B*b+k]. One block of weights (all its taps and input channels, B output
channels) is then contiguous and serves the whole map, where W[r,s,c,k] puts K floats between
two input channels. Smaller weights stay in cache either way, and there the unblocked form was
as fast or faster (bench/results/layout_blocked_weights.md). The weights are laid out once, at
extraction, like the rest; the activations do not change. The sketches put b outside every
loop (backend/actions/sketches.h). `block_layers` names the layers to block instead (by their
first node, `Layer.nodes[0]`), whatever their weights' size: `looptool.model tune
--choose-blocks` tunes both forms of every layer that can be blocked and records the faster.
"""

import dataclasses
import hashlib
import math
import operator
from typing import Any, Collection, Dict, List, Optional, Sequence, Set, Tuple, cast

import numpy as np
import numpy.typing as npt

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp

Array = npt.NDArray[np.float32]


@dataclasses.dataclass(frozen=True)
class Task:
    """One kernel to tune: a program, named as its kernel will be (a C identifier)."""
    name: str
    kind: str       # conv, depthwise, grouped_conv, linear, maxpool, sumpool, add
    program: str    # LoopTool program text


@dataclasses.dataclass
class Layer:
    """Nodes of the traced model that one kernel call (plus its epilogue) computes."""
    name: str                        # the fx node whose value the layer produces (its last)
    nodes: List[str]                 # every node it replaces, in graph order
    inputs: List[str]                # the nodes it reads: 1, or 2 for an add
    modules: List[str]               # the model's modules it covers (for the report)
    task: str                        # Task.name
    kind: str
    kernel_input_shapes: List[Tuple[int, ...]]   # what the kernel reads, in its order
    kernel_output_shape: Tuple[int, ...]
    result_shape: Tuple[int, ...]    # the PyTorch shape of the layer's value
    input_views: List[Tuple[int, ...]]  # each input's shape as the kernel indexes it, unpadded
    padding: Tuple[int, int] = (0, 0)   # rows and columns of padding before the input
    pad_value: float = 0.0
    weight: Optional[Array] = None   # the kernel's W, laid out as the program reads it
    bias: Optional[Array] = None     # per output channel (conv) or feature (linear)
    scale: float = 1.0               # average pools: 1 / window
    # Strided convolutions (batch 1, groups 1, no dilation) run as stride-1 ones: the input,
    # padded to `padded_shape` (C, S*Y, S*X), is copied as its S*S phases, phase (a, b) holding
    # rows S*y+a and columns S*x+b, into the kernel's (C*S*S, Y, X) input, and the weights are
    # rearranged to match (zero where a phase's tap falls past the window). A 1x1 keeps only
    # phase (0, 0): the copy subsamples.
    phase_stride: int = 1
    phases_kept: int = 1
    padded_shape: Tuple[int, ...] = ()
    # A bias in the kernel (convolutions of groups 1, linear): the kernel's input has one more
    # slot on this axis (a channel, or a feature), held at 1 by the runtime; -1: none.
    bias_axis: int = -1
    kernel_relu: bool = False        # `-> relu` in the program
    # Channels last ("nhwc"): the kernel's tensors are (H, W, C) (global pools: (C,) out), the
    # layer's input a (1, C, H, W) tensor read through its channels_last view.
    channels_last: bool = False
    # Output channels per weight block (`extract(out_block=)`): the kernel writes (H, W, K/B, B)
    # and reads W[b,r,s,c,k] (1x1: W[b,c,k]); 0: not blocked.
    out_block: int = 0
    activation: str = ""             # epilogue: "", "relu", or "clamp"
    clamp: Tuple[float, float] = (0.0, 6.0)

    def epilogue(self) -> List[str]:
        """The epilogue's steps in order, as the report names them."""
        steps = []
        if self.bias is not None:
            steps.append("bias")
        if self.scale != 1.0:
            steps.append("scale")
        if self.activation:
            steps.append(self.activation if self.activation == "relu" else
                         f"clamp({self.clamp[0]:g},{self.clamp[1]:g})")
        return steps


@dataclasses.dataclass(frozen=True)
class Left:
    """A node left to PyTorch: its name, what it is, and why no kernel computes it."""
    node: str
    op: str
    why: str


@dataclasses.dataclass
class Plan:
    """What extract() found: tasks (first-use order), layers (graph order), nodes left."""
    graph_module: torch.fx.GraphModule
    input_shape: Tuple[int, ...]
    tasks: Dict[str, Task]
    layers: List[Layer]
    left: List[Left]

    def weight(self, task: str) -> int:
        """How many layers the task's kernel computes."""
        return sum(1 for layer in self.layers if layer.task == task)

    def layers_of(self, task: str) -> List[Layer]:
        return [layer for layer in self.layers if layer.task == task]


class ExtractError(ValueError):
    """The model cannot be traced or run on the example input."""


# ---- programs ----

def _index(stride: int, var: str, dilation: int, tap: str) -> str:
    """`S*h+D*r`, coefficients of 1 left out."""
    a = var if stride == 1 else f"{stride}*{var}"
    b = tap if dilation == 1 else f"{dilation}*{tap}"
    return f"{a}+{b}"


def _sizes(**extents: int) -> str:
    return " ".join(f"{k}={v}" for k, v in extents.items())


def _window_extent(out: int, stride: int, dilation: int, taps: int) -> int:
    """Rows of the (padded) input a window of `taps` read for `out` outputs."""
    return stride * (out - 1) + dilation * (taps - 1) + 1


def _name(kind: str, parts: Sequence[Any], program: str, taken: Dict[str, Task]) -> str:
    """A readable C identifier; a short hash of the program only when two programs collide."""
    name = "_".join([kind, *[str(p) for p in parts]])
    if name in taken and taken[name].program != program:
        name += "_" + hashlib.sha1(program.encode()).hexdigest()[:6]
    return name


# ---- the graph ----

def _shape(node: torch.fx.Node) -> Optional[Tuple[int, ...]]:
    meta = node.meta.get("tensor_meta")
    if meta is None or not hasattr(meta, "shape"):
        return None
    return tuple(int(d) for d in meta.shape)


def _float32(node: torch.fx.Node) -> bool:
    meta = node.meta.get("tensor_meta")
    return meta is not None and getattr(meta, "dtype", None) == torch.float32


def _describe(gm: torch.fx.GraphModule, node: torch.fx.Node) -> str:
    if node.op == "call_module":
        return f"{type(gm.get_submodule(str(node.target))).__name__} ({node.target})"
    if node.op == "call_function":
        return getattr(node.target, "__name__", str(node.target))
    return f".{node.target}()"


_RELU_FUNCTIONS = (torch.relu, torch.nn.functional.relu, torch.relu_)
_ADD_FUNCTIONS = (operator.add, operator.iadd, torch.add)
_LAYOUT = {"flatten", "view", "reshape", "size", "contiguous", "getitem", "getattr", "squeeze",
           "unsqueeze", "permute", "transpose", "t", "dim", "expand", "chunk", "split"}


def _activation(gm: torch.fx.GraphModule,
                node: torch.fx.Node) -> Optional[Tuple[str, Tuple[float, float]]]:
    """("relu", _) or ("clamp", (lo, hi)) when the node is an activation a layer can take."""
    if node.op == "call_module":
        m = gm.get_submodule(str(node.target))
        if isinstance(m, torch.nn.ReLU):
            return ("relu", (0.0, 0.0))
        if isinstance(m, torch.nn.Hardtanh):  # ReLU6 is a Hardtanh(0, 6)
            return ("clamp", (float(m.min_val), float(m.max_val)))
        return None
    if node.op == "call_function" and node.target in _RELU_FUNCTIONS and len(node.args) == 1:
        return ("relu", (0.0, 0.0))
    if node.op == "call_function" and node.target is torch.nn.functional.relu6:
        return ("clamp", (0.0, 6.0))
    if node.op == "call_method" and node.target in ("relu", "relu_") and len(node.args) == 1:
        return ("relu", (0.0, 0.0))
    return None


def _sole_user(node: torch.fx.Node) -> Optional[torch.fx.Node]:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


class _Extractor:
    def __init__(self, gm: torch.fx.GraphModule, batch: int, rewrite: bool = True,
                 layout: str = "nchw", out_block: int = 0,
                 block_min_bytes: int = 0,
                 block_layers: Optional[Collection[str]] = None,
                 weights_k_last: bool = True) -> None:
        self.gm = gm
        self.batch = batch
        self.rewrite = rewrite
        self.weights_k_last = weights_k_last
        self.nhwc = layout == "nhwc"
        self.out_block = out_block
        self.block_min_bytes = block_min_bytes
        self.block_layers = None if block_layers is None else frozenset(block_layers)
        self.tasks: Dict[str, Task] = {}
        self.layers: List[Layer] = []
        self.left: List[Left] = []
        self.taken: Set[str] = set()  # node names inside some layer

    def task(self, kind: str, parts: Sequence[Any], program: str) -> str:
        name = _name(kind, parts, program, self.tasks)
        self.tasks.setdefault(name, Task(name, kind, program))
        return name

    def batch_vars(self) -> Tuple[str, str, Dict[str, int]]:
        """("n,", "n,", {"n": N}) for a batch above 1, else empty: the batch index, if any."""
        if self.batch == 1:
            return "", "", {}
        return "n,", "n,", {"n": self.batch}

    def finish(self, layer: Layer, node: torch.fx.Node, parts: Sequence[Any], program: str,
               fold_bn: bool) -> None:
        """Grows the layer, takes its bias into the kernel where it can (`bias_in_kernel`),
        then names its task: `-> relu` (and "_relu") when it fused one."""
        self.grow(layer, node, fold_bn)
        if (self.rewrite and layer.bias is not None and layer.kind in ("conv", "linear")
                and layer.scale == 1.0):
            program = self.bias_in_kernel(layer, program)
            parts = [*parts, "bias"]
        if self.weights_k_last and layer.kind == "conv" and not layer.channels_last \
                and layer.weight is not None and layer.weight.ndim in (2, 4):
            program = self.lay_out_weights_k_last(layer, program)
        if layer.channels_last:
            self.lay_out_channels_last(layer)
            parts = [*parts, "nhwc"]
            if self.block_output_channels(layer):
                program = _blocked_program(program, layer.out_block)
                parts = [*parts, f"ob{layer.out_block}"]
        if layer.kernel_relu:
            program = program.replace("\n", " -> relu\n", 1)
            parts = [*parts, "relu"]
        layer.task = self.task(layer.kind, parts, program)
        self.add(layer)

    def bias_in_kernel(self, layer: Layer, program: str) -> str:
        """The bias as one more input channel (conv) or feature (linear), always 1, whose weight
        is the bias at the window's first tap and zero at the others; a relu that followed
        moves into the kernel. Returns the program with that channel counted."""
        assert layer.bias is not None and layer.weight is not None
        var = "k" if layer.kind == "linear" else "c"
        lines = program.split("\n")
        lines[1] = " ".join(f"{var}={int(t.split('=')[1]) + 1}" if t.startswith(var + "=")
                            else t for t in lines[1].split())
        if layer.kind == "linear":  # W[k,n]: a row more; the input's last axis one longer
            w = np.concatenate([layer.weight, layer.bias[None, :]], axis=0)
            axis = len(layer.kernel_input_shapes[0]) - 1
        else:  # W[k,c,...]: a channel more; the input's channel axis (after a batch) longer
            extra = np.zeros((layer.weight.shape[0], 1, *layer.weight.shape[2:]), np.float32)
            extra[(slice(None), 0) + (0,) * (layer.weight.ndim - 2)] = layer.bias
            w = np.concatenate([layer.weight, extra], axis=1)
            axis = 0 if self.batch == 1 else 1
        shape = list(layer.kernel_input_shapes[0])
        shape[axis] += 1
        layer.kernel_input_shapes = [tuple(shape), tuple(w.shape)]
        layer.weight = np.ascontiguousarray(w, dtype=np.float32)
        layer.bias = None
        layer.bias_axis = axis
        if layer.activation == "relu":
            layer.activation, layer.kernel_relu = "", True
        return "\n".join(lines)

    @staticmethod
    def lay_out_weights_k_last(layer: Layer, program: str) -> str:
        """A (C, H, W) convolution's weights (groups 1), folded and biased as W[k,c,r,s] (1x1:
        W[k,c]), laid out W[c,r,s,k] (W[c,k]) once, here, as a library's weight reorder: each
        tap's weights for consecutive output channels are then contiguous, so a schedule may
        vectorize the output channels and broadcast the input, writing the output with a
        stride (every lane busy on a 7x7 map, where the map's 49 elements fill 49 of 64; a
        strided window read by broadcasts, not by strided vector loads). Returns the program
        reading the new layout."""
        assert layer.weight is not None
        old, new = {2: ("* W[k,c]\n", "* W[c,k]\n"),
                    4: ("* W[k,c,r,s]\n", "* W[c,r,s,k]\n")}[layer.weight.ndim]
        assert old in program, program
        layer.weight = np.ascontiguousarray(np.moveaxis(layer.weight, 0, -1))
        layer.kernel_input_shapes = [*layer.kernel_input_shapes[:-1], tuple(layer.weight.shape)]
        return program.replace(old, new, 1)

    @staticmethod
    def lay_out_channels_last(layer: Layer) -> None:
        """The layer's tensors from the (C, H, W) forms its weights were folded and biased in to
        channels last: weights W[k,c,r,s] -> W[r,s,c,k] (1x1: W[k,c] -> W[c,k]), depthwise
        W[c,r,s] -> W[r,s,c]; (C, H, W) shapes -> (H, W, C); the bias channel's axis last."""
        def hwc(shape: Tuple[int, ...]) -> Tuple[int, ...]:
            return (shape[1], shape[2], shape[0]) if len(shape) == 3 else shape
        if layer.weight is not None:
            w = layer.weight
            order = {("conv", 4): (2, 3, 1, 0), ("conv", 2): (1, 0),
                     ("depthwise", 3): (1, 2, 0)}[(layer.kind, w.ndim)]
            layer.weight = np.ascontiguousarray(w.transpose(order))
        shapes = [hwc(s) for s in layer.kernel_input_shapes]
        if layer.weight is not None:
            shapes[-1] = tuple(layer.weight.shape)
        layer.kernel_input_shapes = shapes
        layer.kernel_output_shape = hwc(layer.kernel_output_shape)
        layer.input_views = [hwc(v) for v in layer.input_views]
        if layer.bias_axis == 0:
            layer.bias_axis = 2

    def block_output_channels(self, layer: Layer) -> bool:
        """A channels-last convolution of groups 1 whose output channels are a multiple of
        `out_block` above it and whose weights take `block_min_bytes` or more (with
        `block_layers`: whose first node it names): weights
        W[r,s,c,k] (1x1: W[c,k]) -> W[b,r,s,c,k'] (W[b,c,k']),
        the output (H, W, K) -> (H, W, K/B, B). Returns whether it did."""
        b = self.out_block
        w = layer.weight
        if b <= 0 or layer.kind != "conv" or w is None or w.ndim not in (2, 4):
            return False
        k = w.shape[-1]
        if k % b != 0 or k <= b:
            return False
        if (layer.nodes[0] not in self.block_layers if self.block_layers is not None
                else w.nbytes < self.block_min_bytes):
            return False
        blocked = w.reshape(*w.shape[:-1], k // b, b)
        layer.weight = np.ascontiguousarray(np.moveaxis(blocked, -2, 0))
        layer.kernel_input_shapes = [*layer.kernel_input_shapes[:-1], tuple(layer.weight.shape)]
        h, w_, _ = layer.kernel_output_shape
        layer.kernel_output_shape = (h, w_, k // b, b)
        layer.out_block = b
        return True

    # A layer grows by a BatchNorm (convolutions only) and an activation that alone read it.
    def grow(self, layer: Layer, last: torch.fx.Node, fold_bn: bool) -> None:
        node = last
        nxt = _sole_user(node)
        if fold_bn and nxt is not None and nxt.op == "call_module":
            bn = self.gm.get_submodule(str(nxt.target))
            if (isinstance(bn, torch.nn.BatchNorm2d) and not bn.training
                    and bn.running_mean is not None and bn.running_var is not None):
                self.fold(layer, bn)
                layer.nodes.append(nxt.name)
                layer.modules.append(str(nxt.target))
                node = nxt
                nxt = _sole_user(node)
        if nxt is not None:
            act = _activation(self.gm, nxt)
            if act is not None:
                if act[0] == "relu" and layer.bias is None and layer.scale == 1.0:
                    layer.kernel_relu = True
                else:
                    layer.activation, layer.clamp = act
                layer.nodes.append(nxt.name)
                if nxt.op == "call_module":
                    layer.modules.append(str(nxt.target))
                node = nxt
        layer.name = node.name
        layer.result_shape = _shape(node) or layer.result_shape

    @staticmethod
    def fold(layer: Layer, bn: torch.nn.BatchNorm2d) -> None:
        """W' = W * gamma / sqrt(var + eps) per output channel; b' = (b - mean) * that + beta."""
        assert bn.running_mean is not None and bn.running_var is not None
        var = bn.running_var.detach().double().numpy()
        mean = bn.running_mean.detach().double().numpy()
        gamma = (bn.weight.detach().double().numpy() if bn.weight is not None
                 else np.ones_like(var))
        beta = (bn.bias.detach().double().numpy() if bn.bias is not None
                else np.zeros_like(var))
        factor = gamma / np.sqrt(var + bn.eps)
        assert layer.weight is not None
        w = layer.weight.astype(np.float64)
        # The output channel is W's first index (conv, depthwise); grouped: (g, k) flattened.
        w = (w.reshape(len(factor), -1) * factor[:, None]).reshape(w.shape)
        layer.weight = np.ascontiguousarray(w, dtype=np.float32)
        b = layer.bias.astype(np.float64) if layer.bias is not None else np.zeros_like(mean)
        layer.bias = ((b - mean) * factor + beta).astype(np.float32)

    def conv(self, node: torch.fx.Node, m: torch.nn.Conv2d) -> Optional[str]:
        """A layer for the convolution, or why not."""
        x = node.args[0]
        if not isinstance(x, torch.fx.Node):
            return "its input is not a tensor of the graph"
        if m.padding_mode != "zeros":
            return f"padding_mode '{m.padding_mode}' (only zero padding is copied in)"
        if isinstance(m.padding, str):
            if m.padding != "valid":
                return f"padding '{m.padding}' (give the padding as numbers)"
            pad = (0, 0)
        else:
            pad = (int(m.padding[0]), int(m.padding[1]))
        in_shape, out_shape = _shape(x), _shape(node)
        if in_shape is None or out_shape is None or len(in_shape) != 4:
            return "its input is not a 4-D (N, C, H, W) tensor"
        n, c, h, w = in_shape
        _, k, ho, wo = out_shape
        (r, s), (sh, sw), (dh, dw) = m.kernel_size, m.stride, m.dilation
        hi, wi = _window_extent(ho, sh, dh, r), _window_extent(wo, sw, dw, s)
        groups = m.groups
        bi, bo, bsz = self.batch_vars()
        ih, iw = _index(sh, "h", dh, "r"), _index(sw, "w", dw, "s")
        weight = m.weight.detach().float().numpy()
        geometry = [f"{r}x{s}", f"s{sh}" if sh == sw else f"s{sh}x{sw}"]
        if dh != 1 or dw != 1:
            geometry.append(f"d{dh}" if dh == dw else f"d{dh}x{dw}")
        if self.batch > 1:
            geometry.append(f"n{self.batch}")
        channels_last = self.nhwc and (groups == 1 or (groups == c and k == c))
        phased = (self.rewrite and groups == 1 and self.batch == 1 and sh == sw and sh > 1
                  and dh == dw == 1 and not channels_last)
        kin: List[Tuple[int, ...]]
        kout: Tuple[int, ...]
        views: List[Tuple[int, ...]]
        if phased and r == s == 1:  # strided pointwise: the copy subsamples, the kernel is 1x1
            kind = "conv"
            program = "O[k,h,w] += I[c,h,w] * W[k,c]\n" + _sizes(k=k, h=ho, w=wo, c=c) + "\n"
            parts = [f"c{c}", f"k{k}", f"{ho}x{wo}", *geometry, "subsampled"]
            weight = weight.reshape(k, c)
            kin = [(c, ho, wo), (k, c)]
            kout = (k, ho, wo)
            views = [(c, h, w)]
            phases: Tuple[int, int, Tuple[int, ...]] = (sh, 1, (c, sh * ho, sh * wo))
        elif phased:  # strided: a stride-1 convolution over the input's S*S phases (below)
            kind = "conv"
            st = sh
            rp, sp = -(-r // st), -(-s // st)            # taps per phase
            y, x_ = ho + rp - 1, wo + sp - 1              # rows and columns of one phase
            cc = c * st * st
            program = ("O[k,h,w] += I[c, h+r, w+s] * W[k,c,r,s]\n"
                       + _sizes(k=k, h=ho, w=wo, c=cc, r=rp, s=sp) + "\n")
            parts = [f"c{c}", f"k{k}", f"{ho}x{wo}", *geometry, "phases"]
            # W'[k, c, a, b, r', s'] = W[k, c, S*r'+a, S*s'+b], zero past the window
            wp = np.zeros((k, c, st, st, rp, sp), dtype=np.float32)
            for a in range(st):
                for b_ in range(st):
                    taps = weight[:, :, a::st, b_::st]
                    wp[:, :, a, b_, :taps.shape[2], :taps.shape[3]] = taps
            weight = wp.reshape(k, cc, rp, sp)
            kin = [(cc, y, x_), (k, cc, rp, sp)]
            kout = (k, ho, wo)
            views = [(c, h, w)]
            phases = (st, st, (c, st * y, st * x_))
        elif groups == 1 and r == s == 1:  # pointwise: no window loops
            kind = "conv"
            ih, iw = ("h" if sh == 1 else f"{sh}*h"), ("w" if sw == 1 else f"{sw}*w")
            program = (f"O[{bo}k,h,w] += I[{bi}c, {ih}, {iw}] * W[k,c]\n"
                       + _sizes(**bsz, k=k, h=ho, w=wo, c=c) + "\n")
            if channels_last:
                program = (f"O[h,w,k] += I[{ih}, {iw}, c] * W[c,k]\n"
                           + _sizes(k=k, h=ho, w=wo, c=c) + "\n")
            parts = [f"c{c}", f"k{k}", f"{ho}x{wo}", *geometry]
            weight = weight.reshape(k, c)
            kin = [(*self.b(), c, hi, wi), (k, c)]
            kout = (*self.b(), k, ho, wo)
            views = [(*self.b(), c, h, w)]
        elif groups == 1:
            kind = "conv"
            program = (f"O[{bo}k,h,w] += I[{bi}c, {ih}, {iw}] * W[k,c,r,s]\n"
                       + _sizes(**bsz, k=k, h=ho, w=wo, c=c, r=r, s=s) + "\n")
            if channels_last:
                program = (f"O[h,w,k] += I[{ih}, {iw}, c] * W[r,s,c,k]\n"
                           + _sizes(k=k, h=ho, w=wo, c=c, r=r, s=s) + "\n")
            parts = [f"c{c}", f"k{k}", f"{ho}x{wo}", *geometry]
            kin = [(*self.b(), c, hi, wi), tuple(weight.shape)]
            kout = (*self.b(), k, ho, wo)
            views = [(*self.b(), c, h, w)]
        elif groups == c and k == c:
            kind = "depthwise"
            program = (f"O[{bo}c,h,w] += I[{bi}c, {ih}, {iw}] * W[c,r,s]\n"
                       + _sizes(**bsz, c=c, h=ho, w=wo, r=r, s=s) + "\n")
            if channels_last:
                program = (f"O[h,w,c] += I[{ih}, {iw}, c] * W[r,s,c]\n"
                           + _sizes(c=c, h=ho, w=wo, r=r, s=s) + "\n")
            parts = [f"c{c}", f"{ho}x{wo}", *geometry]
            weight = weight.reshape(c, r, s)
            kin = [(*self.b(), c, hi, wi), (c, r, s)]
            kout = (*self.b(), c, ho, wo)
            views = [(*self.b(), c, h, w)]
        else:
            kind = "grouped_conv"
            g, cg, kg = groups, c // groups, k // groups
            if self.batch > 1:
                return "a grouped convolution with a batch above 1 (a tensor of 7 indices)"
            program = (f"O[g,k,h,w] += I[g,c, {ih}, {iw}] * W[g,k,c,r,s]\n"
                       + _sizes(g=g, k=kg, h=ho, w=wo, c=cg, r=r, s=s) + "\n")
            parts = [f"g{g}", f"c{c}", f"k{k}", f"{ho}x{wo}", *geometry]
            weight = weight.reshape(g, kg, cg, r, s)
            kin = [(g, cg, hi, wi), (g, kg, cg, r, s)]
            kout = (g, kg, ho, wo)
            views = [(g, cg, h, w)]
        bias = m.bias.detach().float().numpy().copy() if m.bias is not None else None
        layer = Layer(name=node.name, nodes=[node.name], inputs=[x.name], modules=[str(node.target)],
                      task="", kind=kind, kernel_input_shapes=kin, kernel_output_shape=kout,
                      result_shape=out_shape, input_views=views, padding=pad,
                      weight=np.ascontiguousarray(weight), bias=bias,
                      channels_last=channels_last)
        if phased:
            layer.phase_stride, layer.phases_kept, layer.padded_shape = phases
        self.finish(layer, node, parts, program, fold_bn=True)
        return None

    def b(self) -> Tuple[int, ...]:
        return () if self.batch == 1 else (self.batch,)

    def linear(self, node: torch.fx.Node, m: torch.nn.Linear) -> Optional[str]:
        x = node.args[0]
        in_shape, out_shape = (_shape(x) if isinstance(x, torch.fx.Node) else None), _shape(node)
        if not isinstance(x, torch.fx.Node) or in_shape is None or out_shape is None:
            return "its input is not a tensor of the graph"
        rows = int(np.prod(in_shape[:-1], dtype=np.int64)) if len(in_shape) > 1 else 1
        k, n = m.in_features, m.out_features
        if rows == 1:
            program = f"y[n] += x[k] * W[k,n]\n{_sizes(k=k, n=n)}\n"
            kin: List[Tuple[int, ...]] = [(k,), (k, n)]
            kout: Tuple[int, ...] = (n,)
        else:
            program = f"Y[m,n] += X[m,k] * W[k,n]\n{_sizes(m=rows, n=n, k=k)}\n"
            kin, kout = [(rows, k), (k, n)], (rows, n)
        weight = np.ascontiguousarray(m.weight.detach().float().numpy().T)
        bias = m.bias.detach().float().numpy().copy() if m.bias is not None else None
        layer = Layer(name=node.name, nodes=[node.name], inputs=[x.name], modules=[str(node.target)],
                      task="", kind="linear", kernel_input_shapes=kin, kernel_output_shape=kout,
                      result_shape=out_shape, input_views=[kin[0]], weight=weight, bias=bias)
        self.finish(layer, node, [rows, k, n], program, fold_bn=False)
        return None

    def pool(self, node: torch.fx.Node, m: torch.nn.Module) -> Optional[str]:
        x = node.args[0]
        in_shape, out_shape = (_shape(x) if isinstance(x, torch.fx.Node) else None), _shape(node)
        if not isinstance(x, torch.fx.Node) or in_shape is None or out_shape is None:
            return "its input is not a tensor of the graph"
        if len(in_shape) != 4:
            return "its input is not a 4-D (N, C, H, W) tensor"
        if getattr(m, "ceil_mode", False):
            return "ceil_mode (windows past the input)"
        if getattr(m, "return_indices", False):
            return "return_indices"

        def pair(v: Any) -> Tuple[int, int]:
            return (int(v[0]), int(v[1])) if isinstance(v, (tuple, list)) else (int(v), int(v))

        (r, s), (sh, sw), (ph, pw) = pair(m.kernel_size), pair(m.stride), pair(m.padding)
        dh, dw = pair(getattr(m, "dilation", 1))
        if isinstance(m, torch.nn.AvgPool2d):
            if not m.count_include_pad and (ph or pw):
                return "count_include_pad=False with padding (a divisor per window)"
            if m.divisor_override:
                return "divisor_override"
        n, c, h, w = in_shape
        _, _, ho, wo = out_shape
        hi, wi = _window_extent(ho, sh, dh, r), _window_extent(wo, sw, dw, s)
        bi, bo, bsz = self.batch_vars()
        is_max = isinstance(m, torch.nn.MaxPool2d)
        op = "max=" if is_max else "+="
        ih, iw = _index(sh, "h", dh, "r"), _index(sw, "w", dw, "s")
        program = (f"O[{bo}c,h,w] {op} I[{bi}c, {ih}, {iw}]\n"
                   + _sizes(**bsz, c=c, h=ho, w=wo, r=r, s=s) + "\n")
        if self.nhwc:
            program = (f"O[h,w,c] {op} I[{ih}, {iw}, c]\n"
                       + _sizes(c=c, h=ho, w=wo, r=r, s=s) + "\n")
        kind = "maxpool" if is_max else "sumpool"
        geometry = [f"{r}x{s}", f"s{sh}" if sh == sw else f"s{sh}x{sw}"]
        if dh != 1 or dw != 1:
            geometry.append(f"d{dh}")
        if self.batch > 1:
            geometry.append(f"n{self.batch}")
        layer = Layer(name=node.name, nodes=[node.name], inputs=[x.name], modules=[str(node.target)],
                      task="", kind=kind, kernel_input_shapes=[(*self.b(), c, hi, wi)],
                      kernel_output_shape=(*self.b(), c, ho, wo), result_shape=out_shape,
                      input_views=[(*self.b(), c, h, w)], padding=(ph, pw),
                      pad_value=-math.inf if is_max else 0.0,
                      scale=1.0 if is_max else 1.0 / (r * s), channels_last=self.nhwc)
        self.finish(layer, node, [f"c{c}", f"{ho}x{wo}", *geometry], program, fold_bn=False)
        return None

    def global_avg(self, node: torch.fx.Node, x: Any, label: str) -> Optional[str]:
        in_shape, out_shape = (_shape(x) if isinstance(x, torch.fx.Node) else None), _shape(node)
        if not isinstance(x, torch.fx.Node) or in_shape is None or out_shape is None:
            return "its input is not a tensor of the graph"
        if len(in_shape) != 4 or out_shape[2:] != (1, 1):
            return "adaptive pooling to a size other than 1x1"
        n, c, h, w = in_shape
        bi, bo, bsz = self.batch_vars()
        program = f"O[{bo}c] += I[{bi}c,h,w]\n" + _sizes(**bsz, c=c, h=h, w=w) + "\n"
        if self.nhwc:
            program = "O[c] += I[h,w,c]\n" + _sizes(c=c, h=h, w=w) + "\n"
        parts = [f"c{c}", f"{h}x{w}"] + ([f"n{self.batch}"] if self.batch > 1 else [])
        layer = Layer(name=node.name, nodes=[node.name], inputs=[x.name], modules=[label],
                      task="", kind="sumpool", kernel_input_shapes=[(*self.b(), c, h, w)],
                      kernel_output_shape=(*self.b(), c), result_shape=out_shape,
                      input_views=[(*self.b(), c, h, w)], scale=1.0 / (h * w),
                      channels_last=self.nhwc)
        self.finish(layer, node, ["global", *parts], program, fold_bn=False)
        return None

    def add_layer(self, node: torch.fx.Node) -> Optional[str]:
        a, b = node.args[0], node.args[1]
        if node.kwargs.get("alpha", 1) != 1 or len(node.args) > 2:
            return "an add with alpha"
        if not isinstance(a, torch.fx.Node) or not isinstance(b, torch.fx.Node):
            return "an add of a tensor and a number"
        sa, sb, so = _shape(a), _shape(b), _shape(node)
        if sa is None or sa != sb or so != sa:
            return f"an add of shapes {sa} and {sb} (broadcasting)"
        if not (_float32(a) and _float32(b)):
            return "an add of tensors other than float32"
        if len(sa) > 6:
            return "an add of tensors with more than 6 dimensions"
        channels_last = self.nhwc and len(sa) == 4
        dims = [d for d in sa if d != 1] or [1]
        if channels_last:  # (1, C, H, W) read as (H, W, C), every axis kept
            dims = [sa[2], sa[3], sa[1]]
        vs = [f"d{i}" for i in range(len(dims))]
        relu = False
        nxt = _sole_user(node)
        act = _activation(self.gm, nxt) if nxt is not None else None
        if act is not None and act[0] == "relu":
            relu = True
        idx = ",".join(vs)
        program = (f"C[{idx}] = A[{idx}] + B[{idx}]" + (" -> relu" if relu else "") + "\n"
                   + " ".join(f"{v}={d}" for v, d in zip(vs, dims)) + "\n")
        name = self.task("add_relu" if relu else "add", ["x".join(map(str, dims))], program)
        shape = tuple(dims)
        layer = Layer(name=node.name, nodes=[node.name], inputs=[a.name, b.name], modules=[],
                      task=name, kind="add", kernel_input_shapes=[shape, shape],
                      kernel_output_shape=shape, result_shape=so, input_views=[shape, shape],
                      channels_last=channels_last)
        if relu and nxt is not None:
            layer.kernel_relu = True
            layer.nodes.append(nxt.name)
            if nxt.op == "call_module":
                layer.modules.append(str(nxt.target))
            layer.name = nxt.name
        elif act is not None and nxt is not None:
            layer.activation, layer.clamp = act
            layer.nodes.append(nxt.name)
            layer.name = nxt.name
        self.add(layer)
        return None

    def add(self, layer: Layer) -> None:
        self.layers.append(layer)
        self.taken.update(layer.nodes)

    def visit(self, node: torch.fx.Node) -> Optional[str]:
        """None when a layer took the node, else why it stays in PyTorch."""
        if node.op == "call_module":
            m = self.gm.get_submodule(str(node.target))
            if not _float32(node):
                return "not float32"
            if isinstance(m, torch.nn.Conv2d):
                return self.conv(node, m)
            if isinstance(m, torch.nn.Linear):
                return self.linear(node, m)
            if isinstance(m, (torch.nn.MaxPool2d, torch.nn.AvgPool2d)):
                return self.pool(node, m)
            if isinstance(m, (torch.nn.AdaptiveAvgPool2d)):
                return self.global_avg(node, node.args[0], str(node.target))
            if isinstance(m, torch.nn.Dropout):
                return "identity in eval mode"
            if isinstance(m, torch.nn.BatchNorm2d):
                return "a BatchNorm2d not right after a convolution (nothing to fold it into)"
            if _activation(self.gm, node) is not None:
                return "an activation not right after a layer"
            return f"{type(m).__name__}: the loop-nest language has no such layer"
        if node.op == "call_function":
            if node.target is torch.nn.functional.adaptive_avg_pool2d:
                return self.global_avg(node, node.args[0], "adaptive_avg_pool2d")
            if node.target in _ADD_FUNCTIONS and len(node.args) >= 2:
                if not _float32(node):
                    return "not float32"
                return self.add_layer(node)
            name = getattr(node.target, "__name__", str(node.target))
            if name in _LAYOUT:
                return "layout only (no arithmetic)"
            if _activation(self.gm, node) is not None:
                return "an activation not right after a layer"
            return f"{name}: the loop-nest language has no such operation"
        if node.op == "call_method":
            if str(node.target) in _LAYOUT:
                return "layout only (no arithmetic)"
            if _activation(self.gm, node) is not None:
                return "an activation not right after a layer"
            return f".{node.target}(): the loop-nest language has no such operation"
        return None  # placeholder, get_attr, output


def trace(model: torch.nn.Module, example: torch.Tensor) -> torch.fx.GraphModule:
    """The model in eval mode, traced, with every node's shape from `example`."""
    model = model.eval()
    try:
        gm = cast(torch.fx.GraphModule, torch.fx.symbolic_trace(model))
    except Exception as e:  # torch.fx's TraceError and whatever the model's Python raises
        raise ExtractError(f"torch.fx cannot trace the model: {type(e).__name__}: {e}") from e
    try:
        with torch.no_grad():
            ShapeProp(gm).propagate(example)
    except Exception as e:
        raise ExtractError(f"the model does not run on an input of shape "
                           f"{tuple(example.shape)}: {type(e).__name__}: {e}") from e
    return gm


LAYOUTS = ("nchw", "nhwc")
# extract(out_block=B) blocks a convolution's weights from this size up (see the module's doc).
BLOCKED_WEIGHTS_MIN_BYTES = 512 * 1024


def _blocked_program(program: str, block: int) -> str:
    """A channels-last convolution's program, O[h,w,k] += I[...] * W[...,k], with its output
    channels in blocks of `block`: O[h,w,b,k] += I[...] * W[b,...,k], b = K / block, k = block."""
    lines = program.split("\n")
    statement, sizes = lines[0], lines[1].split()
    assert statement.startswith("O[h,w,k] += ") and "* W[" in statement, statement
    head, weight = statement.split("* W[", 1)
    lines[0] = head.replace("O[h,w,k]", "O[h,w,b,k]", 1) + "* W[b," + weight
    k = next(int(t[2:]) for t in sizes if t.startswith("k="))
    lines[1] = " ".join([f"b={k // block}", f"k={block}"]
                        + [t for t in sizes if not t.startswith("k=")])
    return "\n".join(lines)


def extract(model: torch.nn.Module, example: torch.Tensor, rewrite: bool = True,
            layout: str = "nchw", out_block: int = 0,
            block_min_bytes: int = BLOCKED_WEIGHTS_MIN_BYTES,
            block_layers: Optional[Collection[str]] = None,
            weights_k_last: Optional[bool] = None) -> Plan:
    """The model's layers, their tasks, and the nodes left to PyTorch (see the module's doc).
    `rewrite=False`: each layer's program as the model states it (strided convolutions strided,
    biases and what follows them in the epilogue), as the model datasets hold them.
    `layout`: "nchw", or "nhwc" (channels last; batch 1 only). `out_block`: with "nhwc",
    convolutions' output channels in blocks of this many (0: none; see the module's doc), those
    whose weights take `block_min_bytes` or more, or, with `block_layers`, those whose first
    node (Layer.nodes[0]) it names. `weights_k_last` (default: `rewrite`): (C, H, W)
    convolutions of groups 1 read their weights laid out W[c,r,s,k] (1x1: W[c,k];
    `lay_out_weights_k_last`), else as PyTorch holds them, W[k,c,r,s] (W[k,c])."""
    if weights_k_last is None:
        weights_k_last = rewrite
    if layout not in LAYOUTS:
        raise ExtractError(f"layout {layout!r}: one of {', '.join(LAYOUTS)}")
    if layout == "nhwc" and example.dim() >= 1 and int(example.shape[0]) != 1:
        raise ExtractError(f"layout nhwc takes a batch of 1 (the example's is "
                           f"{int(example.shape[0])}); use layout nchw")
    if out_block < 0 or (out_block and layout != "nhwc"):
        raise ExtractError(f"out_block {out_block}: 0, or a block size with layout nhwc")
    if example.dtype != torch.float32:
        raise ExtractError(f"the example input is {example.dtype}; kernels take float32")
    if example.dim() < 1:
        raise ExtractError("the example input has no batch dimension")
    gm = trace(model, example)
    ex = _Extractor(gm, batch=int(example.shape[0]), rewrite=rewrite, layout=layout,
                    out_block=out_block, block_min_bytes=block_min_bytes,
                    block_layers=block_layers, weights_k_last=weights_k_last)
    for node in gm.graph.nodes:
        if node.name in ex.taken or node.op not in ("call_module", "call_function",
                                                    "call_method"):
            continue
        why = ex.visit(node)
        if why is not None:
            ex.left.append(Left(node.name, _describe(gm, node), why))
    return Plan(gm, tuple(int(d) for d in example.shape), ex.tasks, ex.layers, ex.left)
