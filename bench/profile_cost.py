"""Engine CPU per search of each profile, on the same positions: the cost side of accuracy per CPU-second.

    python bench/profile_cost.py [--positions 200]

One engine process (``EnginePool(size=1)``, no cache, so every position is a real search), the same 200 middlegame
positions from rated-dev for every profile, one after the other in this run. Prints seconds per search and the
ratio to ``standard``. A perceived rating costs one search per ply of the game, so the ratio is also the ratio of
CPU-seconds per rated move.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from common import add_data_argument, data_dir, sample_positions

from analyzers.engine import EnginePool
from analyzers.profiles import PROFILES


async def cost(boards, profile) -> float:  # noqa: ANN001
    async with EnginePool(size=1) as pool:
        t = time.perf_counter()
        for b in boards:
            await pool.analyse_limits(b, profile.limits)
        assert pool.stats.searches == len(boards), "every position must be a real search"
        return (time.perf_counter() - t) / len(boards)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--positions", type=int, default=200)
    add_data_argument(ap)
    args = ap.parse_args()
    boards = sample_positions(args.positions, data_dir(args, "pgn/rated-dev"))
    per = {name: asyncio.run(cost(boards, p)) for name, p in PROFILES.items()}
    print(f"profile_cost: {len(boards)} middlegame positions from rated-dev, 1 engine, no cache")
    print("| profile | limits | seconds per search | ratio to standard |")
    print("|---|---|---|---|")
    for name, s in per.items():
        print(f"| {name} | {PROFILES[name].limits.key} | {s:.3f} | {s / per['standard']:.2f} |")


if __name__ == "__main__":
    main()
