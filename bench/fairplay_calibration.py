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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import numpy as np
from common import ANALYSIS_CACHE, add_data_argument, add_review_statistic_argument, clustered_mean, data_dir, family
from fairplay_data import (
    ASSIST_LIMITS,
    MIN_EVENT_GAMES,
    Assisted,
    Samples,
    analyse,
    load_samples,
    player_event_units,
    review_move_values,
    whole_player_events,
)
from scipy.stats import binomtest

from analyzers import fairplay
from analyzers.engine import EnginePool, Limits
from analyzers.fairplay import (
    DEFAULT_MIN_MOVES,
    DEFAULT_REVIEW_Z,
    DEFAULT_SCREEN_Z,
    DEFAULT_Z_THRESHOLD,
    FairPlayStats,
    ReviewCalibration,
    exclusion,
)
from analyzers.profiles import get_profile
from analyzers.ratingmodel import UNKNOWN_CLASS, load_move_model, win_losses
from schemas import FairPlayAlert, GameResult, MoveAssessment, ReviewRequest
from streamer.cli import build_config
from streamer.ingest import PgnGame
from streamer.pipeline import PipelineConfig, PlayerState, ScopeStats, apply_player_event, count_move, move_choice
from streamer.review import REVIEW_PROFILE, decided_profile, first_choices, record_of, review_stats

#: What a replay of a player-event gives (:func:`replayed_player_events`).
T = TypeVar("T")

THRESHOLDS = (3.0, 3.5, 4.0, 4.5, 4.75, 5.0)
#: The event length the detection target names: detection is also reported over player-events of at least this many games.
LONG_EVENT = 9
#: Service z at which a player-event is reviewed, tried (the lowest decides what the bench searches).
REVIEW_TRIGGERS = (1.5, 2.0, 2.5, 3.0)
#: The detection the review trigger is chosen for (on rated-dev): this share of the player-events of LONG_EVENT+ games
#: with half their moves assisted flagged at the action tier.
DETECTION_TARGET, TARGET_SHARE = 0.9, 0.5
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
    ap.add_argument("--assist-depth", type=int, default=ASSIST_LIMITS.depth, help="the assistant's depth (single PV)")
    ap.add_argument("--assist-draws", type=int, default=1, help="the review's and the deployed service's detection "
                    "over this many draws of which moves are assisted, per player-event (the assistant's moves are "
                    "searched once per position, so more draws cost no engine time): a rate over the draws, its "
                    "interval by player-event")
    ap.add_argument("--split", choices=("rated-holdout", "rated-dev"), default="rated-holdout",
                    help="where the games come from: rated-holdout (the measurement) or rated-dev (for choosing a method)")
    ap.add_argument("--warm", action="store_true", help="only run the engine searches into the cache")
    ap.add_argument("--review-values", action="store_true", help="also search, at the review's limits, the position "
                    "after every move the review counts that is not its first choice (the player's and the assistant's): "
                    "the inputs of a loss statistic at the review's depth (fairplay_data.review_move_values)")
    ap.add_argument("--review-calibration", type=Path, default=None, help="the review calibration to read instead of "
                    "the shipped one (e.g. one bench/fit_review.py --decided --out FILE wrote, which prices moves in "
                    "decided positions: the review then counts them)")
    add_review_statistic_argument(ap)
    add_data_argument(ap)
    args = ap.parse_args()
    if args.assist_draws < 1:
        ap.error("--assist-draws must be at least 1")
    return args


#: The review statistic the tables read (``--statistic``).
REVIEW_STATISTIC = "match"
#: The review calibration the tables read (``--review-calibration``; None: the shipped one).
REVIEW_CALIBRATION: Path | None = None


def main() -> None:
    global REVIEW_STATISTIC, REVIEW_CALIBRATION
    args = arguments()
    REVIEW_STATISTIC, REVIEW_CALIBRATION = args.statistic, args.review_calibration
    data = data_dir(args, f"pgn/{args.split}", *(["pgn/engine-tcec"] if args.tcec else []))
    config = PipelineConfig(get_profile(args.profile))
    samples = load_samples(data, args.events, args.honest_events, args.random, args.tcec, args.seed, args.split)

    model = load_move_model(args.profile)

    # the service's own configuration (calibration, move model, combination), as `kibitz` builds it, and with --review
    service = build_config(argparse.Namespace(profile=args.profile, depth=None, nodes=None, multipv=None))
    deployed = build_config(argparse.Namespace(profile=args.profile, depth=None, nodes=None, multipv=None, review=True))
    if REVIEW_CALIBRATION is not None:
        deployed = replace(deployed, review=ReviewCalibration.load(args.profile, REVIEW_CALIBRATION))

    async def run():  # noqa: ANN202
        async with EnginePool(size=args.engines, cache_path=ANALYSIS_CACHE) as pool:
            results, assisted = await analyse(pool, config, samples, assist_events=args.assist_events,
                                              assist=Limits(depth=args.assist_depth, multipv=1))
            # the review's searches: the bench's player-events, and the games of every request the service sends
            outs = service_outputs(samples.honest, results, deployed)
            units = review_units(samples, results, model) + request_units(outs, samples)
            units = list({(g.game_id, c): (g, c) for g, c in units}.values())
            firsts = await first_choices(pool, units, results, get_profile(REVIEW_PROFILE).limits,
                                         decided_profile(config.profile, deployed.review))
            if args.review_values:
                await review_move_values(pool, units, assisted, firsts, get_profile(REVIEW_PROFILE).limits)
            return results, assisted, outs, firsts

    results, assisted, deployed_outs, firsts = asyncio.run(run())
    if args.warm:
        return
    report(samples, results, assisted, model, args.seed, config.profile, args.assist_depth)
    service_alert_report(samples.honest, results, service)
    review_report(samples, results, assisted, firsts, model, args.seed, args.assist_depth, args.assist_draws)
    deployed_report(samples, results, assisted, firsts, model, deployed, deployed_outs, args.seed, args.assist_depth,
                    args.assist_draws)


def draw_seed(seed: int, draw: int) -> int | str:
    """The seed of draw ``draw`` of which moves are assisted (``--assist-draws``): the first is ``seed`` itself, so a
    single draw is the bench's run without draws."""
    return seed if draw == 0 else f"{seed}/{draw}"


def drawn_player_events(samples: Samples, results: dict[str, list[MoveAssessment]], assisted: Assisted, frac: float,
                        seed: int, draws: int) -> Iterator[tuple[tuple[str, str], list[PgnGame], int, list[MoveAssessment]]]:
    """((event, player), their games, the draw, their moves with a share ``frac`` assisted) for every whole
    player-event of the detection sample whose games have assisted alternatives, under each of ``draws`` draws
    (:func:`draw_seed`)."""
    for (event, pid), games in sorted(whole_player_events(samples.events).items()):
        for d in range(draws):
            moves = event_moves(pid, games, results, assisted, frac, draw_seed(seed, d))
            if moves is None:
                break  # no draw has alternatives where the first has none
            yield (event, pid), games, d, moves


def replayed_player_events(samples: Samples, results: dict[str, list[MoveAssessment]], assisted: Assisted, frac: float,
                           seed: int, draws: int, replay: Callable[[str, list[PgnGame], list[MoveAssessment]], T]
                           ) -> Iterator[tuple[tuple[str, str], list[PgnGame], int, T]]:
    """((event, player), their games, the draw, ``replay(player, games, moves)``) for each of
    :func:`drawn_player_events`. Draws that drew the same moves (every draw at 0 % and at 100 % assistance) are
    replayed once: a replay is deterministic and depends on nothing else of the draw than each move's game, ply and
    move, so the rows are those of replaying each."""
    done: dict[tuple[tuple[str, int, str], ...], T] = {}
    for (event, pid), games, draw, moves in drawn_player_events(samples, results, assisted, frac, seed, draws):
        key = tuple((a.game_id, a.ply, a.uci) for a in moves)
        if key not in done:
            done[key] = replay(pid, games, moves)
        yield (event, pid), games, draw, done[key]


def event_moves(pid: str, games: list[PgnGame], results: dict[str, list[MoveAssessment]], assisted: Assisted, frac: float,
                seed: int | str) -> list[MoveAssessment] | None:
    """A player's moves over their event with a share ``frac`` replaced by the assistant's (each move drawn alone,
    seeded by ``seed``, game, color and share); None when a game of it has no assisted alternatives."""
    moves: list[MoveAssessment] = []
    for g in games:
        color = "white" if g.white.id == pid else "black"
        alt = assisted.get((g.game_id, color))
        if alt is None:
            return None
        rng = random.Random(f"{seed}:{g.game_id}:{color}:{frac}")
        moves += [alt[a.ply] if a.ply in alt and rng.random() < frac else a for a in results.get(g.game_id, []) if a.color == color]
    return moves


def report(samples, results, assisted, model, seed: int, profile, assist_depth: int) -> None:  # noqa: ANN001
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
        games: list[tuple[float, str, str]] = []
        events: dict[tuple[str, str], tuple[list[MoveAssessment], float, str]] = {}
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
    print(f"\ndetection over whole {samples.split} player-events (5-11 games), share of the player's moves replaced by the "
          f"depth-{assist_depth} first choice, re-valued at the service's limit; per threshold the share of player-events flagged")
    print("fraction  events  " + "  ".join(f"{t:>5}" for t in THRESHOLDS) + "   median z (match, loss)")
    for frac in (0.0, *FRACTIONS):
        zs, by_stat = [], []
        for _, _, _, moves in drawn_player_events(samples, results, assisted, frac, seed, 1):
            f = scope_stats(moves, model)
            zs.append(alarm_z(f))
            by_stat.append((f.z_match, f.z_loss))
        if zs:
            print(f"{frac:>8.0%}  {len(zs):>6}  " + "  ".join(f"{np.mean([z >= t for z in zs]):>5.0%}" for t in THRESHOLDS)
                  + f"   {np.median(zs):.1f} ({np.median([m for m, _ in by_stat]):.1f}, {np.median([x for _, x in by_stat]):.1f})")
    # -- TCEC: engine games as 100 % ------------------------------------------------------------------------------
    tcec_zs: dict[int, list[float]] = {}
    for ref in (2000, 2500, 2800) if samples.tcec else ():
        tcec_zs[ref] = []
        for g in samples.tcec:
            for color in ("white", "black"):
                mine = [a.model_copy(update={"reference_rating": ref}) for a in results.get(g.game_id, []) if a.color == color]
                tcec_zs[ref].append(scope_z(mine, model)[0])
    if tcec_zs:
        print(f"\nTCEC engine games ({len(samples.tcec)} games, each side one unit), share flagged at 4.75 if the engine "
              "were a human of rating R: " + ", ".join(f"R {r}: {np.mean([z >= DEFAULT_Z_THRESHOLD for z in v]):.0%} "
                                                       f"(median z {np.median(v):.1f})" for r, v in tcec_zs.items()))
    print(f"defaults: screening z {DEFAULT_SCREEN_Z}, action z {DEFAULT_Z_THRESHOLD}, {DEFAULT_MIN_MOVES}+ counted moves")



def service_outputs(games: Sequence[PgnGame], results: dict[str, list[MoveAssessment]], config: PipelineConfig,
                    only: str | None = None) -> list[FairPlayAlert | ReviewRequest]:
    """The fair-play alerts (and, with ``config.review``, the review requests) the service's player step publishes on
    ``games`` under ``config``: each game's assessments, then its two game results (with the game's record, as the
    game step sends them), through :func:`~streamer.pipeline.apply_player_event` (one state per player, one game after
    another in the sample's order), so every scope (game, event, player) and the one alert per crossing are the
    service's own. ``only``: that player's events alone."""
    players: dict[str, PlayerState] = {}
    out: list[FairPlayAlert | ReviewRequest] = []

    def feed(ev: MoveAssessment | GameResult) -> None:
        if only is not None and ev.player_id != only:
            return
        players[ev.player_id], msgs = apply_player_event(players.get(ev.player_id), ev, config)
        out.extend(m for m in msgs if isinstance(m, FairPlayAlert | ReviewRequest))

    for g in games:
        for a in results.get(g.game_id, []):
            feed(a)
        score = g.white_score
        if score is None:
            continue  # no result: the player step never closes the game, as live
        record = record_of(g) if config.review is not None else None
        for color, me, opp, s in (("white", g.white, g.black, score), ("black", g.black, g.white, 1.0 - score)):
            feed(GameResult(game_id=g.game_id, player_id=me.id, color=color, score=s, event=g.event, player=me, opponent=opp,
                            record=record))
    return out


def service_alerts(games: Sequence[PgnGame], results: dict[str, list[MoveAssessment]], config: PipelineConfig) -> list[FairPlayAlert]:
    """:func:`service_outputs`' alerts."""
    return [m for m in service_outputs(games, results, config) if isinstance(m, FairPlayAlert)]


def service_alert_report(honest: Sequence[PgnGame], results: dict[str, list[MoveAssessment]], config: PipelineConfig) -> None:
    """How many alerts the service itself would publish on the honest sample at each screening trigger: by tier and
    by the scope each names (game, event, player), per 1,000 honest player-games, with the players they concern.
    This is the review queue a screening default fills, all scopes counted (the review tables count event scopes)."""
    pgames = 2 * sum(1 for g in honest if results.get(g.game_id))
    pevents = len(player_event_units(honest))
    players = len({p.id for g in honest for p in (g.white, g.black)})
    print(f"\nalerts the service publishes on the honest sample ({pgames} player-games, {pevents} player-events, {players} "
          f"players; the player step replayed game after game, one alert per crossing, action tier {config.z_threshold})")
    print("screening z  screening alerts (game / event / player scope)  per 1,000 player-games  players queued  "
          "action alerts (game / event / player)")
    for trigger in REVIEW_TRIGGERS:
        alerts = service_alerts(honest, results, replace(config, screen_z=trigger))
        by = Counter((a.tier, a.scope) for a in alerts)
        screening = [a for a in alerts if a.tier == "screening"]
        action = [a for a in alerts if a.tier == "action"]
        print(f"{trigger:>11}  {len(screening):>5} ({by['screening', 'game']} / {by['screening', 'event']} / {by['screening', 'player']})"
              f"{'':>26}{1000 * len(screening) / max(pgames, 1):>6.1f}{len({a.player_id for a in screening}):>17}  "
              f"{len(action):>5} ({by['action', 'game']} / {by['action', 'event']} / {by['action', 'player']})")


def review_units(samples: Samples, results: dict[str, list[MoveAssessment]], model) -> list[tuple[PgnGame, str]]:  # noqa: ANN001
    """What the review searches: every game of the whole player-events (detection; honest at share 0), and those of
    each honest player-event whose service z reaches the lowest review trigger."""
    units = [u for pid_games in player_event_units(samples.events).values() if len(pid_games) >= MIN_EVENT_GAMES for u in pid_games]
    for us in player_event_units(samples.honest).values():
        moves = [a for g, color in us for a in results.get(g.game_id, []) if a.color == color]
        if scope_z(moves, model)[0] >= REVIEW_TRIGGERS[0]:
            units += us
    return list({(g.game_id, c): (g, c) for g, c in units}.values())


def reviewed_z(moves: list[MoveAssessment], firsts: dict[tuple[str, str], dict[int, str]], model, calibration) -> float:  # noqa: ANN001
    """The review's z over one scope's moves (-inf under the alerts' minimum of counted moves): its match count's, or
    with ``--statistic weighted`` the weighted count's (analyzers.fairplay.ReviewStats)."""
    deep = [(a, firsts.get((a.game_id, a.color), {}).get(a.ply)) for a in moves]
    # the move model's profile is the service's
    f = review_stats([(a, d) for a, d in deep if d is not None], model, calibration,
                     decided_profile(get_profile(model.profile), calibration))
    return f.z_of(REVIEW_STATISTIC) if f.n >= DEFAULT_MIN_MOVES else float("-inf")


def review_flags(rows: Iterable[tuple[float, float]], trigger: float) -> list[bool]:
    """Per (service z, review z) row: reviewed (service z at ``trigger``) and flagged (review z at the action tier)."""
    return [z8 >= trigger and zr >= DEFAULT_REVIEW_Z for z8, zr in rows]


def review_report(samples, results, assisted, firsts, model, seed: int, assist_depth: int,  # noqa: ANN001
                  draws: int = 1) -> None:
    """The second stage: player-events whose service z reaches a trigger are searched again at the review profile,
    and the action tier is the review's z at DEFAULT_REVIEW_Z. With ``draws`` > 1 each player-event is assisted under
    that many draws (as :func:`deployed_report`) and every share is over player-events x draws, the trigger rule's
    too."""
    calibration = ReviewCalibration.load(model.profile, REVIEW_CALIBRATION)
    review_key = get_profile(REVIEW_PROFILE).limits.key
    print(f"\nthe review ({REVIEW_PROFILE} profile, {review_key}; expected matches from the move model and "
          f"{calibration.command if calibration else 'no review calibration'}): a player-event is reviewed when its service z "
          f"reaches the trigger, flagged when the review's {REVIEW_STATISTIC} z reaches {DEFAULT_REVIEW_Z}")
    # honest: every player-event of the honest sample (those under the lowest trigger are never reviewed)
    honest = []
    for us in player_event_units(samples.honest).values():
        moves = [a for g, color in us for a in results.get(g.game_id, []) if a.color == color]
        z8 = scope_z(moves, model)[0]
        honest.append((z8, reviewed_z(moves, firsts, model, calibration) if z8 >= REVIEW_TRIGGERS[0] else float("-inf")))
    print(f"honest player-events: {len(honest)}; per trigger, reviewed / flagged at {DEFAULT_REVIEW_Z}: " + ", ".join(
        f"z >= {t}: {sum(z8 >= t for z8, _ in honest)} / {sum(review_flags(honest, t))}"
        for t in REVIEW_TRIGGERS))
    drawn = f", {draws} draws each" if draws > 1 else ""
    print(f"whole player-events, share replaced by the depth-{assist_depth} first choice (the review searches depth "
          f"{get_profile(REVIEW_PROFILE).depth}{drawn}); flagged after each trigger")
    by_frac: dict[float, list[tuple[int, float, float, str]]] = {}
    for frac in (0.0, *FRACTIONS):
        by_frac[frac] = [(len(games), *zs, family(games[0].game_id)) for _, games, _, zs in replayed_player_events(
            samples, results, assisted, frac, seed, draws,
            lambda _, games, moves: (scope_z(moves, model)[0], reviewed_z(moves, firsts, model, calibration)))]
    for label, least in (("all whole player-events (5-11 games)", 0), (f"player-events of {LONG_EVENT}+ games", LONG_EVENT)):
        print(f"{label}\nfraction  events  review z mean (sd)  " + "  ".join(f"{'z >= ' + str(t):>9}" for t in REVIEW_TRIGGERS)
              + "  (every event reviewed)")
        for frac, all_rows in by_frac.items():
            rows = [(z8, zr) for n, z8, zr, _ in all_rows if n >= least]
            live = [zr for _, zr in rows if zr > float("-inf")]
            if len(live) > 1:
                cells = [f"{np.mean(review_flags(rows, t)):>9.0%}" for t in (*REVIEW_TRIGGERS, float("-inf"))]
                print(f"{frac:>8.0%}  {len(rows) // draws:>6}  {np.mean(live):+8.2f} ({np.std(live, ddof=1):.2f})    "
                      + "  ".join(cells))
    # the trigger rule: the highest trigger (the fewest honest reviews) that reaches the detection target
    review_z_by_family(by_frac)
    long_rows = [(z8, zr) for n, z8, zr, _ in by_frac[TARGET_SHARE] if n >= LONG_EVENT]
    detection = {t: float(np.mean(review_flags(long_rows, t))) if long_rows else 0.0
                 for t in REVIEW_TRIGGERS}
    reached = [t for t in REVIEW_TRIGGERS if detection[t] >= DETECTION_TARGET]
    if reached:
        t = max(reached)
        print(f"the highest trigger that flags {DETECTION_TARGET:.0%}+ of the {len(long_rows) // draws} player-events of "
              f"{LONG_EVENT}+ games{drawn} at {TARGET_SHARE:.0%} assistance: service z >= {t} ({detection[t]:.0%}; it reviews "
              f"{sum(z8 >= t for z8, _ in honest)} and flags {sum(review_flags(honest, t))} "
              f"of {len(honest)} honest player-events)")
    else:
        print(f"no trigger flags {DETECTION_TARGET:.0%} of the {len(long_rows) // draws} player-events of {LONG_EVENT}+ "
              f"games{drawn} at {TARGET_SHARE:.0%} assistance (best: {max(detection.values()):.0%})")



def request_units(outputs: Iterable[FairPlayAlert | ReviewRequest], samples: Samples) -> list[tuple[PgnGame, str]]:
    """(game, the requested player's color) of every game the review requests among ``outputs`` hold: what their
    reviews search."""
    by_id = {g.game_id: g for g in samples.honest}
    return [(by_id[g.game_id], "white" if g.white.id == r.player_id else "black") for r in outputs
            if isinstance(r, ReviewRequest) for g in r.games if g.game_id in by_id]


def request_z(req: ReviewRequest, results: dict[str, list[MoveAssessment]], firsts, model, calibration) -> float:  # noqa: ANN001
    """The review's match z over the requested player's moves in the request's games (-inf under 40 counted moves)."""
    moves = [a for g in req.games for a in results.get(g.game_id, []) if a.player_id == req.player_id]
    return reviewed_z(moves, firsts, model, calibration)


def deployed_report(samples, results, assisted, firsts, model, deployed: PipelineConfig,  # noqa: ANN001
                    outs: list[FairPlayAlert | ReviewRequest], seed: int, assist_depth: int, draws: int = 1) -> None:
    """The service as `kibitz worker --review` runs it: at each game end of a player over a tier, the scope of its
    finding (any scope) is reviewed over the games the player step sends with it, and the review's z at the action
    tier is the verdict, one per crossing.
    Honest: the verdicts on the honest sample (``outs``: :func:`service_outputs` of it under ``deployed``). Detection:
    each whole player-event replayed alone with a share of the player's moves assisted; flagged when a review of it
    reaches the action tier. With ``draws`` > 1 each player-event is replayed under that many draws of which moves
    are assisted (the first is the single draw's): the rate is over player-events x draws, and its interval treats
    a player-event's draws as one cluster (they share its games), so more draws narrow it only as far as the
    player-events allow."""
    cal, action = deployed.review, deployed.review_z
    requests = [m for m in outs if isinstance(m, ReviewRequest)]
    published = [m for m in outs if isinstance(m, FairPlayAlert)]
    honest_z = [request_z(r, results, firsts, model, cal) for r in requests]
    crossing_z: dict[tuple[str, str], float] = {}
    for r, z in zip(requests, honest_z):
        crossing_z[(r.player_id, r.crossing)] = max(z, crossing_z.get((r.player_id, r.crossing), -math.inf))
    verdicts = {k for k, z in crossing_z.items() if z >= action}
    pevents = len(player_event_units(samples.honest))
    print(f"\nthe service with --review (screening {deployed.screen_z}, action {action}; at each game end of a player over a "
          f"tier the scope of the finding reviewed at {get_profile(REVIEW_PROFILE).limits.key}): honest sample, "
          f"{2 * len(samples.honest)} player-games, {pevents} player-events: {len(requests)} reviews of "
          f"{len({(r.player_id, r.crossing) for r in requests})} crossings (scopes {dict(Counter(r.alert.scope for r in requests))}), "
          f"{len(verdicts)} verdicts at the action tier ({len({p for p, _ in verdicts})} players); the service's own alerts "
          f"(screening only with the review): {len(published)}")
    for r, z in zip(requests, honest_z):  # each honest verdict's review: who, where, what it read
        if z >= action and crossing_z[(r.player_id, r.crossing)] == z:
            print(f"  honest verdict: player {r.player_id} (reference {r.alert.reference_rating}), {r.alert.scope} "
                  f"{r.alert.scope_id}, {len(r.games)} games, review z {z:+.2f} (service z {r.alert.z:+.2f})")
    drawn = f" under {draws} draws each of which moves are assisted" if draws > 1 else ""
    print(f"whole player-events, share replaced by the depth-{assist_depth} first choice, each replayed alone{drawn}: "
          "flagged by a review verdict")
    print("fraction  events (5-11 games) flagged   events of 9+ games flagged (count; 95 % "
          f"{'interval by player-event' if draws > 1 else 'Wilson interval'})   reviewed (9+)")
    def replay_deployed(pid: str, games: list[PgnGame], moves: list[MoveAssessment]) -> tuple[float, bool]:
        """(the highest review z of the player's requests, whether any was sent) of the service replayed on ``moves``."""
        mine = {g.game_id: [a for a in moves if a.game_id == g.game_id] for g in games}
        reqs = [m for m in service_outputs(games, mine, deployed, only=pid) if isinstance(m, ReviewRequest)]
        return max((request_z(r, mine, firsts, model, cal) for r in reqs), default=-math.inf), bool(reqs)

    best_z: dict[float, list[tuple[int, float]]] = {}  # per share: (games, the highest review z of the player-event)
    for frac in (0.0, *FRACTIONS):
        rows: list[DeployedRow] = []  # one per draw
        for (event, pid), games, draw, (top, reviewed) in replayed_player_events(
                samples, results, assisted, frac, seed, draws, replay_deployed):
            rows.append((f"{event}\t{pid}", len(games), top >= action, reviewed, draw, family(games[0].game_id)))
            best_z.setdefault(frac, []).append((len(games), top))
        long_rows = [r for r in rows if r[1] >= LONG_EVENT]
        if rows and long_rows:
            k, n = sum(r[2] for r in long_rows), len(long_rows)
            if draws > 1:
                share, lo, hi, units = flagged_share(long_rows)
                count = f"{k}/{n} over {units} player-events x {draws}"
                first = [r for r in rows if r[4] == 0]  # the single run's rows
                first_long = [r for r in first if r[1] >= LONG_EVENT]
                k1 = sum(r[2] for r in first_long)
                lo1, hi1 = proportion_interval(k1, len(first_long))
                tail = (f"   the first draw alone: {np.mean([r[2] for r in first]):.0%}, 9+ games {k1}/{len(first_long)} "
                        f"({lo1:.0%}-{hi1:.0%})")
            else:
                (lo, hi), count, tail = proportion_interval(k, n), f"{k}/{n}", ""
            print(f"{frac:>8.0%}  {len({r[0] for r in rows}):>6} {np.mean([r[2] for r in rows]):>14.0%}   "
                  f"{len({r[0] for r in long_rows}):>6} {k / n:>20.0%} ({count}; {lo:.0%}-{hi:.0%})   "
                  f"{np.mean([r[3] for r in long_rows]):>12.0%}{tail}")
            if frac == TARGET_SHARE:
                share_by_family(long_rows)
    review_threshold_table(honest_z, crossing_z, pevents, best_z)


def review_z_by_family(by_frac: dict[float, list[tuple[int, float, float, str]]]) -> None:
    """The review's z at the end of the player-events of 9+ games (every event reviewed) by event family, honest and
    half-assisted: (games, service z, review z, family) rows per share, one per draw."""
    print(f"player-events of {LONG_EVENT}+ games by family, every event reviewed at its end: review z mean (sd) at 0 % and "
          f"{TARGET_SHARE:.0%}, and the share of the {TARGET_SHARE:.0%} rows at {DEFAULT_REVIEW_Z}")
    rows = {frac: [r for r in by_frac.get(frac, []) if r[0] >= LONG_EVENT and r[2] > -math.inf] for frac in (0.0, TARGET_SHARE)}
    for name in sorted({r[3] for r in rows[TARGET_SHARE]}):
        z0, z5 = ([r[2] for r in rows[frac] if r[3] == name] for frac in (0.0, TARGET_SHARE))
        if len(z0) > 1 and len(z5) > 1:
            print(f"          {name}: {np.mean(z0):+.2f} ({np.std(z0, ddof=1):.2f}) -> {np.mean(z5):+.2f} "
                  f"({np.std(z5, ddof=1):.2f}), shift {np.mean(z5) - np.mean(z0):+.2f}; "
                  f"{np.mean([z >= DEFAULT_REVIEW_Z for z in z5]):.0%} of {len(z5)}")


DeployedRow = tuple[str, int, bool, bool, int, str]  # (player-event, games, flagged, reviewed, draw, family)


def flagged_share(rows: list[DeployedRow]) -> tuple[float, float, float, int]:
    """(share flagged, its 95 % interval's low and high, player-events) of rows one per draw: the interval by
    player-event (``clustered_mean``: a player-event's draws share its games); where every player-event is alike (none
    or all flagged in every draw) there is no spread to read, so the player-events' Wilson interval."""
    share, half, units = clustered_mean(np.array([float(r[2]) for r in rows]), [r[0] for r in rows])
    if not half > 0:
        return (share, *proportion_interval(round(share * units), units), units)
    return share, max(share - half, 0.0), min(share + half, 1.0), units


def share_by_family(rows: list[DeployedRow]) -> None:
    """Detection of the player-events of 9+ games by event family (:func:`flagged_share` of each family's rows)."""
    for name in sorted({r[5] for r in rows}):
        mine = [r for r in rows if r[5] == name]
        share, lo, hi, units = flagged_share(mine)
        print(f"          {name}: {sum(r[2] for r in mine)}/{len(mine)} ({share:.0%}; {lo:.0%}-{hi:.0%}) over {units} "
              f"player-events, reviewed {np.mean([r[3] for r in mine]):.0%}")


def proportion_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a share ``k`` / ``n``: a detection rate over a few dozen player-events is known
    only to within 10-15 points either way, which the table says next to it."""
    if n <= 0:
        return math.nan, math.nan
    ci = binomtest(k, n).proportion_ci(level, method="wilson")
    return float(ci.low), float(ci.high)


#: The review's action tiers the table below tries (the service's default is fairplay.DEFAULT_REVIEW_Z).
REVIEW_THRESHOLDS = (3.25, 3.5, 3.75, 4.0, 4.25, 4.5, 4.75, 5.0, 5.25, 5.5)
#: The false alarms the review's action tier is chosen for: the lowest tier whose normal bound per 1,000 honest
#: player-events is at most this (on rated-dev).
REVIEW_BOUND_TARGET = 1.0


def review_threshold_table(honest_z: list[float], crossing_z: dict[tuple[str, str], float], pevents: int,
                           best_z: dict[float, list[tuple[int, float]]]) -> None:
    """What other review action tiers would give, from the same replays: honest verdicts (crossings whose highest
    review reaches the tier) per 1,000 player-events, detection of half-assisted player-events, and the tier a normal
    model of the honest reviews supports: every review a look, so a player-event's false-alarm rate is at most
    (reviews per player-event) x P(z >= tier) under N(mean, sd) of the honest reviews' z (a union bound); the rule
    takes the lowest tier where that is at most REVIEW_BOUND_TARGET. Beside it, the same normal model per crossing
    (one verdict each, from the highest of its reviews): (crossings per player-event) x P(highest z >= tier) under
    N(mean, sd) of the crossings' highest z. It counts a crossing's reviews (the same games growing) once, so it is
    lower; it is printed, not used, because the replays review with a calibration fitted on these very games, which
    understates how high an unseen honest player's z goes (docs/fairplay.md)."""
    if len(honest_z) < 2:
        return
    looks = len(honest_z) / max(pevents, 1)
    mean, sd, _ = normal_tail_per_1000(honest_z, DEFAULT_REVIEW_Z)
    print(f"honest reviews: {len(honest_z)} ({looks:.2f} per player-event), review z mean {mean:+.2f}, sd {sd:.2f}, "
          f"max {max(honest_z):+.2f}")
    print("review tier   honest verdicts (per 1,000 player-events)   union bound per 1,000 (per crossing)   50 %: flagged 5-11 / 9+ games"
          "   100 %: 9+")
    half, full = best_z.get(0.5, []), best_z.get(1.0, [])
    long_half = [z for n, z in half if n >= LONG_EVENT]
    long_full = [z for n, z in full if n >= LONG_EVENT]
    tops = list(crossing_z.values())
    per_crossing = len(tops) / max(pevents, 1)

    def by_crossing(t: float) -> tuple[float, float, float]:
        """(mean, sd, rate per 1,000 player-events) of the normal model per crossing; nan for a single crossing."""
        if len(tops) < 2:
            return math.nan, math.nan, math.nan
        m, s, rate = normal_tail_per_1000(tops, t)
        return m, s, per_crossing * rate

    cmean, csd, _ = by_crossing(DEFAULT_REVIEW_Z)
    print(f"crossings: {len(tops)} ({per_crossing:.3f} per player-event), highest review z mean {cmean:+.2f}, sd {csd:.2f}")
    supported = None
    for t in REVIEW_THRESHOLDS:
        honest = sum(1 for z in tops if z >= t)
        bound = looks * normal_tail_per_1000(honest_z, t)[2]  # per review, times reviews per player-event
        if supported is None and bound <= REVIEW_BOUND_TARGET:
            supported = t
        det = f"{np.mean([z >= t for _, z in half]):.0%} / {np.mean([z >= t for z in long_half]):.0%}" if long_half else "-"
        print(f"{t:>11.2f}   {honest:>6} ({1000 * honest / max(pevents, 1):.1f}){'':>24}{bound:>8.2f} "
              f"(per crossing {by_crossing(t)[2]:.2f})   {det:>24}   "
              f"{np.mean([z >= t for z in long_full]) if long_full else float('nan'):>8.0%}")
    print(f"the lowest tier whose union bound is at most {REVIEW_BOUND_TARGET:g} per 1,000 player-events: "
          f"{supported if supported is not None else f'none up to {REVIEW_THRESHOLDS[-1]}'} (the service's default, "
          f"for the match count: {DEFAULT_REVIEW_Z})")


if __name__ == "__main__":
    main()
