"""Exceptions raised by the LoopTool client.

A failed RPC becomes a `ServiceError` carrying the gRPC status code and the server's message.
Two cases get their own subclasses because callers react to them differently:

* `SessionNotFound`: NOT_FOUND whose message starts with "Session not found" (CompilerGym's
  clients key on that prefix). The server has no such session any more (it was ended, reaped
  for idleness, or the server restarted); an environment ends its episode gracefully.
* `ServiceTransportError`: UNAVAILABLE: no server answered (down, unreachable, or the connection
  broke during the call), after the retries the channel's service config allows for the method.
"""

from typing import Optional

import grpc

SESSION_NOT_FOUND_PREFIX = "Session not found"


class ServiceError(Exception):
    """An RPC failed. `code` is the `grpc.StatusCode`, `details` the server's message."""

    def __init__(self, code: grpc.StatusCode, details: Optional[str],
                 method: Optional[str] = None) -> None:
        self.code = code
        self.details = details or ""
        self.method = method
        where = f"{method}: " if method else ""
        super().__init__(f"{where}{code.name}: {self.details}")


class SessionNotFound(ServiceError):
    """The server does not know the session id (NOT_FOUND "Session not found: <id>")."""


class ServiceTransportError(ServiceError):
    """The service was unreachable (UNAVAILABLE), after any retries the method allows."""


def from_rpc_error(error: grpc.RpcError, method: Optional[str] = None) -> ServiceError:
    """Maps a `grpc.RpcError` (which is also a `grpc.Call`) to the matching `ServiceError`."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else str(error)
    details = details or ""
    if code == grpc.StatusCode.NOT_FOUND and details.startswith(SESSION_NOT_FOUND_PREFIX):
        return SessionNotFound(code, details, method)
    if code == grpc.StatusCode.UNAVAILABLE:
        return ServiceTransportError(code, details, method)
    return ServiceError(code, details, method)
