"""Whole PyTorch models: their layers tuned on LoopTool servers and run through the kernels.

    /usr/bin/python3 -m looptool.model tune --model=resnet18 --time-limit=600
    /usr/bin/python3 -m looptool.model run --model=resnet18

Modules, one job each:
  extract   torch.fx: the model's layers as LoopTool programs (tasks), BatchNorm folded, relu
            fused where the language allows, and the nodes left to PyTorch with the reason
  allot     which task gets the next slice of tuning time (Ansor's task scheduler)
  tuning    slices of `looptool tune` as Dask tasks on the servers, faults, and the export
  report    the per-task table (Markdown, CSV) and plot (PNG)
  replace   the traced model with each layer replaced by a call of its exported kernel
  commands  the command line, and tune_model() / run_model() for a module of your own

Needs PyTorch (torch.fx), torchvision for models by name, Dask, tqdm and matplotlib (the "rl"
extra), and the looptool CLI (bazel-bin/client/cpp/looptool; $LOOPTOOL_CLI).
"""

from looptool.model.commands import run_model, tune_model
from looptool.model.extract import ExtractError, Plan

# (extract() is looptool.model.extract.extract: the submodule keeps its name here.)
__all__ = ["ExtractError", "Plan", "run_model", "tune_model"]
