"""The base class of spaces."""
from typing import Optional

import numpy as np


class Space:
    """A set of values with a shape and dtype, that can be sampled and tested for membership.

    Subclasses that do not call this constructor (CompilerGym's Scalar and Sequence) still
    work: the random generator is created on first use.
    """

    def __init__(self, shape=None, dtype=None, seed: Optional[int] = None):
        self._shape = None if shape is None else tuple(shape)
        self.dtype = None if dtype is None else np.dtype(dtype)
        self._np_random = None
        if seed is not None:
            self.seed(seed)

    @property
    def shape(self):
        return self._shape

    @property
    def np_random(self) -> np.random.RandomState:
        if getattr(self, "_np_random", None) is None:
            self.seed()
        return self._np_random

    def seed(self, seed: Optional[int] = None):
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1)[0])
        self._np_random = np.random.RandomState(seed)
        return [seed]

    def sample(self):
        raise NotImplementedError

    def contains(self, x) -> bool:
        raise NotImplementedError

    def __contains__(self, x) -> bool:
        return self.contains(x)

    def to_jsonable(self, sample_n):
        return sample_n

    def from_jsonable(self, sample_n):
        return sample_n
