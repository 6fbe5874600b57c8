"""Fit a calibration (c -> Elo, engine strength) for an engine profile on rated-dev games. Never on rated-holdout.

    python bench/fit_calibration.py --profile standard --games 60 [--elite 40] [--engines 2] [--final]

--elite N adds N games from elite-otb (over-the-board, both players rated) for the top of the rating scale.
--events N adds at least N rated-dev games taken as whole player-events (players with 5+ games in an event): the
players followed across their games give the error variance a + b / n of the posterior estimate after n counted
moves (the interval the service publishes; see analyzers/calibration.py). The c -> Elo map is fitted on the
player-games of --games and --elite only.

Analyses go to the analysis cache (.cache/analysis.sqlite, or $KIBITZ_ANALYSIS_CACHE), so a refit with other
settings does no engine work. Writes analyzers/calibrations/<profile>.json. Without --final the calibration is marked provisional.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time

import numpy as np
from common import ANALYSIS_CACHE, ROOT, add_data_argument, data_dir, fide, follow_player_events

from analyzers.calibration import Calibration
from analyzers.engine import EnginePool
from analyzers.errors import RatingError
from analyzers.perceived import engine_strength
from analyzers.profiles import get_profile
from streamer.batch import assess_games, by_player_game, sample_player_events, sample_rated_games, sample_rated_games_from_file
from streamer.pipeline import PipelineConfig, ScopeStats

MIN_COUNTED = 5


EVENT_CHECKPOINTS = (5, 10, 20, 40, 80, 160)


def event_errors(games, results, cal: Calibration) -> list[tuple[int, float]]:  # noqa: ANN001
    """(n, FIDE - estimate) for every player-event at each checkpoint of counted moves it reaches, in round order."""
    out: list[tuple[int, float]] = []
    follow_player_events(games, results, EVENT_CHECKPOINTS,
                         lambda n, s, me, opp, a: out.append((n, me.rating - cal.elo_from_c(s.post.mean))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="standard")
    ap.add_argument("--games", type=int, default=60)
    ap.add_argument("--elite", type=int, default=0, help="also N games from elite-otb (the top of the scale)")
    ap.add_argument("--events", type=int, default=0, help="also N rated-dev games as player-events, for the error model")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", type=int, default=2)
    ap.add_argument("--final", action="store_true", help="mark the calibration as final (not provisional)")
    add_data_argument(ap)
    args = ap.parse_args()
    data = data_dir(args, "pgn/rated-dev", *(["pgn/elite-otb"] if args.elite else []))
    profile = get_profile(args.profile)
    config = PipelineConfig(profile)
    games = sample_rated_games(data / "pgn" / "rated-dev", args.games, seed=args.seed)
    if args.elite:
        games += sample_rated_games_from_file(data / "pgn" / "elite-otb" / "pgnmentor_30players_both_elo_dedup.pgn", args.elite, seed=args.seed)
    event_games = sample_player_events(data / "pgn" / "rated-dev", args.events, seed=args.seed) if args.events else []
    elo: dict[tuple[str, str], float] = {}
    for g in games:
        elo[(g.game_id, "white")] = fide(g.white.rating)
        elo[(g.game_id, "black")] = fide(g.black.rating)
    t = time.time()

    async def run():
        async with EnginePool(size=args.engines, cache_path=ANALYSIS_CACHE) as pool:
            res = await assess_games(games + event_games, pool, config, progress=lambda i, n: print(f"\r{i}/{n} games", end="", file=sys.stderr))
            return res, pool.engine_name, pool.stats

    results, engine, stats = asyncio.run(run())
    print(file=sys.stderr)
    stats_by = {}
    for moves in (results[g.game_id] for g in games):
        for key, ms in by_player_game(moves).items():
            s = ScopeStats()
            for a in ms:
                s.add(a, None)
            stats_by[key] = s
    gains_only = profile.gains_only
    keys = [k for k, s in stats_by.items() if (s.hist.count if gains_only else s.post.n) >= MIN_COUNTED]
    y = np.array([elo[k] for k in keys])
    hists = {k: stats_by[k].hist for k in keys if 0 < stats_by[k].hist.score_vs_engine() < 1}
    try:
        eng = engine_strength(hists, {k: elo[k] for k in hists})
    except RatingError as e:
        raise SystemExit(f"engine strength undefined: {e}") from None
    # Algorithm 4's part: its residual around the FIDE ratings minus its own sampling variance is the model error
    from analyzers.perceived import live_rating
    gk = list(hists)
    g_est = [live_rating(hists[k], eng.rating) for k in gk]
    g_resid = np.array([elo[k] - e.rating for k, e in zip(gk, g_est)])
    g_samp = np.array([e.sd ** 2 for e in g_est])
    gain_model_sd = math.sqrt(max(0.0, float(g_resid.var(ddof=1)) - float(g_samp.mean())))
    r_g = float(np.corrcoef([e.rating for e in g_est], [elo[k] for k in gk])[0, 1])
    extra = {"pearson_r_gain": round(r_g, 3), "gain_residual_sd": round(float(g_resid.std(ddof=1)), 1)}
    knots, error_var, checkpoints, residual_sd, model_sd = [], None, 0, float(g_resid.std(ddof=1)), 0.0
    if not gains_only:
        c = np.array([stats_by[k].post.mean for k in keys])
        slope, intercept = np.polyfit(c, y, 1)
        if slope <= 0:
            raise SystemExit(f"c is not increasing in Elo on this sample (slope {slope:.1f}): no calibration written")
        resid = y - (intercept + slope * c)
        lo, hi = np.quantile(c, [0.02, 0.98])
        r_c = float(np.corrcoef(c, y)[0, 1])
        # sampling variance of each estimate, on the Elo scale: posterior sd of c times the slope
        samp_c = np.array([(slope * stats_by[k].post.std) ** 2 for k in keys])
        model_sd = math.sqrt(max(0.0, float(resid.var(ddof=2)) - float(samp_c.mean())))
        residual_sd = float(resid.std(ddof=2))
        extra = {"pearson_r_c": round(r_c, 3), **extra, "slope_elo_per_c": round(float(slope), 1)}
        knots = [(round(float(lo), 4), round(float(intercept + slope * lo), 1)), (round(float(hi), 4), round(float(intercept + slope * hi), 1))]
    if event_games and not gains_only:
        probe = Calibration(profile.name, engine, eng.rating, knots, 0.0)
        pts = event_errors(event_games, results, probe)
        checkpoints = len(pts)
        n = np.array([p[0] for p in pts], float)
        e2 = np.array([p[1] ** 2 for p in pts])
        # one equation per checkpoint (its mean squared error), not per point: per point, the many short histories
        # outvote the few long ones and the fit undershoots the error after 80-160 moves (seen on rated-dev)
        ks = np.array([k for k in EVENT_CHECKPOINTS if (n == k).sum() >= 10], float)
        mse = np.array([e2[n == k].mean() for k in ks])
        (a, b), *_ = np.linalg.lstsq(np.column_stack([np.ones_like(ks), 1 / ks]), mse, rcond=None)
        error_var = (round(float(max(a, 0.0)), 1), round(float(max(b, 0.0)), 1))
        for k in EVENT_CHECKPOINTS:
            sel = n == k
            if sel.any():
                print(f"  after {k:3d} counted moves: {sel.sum():4d} player-events, rms error {math.sqrt(e2[sel].mean()):5.0f}, "
                      f"model {math.sqrt(error_var[0] + error_var[1] / k):5.0f}")
    cal = Calibration(
        profile=profile.name, engine=engine, engine_elo=round(eng.rating, 1),
        c_knots=knots, error_var=error_var,
        residual_sd=round(residual_sd, 1), model_sd=round(model_sd, 1), gain_model_sd=round(gain_model_sd, 1),
        provisional=not args.final,
        fitted_on=f"{args.games} rated-dev + {args.elite} elite-otb games (seed {args.seed}); {len(keys)} player-games with >= {MIN_COUNTED} "
                  + ("moves (gains only: one PV)" if gains_only else "counted moves")
                  + (f"; error model on {len(event_games)} rated-dev player-event games ({checkpoints} checkpoints)" if event_games else ""),
        command=f"python bench/fit_calibration.py --profile {profile.name} --games {args.games} --elite {args.elite} --seed {args.seed}"
                + (f" --events {args.events}" if args.events else "") + (" --final" if args.final else ""),
        extra={**extra, "engine_elo_se": round(eng.half_width / 1.96, 1),
               "searches": stats.searches, "cache_hits": stats.cache_hits, "seconds": round(time.time() - t, 1)},
    )
    path = ROOT / "analyzers" / "calibrations" / f"{profile.name}.json"
    cal.save(path)
    print(json.dumps(cal.to_dict(), indent=2))
    r = f"r(c, Elo) = {extra['pearson_r_c']:.3f}" if knots else f"r(Algorithm 4, Elo) = {r_g:.3f} (gains only)"
    print(f"wrote {path}; Pearson {r} on {len(keys)} player-games; engine {eng.rating:.0f} +/- {eng.half_width:.0f}")
    if not math.isfinite(eng.rating):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
