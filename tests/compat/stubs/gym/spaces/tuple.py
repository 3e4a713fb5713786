"""A tuple (product) of spaces."""
from gym.spaces.space import Space


class Tuple(Space):
    def __init__(self, spaces, seed=None):
        self.spaces = tuple(spaces)
        for space in self.spaces:
            if not isinstance(space, Space):
                raise TypeError("Elements of a Tuple space must be spaces")
        super().__init__(None, None, seed)

    def seed(self, seed=None):
        seeds = super().seed(seed)
        for space in getattr(self, "spaces", ()):
            seeds += space.seed(int(self._np_random.randint(2**31)))
        return seeds

    def sample(self):
        return tuple(space.sample() for space in self.spaces)

    def contains(self, x) -> bool:
        if isinstance(x, list):
            x = tuple(x)
        return (
            isinstance(x, tuple)
            and len(x) == len(self.spaces)
            and all(space.contains(part) for space, part in zip(self.spaces, x))
        )

    def __getitem__(self, index):
        return self.spaces[index]

    def __len__(self) -> int:
        return len(self.spaces)

    def __repr__(self) -> str:
        return "Tuple(" + ", ".join(str(s) for s in self.spaces) + ")"

    def __eq__(self, other) -> bool:
        return isinstance(other, Tuple) and self.spaces == other.spaces
