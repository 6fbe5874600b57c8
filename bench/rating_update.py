"""Cost of the rating math per move, and of expected_score between two long histograms.

    python bench/rating_update.py [--moves 20000]

Per move: GainHistogram.add + live_rating (Algorithm 4 with its interval) + SkillPosterior.update (301-point grid,
10 candidates). Moves are synthetic draws from the E(c) agent on random candidate values, generated before timing
so only the update is measured. Baseline in the same run: one bare numpy exp over the same (grid x candidates)
array, the floor any grid update has to pay. Target: under 50 microseconds per move.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from common import ROOT  # noqa: F401  (puts the project on sys.path)

from analyzers.gain import GainHistogram, expected_score
from analyzers.perceived import live_rating
from analyzers.posterior import GRID_POINTS, SkillPosterior, move_probabilities


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moves", type=int, default=20000)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    moves = []
    for _ in range(args.moves):
        vals = np.concatenate(([0.0], -np.sort(rng.exponential(0.5, 9))))
        played = int(rng.choice(10, p=move_probabilities(vals, 1.2)))
        moves.append((vals, played, int(round(-100 * (vals[0] - vals[played])))))

    hist, post = GainHistogram(), SkillPosterior()
    t = time.perf_counter()
    for vals, played, g in moves:
        hist.add(g)
        live_rating(hist, 2900.0)
        post.update(vals, played)
    per_move = (time.perf_counter() - t) / args.moves

    grid = np.linspace(0, 6, GRID_POINTS)
    t = time.perf_counter()
    for vals, _, _ in moves:
        np.exp(np.outer(grid, vals))
    floor = (time.perf_counter() - t) / args.moves

    rng = np.random.default_rng(1)
    a = GainHistogram(rng.integers(-400, 40, 2000).tolist())
    b = GainHistogram(rng.integers(-400, 40, 2000).tolist())
    reps = 2000
    t = time.perf_counter()
    for _ in range(reps):
        expected_score(a, b)
    es = (time.perf_counter() - t) / reps

    print(f"rating_update: {args.moves} moves, posterior grid {GRID_POINTS} points x 10 candidates")
    print(f"  histogram add + live rating + posterior update: {per_move * 1e6:8.1f} us/move (target < 50)")
    print(f"  baseline, one numpy exp over grid x candidates:  {floor * 1e6:8.1f} us/move (ratio {per_move / floor:.1f}x)")
    print(f"  expected_score, two 2,000-move histograms:      {es * 1e6:8.1f} us/call ({len(a.arrays()[0])} and {len(b.arrays()[0])} distinct gains)")
    print(f"  final posterior: c = {post.mean:.4f} +/- {post.std:.4f} (true 1.2), grid [{post.grid[0]:.3f}, {post.grid[-1]:.3f}]")


if __name__ == "__main__":
    main()
