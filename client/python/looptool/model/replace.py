"""The model with its layers computed by exported kernels.

`with_kernels(plan, library)` returns a copy of the plan's traced model in which each layer's
nodes are replaced by one `KernelLayer` module: it copies its input into a padded buffer when the
kernel reads one (zeros, or -inf for max pooling; cropped to the rows the kernel reads; for a
phased convolution then into the kernel's phase layout; a channel of 1s carries the bias), calls
the kernel (looptool.kernels) into a new output tensor, and runs the layer's epilogue in place
(bias, scale, relu or clamp). Layers whose task the library lacks stay in PyTorch (`missing`);
a library kernel that reads its tensors in another order than the layer's task (a kernel tuned
before the plan's weights were laid out otherwise, W[k,c] for W[c,k]) is an error, not a layer
computed wrong.

A channels-last layer (`Layer.channels_last`) reads its input through the (H, W, C) view of a
(1, C, H, W) tensor (no copy when the tensor is channels_last, as the previous such layer's
result is) and returns its (H, W, C) output as a (1, C, H, W) tensor in channels_last strides.

A KernelLayer keeps its padded buffer between calls, so one model runs one call at a time (no
threads sharing it), and takes exactly the batch it was extracted with.
"""

import copy
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import torch
import torch.fx

from looptool import kernels as kernels_lib
from looptool.model.extract import Layer, Plan


class KernelLayer(torch.nn.Module):
    """One layer: padding copy, the kernel, the epilogue (see the module's doc)."""

    def __init__(self, layer: Layer, kernel: kernels_lib.Kernel) -> None:
        super().__init__()
        self.layer = layer
        self.kernel = kernel
        self.weight: Optional[kernels_lib.Array] = None
        if layer.weight is not None:
            self.weight = kernels_lib.empty(layer.weight.shape)
            self.weight[...] = layer.weight
        self.bias: Optional[torch.Tensor] = None
        if layer.bias is not None:
            # Per output channel: the kernel output's first dimension after the batch (conv,
            # grouped conv: (g, k) flattened), or its last (linear).
            out = layer.kernel_output_shape
            if layer.out_block:  # (H, W, K/B, B): channel b*B+k
                view: Tuple[int, ...] = (out[-2], out[-1])
            elif layer.kind == "linear" or layer.channels_last:
                view = (out[-1],)
            else:
                channel_dims = 2 if layer.kind == "grouped_conv" else 1
                lead = len(out) - 2 - channel_dims  # a batch dimension, if any
                view = out[lead:lead + channel_dims] + (1, 1)
            self.bias = torch.from_numpy(layer.bias.copy()).reshape(view)
        self.buffer: Optional[torch.Tensor] = None   # the padded (or biased) input
        self.phased: Optional[torch.Tensor] = None   # the kernel's input of a phased layer
        self.core: Optional[torch.Tensor] = None     # what the copy writes: all but the 1s
        if layer.phase_stride > 1:
            self.buffer = torch.full(layer.padded_shape, layer.pad_value, dtype=torch.float32)
            self.phased = torch.empty(layer.kernel_input_shapes[0], dtype=torch.float32)
            self.core = self.buffer
        elif (layer.padding != (0, 0) or layer.bias_axis >= 0
              or tuple(layer.input_views[0]) != tuple(layer.kernel_input_shapes[0])):
            self.buffer = torch.full(layer.kernel_input_shapes[0], layer.pad_value,
                                     dtype=torch.float32)
            self.core = self.buffer
        kernel_input = self.phased if self.phased is not None else self.buffer
        if layer.bias_axis >= 0 and kernel_input is not None:
            n = kernel_input.shape[layer.bias_axis]
            kernel_input.narrow(layer.bias_axis, n - 1, 1).fill_(1.0)
            if self.phased is None:
                self.core = kernel_input.narrow(layer.bias_axis, 0, n - 1)

    def _padded(self, x: torch.Tensor) -> torch.Tensor:
        """x copied into the buffer at (padding rows, padding columns), cropped to it; then, for
        a phased layer, the buffer's phases into the kernel's input."""
        assert self.buffer is not None and self.core is not None
        if self.layer.kind == "linear":
            self.core.copy_(x)
            return self.buffer
        ph, pw = self.layer.padding
        if self.layer.channels_last:  # (H, W, C)
            rows = min(x.shape[0], self.core.shape[0] - ph)
            cols = min(x.shape[1], self.core.shape[1] - pw)
            self.core[ph:ph + rows, pw:pw + cols] = x[:rows, :cols]
            return self.buffer
        rows = min(x.shape[-2], self.core.shape[-2] - ph)
        cols = min(x.shape[-1], self.core.shape[-1] - pw)
        self.core[..., ph:ph + rows, pw:pw + cols] = x[..., :rows, :cols]
        if self.phased is None:
            return self.buffer
        # phase (a, b) of row y, column x: padded row S*y+a, column S*x+b (Layer's comment)
        st, kept = self.layer.phase_stride, self.layer.phases_kept
        c, rows_all, cols_all = self.buffer.shape
        y, x_ = rows_all // st, cols_all // st
        phases = self.buffer.view(c, y, st, x_, st).permute(0, 2, 4, 1, 3)[:, :kept, :kept]
        self.phased[:c * kept * kept].view(c, kept, kept, y, x_).copy_(phases)
        return self.phased

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        layer = self.layer
        args: List[Any] = []
        for x, view in zip(inputs, layer.input_views):
            if x.numel() != int(np.prod(view)) or x.dtype != torch.float32:
                raise ValueError(
                    f"layer {layer.name} ({layer.task}) was extracted for float32 inputs of "
                    f"{int(np.prod(view))} elements ({view} as its kernel reads them; the model's "
                    f"example input fixes the batch and sizes); got {x.dtype} {tuple(x.shape)}")
            if layer.channels_last and x.dim() == 4:
                x = x.permute(0, 2, 3, 1)  # (1, H, W, C): a view of a channels_last tensor
            x = x.reshape(view)
            if self.buffer is not None and not args:
                x = self._padded(x)
            args.append(x.contiguous().numpy())
        if self.weight is not None:
            args.append(self.weight)
        out = torch.empty(layer.kernel_output_shape, dtype=torch.float32)
        self.kernel(*args, out=out.numpy())
        if self.bias is not None:
            out.add_(self.bias)
        if layer.scale != 1.0:
            out.mul_(layer.scale)
        if layer.activation == "relu":
            out.relu_()
        elif layer.activation == "clamp":
            out.clamp_(*layer.clamp)
        if layer.out_block:
            out = out.reshape(*out.shape[:-2], -1)  # (H, W, K): the same bytes
        if layer.channels_last and out.dim() == 3:
            out = out.permute(2, 0, 1)  # (C, H, W) in channels_last strides, not copied
        return out.reshape(layer.result_shape)


def _signature(program: str) -> Tuple[Tuple[str, ...], Dict[str, int]]:
    """A program as its kernel computes it, spelling aside: its statements in order, blanks
    dropped (`O[k,h,w]+=I[c,h+r,w+s]*W[c,r,s,k]->relu`: every access, operator and fused
    relu), and its sizes by variable. The server's canonical text (a kernel's `program`) and
    extract's text of one program have the same signature."""
    lines = [line for line in re.split(r"[\n;]", program) if line.strip()]
    statements = tuple(re.sub(r"\s+", "", line) for line in lines if "[" in line)
    sizes = {name: int(value) for line in lines if "[" not in line
             for name, value in re.findall(r"([A-Za-z_]\w*)\s*=\s*(\d+)", line)}
    return statements, sizes


def with_kernels(plan: Plan, library: Mapping[str, kernels_lib.Kernel]
                 ) -> Tuple[torch.fx.GraphModule, List[str]]:
    """(the model computing each layer the library (a KernelLibrary, or any mapping of kernels
    by task name) has a kernel for, the tasks it lacks). ValueError for a kernel whose program
    (`Kernel.program`, where it has one) is not the layer's task's (`_signature`: another
    tensor layout, operator, fused relu or size), as a library tuned before a layout change
    may hold under the same task name."""
    gm = copy.deepcopy(plan.graph_module)
    nodes = {n.name: n for n in gm.graph.nodes}
    missing: List[str] = []
    for i, layer in enumerate(plan.layers):
        if layer.task not in library:
            if layer.task not in missing:
                missing.append(layer.task)
            continue
        kernel_program = getattr(library[layer.task], "program", None)
        task_program = plan.tasks[layer.task].program
        if isinstance(kernel_program, str) and \
                _signature(kernel_program) != _signature(task_program):
            raise ValueError(
                f"layer {layer.name} ({layer.task}): the library's kernel computes "
                f"{' / '.join(kernel_program.strip().splitlines())!r}, the layer's task "
                f"{' / '.join(task_program.strip().splitlines())!r}: a kernel tuned for "
                f"another program under this task's name (tune this plan's tasks again)")
        name = f"looptool_layer_{i}"
        gm.add_submodule(name, KernelLayer(layer, library[layer.task]))
        last = nodes[layer.name]
        with gm.graph.inserting_after(last):
            new = gm.graph.call_module(name, tuple(nodes[n] for n in layer.inputs))
        last.replace_all_uses_with(new)
        for node_name in reversed(layer.nodes):
            gm.graph.erase_node(nodes[node_name])
        nodes[layer.name] = new  # what later layers read by that name
    gm.graph.lint()
    gm.delete_all_unused_submodules()
    gm.recompile()
    return gm, missing
