"""Fair-play alerts calibrated on held-out games: false alarms on honest play, detection of simulated assistance.

    nice -n 19 python bench/fairplay_calibration.py --warm   # the engine work only (resumable, about 1.5 h on 2 cores)
    python bench/fairplay_calibration.py                     # the tables, from the analysis cache

The samples and how assistance is simulated: bench/fairplay_data.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import random
from collections import Counter
from collections.abc import Iterable, Iterator

import numpy as np
from common import ANALYSIS_CACHE, add_data_argument, data_dir
from fairplay_data import analyse, load_samples, whole_player_events

from analyzers import fairplay
from analyzers.engine import EnginePool
from analyzers.fairplay import DEFAULT_MIN_MOVES, DEFAULT_SCREEN_Z, DEFAULT_Z_THRESHOLD, FairPlayStats, exclusion
from analyzers.profiles import get_profile
from analyzers.ratingmodel import UNKNOWN_CLASS, load_move_model, win_losses
from schemas import MoveAssessment
from streamer.pipeline import PipelineConfig, ScopeStats, count_move, move_choice

THRESHOLDS = (3.0, 3.5, 4.0, 4.5, 4.75, 5.0)
FRACTIONS = (0.1, 0.2, 0.5, 1.0)
BANDS = ((0, 1400), (1400, 1800), (1800, 2200), (2200, 3500))


@contextlib.contextmanager
def without_obvious_rule() -> Iterator[None]:
    """The ablation: the obvious-move rule switched off (its threshold above any loss) while the block runs."""
    gap, fairplay.OBVIOUS_GAP = fairplay.OBVIOUS_GAP, 2.0
    try:
        yield
    finally:
        fairplay.OBVIOUS_GAP = gap


def scope_stats(moves: Iterable[MoveAssessment], model, exclusions: bool = True) -> FairPlayStats:  # noqa: ANN001
    """One scope's fair-play sums, through the service's own counting; ``exclusions=False``: without the
    obvious-move and recapture rules."""
    s = ScopeStats()
    with contextlib.nullcontext() if exclusions else without_obvious_rule():
        for a in moves:
            count_move([s], a if exclusions else a.model_copy(update={"recapture": False}), None, model)
    return s.fair


def alarm_z(f: FairPlayStats) -> float:
    """The larger of the match and loss z; -inf under the alerts' minimum of counted moves (it can never alarm)."""
    return f.strongest()[1] if f.n >= DEFAULT_MIN_MOVES else float("-inf")


def scope_z(moves: Iterable[MoveAssessment], model, exclusions: bool = True) -> tuple[float, int]:  # noqa: ANN001
    """(:func:`alarm_z`, counted moves) of one scope."""
    f = scope_stats(moves, model, exclusions)
    return alarm_z(f), f.n


def normal_tail_per_1000(zs: list[float], threshold: float) -> tuple[float, float, float]:
    """(mean, sd, alarms per 1,000 units) if the z of the units that can alarm (40+ counted moves) were normal with
    their own mean and sd: what the honest sample says about rates too rare to count in it."""
    live = [z for z in zs if z > float("-inf")]
    m, sd = float(np.mean(live)), float(np.std(live, ddof=1))
    return m, sd, 1000 * len(live) / len(zs) * 0.5 * math.erfc((threshold - m) / (sd * math.sqrt(2)))


def band(r: float) -> str:
    lo, hi = next(b for b in BANDS if b[0] <= r < b[1])
    return f"{lo}-{hi}"


def alarm_table(title: str, rows: list[tuple[float, str, str]]) -> None:
    """rows: (z, rating band, time class) per honest unit; prints false alarms per 1,000 at each threshold."""
    n = len(rows)
    print(f"\n{title}: {n} honest units (with {DEFAULT_MIN_MOVES}+ counted moves: {sum(z > float('-inf') for z, _, _ in rows)})")
    print("threshold  " + "  ".join(f"{t:>5}" for t in THRESHOLDS))
    for key, sel in [("all", lambda b, t: True)] + [(f"band {b}", lambda bb, t, b=b: bb == b) for b in sorted({r[1] for r in rows})] + \
                    [(f"{t}", lambda b, tt, t=t: tt == t) for t in sorted({r[2] for r in rows})]:
        zs = [z for z, b, t in rows if sel(b, t)]
        if not zs:
            continue
        cells = [f"{sum(z >= th for z in zs):>2}/{len(zs)}" for th in THRESHOLDS]
        print(f"{key:<10} " + "  ".join(f"{c:>5}" for c in cells) + "   per 1,000 at 4.75: "
              f"{1000 * sum(z >= DEFAULT_Z_THRESHOLD for z in zs) / len(zs):.1f}")
    zs_all = [z for z, _, _ in rows]
    (m, sd, rate), rate3 = normal_tail_per_1000(zs_all, DEFAULT_Z_THRESHOLD), normal_tail_per_1000(zs_all, DEFAULT_SCREEN_Z)[2]
    print(f"z of the units with {DEFAULT_MIN_MOVES}+ counted moves: mean {m:+.2f}, sd {sd:.2f} (a calibrated null: 0, 1); "
          f"were it normal so, per 1,000 units: {rate3:.1f} at {DEFAULT_SCREEN_Z}, {rate:.2f} at {DEFAULT_Z_THRESHOLD}")


def arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="fast")
    ap.add_argument("--events", type=int, default=520, help="held-out games as whole player-events, for detection")
    ap.add_argument("--honest-events", type=int, default=2000, help="held-out games as whole player-events, honest")
    ap.add_argument("--random", type=int, default=600, help="held-out games at random, honest")
    ap.add_argument("--tcec", type=int, default=100, help="TCEC engine games")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", type=int, default=2)
    ap.add_argument("--assist-events", type=int, default=None, help="simulate assistance in only the first N whole "
                    "player-events (sorted by event and player; default all)")
    ap.add_argument("--warm", action="store_true", help="only run the engine searches into the cache")
    add_data_argument(ap)
    return ap.parse_args()


def main() -> None:
    args = arguments()
    data = data_dir(args, "pgn/rated-holdout", "pgn/engine-tcec")
    config = PipelineConfig(get_profile(args.profile))
    samples = load_samples(data, args.events, args.honest_events, args.random, args.tcec, args.seed)

    async def run():  # noqa: ANN202
        async with EnginePool(size=args.engines, cache_path=ANALYSIS_CACHE) as pool:
            return await analyse(pool, config, samples, assist_events=args.assist_events)

    results, assisted = asyncio.run(run())
    if args.warm:
        return
    model = load_move_model(args.profile)
    report(samples, results, assisted, model, args.seed, config.profile)


def report(samples, results, assisted, model, seed: int, profile) -> None:  # noqa: ANN001
    # -- what the exclusions remove ----------------------------------------------------------------------------
    reasons: Counter = Counter()
    for g in samples.honest:
        for a in results.get(g.game_id, []):
            if not a.counted:  # the game step's rules, in its order: book plies, then forced, else decided
                reasons["book" if a.ply < profile.skip_plies else "forced" if len(a.candidates) <= 1 else "decided"] += 1
                continue
            values, idx = move_choice(a)
            reasons[exclusion(win_losses([v * 100 for v in values]).tolist(), a.recapture) or "counted"] += 1
    total = sum(reasons.values())
    print("moves of the honest sample by fair-play rule: " + ", ".join(f"{k} {v} ({100 * v / total:.1f} %)" for k, v in reasons.items()))
    # -- false alarms: player-games and player-events ------------------------------------------------------------
    for exclusions in (True, False):
        games, events = [], {}
        for g in samples.honest:
            for color, p in (("white", g.white), ("black", g.black)):
                mine = [a for a in results.get(g.game_id, []) if a.color == color]
                tclass = next((a.time_class for a in mine if a.time_class), UNKNOWN_CLASS)
                games.append((scope_z(mine, model, exclusions)[0], band(p.rating or 0), tclass))
                events.setdefault((g.event, p.id), ([], p.rating or 0, tclass))[0].extend(mine)
        label = "with the exclusions" if exclusions else "without the obvious-move and recapture rules"
        alarm_table(f"player-games, {label}", games)
        alarm_table(f"player-events, {label}", [(scope_z(m, model, exclusions)[0], band(r), t) for m, r, t in events.values()])
    # -- detection: simulated assistance over whole player-events -----------------------------------------------
    pes = whole_player_events(samples.events)
    print("\ndetection over whole held-out player-events (5-11 games), share of the player's moves replaced by the "
          "depth-12 first choice, re-valued at the service's limit; per threshold the share of player-events flagged")
    print("fraction  events  " + "  ".join(f"{t:>5}" for t in THRESHOLDS) + "   median z (match, loss)")
    for frac in (0.0, *FRACTIONS):
        zs, by_stat = [], []
        for (_, pid), games in sorted(pes.items()):
            moves: list[MoveAssessment] = []
            complete = True
            for g in games:
                color = "white" if g.white.id == pid else "black"
                alt = assisted.get((g.game_id, color))
                if alt is None:
                    complete = False
                    break
                rng = random.Random(f"{seed}:{g.game_id}:{color}:{frac}")
                for a in results.get(g.game_id, []):
                    if a.color == color:
                        moves.append(alt[a.ply] if a.ply in alt and rng.random() < frac else a)
            if complete:
                f = scope_stats(moves, model)
                zs.append(alarm_z(f))
                by_stat.append((f.z_match, f.z_loss))
        if zs:
            print(f"{frac:>8.0%}  {len(zs):>6}  " + "  ".join(f"{np.mean([z >= t for z in zs]):>5.0%}" for t in THRESHOLDS)
                  + f"   {np.median(zs):.1f} ({np.median([m for m, _ in by_stat]):.1f}, {np.median([x for _, x in by_stat]):.1f})")
    # -- TCEC: engine games as 100 % ------------------------------------------------------------------------------
    zs: dict[int, list[float]] = {}
    for ref in (2000, 2500, 2800) if samples.tcec else ():
        zs[ref] = []
        for g in samples.tcec:
            for color in ("white", "black"):
                mine = [a.model_copy(update={"reference_rating": ref}) for a in results.get(g.game_id, []) if a.color == color]
                zs[ref].append(scope_z(mine, model)[0])
    if zs:
        print(f"\nTCEC engine games ({len(samples.tcec)} games, each side one unit), share flagged at 4.75 if the engine "
              "were a human of rating R: " + ", ".join(f"R {r}: {np.mean([z >= DEFAULT_Z_THRESHOLD for z in v]):.0%} "
                                                       f"(median z {np.median(v):.1f})" for r, v in zs.items()))
    print(f"defaults: screening z {DEFAULT_SCREEN_Z}, action z {DEFAULT_Z_THRESHOLD}, {DEFAULT_MIN_MOVES}+ counted moves")


if __name__ == "__main__":
    main()
