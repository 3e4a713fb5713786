"""Exceptions raised by the LoopTool client.

A failed RPC becomes a `ServiceError` carrying the gRPC status code and the server's message.
Two cases get their own subclasses because callers react to them differently:

* `SessionNotFound`: NOT_FOUND whose message starts with "Session not found" (CompilerGym's
  clients key on that prefix). The server has no such session any more (it was ended, reaped
  for idleness, or the server restarted); an environment ends its episode gracefully.
* `ServiceTransportError`: the service stayed UNAVAILABLE through every retry (server down or
  unreachable).
"""

import grpc

SESSION_NOT_FOUND_PREFIX = "Session not found"


class ServiceError(Exception):
    """An RPC failed. `code` is the `grpc.StatusCode`, `details` the server's message."""

    def __init__(self, code, details, method=None):
        self.code = code
        self.details = details or ""
        self.method = method
        where = f"{method}: " if method else ""
        super().__init__(f"{where}{code.name}: {self.details}")


class SessionNotFound(ServiceError):
    """The server does not know the session id (NOT_FOUND "Session not found: <id>")."""


class ServiceTransportError(ServiceError):
    """The service stayed unreachable (UNAVAILABLE) through every retry."""


def from_rpc_error(error, method=None):
    """Maps a `grpc.RpcError` (which is also a `grpc.Call`) to the matching `ServiceError`."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else str(error)
    details = details or ""
    if code == grpc.StatusCode.NOT_FOUND and details.startswith(SESSION_NOT_FOUND_PREFIX):
        return SessionNotFound(code, details, method)
    if code == grpc.StatusCode.UNAVAILABLE:
        return ServiceTransportError(code, details, method)
    return ServiceError(code, details, method)
