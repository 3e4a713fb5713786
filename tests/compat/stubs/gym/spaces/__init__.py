"""gym.spaces: Space, Box, Discrete, Dict and Tuple with gym 0.21's interface."""
from gym.spaces.space import Space  # noqa: F401  (isort: Space first)
from gym.spaces.box import Box  # noqa: F401
from gym.spaces.dict import Dict  # noqa: F401
from gym.spaces.discrete import Discrete  # noqa: F401
from gym.spaces.tuple import Tuple  # noqa: F401

__all__ = ["Space", "Box", "Discrete", "Dict", "Tuple"]
