"""A CompilerGym service in front of a real server, for tests: forwards every call (with the
caller's metadata), records each (method, request), and fails chosen calls with UNAVAILABLE.

    proxy = grpc_proxy.Proxy(server.address)      # listens on proxy.address
    proxy.fail_before["StartSession"] = 1         # the next one fails, never forwarded
    proxy.fail_after["Step"] = 1                  # the next one is forwarded, then fails
    proxy.replies[("looptool.datasets", "")] = "mm-v0 3\n"   # SendSessionParameter answered here
    proxy.calls["Step"], proxy.requests            # what the clients sent
    proxy.close()

`fail_after` is a connection that broke after the server ran the call: the server did the work,
the client hears UNAVAILABLE.
"""

import collections
import threading
from concurrent import futures

import grpc

from looptool._proto import compiler_gym_service_pb2 as pb
from looptool._proto import compiler_gym_service_pb2_grpc as pb_grpc

METHODS = ("GetVersion", "GetSpaces", "StartSession", "ForkSession", "EndSession", "Step",
           "AddBenchmark", "SendSessionParameter")


class _Servicer(pb_grpc.CompilerGymServiceServicer):

    def __init__(self, proxy):
        self._proxy = proxy

    def __getattribute__(self, name):
        if name in METHODS:
            proxy = object.__getattribute__(self, "_proxy")
            return lambda request, context: proxy._forward(name, request, context)
        return super().__getattribute__(name)


class Proxy:

    def __init__(self, backend_address):
        self._channel = grpc.insecure_channel(backend_address)
        self._backend = pb_grpc.CompilerGymServiceStub(self._channel)
        self._lock = threading.Lock()
        self.calls = collections.Counter()
        self.fail_before = collections.Counter()
        self.fail_after = collections.Counter()
        self.replies = {}
        self.requests = []
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_CompilerGymServiceServicer_to_server(_Servicer(self), self._server)
        self.address = f"127.0.0.1:{self._server.add_insecure_port('127.0.0.1:0')}"
        self._server.start()

    def reset(self):
        """Forgets the calls and the faults and replies still to come."""
        with self._lock:
            for record in (self.calls, self.fail_before, self.fail_after, self.replies):
                record.clear()
            del self.requests[:]

    def close(self):
        self._server.stop(None)
        self._channel.close()

    def _forward(self, method, request, context):
        with self._lock:
            self.calls[method] += 1
            self.requests.append((method, request))
            before = self.fail_before[method] > 0
            after = not before and self.fail_after[method] > 0
            self.fail_before[method] -= before
            self.fail_after[method] -= after
        if before:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"injected before {method}")
        if method == "SendSessionParameter" and len(request.parameter) == 1:
            p = request.parameter[0]
            if (p.key, p.value) in self.replies:
                return pb.SendSessionParameterReply(reply=[self.replies[(p.key, p.value)]])
        try:
            reply = getattr(self._backend, method)(
                request, timeout=60, metadata=context.invocation_metadata())
        except grpc.RpcError as e:
            context.abort(e.code(), e.details())
        if after:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"injected after {method}")
        return reply
