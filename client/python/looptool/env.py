"""A Gym-style environment over one LoopTool service session.

    with LocalServer() as server, LoopToolEnv(server.address,
            benchmark="benchmark://mm64_256_16_range-v0/mm112_208_256") as env:
        observation = env.reset()                        # loops_tensor, float32 (1, 320)
        observation, reward, done, info = env.step("split_4")   # or an index: env.step(5)
        print(env.observation["loop_tree"])               # any observation, by name

Episodes. `reset()` starts a session on the benchmark (ending the previous one) and returns the
observation of `observation_space` (None when that is None). `step(action)` applies one action
(an index into `action_space` or its name) and returns `(observation, reward, done, info)`;
`multistep(actions)` applies several in one round trip. Observations by name, in the same round
trip: `reset(observation_spaces=[...])`, `step(..., observation_spaces=[...])` and
`multistep(..., observation_spaces=[...])` return, in place of the observation, the list of those
observations in that order (CompilerGym's convention); `observe(names)` (no actions) returns them
as a dict. Only the observations asked for, and the reward's, are computed.

Reward (reward_space="flops", LoopTune's definition, looptool.reward's "dgflops_peak"): the
GFLOPS gained over the previous state divided by the machine's peak, `(gflops_after -
gflops_before) / peak_gflops`. The `flops` observation gives GFLOPS of the current schedule's
JIT-compiled kernel (the server caches measurements per schedule, so an unchanged schedule gives
the same number), and `peak_gflops` the peak, fetched once. reward_space=None: no timing, reward
None.

`done` is True once `max_steps` actions have been taken (if set), when the service ends the
session, or when a step fails on the service's side. Failures end the episode gracefully, as
CompilerGym's client does: the session is gone (`SessionNotFound`), the kernel crashed
(INTERNAL), the measurement hung (DEADLINE_EXCEEDED), the service is unreachable ... give
`done=True`, the observation space's default observation, reward 0.0, and
`info["error_type"]` (the exception's class name), `info["error_code"]` (the gRPC status name)
and `info["error_details"]` (the server's message); `last_error` holds the exception (None after
a step that did not fail). A bad action (INVALID_ARGUMENT) is the caller's bug and raises
`ServiceError`.

`fork()` copies the session on the server (ForkSession) into a new environment that shares the
connection and has its own step count and reward baseline (both copied at the fork); its
observation and reward spaces are this one's unless given. `close()` ends the session
(EndSession).
"""

import enum
from typing import Any, Dict, Iterable, Iterator, KeysView, List, Optional, Sequence, Tuple, Union

import grpc

from looptool import convert
from looptool import errors
from looptool import reward as reward_lib
from looptool import spaces as spaces_lib
from looptool._proto import compiler_gym_service_pb2 as pb
from looptool.connection import Connection, Program

REWARD_SPACES = ("flops",)
REWARD_KIND = {"flops": reward_lib.DGFLOPS_PEAK}  # reward space -> looptool.reward's kind

StepResult = Tuple[Any, Optional[float], bool, Dict[str, Any]]
"""(observation, reward, done, info)."""


class _Same(enum.Enum):
    SAME = "same"


SAME = _Same.SAME
"""fork()'s default for a space: the parent's."""

# Failures that are the caller's mistake: raised, the episode goes on.
_CALLER_ERRORS = (grpc.StatusCode.INVALID_ARGUMENT,)


class ObservationView:
    """`env.observation[name]`: computes any observation of the current state, by name, with one
    Step that carries no actions. The value is converted as in convert.py."""

    def __init__(self, env: "LoopToolEnv") -> None:
        self._env = env

    def __getitem__(self, name: str) -> Any:
        return self._env.observe([name])[name]

    def __contains__(self, name: object) -> bool:
        return name in self._env.observation_spaces

    def __iter__(self) -> Iterator[str]:
        return iter(self._env.observation_spaces)

    def __len__(self) -> int:
        return len(self._env.observation_spaces)

    def keys(self) -> KeysView[str]:
        return self._env.observation_spaces.keys()

    def __repr__(self) -> str:
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
    episode), `step_count`, `episode_reward`, `max_steps`, `connection`, `last_error`.
    """

    def __init__(self, service: Union[str, Connection, Any], benchmark: Optional[str] = None,
                 action_space: str = "loop_tool",
                 observation_space: Optional[str] = "loops_tensor",
                 reward_space: Optional[str] = "flops", max_steps: Optional[int] = None,
                 timeout: Optional[float] = None) -> None:
        self.connection: Connection
        if isinstance(service, Connection):
            self.connection, self._owns_connection = service, False
        else:
            address = getattr(service, "address", service)
            if not isinstance(address, str):
                raise TypeError(f"service must be an address, a Connection or a LocalServer, "
                                f"got {type(service).__name__}")
            self.connection, self._owns_connection = Connection(address), True
        self._closed = False
        self.session_id: Optional[int] = None
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
        self.episode_reward: Optional[float] = None
        self.last_error: Optional[errors.ServiceError] = None
        self._gflops: Optional[float] = None  # the reward baseline: GFLOPS of the last state
        self._peak_gflops: Optional[float] = None

    # --- episodes -------------------------------------------------------------------------------

    def reset(self, benchmark: Optional[str] = None, *, program: Optional[Program] = None,
              observation_spaces: Optional[Sequence[str]] = None) -> Any:
        """Ends the current session (if any), starts one on `benchmark` (default: the last one)
        and returns the initial observation (None when observation_space is None), or with
        `observation_spaces` the list of those observations. `program`: the benchmark's program
        text, for a URI the server does not know (added for this client)."""
        self._check_open()
        if benchmark is not None:
            self.benchmark = benchmark
        if not self.benchmark:
            raise ValueError("No benchmark: pass benchmark= to LoopToolEnv() or reset()")
        self._end_session()
        self.last_error = None
        names = self._names_to_observe(observation_spaces)
        if (self.reward_space is not None and self._peak_gflops is None
                and "peak_gflops" not in names):
            names.append("peak_gflops")  # the reward's denominator, fetched once
        reply = self.connection.start_session(
            self.benchmark, self.action_space.space_index, self._indices(names),
            program=program, timeout=self.timeout)
        self.session_id = int(reply.session_id)
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
        return self._result(values, observation_spaces)

    def step(self, action: spaces_lib.ActionLike, timeout: Optional[float] = None,
             observation_spaces: Optional[Sequence[str]] = None) -> StepResult:
        """Applies one action (index or name). Returns (observation, reward, done, info); with
        `observation_spaces`, the observation is the list of those observations."""
        return self.multistep([action], timeout, observation_spaces)

    def multistep(self, actions: Iterable[spaces_lib.ActionLike],
                  timeout: Optional[float] = None,
                  observation_spaces: Optional[Sequence[str]] = None) -> StepResult:
        """Applies `actions` in order in one round trip; each counts as a step towards
        max_steps. Returns (observation, reward, done, info) for the final state; with
        `observation_spaces`, the observation is the list of those observations."""
        session_id = self._require_session()
        self.last_error = None
        indices = [self.action_space.to_index(a) for a in actions]  # names resolved here
        names = self._names_to_observe(observation_spaces)
        try:
            reply = self.connection.step(session_id, indices, self._indices(names),
                                         timeout=self._timeout(timeout))
        except errors.ServiceError as e:
            if e.code in _CALLER_ERRORS:
                raise
            return self._failed_step(e, observation_spaces)
        values = self._convert(names, reply.observation, "Step")
        self.step_count += len(indices)
        reward = None
        if self.reward_space is not None:
            gflops = values[self.reward_space]
            assert self._gflops is not None and self.episode_reward is not None  # set by reset
            reward = reward_lib.reward(REWARD_KIND[self.reward_space], self._gflops, gflops,
                                       self.peak_gflops)
            self._gflops = gflops
            self.episode_reward += reward
        info: Dict[str, Any] = {"action_had_no_effect": reply.action_had_no_effect}
        if reply.HasField("new_action_space") and reply.new_action_space.name:
            info["new_action_space"] = reply.new_action_space
            self.action_space = self.connection.spaces().action_space(
                reply.new_action_space.name)
        done = bool(reply.end_of_session) or (self.max_steps is not None
                                              and self.step_count >= self.max_steps)
        return self._result(values, observation_spaces), reward, done, info

    def _failed_step(self, error: errors.ServiceError,
                     observation_spaces: Optional[Sequence[str]] = None) -> StepResult:
        """The graceful end of an episode whose step failed on the service's side."""
        self.last_error = error
        if isinstance(error, errors.SessionNotFound):
            self.session_id = None  # nothing left to end
        observation: Any = None
        if observation_spaces is not None:
            observation = [self.observation_spaces[n].default_value for n in observation_spaces]
        elif self.observation_space is not None:
            observation = self.observation_spaces[self.observation_space].default_value
        reward = 0.0 if self.reward_space is not None else None
        info: Dict[str, Any] = {
            "action_had_no_effect": True,
            "error_type": type(error).__name__,
            "error_code": error.code.name,
            "error_details": error.details,
        }
        return observation, reward, True, info

    # --- observations ---------------------------------------------------------------------------

    def observe(self, names: Iterable[str], timeout: Optional[float] = None) -> Dict[str, Any]:
        """Several observations of the current state in one round trip: {name: value}.
        Failures raise (ServiceError)."""
        session_id = self._require_session()
        names = list(names)
        reply = self.connection.step(session_id, (), self._indices(names),
                                     timeout=self._timeout(timeout))
        return self._convert(names, reply.observation, "Step")

    @property
    def peak_gflops(self) -> float:
        """The machine's peak GFLOPS as the service measured it (fetched once)."""
        if self._peak_gflops is None:
            self._peak_gflops = self.observation["peak_gflops"]
        if not (self._peak_gflops is not None and self._peak_gflops > 0):
            raise RuntimeError(f"The service reports peak_gflops = {self._peak_gflops}")
        return self._peak_gflops

    # --- sessions -------------------------------------------------------------------------------

    def fork(self, *, observation_space: Union[Optional[str], _Same] = SAME,
             reward_space: Union[Optional[str], _Same] = SAME) -> "LoopToolEnv":
        """A new environment on a copy of this session (ForkSession), sharing the connection.
        Its step count, episode reward and reward baseline start as copies of this one's; its
        observation and reward spaces are this one's unless given (e.g. reward_space=None: the
        copy's steps time no kernel)."""
        session_id = self._require_session()
        child_observation = (self.observation_space if observation_space is SAME
                             else observation_space)
        child_reward = self.reward_space if reward_space is SAME else reward_space
        assert not isinstance(child_observation, _Same) and not isinstance(child_reward, _Same)
        child = LoopToolEnv(self.connection, benchmark=self.benchmark,
                            action_space=self.action_space.name,
                            observation_space=child_observation,
                            reward_space=child_reward, max_steps=self.max_steps,
                            timeout=self.timeout)
        try:
            child.session_id = self.connection.fork_session(session_id, timeout=self.timeout)
            child.action_space = self.action_space
            child.step_count = self.step_count
            child._peak_gflops = self._peak_gflops
            if child_reward == self.reward_space:
                child.episode_reward = self.episode_reward
                child._gflops = self._gflops
            elif child_reward is not None:  # a reward this one does not keep: its baseline now
                child.episode_reward = 0.0
                child._gflops = child.observe([child_reward])[child_reward]
        except BaseException:
            child.close()  # ends the copy, if there is one
            raise
        if self._owns_connection:  # shared: the last environment to close closes it
            self.connection.acquire()
            child._owns_connection = True
        return child

    def send_param(self, key: str, value: object) -> str:
        """SendSessionParameter on this session; returns the service's reply string."""
        session_id = self._require_session()
        return self.connection.send_session_parameter(session_id, key, value,
                                                      timeout=self.timeout)

    def remeasure(self) -> Tuple[float, float]:
        """The current state's kernel timed again by the server with its full fixed budget, no
        cache and no early stop (session parameter `looptool.remeasure`, as the searches re-time
        their winners), and the FMA peak measured on its core right after it (0.0 from a server
        that measured none): (GFLOPS, peak GFLOPS). ServiceError with INTERNAL when the reply
        is not one or two numbers."""
        session_id = self._require_session()
        replies = self.connection.send_session_parameter_replies(
            session_id, "looptool.remeasure", "", timeout=self.timeout)
        try:
            if len(replies) not in (1, 2):
                raise ValueError
            numbers = [float(r) for r in replies]
        except ValueError:
            raise errors.ServiceError(grpc.StatusCode.INTERNAL,
                                      f"The server's looptool.remeasure reply is not one or two "
                                      f"numbers: {replies!r}", "SendSessionParameter") from None
        return numbers[0], (numbers[1] if len(numbers) == 2 else 0.0)

    def close(self) -> None:
        """Ends the session and, if this environment owns a share of it, the connection.
        Idempotent; errors from the service are ignored (the session may already be gone)."""
        if self._closed:
            return
        self._closed = True
        self._end_session()
        if self._owns_connection:
            self.connection.release()

    def __enter__(self) -> "LoopToolEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"LoopToolEnv({self.connection.address!r}, benchmark={self.benchmark!r}, "
                f"session_id={self.session_id})")

    # --- helpers --------------------------------------------------------------------------------

    def _end_session(self) -> None:
        if self.session_id is None:
            return
        session_id, self.session_id = self.session_id, None
        try:
            # Without waiting for a server: one that cannot be reached has no session left.
            self.connection.end_session(session_id, timeout=self.timeout, wait_for_ready=False)
        except (errors.ServiceError, RuntimeError):
            pass  # already gone, or the service is unreachable: nothing to clean up

    def _indices(self, names: Iterable[str]) -> List[int]:
        """Observation space indices for the request (KeyError for an unknown name)."""
        spaces = self.connection.spaces()
        return [spaces.observation_space(n).index for n in names]

    def _names_to_observe(self, requested: Optional[Sequence[str]] = None) -> List[str]:
        """What a step asks for: the `requested` observations (in their order), then the
        observation space's and the reward's, each once."""
        if isinstance(requested, str):
            raise TypeError(f"observation_spaces takes a list of names, not the string "
                            f"{requested!r}")
        names: List[str] = []
        for name in [*(requested or ()), self.observation_space, self.reward_space]:
            if name is not None and name not in names:
                names.append(name)
        return names

    def _result(self, values: Dict[str, Any],
                observation_spaces: Optional[Sequence[str]]) -> Any:
        """The observation a step returns: the observation space's, or the requested list."""
        if observation_spaces is not None:
            return [values[n] for n in observation_spaces]
        return values.get(self.observation_space) if self.observation_space else None

    def _convert(self, names: Sequence[str], events: Sequence[pb.Event],
                 method: str) -> Dict[str, Any]:
        if len(events) != len(names):
            raise errors.ServiceError(
                grpc.StatusCode.INTERNAL,
                f"Requested {len(names)} observations, received {len(events)}", method)
        return {name: convert.event_to_python(e) for name, e in zip(names, events)}

    def _timeout(self, timeout: Optional[float]) -> Optional[float]:
        return self.timeout if timeout is None else timeout

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("LoopToolEnv is closed")

    def _require_session(self) -> int:
        """The session id; RuntimeError when closed or outside an episode."""
        self._check_open()
        if self.session_id is None:
            raise RuntimeError("LoopToolEnv has no session: call reset() first")
        return self.session_id
