"""Ferreira (2012) through kibitz's pipeline: the Game of the Century and London 2011, next to the paper.

    python bench/ferreira_tables.py [--profile deep] [--depth D] [--engines 2]

Every ply of the games is assessed by the same game step the runtimes use (``streamer.batch.assess_games``); the
gains are Ferreira's (s_k - s_(k-1) from the mover's side, mate = 3900 cp). Printed:

1. Byrne-Fischer 1956: mean gain, zero-gain moves, expected score and rating difference (docs/models.md s. 1; the
   paper's figures are Houdini 1.5a at depth 20, ours Stockfish 15.1 at the profile's limits);
2. London Chess Classic 2011: Algorithm 2 perceived ratings (all pairs, mean pinned to the mean Elo) next to the
   Elo and to the paper's figures where docs/models.md gives them, and Algorithm 3's engine strength (paper: 2860).

Analyses are cached in the analysis cache (.cache/analysis.sqlite, or $KIBITZ_ANALYSIS_CACHE); the first run of the deep profile costs about 3,500 searches.
``--depth`` overrides the profile's depth (Algorithm 3 calibrates the engine on these games, so no calibration file
is involved): depth 16 is the closest this machine gets to the paper's 20 in reasonable time.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import replace

import numpy as np
from common import ANALYSIS_CACHE, add_data_argument, data_dir

from analyzers.engine import EnginePool
from analyzers.gain import GainHistogram, expected_score, rating_difference
from analyzers.perceived import engine_strength, histogram_diffs, tournament_ratings
from analyzers.profiles import get_profile
from streamer.batch import assess_games
from streamer.ingest import read_pgn_games
from streamer.pipeline import PipelineConfig

#: docs/models.md s. 1: the paper's Figure 1 (pawns per move) and summary figures for Byrne-Fischer 1956.
PAPER_SIDES = {"Byrne": {"mean": -0.86, "zeros": 13, "moves": 41}, "Fischer": {"mean": 0.094, "moves": 41}}
PAPER_GOTC = {"expected_byrne": 0.345, "difference": 113}
#: The London 2011 perceived ratings docs/models.md quotes from the paper (Houdini 1.5a, depth 20).
PAPER_LONDON = {"Kramnik": 2790, "Carlsen": 2774, "Adams": 2722}
PAPER_ENGINE = 2860


def histograms(games, results) -> tuple[dict[str, GainHistogram], dict[str, float]]:
    hist: dict[str, GainHistogram] = {}
    elo: dict[str, float] = {}
    for g in games:
        for color, p in (("white", g.white), ("black", g.black)):
            h = hist.setdefault(p.name, GainHistogram())
            if p.rating:
                elo[p.name] = p.rating
            for a in results[g.game_id]:
                if a.color == color:
                    h.add(a.gain)
    return hist, elo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="deep")
    ap.add_argument("--depth", type=int, help="override the profile's search depth")
    ap.add_argument("--engines", type=int, default=2)
    add_data_argument(ap)
    args = ap.parse_args()
    folder = data_dir(args, "pgn/ferreira-2012") / "pgn" / "ferreira-2012"
    profile = get_profile(args.profile)
    if args.depth:
        profile = replace(profile, name=f"{profile.name}@d{args.depth}", depth=args.depth)
    config = PipelineConfig(profile, None)
    gotc = list(read_pgn_games(folder / "byrne_fischer_1956.pgn"))
    london = list(read_pgn_games(folder / "london_chess_classic_2011.pgn"))
    t = time.time()

    async def run():
        async with EnginePool(size=args.engines, cache_path=ANALYSIS_CACHE) as pool:
            res = await assess_games(gotc + london, pool, config,
                                     progress=lambda i, n: print(f"\r{i}/{n} games", end="", file=sys.stderr))
            return res, pool.stats

    results, stats = asyncio.run(run())
    print(file=sys.stderr)
    print(f"ferreira tables: profile {profile.name} ({profile.limits.key}), Stockfish 15.1; {stats.searches} searches "
          f"({stats.search_seconds:.0f} engine-s), {stats.cache_hits} cache hits, {time.time() - t:.0f} s\n")

    hist, _ = histograms(gotc, results)
    byrne, fischer = (next(h for name, h in hist.items() if who in name) for who in ("Byrne", "Fischer"))
    p = expected_score(byrne, fischer)
    print("Byrne-Fischer 1956 (the Game of the Century)   | kibitz | paper |")
    print("|---|---|---|")
    print(f"| Byrne mean gain, pawns per move               | {byrne.mean / 100:+.3f} | {PAPER_SIDES['Byrne']['mean']:+.3f} |")
    print(f"| Fischer mean gain, pawns per move             | {fischer.mean / 100:+.3f} | {PAPER_SIDES['Fischer']['mean']:+.3f} |")
    print(f"| Byrne zero-gain moves / moves | {byrne.zeros} / {byrne.count} | {PAPER_SIDES['Byrne']['zeros']} / {PAPER_SIDES['Byrne']['moves']} |")
    print(f"| expected score Byrne vs Fischer               | {p:.3f} | {PAPER_GOTC['expected_byrne']:.3f} |")
    print(f"| rating difference in Fischer's favour         | {-rating_difference(p):.0f} | {PAPER_GOTC['difference']} |")

    hist, elo = histograms(london, results)
    perceived = tournament_ratings(histogram_diffs(hist), elo)
    eng = engine_strength(hist, elo)
    print("\nLondon Chess Classic 2011, Algorithm 2 (all pairs; mean pinned to the mean Elo)")
    print("| player | Elo | perceived (kibitz) | paper | moves | mean gain (pawns) |")
    print("|---|---|---|---|---|---|")
    for name in sorted(perceived, key=lambda k: perceived[k], reverse=True):
        paper = next((str(v) for k, v in PAPER_LONDON.items() if k in name), "")
        h = hist[name]
        print(f"| {name} | {elo[name]:.0f} | {perceived[name]:.0f} | {paper} | {h.count} | {h.mean / 100:+.3f} |")
    ours = np.array([perceived[n] for n in perceived])
    print(f"\nspread of perceived ratings: sd {ours.std():.0f} (Elo sd {np.std([elo[n] for n in perceived]):.0f})")
    print(f"engine strength (Algorithm 3): {eng.rating:.0f} (95 % {eng.low:.0f}-{eng.high:.0f}); paper, Houdini 1.5a "
          f"depth 20: {PAPER_ENGINE}")


if __name__ == "__main__":
    main()
