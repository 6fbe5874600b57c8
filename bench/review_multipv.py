"""Does a review search with two principal variations price honest matches better? Measured on rated-dev and
elite-otb (the review calibration's fit sample, bench/fit_review.py); never on rated-holdout.

    python bench/review_multipv.py [--dev 600] [--elite 500] [--limits d12-mpv2] [--warm]
                                   [--detect [--events 520] [--assist-depth 14] [--assist-draws 10]]

The shipped review (streamer/review.py) searches each counted position at depth 12 with one PV and expects the
player to match that search's first choice with the move model's probability p of it, which comes from the service's
depth-8 values, then recalibrated (analyzers.fairplay.ReviewCalibration). Its honest z has sd about 1.3, not 1: a
per-move misfit (docs/fairplay.md, "An uncertain reference rating"). A search with a second PV also tells how much
better the deeper first choice is than the deeper second: where that gap is large any player finds the move, where it
is small the match is nearly a coin toss between two moves. This script searches the fit sample's counted positions at
``--limits`` (d12-mpv2 by default; resumable: each search goes to the analysis cache as it ends; ``--warm`` only
searches), then fits, by group cross-validation as bench/fit_review.py does (two folds; a rated-dev event or an elite
player on one side only), the shipped calibration's form on these searches' first choices, and the same with terms in
the deeper gap, and prints the moves' log-likelihood per move and the honest scopes' z (40+ counted moves).

``--detect`` then compares the fits on detection, as bench/fairplay_calibration.py's "every event reviewed" row does on
rated-dev: each fitted on every move of the fit sample, each whole rated-dev player-event of ``--events`` games (seed
0) reviewed at its end, honest and with a share of the player's moves replaced by the depth-``--assist-depth``
assistant's (its searches from the analysis cache, as ``fairplay_calibration.py --split rated-dev --warm`` leaves
them), under ``--assist-draws`` draws of which moves (the same draws as there); the event's counted positions searched
at ``--limits`` here. It also prints how often the assistant's move is that search's first choice.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import defaultdict

import numpy as np
from common import ANALYSIS_CACHE, add_data_argument
from fit_review import fit, fit_scopes, loglik, sampled_games

from analyzers.engine import EnginePool
from analyzers.engine.analysis import Limits, PositionAnalysis
from analyzers.fairplay import DEFAULT_MIN_MOVES, DEFAULT_REVIEW_Z, ReviewCalibration, z_score
from analyzers.profiles import get_profile
from analyzers.ratingmodel import load_move_model, win_losses
from schemas import MoveAssessment
from streamer.batch import assess_games
from streamer.ingest import PgnGame
from streamer.pipeline import PipelineConfig
from streamer.review import clock_of, counts_for_review, positions, review_move

#: One counted move: (scope, fold group, player id, the service's assessment, the deeper search).
Row = tuple[str, str, str, MoveAssessment, PositionAnalysis]


async def searched(args: argparse.Namespace, config: PipelineConfig, games: list[PgnGame], elite: list[PgnGame]) -> list[Row]:
    """Every counted move of either side of ``games`` with its search at ``--limits`` (from the cache where it is),
    scoped as bench/fit_review.py scopes them."""
    limits = Limits.from_key(args.limits)
    scope_of = fit_scopes(elite)
    async with EnginePool(size=args.engines, cache_path=ANALYSIS_CACHE) as pool:
        assessed = await assess_games(games, pool, config)
        todo = []
        for g in games:
            for color in ("white", "black"):
                player = g.white if color == "white" else g.black
                scope, group = scope_of(g, player)
                mine = {a.ply: a for a in assessed.get(g.game_id, []) if a.color == color and counts_for_review(a)}
                todo += [(scope, group, player.id, mine[ply], board) for ply, board in positions(g, color) if ply in mine]
        print(f"{len(todo)} counted positions to search at {limits.key} ({pool.size} engines)", flush=True)
        sem, done, start = asyncio.Semaphore(pool.size * 2), [0], time.monotonic()

        async def one(row: tuple) -> Row:
            async with sem:
                res = await pool.analyse_limits(row[4], limits)
            done[0] += 1
            if done[0] % 2000 == 0:
                print(f"  {done[0]} / {len(todo)} in {time.monotonic() - start:.0f} s", flush=True)
            return (*row[:4], res)

        return list(await asyncio.gather(*(one(t) for t in todo)))


def deep_gap(res: PositionAnalysis) -> float:
    """The deeper search's first choice's lead over its second, in win probability (1 with a single legal move)."""
    return float(win_losses([c.value for c in res.candidates[:2]])[1]) if len(res.candidates) >= 2 else 1.0


#: The fits compared: name -> the columns read (of COLUMNS).
COLUMNS = ("logit p", "top", "z", "x_left", "x_spent", "unclocked", "gap", "log gap", "gap x logit p")
FITS = {"shipped form": 6, "+ gap": 7, "+ gap, log gap": 8, "+ gap, log gap, gap x logit p": 9}


def columns(a: MoveAssessment, res: PositionAnalysis, model) -> tuple[tuple[float, ...], int] | None:  # noqa: ANN001
    """(the intercept's 1 and every column of COLUMNS, matched) of a move the review counts, else None."""
    if not res.candidates:
        return None
    first = res.candidates[0].uci
    m = review_move(a, first, model)
    if m is None:
        return None
    lp, top, z = ReviewCalibration.features(m.p_top, first == a.candidates[0].uci, a.reference_rating)
    g = deep_gap(res)
    return (1.0, lp, top, z, *ReviewCalibration.clock_features(clock_of(a)), g, float(np.log(g + 0.01)), g * lp), m.matched


def design(rows: list[Row], model) -> tuple[np.ndarray, np.ndarray, list[str]]:  # noqa: ANN001
    """All columns of COLUMNS (with the intercept's ones first), outcomes, scope keys."""
    xs, ys, keys = [], [], []
    for scope, _, pid, a, res in rows:
        c = columns(a, res, model)
        if c is not None:
            xs.append(c[0])
            ys.append(c[1])
            keys.append(f"{scope}|{pid}")
    return np.array(xs), np.array(ys, dtype=float), keys


def scope_z(q: np.ndarray, y: np.ndarray, keys: list[str]) -> dict[str, float]:
    """The match count's z per scope of DEFAULT_MIN_MOVES+ counted moves, P(match) = q."""
    s: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for qi, yi, k in zip(q, y, keys):
        t = s[k]
        t[0] += 1
        t[1] += yi
        t[2] += qi
        t[3] += qi * (1 - qi)
    return {k: z_score(t[1], t[2], t[3]) for k, t in s.items() if t[0] >= DEFAULT_MIN_MOVES}


#: A move's review columns by (game, ply, move): every fit and every draw reads the same moves again.
Memo = dict[tuple[str, int, str], tuple[tuple[float, ...], int] | None]


def event_z(moves: list[MoveAssessment], deep: dict[tuple[str, int], PositionAnalysis], model, b: np.ndarray,  # noqa: ANN001
            memo: Memo) -> float:
    """The match count's z of a player's ``moves`` under the fit ``b`` (its first len(b) columns); -inf under
    DEFAULT_MIN_MOVES counted moves."""
    counted: list[tuple[tuple[float, ...], int]] = []
    for a in moves:
        key = (a.game_id, a.ply, a.uci)
        if key not in memo:
            res = deep.get((a.game_id, a.ply))
            memo[key] = columns(a, res, model) if res is not None else None
        col = memo[key]
        if col is not None:
            counted.append(col)
    if len(counted) < DEFAULT_MIN_MOVES:
        return float("-inf")
    x = np.array([c[0][: len(b)] for c in counted])
    q = 1 / (1 + np.exp(-x @ b))
    return z_score(float(sum(c[1] for c in counted)), float(q.sum()), float((q * (1 - q)).sum()))


def detection(args: argparse.Namespace, config: PipelineConfig, model, fits: dict[str, np.ndarray]) -> None:  # noqa: ANN001
    """``--detect``: each fit's review z of the rated-dev player-events at their end, honest and assisted."""
    from fairplay_calibration import drawn_player_events
    from fairplay_data import analyse, load_samples, whole_player_events

    samples = load_samples(args.data, args.events, args.events, 0, 0, args.seed, "rated-dev")
    limits = Limits.from_key(args.limits)

    async def run():  # noqa: ANN202
        async with EnginePool(size=args.engines, cache_path=ANALYSIS_CACHE) as pool:
            results, assisted = await analyse(pool, config, samples, progress=False, assist=Limits(depth=args.assist_depth))
            todo = []
            for (_, pid), games in sorted(whole_player_events(samples.events).items()):
                for g in games:
                    color = "white" if g.white.id == pid else "black"
                    counted = {a.ply for a in results.get(g.game_id, []) if a.color == color and a.counted}
                    todo += [((g.game_id, ply), b) for ply, b in positions(g, color) if ply in counted]
            print(f"detection: {len(todo)} counted positions of the rated-dev player-events at {limits.key}", flush=True)
            sem = asyncio.Semaphore(pool.size * 2)

            async def one(key: tuple[str, int], board) -> tuple[tuple[str, int], PositionAnalysis]:  # noqa: ANN001
                async with sem:
                    return key, await pool.analyse_limits(board, limits)

            return results, assisted, dict(await asyncio.gather(*(one(*t) for t in todo)))

    results, assisted, deep = asyncio.run(run())
    alt = {(a.game_id, a.ply): a.uci for moves in assisted.values() for a in moves.values()}
    agree = [alt[k] == res.candidates[0].uci for k, res in deep.items() if k in alt and res.candidates]
    print(f"the assistant's move is this search's first choice in {np.mean(agree):.1%} of {len(agree)} counted positions")
    print(f"\nreview z at the event's end, rated-dev player-events of 5+ games (--events {args.events}), d{args.assist_depth} "
          f"assistant, {args.assist_draws} draws; flagged = z >= {DEFAULT_REVIEW_Z}")
    print(f"{'fit':<34} {'share':>5}  {'events':>6}  z mean (sd)      max   flagged   9+ games: n  z mean   flagged")
    memo: Memo = {}
    for name, b in fits.items():
        for frac in (0.0, 0.5):
            rows = [(len(games), event_z(moves, deep, model, b, memo))
                    for _, games, _, moves in drawn_player_events(samples, results, assisted, frac, args.seed, args.assist_draws)]
            z = np.array([v for _, v in rows if np.isfinite(v)])
            z9 = np.array([v for n, v in rows if n >= 9 and np.isfinite(v)])
            print(f"{name:<34} {frac:>5.0%}  {len(z):>6}  {z.mean():+6.2f} ({z.std(ddof=1):4.2f})  {z.max():+6.2f}  "
                  f"{np.mean(z >= DEFAULT_REVIEW_Z):7.1%}   {len(z9):>10}  {z9.mean():+6.2f}  {np.mean(z9 >= DEFAULT_REVIEW_Z):7.1%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="fast")
    ap.add_argument("--dev", type=int, default=600)
    ap.add_argument("--elite", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", type=int, default=2)
    ap.add_argument("--limits", default="d12-mpv2", help="the review search's limits key")
    ap.add_argument("--warm", action="store_true", help="only search (into the analysis cache)")
    ap.add_argument("--detect", action="store_true", help="also compare the fits on detection (rated-dev player-events)")
    ap.add_argument("--events", type=int, default=520, help="with --detect: games of rated-dev drawn as whole player-events")
    ap.add_argument("--assist-depth", type=int, default=14)
    ap.add_argument("--assist-draws", type=int, default=10)
    add_data_argument(ap)
    args = ap.parse_args()
    config = PipelineConfig(get_profile(args.profile))
    model = load_move_model(args.profile)
    dev, elite = sampled_games(args)
    rows = asyncio.run(searched(args, config, dev + elite, elite))
    if args.warm:
        return
    x, y, keys = design(rows, model)
    groups = sorted({r[1] for r in rows})
    fold_of = {e: i % 2 for i, e in enumerate(groups)}
    group_of = {f"{r[0]}|{r[2]}": r[1] for r in rows}
    fold = np.array([fold_of[group_of[k]] for k in keys])
    print(f"{len(y)} counted moves, matched {y.mean():.3f}; deeper gap median {np.median(x[:, 7]):.3f}")
    print(f"\n{'fit (cross-validated by group)':<34} {'loglik/move':>11}  part        scopes   mean    sd  >=3.0  >=4.0   max")
    for name, cols in FITS.items():
        q, ll = np.zeros(len(y)), 0.0
        for k in (0, 1):
            b = fit(x[fold != k, : cols + 1], y[fold != k])
            ll += loglik(x[fold == k, : cols + 1], y[fold == k], b)[0]
            q[fold == k] = 1 / (1 + np.exp(-x[fold == k, : cols + 1] @ b))
        zs = scope_z(q, y, keys)
        for part, keep in (("rated-dev", lambda s: not s.startswith("elite:")), ("elite-otb", lambda s: s.startswith("elite:"))):
            z = np.array([v for s, v in zs.items() if keep(s)])
            if len(z) < 2:
                continue
            print(f"{name:<34} {ll / len(y):11.5f}  {part:<10} {len(z):>6} {z.mean():+6.2f} {z.std(ddof=1):5.2f} "
                  f"{int(np.sum(z >= 3)):>6} {int(np.sum(z >= 4)):>6} {z.max():+6.2f}")
    b = fit(x, y)
    print("\nall moves, the largest fit: " + " ".join(f"{c:+.3f} {n}" for c, n in zip(b, ("1", *COLUMNS))))
    if args.detect:
        detection(args, config, model, {name: fit(x[:, : cols + 1], y) for name, cols in FITS.items()})


if __name__ == "__main__":
    main()
