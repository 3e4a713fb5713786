"""Generates the model datasets: every distinct layer of a model as a LoopTool program, with its
weight (how many of the model's layers it stands for) and how PyTorch runs it (the reference
`bench/model/layer_bench.py` times).

    bazel build //client/python:looptool && PYTHONPATH=client/python \\
      /usr/bin/python3 datasets/models/generate.py [--model=resnet18 ...] [--out=datasets/models]

Each model gives `<out>/<name>-v0.txt`, which datasets/BUILD compiles into the server
(datasets/model_datasets.h): torchvision models (any name torchvision.models has: resnet18,
mobilenet_v2, ...) through looptool.model.extract at batch 1, 3x224x224, with `rewrite=False`:
each layer's program as the model states it (strided convolutions strided, padding materialized:
a valid convolution over the padded input, the FLOPs of PyTorch's padded one; biases, batch norms
and activations are not in it). `bert_base` is BERT-base's encoder at sequence 128, written from
its configuration (hidden 768, 12 heads of 64, feed-forward 3072, 12 layers): the four
projections, the two feed-forward matmuls, and per layer the 12 heads' score and context matmuls
as one batched program each.

The file format: `#` lines are comments; `@ <name> <weight> <reference>` starts a benchmark whose
program is the lines up to the next `@`. The reference is `<op> key=value ...` with shapes as
AxBxC: conv2d (input, weight, stride, dilation, groups), linear (input, weight: out x in),
bmm (a, b), max_pool2d / avg_pool2d (input, kernel, stride, dilation), sum (input, dims), add
(input, relu: 1 when a relu follows in the program).
"""
import argparse
import os
import sys
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))

BERT = {"seq": 128, "hidden": 768, "heads": 12, "ffn": 3072, "layers": 12}


def dims(shape) -> str:
    return "x".join(str(int(d)) for d in shape)


def reference(gm, layer) -> str:
    """How PyTorch computes the layer's kernel (on the kernel's input: padding already in)."""
    import torch
    if layer.kind == "add":
        return (f"add input={dims((1, *layer.kernel_output_shape))} "
                f"relu={1 if layer.kernel_relu else 0}")
    x = dims((1, *layer.kernel_input_shapes[0]) if layer.kind != "linear"
             else layer.kernel_input_shapes[0])
    try:
        m = gm.get_submodule(layer.modules[0]) if layer.modules else None
    except AttributeError:
        m = None
    if isinstance(m, torch.nn.Conv2d):
        return (f"conv2d input={x} weight={dims(m.weight.shape)} stride={m.stride[0]} "
                f"dilation={m.dilation[0]} groups={m.groups}")
    if isinstance(m, torch.nn.Linear):
        rows = layer.kernel_input_shapes[0][0] if len(layer.kernel_input_shapes[0]) > 1 else 1
        return f"linear input={rows}x{m.in_features} weight={m.out_features}x{m.in_features}"
    if isinstance(m, (torch.nn.MaxPool2d, torch.nn.AvgPool2d)):
        op = "max_pool2d" if isinstance(m, torch.nn.MaxPool2d) else "avg_pool2d"
        k = m.kernel_size if isinstance(m.kernel_size, int) else m.kernel_size[0]
        s = m.stride if isinstance(m.stride, int) else m.stride[0]
        d = getattr(m, "dilation", 1)
        d = d if isinstance(d, int) else d[0]
        return f"{op} input={x} kernel={k} stride={s} dilation={d}"
    if layer.kind == "sumpool":  # global average pooling: a sum over the map
        return f"sum input={x} dims=2,3"
    raise ValueError(f"no PyTorch reference for layer {layer.name} ({layer.kind})")


def torchvision_model(name: str) -> List[Tuple[str, int, str, str]]:
    import torch
    import torchvision
    from looptool.model import extract as extract_lib
    if not hasattr(torchvision.models, name):
        sys.exit(f"generate.py: --model={name}: not a torchvision model")
    model = getattr(torchvision.models, name)(weights=None).eval()
    plan = extract_lib.extract(model, torch.zeros(1, 3, 224, 224), rewrite=False)
    out = []
    for task_name, task in plan.tasks.items():
        layer = plan.layers_of(task_name)[0]
        out.append((task_name, plan.weight(task_name), reference(plan.graph_module, layer),
                    task.program.strip()))
    return out


def bert_base() -> List[Tuple[str, int, str, str]]:
    s, h, a, f, n = BERT["seq"], BERT["hidden"], BERT["heads"], BERT["ffn"], BERT["layers"]
    d = h // a
    mm = "Y[m,n] += X[m,k] * W[k,n]"
    return [
        (f"linear_{s}x{h}x{h}", 4 * n, f"linear input={s}x{h} weight={h}x{h}",
         f"{mm}\nm={s} n={h} k={h}"),
        (f"linear_{s}x{h}x{f}", n, f"linear input={s}x{h} weight={f}x{h}",
         f"{mm}\nm={s} n={f} k={h}"),
        (f"linear_{s}x{f}x{h}", n, f"linear input={s}x{f} weight={h}x{f}",
         f"{mm}\nm={s} n={h} k={f}"),
        (f"scores_{a}x{s}x{s}x{d}", n, f"bmm a={a}x{s}x{d} b={a}x{d}x{s}",
         f"S[h,i,j] += Q[h,i,d] * K[h,j,d]\nh={a} i={s} j={s} d={d}"),
        (f"context_{a}x{s}x{d}x{s}", n, f"bmm a={a}x{s}x{s} b={a}x{s}x{d}",
         f"C[h,i,d] += P[h,i,j] * V[h,j,d]\nh={a} i={s} d={d} j={s}"),
    ]


def write(name: str, rows: List[Tuple[str, int, str, str]], out: str, source: str) -> str:
    path = os.path.join(out, f"{name}-v0.txt")
    lines = [f"# {name}-v0: {source}",
             "# Generated by datasets/models/generate.py; do not edit. "
             f"{len(rows)} programs for {sum(r[1] for r in rows)} layers.",
             "# @ <name> <weight> <PyTorch reference>, then the program."]
    for task, weight, ref, program in rows:
        lines += [f"@ {task} {weight} {ref}", program]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append",
                        help="torchvision name or bert_base (repeatable; default: resnet18, "
                             "mobilenet_v2, bert_base)")
    parser.add_argument("--out", default=HERE)
    args = parser.parse_args()
    for name in args.model or ["resnet18", "mobilenet_v2", "bert_base"]:
        if name == "bert_base":
            rows = bert_base()
            source = ("BERT-base encoder, sequence 128 (hidden 768, 12 heads, feed-forward "
                      "3072, 12 layers), batch 1")
        else:
            import torchvision
            rows = torchvision_model(name)
            source = (f"torchvision {torchvision.__version__} {name}, batch 1, 3x224x224, "
                      "looptool.model.extract(rewrite=False)")
        print(f"{write(name, rows, args.out, source)}: {len(rows)} programs", file=sys.stderr)


if __name__ == "__main__":
    main()
