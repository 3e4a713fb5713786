"""A loop_set policy file with other networks as its members (loop_set.py's "members").

    PYTHONPATH=bazel-bin/client/python:client/python /usr/bin/python3 -m looptool.rl.members \
        --policy=loop_set.json --add=second.json[,third.json] --out=both.json

The result is --policy (its network, cost model and meta) with the networks of the --add files
(their layers only: a cost model or members of theirs are dropped) as members after any it has:
`looptool tune --search=policy` and `policy_guided` then play each network's likeliest episodes,
an even share each, and rank them all by --policy's cost model.
"""

import argparse
import sys
from typing import List, Optional, Sequence

from looptool.rl import loop_set


def with_members(policy: loop_set.LoopSetPolicy,
                 others: Sequence[loop_set.LoopSetPolicy]) -> loop_set.LoopSetPolicy:
    """`policy` with the networks of `others` added to its members (ValueError past 7 or for
    networks that read rows of another width)."""
    networks = []
    for o in others:
        networks.append(loop_set.LoopSetPolicy(o.trunk, o.mix, o.head, o.query, o.key, o.value))
    return loop_set.LoopSetPolicy(policy.trunk, policy.mix, policy.head, policy.query, policy.key,
                                  policy.value, policy.meta, policy.cost,
                                  list(policy.members) + networks)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--policy", required=True, help="the loop_set policy file")
    p.add_argument("--add", required=True,
                   help="policy files whose networks join it (comma-separated)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    try:
        policy = loop_set.load(args.policy)
        others: List[loop_set.LoopSetPolicy] = [loop_set.load(f) for f in args.add.split(",") if f]
        if not others:
            p.error("--add names no file")
        both = with_members(policy, others)
    except (OSError, ValueError) as e:
        print(f"members: {e}", file=sys.stderr)
        return 2
    both.meta = dict(both.meta, members=list(both.meta.get("members", [])) + [
        {"from": f, "meta": o.meta} for f, o in zip(args.add.split(","), others)])
    both.save(args.out)
    print(f"{args.out}: {len(both.members)} member network(s) beside its own", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
