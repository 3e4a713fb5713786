"""LoopTool's Python client: tune loop nests over LoopTool's CompilerGym-compatible gRPC service.

    from looptool import LocalServer, LoopToolEnv

    with LocalServer() as server:
        with LoopToolEnv(server.address,
                         benchmark="benchmark://mm64_256_16_range-v0/mm112_208_256") as env:
            observation = env.reset()
            observation, reward, done, info = env.step("split_4")

Modules, one job each:
  env         LoopToolEnv: Gym-style reset/step/fork/close, LoopTune's GFLOPS reward.
  connection  Connection: channel, stub, deadlines, UNAVAILABLE retries, RPC helpers.
  server      LocalServer: start/stop a looptool-server process.
  spaces      NamedDiscrete action spaces, ObservationSpaceSpec, Spaces (GetSpaces' reply).
  convert     protocol Event <-> Python values (numpy arrays, networkx graphs).
  errors      ServiceError, SessionNotFound, ServiceTransportError.
"""

from looptool.connection import Connection
from looptool.convert import action_to_event, event_to_python
from looptool.env import LoopToolEnv, ObservationView
from looptool.errors import ServiceError, ServiceTransportError, SessionNotFound
from looptool.server import LocalServer, ServerStartError
from looptool.spaces import NamedDiscrete, ObservationSpaceSpec, Spaces

__all__ = [
    "Connection",
    "LocalServer",
    "LoopToolEnv",
    "NamedDiscrete",
    "ObservationSpaceSpec",
    "ObservationView",
    "ServerStartError",
    "ServiceError",
    "ServiceTransportError",
    "SessionNotFound",
    "Spaces",
    "action_to_event",
    "event_to_python",
]
