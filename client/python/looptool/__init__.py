"""LoopTool's Python client: tune loop nests over LoopTool's CompilerGym-compatible gRPC service.

    from looptool import LocalServer, LoopToolEnv

    with LocalServer() as server:
        with LoopToolEnv(server.address,
                         benchmark="benchmark://mm64_256_16_range-v0/mm112_208_256") as env:
            observation = env.reset()
            observation, reward, done, info = env.step("split_4")

    # Gymnasium-style (reset -> (obs, info), step -> 5-tuple), by registered id:
    env = looptool.make("looptool/LoopTool-v0", service=server.address, max_steps=10)
    observation, info = env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(env.action_space.sample())

Modules, one job each:
  env         LoopToolEnv: CompilerGym-style reset/step/fork/observe/close (4-tuple).
  reward      the rewards (LoopTune's GFLOPS gain over the peak, the log speed-up), defined once.
  gymnasium_env  GymnasiumEnv: Gymnasium's reset/step/render over a LoopToolEnv.
  gymnasium_spaces  Discrete/Box/MultiBinary/Text (gymnasium's when importable, else plain ones
              with the same API), NamedDiscreteSpace; the one optional import of gymnasium.
  registration  make(id, service=...), register(): looptool/LoopTool-v0, looptool/LoopTune-v0,
              looptool/LoopTool-cg-v0 (also registered with gymnasium when importable).
  connection  Connection: channel, stub, deadlines, retries (the packaged gRPC service config),
              RPC helpers, the server's datasets.
  server      LocalServer: start/stop a looptool-server process.
  spaces      NamedDiscrete action spaces, ObservationSpaceSpec, Spaces (GetSpaces' reply).
  convert     protocol Event <-> Python values (numpy arrays, networkx graphs).
  errors      ServiceError, SessionNotFound, ServiceTransportError.
  _proto      generated: the protocol's messages and stub, the gRPC service config (JSON).
  rl          learned tuning (needs PyTorch, Dask, tqdm, matplotlib: the "rl" extra).
"""

from pkgutil import extend_path

# looptool._proto is generated: by Bazel into bazel-bin/client/python/looptool/_proto, beside
# no sources. With PYTHONPATH=bazel-bin/client/python:client/python both directories make up the
# package (a pip install or Bazel's runfiles have it in one place).
__path__ = extend_path(__path__, __name__)

from looptool.connection import Connection  # noqa: E402
from looptool.convert import action_to_event, event_to_python  # noqa: E402
from looptool.env import LoopToolEnv, ObservationView  # noqa: E402
from looptool.errors import ServiceError, ServiceTransportError, SessionNotFound  # noqa: E402
from looptool.gymnasium_env import GymnasiumEnv  # noqa: E402
from looptool.gymnasium_spaces import HAVE_GYMNASIUM, NamedDiscreteSpace  # noqa: E402
from looptool.registration import (DEFAULT_BENCHMARK, EnvSpec, make, register,  # noqa: E402
                                   registry, spec)
from looptool.server import LocalServer, ServerStartError  # noqa: E402
from looptool.spaces import NamedDiscrete, ObservationSpaceSpec, Spaces  # noqa: E402

__all__ = [
    "Connection",
    "DEFAULT_BENCHMARK",
    "EnvSpec",
    "GymnasiumEnv",
    "HAVE_GYMNASIUM",
    "LocalServer",
    "LoopToolEnv",
    "NamedDiscrete",
    "NamedDiscreteSpace",
    "ObservationSpaceSpec",
    "ObservationView",
    "ServerStartError",
    "ServiceError",
    "ServiceTransportError",
    "SessionNotFound",
    "Spaces",
    "action_to_event",
    "event_to_python",
    "make",
    "register",
    "registry",
    "spec",
]
