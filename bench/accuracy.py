"""Accuracy of perceived ratings against FIDE ratings on held-out games (never used for fitting).

    python bench/accuracy.py --profile standard --split holdout --games 100 [--seed 0]

Per player-game (players rated in the PGN): mean absolute error and bias of perceived vs FIDE rating, Pearson r,
Kendall tau_a (analyzers.concordance) and the share of FIDE ratings inside the published 95 % interval, for the
posterior over c, Ferreira's gain histogram (Algorithm 4), and their inverse-variance combination. Reference rows:
a constant (the sample's own mean: an oracle, so a generous baseline) and the opponent's rating (a leak in Swiss
events, not skill; never used by kibitz). Then the posterior's error after its first 10, 20 and 40 counted moves.
Analyses are cached in .cache/analysis.sqlite, so a rerun does no engine work.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time

import numpy as np
from common import ROOT, SHARED

from analyzers.calibration import load_calibration
from analyzers.concordance import kendall_tau_a
from analyzers.engine import EnginePool
from analyzers.profiles import get_profile
from streamer.batch import assess_games, by_player_game, sample_rated_games
from streamer.pipeline import PipelineConfig, ScopeStats

SPLITS = {"holdout": "rated-holdout", "dev": "rated-dev"}


def row(name: str, est: np.ndarray, truth: np.ndarray, low=None, high=None) -> str:
    err = est - truth
    cover = f"{np.mean((truth >= low) & (truth <= high)):6.1%}" if low is not None else "     -"
    r = np.corrcoef(est, truth)[0, 1] if np.std(est) > 0 else float("nan")
    tau = kendall_tau_a(est, truth) if np.std(est) > 0 else float("nan")
    return f"| {name:<34} | {np.mean(np.abs(err)):5.0f} | {np.mean(err):+6.0f} | {r:5.2f} | {tau:5.2f} | {cover} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="standard")
    ap.add_argument("--split", choices=sorted(SPLITS), default="holdout")
    ap.add_argument("--games", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", type=int, default=2)
    args = ap.parse_args()
    profile = get_profile(args.profile)
    cal = load_calibration(profile.name)
    config = PipelineConfig(profile, cal)
    games = sample_rated_games(SHARED / "pgn" / SPLITS[args.split], args.games, seed=args.seed)
    info = {}
    for g in games:
        info[(g.game_id, "white")] = (g.white.rating, g.black.rating)
        info[(g.game_id, "black")] = (g.black.rating, g.white.rating)
    t = time.time()

    async def run():
        async with EnginePool(size=args.engines, cache_path=ROOT / ".cache" / "analysis.sqlite") as pool:
            res = await assess_games(games, pool, config, progress=lambda i, n: print(f"\r{i}/{n} games", end="", file=sys.stderr))
            return res, pool.stats

    results, stats = asyncio.run(run())
    print(file=sys.stderr)
    rows = []
    by_k: dict[int, list[tuple[float, float]]] = {10: [], 20: [], 40: []}
    for moves in results.values():
        for key, ms in by_player_game(moves).items():
            s = ScopeStats()
            counted = 0
            for a in ms:
                s.add(a, None)
                if a.counted:
                    counted += 1
                    if counted in by_k:
                        by_k[counted].append((cal.from_posterior(s.post).rating, info[key][0]))
            if s.post.n < 1 or s.hist.count < 1:
                continue
            p, gn = cal.from_posterior(s.post), cal.from_histogram(s.hist)
            w_p, w_g = 1 / p.sd**2, 1 / gn.sd**2
            comb = (w_p * p.rating + w_g * gn.rating) / (w_p + w_g)
            comb_sd = math.sqrt(1 / (w_p + w_g))  # treats the two as independent: optimistic, they share the moves
            rows.append((info[key][0], info[key][1], p.rating, p.low, p.high, gn.rating, gn.low, gn.high, comb, comb - 1.96 * comb_sd, comb + 1.96 * comb_sd))
    a = np.array(rows)
    truth = a[:, 0]
    print(f"accuracy: profile {profile.name} ({profile.limits.key}), split {SPLITS[args.split]}, {len(games)} games, "
          f"{len(a)} player-games; calibration {'PROVISIONAL' if cal.provisional else 'final'} ({cal.fitted_on}); "
          f"{stats.searches} searches, {stats.cache_hits} cache hits, {time.time() - t:.0f} s")
    print(f"FIDE ratings in the sample: mean {truth.mean():.0f}, sd {truth.std():.0f}\n")
    print("| estimator (per player-game)        |   MAE |   bias |     r | tau_a | in 95 % |")
    print("|---|---|---|---|---|---|")
    print(row("posterior over c", a[:, 2], truth, a[:, 3], a[:, 4]))
    print(row("gain histogram (Ferreira Alg. 4)", a[:, 5], truth, a[:, 6], a[:, 7]))
    print(row("combination (inverse variance)", a[:, 8], truth, a[:, 9], a[:, 10]))
    print(row("constant = sample mean (oracle)", np.full_like(truth, truth.mean()), truth))
    print(row("opponent's rating (leak, reference)", a[:, 1], truth))
    print("\n| counted moves seen | player-games | posterior MAE |")
    print("|---|---|---|")
    for k, pairs in by_k.items():
        if pairs:
            e = np.array(pairs)
            print(f"| {k} | {len(e)} | {np.mean(np.abs(e[:, 0] - e[:, 1])):.0f} |")


if __name__ == "__main__":
    main()
