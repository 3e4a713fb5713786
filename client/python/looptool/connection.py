"""A connection to a LoopTool (or any CompilerGym-protocol) service: channel, stub, deadlines,
retries and error mapping.

`Connection(address)` opens a gRPC channel to "host:port" (TLS when `tls_root_certificates` is
given; every call carries a random client id, and `auth_token` when given) with the channel options
CompilerGym's own client uses (unlimited message sizes, 512 KiB metadata, no HTTP proxy, no
SO_REUSEPORT). Every RPC gets a deadline (`timeout` seconds, per call overridable). A call that
fails with UNAVAILABLE (server not up yet, restarted, connection dropped) is retried on a new
channel after exponential backoff (`backoff` seconds, times `backoff_multiplier` each time,
`retries` times). A new channel, because one that has failed to connect waits out gRPC's own
reconnect backoff (1 s, growing to minutes) and fails every call meanwhile: with grpcio 1.51 a
restarted server was reached only 7 s later on the old channel, 0.3 s later on a new one. Other
failures are raised as `ServiceError`s
(`SessionNotFound` for NOT_FOUND "Session not found: ...").

Methods named after the RPCs (`start_session`, `step`, ...) build the request messages so that
callers deal in plain values; `call(method, request)` sends any request as is.

A connection may be shared by several environments (a `fork()` shares its parent's);
`acquire()` / `release()` count the users and the last release closes the channel.
"""

import os
import threading
import time

import grpc

from looptool import convert
from looptool import errors
from looptool import spaces as spaces_lib
from proto import compiler_gym_service_pb2 as pb
from proto import compiler_gym_service_pb2_grpc as pb_grpc

DEFAULT_TIMEOUT = 300.0  # seconds per call, as CompilerGym

CHANNEL_OPTIONS = (
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_metadata_size", 512 * 1024),
    ("grpc.enable_http_proxy", 0),
    ("grpc.so_reuseport", 0),
    # A channel of its own connections, so that a new channel (see reconnect()) connects at
    # once instead of sharing the failed one's backoff through the global subchannel pool.
    ("grpc.use_local_subchannel_pool", 1),
)


class Connection:
    """A channel and stub to one service.

    Args:
      address: "host:port".
      timeout: default deadline of each call, in seconds (None: no deadline).
      retries: how many times a call that fails with UNAVAILABLE is sent again.
      backoff: seconds before the first retry; multiplied by `backoff_multiplier` each time.
      auth_token: the server's shared token (sent as "authorization: Bearer <token>").
      tls_root_certificates: PEM bytes of the roots to trust; connects over TLS when given.
      tls_server_name: the name the server's certificate carries (default: the host).
    """

    def __init__(self, address, timeout=DEFAULT_TIMEOUT, retries=5, backoff=0.1,
                 backoff_multiplier=1.5, auth_token=None, tls_root_certificates=None,
                 tls_server_name=None):
        self.address = address
        self._tls_root_certificates = tls_root_certificates
        self._tls_server_name = tls_server_name
        # The server keeps this client's added benchmarks under this id, across reconnects.
        self._metadata = [("looptool-client-id", os.urandom(16).hex())]
        if auth_token:
            self._metadata.append(("authorization", f"Bearer {auth_token}"))
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.backoff_multiplier = backoff_multiplier
        self._lock = threading.Lock()
        self._channel = self._new_channel()
        self.stub = pb_grpc.CompilerGymServiceStub(self._channel)
        self._old_channels = []  # replaced by reconnect(); closed by close()
        self._users = 1
        self._spaces = None
        self.closed = False

    # --- lifetime -------------------------------------------------------------------------------

    def acquire(self):
        """Registers one more user; each must `release()`. Returns self."""
        with self._lock:
            if self.closed:
                raise RuntimeError(f"Connection to {self.address} is closed")
            self._users += 1
        return self

    def release(self):
        """Drops one user; the last one closes the channel."""
        with self._lock:
            self._users -= 1
            last = self._users <= 0
        if last:
            self.close()

    def close(self):
        """Closes the channel now (idempotent). Calls after this fail."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        for channel in [self._channel, *self._old_channels]:
            channel.close()

    def reconnect(self, failed_stub=None):
        """Replaces the channel with a new one. With `failed_stub`, only if that is still the
        current stub (several threads may see the same failure; one new channel is enough).
        The old channel stays open until close(), so calls still running on it are not cut."""
        with self._lock:
            if self.closed or (failed_stub is not None and failed_stub is not self.stub):
                return
            self._old_channels.append(self._channel)
            self._channel = self._new_channel()
            self.stub = pb_grpc.CompilerGymServiceStub(self._channel)

    def _new_channel(self):
        if self._tls_root_certificates is None:
            return grpc.insecure_channel(self.address, options=CHANNEL_OPTIONS)
        options = CHANNEL_OPTIONS
        if self._tls_server_name:
            options = options + (("grpc.ssl_target_name_override", self._tls_server_name),)
        credentials = grpc.ssl_channel_credentials(root_certificates=self._tls_root_certificates)
        return grpc.secure_channel(self.address, credentials, options=options)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self.closed else "open"
        return f"Connection({self.address!r}, {state})"

    # --- calls ----------------------------------------------------------------------------------

    def call(self, method, request, timeout=None):
        """Sends `request` to RPC `method` ("Step", ...) and returns the reply.

        `timeout` overrides the connection's default deadline for this call. UNAVAILABLE is
        retried; any other failure raises the matching `errors.ServiceError`.
        """
        if self.closed:
            raise RuntimeError(f"Connection to {self.address} is closed")
        deadline = self.timeout if timeout is None else timeout
        delay = self.backoff
        for attempt in range(self.retries + 1):
            stub = self.stub
            try:
                return getattr(stub, method)(request, timeout=deadline, metadata=self._metadata)
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.UNAVAILABLE and attempt < self.retries:
                    time.sleep(delay)
                    delay *= self.backoff_multiplier
                    self.reconnect(stub)
                    continue
                raise errors.from_rpc_error(e, method) from None
        raise AssertionError("unreachable")

    def get_version(self, timeout=None):
        """The GetVersion reply (service_version, compiler_version)."""
        return self.call("GetVersion", pb.GetVersionRequest(), timeout)

    def spaces(self, timeout=None):
        """The service's spaces (`spaces.Spaces`), fetched once: GetSpaces is constant for the
        lifetime of a server process."""
        if self._spaces is None:
            self._spaces = spaces_lib.Spaces(self.call("GetSpaces", pb.GetSpacesRequest(),
                                                       timeout))
        return self._spaces

    def start_session(self, benchmark, action_space=0, observation_spaces=(), program=None,
                      timeout=None):
        """StartSession on benchmark URI `benchmark` (with its program text when given).
        Returns the reply (session_id, observation)."""
        request = pb.StartSessionRequest(
            benchmark=pb.Benchmark(uri=benchmark), action_space=action_space,
            observation_space=list(observation_spaces))
        if program is not None:
            request.benchmark.program.contents = _as_bytes(program)
        return self.call("StartSession", request, timeout)

    def step(self, session_id, actions=(), observation_spaces=(), timeout=None):
        """Step: applies `actions` (indices or names) in order, then observes. Returns the reply."""
        request = pb.StepRequest(session_id=session_id,
                                 action=[convert.action_to_event(a) for a in actions],
                                 observation_space=list(observation_spaces))
        return self.call("Step", request, timeout)

    def fork_session(self, session_id, timeout=None):
        """ForkSession; returns the new session's id."""
        return self.call("ForkSession", pb.ForkSessionRequest(session_id=session_id),
                         timeout).session_id

    def end_session(self, session_id, timeout=None):
        """EndSession; returns how many sessions the server still has."""
        return self.call("EndSession", pb.EndSessionRequest(session_id=session_id),
                         timeout).remaining_sessions

    def add_benchmark(self, uri, program, timeout=None):
        """AddBenchmark: registers program text `program` under `uri`."""
        request = pb.AddBenchmarkRequest(
            benchmark=[pb.Benchmark(uri=uri, program=pb.File(contents=_as_bytes(program)))])
        self.call("AddBenchmark", request, timeout)

    def send_session_parameter(self, session_id, key, value, timeout=None):
        """SendSessionParameter with one key/value; returns the server's reply string."""
        request = pb.SendSessionParameterRequest(
            session_id=session_id, parameter=[pb.SessionParameter(key=key, value=str(value))])
        reply = self.call("SendSessionParameter", request, timeout)
        if len(reply.reply) != 1:
            raise errors.ServiceError(grpc.StatusCode.INTERNAL,
                                      f"Expected one reply, got {len(reply.reply)}",
                                      "SendSessionParameter")
        return reply.reply[0]


def _as_bytes(program):
    return program.encode("utf-8") if isinstance(program, str) else bytes(program)
