"""Environment ids: `looptool.make(id, service=..., **kwargs)` and `looptool.register(...)`.

    with LocalServer() as server:
        env = looptool.make("looptool/LoopTool-v0", service=server.address, max_steps=10)

Registered ids (all on DEFAULT_BENCHMARK, mm112_208_256 of mm64_256_16_range-v0, with the
`loops_tensor` observation and LoopTune's reward, `flops`: GFLOPS gained / peak):

  looptool/LoopTool-v0     GymnasiumEnv (reset -> (obs, info), step -> 5-tuple), the
                           `loop_tool` action space (17 actions).
  looptool/LoopTune-v0     GymnasiumEnv with LoopTune's 7 actions (`loop_tune`).
  looptool/LoopTool-cg-v0  LoopToolEnv, the CompilerGym-style 4-tuple environment,
                           `loop_tool` actions.

`make` needs the service: `service=` an address "host:port", a `Connection` or a `LocalServer`
(there is no default server). Keyword arguments override the registered ones (benchmark=,
action_space=, observation_space=, reward_space=, max_steps=, timeout=, and render_mode= for the
Gymnasium-style ids). An unknown id raises ValueError.

With gymnasium importable, the Gymnasium-style ids (`gymnasium_api=True`) are also registered with
`gymnasium.register`, so `gymnasium.make("looptool/LoopTool-v0", service=...)` works too (with
gymnasium's wrappers). The 4-tuple id is not: gymnasium.make accepts only gymnasium.Env.
"""

import difflib
import importlib
from typing import Any, Callable, Dict, Mapping, Optional, Union

from looptool.gymnasium_spaces import gymnasium

EntryPoint = Union[str, Callable[..., Any]]

DEFAULT_BENCHMARK = "benchmark://mm64_256_16_range-v0/mm112_208_256"


class EnvSpec:
    """One registered id: `entry_point` (a callable, or "module:attribute" imported on first
    use) called as entry_point(service, **kwargs); `gymnasium_api`: whether it makes a
    Gymnasium-style environment."""

    def __init__(self, id: str, entry_point: EntryPoint,
                 kwargs: Optional[Mapping[str, Any]] = None, gymnasium_api: bool = True) -> None:
        self.id = id
        self.entry_point = entry_point
        self.kwargs = dict(kwargs or {})
        self.gymnasium_api = gymnasium_api

    def load(self) -> Callable[..., Any]:
        """The entry point as a callable."""
        if callable(self.entry_point):
            return self.entry_point
        module, _, attribute = self.entry_point.partition(":")
        if not module or not attribute:
            raise ValueError(f"Entry point {self.entry_point!r} of {self.id} is not "
                             f"'module:attribute'")
        loaded: Callable[..., Any] = getattr(importlib.import_module(module), attribute)
        return loaded

    def make(self, service: Any, **kwargs: Any) -> Any:
        return self.load()(service, **{**self.kwargs, **kwargs})

    def __repr__(self) -> str:
        return f"EnvSpec({self.id!r}, {self.entry_point!r}, kwargs={self.kwargs!r})"


registry: Dict[str, EnvSpec] = {}  # id -> EnvSpec, in registration order


def register(id: str, entry_point: EntryPoint, kwargs: Optional[Mapping[str, Any]] = None,
             gymnasium_api: bool = True, override: bool = False) -> EnvSpec:
    """Registers `id` (ValueError if it exists, unless override=True) and, if gymnasium is
    importable and gymnasium_api is True, registers it with gymnasium too. Returns the EnvSpec."""
    if id in registry and not override:
        raise ValueError(f"Environment id {id!r} is already registered")
    spec = EnvSpec(id, entry_point, kwargs, gymnasium_api)
    registry[id] = spec
    if gymnasium_api and gymnasium is not None:
        # Rewards are timings, so the same actions need not give the same rewards.
        gymnasium.register(id=id, entry_point=entry_point, kwargs=dict(spec.kwargs),
                           nondeterministic=True)
    return spec


def spec(id: str) -> EnvSpec:
    """The EnvSpec of `id` (ValueError, with the closest ids, if it is not registered)."""
    try:
        return registry[id]
    except KeyError:
        close = difflib.get_close_matches(str(id), list(registry), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ValueError(f"No environment registered as {id!r}; registered: "
                         f"{', '.join(registry)}.{hint}") from None


def make(id: str, service: Any = None, **kwargs: Any) -> Any:
    """A new environment of the registered `id` on `service` (required); `kwargs` override the
    registered arguments."""
    env_spec = spec(id)
    if service is None:
        raise TypeError(f"make({id!r}) needs service=: an address 'host:port', a Connection "
                        f"or a LocalServer")
    return env_spec.make(service, **kwargs)


def _register_defaults() -> None:
    common = {"benchmark": DEFAULT_BENCHMARK, "observation_space": "loops_tensor",
              "reward_space": "flops"}
    register("looptool/LoopTool-v0", "looptool.gymnasium_env:GymnasiumEnv",
             {**common, "action_space": "loop_tool"})
    register("looptool/LoopTune-v0", "looptool.gymnasium_env:GymnasiumEnv",
             {**common, "action_space": "loop_tune"})
    register("looptool/LoopTool-cg-v0", "looptool.env:LoopToolEnv",
             {**common, "action_space": "loop_tool"}, gymnasium_api=False)


_register_defaults()
