"""A connection to a LoopTool (or any CompilerGym-protocol) service: channel, stub, deadlines,
retries and error mapping.

`Connection(address)` opens a gRPC channel to "host:port" (TLS when `tls_root_certificates` is
given; every call carries a random client id, and `auth_token` when given) with the channel options
CompilerGym's own client uses (unlimited message sizes, 512 KiB metadata, no HTTP proxy, no
SO_REUSEPORT). Every RPC gets a deadline (`timeout` seconds, per call overridable).

Retries are gRPC's, set by the channel's service config: `looptool/_proto/
client_service_config.json`, the package's copy of the repository's
proto/client_service_config.json, which the C++ client uses too. It retries UNAVAILABLE for the
methods it lists (`retried_methods()`: GetVersion, GetSpaces, StartSession, ForkSession,
EndSession, AddBenchmark, SendSessionParameter) and never Step: a step applies actions, and one
whose connection broke after the server ran it must not run twice. This module sends no call
again itself.

Calls wait for the channel to (re)connect (gRPC's wait_for_ready) within their deadline, as the
C++ client's do, so a restarted server is ridden out (waiting happens before a call is sent: it
never sends one twice); while the channel is not known to be connected (before the first answer,
after an UNAVAILABLE or DEADLINE_EXCEEDED) a call first waits at most `connect_timeout` seconds
for a server to answer a GetVersion and raises `ServiceTransportError` (UNAVAILABLE) when none
does. The channel's reconnect backoff is capped at 1 s (gRPC's default grows to 2 minutes), as
the C++ client's is, so a server that comes back is reached within about a second however long it
was gone.
Failures are raised as `ServiceError`s (`ServiceTransportError` for UNAVAILABLE,
`SessionNotFound` for NOT_FOUND "Session not found: ...").

Methods named after the RPCs (`start_session`, `step`, ...) build the request messages so that
callers deal in plain values; `call(method, request)` sends any request as is. `datasets()` and
`dataset_benchmarks()` list the server's datasets and their benchmarks (SendSessionParameter keys
`looptool.datasets` and `looptool.dataset_benchmarks`, answered without a session).

A connection may be shared by several environments (a `fork()` shares its parent's);
`acquire()` / `release()` count the users and the last release closes the channel.
"""

import functools
import importlib.resources
import itertools
import json
import os
import threading
from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Tuple, Type, TypeVar, Union

import grpc

from looptool import convert
from looptool import errors
from looptool import spaces as spaces_lib
from looptool._proto import compiler_gym_service_pb2 as pb
from looptool._proto import compiler_gym_service_pb2_grpc as pb_grpc

DEFAULT_TIMEOUT = 300.0  # seconds per call, as CompilerGym
DEFAULT_CONNECT_TIMEOUT = 10.0  # seconds a call waits for a server to answer, as the C++ client

SERVICE = "compiler_gym.CompilerGymService"
SERVICE_CONFIG_PACKAGE = "looptool._proto"
SERVICE_CONFIG_FILE = "client_service_config.json"
SPLITS = ("all", "train", "test")

CHANNEL_OPTIONS: Tuple[Tuple[str, Union[int, str]], ...] = (
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_metadata_size", 512 * 1024),
    ("grpc.enable_http_proxy", 0),
    ("grpc.so_reuseport", 0),
    # A channel of its own connections: one connection's reconnect backoff is not another's
    # (and reconnect() gets a fresh one).
    ("grpc.use_local_subchannel_pool", 1),
    # A server that comes back is tried within a second, however long it was gone.
    ("grpc.max_reconnect_backoff_ms", 1000),
)

_Reply = TypeVar("_Reply")
Program = Union[str, bytes]


@functools.lru_cache(maxsize=None)
def service_config() -> str:
    """The text of the gRPC service config (retry policy) shipped in looptool._proto."""
    resource = importlib.resources.files(SERVICE_CONFIG_PACKAGE).joinpath(SERVICE_CONFIG_FILE)
    return resource.read_text(encoding="utf-8")


@functools.lru_cache(maxsize=None)
def retried_methods() -> FrozenSet[str]:
    """The CompilerGymService methods whose UNAVAILABLE failures the service config retries."""
    text = service_config()
    try:
        config = json.loads(text)
        methods = set()
        for method_config in config["methodConfig"]:
            if "retryPolicy" not in method_config:
                continue
            for name in method_config["name"]:
                if name.get("service") == SERVICE:
                    methods.add(str(name["method"]))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise RuntimeError(f"{SERVICE_CONFIG_PACKAGE}/{SERVICE_CONFIG_FILE} is not a gRPC "
                           f"service config with retry policies: {e!r}") from None
    return frozenset(methods)


def channel_options() -> Tuple[Tuple[str, Union[int, str]], ...]:
    """CHANNEL_OPTIONS plus gRPC's retries under the packaged service config, which a config
    from the server's name resolution (DNS TXT records) may not replace."""
    return CHANNEL_OPTIONS + (
        ("grpc.enable_retries", 1),
        ("grpc.service_config", service_config()),
        ("grpc.service_config_disable_resolution", 1),
    )


class Connection:
    """A channel and stub to one service.

    Args:
      address: "host:port".
      timeout: default deadline of each call, in seconds (None: no deadline).
      connect_timeout: how long a call of a retried method waits for a server to answer when
        the channel is not known to be connected, in seconds.
      auth_token: the server's shared token (sent as "authorization: Bearer <token>").
      tls_root_certificates: PEM bytes of the roots to trust; connects over TLS when given.
      tls_server_name: the name the server's certificate carries (default: the host).
    """

    def __init__(self, address: str, timeout: Optional[float] = DEFAULT_TIMEOUT,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                 auth_token: Optional[str] = None,
                 tls_root_certificates: Optional[bytes] = None,
                 tls_server_name: Optional[str] = None) -> None:
        if not isinstance(address, str) or not address:
            raise ValueError(f"address must be 'host:port', got {address!r}")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be positive seconds or None, got {timeout!r}")
        if not connect_timeout > 0:
            raise ValueError(f"connect_timeout must be positive seconds, got {connect_timeout!r}")
        self.address = address
        self._tls_root_certificates = tls_root_certificates
        self._tls_server_name = tls_server_name
        # The server keeps this client's added benchmarks under this id, across reconnects.
        self._metadata: List[Tuple[str, str]] = [("looptool-client-id", os.urandom(16).hex())]
        if auth_token:
            self._metadata.append(("authorization", f"Bearer {auth_token}"))
        self._request_ids = itertools.count()  # thread-safe in CPython (one C call)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._channel = self._new_channel()
        self.stub = pb_grpc.CompilerGymServiceStub(self._channel)
        self._old_channels: List[grpc.Channel] = []  # replaced by reconnect(); closed by close()
        self._connected = False  # whether the last call reached a server
        self._users = 1
        self._spaces: Optional[spaces_lib.Spaces] = None
        self._datasets: Optional[Dict[str, int]] = None
        self._benchmarks: Dict[Tuple[str, str], List[str]] = {}
        self.closed = False

    # --- lifetime -------------------------------------------------------------------------------

    def acquire(self) -> "Connection":
        """Registers one more user; each must `release()`. Returns self."""
        with self._lock:
            if self.closed:
                raise RuntimeError(f"Connection to {self.address} is closed")
            self._users += 1
        return self

    def release(self) -> None:
        """Drops one user; the last one closes the channel."""
        with self._lock:
            self._users -= 1
            last = self._users <= 0
        if last:
            self.close()

    def close(self) -> None:
        """Closes the channel now (idempotent). Calls after this fail."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        for channel in [self._channel, *self._old_channels]:
            channel.close()

    def reconnect(self) -> None:
        """Replaces the channel with a new one (the client id stays). The old channel stays open
        until close(), so calls still running on it are not cut."""
        with self._lock:
            if self.closed:
                return
            self._old_channels.append(self._channel)
            self._channel = self._new_channel()
            self.stub = pb_grpc.CompilerGymServiceStub(self._channel)
            self._connected = False

    def _new_channel(self) -> grpc.Channel:
        options = channel_options()
        if self._tls_root_certificates is None:
            return grpc.insecure_channel(self.address, options=options)
        if self._tls_server_name:
            options = options + (("grpc.ssl_target_name_override", self._tls_server_name),)
        credentials = grpc.ssl_channel_credentials(root_certificates=self._tls_root_certificates)
        return grpc.secure_channel(self.address, credentials, options=options)

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"Connection({self.address!r}, {state})"

    # --- calls ----------------------------------------------------------------------------------

    def call(self, method: str, request: Any, timeout: Optional[float] = None,
             wait_for_ready: Optional[bool] = None) -> Any:
        """Sends `request` to RPC `method` ("Step", ...) once and returns the reply.

        `timeout` overrides the connection's default deadline for this call. `wait_for_ready`:
        whether the call waits for the channel to connect (default: yes); False fails at once
        while no server can be reached.
        gRPC retries UNAVAILABLE for the methods the service config lists; any failure raises the
        matching `errors.ServiceError`.
        """
        if self.closed:
            raise RuntimeError(f"Connection to {self.address} is closed")
        if wait_for_ready is None:
            wait_for_ready = True
        deadline = self.timeout if timeout is None else timeout
        stub = self.stub
        if wait_for_ready and not self._connected:
            self._wait_for_server(stub, method, deadline)
        try:
            # One id per call, which gRPC's retries resend: a StartSession or ForkSession whose
            # reply was lost returns the session it made instead of making a second.
            metadata = self._metadata + [("looptool-request-id", str(next(self._request_ids)))]
            reply = getattr(stub, method)(request, timeout=deadline, metadata=metadata,
                                          wait_for_ready=wait_for_ready)
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                self._connected = False
            raise errors.from_rpc_error(e, method) from None
        self._connected = True
        return reply

    def _wait_for_server(self, stub: Any, method: str, deadline: Optional[float]) -> None:
        """Waits until a server answers on the channel, at most connect_timeout seconds (and the
        call's deadline); ServiceTransportError (UNAVAILABLE) when none does by then. The
        question is a GetVersion (no work on the server) that waits for the channel to connect:
        any answer, an error included (UNAUTHENTICATED ...), came from a server. (gRPC's own
        connectivity watch holds up closing the channel until its next poll, every 0.2 s.)"""
        wait = self.connect_timeout if deadline is None else min(self.connect_timeout, deadline)
        try:
            stub.GetVersion(pb.GetVersionRequest(), timeout=wait, metadata=self._metadata,
                            wait_for_ready=True)
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise errors.ServiceTransportError(
                    grpc.StatusCode.UNAVAILABLE,
                    f"No server answered at {self.address} within {wait:g} s", method) from None
        self._connected = True

    def _typed_call(self, method: str, request: Any, reply_type: Type[_Reply],
                    timeout: Optional[float], wait_for_ready: Optional[bool] = None) -> _Reply:
        reply = self.call(method, request, timeout, wait_for_ready)
        if not isinstance(reply, reply_type):
            raise errors.ServiceError(grpc.StatusCode.INTERNAL,
                                      f"Expected a {reply_type.__name__}, got "
                                      f"{type(reply).__name__}", method)
        return reply

    def get_version(self, timeout: Optional[float] = None) -> pb.GetVersionReply:
        """The GetVersion reply (service_version, compiler_version)."""
        return self._typed_call("GetVersion", pb.GetVersionRequest(), pb.GetVersionReply,
                                timeout)

    def spaces(self, timeout: Optional[float] = None) -> spaces_lib.Spaces:
        """The service's spaces (`spaces.Spaces`), fetched once: GetSpaces is constant for the
        lifetime of a server process."""
        if self._spaces is None:
            self._spaces = spaces_lib.Spaces(self._typed_call(
                "GetSpaces", pb.GetSpacesRequest(), pb.GetSpacesReply, timeout))
        return self._spaces

    def start_session(self, benchmark: str, action_space: int = 0,
                      observation_spaces: Iterable[int] = (), program: Optional[Program] = None,
                      timeout: Optional[float] = None) -> pb.StartSessionReply:
        """StartSession on benchmark URI `benchmark` (with its program text when given).
        Returns the reply (session_id, observation)."""
        request = pb.StartSessionRequest(
            benchmark=pb.Benchmark(uri=benchmark), action_space=action_space,
            observation_space=list(observation_spaces))
        if program is not None:
            request.benchmark.program.contents = _as_bytes(program)
        return self._typed_call("StartSession", request, pb.StartSessionReply, timeout)

    def step(self, session_id: int, actions: Iterable[convert.Action] = (),
             observation_spaces: Iterable[int] = (),
             timeout: Optional[float] = None) -> pb.StepReply:
        """Step: applies `actions` (indices or names) in order, then observes. Returns the reply.
        Never retried: a failure (UNAVAILABLE included) raises."""
        request = pb.StepRequest(session_id=session_id,
                                 action=[convert.action_to_event(a) for a in actions],
                                 observation_space=list(observation_spaces))
        return self._typed_call("Step", request, pb.StepReply, timeout)

    def fork_session(self, session_id: int, timeout: Optional[float] = None) -> int:
        """ForkSession; returns the new session's id."""
        reply = self._typed_call("ForkSession", pb.ForkSessionRequest(session_id=session_id),
                                 pb.ForkSessionReply, timeout)
        return int(reply.session_id)

    def end_session(self, session_id: int, timeout: Optional[float] = None,
                    wait_for_ready: Optional[bool] = None) -> int:
        """EndSession; returns how many sessions the server still has. wait_for_ready=False:
        fail at once when no server can be reached (a session there is gone anyway)."""
        reply = self._typed_call("EndSession", pb.EndSessionRequest(session_id=session_id),
                                 pb.EndSessionReply, timeout, wait_for_ready)
        return int(reply.remaining_sessions)

    def add_benchmark(self, uri: str, program: Program, timeout: Optional[float] = None) -> None:
        """AddBenchmark: registers program text `program` under `uri`."""
        request = pb.AddBenchmarkRequest(
            benchmark=[pb.Benchmark(uri=uri, program=pb.File(contents=_as_bytes(program)))])
        self._typed_call("AddBenchmark", request, pb.AddBenchmarkReply, timeout)

    def send_session_parameter(self, session_id: int, key: str, value: object,
                               timeout: Optional[float] = None) -> str:
        """SendSessionParameter with one key/value; returns the server's reply string (one:
        `send_session_parameter_replies` takes keys that answer with several)."""
        replies = self.send_session_parameter_replies(session_id, key, value, timeout)
        if len(replies) != 1:
            raise errors.ServiceError(grpc.StatusCode.INTERNAL,
                                      f"Expected one reply to {key}, got {len(replies)}",
                                      "SendSessionParameter")
        return replies[0]

    def send_session_parameter_replies(self, session_id: int, key: str, value: object,
                                       timeout: Optional[float] = None) -> List[str]:
        """SendSessionParameter with one key/value; every reply string the server sent for it
        (`looptool.remeasure` answers with two)."""
        request = pb.SendSessionParameterRequest(
            session_id=session_id, parameter=[pb.SessionParameter(key=key, value=str(value))])
        reply = self._typed_call("SendSessionParameter", request,
                                 pb.SendSessionParameterReply, timeout)
        return [str(r) for r in reply.reply]

    # --- datasets -------------------------------------------------------------------------------

    def datasets(self, timeout: Optional[float] = None) -> Dict[str, int]:
        """The server's datasets and their sizes, {name: number of benchmarks}, in the server's
        order (key "looptool.datasets", lines "<name> <size> ..."; fetched once)."""
        if self._datasets is None:
            text = self.send_session_parameter(0, "looptool.datasets", "", timeout)
            datasets: Dict[str, int] = {}
            for line in text.splitlines():
                fields = line.split(maxsplit=2)  # what follows the size is not read here
                if not fields:
                    continue
                if len(fields) < 2 or not fields[1].isdigit():
                    raise errors.ServiceError(
                        grpc.StatusCode.INTERNAL, f"looptool.datasets: expected lines "
                        f"'<name> <size>', got {line!r}", "SendSessionParameter")
                datasets[fields[0]] = int(fields[1])
            self._datasets = datasets
        return dict(self._datasets)

    def dataset_benchmarks(self, dataset: str, split: str = "all",
                           timeout: Optional[float] = None) -> List[str]:
        """The benchmark URIs of `dataset` ("mm64_256_16_range-v0") in the dataset's order:
        all of them, or its "train" or "test" split (key "looptool.dataset_benchmarks"; fetched
        once per dataset and split). ValueError for a malformed name or split; the server
        answers an unknown dataset with an error (ServiceError)."""
        if not isinstance(dataset, str) or not dataset or any(
                c.isspace() or c == ":" for c in dataset):
            raise ValueError(f"dataset must be a dataset's name (no spaces or ':'), got "
                             f"{dataset!r}")
        if split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
        key = (dataset, split)
        if key not in self._benchmarks:
            text = self.send_session_parameter(0, "looptool.dataset_benchmarks",
                                               f"{dataset}:{split}", timeout)
            self._benchmarks[key] = [line for line in text.splitlines() if line]
        return list(self._benchmarks[key])


def _as_bytes(program: Program) -> bytes:
    return program.encode("utf-8") if isinstance(program, str) else bytes(program)

