"""Points CompilerGym's registered `loop_tool-v0` environment at a running LoopTool server.

Python imports `sitecustomize` at start-up; with this directory on PYTHONPATH and
LOOPTOOL_CG_SERVICE=host:port set, it imports compiler_gym (which registers loop_tool-v0 with
the path of upstream's Python service binary) and replaces that registration's `service`
kwarg by the address. `compiler_gym.make("loop_tool-v0")` in CompilerGym's own, unmodified
tests and examples then connects to the server, exactly as if the caller had written
`compiler_gym.make("loop_tool-v0", service="host:port")` (CompilerGym's documented way to
use a running service). Without the variable it does nothing but run the system's own
sitecustomize, which this file shadows.
"""
import os
import sys


def _run_system_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        path = os.path.join(entry or os.getcwd(), "sitecustomize.py")
        if os.path.abspath(entry or os.getcwd()) != here and os.path.isfile(path):
            with open(path) as f:
                code = compile(f.read(), path, "exec")
            exec(code, {"__name__": "sitecustomize", "__file__": path})
            return


def _redirect_loop_tool_v0(address: str) -> None:
    import gym

    import compiler_gym  # noqa: F401  (registers loop_tool-v0)

    spec = gym.envs.registration.spec("loop_tool-v0")
    kwargs = spec._kwargs if hasattr(spec, "_kwargs") else spec.kwargs  # gym 0.21 / later
    kwargs["service"] = address


_run_system_sitecustomize()
if os.environ.get("LOOPTOOL_CG_SERVICE"):
    _redirect_loop_tool_v0(os.environ["LOOPTOOL_CG_SERVICE"])
