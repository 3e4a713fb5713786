"""A dictionary of spaces."""
from collections import OrderedDict

from gym.spaces.space import Space


class Dict(Space):
    def __init__(self, spaces=None, seed=None, **spaces_kwargs):
        if spaces is None:
            spaces = spaces_kwargs
        if isinstance(spaces, dict) and not isinstance(spaces, OrderedDict):
            spaces = OrderedDict(sorted(spaces.items()))
        if isinstance(spaces, list):
            spaces = OrderedDict(spaces)
        self.spaces = spaces
        for space in spaces.values():
            if not isinstance(space, Space):
                raise TypeError("Values of a Dict space must be spaces")
        super().__init__(None, None, seed)

    def seed(self, seed=None):
        seeds = super().seed(seed)
        for space in getattr(self, "spaces", {}).values():
            seeds += space.seed(int(self._np_random.randint(2**31)))
        return seeds

    def sample(self):
        return OrderedDict((k, space.sample()) for k, space in self.spaces.items())

    def contains(self, x) -> bool:
        if not isinstance(x, dict) or len(x) != len(self.spaces):
            return False
        return all(k in x and space.contains(x[k]) for k, space in self.spaces.items())

    def __getitem__(self, key):
        return self.spaces[key]

    def __iter__(self):
        return iter(self.spaces)

    def __len__(self) -> int:
        return len(self.spaces)

    def __repr__(self) -> str:
        return "Dict(" + ", ".join(f"{k}:{s}" for k, s in self.spaces.items()) + ")"

    def __eq__(self, other) -> bool:
        return isinstance(other, Dict) and self.spaces == other.spaces
