"""Gymnasium-style spaces, with or without the `gymnasium` package.

This is the one place that imports gymnasium (optional: Debian 12 does not ship it).

* With gymnasium importable, `Discrete`, `Box`, `MultiBinary` and `Text` *are*
  `gymnasium.spaces.Discrete`, `.Box`, `.MultiBinary` and `.Text`, and `NamedDiscreteSpace`
  subclasses `gymnasium.spaces.Discrete`, so gymnasium's own checks and wrappers accept them.
* Without it, they are the plain classes below, with the same API: `sample(mask=None)`,
  `contains(x)` (and `x in space`), `seed(seed)`, `np_random`, `shape`, `dtype`; `n` and
  `start` for Discrete; `low`, `high`, `bounded_below`/`bounded_above`, `is_bounded()` for Box;
  `min_length`, `max_length`, `character_set` for Text. Seeding and sampling draw from the same
  numpy Generator calls as gymnasium's (PCG64 over a SeedSequence), so a seed gives the same
  samples either way.

`NamedDiscreteSpace` is LoopTool's action space as a Discrete: also `names`, `name`,
`index(name)`, `action_name(i)`; its `sample(mask=...)` takes the `action_mask` observation as it
comes (bool) as well as gymnasium's int8 masks. `observation_space_for(spec, num_actions)` maps a
service observation space (`spaces.ObservationSpaceSpec`) to one of these: tensors -> Box with the
declared low/high/shape/dtype, scalars -> Box of shape (), strings -> Text, `action_mask` ->
MultiBinary(num_actions). Graph observations have no Gymnasium space (ValueError).
"""

import operator
import string
from typing import TYPE_CHECKING, Any, FrozenSet, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from looptool import spaces as spaces_lib

try:
    import gymnasium
except ImportError:  # Debian 12 ships no gymnasium: the plain classes below stand in
    gymnasium = None

HAVE_GYMNASIUM = gymnasium is not None

# Text observations (loop_tree, ir) are printable ASCII; their length has no declared bound.
TEXT_CHARSET = string.printable
TEXT_MAX_LENGTH = 1 << 20


Seed = Union[int, np.integer[Any], None]
Shape = Tuple[int, ...]


def np_random(seed: Seed = None) -> Tuple[np.random.Generator, Any]:
    """(Generator, entropy) as gymnasium.utils.seeding.np_random makes them."""
    if seed is not None and not (isinstance(seed, (int, np.integer)) and seed >= 0):
        raise ValueError(f"Seed must be a non-negative integer or None, got {seed!r}")
    seed_seq = np.random.SeedSequence(seed)
    return np.random.Generator(np.random.PCG64(seed_seq)), seed_seq.entropy


# --- the plain classes (used when gymnasium is not importable) -----------------------------------

class PlainSpace:
    """Base of the plain spaces: shape, dtype and a lazily seeded numpy Generator."""

    def __init__(self, shape: Optional[Sequence[int]], dtype: "npt.DTypeLike",
                 seed: Union[Seed, np.random.Generator] = None) -> None:
        self._shape = None if shape is None else tuple(shape)
        self.dtype: np.dtype[Any] = np.dtype(dtype)
        self._np_random: Optional[np.random.Generator] = None
        if isinstance(seed, np.random.Generator):
            self._np_random = seed
        elif seed is not None:
            self.seed(seed)

    @property
    def shape(self) -> Optional[Shape]:
        return self._shape

    @property
    def np_random(self) -> np.random.Generator:
        if self._np_random is None:
            self.seed()
        assert self._np_random is not None
        return self._np_random

    def seed(self, seed: Seed = None) -> List[Any]:
        """Seeds the space's Generator; returns [the seed's entropy]."""
        self._np_random, entropy = np_random(seed)
        return [entropy]

    def sample(self, mask: Any = None) -> Any:
        raise NotImplementedError

    def contains(self, x: Any) -> bool:
        raise NotImplementedError

    def __contains__(self, x: Any) -> bool:
        return self.contains(x)


def _int8_mask(mask: Any, shape: Sequence[int],
               allowed: Tuple[int, ...] = (0, 1)) -> "npt.NDArray[np.int8]":
    if not isinstance(mask, np.ndarray) or mask.dtype != np.int8:
        raise ValueError(f"The sample mask must be an np.int8 array, got {type(mask).__name__}"
                         f"{'' if not isinstance(mask, np.ndarray) else ' ' + str(mask.dtype)}")
    if mask.shape != tuple(shape):
        raise ValueError(f"The sample mask must have shape {tuple(shape)}, got {mask.shape}")
    if not np.all(np.isin(mask, allowed)):
        raise ValueError(f"The sample mask's values must be in {allowed}")
    return mask


class PlainDiscrete(PlainSpace):
    """{start, ..., start + n - 1}."""

    def __init__(self, n: Union[int, np.integer[Any]], seed: Seed = None,
                 start: Union[int, np.integer[Any]] = 0) -> None:
        if not isinstance(n, (int, np.integer)) or n <= 0:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        self.n = np.int64(n)
        self.start = np.int64(start)
        super().__init__((), np.int64, seed)

    def sample(self, mask: Optional["npt.NDArray[np.int8]"] = None) -> np.int64:
        """Uniform; with `mask` (int8, shape (n,), 1 = allowed) among the allowed ones, or
        `start` when none is."""
        if mask is not None:
            valid = _int8_mask(mask, (int(self.n),)) == 1
            if not np.any(valid):
                return self.start
            return self.start + np.int64(self.np_random.choice(np.where(valid)[0]))
        return np.int64(self.start + self.np_random.integers(self.n))

    def contains(self, x: Any) -> bool:
        if isinstance(x, int):
            x = np.int64(x)
        elif not (isinstance(x, (np.generic, np.ndarray)) and np.issubdtype(x.dtype, np.integer)
                  and x.shape == ()):
            return False
        return bool(self.start <= x < self.start + self.n)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlainDiscrete) and (self.n, self.start) == (other.n, other.start)

    def __hash__(self) -> int:
        return hash((int(self.n), int(self.start)))

    def __repr__(self) -> str:
        return f"Discrete({self.n})" if self.start == 0 else \
            f"Discrete({self.n}, start={self.start})"


def _bound(value: Any, dtype: "npt.DTypeLike", shape: Shape, sign: int) -> "npt.NDArray[Any]":
    """A bound broadcast to `shape`, infinities made representable in `dtype` as gymnasium
    does (integer dtypes: the type's range, less 2)."""
    array: "npt.NDArray[Any]" = np.array(
        value, dtype=np.float64 if np.dtype(dtype).kind == "f" else None)
    array = np.broadcast_to(array, shape).copy()
    if np.dtype(dtype).kind in "iu" and array.dtype.kind == "f" and np.any(np.isinf(array)):
        info = np.iinfo(dtype)
        array[np.isinf(array)] = info.max - 2 if sign > 0 else info.min + 2
    return array


class PlainBox(PlainSpace):
    """The product of closed intervals [low[i], high[i]] (either side may be infinite)."""

    def __init__(self, low: Any, high: Any, shape: Optional[Sequence[int]] = None,
                 dtype: "npt.DTypeLike" = np.float32, seed: Seed = None) -> None:
        if dtype is None:
            raise ValueError("Box dtype must be given")
        box_dtype = np.dtype(dtype)
        if box_dtype.kind not in "fiu":
            raise ValueError(f"Box dtype must be a float or integer type, got {box_dtype}")
        if shape is None:
            shape = np.shape(low) if np.ndim(low) else np.shape(high) if np.ndim(high) else (1,)
        box_shape = tuple(int(d) for d in shape)
        low_f = np.broadcast_to(np.asarray(low, dtype=np.float64), box_shape)
        high_f = np.broadcast_to(np.asarray(high, dtype=np.float64), box_shape)
        self.bounded_below = -np.inf < low_f
        self.bounded_above = np.inf > high_f
        self.low = _bound(low, box_dtype, box_shape, -1).astype(box_dtype)
        self.high = _bound(high, box_dtype, box_shape, +1).astype(box_dtype)
        super().__init__(box_shape, box_dtype, seed)

    @property
    def shape(self) -> Shape:
        assert self._shape is not None  # a box always has one
        return self._shape

    def is_bounded(self, manner: str = "both") -> bool:
        below, above = bool(np.all(self.bounded_below)), bool(np.all(self.bounded_above))
        if manner == "both":
            return below and above
        if manner == "below":
            return below
        if manner == "above":
            return above
        raise ValueError(f"manner is not in {{'below', 'above', 'both'}}, got {manner!r}")

    def sample(self, mask: None = None) -> "npt.NDArray[Any]":
        """Uniform on bounded coordinates, (shifted) exponential on half-bounded ones, normal on
        unbounded ones, as gymnasium's Box samples."""
        if mask is not None:
            raise ValueError("Box.sample takes no mask")
        high = self.high if self.dtype.kind == "f" else self.high.astype(np.int64) + 1
        sample = np.empty(self.shape)
        unbounded = ~self.bounded_below & ~self.bounded_above
        upp_bounded = ~self.bounded_below & self.bounded_above
        low_bounded = self.bounded_below & ~self.bounded_above
        bounded = self.bounded_below & self.bounded_above
        sample[unbounded] = self.np_random.normal(size=unbounded[unbounded].shape)
        sample[low_bounded] = (self.np_random.exponential(size=low_bounded[low_bounded].shape)
                               + self.low[low_bounded])
        sample[upp_bounded] = (-self.np_random.exponential(size=upp_bounded[upp_bounded].shape)
                               + self.high[upp_bounded])
        sample[bounded] = self.np_random.uniform(low=self.low[bounded], high=high[bounded],
                                                 size=bounded[bounded].shape)
        if self.dtype.kind in "iu":
            sample = np.floor(sample)
        return sample.astype(self.dtype)

    def contains(self, x: Any) -> bool:
        if not isinstance(x, np.ndarray):
            try:
                x = np.asarray(x, dtype=self.dtype)
            except (ValueError, TypeError):
                return False
        return bool(np.can_cast(x.dtype, self.dtype) and x.shape == self.shape
                    and np.all(x >= self.low) and np.all(x <= self.high))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, PlainBox) and self.shape == other.shape
                and bool(np.allclose(self.low, other.low))
                and bool(np.allclose(self.high, other.high)))

    __hash__ = PlainSpace.__hash__

    def __repr__(self) -> str:
        def short(a: "npt.NDArray[Any]") -> str:
            return str(a.min()) if a.size and a.min() == a.max() else str(a)
        return f"Box({short(self.low)}, {short(self.high)}, {self.shape}, {self.dtype})"


class PlainMultiBinary(PlainSpace):
    """Arrays of 0s and 1s of shape (n,) (or n, a tuple); dtype int8."""

    def __init__(self, n: Union[int, np.integer[Any], Sequence[int]], seed: Seed = None) -> None:
        shape = (int(n),) if isinstance(n, (int, np.integer)) else tuple(int(i) for i in n)
        if not all(d > 0 for d in shape):
            raise ValueError(f"n (counts) have to be positive, got {n!r}")
        self.n: Union[int, Shape] = shape[0] if isinstance(n, (int, np.integer)) else shape
        super().__init__(shape, np.int8, seed)

    @property
    def shape(self) -> Shape:
        assert self._shape is not None
        return self._shape

    def sample(self, mask: Optional["npt.NDArray[np.int8]"] = None) -> "npt.NDArray[np.int8]":
        """Fair coin tosses; `mask` (int8, the space's shape): 0 or 1 fixes an element, 2 tosses."""
        if mask is not None:
            mask = _int8_mask(mask, self.shape, allowed=(0, 1, 2))
            return np.where(mask == 2, self.np_random.integers(0, 2, size=self.shape,
                                                               dtype=np.int8),
                            mask.astype(np.int8))
        return self.np_random.integers(0, 2, size=self.shape, dtype=np.int8)

    def contains(self, x: Any) -> bool:
        if isinstance(x, (list, tuple)):
            x = np.array(x)
        return bool(isinstance(x, np.ndarray) and x.shape == self.shape
                    and np.all((x == 0) | (x == 1)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlainMultiBinary) and self.shape == other.shape

    def __hash__(self) -> int:
        return hash(self.shape)

    def __repr__(self) -> str:
        return f"MultiBinary({self.n})"


class PlainText(PlainSpace):
    """Strings of min_length..max_length characters from `charset`."""

    def __init__(self, max_length: int, *, min_length: int = 1,
                 charset: Union[str, Sequence[str]] = TEXT_CHARSET, seed: Seed = None) -> None:
        if not 0 <= int(min_length) <= int(max_length):
            raise ValueError(f"Need 0 <= min_length <= max_length, got {min_length}, "
                             f"{max_length}")
        self.min_length, self.max_length = int(min_length), int(max_length)
        self._char_set = frozenset(charset)
        self._char_list = tuple(charset)
        super().__init__(None, str, seed)

    @property
    def character_set(self) -> FrozenSet[str]:
        return self._char_set

    @property
    def character_list(self) -> Tuple[str, ...]:
        return self._char_list

    @property
    def characters(self) -> str:
        return "".join(sorted(self._char_set))

    def sample(self, mask: Optional[Tuple[Optional[int], Any]] = None) -> str:
        """A random length (or `mask[0]`), then characters drawn uniformly from the charset."""
        length = mask[0] if mask is not None else None
        if mask is not None and mask[1] is not None:
            raise ValueError("Character masks are not supported without gymnasium")
        if length is None:
            length = self.np_random.integers(self.min_length, self.max_length + 1)
        elif not self.min_length <= length <= self.max_length:
            raise ValueError(f"Length {length} is outside {self.min_length}..{self.max_length}")
        return "".join(self.np_random.choice(self._char_list, size=length))

    def contains(self, x: Any) -> bool:
        return (isinstance(x, str) and self.min_length <= len(x) <= self.max_length
                and all(c in self._char_set for c in x))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, PlainText) and self.min_length == other.min_length
                and self.max_length == other.max_length
                and self.character_set == other.character_set)

    def __hash__(self) -> int:
        return hash((self.min_length, self.max_length, self._char_set))

    def __repr__(self) -> str:
        return f"Text({self.min_length}, {self.max_length})"


# --- the classes in use -----------------------------------------------------------------------

if TYPE_CHECKING:  # checked against the plain classes, gymnasium's API
    Discrete = PlainDiscrete
    Box = PlainBox
    MultiBinary = PlainMultiBinary
    Text = PlainText
elif gymnasium is not None:
    Discrete = gymnasium.spaces.Discrete
    Box = gymnasium.spaces.Box
    MultiBinary = gymnasium.spaces.MultiBinary
    Text = gymnasium.spaces.Text
else:
    Discrete, Box, MultiBinary, Text = PlainDiscrete, PlainBox, PlainMultiBinary, PlainText


class NamedDiscreteSpace(Discrete):
    """A Discrete action space whose actions have names (LoopTool's `loop_tool`: 17 actions).

    `names[i]` is action i's name, `index(name)` its index, `action_name(i)` the name of index
    i, `name` the space's name. `contains(x)` is Discrete's: integers in range (names are not
    elements; `index()` turns them into ones). `sample(mask=m)` draws among the actions where m is
    true or 1: m may be the `action_mask` observation (bool, shape (n,)) or gymnasium's int8 mask.
    """

    def __init__(self, names: Sequence[str], name: Optional[str] = None,
                 seed: Seed = None) -> None:
        names = tuple(names)
        super().__init__(len(names), seed=seed)
        self.names = names
        self.name = name
        self._index = {n: i for i, n in enumerate(names)}

    @classmethod
    def from_named_discrete(cls, space: spaces_lib.NamedDiscrete,
                            seed: Seed = None) -> "NamedDiscreteSpace":
        """From a `spaces.NamedDiscrete` (what the 4-tuple env and GetSpaces use)."""
        return cls(space.names, name=space.name, seed=seed)

    def index(self, name: str) -> int:
        """The index of the action called `name` (ValueError if there is none)."""
        try:
            return self._index[name]
        except KeyError:
            raise ValueError(f"Unknown action {name!r} in action space {self.name}") from None

    def action_name(self, i: Any) -> str:
        """The name of action `i` (IndexError if out of range)."""
        try:
            i = operator.index(i)
        except TypeError:
            raise IndexError(f"Action index {i!r} is not an integer") from None
        if not 0 <= i < len(self.names):
            raise IndexError(f"Action index {i} out of range for {self.name} "
                             f"(0..{len(self.names) - 1})")
        return self.names[int(i)]

    def sample(self, mask: Any = None, **kwargs: Any) -> np.int64:
        if mask is not None:
            mask = np.asarray(mask)
            if mask.shape != (len(self.names),):
                raise ValueError(f"The sample mask must have shape ({len(self.names)},), "
                                 f"got {mask.shape}")
            if mask.dtype != np.int8:
                if not np.all((mask == 0) | (mask == 1)):
                    raise ValueError("The sample mask's values must be 0/1 or booleans")
                mask = mask.astype(np.int8)
        return super().sample(mask=mask, **kwargs)

    def __eq__(self, other: object) -> bool:
        return super().__eq__(other) and getattr(other, "names", None) == self.names

    __hash__ = None  # type: ignore[assignment]  # equal spaces need not hash alike

    def __repr__(self) -> str:
        return f"NamedDiscreteSpace({self.name!r}, n={len(self.names)})"


_SCALAR_DTYPES = {"double_value": np.float64, "float_value": np.float32,
                  "int64_value": np.int64}


def observation_space_for(spec: spaces_lib.ObservationSpaceSpec, num_actions: int,
                          seed: Seed = None) -> PlainSpace:
    """The Gymnasium space of one service observation space (`spaces.ObservationSpaceSpec`).
    `num_actions` sizes `action_mask` (the service declares it as a bool sequence of at most the
    largest action space's size)."""
    space_type = spec.space_type or ""
    if space_type.endswith("_box"):
        dtype = spec.low.dtype
        if spec.shape is None:
            raise ValueError(f"Observation space {spec.name!r} is a box without a shape")
        if dtype.kind == "b":
            return MultiBinary(spec.shape, seed=seed)
        return Box(low=spec.low, high=spec.high, shape=spec.shape, dtype=dtype, seed=seed)
    if space_type in _SCALAR_DTYPES:
        dtype = np.dtype(_SCALAR_DTYPES[space_type])
        low = -np.inf if spec.low is None else spec.low
        high = np.inf if spec.high is None else spec.high
        return Box(low=low, high=high, shape=(), dtype=dtype, seed=seed)
    if space_type == "boolean_sequence" and spec.name == "action_mask":
        return MultiBinary(int(num_actions), seed=seed)
    if space_type == "string_value" and spec.kind == "string":
        length = spec.proto.space.string_value.length_range
        min_length = length.min if length.WhichOneof("optional_min") else 0
        max_length = length.max if length.WhichOneof("optional_max") else TEXT_MAX_LENGTH
        return Text(max_length=int(max_length), min_length=int(min_length),
                    charset=TEXT_CHARSET, seed=seed)
    raise ValueError(f"Observation space {spec.name!r} ({spec.kind}) has no Gymnasium space; "
                     f"read it with env.observation[{spec.name!r}] instead")


def coerce_observation(space: PlainSpace, value: Any) -> Any:
    """A service observation as an element of `space`: scalars become 0-d arrays of the Box's
    dtype; everything else is returned as is."""
    if isinstance(space, Box) and space.shape == () and not isinstance(value, np.ndarray):
        return np.asarray(value, dtype=space.dtype)
    return value


def empty_observation(space: PlainSpace) -> Any:
    """A stand-in element of `space` (zeros within the bounds, "" or min_length spaces)."""
    if isinstance(space, Box):
        return np.clip(np.zeros(space.shape), space.low, space.high).astype(space.dtype)
    if isinstance(space, MultiBinary):
        return np.zeros(space.shape, dtype=np.int8)
    if isinstance(space, Text):
        return " " * space.min_length
    raise TypeError(f"No empty observation for {space!r}")
