"""Starting and stopping a local looptool-server process.

    with LocalServer() as server:              # runs looptool-server --port=0 --working_dir=...
        env = LoopToolEnv(server.address, benchmark=...)

The server picks a free port and, once listening, writes pid.txt and then port.txt into its working
directory (atomically); `LocalServer` waits for port.txt (at most `startup_timeout` seconds) and
fails early if the process exits first. `close()` sends SIGTERM (the server drains running calls
and exits 0), waits, and returns the exit status; a server that does not stop within
`stop_timeout` seconds is killed. The server's stdout and stderr go to
<working_dir>/server.log.

With `die_with_parent=True` the server is sent SIGTERM when the thread that started it ends
(Linux's PR_SET_PDEATHSIG), so a process killed with SIGKILL leaves no server behind; start it
from a thread that lives as long as the server should (the main thread).

The binary is the `binary` argument, else $LOOPTOOL_SERVER, else "service/looptool-server"
relative to the current directory (the runfiles root under `bazel test` / `bazel run`).
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time
import weakref
from typing import IO, TYPE_CHECKING, Any, List, Optional, Sequence

if TYPE_CHECKING:
    from looptool.connection import Connection

DEFAULT_BINARY = "service/looptool-server"
BINARY_ENV_VAR = "LOOPTOOL_SERVER"
CLI_ENV_VAR = "LOOPTOOL_CLI"


class ServerStartError(RuntimeError):
    """The server process exited, or wrote no port.txt in time."""


def default_binary() -> str:
    """$LOOPTOOL_SERVER if set, else "service/looptool-server" (relative to the cwd)."""
    return os.environ.get(BINARY_ENV_VAR) or DEFAULT_BINARY


def default_cli() -> str:
    """$LOOPTOOL_CLI, else `looptool` beside $LOOPTOOL_SERVER's bazel-bin (client/cpp/looptool),
    else "client/cpp/looptool" relative to the current directory (a Bazel runfiles root)."""
    if os.environ.get(CLI_ENV_VAR):
        return os.environ[CLI_ENV_VAR]
    server = os.environ.get(BINARY_ENV_VAR, "")
    if server:
        guess = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(server))),
                             "client", "cpp", "looptool")
        if os.path.exists(guess):
            return guess
    return os.path.abspath("client/cpp/looptool")


def _stop(process: "subprocess.Popen[bytes]", timeout: float) -> int:
    """SIGTERM, wait up to `timeout` s, then SIGKILL. Returns the exit status."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return int(process.returncode)


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent (thread) goes (PR_SET_PDEATHSIG)."""
    import ctypes
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)


def _cleanup(process: "subprocess.Popen[bytes]", log: IO[bytes], tmpdir: Optional[str]) -> None:
    """Last-resort cleanup (garbage collection, interpreter exit): never leave a server running."""
    _stop(process, 5)
    log.close()
    if tmpdir is not None:
        shutil.rmtree(tmpdir, ignore_errors=True)


class LocalServer:
    """A looptool-server child process.

    Args:
      binary: path of looptool-server (default: see `default_binary()`).
      flags: extra command-line flags, e.g. ["--timing_budget_ms=1", "--max_loops=12"].
      working_dir: where port.txt, pid.txt and server.log go; default: a fresh temporary
        directory, deleted on close.
      port: the port to listen on; 0 (default) lets the server pick a free one.
      startup_timeout: seconds to wait for port.txt.
      stop_timeout: seconds `close()` waits after SIGTERM before killing the process.

    Attributes: `address` ("127.0.0.1:PORT"), `port`, `pid`, `working_dir`, `process`,
    `returncode` (None while running).
    """

    def __init__(self, binary: Optional[str] = None, flags: Sequence[str] = (),
                 working_dir: Optional[str] = None, port: int = 0,
                 startup_timeout: float = 30.0, stop_timeout: float = 30.0,
                 die_with_parent: bool = False) -> None:
        self.binary = os.path.abspath(binary or default_binary())
        if not os.access(self.binary, os.X_OK):
            raise ServerStartError(f"looptool-server not found or not executable: {self.binary} "
                                   f"(pass binary= or set ${BINARY_ENV_VAR})")
        self._tmpdir: Optional[str] = None
        if working_dir is None:
            working_dir = self._tmpdir = tempfile.mkdtemp(prefix="looptool-server-")
        os.makedirs(working_dir, exist_ok=True)
        self.working_dir = working_dir
        self.stop_timeout = stop_timeout
        self.returncode: Optional[int] = None
        port_file = os.path.join(working_dir, "port.txt")
        if os.path.exists(port_file):
            os.remove(port_file)  # a stale one from an earlier server

        self.args: List[str] = [self.binary, f"--port={port}", f"--working_dir={working_dir}",
                                *flags]
        self._log = open(os.path.join(working_dir, "server.log"), "wb")
        self.process = subprocess.Popen(self.args, stdin=subprocess.DEVNULL,
                                        stdout=self._log, stderr=subprocess.STDOUT,
                                        preexec_fn=_die_with_parent if die_with_parent else None)
        self._finalizer = weakref.finalize(self, _cleanup, self.process, self._log, self._tmpdir)
        try:
            self.port = self._wait_for_port(port_file, startup_timeout)
        except BaseException:
            self.close()
            raise
        self.pid = self.process.pid
        self.address = f"{_connect_host(flags)}:{self.port}"

    def _wait_for_port(self, port_file: str, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerStartError(f"looptool-server exited with status "
                                       f"{self.process.returncode} before listening:\n"
                                       f"{self.log()}")
            try:
                with open(port_file) as f:
                    text = f.read().strip()
                if text:
                    return int(text)
            except FileNotFoundError:
                pass
            time.sleep(0.01)
        raise ServerStartError(f"looptool-server wrote no {port_file} in {timeout} s:\n"
                               f"{self.log()}")

    def log(self) -> str:
        """What the server has written to stdout/stderr so far."""
        if not self._log.closed:
            self._log.flush()
        try:
            with open(os.path.join(self.working_dir, "server.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def connect(self, **kwargs: Any) -> "Connection":
        """A `Connection` to this server (kwargs go to `Connection`)."""
        from looptool.connection import Connection

        return Connection(self.address, **kwargs)

    def close(self) -> int:
        """Stops the server (SIGTERM, then SIGKILL after `stop_timeout` s) and returns its exit
        status: 0 for a clean shutdown, negative for death by a signal. Idempotent."""
        if self.returncode is None:
            self.returncode = _stop(self.process, self.stop_timeout)
        self._finalizer()  # closes the log and deletes the temporary working directory
        return self.returncode

    def __enter__(self) -> "LocalServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.returncode is None else f"exited {self.returncode}"
        return f"LocalServer({getattr(self, 'address', '?')}, {state})"


def _connect_host(flags: Sequence[str]) -> str:
    """The host to connect to, from the server's --bind flag (default 127.0.0.1)."""
    bind = "127.0.0.1"
    for flag in flags:
        if flag.startswith("--bind="):
            bind = flag[len("--bind="):]
    if bind in ("0.0.0.0", ""):
        return "127.0.0.1"
    if bind in ("::", "[::]"):
        return "[::1]"
    if ":" in bind and not bind.startswith("["):
        return f"[{bind}]"  # an IPv6 address
    return bind
