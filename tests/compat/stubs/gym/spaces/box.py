"""A box in R^n: the Cartesian product of n intervals, each possibly unbounded."""
import numpy as np

from gym.spaces.space import Space


class Box(Space):
    def __init__(self, low, high, shape=None, dtype=np.float32, seed=None):
        dtype = np.dtype(dtype)
        if shape is not None:
            shape = tuple(shape)
        elif not np.isscalar(low):
            shape = np.asarray(low).shape
        elif not np.isscalar(high):
            shape = np.asarray(high).shape
        else:
            raise ValueError("Box needs a shape when low and high are both scalars")
        low = np.full(shape, low, dtype=float) if np.isscalar(low) else np.asarray(low)
        high = np.full(shape, high, dtype=float) if np.isscalar(high) else np.asarray(high)
        if low.shape != shape or high.shape != shape:
            raise ValueError(f"low {low.shape} / high {high.shape} do not match shape {shape}")
        self.bounded_below = -np.inf < low
        self.bounded_above = np.inf > high
        self.low = low.astype(dtype)
        self.high = high.astype(dtype)
        super().__init__(shape, dtype, seed)

    def is_bounded(self, manner: str = "both") -> bool:
        below = bool(np.all(self.bounded_below))
        above = bool(np.all(self.bounded_above))
        return {"both": below and above, "below": below, "above": above}[manner]

    def sample(self) -> np.ndarray:
        high = self.high if self.dtype.kind == "f" else self.high.astype("int64") + 1
        sample = np.empty(self.shape)
        unbounded = ~self.bounded_below & ~self.bounded_above
        upp_bounded = ~self.bounded_below & self.bounded_above
        low_bounded = self.bounded_below & ~self.bounded_above
        bounded = self.bounded_below & self.bounded_above
        rng = self.np_random
        sample[unbounded] = rng.normal(size=unbounded[unbounded].shape)
        sample[low_bounded] = rng.exponential(size=low_bounded[low_bounded].shape) + self.low[
            low_bounded
        ]
        sample[upp_bounded] = -rng.exponential(size=upp_bounded[upp_bounded].shape) + high[
            upp_bounded
        ]
        sample[bounded] = rng.uniform(
            low=self.low[bounded], high=high[bounded], size=bounded[bounded].shape
        )
        if self.dtype.kind == "i":
            sample = np.floor(sample)
        return sample.astype(self.dtype)

    def contains(self, x) -> bool:
        if not isinstance(x, np.ndarray):
            x = np.asarray(x, dtype=self.dtype)
        return bool(
            np.can_cast(x.dtype, self.dtype)
            and x.shape == self.shape
            and np.all(x >= self.low)
            and np.all(x <= self.high)
        )

    def to_jsonable(self, sample_n):
        return np.array(sample_n).tolist()

    def from_jsonable(self, sample_n):
        return [np.asarray(sample) for sample in sample_n]

    def __repr__(self) -> str:
        return f"Box({self.low.min()}, {self.high.max()}, {self.shape}, {self.dtype})"

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, Box)
            and self.shape == other.shape
            and np.allclose(self.low, other.low)
            and np.allclose(self.high, other.high)
        )
