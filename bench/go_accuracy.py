"""Go ranks from moves: calibrate on Fox's `candidating` games, measure on its held-out `testing` games.

    python bench/go_accuracy.py --warm            # engine analyses into the cache (resumable; hours at full size)
    python bench/go_accuracy.py --fit --write     # fit the calibration on candidating, write it
    python bench/go_accuracy.py                   # the tables on testing (nothing fitted there)
    python bench/go_accuracy.py --ogs 40 --plies 80 --test-games 0   # another server: does anything separate its players?

    # the same with KataGo's network (deploy/katago/setup.sh; 0.9 s a position on two cores):
    python bench/analyses.py import --cache .cache/go-katago.sqlite --shards bench/analyses/katago   # shipped answers
    python bench/go_accuracy.py --engine katago --plies 80 --warm --fit-games 12 --test-games 24
    python bench/go_accuracy.py --engine katago --plies 80 --fit-games 12 --fit --write
    python bench/go_accuracy.py --engine katago --plies 80 --test-games 24 [--cost]

``--ogs N`` takes N even, ranked games of ../shared/data/sgf/ogs_2014_scored (OGS, 9k-6d: a weaker, wider range than
Fox's) and prints how the evidence (the posterior over c, the mean points lost, the share of GNU Go's first choice)
correlates with the declared rank, and the Fox calibration's errors there against a constant: whether a calibration
fitted for that server could say anything.

Data: ../shared/data/sgf/fox_ranked_5k-9d (Kuboki et al. 2025's selection): 11 rank groups (3-5k, 1-2k, 1d ... 9d),
both players of a game in the same group. Calibration uses `candidating` only; `testing` is held out.
Engine: GNU Go at --level (default 1) through kibitz's Go engine pool, or (``--engine katago``) KataGo's network at
--visits (default 1: one evaluation a position, no search), the first --plies moves of each game. KataGo's answers
for the games bench/go_katago_probe.py evaluated are read from its shipped answers (the same network, configuration and
queries) instead of being searched again. ``--warm`` takes the fitting and held-out games interleaved, so that an
interrupted run leaves both balanced.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import lzma
import random
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from common import ANALYSIS_CACHE, ROOT, add_data_argument, data_dir

from analyzers.calibration import Calibration
from analyzers.concordance import kendall_tau_a
from analyzers.engine.adapter import GO, GO_KATAGO, GameAdapter
from analyzers.engine.gtp import GoLimits, GtpEngine
from analyzers.engine.katago import POLICY_FLOOR, GoEngineLimits, KataGoEngine, KataGoLimits, query
from analyzers.engine.pool import EnginePool
from analyzers.engine.uci import find_engine
from analyzers.gorank import rank_label
from analyzers.gorate import (
    GNUGO_PROFILE,
    K_POINTS,
    KATAGO_PROFILE,
    NETWORK_FEATURES,
    GoSkill,
    RankModel,
    go_statistic,
    load_go_calibration,
)
from streamer.goassess import GoMove, assess_go_game
from streamer.sgf import GoGame, read_sgf_games

FOX = "sgf/fox_ranked_5k-9d"
GROUPS = ("3-5k", "1-2k", "1d", "2d", "3d", "4d", "5d", "6d", "7d", "8d", "9d")
GO_CACHE = ANALYSIS_CACHE.with_name("go-analysis.sqlite")
KATAGO_CACHE = ANALYSIS_CACHE.with_name("go-katago.sqlite")


def profile_of(args: argparse.Namespace) -> str:
    """The calibration ``--engine`` fits and reads."""
    return KATAGO_PROFILE if args.engine == "katago" else GNUGO_PROFILE


OGS = "sgf/ogs_2014_scored"


def ogs_sample(data: Path, n: int, seed: int, min_moves: int = 60) -> list[tuple[str, GoGame]]:
    """``n`` OGS games, seeded: even (komi, no handicap), both players ranked; grouped by Black's rank."""
    games = [g for f in sorted((data / OGS).glob("*.sgf")) for g in read_sgf_games(f)
             if g.error is None and g.komi > 0 and len(g.moves) >= min_moves
             and g.black.rating is not None and g.white.rating is not None]
    random.Random(seed).shuffle(games)
    return [(rank_label(g.black.rating), g) for g in games[:n]]  # type: ignore[arg-type]


def sample(data: Path, split: str, per_group: int, seed: int, min_moves: int = 60) -> list[tuple[str, GoGame]]:
    """``per_group`` games from each rank group's file of ``split``, seeded; even games with komi only."""
    rng = random.Random(seed)
    by_group: list[list[tuple[str, GoGame]]] = []
    for group in GROUPS:
        games = [g for g in read_sgf_games(data / FOX / split / f"{group}.sgf")
                 if g.error is None and g.komi > 0 and len(g.moves) >= min_moves
                 and g.black.rating is not None and g.white.rating is not None]
        rng.shuffle(games)  # a full shuffle, then a prefix: a smaller --*-games takes the first games of a larger one
        by_group.append([(group, g) for g in games[:per_group]])
    # round robin over the groups: any prefix of the list (what a partial analysis covers) is balanced
    return [x for i in range(per_group) for grp in by_group if i < len(grp) for x in [grp[i]]]


def engine_setup(args: argparse.Namespace) -> tuple[GameAdapter, GoEngineLimits, Path, int]:
    """The pool's game adapter, limits, cache file and number of processes for ``--engine``."""
    if args.engine == "katago":
        # one process: KataGo's OpenCL-on-CPU evaluation already uses every core
        return GO_KATAGO, KataGoLimits(args.visits), KATAGO_CACHE, 1
    return GO, GoLimits(args.level), GO_CACHE, args.engines


#: KataGo's answers kept by bench/go_katago_probe.py, per game (the first --plies moves): shipped, and this machine's
PROBE_ANSWERS = (ROOT / "bench/analyses/katago-fox.jsonl.xz", ROOT / ".cache/katago-fox.jsonl")


def probe_answers(plies: int) -> dict[str, dict]:
    """The probe's KataGo answers for games of ``plies`` moves, by game id: the same network, configuration and
    queries as the pool's (leads equal to 0.0005 point, priors to 10^-6: the pool rounds them)."""
    out = {}
    for path in PROBE_ANSWERS:
        if path.exists():
            for line in (lzma.open(path, "rt") if path.suffix == ".xz" else path.open()):
                r = json.loads(line)
                if r["plies"] == plies:
                    out[r["game_id"]] = r
    return out


def probe_moves(g: GoGame, r: dict) -> list[GoMove]:
    """A game's moves judged from the probe's answers, as :func:`~streamer.goassess.judge` judges them from the pool's.
    The probe kept whether the played move was the policy's first choice, not which move that was: ``best_move`` is
    the played move or "?"."""
    return [GoMove(g.game_id, t, colour, move, (r["lead"][t], -r["lead"][t + 1]), 1, move if top else "?", max(p, POLICY_FLOOR))
            for t, ((colour, move), (p, _, top)) in enumerate(zip(g.moves, r["played"]))]


async def analyse_all(games: list[tuple[str, GoGame]], args: argparse.Namespace) -> dict[str, list[GoMove]]:
    game, limits, cache, engines = engine_setup(args)
    out: dict[str, list[GoMove]] = {}
    if args.engine == "katago":  # what the probe evaluated needs no engine
        probed = probe_answers(args.plies)
        out = {g.game_id: probe_moves(g, probed[g.game_id]) for _, g in games if g.game_id in probed}
        games = [(grp, g) for grp, g in games if g.game_id not in out]
    already = len(out)
    started = time.monotonic()
    async with EnginePool(size=engines, game=game, cache_path=cache, timeout=args.timeout) as pool:
        sem = asyncio.Semaphore(engines)

        async def one(g: GoGame) -> None:
            async with sem:
                moves, err = await assess_go_game(g, pool, limits, max_plies=args.plies)
            if err is not None:
                print(f"  {g.source}: {err}", file=sys.stderr)
            out[g.game_id] = moves
            if args.progress:
                print(f"\ranalysed {len(out) - already}/{len(games)} games, {pool.stats.searches} searches "
                      f"({time.monotonic() - started:.0f} s)", end="", file=sys.stderr, flush=True)

        await asyncio.gather(*(one(g) for _, g in games))
    if args.progress:
        print(file=sys.stderr)
    return out


# -- per player-game evidence -------------------------------------------------------------------------------
@dataclass
class PlayerGame:
    group: str
    truth: float                 # the player's declared rank on the GoR scale
    moves: list[GoMove]
    colour: str
    game_index: int              # the game's place among its group's sampled games

    def skill(self) -> GoSkill:
        return skill_of(self.moves)


def skill_of(moves: list[GoMove]) -> GoSkill:
    """One scope's evidence from judged moves (GNU Go's candidates, or a network's two evaluations and prior)."""
    s = GoSkill()
    for m in moves:
        s.add(m.values, m.played, m.prior, m.move.upper() == m.best_move.upper())
    return s


def player_games(games: list[tuple[str, GoGame]], analysed: dict[str, list[GoMove]]) -> list[PlayerGame]:
    out = []
    seen: dict[str, int] = {}
    for group, g in games:
        index = seen[group] = seen.get(group, -1) + 1
        moves = analysed.get(g.game_id, [])
        for colour, p in (("b", g.black), ("w", g.white)):
            mine = [m for m in moves if m.colour == colour]
            if mine and p.rating is not None:
                out.append(PlayerGame(group, p.rating, mine, colour, index))
    return out


def players_of(pgs: list[PlayerGame], n_games: int, seed: int) -> list[tuple[str, float, GoSkill]]:
    """Sets of ``n_games`` player-games of one rank group standing for one player of that strength (the protocol of
    Kuboki et al.): the group's games are shuffled and cut into disjoint runs of ``n_games``; each run gives two
    players, its Black sides and its White sides (two players of the same games, not of the same moves).
    Returns (group, mean declared rating, the set's evidence)."""
    rng = random.Random(seed)
    out = []
    for group in GROUPS:
        games = sorted({pg.game_index for pg in pgs if pg.group == group})
        rng.shuffle(games)
        for k in range(len(games) // n_games):
            run = set(games[k * n_games:(k + 1) * n_games])
            for colour in ("b", "w"):
                chunk = [pg for pg in pgs if pg.group == group and pg.game_index in run and pg.colour == colour]
                out.append((group, float(np.mean([pg.truth for pg in chunk])), skill_of([m for pg in chunk for m in pg.moves])))
    return out


# -- calibration ----------------------------------------------------------------------------------------
def pav_knots(points: list[tuple[float, float, int]]) -> list[tuple[float, float]]:
    """(c, rating, weight) group centroids -> knots increasing in c and non-decreasing in rating (pool adjacent
    violators, weighted)."""
    blocks = [[c * w, r * w, w] for c, r, w in sorted(points)]
    merged: list[list[float]] = []
    for b in blocks:
        merged.append(b)
        while len(merged) > 1 and merged[-2][1] / merged[-2][2] > merged[-1][1] / merged[-1][2]:
            last = merged.pop()
            merged[-1] = [merged[-1][0] + last[0], merged[-1][1] + last[1], merged[-1][2] + last[2]]
    knots = [(c / w, r / w) for c, r, w in merged]
    # strictly increasing c (two centroids at the same c would make the map a step)
    return [k for i, k in enumerate(knots) if i == 0 or k[0] > knots[i - 1][0] + 1e-9]


#: The sets of network features the score may use, tried in this order (a later set is kept only if it does better).
FEATURE_SETS = ((0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2))
#: The sign each feature's weight must have (a stronger player's move is likelier the network's, loses fewer points):
#: a set whose fit gives a weight the other sign is not used (with few fitting games, collinear features trade
#: weights of either sign).
FEATURE_SIGNS = (1, -1, 1)


def _lstsq(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    coef, *_ = np.linalg.lstsq(np.column_stack([np.ones(len(x)), x]), y, rcond=None)
    return coef


def fit_weights(pgs: list[PlayerGame], folds: int = 5, verbose: bool = True) -> tuple[float, ...]:
    """The network score's weights: least squares of the declared rank on a player-game's feature means (with an
    intercept, which the knots take up), on the features of :data:`FEATURE_SETS` whose ``folds``-fold cross-validated
    MAE (folds by game: a game's two sides together) is lowest among those whose weights have the signs of
    :data:`FEATURE_SIGNS`; the others weigh 0. Fitting data only."""
    x = np.array([pg.skill().network.means() for pg in pgs])
    y = np.array([pg.truth for pg in pgs])
    fold = np.array([pg.game_index % folds for pg in pgs])
    best: tuple[float, tuple[int, ...]] | None = None
    for cols in FEATURE_SETS:
        if any(w * FEATURE_SIGNS[c] <= 0 for c, w in zip(cols, _lstsq(x[:, cols], y)[1:])):
            if verbose:
                print(f"score on {[NETWORK_FEATURES[c] for c in cols]}: a weight of the wrong sign, not used")
            continue
        err = np.empty(len(y))
        for k in range(folds):
            out = fold == k
            coef = _lstsq(x[~out][:, cols], y[~out])
            err[out] = coef[0] + x[out][:, cols] @ coef[1:] - y[out]
        mae = float(np.mean(np.abs(err)))
        if verbose:
            print(f"score on {[NETWORK_FEATURES[c] for c in cols]}: {folds}-fold CV MAE {mae / 100:.2f} ranks "
                  f"({len(y)} fitting player-games)")
        if best is None or mae < best[0]:
            best = (mae, cols)
    assert best is not None
    coef = _lstsq(x[:, best[1]], y)
    weights = [0.0] * len(NETWORK_FEATURES)
    for c, w in zip(best[1], coef[1:]):
        weights[c] = round(float(w), 3)
    return tuple(weights)


def split_half_variance(pgs: list[PlayerGame], weights: tuple[float, ...], e2: np.ndarray, n: np.ndarray) -> tuple[float, float]:
    """The network score's scatter a + b / n with b from within the games: a player-game's score over its first half
    minus over its second (the player cancels; the mean difference, the game's phases, is taken out) has variance
    about 4 b / n, so b = n var(d) / 4 whatever the player; a is what the rows' squared errors ``e2`` (at ``n`` moves)
    leave beyond b / n. (A regression of e2 on 1 / n cannot tell a from b when the rows' n span only 20-40 moves.)"""
    d, m = [], []
    for pg in pgs:
        half = len(pg.moves) // 2
        if half >= 10:
            first, second = (go_statistic(skill_of(part), weights)[0] for part in (pg.moves[:half], pg.moves[half:2 * half]))
            d.append(first - second)
            m.append(2 * half)
    b = float(np.mean(np.array(m) * (np.array(d) - np.mean(d)) ** 2) / 4)
    return float(np.mean(e2 - b / n)), b


def fit_calibration(pgs: list[PlayerGame], args: argparse.Namespace, engine: str) -> Calibration:
    """The rank model on ``pgs``: for GNU Go the posterior mean of c, for KataGo the network score (its weights fitted
    first); knots through the rank groups' centroids, the scatter a + b / n, the population prior."""
    weights = fit_weights(pgs) if args.engine == "katago" else None

    def stat(s: GoSkill) -> float:
        return go_statistic(s, weights)[0]

    def n_of(s: GoSkill) -> int:
        return go_statistic(s, weights)[1]

    skills = [(pg, pg.skill()) for pg in pgs]
    centroids = []
    for group in GROUPS:
        mine = [(pg, s) for pg, s in skills if pg.group == group]
        centroids.append((float(np.mean([stat(s) for _, s in mine])), float(np.mean([pg.truth for pg, _ in mine])), len(mine)))
    knots = pav_knots(centroids)
    centre = {g: c for g, (c, _, _) in zip(GROUPS, centroids)}
    # the scatter of a scope's c around its group's centroid by moves seen, a + b / n: player-games cut after
    # 20 ... 60 moves, and sets of 3 and 6 of a group's games
    rows = []
    # (from 20 moves on: below that a flat prior's posterior mean is still mostly the grid's middle, and its error
    # would set b for every n; with fewer moves a + b / n is large anyway and the population prior rules)
    for pg in pgs:
        for cut in (20, 30, 40, len(pg.moves)):
            if cut <= len(pg.moves):
                s = skill_of(pg.moves[:cut])
                rows.append((n_of(s), (stat(s) - centre[pg.group]) ** 2))
    for n_games in (3, 6):
        for group, _, s in players_of(pgs, n_games, args.seed):
            rows.append((n_of(s), (stat(s) - centre[group]) ** 2))
    n = np.array([r[0] for r in rows], dtype=float)
    e2 = np.array([r[1] for r in rows])
    if weights is None:
        a, b = np.linalg.lstsq(np.column_stack([np.ones_like(n), 1.0 / n]), e2, rcond=None)[0]
    else:
        a, b = split_half_variance(pgs, weights, e2, n)
    a, b = max(float(a), 1e-4), max(float(b), 0.0)
    truths = np.array([pg.truth for pg in pgs])
    katago = weights is not None
    rank_model: dict = {"prior": [round(float(truths.mean()), 1), round(float(truths.std()), 1)],
                        "c_var": [round(a, 6), round(b, 6)]}
    if weights is not None:
        rank_model |= {"weights": list(weights), "features": list(NETWORK_FEATURES)}
    cal = Calibration(
        profile=profile_of(args), engine=engine, engine_elo=0.0, c_knots=[(round(c, 5), round(r, 1)) for c, r in knots],
        # provisional for GNU Go: on held-out Fox games its values rank 5k-9d players no better than a constant (docs/go.md);
        # for KataGo until fitted on the benchmark's full fitting sample (12 games per rank group)
        residual_sd=0.0, provisional=not katago or args.fit_games < 12,
        fitted_on=f"Fox candidating (fox_ranked_5k-9d), {len(pgs)} player-games of {len(pgs) // 2} games "
                  f"({args.fit_games} per rank group, seed {args.seed}), first {args.plies} moves, "
                  + (f"KataGo {args.visits} visit(s)" if katago else f"GNU Go level {args.level}"),
        command=f"python bench/go_accuracy.py --fit --write --fit-games {args.fit_games} --plies {args.plies} "
                + (f"--engine katago --visits {args.visits}" if katago else f"--level {args.level}") + f" --seed {args.seed}",
        extra={"k_points": K_POINTS, "scale": "GoR: 1d = 2100, 100 points a rank",
               **({"visits": args.visits} if katago else {"level": args.level}), "rank_model": rank_model,
               "group_centroids": {g: [round(c, 4), round(r, 1), w] for g, (c, r, w) in zip(GROUPS, centroids)}},
    )
    model = RankModel.of(cal)
    resid = float(np.sqrt(np.mean([(s.estimate(model).rating - pg.truth) ** 2 for pg, s in skills])))
    return replace(cal, residual_sd=round(resid, 1))


# -- evaluation -----------------------------------------------------------------------------------------
def group_of(rating: float, centres: dict[str, float]) -> str:
    return min(centres, key=lambda g: abs(centres[g] - rating))


def evaluate(pgs: list[PlayerGame], cal: Calibration, args: argparse.Namespace) -> None:
    centres = {g: float(np.mean([pg.truth for pg in pgs if pg.group == g])) for g in GROUPS}
    model = RankModel.of(cal)
    est = [(pg, pg.skill().estimate(model)) for pg in pgs]
    truth = np.array([pg.truth for pg, _ in est])
    pred = np.array([e.rating for _, e in est])
    const = float(truth.mean())
    mae = np.abs(pred - truth).mean() / 100
    mae_c = np.abs(const - truth).mean() / 100
    cover = np.mean([e.low <= pg.truth <= e.high for pg, e in est])
    print(f"\nPer player-game ({len(est)} player-games of {len(est) // 2} held-out games, the first {args.plies} moves; "
          f"{np.mean([e.n for _, e in est]):.0f} moves each on average)")
    print("| estimate | MAE (ranks) | cut vs constant | bias (ranks) | r | tau_a | declared rank in the 95 % interval | mean half-width (ranks) |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| moves only ({'network score' if model.weights else 'posterior over c'}, {cal.profile}) | {mae:.2f} | {100 * (1 - mae / mae_c):+.1f}% | "
          f"{(pred - truth).mean() / 100:+.2f} | {np.corrcoef(pred, truth)[0, 1]:.2f} | {kendall_tau_a(pred, truth):.2f} | "
          f"{100 * cover:.1f}% | {np.mean([(e.high - e.low) / 2 for _, e in est]) / 100:.2f} |")
    print(f"| constant = sample mean (oracle) | {mae_c:.2f} | +0.0% | +0.00 | - | - | - | - |")
    if model.weights is not None:
        feats = np.array([pg.skill().network.means() for pg, _ in est])
        print(f"\nThe network's evidence per player-game (score weights {model.weights}, fitted on candidating)")
        print("| evidence | r with the declared rank | tau_a |")
        print("|---|---|---|")
        for i, name in enumerate(NETWORK_FEATURES):
            print(f"| mean {name.replace('_', ' ')} | {np.corrcoef(feats[:, i], truth)[0, 1]:+.2f} | "
                  f"{kendall_tau_a(feats[:, i], truth):+.2f} |")
        score = feats @ np.array(model.weights)
        print(f"| the score | {np.corrcoef(score, truth)[0, 1]:+.2f} | {kendall_tau_a(score, truth):+.2f} |")
    print("\nRank group from N games of one player (a group's games in disjoint runs of N, each run's Black sides and "
          "its White sides as two players; 11 groups: 3-5k, 1-2k, 1d ... 9d; the nearest group centre is predicted)")
    print("| games | players | exact group | within one group | constant (most common group) | MAE (ranks) | in the 95 % interval | mean half-width (ranks) |")
    print("|---|---|---|---|---|---|---|---|")
    for n_games in (1, 3, 5, 10, 20):
        players = players_of(pgs, n_games, args.seed)
        if not players:
            print(f"| {n_games} | 0 | (too few games per group) | | | | | |")
            continue
        hits = near = 0
        errs, cov, half = [], [], []
        for group, t, s in players:
            e = s.estimate(model)
            g = group_of(e.rating, centres)
            hits += g == group
            near += abs(GROUPS.index(g) - GROUPS.index(group)) <= 1
            errs.append(abs(e.rating - t) / 100)
            cov.append(e.low <= t <= e.high)
            half.append((e.high - e.low) / 200)
        most = max(GROUPS, key=lambda g: sum(1 for p in players if p[0] == g))
        base = sum(1 for p in players if p[0] == most) / len(players)
        print(f"| {n_games} | {len(players)} | {100 * hits / len(players):.0f}% | {100 * near / len(players):.0f}% | "
              f"{100 * base:.0f}% | {np.mean(errs):.2f} | {100 * np.mean(cov):.0f}% | {np.mean(half):.2f} |")


def transfer(pgs: list[PlayerGame], cal: Calibration, label: str) -> None:
    """Correlations of each kind of evidence with the declared rank, and ``cal``'s errors against a constant."""
    model = RankModel.of(cal)
    truth = np.array([pg.truth for pg in pgs])
    skills = [pg.skill() for pg in pgs]
    est = [s.estimate(model) for s in skills]
    pred = np.array([e.rating for e in est])
    evidence = {"posterior mean of c": [s.posterior.mean for s in skills],
                "mean points lost": [float(np.mean([m.loss for m in pg.moves])) for pg in pgs],
                "share of GNU Go's first choice": [float(np.mean([m.played == 0 for m in pg.moves])) for pg in pgs]}
    const = float(truth.mean())
    mae, mae_c = np.abs(pred - truth).mean() / 100, np.abs(const - truth).mean() / 100
    print(f"\n{label}: {len(pgs)} player-games of {len(pgs) // 2} games, declared ranks {rank_label(truth.min())}-"
          f"{rank_label(truth.max())} (sd {truth.std() / 100:.1f} ranks), {np.mean([len(pg.moves) for pg in pgs]):.0f} moves each")
    print("| evidence | r with the declared rank | tau_a |")
    print("|---|---|---|")
    for name, xs in evidence.items():
        x = np.array(xs)
        print(f"| {name} | {np.corrcoef(x, truth)[0, 1]:+.2f} | {kendall_tau_a(x, truth):+.2f} |")
    print(f"| {cal.profile} estimate | {np.corrcoef(pred, truth)[0, 1]:+.2f} | {kendall_tau_a(pred, truth):+.2f} |")
    print(f"{cal.profile} there: MAE {mae:.2f} ranks against {mae_c:.2f} for the sample mean (oracle), bias "
          f"{(pred - truth).mean() / 100:+.2f}, declared rank in the 95 % interval "
          f"{100 * np.mean([e.low <= t <= e.high for e, t in zip(est, truth)]):.0f} %")


# -- engine cost ----------------------------------------------------------------------------------------
async def katago_cost(game: GoGame, args: argparse.Namespace) -> None:
    """s per position: kibitz's KataGo pool (one query per position, the answer read into a GoAnalysis, no cache)
    against the raw engine on the same positions and visits (one query for all the turns, the answers only parsed)."""
    limits = KataGoLimits(args.visits)
    moves = game.moves[: args.plies]
    positions = game.positions(args.plies)
    async with EnginePool(size=1, game=GO_KATAGO, timeout=args.timeout) as pool:
        await pool.analyse_limits(positions[0], limits)  # the first query compiles the OpenCL kernels: not timed
        t0 = time.perf_counter()
        for p in positions[1:]:
            await pool.analyse_limits(p, limits)
        kibitz = (time.perf_counter() - t0) / (len(positions) - 1)
    raw = KataGoEngine(find_engine(default=GO_KATAGO.default_engine, env=GO_KATAGO.engine_env), {})
    await raw.start()
    try:
        assert raw._proc is not None and raw._proc.stdin is not None and raw._proc.stdout is not None
        await raw.analyse(positions[0], limits)  # as for the pool: the first query is not timed
        q = query(positions[-1], limits, "all")
        q["moves"] = [[c.upper(), m] for c, m in moves[:-1]]
        q["analyzeTurns"] = list(range(1, len(moves)))
        t0 = time.perf_counter()
        raw._proc.stdin.write(json.dumps(q).encode() + b"\n")
        await raw._proc.stdin.drain()
        for _ in q["analyzeTurns"]:
            json.loads(await raw._proc.stdout.readline())
        bare = (time.perf_counter() - t0) / len(q["analyzeTurns"])
    finally:
        await raw.kill()
    print(f"\nEngine cost per position ({len(positions) - 1} positions of one held-out game, KataGo {limits.key}, one "
          f"process, nothing cached): kibitz's pool {kibitz:.3f} s, the raw engine {bare:.3f} s (ratio {kibitz / bare:.3f})")


async def engine_cost(game: GoGame, args: argparse.Namespace) -> None:
    """ms per move: kibitz's Go pool (one engine, a fresh process and a replay per search, no cache) against the raw
    engine on the same positions and level (one process playing the game on, the same three GTP commands a move)."""
    limits = GoLimits(args.level)
    moves = game.moves[: args.plies]
    positions = game.positions(args.plies)
    async with EnginePool(size=1, game=GO) as pool:
        t0 = time.perf_counter()
        for p in positions:
            await pool.analyse_limits(p, limits)
        kibitz = (time.perf_counter() - t0) / len(positions)
    raw = GtpEngine(find_engine(default="gnugo", env="KIBITZ_GO_ENGINE"), {})
    await raw.start()
    try:
        for cmd in ("boardsize 19", f"komi {game.komi:g}", "clear_board", f"level {args.level}"):
            await raw._send(cmd)
        t0 = time.perf_counter()
        for colour, move in moves:
            await raw._send(f"reg_genmove {colour}")
            await raw._send("top_moves")
            await raw._send("all_move_values")
            await raw._send(f"play {colour} {move}")
        bare = (time.perf_counter() - t0) / len(moves)
    finally:
        await raw.kill()
    print(f"\nEngine cost per move ({len(positions)} positions of one held-out game, GNU Go level {args.level}, one "
          f"process each, nothing cached): kibitz's pool {1000 * kibitz:.0f} ms, the raw engine {1000 * bare:.0f} ms "
          f"(ratio {kibitz / bare:.2f}: the pool restarts the engine and replays the game before every search, which "
          "is what makes its values reproducible)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_argument(ap)
    ap.add_argument("--warm", action="store_true", help="only run the engine analyses into the cache")
    ap.add_argument("--fit-games", type=int, default=12, help="candidating games per rank group (default 12)")
    ap.add_argument("--test-games", type=int, default=24, help="testing games per rank group (default 24)")
    ap.add_argument("--plies", type=int, default=120, help="moves analysed per game (default 120)")
    ap.add_argument("--engine", choices=("gnugo", "katago"), default="gnugo",
                    help="gnugo (default) or katago (deploy/katago/setup.sh installs it; docs/go.md)")
    ap.add_argument("--level", type=int, default=1, help="GNU Go level (default 1)")
    ap.add_argument("--visits", type=int, default=1, help="KataGo visits per position (default 1: the network alone)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds an engine may take on a position")
    ap.add_argument("--engines", type=int, default=2, help="engine processes (default 2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--cost", action="store_true", help="also time the engine per move against the raw engine")
    ap.add_argument("--ogs", type=int, default=0, metavar="N", help="also N OGS games (another server; see above)")
    ap.add_argument("--fit", action="store_true", help="fit the calibration on candidating (and print it)")
    ap.add_argument("--write", action="store_true", help="with --fit: write it to analyzers/calibrations")
    args = ap.parse_args()
    data = data_dir(args, FOX)
    fit = sample(data, "candidating", args.fit_games, args.seed)
    test = sample(data, "testing", args.test_games, args.seed)
    ogs = ogs_sample(data_dir(args, OGS), args.ogs, args.seed) if args.ogs else []
    if args.warm:
        # fitting and held-out games interleaved (each round robin over the rank groups), so that an interrupted run
        # leaves both balanced
        order = sorted([(i / len(fit), x) for i, x in enumerate(fit)] + [(i / len(test), x) for i, x in enumerate(test)],
                       key=lambda ix: ix[0])
        asyncio.run(analyse_all([x for _, x in order] + ogs, args))
        return
    fit_pgs = player_games(fit, asyncio.run(analyse_all(fit, args)))
    if args.fit:
        cal = fit_calibration(fit_pgs, args, engine="KataGo 1.18.1 b10c384h6nbttflrs" if args.engine == "katago" else "GNU Go 3.8")
        print(json.dumps(cal.to_dict(), indent=2))
        if args.write:
            cal.save(ROOT / "analyzers" / "calibrations" / f"{cal.profile}.json")
            print(f"wrote analyzers/calibrations/{cal.profile}.json")
    else:
        cal = load_go_calibration(profile_of(args))
    if test:
        evaluate(player_games(test, asyncio.run(analyse_all(test, args))), cal, args)
    if ogs:
        transfer(player_games(ogs, asyncio.run(analyse_all(ogs, args))), cal, "OGS 2014 (ogs_2014_scored)")
    if args.cost and test:
        asyncio.run(katago_cost(test[0][1], args) if args.engine == "katago" else engine_cost(test[0][1], args))


if __name__ == "__main__":
    main()
