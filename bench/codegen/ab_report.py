"""The closing lines the A/B scripts of bench/codegen share: a geomean of new / old ratios under
the table, printed and, with --out, written."""
import math
from typing import List


def finish(lines: List[str], ratios: List[float], what: str, out: str) -> None:
    """Appends "Geomean WHAT over N programs" to `lines`, prints them and writes them to `out`."""
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    lines += ["", f"Geomean {what} over {len(ratios)} programs: {geo:.3f}."]
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text)
