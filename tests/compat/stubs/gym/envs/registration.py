"""Environment registration with gym 0.21's interface: register(), make(), spec(), registry."""
import importlib
from typing import Any, Callable, Dict, Optional, Union

from gym import error


def load(name: str) -> Callable:
    """Resolves "package.module:attribute"."""
    module_name, _, attr = name.partition(":")
    return getattr(importlib.import_module(module_name), attr)


class EnvSpec:
    """What make() needs to build an environment: its entry point and default kwargs."""

    def __init__(
        self,
        id: str,
        entry_point: Union[None, str, Callable] = None,
        reward_threshold: Optional[float] = None,
        nondeterministic: bool = False,
        max_episode_steps: Optional[int] = None,
        order_enforce: bool = True,
        kwargs: Optional[Dict[str, Any]] = None,
    ):
        self.id = id
        self.entry_point = entry_point
        self.reward_threshold = reward_threshold
        self.nondeterministic = nondeterministic
        self.max_episode_steps = max_episode_steps
        self.order_enforce = order_enforce
        self._kwargs = {} if kwargs is None else dict(kwargs)

    @property
    def kwargs(self) -> Dict[str, Any]:
        return self._kwargs

    def make(self, **kwargs):
        if self.entry_point is None:
            raise error.Error(f"Attempting to make deprecated env {self.id}.")
        if self.order_enforce or self.max_episode_steps is not None:
            # CompilerGym registers order_enforce=False and no step limit; wrappers for
            # these are not part of this stand-in.
            raise error.Error(
                f"{self.id}: order_enforce / max_episode_steps are not supported by the gym "
                "stand-in"
            )
        merged = dict(self._kwargs)
        merged.update(kwargs)
        factory = load(self.entry_point) if isinstance(self.entry_point, str) else self.entry_point
        env = factory(**merged)
        # As gym does: the built environment records the spec (with the kwargs used).
        spec = EnvSpec(
            self.id,
            self.entry_point,
            self.reward_threshold,
            self.nondeterministic,
            self.max_episode_steps,
            self.order_enforce,
            merged,
        )
        env.unwrapped.spec = spec
        return env

    def __repr__(self) -> str:
        return f"EnvSpec({self.id})"


class EnvRegistry:
    def __init__(self):
        self.env_specs: Dict[str, EnvSpec] = {}

    def make(self, path: str, **kwargs):
        return self.spec(path).make(**kwargs)

    def all(self):
        return self.env_specs.values()

    def spec(self, path: str) -> EnvSpec:
        id = path.split(":")[-1] if ":" in path else path
        if ":" in path:
            importlib.import_module(path.split(":")[0])
        try:
            return self.env_specs[id]
        except KeyError:
            raise error.UnregisteredEnv(f"No registered env with id: {id}") from None

    def register(self, id: str, **kwargs) -> None:
        if id in self.env_specs:
            raise error.Error(f"Cannot re-register id: {id}")
        self.env_specs[id] = EnvSpec(id, **kwargs)


registry = EnvRegistry()


def register(id: str, **kwargs) -> None:
    return registry.register(id, **kwargs)


def make(id: str, **kwargs):
    return registry.make(id, **kwargs)


def spec(id: str) -> EnvSpec:
    return registry.spec(id)
