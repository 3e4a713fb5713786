"""The benchmarks RL trains and evaluates on, as the service lists them.

The service is the one source of the lists: its datasets and their train/test splits come from
`Connection.dataset_benchmarks()` (mm64_256_16_range-v0 is LoopTune's 2197 matmuls with a fixed
80/20 split), and the shapes off the dataset's grid, which training never sees, are its
`matmul_offgrid-v0` dataset (12 matmuls mmM_N_K, odd, prime and rectangular sizes). Every function
takes the service as a `Connection` or an address "host:port" (then it opens a connection for the
call).

A benchmark is a `Benchmark(uri, program)`: `program` is None for the service's own benchmarks
and the program text for one the service is to add on StartSession.
"""

import contextlib
import dataclasses
from typing import Iterator, List, Optional, Union

from looptool.connection import Connection

DATASET = "mm64_256_16_range-v0"
OFFGRID_DATASET = "matmul_offgrid-v0"
SPLITS = ("train", "test")

Service = Union[Connection, str]
"""A Connection, or the address "host:port" of a service."""


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """A benchmark URI and, for one the service does not have, its program text."""
    uri: str
    program: Optional[str] = None

    @property
    def name(self) -> str:
        """The last part of the URI: "mm112_208_256"."""
        return self.uri.rsplit("/", 1)[-1]


@contextlib.contextmanager
def _connected(service: Service) -> Iterator[Connection]:
    if isinstance(service, Connection):
        yield service
        return
    if not isinstance(service, str):
        raise TypeError(f"service must be a Connection or an address 'host:port', got "
                        f"{type(service).__name__}")
    with Connection(service) as connection:
        yield connection


def split(service: Service, which: str, dataset: str = DATASET) -> List[Benchmark]:
    """"train" or "test": the split's benchmarks, in the dataset's order."""
    if which not in SPLITS:
        raise ValueError(f"split must be 'train' or 'test', got {which!r}")
    with _connected(service) as connection:
        return [Benchmark(uri) for uri in connection.dataset_benchmarks(dataset, which)]


def test_benchmarks(service: Service, count: int = 25, dataset: str = DATASET) -> List[Benchmark]:
    """`count` test-split benchmarks spread evenly over the split (tune_bench's choice)."""
    if count < 0:
        raise ValueError(f"count must be at least 0, got {count}")
    test = split(service, "test", dataset)
    return [test[i * len(test) // count] for i in range(min(count, len(test)))]


def offgrid_benchmarks(service: Service, count: Optional[int] = None) -> List[Benchmark]:
    """Shapes training never sees: the first `count` (default: all) of matmul_offgrid-v0."""
    if count is not None and count < 0:
        raise ValueError(f"count must be at least 0, got {count}")
    with _connected(service) as connection:
        uris = connection.dataset_benchmarks(OFFGRID_DATASET)
    return [Benchmark(uri) for uri in uris[:count]]


def name_of(benchmark: Benchmark) -> str:
    """The benchmark's name, the last part of its URI."""
    return benchmark.name

