"""A minimal stand-in for gym 0.21 (Debian 12 has no gym package).

Only what CompilerGym v0.2.5's client imports: gym.Env, gym.Wrapper, gym.Space,
gym.spaces.*, gym.envs.registration and gym.make. See tests/compat/stubs/README.md.
"""
__version__ = "0.21.0"

from gym import error  # noqa: F401  (isort: keep this order: no cycles)
from gym.core import Env, Wrapper  # noqa: F401
from gym import spaces  # noqa: F401
from gym.spaces import Space  # noqa: F401
from gym.envs.registration import make, register, spec  # noqa: F401
from gym import envs  # noqa: F401

__all__ = ["Env", "Wrapper", "Space", "spaces", "envs", "make", "register", "spec"]
