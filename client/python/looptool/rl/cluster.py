"""Where RL actors run: LoopTool servers, a Dask cluster, and a pool of rollout calls in flight.

Servers: the addresses given (`--servers=HOST:PORT,...`) or `count` LocalServers started here
(one by default), each with its kernel workers pinned to its own `timing_cores` CPUs. Benchmarks are routed to a fixed server (the
FNV-1a hash of the name modulo the number of servers) so that server's schedule cache hits when
a benchmark comes back.

Dask: a LocalCluster of `actors` single-threaded worker processes by default, or the cluster of
the scheduler at `scheduler` ("tcp://HOST:8786", started with dask-scheduler / dask-worker).

`ActorPool` keeps one rollout call per actor in flight (a Dask task running
rollout.dask_run_episodes) and hands back whichever finishes. A worker killed mid-call (SIGKILL)
is restarted by its nanny and Dask reruns the task elsewhere; a call that still fails (KilledWorker,
a lost connection) costs only its episodes: it is counted in `lost` and the actor gets new work.
"""

import os
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Set, Tuple

from looptool.rl import policy_file
from looptool.rl import rollout
from looptool.rl.benchmarks import Benchmark

if TYPE_CHECKING:
    from distributed import Client, LocalCluster

    from looptool.server import LocalServer


def fnv1a64(name: str) -> int:
    """The 64-bit FNV-1a hash of a name, as datasets/split.h computes it (with its offset
    basis, 1469598103934665603): a stable spread of names over servers."""
    h = 1469598103934665603
    for byte in name.encode("utf-8"):
        h ^= byte
        h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def route(benchmark: Benchmark, servers: Sequence[str]) -> str:
    """The server a benchmark always goes to."""
    return servers[fnv1a64(benchmark.name) % len(servers)]


def default_timing_cores(count: int) -> List[int]:
    """The last `count` CPUs this process may run on (the others are left to the learner and
    actors)."""
    cpus = sorted(os.sched_getaffinity(0))
    if count < 1 or count > len(cpus):
        raise ValueError(f"timing cores must be 1..{len(cpus)}, got {count}")
    return cpus[-count:]


class Servers:
    """The servers actors use: given addresses, or one local server started (and stopped) here.

    A local server's kernel workers are pinned to the machine's last `timing_cores` CPUs; when
    CPUs are left over, this process (and so the Dask workers it starts afterwards, and the
    server's own threads) is kept off the timing CPUs, so kernels are timed on cores nothing
    else of ours uses; close() gives the calling thread its CPUs back (threads started in
    between keep the narrower set).
    """

    def __init__(self, addresses: Optional[Sequence[str]] = None, timing_cores: int = 1,
                 server_flags: Sequence[str] = (), count: int = 1) -> None:
        self.local: Optional["LocalServer"] = None   # the first (or only) local server
        self.locals: List["LocalServer"] = []
        self.timing_cores: Optional[List[int]] = None
        self._affinity: Optional[Set[int]] = None  # this process's CPUs before, restored by close()
        if addresses:
            self.addresses = list(addresses)
        else:
            from looptool.server import LocalServer
            cores = default_timing_cores(timing_cores * count)
            others = sorted(os.sched_getaffinity(0) - set(cores))
            if others:
                self._affinity = os.sched_getaffinity(0)
                os.sched_setaffinity(0, others)
            try:
                for i in range(count):  # server i: its own `timing_cores` of the cores
                    mine = cores[i * timing_cores:(i + 1) * timing_cores]
                    # A trainer killed with SIGKILL must not leave its server running.
                    self.locals.append(LocalServer(
                        flags=[f"--eval_cores={','.join(map(str, mine))}", *server_flags],
                        die_with_parent=True))
            except BaseException:
                self.close()
                raise
            self.local = self.locals[0]
            self.addresses = [s.address for s in self.locals]
            self.timing_cores = cores

    def close(self) -> None:
        try:
            for server in self.locals:
                server.close()
        finally:
            self.locals = []
            self.local = None
            if self._affinity is not None:
                os.sched_setaffinity(0, self._affinity)
                self._affinity = None

    def __enter__(self) -> "Servers":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_dask(actors: int,
               scheduler: Optional[str] = None) -> Tuple["Client", Optional["LocalCluster"]]:
    """A Dask client: to `scheduler` when given, else to a new LocalCluster of `actors` worker
    processes with one thread each."""
    from distributed import Client, LocalCluster
    if scheduler:
        return Client(scheduler), None
    cluster = LocalCluster(n_workers=actors, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=40)
    return Client(cluster), cluster


class ActorPool:
    """`size` actors, each with at most one rollout call in flight.

    Args:
      client: a distributed.Client.
      servers: server addresses; actor i's benchmarks are those routed to servers[i % len].
      size: number of actors.
      auth_token: sent by the actors with every call (servers started with --auth_token_file).
    """

    def __init__(self, client: "Client", servers: Sequence[str], size: int,
                 auth_token: Optional[str] = None) -> None:
        from distributed import as_completed
        self.client = client
        self.servers = list(servers)
        self.size = size
        self.auth_token = auth_token
        self.lost = 0            # calls that failed outright (their episodes are gone)
        self.errors = 0          # episodes dropped inside calls (service-side failures)
        self.last_errors: List[str] = []
        self._pending = as_completed()
        self._actor_of: Dict[Any, int] = {}      # future key -> actor index
        self.busy: Set[int] = set()

    def server_of(self, actor: int) -> str:
        return self.servers[actor % len(self.servers)]

    def submit(self, actor: int, benchmarks: Sequence[Benchmark], policy: policy_file.Policy,
               mode: str, epsilon: float, max_steps: int, seed: int) -> None:
        """Runs episodes on `benchmarks` (which must route to this actor's server)."""
        future = self.client.submit(rollout.dask_run_episodes, self.server_of(actor),
                                    list(benchmarks), policy, mode, epsilon, max_steps, seed,
                                    self.auth_token, pure=False, retries=2)
        self._actor_of[future.key] = actor
        self.busy.add(actor)
        self._pending.add(future)

    def has_ready(self) -> bool:
        return bool(self._pending.has_ready())

    def idle(self) -> List[int]:
        return [i for i in range(self.size) if i not in self.busy]

    def done(self, block: bool = True) -> List[Tuple[int, Optional[rollout.Rollouts]]]:
        """[(actor, Rollouts or None)] for the calls that finished (None: the call was lost).
        With block=False, returns [] when none has."""
        if not block and not self._pending.has_ready():
            return []
        if self._pending.is_empty():
            return []
        out: List[Tuple[int, Optional[rollout.Rollouts]]] = []
        for future in self._pending.next_batch(block=True):
            actor = self._actor_of.pop(future.key)
            self.busy.discard(actor)
            try:
                result = future.result()
            except Exception as e:  # KilledWorker, CommClosedError, a bug in the task
                self.lost += 1
                self.last_errors.append(f"{type(e).__name__}: {e}")
                result = None
            if result is not None and result.errors:
                self.errors += len(result.errors)
                self.last_errors.extend(msg for _, msg in result.errors)
            self.last_errors = self.last_errors[-20:]
            out.append((actor, result))
        return out

    def wait(self, timeout: float = 0.05) -> None:
        """Sleeps until a call finishes or `timeout` seconds pass."""
        end = time.monotonic() + timeout
        while not self._pending.has_ready() and time.monotonic() < end:
            time.sleep(0.002)

    def drain(self) -> None:
        """Waits for every call in flight (results dropped)."""
        while not self._pending.is_empty():
            self.done(block=True)
