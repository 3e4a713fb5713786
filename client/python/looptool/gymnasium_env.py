"""A Gymnasium-style environment over one LoopTool service session.

    with LocalServer() as server, GymnasiumEnv(server.address,
            benchmark="benchmark://mm64_256_16_range-v0/mm112_208_256", max_steps=10) as env:
        obs, info = env.reset(seed=0)                  # loops_tensor, float32 (1, 320)
        action = env.action_space.sample(mask=env.observation["action_mask"])
        obs, reward, terminated, truncated, info = env.step(action)   # or env.step("split_4")
        print(env.render())                             # the loop tree (render_mode="ansi")

`GymnasiumEnv` has Gymnasium's API and reuses `LoopToolEnv` (the CompilerGym-style 4-tuple
environment, `env.cg_env`) for everything that talks to the service: sessions, observations,
LoopTune's reward, graceful ends. With the `gymnasium` package importable it subclasses
`gymnasium.Env` and its spaces are gymnasium's (see gymnasium_spaces.py); without it, a plain
base class with the same API stands in.

* `reset(seed=None, options=None) -> (observation, info)`: starts a new session (ending the last
  one). `seed` seeds `np_random` and both spaces' samplers; `options={"benchmark": uri}` switches
  benchmarks. info: {"benchmark": uri}.
* `step(action) -> (observation, reward, terminated, truncated, info)`: `action` is an index in
  `action_space` (an int or numpy integer) or an action's name; one outside the space raises
  ValueError. `terminated`: the service ended the episode, or the step failed on its side (the
  session is gone, the kernel crashed or hung, the service is unreachable: LoopToolEnv's graceful
  end, with `info["error_type"]`, `info["error_code"]`, `info["error_details"]`, reward 0.0 and a
  zero observation). `truncated`: `max_steps` actions have been taken since reset. reward is a
  float (0.0 with reward_space=None). info: {"action_had_no_effect": bool, ...}.
* `action_space`: a `NamedDiscreteSpace` (Discrete with `names`, `index(name)`);
  `observation_space`: Box for tensors and numbers, Text for strings, MultiBinary for
  `action_mask`. Graph observations are not available as the observation space; any observation
  can still be read with `env.observation[name]`.
* `render()`: the `loop_tree` text when render_mode is "ansi" (else None). `close()` ends the
  session; the environment is a context manager. `fork()` copies the session.
"""

from typing import TYPE_CHECKING, Any, Dict, Literal, Optional, Tuple, Union

import numpy as np

from looptool.connection import Connection
from looptool.env import LoopToolEnv, ObservationView
from looptool.gymnasium_spaces import (NamedDiscreteSpace, PlainSpace, Seed, coerce_observation,
                                       empty_observation, gymnasium, np_random,
                                       observation_space_for)

GymStepResult = Tuple[Any, float, bool, bool, Dict[str, Any]]
"""(observation, reward, terminated, truncated, info)."""


class PlainEnv:
    """gymnasium.Env's API where gymnasium is not installed: np_random (seeded by
    reset(seed=...)), metadata, render_mode, spec, unwrapped, close, context manager."""

    metadata: Dict[str, Any] = {"render_modes": []}
    render_mode: Optional[str] = None
    spec: Any = None
    _np_random: Optional[np.random.Generator] = None

    def reset(self, *, seed: Seed = None, options: Optional[Dict[str, Any]] = None) -> Any:
        if seed is not None:
            self._np_random, _ = np_random(seed)
        return None

    def step(self, action: Any) -> Any:
        raise NotImplementedError

    def render(self) -> Any:
        return None

    def close(self) -> None:
        pass

    @property
    def np_random(self) -> np.random.Generator:
        if self._np_random is None:
            self._np_random, _ = np_random()
        return self._np_random

    @np_random.setter
    def np_random(self, value: np.random.Generator) -> None:
        self._np_random = value

    @property
    def unwrapped(self) -> "PlainEnv":
        return self

    def __enter__(self) -> "PlainEnv":
        return self

    def __exit__(self, *exc: object) -> "Literal[False]":
        self.close()
        return False


if TYPE_CHECKING:  # checked against PlainEnv, gymnasium.Env's API
    EnvBase = PlainEnv
else:
    EnvBase = gymnasium.Env if gymnasium is not None else PlainEnv


class GymnasiumEnv(EnvBase):
    """Gymnasium's reset/step/render over a LoopToolEnv.

    Args:
      service: an address "host:port", a `Connection` or a `LocalServer` (as for LoopToolEnv).
      benchmark: the benchmark URI `reset()` starts on (options={"benchmark": ...} changes it).
      action_space: "loop_tool" (17 actions) or "loop_tune" (LoopTune's 7).
      observation_space: the observation `reset()`/`step()` return ("loops_tensor", ...).
      reward_space: "flops" (LoopTune's reward: GFLOPS gained / peak) or None (reward 0.0).
      max_steps: `truncated` becomes True once this many actions were taken (None: never).
      timeout: per-call deadline in seconds (None: the connection's default).
      render_mode: None or "ansi".

    Attributes: `action_space`, `observation_space` (spaces), `cg_env` (the LoopToolEnv),
    `observation` (any observation by name), `benchmark`, `session_id`, `step_count`,
    `episode_reward`, `max_steps`, `render_mode`, `np_random`.
    """

    metadata: Dict[str, Any] = {"render_modes": ["ansi"]}

    def __init__(self, service: Union[str, Connection, Any], benchmark: Optional[str] = None,
                 action_space: str = "loop_tool", observation_space: str = "loops_tensor",
                 reward_space: Optional[str] = "flops", max_steps: Optional[int] = None,
                 timeout: Optional[float] = None, render_mode: Optional[str] = None) -> None:
        if render_mode not in (None, "ansi"):
            raise ValueError(f"Unsupported render_mode {render_mode!r}; supported: 'ansi'")
        if observation_space is None:
            raise ValueError("GymnasiumEnv needs an observation_space")
        # max_steps stays here: the inner env's `done` is then exactly `terminated`.
        cg_env = LoopToolEnv(service, benchmark=benchmark, action_space=action_space,
                             observation_space=observation_space, reward_space=reward_space,
                             max_steps=None, timeout=timeout)
        try:
            self._attach(cg_env, max_steps, render_mode)
        except BaseException:
            cg_env.close()
            raise

    def _attach(self, cg_env: LoopToolEnv, max_steps: Optional[int],
                render_mode: Optional[str]) -> None:
        self.cg_env = cg_env
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.action_space = NamedDiscreteSpace.from_named_discrete(cg_env.action_space)
        assert cg_env.observation_space is not None  # __init__ requires one
        spec = cg_env.observation_spaces[cg_env.observation_space]
        self.observation_space: PlainSpace = observation_space_for(spec,
                                                                   int(self.action_space.n))

    # --- episodes -------------------------------------------------------------------------------

    def reset(self, *, seed: Seed = None,
              options: Optional[Dict[str, Any]] = None) -> Tuple[Any, Dict[str, Any]]:
        """Starts a new episode; returns (observation, info)."""
        super().reset(seed=seed)
        if seed is not None:
            self.action_space.seed(seed)
            self.observation_space.seed(seed)
        options = dict(options or {})
        benchmark = options.pop("benchmark", None)
        if options:
            raise ValueError(f"Unknown reset options: {', '.join(sorted(options))}; "
                             f"known: benchmark")
        observation = self.cg_env.reset(benchmark)
        return (coerce_observation(self.observation_space, observation),
                {"benchmark": self.cg_env.benchmark})

    def step(self, action: Any) -> GymStepResult:
        """Applies one action (index or name); returns (observation, reward, terminated,
        truncated, info)."""
        observation, reward, done, info = self.cg_env.step(self._action_index(action))
        if "new_action_space" in info:
            self.action_space = NamedDiscreteSpace.from_named_discrete(self.cg_env.action_space)
        observation = coerce_observation(self.observation_space, observation)
        if "error_type" in info and not self.observation_space.contains(observation):
            observation = empty_observation(self.observation_space)
        truncated = self.max_steps is not None and self.cg_env.step_count >= self.max_steps
        reward = 0.0 if reward is None else float(reward)
        return observation, reward, bool(done), bool(truncated), info

    def _action_index(self, action: Any) -> int:
        if isinstance(action, str):
            return self.action_space.index(action)  # ValueError for an unknown name
        if isinstance(action, np.ndarray) and action.shape == ():
            action = action[()]
        if not self.action_space.contains(action):
            raise ValueError(f"Action {action!r} is not in {self.action_space!r} "
                             f"(an integer in 0..{self.action_space.n - 1} or a name)")
        return int(action)

    def render(self) -> Optional[str]:
        """The loop tree of the current state as text (render_mode "ansi"); None otherwise."""
        if self.render_mode != "ansi":
            return None
        return str(self.cg_env.observation["loop_tree"])

    def fork(self) -> "GymnasiumEnv":
        """A new GymnasiumEnv on a copy of this session (ForkSession), sharing the connection;
        step count and reward baseline are copied, the spaces' samplers are fresh."""
        child = type(self).__new__(type(self))
        child._attach(self.cg_env.fork(), self.max_steps, self.render_mode)
        return child

    def close(self) -> None:
        """Ends the session and releases the connection (idempotent)."""
        cg_env = getattr(self, "cg_env", None)  # None when __init__ failed
        if cg_env is not None:
            cg_env.close()

    def __enter__(self) -> "GymnasiumEnv":
        return self

    def __exit__(self, *exc: object) -> "Literal[False]":
        self.close()
        return False

    # --- the 4-tuple env's state ----------------------------------------------------------------

    @property
    def observation(self) -> ObservationView:
        """Any observation of the current state, by name: env.observation["loop_tree"]."""
        return self.cg_env.observation

    @property
    def benchmark(self) -> Optional[str]:
        return self.cg_env.benchmark

    @property
    def session_id(self) -> Optional[int]:
        return self.cg_env.session_id

    @property
    def step_count(self) -> int:
        return self.cg_env.step_count

    @property
    def episode_reward(self) -> Optional[float]:
        return self.cg_env.episode_reward

    def __repr__(self) -> str:
        return (f"GymnasiumEnv({self.cg_env.connection.address!r}, "
                f"benchmark={self.benchmark!r}, session_id={self.session_id})")

    __str__ = __repr__
