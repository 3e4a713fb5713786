"""gym.Env and gym.Wrapper as gym 0.21 defines their interface."""
from typing import Any, Optional, Tuple


class Env:
    """The interface of an environment: step(), reset(), render(), close(), seed()."""

    metadata = {"render.modes": []}
    reward_range: Tuple[float, float] = (-float("inf"), float("inf"))
    spec = None
    action_space = None
    observation_space = None

    def step(self, action):
        raise NotImplementedError

    def reset(self):
        raise NotImplementedError

    def render(self, mode: str = "human"):
        raise NotImplementedError

    def close(self) -> None:
        pass

    def seed(self, seed: Optional[int] = None):
        return

    @property
    def unwrapped(self) -> "Env":
        return self

    def __str__(self) -> str:
        if self.spec is None:
            return f"<{type(self).__name__} instance>"
        return f"<{type(self).__name__}<{self.spec.id}>>"

    def __enter__(self):
        return self

    def __exit__(self, *args) -> bool:
        self.close()
        return False


class Wrapper(Env):
    """Wraps an environment; attributes it does not define come from the wrapped one."""

    def __init__(self, env: Env):
        self.env = env
        self._action_space = None
        self._observation_space = None
        self._reward_range = None
        self._metadata = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(f"attempted to get missing private attribute '{name}'")
        return getattr(self.env, name)

    @property
    def spec(self):
        return self.env.spec

    @classmethod
    def class_name(cls) -> str:
        return cls.__name__

    @property
    def action_space(self):
        if self._action_space is None:
            return self.env.action_space
        return self._action_space

    @action_space.setter
    def action_space(self, space):
        self._action_space = space

    @property
    def observation_space(self):
        if self._observation_space is None:
            return self.env.observation_space
        return self._observation_space

    @observation_space.setter
    def observation_space(self, space):
        self._observation_space = space

    @property
    def reward_range(self):
        if self._reward_range is None:
            return self.env.reward_range
        return self._reward_range

    @reward_range.setter
    def reward_range(self, value):
        self._reward_range = value

    @property
    def metadata(self):
        if self._metadata is None:
            return self.env.metadata
        return self._metadata

    @metadata.setter
    def metadata(self, value):
        self._metadata = value

    def step(self, action):
        return self.env.step(action)

    def reset(self, **kwargs):
        return self.env.reset(**kwargs)

    def render(self, mode: str = "human", **kwargs):
        return self.env.render(mode, **kwargs)

    def close(self):
        return self.env.close()

    def seed(self, seed: Optional[int] = None):
        return self.env.seed(seed)

    @property
    def unwrapped(self) -> Env:
        return self.env.unwrapped

    def __str__(self) -> str:
        return f"<{type(self).__name__}{self.env}>"

    def __repr__(self) -> str:
        return str(self)
