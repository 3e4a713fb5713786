"""A Gym-style environment over one LoopTool service session.

    with LocalServer() as server, LoopToolEnv(server.address,
            benchmark="benchmark://mm64_256_16_range-v0/mm112_208_256") as env:
        observation = env.reset()                        # loops_tensor, float32 (1, 320)
        observation, reward, done, info = env.step("split_4")   # or an index: env.step(5)
        print(env.observation["loop_tree"])               # any observation, by name

Episodes. `reset()` starts a session on the benchmark (ending the previous one) and returns the
observation of `observation_space` (None when that is None). `step(action)` applies one action
(an index into `action_space` or its name) and returns `(observation, reward, done, info)`;
`multistep(actions)` applies several in one round trip.

Reward (reward_space="flops", LoopTune's definition): the GFLOPS gained over the previous
state divided by the machine's peak, `(gflops_after - gflops_before) / peak_gflops`. The
`flops` observation gives GFLOPS of the current schedule's JIT-compiled kernel (the server
caches measurements per schedule, so an unchanged schedule gives the same number), and
`peak_gflops` the peak, fetched once. reward_space=None: no timing, reward None.

`done` is True once `max_steps` actions have been taken (if set), when the service ends the
session, or when a step fails on the service's side. Failures end the episode gracefully, as
CompilerGym's client does: the session is gone (`SessionNotFound`), the kernel crashed
(INTERNAL), the measurement hung (DEADLINE_EXCEEDED), the service is unreachable ... give
`done=True`, the observation space's default observation, reward 0.0, and
`info["error_type"]` (the exception's class name), `info["error_code"]` (the gRPC status name)
and `info["error_details"]` (the server's message). A bad action (INVALID_ARGUMENT) is the
caller's bug and raises `ServiceError`.

`fork()` copies the session on the server (ForkSession) into a new environment that shares the
connection and has its own step count and reward baseline (both copied at the fork).
`close()` ends the session (EndSession).
"""

import grpc

from looptool import convert
from looptool import errors
from looptool.connection import Connection

REWARD_SPACES = ("flops",)

# Failures that are the caller's mistake: raised, the episode goes on.
_CALLER_ERRORS = (grpc.StatusCode.INVALID_ARGUMENT,)


class ObservationView:
    """`env.observation[name]`: computes any observation of the current state, by name, with one
    Step that carries no actions. The value is converted as in convert.py."""

    def __init__(self, env):
        self._env = env

    def __getitem__(self, name):
        return self._env.observe([name])[name]

    def __contains__(self, name):
        return name in self._env.observation_spaces

    def __iter__(self):
        return iter(self._env.observation_spaces)

    def __len__(self):
        return len(self._env.observation_spaces)

    def keys(self):
        return self._env.observation_spaces.keys()

    def __repr__(self):
        return f"ObservationView({', '.join(self._env.observation_spaces)})"


class LoopToolEnv:
    """One tuning episode at a time on a LoopTool service.

    Args:
      service: the service: an address "host:port" (the environment opens, and on close closes,
        its own `Connection`), a `Connection` (shared; the caller closes it), or anything with an
        `.address` (a `LocalServer`).
      benchmark: the benchmark URI for `reset()`, e.g.
        "benchmark://mm64_256_16_range-v0/mm112_208_256".
      action_space: "loop_tool" (17 actions) or "loop_tune" (LoopTune's 7).
      observation_space: the observation `reset()` and `step()` return, or None.
      reward_space: "flops" or None.
      max_steps: `done` becomes True when this many actions have been taken (None: never).
      timeout: per-call deadline in seconds (None: the connection's default).

    Attributes: `action_space` (`NamedDiscrete`), `action_spaces`, `observation_spaces` (dicts
    by name), `observation` (`ObservationView`), `benchmark`, `session_id` (None outside an
    episode), `step_count`, `episode_reward`, `max_steps`, `connection`.
    """

    def __init__(self, service, benchmark=None, action_space="loop_tool",
                 observation_space="loops_tensor", reward_space="flops", max_steps=None,
                 timeout=None):
        if isinstance(service, Connection):
            self.connection, self._owns_connection = service, False
        else:
            address = getattr(service, "address", service)
            if not isinstance(address, str):
                raise TypeError(f"service must be an address, a Connection or a LocalServer, "
                                f"got {type(service).__name__}")
            self.connection, self._owns_connection = Connection(address), True
        self._closed = False
        self.session_id = None
        try:
            spaces = self.connection.spaces(timeout)
            self.action_spaces = spaces.action_spaces
            self.observation_spaces = spaces.observation_spaces
            self.action_space = spaces.action_space(action_space)
            if observation_space is not None:
                spaces.observation_space(observation_space)  # KeyError if unknown
            if reward_space is not None and reward_space not in REWARD_SPACES:
                raise ValueError(f"Unknown reward space {reward_space!r}; "
                                 f"known: {', '.join(REWARD_SPACES)}")
        except BaseException:
            self.close()
            raise
        self.benchmark = benchmark
        self.observation_space = observation_space
        self.reward_space = reward_space
        self.max_steps = max_steps
        self.timeout = timeout
        self.observation = ObservationView(self)
        self.step_count = 0
        self.episode_reward = None
        self._gflops = None  # the reward baseline: GFLOPS of the last observed state
        self._peak_gflops = None

    # --- episodes -------------------------------------------------------------------------------

    def reset(self, benchmark=None):
        """Ends the current session (if any), starts one on `benchmark` (default: the last one)
        and returns the initial observation (None when observation_space is None)."""
        self._check_open()
        if benchmark is not None:
            self.benchmark = benchmark
        if not self.benchmark:
            raise ValueError("No benchmark: pass benchmark= to LoopToolEnv() or reset()")
        self._end_session()
        names = self._names_to_observe()
        if (self.reward_space is not None and self._peak_gflops is None
                and "peak_gflops" not in names):
            names.append("peak_gflops")  # the reward's denominator, fetched once
        reply = self.connection.start_session(
            self.benchmark, self.action_space.space_index, self._indices(names),
            timeout=self.timeout)
        self.session_id = reply.session_id
        if reply.HasField("new_action_space") and reply.new_action_space.name:
            # The server runs the session in the space it reports (e.g. upstream's `simple` for
            # loop_tool-cpu-v0 benchmarks): index actions in that one.
            self.action_space = self.connection.spaces().action_space(reply.new_action_space.name)
        values = self._convert(names, reply.observation, "StartSession")
        if "peak_gflops" in values and self._peak_gflops is None:
            self._peak_gflops = values["peak_gflops"]
        self.step_count = 0
        self.episode_reward = 0.0 if self.reward_space is not None else None
        if self.reward_space is not None:
            self._gflops = values[self.reward_space]
        return values.get(self.observation_space)

    def step(self, action, timeout=None):
        """Applies one action (index or name). Returns (observation, reward, done, info)."""
        return self.multistep([action], timeout)

    def multistep(self, actions, timeout=None):
        """Applies `actions` in order in one round trip; each counts as a step towards
        max_steps. Returns (observation, reward, done, info) for the final state."""
        self._require_session()
        indices = [self.action_space.to_index(a) for a in actions]  # names resolved here
        names = self._names_to_observe()
        try:
            reply = self.connection.step(self.session_id, indices, self._indices(names),
                                         timeout=self._timeout(timeout))
        except errors.ServiceError as e:
            if e.code in _CALLER_ERRORS:
                raise
            return self._failed_step(e)
        values = self._convert(names, reply.observation, "Step")
        self.step_count += len(indices)
        reward = None
        if self.reward_space is not None:
            gflops = values[self.reward_space]
            reward = (gflops - self._gflops) / self.peak_gflops
            self._gflops = gflops
            self.episode_reward += reward
        info = {"action_had_no_effect": reply.action_had_no_effect}
        if reply.HasField("new_action_space") and reply.new_action_space.name:
            info["new_action_space"] = reply.new_action_space
            self.action_space = self.connection.spaces().action_space(
                reply.new_action_space.name)
        done = reply.end_of_session or (self.max_steps is not None
                                        and self.step_count >= self.max_steps)
        return values.get(self.observation_space), reward, done, info

    def _failed_step(self, error):
        """The graceful end of an episode whose step failed on the service's side."""
        if isinstance(error, errors.SessionNotFound):
            self.session_id = None  # nothing left to end
        observation = None
        if self.observation_space is not None:
            observation = self.observation_spaces[self.observation_space].default_value
        reward = 0.0 if self.reward_space is not None else None
        info = {
            "action_had_no_effect": True,
            "error_type": type(error).__name__,
            "error_code": error.code.name,
            "error_details": error.details,
        }
        return observation, reward, True, info

    # --- observations ---------------------------------------------------------------------------

    def observe(self, names, timeout=None):
        """Several observations of the current state in one round trip: {name: value}."""
        self._require_session()
        names = list(names)
        reply = self.connection.step(self.session_id, (), self._indices(names),
                                     timeout=self._timeout(timeout))
        return self._convert(names, reply.observation, "Step")

    @property
    def peak_gflops(self):
        """The machine's peak GFLOPS as the service measured it (fetched once)."""
        if self._peak_gflops is None:
            self._peak_gflops = self.observation["peak_gflops"]
        if not self._peak_gflops > 0:
            raise RuntimeError(f"The service reports peak_gflops = {self._peak_gflops}")
        return self._peak_gflops

    # --- sessions -------------------------------------------------------------------------------

    def fork(self):
        """A new environment on a copy of this session (ForkSession), sharing the connection.
        Its step count, episode reward and reward baseline start as copies of this one's."""
        self._require_session()
        session_id = self.connection.fork_session(self.session_id, timeout=self.timeout)
        child = LoopToolEnv(self.connection, benchmark=self.benchmark,
                            action_space=self.action_space.name,
                            observation_space=self.observation_space,
                            reward_space=self.reward_space, max_steps=self.max_steps,
                            timeout=self.timeout)
        if self._owns_connection:  # shared: the last environment to close closes it
            self.connection.acquire()
            child._owns_connection = True
        child.action_space = self.action_space
        child.session_id = session_id
        child.step_count = self.step_count
        child.episode_reward = self.episode_reward
        child._gflops = self._gflops
        child._peak_gflops = self._peak_gflops
        return child

    def send_param(self, key, value):
        """SendSessionParameter on this session; returns the service's reply string."""
        self._require_session()
        return self.connection.send_session_parameter(self.session_id, key, value,
                                                      timeout=self.timeout)

    def close(self):
        """Ends the session and, if this environment owns a share of it, the connection.
        Idempotent; errors from the service are ignored (the session may already be gone)."""
        if self._closed:
            return
        self._closed = True
        self._end_session()
        if self._owns_connection:
            self.connection.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"LoopToolEnv({self.connection.address!r}, benchmark={self.benchmark!r}, "
                f"session_id={self.session_id})")

    # --- helpers --------------------------------------------------------------------------------

    def _end_session(self):
        if self.session_id is None:
            return
        session_id, self.session_id = self.session_id, None
        try:
            self.connection.end_session(session_id, timeout=self.timeout)
        except (errors.ServiceError, RuntimeError):
            pass  # already gone, or the service is unreachable: nothing to clean up

    def _indices(self, names):
        """Observation space indices for the request (KeyError for an unknown name)."""
        spaces = self.connection.spaces()
        return [spaces.observation_space(n).index for n in names]

    def _names_to_observe(self):
        """The observations every step needs: the observation space and the reward's."""
        names = []
        for name in (self.observation_space, self.reward_space):
            if name is not None and name not in names:
                names.append(name)
        return names

    def _convert(self, names, events, method):
        if len(events) != len(names):
            raise errors.ServiceError(
                grpc.StatusCode.INTERNAL,
                f"Requested {len(names)} observations, received {len(events)}", method)
        return {name: convert.event_to_python(e) for name, e in zip(names, events)}

    def _timeout(self, timeout):
        return self.timeout if timeout is None else timeout

    def _check_open(self):
        if self._closed:
            raise RuntimeError("LoopToolEnv is closed")

    def _require_session(self):
        self._check_open()
        if self.session_id is None:
            raise RuntimeError("LoopToolEnv has no session: call reset() first")
