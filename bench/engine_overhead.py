"""Engine pool overhead: the same positions and limits through (a) raw python-chess, (b) EnginePool(size=1), (c) size=2.

    python bench/engine_overhead.py [--positions 200] [--depth 10] [--multipv 10]

(a) is one ``chess.engine.SimpleEngine`` in a loop, doing exactly what a pool search does: ``ucinewgame`` before each
search (python-chess sends it when ``game`` changes), Threads=1, Hash=16, the position without history. (b) and (c)
submit all positions at once to a fresh pool (empty cache, so every position is a real search). Prints positions
per second and the ratios b/a and c/a, all measured in this one run. Targets: b/a >= 0.97, c/a >= 1.8.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import time

import chess.engine
from common import add_data_argument, data_dir, sample_positions

from analyzers.engine import EnginePool, Limits
from analyzers.engine.pool import DEFAULT_OPTIONS, find_engine


def raw(boards, limits: Limits, command: str) -> float:
    with chess.engine.SimpleEngine.popen_uci(command) as eng:
        eng.configure(DEFAULT_OPTIONS)
        t = time.perf_counter()
        for b in boards:
            eng.analyse(b, chess.engine.Limit(depth=limits.depth, nodes=limits.nodes), multipv=limits.multipv, game=object())
        return time.perf_counter() - t


async def pooled(boards, limits: Limits, command: str, size: int) -> float:
    async with EnginePool(command, size=size) as pool:
        t = time.perf_counter()
        await asyncio.gather(*(pool.analyse_limits(b, limits) for b in boards))
        elapsed = time.perf_counter() - t
        assert pool.stats.searches == len(boards), "every position must be a real search"
        return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--positions", type=int, default=200)
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--multipv", type=int, default=10)
    add_data_argument(ap)
    args = ap.parse_args()
    command = find_engine()
    limits = Limits(depth=args.depth, multipv=args.multipv)
    boards = sample_positions(args.positions, data_dir(args, "pgn/rated-dev"))
    print(f"engine_overhead: {len(boards)} middlegame positions from rated-dev, limits {limits.key}, {command}, {platform.node()}")
    a = raw(boards, limits, command)
    b = asyncio.run(pooled(boards, limits, command, 1))
    c = asyncio.run(pooled(boards, limits, command, 2))
    n = len(boards)
    print(f"{'run':<34}{'seconds':>9}{'pos/s':>9}{'ratio':>8}")
    print(f"{'(a) raw SimpleEngine loop':<34}{a:>9.2f}{n / a:>9.2f}{1.0:>8.3f}")
    print(f"{'(b) EnginePool(size=1)':<34}{b:>9.2f}{n / b:>9.2f}{a / b:>8.3f}")
    print(f"{'(c) EnginePool(size=2)':<34}{c:>9.2f}{n / c:>9.2f}{a / c:>8.3f}")
    print(f"b/a = {a / b:.3f} (target >= 0.97)   c/a = {a / c:.3f} (target >= 1.8)")


if __name__ == "__main__":
    main()
