"""Fill the analysis cache for the samples the rating model is fitted and evaluated on (a long, resumable job).

    nice -n 19 python bench/warm_cache.py [--profile fast] [--dev 3200] [--elite 500] [--holdout 520] [--random 200]

Samples, each seeded exactly as the fitting and accuracy benchmarks draw them: rated-dev player-events (the fitting
set), elite-otb games (the top of the scale, fitting), rated-holdout player-events and random games (evaluation
only). Order: the first ``--dev-first`` rated-dev games (a sample of whole player-events that is a subset of the
larger one), the held-out player-events, elite-otb, the rest of rated-dev, the random held-out games; so a run cut
short still leaves a usable fitting set and the evaluation set. Every finished search is written to the analysis
cache (.cache/analysis.sqlite, or $KIBITZ_ANALYSIS_CACHE) at once, so an interrupted run loses nothing and a rerun
continues where it stopped (finished positions are cache hits). Progress goes to stderr. On a new machine run
``python bench/analyses.py import`` first: the analyses shipped in bench/analyses/ become cache hits; afterwards
``python bench/analyses.py export`` adds what this run searched as a new shard.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from common import ANALYSIS_CACHE, add_data_argument, data_dir

from analyzers.engine import EnginePool
from analyzers.profiles import get_profile
from streamer.batch import assess_games, sample_player_events, sample_rated_games, sample_rated_games_from_file
from streamer.pipeline import PipelineConfig

ELITE_FILE = ("pgn", "elite-otb", "pgnmentor_30players_both_elo_dedup.pgn")


def samples(data, dev: int, dev_first: int, elite: int, holdout: int, random_: int, seed: int):  # noqa: ANN001, ANN201
    """(name, games) in the order the job warms them: fitting sets first."""
    out = []
    dev_dir = data / "pgn" / "rated-dev"
    if dev:
        first = min(dev, dev_first)
        out.append((f"rated-dev player-events ({first})", sample_player_events(dev_dir, first, seed=seed)))
    if holdout:
        out.append(("rated-holdout player-events", sample_player_events(data / "pgn" / "rated-holdout", holdout, seed=seed)))
    if elite:
        out.append(("elite-otb", sample_rated_games_from_file(data.joinpath(*ELITE_FILE), elite, seed=seed)))
    if dev > dev_first:
        out.append((f"rated-dev player-events ({dev})", sample_player_events(dev_dir, dev, seed=seed)))
    if random_:
        out.append(("rated-holdout random", sample_rated_games(data / "pgn" / "rated-holdout", random_, seed=seed)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="fast")
    ap.add_argument("--dev", type=int, default=3200, help="rated-dev games, as whole player-events")
    ap.add_argument("--dev-first", type=int, default=1000, help="rated-dev games warmed before the held-out ones")
    ap.add_argument("--elite", type=int, default=500, help="elite-otb games")
    ap.add_argument("--holdout", type=int, default=520, help="rated-holdout games, as whole player-events")
    ap.add_argument("--random", type=int, default=200, help="rated-holdout games at random")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", type=int, default=2)
    add_data_argument(ap)
    args = ap.parse_args()
    data = data_dir(args, "pgn/rated-dev", "pgn/rated-holdout", "pgn/elite-otb")
    config = PipelineConfig(get_profile(args.profile))

    async def run() -> None:
        async with EnginePool(size=args.engines, cache_path=ANALYSIS_CACHE) as pool:
            for name, games in samples(data, args.dev, args.dev_first, args.elite, args.holdout, args.random, args.seed):
                t, before = time.time(), pool.stats.searches
                await assess_games(games, pool, config, progress=lambda i, n, name=name: print(
                    f"\r{name}: {i}/{n} games", end="", file=sys.stderr, flush=True))
                print(f"\n{name}: {len(games)} games, {pool.stats.searches - before} searches in {time.time() - t:.0f} s",
                      file=sys.stderr, flush=True)
            print(f"done: {pool.stats.searches} searches ({pool.stats.search_seconds:.0f} engine-s), "
                  f"{pool.stats.cache_hits} cache hits", flush=True)

    asyncio.run(run())


if __name__ == "__main__":
    main()
