"""gym.envs: only the registry (no environments of gym's own are registered)."""
from gym.envs.registration import make, register, registry, spec  # noqa: F401
