"""Fit the review's expected matches (streamer/review.py, docs/models.md s. 7) on rated-dev and elite-otb. Never on
rated-holdout.

    python bench/fit_review.py [--profile fast] [--dev 300] [--elite 0] [--seed 0] [--check] [--dispersion] [--no-clock]
                                [--write [--decided] [--out FILE]]

The review matches a player's moves against a deeper search's first choice (profile ``deep``: depth 12, one PV),
each expected with the move model's probability p of that move, which the model computes from the service's
shallower values. There the deeper choice is often second or third, and honest players find it more often than
those values say: uncorrected, the plain match count's z of honest held-out player-events has mean +3.4 and sd 2.6. This fits

    P(match) = sigmoid(b0 + b1 logit(p) + b2 top [+ b3 z [+ k1 x_left + k2 x_spent + k3 unclocked]])
                                                                  (analyzers.fairplay.ReviewCalibration)

(z = (R - 1800) / 400, the reference rating; x_left, x_spent the move model's clock inputs of the move, unclocked 1
where it has none) by maximum likelihood (scikit-learn) on every counted move of the
rated-dev player-events sample (the first ``--dev`` games of the sample bench/warm_cache.py analyses) and of
``--elite`` elite-otb games (the top of the scale, over-the-board classical play, which rated-dev lacks; any game also
in ../shared/data/pgn/ferreira-2012 is left out, so those events stay a check). The service's analyses come from the
analysis cache, the depth-12 searches are made here and cached. The fit kept is the one of FITS (without the rating
term, with it, with it and the clock term) with the best log-likelihood of the moves cross-validated by group (two
folds; a group is a rated-dev event or an elite player, on one side only). It prints, per honest scope of 40+
counted moves (a rated-dev player-event; an elite player's sampled games in runs of 9), the review's z with the raw p
and with each fit, cross-validated. ``--check`` then reviews every player of ferreira-2012's events of 2011 (London
Chess Classic, Tal Memorial, Candidates; honest elite classical, never fitted on) under the raw p, the shipped
calibration and this fit. ``--write`` saves analyzers/calibrations/<profile>.review.json (or ``--out FILE``), fitted
on every move, with the command.

Beside the counted moves it fits, on the moves in decided positions (which the service does not count), their own
term, P(match) = sigmoid(d0 + d1 logit(p) + d2 top + d3 z + d4 ahead), and prints the z tables and the check with them
counted too. ``--decided`` writes that term into the file, so that a review with it counts those moves; the shipped
calibration has none: on rated-dev the term raised the one honest outlier as much as it raised half-assisted play
(docs/fairplay.md, "Decided positions in the review").

``--dispersion`` prints where the honest z's excess spread comes from: its sd by counted moves, the reference-rating
deviation each rating band's excess implies, and what such an RD in the z would do (docs/fairplay.md, "An uncertain
reference rating").

Needs scikit-learn (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np
from common import ANALYSIS_CACHE, ROOT, add_data_argument, add_review_statistic_argument, data_dir
from sklearn.linear_model import LogisticRegression
from warm_cache import ELITE_FILE

from analyzers.engine import EnginePool
from analyzers.fairplay import DEFAULT_MIN_MOVES, ReviewCalibration, ReviewStats
from analyzers.profiles import get_profile
from analyzers.ratingmodel import load_move_model
from schemas import MoveAssessment, PlayerInfo
from streamer.batch import assess_games, sample_player_events, sample_rated_games_from_file
from streamer.ingest import PgnGame, read_pgn_games
from streamer.pipeline import PipelineConfig
from streamer.review import REVIEW_PROFILE, clock_of, first_choices, review_move, review_terms

#: One row per counted move: (scope, fold group, player id, the service's assessment, the deeper search's first
#: choice). A scope is what a z is computed over (a rated-dev player-event; an elite player's games in runs of
#: :data:`ELITE_RUN`); a fold group is kept on one side of the cross-validation (a rated-dev event; an elite player).
Row = tuple[str, str, str, MoveAssessment, str]

#: Elite-otb games are a random draw from one archive, a player's games from many years: their honest scopes are runs
#: of this many sampled games of one player (an event's worth, as the detection criterion's 9 games).
ELITE_RUN = 9


def ferreira_keys(data) -> set[tuple[str, ...]]:  # noqa: ANN001
    """The move lists of every game in pgn/ferreira-2012 (the check events; left out of the fit)."""
    return {tuple(g.moves) for path in sorted((data / "pgn" / "ferreira-2012").glob("*.pgn")) for g in read_pgn_games(path)}


def sampled_games(args: argparse.Namespace) -> tuple[list[PgnGame], list[PgnGame]]:
    """(rated-dev games, elite-otb games) of the fit, as bench/warm_cache.py draws them."""
    data = data_dir(args, "pgn/rated-dev", *(["pgn/elite-otb", "pgn/ferreira-2012"] if args.elite else []))
    dev = sample_player_events(data / "pgn" / "rated-dev", args.dev, seed=args.seed)
    elite: list[PgnGame] = []
    if args.elite:
        skip = ferreira_keys(data)
        drawn = sample_rated_games_from_file(data.joinpath(*ELITE_FILE), args.elite, seed=args.seed)
        elite = [g for g in drawn if tuple(g.moves) not in skip]
        print(f"elite-otb: {len(elite)} of {len(drawn)} games ({len(drawn) - len(elite)} also in ferreira-2012, left out)")
    return dev, elite


async def searched_rows(args: argparse.Namespace, config: PipelineConfig, games: list[PgnGame],
                        scope_of: Callable[[PgnGame, PlayerInfo], tuple[str, str]]) -> list[Row]:
    """``games`` assessed as the service does and each counted move of either side searched at the review's limits
    (both from the analysis cache where it has them); one row per counted move, its (scope, fold group) from
    ``scope_of(game, player)``, called once per player-game in order."""
    async with EnginePool(size=args.engines, cache_path=ANALYSIS_CACHE) as pool:
        assessed = await assess_games(games, pool, config)
        units = [(g, color) for g in games for color in ("white", "black")]
        firsts = await first_choices(pool, units, assessed, get_profile(REVIEW_PROFILE).limits, config.profile)
    out: list[Row] = []
    for g, color in units:
        deep = firsts.get((g.game_id, color), {})
        player = g.white if color == "white" else g.black
        scope, group = scope_of(g, player)
        out += [(scope, group, player.id, a, deep[a.ply]) for a in assessed.get(g.game_id, []) if a.color == color and a.ply in deep]
    return out


def fit_scopes(elite: list[PgnGame]) -> Callable[[PgnGame, PlayerInfo], tuple[str, str]]:
    """The fit's ``scope_of`` (:func:`searched_rows`), called once per player-game in order: a rated-dev player-game's
    scope and group are its event; an elite player's games go in runs of :data:`ELITE_RUN`, the player's group."""
    is_elite = {g.game_id for g in elite}
    runs: dict[str, int] = defaultdict(int)  # elite player -> games of theirs seen so far

    def scope_of(g: PgnGame, player: PlayerInfo) -> tuple[str, str]:
        if g.game_id not in is_elite:
            return g.event, g.event
        run = runs[player.id] // ELITE_RUN
        runs[player.id] += 1
        return f"elite:{player.id}:{run}", f"elite:{player.id}"

    return scope_of


async def rows(args: argparse.Namespace, config: PipelineConfig) -> list[Row]:
    """The fit's rows, scoped by :func:`fit_scopes`."""
    dev, elite = sampled_games(args)
    return await searched_rows(args, config, dev + elite, fit_scopes(elite))


#: The fits compared: name -> how many of the feature columns (logit p, top, z, x_left, x_spent, unclocked) it reads.
FITS = {"logit(p), top": 2, "logit(p), top, rating": 3, "logit(p), top, rating, clock": 6}
#: The columns of the fit with the clock term (``--no-clock`` keeps the best of those with fewer).
WITH_CLOCK = 6


def fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Logistic regression by maximum likelihood (scikit-learn, no penalty): b over the columns of ``x``, whose first
    column is the intercept's ones."""
    lr = LogisticRegression(C=np.inf, fit_intercept=False, tol=1e-10, max_iter=1000).fit(x, y)
    return lr.coef_[0]


#: One counted move's columns, (logit p, top, z) as ReviewCalibration.features makes them, whether it matched, for a
#: move in a decided position whether its mover is ahead (-1 for a move the service counts), and (x_left, x_spent,
#: unclocked) as ReviewCalibration.clock_features makes them.
Term = tuple[float, float, float, int, int, float, float, float]


def terms(data: list[Row], model, profile) -> list[tuple[Row, Term]]:  # noqa: ANN001
    """Each row with its columns under the raw model p (rows the review does not count left out; moves in decided
    positions by ``profile``'s rule)."""
    out = []
    for r in data:
        _, _, _, a, deep = r
        m = review_move(a, deep, model, None, profile)
        if m is not None:
            kind = review_terms(a, profile)[2]  # type: ignore[index]
            clock = ReviewCalibration.clock_features(clock_of(a))
            out.append((r, (*ReviewCalibration.features(m.p_top, deep == a.candidates[0].uci, a.reference_rating),
                            m.matched, -1 if kind is None else int(kind), *clock)))
    return out


def design(raw: list[Term], columns: int) -> tuple[np.ndarray, np.ndarray]:
    """The columns (1 and the first ``columns`` of logit p, top, z, x_left, x_spent, unclocked) and the outcomes
    (matched) of the counted moves of ``raw``."""
    t = np.array([x for x in raw if x[4] < 0], dtype=float).reshape(-1, 8)
    return np.column_stack([np.ones(len(t)), t[:, [0, 1, 2, 5, 6, 7][:columns]]]), t[:, 3]


def design_decided(raw: list[Term]) -> tuple[np.ndarray, np.ndarray]:
    """The columns (1, logit p, top, z, ahead) and the outcomes of the moves in decided positions of ``raw``."""
    t = np.array([x for x in raw if x[4] >= 0], dtype=float).reshape(-1, 8)
    return np.column_stack([np.ones(len(t)), t[:, :3], t[:, 4]]), t[:, 3]


def calibration_of(b: np.ndarray, d: np.ndarray | None = None, command: str = "") -> ReviewCalibration:
    return ReviewCalibration(float(b[0]), float(b[1]), float(b[2]), float(b[3]) if len(b) > 3 else 0.0, command=command,
                             d=tuple(map(float, d)) if d is not None else (), clock=tuple(map(float, b[4:7])))


def loglik(x: np.ndarray, y: np.ndarray, b: np.ndarray) -> tuple[float, int]:
    """(summed log-likelihood, moves) of outcomes ``y`` under the logistic fit ``b``."""
    q = np.clip(1 / (1 + np.exp(-x @ b)), 1e-12, 1 - 1e-12)
    return float(np.sum(y * np.log(q) + (1 - y) * np.log(1 - q))), len(y)


#: The statistic the z tables read (``--statistic``).
REVIEW_STATISTIC = "match"


def scope_z(data: list[Row], model, calibration: ReviewCalibration | None, profile=None) -> dict[str, float]:  # noqa: ANN001
    """The review's z per (scope, player) with DEFAULT_MIN_MOVES+ counted moves, keyed "scope|player": its match
    count's, or with ``--statistic weighted`` the weighted count's (analyzers.fairplay.ReviewStats); moves in decided
    positions count where ``calibration`` has their term."""
    scopes: dict[str, ReviewStats] = defaultdict(ReviewStats)
    for scope, _, pid, a, deep in data:
        scopes[f"{scope}|{pid}"].add(review_move(a, deep, model, calibration, profile))
    return {key: s.z_of(REVIEW_STATISTIC) for key, s in scopes.items() if s.n >= DEFAULT_MIN_MOVES}


def describe(label: str, zs: dict[str, float]) -> None:
    for part, keep in (("rated-dev", lambda k: not k.startswith("elite:")), ("elite-otb", lambda k: k.startswith("elite:"))):
        z = np.array([v for k, v in zs.items() if keep(k)])
        if len(z) < 2:
            continue
        print(f"{label:<34} {part:<10} {len(z):>5} {z.mean():+6.2f} {z.std(ddof=1):5.2f} "
              + "  ".join(f"{np.mean(z >= t):6.1%}" for t in (2.0, 3.0, 4.0, 4.75)) + f"  {z.max():+6.2f}")


#: The reference rating's step for the slope of the expected matches (dE/dR by a finite difference), Elo.
SLOPE_STEP = 100.0


def dispersion(data: list[Row], model, calibrations: list[ReviewCalibration], fold_of: dict[str, int]) -> None:  # noqa: ANN001
    """Where the honest review z's excess spread comes from (``--dispersion``). Per held-out scope of 40+ counted
    moves, under its fold's cross-validated calibration: the match count M, its expectation E, the binomial variance
    V and the slope S = dE/dR of the expectation in the reference rating. Were the declared rating uncertain (a
    junior improving faster than the rating list follows), the excess (M - E)^2 - V would grow with S^2, that is with
    the square of the moves, and an RD in the z, z = (M - E) / sqrt(V + S^2 RD^2), would take it out; a
    per-move misfit grows with V, that is with the moves, and leaves z's spread the same at every length. Prints z's
    spread by counted moves, the RD each rating band's excess implies (a moments estimate), and for a few RD the
    z spread, the honest maximum, and how much the RD divides z at each length (what a detection over an event pays)."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0] * 6)  # n, M, E, V, S, sum of R
    for scope, group, pid, a, deep in data:
        cal = calibrations[fold_of[group]]
        m = review_move(a, deep, model, cal)
        if m is None:
            continue
        r = float(a.reference_rating or 0)
        slope = 0.0
        if r:
            up = review_move(a.model_copy(update={"reference_rating": r + SLOPE_STEP}), deep, model, cal)
            slope = (up.p_top - m.p_top) / SLOPE_STEP if up is not None else 0.0
        s = sums[f"{scope}|{pid}"]
        for i, x in enumerate((1.0, m.matched, m.p_top, m.p_top * (1 - m.p_top), slope, r)):
            s[i] += x
    keys = [k for k, s in sums.items() if s[0] >= DEFAULT_MIN_MOVES]
    n, obs, exp, var, slope, rsum = np.array([sums[k] for k in keys]).T
    rating, elite = rsum / n, np.array([k.startswith("elite:") for k in keys])
    z = (obs - exp) / np.sqrt(var)
    print(f"\ndispersion: {len(keys)} honest scopes of {DEFAULT_MIN_MOVES}+ counted moves (cross-validated); the slope "
          f"dE/dR averages {np.mean(slope / n) * 100:.4f} matches per move per 100 Elo")
    print("  counted moves   scopes  z mean  z sd")
    bins = ((40, 80), (80, 120), (120, 200), (200, 10_000))
    for lo, hi in bins:
        sel = (n >= lo) & (n < hi)
        if sel.sum() >= 2:
            print(f"  {lo:>5}-{hi:<7} {sel.sum():>7} {z[sel].mean():+7.2f} {z[sel].std(ddof=1):5.2f}")
    print("  the reference-rating RD each band's excess implies, sqrt(sum((M - E)^2 - V) / sum S^2):")
    for part, mask in (("rated-dev", ~elite), ("elite-otb", elite)):
        for lo, hi in ((0, 1400), (1400, 1600), (1600, 1800), (1800, 2000), (2000, 2200), (2200, 2500), (2500, 3500)):
            sel = mask & (rating >= lo) & (rating < hi)
            if sel.sum() < 5:
                continue
            excess = float(((obs - exp) ** 2 - var)[sel].sum())
            rd = math.sqrt(max(excess, 0.0) / float((slope ** 2)[sel].sum()))
            print(f"    {part:<10} {lo:>4}-{hi:<5} {sel.sum():>4} scopes, z sd {z[sel].std(ddof=1):4.2f}: RD {rd:4.0f}")
    print("  with the RD in the z:   rated-dev sd / max   elite-otb sd / max   z divided by, by counted moves "
          + "  ".join(f"{lo}-{hi if hi < 10_000 else ''}" for lo, hi in bins))
    for rd in (0.0, 100.0, 200.0, 300.0):
        factor = np.sqrt(1 + (slope * rd) ** 2 / var)
        zr = z / factor
        cols = "  ".join(f"{np.median(factor[(n >= lo) & (n < hi)]):.2f}" for lo, hi in bins)
        print(f"    RD {rd:3.0f}               {zr[~elite].std(ddof=1):5.2f} / {zr[~elite].max():+5.2f}"
              f"       {zr[elite].std(ddof=1):5.2f} / {zr[elite].max():+5.2f}       {cols}")


#: ferreira-2012's round robins of 2011 (super-grandmaster classical play with today's preparation; 135 games).
CHECK_EVENTS = ("london_chess_classic_2011.pgn", "tal_memorial_2011.pgn", "candidates_kazan_2011.pgn")


async def check_rows(args: argparse.Namespace, config: PipelineConfig) -> list[Row]:
    """Rows of the honest elite classical check: every player of ferreira-2012's 2011 events (nothing is fitted on
    these games), one scope per player and event file, as the service reviews an event scope."""
    folder = data_dir(args, "pgn/ferreira-2012") / "pgn" / "ferreira-2012"
    games = [(path.stem, g) for path in sorted(folder.glob("*.pgn")) if path.name in CHECK_EVENTS
             for g in read_pgn_games(path) if not g.errors]
    event_of = {g.game_id: name for name, g in games}

    def scope_of(g: PgnGame, player: PlayerInfo) -> tuple[str, str]:
        scope = f"{event_of[g.game_id]}:{player.name}"
        return scope, scope

    return await searched_rows(args, config, [g for _, g in games], scope_of)


def check_table(data: list[Row], model, calibrations: dict[str, ReviewCalibration | None], profile) -> None:  # noqa: ANN001
    """Per ferreira-2012 player-event of 40+ counted moves: the review's z under each calibration (moves in decided
    positions where it has their term)."""
    zs = {name: scope_z(data, model, cal, profile if cal is not None else None) for name, cal in calibrations.items()}
    scopes = sorted(next(iter(zs.values())), key=lambda k: -max(z[k] for z in zs.values()))
    print(f"\nhonest elite classical check, ferreira-2012 (not fitted on): {len(scopes)} player-events of 40+ counted moves")
    print("| calibration | player-events | mean z | sd | >= 3.0 | >= 4.0 | >= 4.75 | max |")
    print("|---|---|---|---|---|---|---|---|")
    for name, z in zs.items():
        v = np.array([z[k] for k in scopes])
        print(f"| {name} | {len(v)} | {v.mean():+.2f} | {v.std(ddof=1):.2f} | {int(np.sum(v >= 3.0))} "
              f"| {int(np.sum(v >= 4.0))} | {int(np.sum(v >= 4.75))} | {v.max():+.2f} |")
    print("highest: " + "; ".join(f"{k.split('|')[0]} " + "/".join(f"{z[k]:+.1f}" for z in zs.values()) for k in scopes[:8]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="fast")
    ap.add_argument("--dev", type=int, default=300, help="games of the rated-dev player-events sample")
    ap.add_argument("--elite", type=int, default=0, help="elite-otb games (as bench/warm_cache.py draws them)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", type=int, default=2)
    ap.add_argument("--check", action="store_true",
                    help="also review every player of ferreira-2012's 2011 events (honest elite classical)")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--decided", action="store_true", help="write the decided-position term too (the review then counts "
                    "moves in decided positions; measured and not shipped, docs/fairplay.md)")
    ap.add_argument("--out", type=Path, default=None, help="write here instead of analyzers/calibrations/")
    ap.add_argument("--no-clock", action="store_true", help="keep the best fit without the clock term (what docs/fairplay.md "
                    "compares the shipped calibration with)")
    ap.add_argument("--dispersion", action="store_true",
                    help="also print where the honest z's excess spread comes from (an uncertain reference rating or not)")
    add_review_statistic_argument(ap)
    add_data_argument(ap)
    args = ap.parse_args()
    global REVIEW_STATISTIC
    REVIEW_STATISTIC = args.statistic
    config = PipelineConfig(get_profile(args.profile))
    model = load_move_model(args.profile)
    if model is None:
        raise SystemExit(f"profile {args.profile} has no move model")
    data = asyncio.run(rows(args, config))

    rows_terms = terms(data, model, config.profile)

    groups = sorted({r[1] for r in data})
    fold_of = {e: i % 2 for i, e in enumerate(groups)}
    cv_z: dict[str, dict[str, float]] = {}
    cv_ll: dict[str, float] = {}
    cv_fits: dict[str, list[np.ndarray]] = {}
    for name, columns in FITS.items():
        cv_z[name], ll, n, cv_fits[name] = {}, 0.0, 0, []
        for k in (0, 1):
            b = fit(*design([t for r, t in rows_terms if fold_of[r[1]] != k], columns))
            held = [r for r in data if fold_of[r[1]] == k]
            fold_ll, fold_n = loglik(*design([t for r, t in rows_terms if fold_of[r[1]] == k], columns), b)
            ll, n = ll + fold_ll, n + fold_n
            cv_fits[name].append(b)
            cv_z[name].update(scope_z(held, model, calibration_of(b)))
        cv_ll[name] = ll / n
    chosen = max((k for k in FITS if FITS[k] < WITH_CLOCK or not args.no_clock), key=lambda k: cv_ll[k])
    # the decided-position term, cross-validated the same way beside the counted moves' chosen fit
    cv_decided: dict[str, float] = {}
    dll = dn = cll = 0.0
    for k in (0, 1):
        xt, yt = design_decided([t for r, t in rows_terms if fold_of[r[1]] != k])
        d = fit(xt, yt)
        xh, yh = design_decided([t for r, t in rows_terms if fold_of[r[1]] == k])
        fold_ll, fold_n = loglik(xh, yh, d)
        const = np.array([np.log(yt.mean() / (1 - yt.mean()))])  # the training fold's match rate alone
        cll += loglik(xh[:, :1], yh, const)[0]
        dll, dn = dll + fold_ll, dn + fold_n
        held = [r for r in data if fold_of[r[1]] == k]
        cv_decided.update(scope_z(held, model, calibration_of(cv_fits[chosen][k], d), config.profile))
    command = (f"python bench/fit_review.py --profile {args.profile} --dev {args.dev} --elite {args.elite} "
               f"--seed {args.seed}{' --no-clock' if args.no_clock else ''}{' --decided' if args.decided else ''} --write")
    x, y = design([t for _, t in rows_terms], FITS[chosen])
    xd, yd = design_decided([t for _, t in rows_terms])
    b = fit(x, y)
    with_decided, without = calibration_of(b, fit(xd, yd), command), calibration_of(b, command=command)
    final = with_decided if args.decided else without
    n_dev = sum(1 for r in data if not r[0].startswith("elite:"))
    print(f"review calibration: profile {args.profile}, review {get_profile(REVIEW_PROFILE).limits.key}, {len(y)} counted moves "
          f"and {len(yd)} in decided positions ({n_dev} rows of rated-dev: "
          f"{len({r[1] for r in data if not r[0].startswith('elite:')})} events; "
          f"{len(data) - n_dev} of elite-otb: {len({r[2] for r in data if r[0].startswith('elite:')})} players); "
          f"matched {y.mean():.3f} (decided positions {yd.mean():.3f}, ahead {yd[xd[:, 4] == 1].mean():.3f}, behind "
          f"{yd[xd[:, 4] == 0].mean():.3f}), raw model p {np.mean(1 / (1 + np.exp(-x[:, 1]))):.3f}")
    print("\nlog-likelihood per move, cross-validated by group (2 folds)")
    for name in FITS:
        print(f"  {name:<24} {cv_ll[name]:.5f}{'   <- kept' if name == chosen else ''}")
    print(f"  decided positions: logit(p), top, rating, ahead {dll / dn:.5f} (the match rate alone {cll / dn:.5f})")
    clock = "".join(f" {k:+.3f} {name}" for k, name in zip(final.clock, ("x_left", "x_spent", "unclocked")))
    print(f"P(match) = sigmoid({final.b0:+.3f} {final.b1:+.3f} logit(p) {final.b2:+.3f} top {final.b3:+.3f} z{clock})")
    d0, d1, d2, d3, d4 = with_decided.d
    print(f"decided positions: P(match) = sigmoid({d0:+.3f} {d1:+.3f} logit(p) {d2:+.3f} top {d3:+.3f} z {d4:+.3f} ahead)")
    print(f"\nreview z ({REVIEW_STATISTIC}) per honest scope, 40+ moves     n   mean    sd  >=2.0  >=3.0  >=4.0  "
          ">=4.75     max")
    describe("raw model p", scope_z(data, model, None))
    for name in FITS:
        describe(f"{name}, cross-validated", cv_z[name])
    describe("kept + decided positions, cross-val.", cv_decided)
    describe("kept, fitted on all (in-sample)", scope_z(data, model, without))
    describe("+ decided positions (in-sample)", scope_z(data, model, with_decided, config.profile))
    if args.dispersion:
        dispersion(data, model, [calibration_of(b) for b in cv_fits[chosen]], fold_of)
    if args.check:
        check_table(asyncio.run(check_rows(args, config)), model,
                    {"raw model p": None, "shipped": ReviewCalibration.load(args.profile), "kept (this fit)": without,
                     "kept + decided positions": with_decided}, config.profile)
    if args.write:
        path = args.out or ROOT / "analyzers" / "calibrations" / f"{args.profile}.review.json"
        path.write_text(json.dumps(final.to_dict(), indent=2) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
