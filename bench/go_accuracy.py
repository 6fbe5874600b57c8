"""Go ranks from moves: calibrate on Fox's `candidating` games, measure on its held-out `testing` games.

    python bench/go_accuracy.py --warm            # engine analyses into the cache (resumable; hours at full size)
    python bench/go_accuracy.py --fit --write     # fit the c -> rank calibration on candidating, write it
    python bench/go_accuracy.py                   # the tables on testing (nothing fitted there)

Data: ../shared/data/sgf/fox_ranked_5k-9d (Kuboki et al. 2025's selection): 11 rank groups (3-5k, 1-2k, 1d ... 9d),
both players of a game in the same group. Calibration uses `candidating` only; `testing` is held out.
Engine: GNU Go at --level (default 1) through kibitz's Go engine pool, the first --plies moves of each game.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from pathlib import Path

from common import ANALYSIS_CACHE, add_data_argument, data_dir

from analyzers.engine.adapter import GO
from analyzers.engine.gtp import GoLimits
from analyzers.engine.pool import EnginePool
from streamer.goassess import GoMove, assess_go_game
from streamer.sgf import GoGame, read_sgf_games

FOX = "sgf/fox_ranked_5k-9d"
GROUPS = ("3-5k", "1-2k", "1d", "2d", "3d", "4d", "5d", "6d", "7d", "8d", "9d")
GO_CACHE = ANALYSIS_CACHE.with_name("go-analysis.sqlite")


def sample(data: Path, split: str, per_group: int, seed: int, min_moves: int = 60) -> list[tuple[str, GoGame]]:
    """``per_group`` games from each rank group's file of ``split``, seeded; even games with komi only."""
    rng = random.Random(seed)
    out: list[tuple[str, GoGame]] = []
    for group in GROUPS:
        games = [g for g in read_sgf_games(data / FOX / split / f"{group}.sgf")
                 if g.error is None and g.komi > 0 and len(g.moves) >= min_moves
                 and g.black.rating is not None and g.white.rating is not None]
        out += [(group, g) for g in rng.sample(games, min(per_group, len(games)))]
    return out


async def analyse_all(games: list[tuple[str, GoGame]], args: argparse.Namespace) -> dict[str, list[GoMove]]:
    limits = GoLimits(args.level)
    out: dict[str, list[GoMove]] = {}
    started = time.monotonic()
    async with EnginePool(size=args.engines, game=GO, cache_path=GO_CACHE) as pool:
        sem = asyncio.Semaphore(args.engines)

        async def one(g: GoGame) -> None:
            async with sem:
                moves, err = await assess_go_game(g, pool, limits, max_plies=args.plies)
            if err is not None:
                print(f"  {g.source}: {err}", file=sys.stderr)
            out[g.game_id] = moves
            if args.progress:
                print(f"\ranalysed {len(out)}/{len(games)} games, {pool.stats.searches} searches "
                      f"({time.monotonic() - started:.0f} s)", end="", file=sys.stderr, flush=True)

        await asyncio.gather(*(one(g) for _, g in games))
    if args.progress:
        print(file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_argument(ap)
    ap.add_argument("--warm", action="store_true", help="only run the engine analyses into the cache")
    ap.add_argument("--fit-games", type=int, default=12, help="candidating games per rank group (default 12)")
    ap.add_argument("--test-games", type=int, default=24, help="testing games per rank group (default 24)")
    ap.add_argument("--plies", type=int, default=180, help="moves analysed per game (default 180)")
    ap.add_argument("--level", type=int, default=1, help="GNU Go level (default 1)")
    ap.add_argument("--engines", type=int, default=2, help="engine processes (default 2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args()
    data = data_dir(args, FOX)
    fit = sample(data, "candidating", args.fit_games, args.seed)
    test = sample(data, "testing", args.test_games, args.seed)
    if args.warm:
        asyncio.run(analyse_all(fit, args))
        asyncio.run(analyse_all(test, args))
        return


if __name__ == "__main__":
    main()
