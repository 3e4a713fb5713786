"""{0, 1, ..., n-1}."""
import numpy as np

from gym.spaces.space import Space


class Discrete(Space):
    def __init__(self, n: int, seed=None):
        if n < 0:
            raise ValueError("n must be non-negative")
        self.n = int(n)
        super().__init__((), np.int64, seed)

    def sample(self) -> int:
        return int(self.np_random.randint(self.n))

    def contains(self, x) -> bool:
        if isinstance(x, (int, np.integer)):
            as_int = int(x)
        elif isinstance(x, np.ndarray) and x.shape == () and x.dtype.kind in "iu":
            as_int = int(x)
        else:
            return False
        return 0 <= as_int < self.n

    def __repr__(self) -> str:
        return f"Discrete({self.n})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Discrete) and self.n == other.n
