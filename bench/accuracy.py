"""Accuracy of perceived ratings against FIDE ratings on held-out games (never used for fitting).

    python bench/accuracy.py --profile fast --split holdout --sample events --games 520 [--seed 0] [--plots]
    python bench/accuracy.py --profile fast --split dev --sample events --games 3200 --fit-interval-scale [--write]

Samples: ``random`` takes single games at random; ``events`` takes whole player-events (players with 5+ rated games
in one event, all their games there), which gives per-player-event ratings, long histories and pre-game ratings
for outcome prediction, besides the single games.

Printed, all on the sampled held-out games:

1. Per player-game: mean absolute error and bias of perceived vs FIDE rating, Pearson r, Kendall tau_a
   (analyzers.concordance) and the share of FIDE ratings inside the published 95 % interval, for the posterior over
   c, Ferreira's gain histogram (Algorithm 4) and their inverse-variance combination. Reference rows: a constant
   (the sample's own mean: an oracle, so a generous baseline) and the opponent's rating (a leak in Swiss events, not
   skill; never used by kibitz).
2. The same per player-event (players with 5+ games in the event in the sample; all their moves in the event).
3. Error as a function of counted moves seen (10 ... 160), across a player's games in the event.
4. Outcome log-likelihood, (1/T) sum ln(1 - |s_t - p_t|) (docs/models.md s. 8), of each game's result predicted
   from the players' ratings before the game: 50:50, Glicko-2 from the earlier results in the sample (the platform
   settings of analyzers.glicko2), perceived ratings from the earlier moves in the sample (posterior), and the
   FIDE ratings as an outside reference. A player not seen yet is, for both Glicko-2 and perceived ratings, the
   rated-dev population: its mean rating, with its sd as the uncertainty (fair to both, and dev data only). Rows by
   how many earlier games the less-known player has.

A gains-only profile (``deep``: one PV, so no move is counted for the posterior) has no posterior and no combination
rows; its tables by family, by moves seen (all moves, the histogram's count) and its outcome predictions use
Algorithm 4's rating instead.

``--context event`` reads the event prior as a live service does, from every rated game of the sampled games' events
(the split's rated games, in file order, which is round order, up to each event's last sampled game): the sampled games
are scored, and the others only feed the pool step (their moves and results), so a game's prior comes from every game of
its event played before it. Without it the prior comes from the sampled games alone (the random sample replays them in
file order too). The context games need their analyses as the sampled ones do: ``--warm --context event`` fills the
cache for both.

``--fit-interval-scale`` (rated-dev only) fits step 4 of the event pooling (docs/models.md s. 12): the factor on the
published interval under the event prior, by counted moves seen, that makes its 95 % interval cover 95 % of the
sample's FIDE ratings, from every player-game at its end and every player-event at each of FIT_MOVES_SEEN and at its
end; ``--write`` stores it in ``analyzers/calibrations/<profile>.eventpool.json``.

``--plots`` writes docs/img/accuracy-<profile>-scatter.png and -moves.png (needs matplotlib: pip install -e '.[bench]').
Analyses are cached in .cache/analysis.sqlite (or $KIBITZ_ANALYSIS_CACHE), so a rerun does no engine work; the engine seconds printed are for
the searches this run actually made.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time
from dataclasses import dataclass, replace

import numpy as np
from common import (
    ANALYSIS_CACHE,
    ROOT,
    add_context_argument,
    add_data_argument,
    clustered_mean,
    context_flag,
    data_dir,
    event_context,
    event_priors,
    family,
    fide,
    follow_player_events,
)

from analyzers import combination as combination_module
from analyzers.calibration import Calibration, load_calibration
from analyzers.combination import Combination, load_combination
from analyzers.concordance import kendall_tau_a
from analyzers.engine import EnginePool
from analyzers.eventpool import EventPoolModel, load_event_pool
from analyzers.glicko2 import SCALE, Glicko2Config, Glicko2Rating, expected, update_after_game
from analyzers.perceived import RatingEstimate
from analyzers.profiles import get_profile
from analyzers.ratingmodel import UNKNOWN_CLASS, MoveModel, Prior, load_move_model
from schemas import MoveAssessment
from streamer.batch import assess_games, rated_games, sample_player_events, sample_rated_games
from streamer.ingest import PgnGame
from streamer.pipeline import PipelineConfig, ScopeStats, model_estimates

SPLITS = {"holdout": "rated-holdout", "dev": "rated-dev"}
MOVES_SEEN = (10, 20, 40, 80, 160)
#: The checkpoints and the buckets of counted moves (lower edges) that --fit-interval-scale reads.
FIT_MOVES_SEEN = (3, 5, 10, 15, 20, 30, 40, 60, 80, 120, 160, 240, 320)
FIT_BUCKETS = (1, 5, 10, 20, 40, 80, 160)


def dev_population(folder) -> tuple[tuple[float, float], set[str]]:  # noqa: ANN001
    """From rated-dev's headers (dev data only): the mean and sd of its players' FIDE ratings (what a platform knows
    of a newcomer) and every player id in it (ids as the ingest makes them: FIDE id, else the name), for the
    player-disjoint check."""
    import chess.pgn

    from streamer.ingest import player_id_for, rating_from_tag

    ratings, ids = [], set()
    for path in sorted(folder.glob("*.pgn")):
        with open(path, encoding="utf-8", errors="replace") as f:
            while (h := chess.pgn.read_headers(f)) is not None:
                ratings += [r for r in (rating_from_tag(h.get("WhiteElo")), rating_from_tag(h.get("BlackElo"))) if r]
                ids |= {player_id_for(h, color, "") for color in ("White", "Black")}
    return (float(np.mean(ratings)), float(np.std(ratings))), ids


@dataclass
class Estimates:
    """One row of truth and estimates: FIDE rating, the opponent's, then (rating, low, high) per estimator."""

    truth: float
    opponent: float
    post: RatingEstimate | None  # None for a gains-only calibration (one-PV profile)
    gain: RatingEstimate
    comb: RatingEstimate | None
    family: str = ""
    model: RatingEstimate | None = None  # the published moves-only estimate (the combination's, when there is one)
    band: RatingEstimate | None = None   # its 68 % band
    perf: RatingEstimate | None = None   # the move model with the FIDE rating (declared) as prior, RD DEFAULT_DECLARED_RD
    move_model: RatingEstimate | None = None  # the move model's own moves-only estimate
    tclass: str = ""
    player: str = ""  # the player's id (FIDE id, else name)
    event: str = ""  # the event's name (the PGN's Event tag)
    unpooled: RatingEstimate | None = None  # the moves-only estimate without the event prior, where there was one
    moves_pooled: RatingEstimate | None = None  # with the event prior from the other players' moves alone (no results)

    @property
    def without_pool(self) -> RatingEstimate | None:
        """The published estimate as it would be without event pooling."""
        return self.unpooled or self.model

    @property
    def main(self) -> RatingEstimate:
        """What the service would publish: the move model's moves-only rating when the profile has one, else the
        posterior's rating, or Algorithm 4's for a gains-only profile."""
        return self.model or self.post or self.gain


#: The profile's move model (set by main), or None: then the posterior over c is the published estimate.
MODEL: MoveModel | None = None
#: The combination on top of it (set by main), or None: then the move model's estimate is the published one.
COMB: Combination | None = None
#: The event prior attached to each assessment, {(game_id, ply): Prior} (set by main; empty without event pooling).
PRIORS: dict[tuple[str, int], Prior] = {}
#: The same from the other players' moves alone (step 2b off), when the shipped pooling reads results; else empty.
PRIORS_MOVES: dict[tuple[str, int], Prior] = {}
#: The event pooling whose interval scale (step 4) the published estimate under an event prior takes (set by main).
POOL: EventPoolModel | None = None


def rated(s: ScopeStats, cal: Calibration) -> bool:
    """Whether a scope has the moves its main estimator needs."""
    if MODEL is not None:
        return s.rating.n >= 1
    return s.post.n >= 1 and s.hist.count >= 1 if cal.has_c_map else s.hist.count >= 1


def prior_at(a: MoveAssessment | None) -> Prior | None:
    """The event prior the pool step attached to assessment ``a`` (None without event pooling or before any)."""
    return PRIORS.get((a.game_id, a.ply)) if a is not None else None


def main_estimate(s: ScopeStats, cal: Calibration, event_prior: Prior | None = None) -> RatingEstimate:
    """What the player step publishes (streamer.pipeline.model_estimates, the same function)."""
    est = model_estimates(s, MODEL, COMB, event_prior=event_prior, pool=POOL) if MODEL is not None else None
    if est is not None:
        return est.moves_only
    return cal.from_posterior(s.post) if cal.has_c_map else cal.from_histogram(s.hist)


def performance(s: ScopeStats, declared: float) -> RatingEstimate | None:
    """The performance estimate after a scope's counted moves (None before the first: the declared rating itself)."""
    est = model_estimates(s, MODEL, None, declared=(declared, None)) if MODEL is not None and s.rating.n else None
    return est.performance if est else None


def estimates(s: ScopeStats, cal: Calibration, truth: float, opponent: float, last: MoveAssessment | None = None) -> Estimates:
    """Every estimator's estimate of scope ``s``, whose last assessment ``last`` carries its event prior."""
    event_prior = prior_at(last)
    gn = cal.from_histogram(s.hist)
    if not cal.has_c_map:
        return Estimates(truth, opponent, None, gn, None)
    p = cal.from_posterior(s.post)
    w_p, w_g = 1 / p.sd**2, 1 / gn.sd**2
    comb = (w_p * p.rating + w_g * gn.rating) / (w_p + w_g)
    half = 1.96 * math.sqrt(1 / (w_p + w_g))  # treats the two as independent: optimistic, they share the moves
    out = Estimates(truth, opponent, p, gn, RatingEstimate(comb, comb - half, comb + half, p.n))
    model = MODEL
    est = model_estimates(s, model, COMB, declared=(truth, None), event_prior=event_prior, pool=POOL) if model is not None else None
    if model is not None and est is not None:
        out.model, out.perf, out.move_model, out.tclass = est.moves_only, est.performance, est.model, s.rating.tclass
        out.band = est.band
        if event_prior is not None:  # what the scope's estimate would be without event pooling, for the comparison
            alone = model_estimates(s, model, COMB)
            assert alone is not None
            out.unpooled, out.move_model = alone.moves_only, alone.model  # the move model with its class prior
        if PRIORS_MOVES:
            mp = PRIORS_MOVES.get((last.game_id, last.ply)) if last is not None else None
            moves = model_estimates(s, model, COMB, event_prior=mp) if mp is not None else None
            out.moves_pooled = moves.moves_only if moves is not None else out.unpooled or out.model
    return out


def row(name: str, est, truth, low=None, high=None) -> str:
    est, truth = np.asarray(est, float), np.asarray(truth, float)
    err = est - truth
    cover = f"{np.mean((truth >= np.asarray(low)) & (truth <= np.asarray(high))):6.1%}" if low is not None else "     -"
    # a constant has no correlation: "-" (np.std of equal floats can be a rounding residue, not 0, so test the range)
    varies = bool(np.ptp(est) > 0)
    r = f"{np.corrcoef(est, truth)[0, 1]:5.2f}" if varies else "    -"
    tau = f"{kendall_tau_a(est, truth):5.2f}" if varies else "    -"
    mae, const = np.mean(np.abs(err)), np.mean(np.abs(truth - truth.mean()))
    return (f"| {name:<36} | {mae:5.0f} | {1 - mae / const:+6.1%} | {np.mean(err):+6.0f} | {r} | {tau} | {cover} |")


def table(title: str, rows: list[Estimates]) -> None:
    truth = np.array([e.truth for e in rows])
    print(f"\n| {title:<36} |   MAE | cut vs constant |   bias |     r | tau_a | in 95 % |")
    print("|---|---|---|---|---|---|---|")
    # (the performance estimate has the FIDE rating as its prior, so it is judged by predicting results, below)
    published = "combination, moves only (published)" if COMB else "move model, moves only (published)"
    pooled: tuple[tuple[str, str], ...] = ()
    if PRIORS:
        published = "published: event prior (s. 12)" + (", else combination" if COMB else "")
        pooled = ((("combination, no event prior" if COMB else "move model, no event prior"), "without_pool"),)
        if PRIORS_MOVES:
            pooled = (("event prior from others' moves, no results", "moves_pooled"), *pooled)
    for name, attr in ((published, "model"), *pooled, *((("move model alone, moves only", "move_model"),) if COMB else ()),
                       ("posterior over c", "post"),
                       ("gain histogram (Ferreira Alg. 4)", "gain"), ("posterior and gains, inverse variance", "comb")):
        es = [getattr(e, attr) for e in rows]
        if any(x is None for x in es):
            why = "no move model: --no-model, or none for this profile" if attr in ("model", "move_model") else "no c map: one-PV profile"
            print(f"| {name:<36} |     - |      - |      - |     - |     - |      - |  ({why})")
            continue
        print(row(name, [x.rating for x in es], truth, [x.low for x in es], [x.high for x in es]))
    print(row("constant = sample mean (oracle)", np.full_like(truth, truth.mean()), truth))
    print(row("opponent's rating (leak, reference)", [e.opponent for e in rows], truth))


def per_player_game(games: list[PgnGame], results: dict[str, list[MoveAssessment]], cal: Calibration) -> list[Estimates]:
    rows = []
    for g in games:
        for color, me, opp in (("white", g.white, g.black), ("black", g.black, g.white)):
            s, last = ScopeStats(), None
            for a in results.get(g.game_id, []):
                if a.color == color:
                    s.add(a, None, MODEL, s.feats.known_x_left)
                    last = a
            if rated(s, cal):
                rows.append(estimates(s, cal, fide(me.rating), fide(opp.rating), last))
                rows[-1].family, rows[-1].player, rows[-1].event = family(g.game_id), me.id, g.event
    return rows


def before_counted_moves(games: list[PgnGame], results: dict[str, list[MoveAssessment]],
                         cal: Calibration) -> list[tuple[float, RatingEstimate, RatingEstimate]]:
    """(FIDE rating, published estimate, gain reading) of each player-game at its last move before the first counted
    one (a game's book plies): what the game scope publishes there (the prior: the event prior attached to that move,
    else the class prior) against Ferreira's Algorithm 4 on the gains so far, which a profile without a move model
    publishes there. Player-games without such a move or without a counted move are left out."""
    assert MODEL is not None
    out = []
    for g in games:
        for color, me in (("white", g.white), ("black", g.black)):
            s, last = ScopeStats(), None
            for a in results.get(g.game_id, []):
                if a.color != color:
                    continue
                if a.counted and s.rating.n == 0 and last is not None:
                    est = model_estimates(s, MODEL, COMB, event_prior=prior_at(last), pool=POOL).moves_only
                    out.append((fide(me.rating), est, cal.from_histogram(s.hist)))
                    break
                s.add(a, None, MODEL, s.feats.known_x_left)
                last = a
    return out


def per_player_event(games: list[PgnGame], results, cal: Calibration, min_games: int = 5, moves_seen=MOVES_SEEN):  # noqa: ANN001
    """Rows for player-events with ``min_games``+ games, and (k, estimate, truth) after k counted moves for every
    player-event that reaches k (across its games, in round order), k in ``moves_seen``."""
    seen: list[tuple[int, RatingEstimate, float]] = []
    last: dict = {}

    def at(n, s, me, opp, a) -> None:  # noqa: ANN001
        seen.append((n, main_estimate(s, cal, prior_at(a)), me.rating))

    scopes = follow_player_events(games, results, moves_seen, at, counted_only=cal.has_c_map, model=MODEL)
    for g in games:  # each player-event's last assessment: its event prior is the one its last estimate starts from
        for a in results.get(g.game_id, []):
            last[(g.event, a.player_id)] = a
    families = {g.event: family(g.game_id) for g in games}
    rows = []
    for (event, pid), (s, mine, theirs) in scopes.items():
        if s.games >= min_games and rated(s, cal):
            rows.append(estimates(s, cal, mine[-1].rating, float(np.mean([o.rating for o in theirs])),
                                  last.get((event, pid))))
            rows[-1].family, rows[-1].player, rows[-1].event = families[event], mine[-1].id, event
    return rows, seen


def outcome_loglik(games: list[PgnGame], results, cal: Calibration, prior: tuple[float, float]) -> dict[str, dict[str, list[float]]]:
    """Per bucket of the less-known player's earlier games: ln(1 - |s - p|) per game, for each predictor."""
    config = Glicko2Config(rating=prior[0], rd=prior[1])
    unknown = RatingEstimate(prior[0], prior[0] - 1.96 * prior[1], prior[0] + 1.96 * prior[1], 0)
    player: dict[str, ScopeStats] = {}
    glicko: dict[str, Glicko2Rating] = {}
    out: dict[str, dict[str, list[float]]] = {}

    def p_from(ra: float, sa: float, rb: float, sb: float) -> float:
        return expected((ra - 1500) / SCALE, (rb - 1500) / SCALE, math.hypot(sa, sb) / SCALE)

    for g in games:
        score = g.white_score
        w, b = g.white.id, g.black.id
        sw, sb = player.setdefault(w, ScopeStats()), player.setdefault(b, ScopeStats())
        gw, gb = glicko.setdefault(w, config.new_player()), glicko.setdefault(b, config.new_player())
        if score is not None:
            rw, rb = fide(g.white.rating), fide(g.black.rating)
            pw = main_estimate(sw, cal) if rated(sw, cal) else unknown
            pb = main_estimate(sb, cal) if rated(sb, cal) else unknown
            preds = {
                "50:50": 0.5,
                "Glicko-2 (earlier results)": p_from(gw.rating, gw.rd, gb.rating, gb.rd),
                "perceived (earlier moves)": p_from(pw.rating, pw.sd, pb.rating, pb.sd),
                "FIDE ratings (outside reference)": 1 / (1 + 10 ** ((rb - rw) / 400)),
            }
            if MODEL is not None:
                fw = performance(sw, rw) or RatingEstimate(rw, 0, 0, 0)
                fb = performance(sb, rb) or RatingEstimate(rb, 0, 0, 0)
                # Elo's logistic on the performance estimates, as the FIDE row uses on the ratings
                preds["performance (earlier moves, FIDE prior)"] = 1 / (1 + 10 ** ((fb.rating - fw.rating) / 400))
            fewest = min(sw.games, sb.games)
            bucket = "0" if fewest == 0 else "1-4" if fewest <= 4 else "5+"
            for key in (bucket, "all"):
                for name, p in preds.items():
                    out.setdefault(key, {}).setdefault(name, []).append(math.log(1 - abs(score - p)))
            glicko[w], glicko[b] = update_after_game(gw, gb, score, config=config)
        for color, s in (("white", sw), ("black", sb)):
            s.games += 1
            for a in results.get(g.game_id, []):
                if a.color == color:
                    s.add(a, None, MODEL)
    return out


def plots(profile: str, method: str, games_rows: list[Estimates], event_rows: list[Estimates], seen) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = ROOT / "docs" / "img"
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 6))
    ax.scatter([e.truth for e in games_rows], [e.main.rating for e in games_rows], s=6, alpha=0.35, label="one game")
    ax.scatter([e.truth for e in event_rows], [e.main.rating for e in event_rows], s=22, c="C3", label="player-event (5+ games)")
    ax.plot([800, 3000], [800, 3000], "k--", lw=1, label="perceived = FIDE")
    ax.set(xlabel="FIDE rating", ylabel=f"perceived rating ({method})", xlim=(800, 3000),
           title=f"held-out games, profile {profile}")
    ax.set_ylim(500, 3200)
    ax.legend(loc="upper left")
    scatter = out_dir / f"accuracy-{profile}-scatter.png"
    fig.savefig(scatter, dpi=100, bbox_inches="tight")
    fig, ax = plt.subplots(figsize=(6, 4))
    ks = [k for k in MOVES_SEEN if any(s[0] == k for s in seen)]
    mae = [np.mean([abs(e.rating - t) for kk, e, t in seen if kk == k]) for k in ks]
    half = [np.mean([e.half_width for kk, e, t in seen if kk == k]) for k in ks]
    ax.plot(ks, mae, "o-", label="mean absolute error")
    ax.plot(ks, half, "s--", label="mean 95 % half-width (published)")
    counted = "counted " if method.startswith("posterior") else ""
    ax.set(xscale="log", xticks=ks, xticklabels=[str(k) for k in ks], xlabel=f"{counted}moves seen (one player, one event)",
           ylabel="Elo", title=f"error vs moves seen, profile {profile}")
    ax.legend()
    moves = out_dir / f"accuracy-{profile}-moves.png"
    fig.savefig(moves, dpi=100, bbox_inches="tight")
    return [str(scatter.relative_to(ROOT)), str(moves.relative_to(ROOT))]


def error_split(label: str, rows: list[Estimates]) -> None:
    """Where the published estimate's error lies: in the level of the player's event (an error every player of the
    event shares) or in the player's place within it. Each row's event error is the mean error of the *other* rows of
    its event in the sample (leave-one-out, so a row's own error is never subtracted from itself); rows alone in their
    event are left out. "Level known" subtracts it: the error that would remain were each event's level read exactly."""
    by_event: dict[str, list[float]] = {}
    for e in rows:
        by_event.setdefault(e.event, []).append(e.main.rating - e.truth)
    kept = [(e, (sum(by_event[e.event]) - (e.main.rating - e.truth)) / (len(by_event[e.event]) - 1))
            for e in rows if len(by_event[e.event]) > 1]
    if not kept:
        return
    truth = np.array([e.truth for e, _ in kept])
    est = np.array([e.main.rating for e, _ in kept])
    level = np.array([x for _, x in kept])
    print(f"| {label} | {len(kept)} rows, {len({e.event for e, _ in kept})} events | MAE "
          f"{np.mean(np.abs(est - truth)):.0f}, r {np.corrcoef(est, truth)[0, 1]:.2f} | MAE {np.mean(np.abs(level)):.0f} | "
          f"MAE {np.mean(np.abs(est - level - truth)):.0f}, r {np.corrcoef(est - level, truth)[0, 1]:.2f} |")


def results_oracle(rows: list[Estimates], games: list[PgnGame], context: list[PgnGame], pool: EventPoolModel) -> None:
    """What a player's results in the event could say with what no estimate here knows (an oracle): the event's
    level, the mean FIDE rating of its other players (every game of the event read), and each opponent's FIDE rating.
    The player's rating is the mode of N(level, w^2) (w, the event pooling's within-event sd) times an Elo likelihood
    per result in the sample: step 2b of docs/models.md s. 12 with kappa 1 and every opponent placed exactly. Printed
    beside :func:`error_split`'s "level known": the share of the error a better reading of the results could remove."""
    ratings: dict[str, dict[str, float]] = {}
    for g in context:
        for p in (g.white, g.black):
            ratings.setdefault(g.event, {}).setdefault(p.id, fide(p.rating))
    elo = replace(pool, results_scale=1.0)
    kept = []
    for e in rows:
        others = [r for pid, r in ratings[e.event].items() if pid != e.player]
        results = [(fide((g.black if g.white.id == e.player else g.white).rating), 0.0,
                     score if g.white.id == e.player else 1.0 - score)
                   for g in games if g.event == e.event and e.player in (g.white.id, g.black.id)
                   and (score := g.white_score) is not None]
        if others:
            kept.append((e.truth, elo.with_results(Prior(float(np.mean(others)), pool.within_sd), results).mean))
    truth, est = np.array([t for t, _ in kept]), np.array([x for _, x in kept])
    print(f"\nOracle, the player's results alone with the event's level and every opponent's FIDE rating known, per "
          f"player-event ({len(kept)} rows): MAE {np.mean(np.abs(est - truth)):.0f}, r {np.corrcoef(est, truth)[0, 1]:.2f}")


def grouped_table(method: str, label: str, key, rows: list[Estimates]) -> None:  # noqa: ANN001
    """The published estimate's accuracy by group (family, time-control class), against the constant guess of the
    whole sample's mean on the same rows."""
    mean = np.mean([e.truth for e in rows])
    print(f"\n| {method} by {label} | n | FIDE mean (sd) | MAE | constant's MAE | bias (95 %; events) | r | in 95 % |")
    print("|---|---|---|---|---|---|---|---|")
    for group in sorted({key(e) for e in rows}):
        rs = [e for e in rows if key(e) == group]
        t_, p_ = np.array([e.truth for e in rs]), np.array([e.main.rating for e in rs])
        cover = np.mean([e.main.low <= e.truth <= e.main.high for e in rs])
        r = np.corrcoef(p_, t_)[0, 1] if len(rs) > 2 else float("nan")
        bias, half, events = clustered_mean(p_ - t_, [e.event for e in rs])
        interval = f"{bias - half:+.0f}, {bias + half:+.0f}; {events}" if events > 1 else "one event"
        print(f"| {group} | {len(rs)} | {t_.mean():.0f} ({t_.std():.0f}) | {np.mean(np.abs(p_ - t_)):.0f} | "
              f"{np.mean(np.abs(t_ - mean)):.0f} | {bias:+.0f} ({interval}) | {r:.2f} | {cover:.1%} |")


def without_clocks(a: MoveAssessment) -> MoveAssessment:
    """An assessment as a game without clocks or a time control gives it (``--strip-clocks``)."""
    return a.model_copy(update={"time_class": UNKNOWN_CLASS, "clock": None, "clock_spent": None, "clock_base": None})


def drop_clocks(moves: list[MoveAssessment], share: float, rng: np.random.Generator) -> list[MoveAssessment]:
    """A game as a relay that lost some clocks gives it (``--drop-clocks``): each move's clock is missing with
    probability ``share``, and the mover's next move has no time spent (the game step's bookkeeping,
    :func:`streamer.pipeline.apply_move`). The base time and the time-control class stay."""
    out, lost = [], set()
    for a in moves:
        if rng.random() < share:
            out.append(a.model_copy(update={"clock": None, "clock_spent": None}))
            lost.add(a.player_id)
        elif a.player_id in lost:
            out.append(a.model_copy(update={"clock_spent": None}))
            lost.discard(a.player_id)
        else:
            out.append(a)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="fast")
    ap.add_argument("--split", choices=sorted(SPLITS), default="holdout")
    ap.add_argument("--games", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", type=int, default=2)
    ap.add_argument("--sample", choices=("random", "events"), default="random",
                    help="random games, or whole player-events (players with 5+ games in an event, all their games)")
    ap.add_argument("--no-model", action="store_true", help="publish from the posterior over c, as without a move model")
    ap.add_argument("--no-combination", action="store_true", help="publish the move model's estimate, without the "
                    "learned combination on top")
    ap.add_argument("--no-event-pool", action="store_true", help="publish without the event prior from the other "
                    "players' moves (docs/models.md s. 12)")
    ap.add_argument("--strip-clocks", action="store_true", help="rate the games as if their PGN had no clocks and no "
                    "time control (time-control class unknown): how the models do on such games, tried on rated-dev")
    ap.add_argument("--one-event", metavar="NAME", help="read every game as one event of this name, as a platform's "
                    "export that names every game's Event alike does (Lichess 'Rated Rapid game', chess.com 'Live "
                    "Chess'): the event pooling then pools the whole sample")
    ap.add_argument("--drop-clocks", type=float, default=0.0, metavar="SHARE", help="drop each move's clock with this "
                    "probability (seeded), as a relay that loses some [%%clk] comments gives them")
    ap.add_argument("--min-clocked-share", type=float, default=None, metavar="SHARE", help="the share of a scope's "
                    "counted moves with a clock from which the combination rates it (default: "
                    "analyzers.combination.MIN_CLOCKED_SHARE)")
    ap.add_argument("--plots", action="store_true", help="write the two PNGs into docs/img")
    ap.add_argument("--fit-interval-scale", action="store_true", help="rated-dev only: fit the event pooling's interval "
                    "scale by counted moves seen (step 4) and print it instead of the tables")
    ap.add_argument("--write", action="store_true", help="with --fit-interval-scale: store it in the profile's eventpool.json")
    add_context_argument(ap)
    ap.add_argument("--warm", action="store_true", help="only fill the analysis cache (no calibration needed); an "
                    "interrupted run keeps every finished search")
    add_data_argument(ap)
    args = ap.parse_args()
    if args.fit_interval_scale and args.split != "dev":
        ap.error("--fit-interval-scale fits on rated-dev only (--split dev): held-out games are never fitted on")
    data = data_dir(args, f"pgn/{SPLITS[args.split]}", "pgn/rated-dev")
    profile = get_profile(args.profile)
    cal = None if args.warm else load_calibration(profile.name)
    global MODEL, COMB, PRIORS, PRIORS_MOVES, POOL
    MODEL = None if args.no_model else load_move_model(profile.name)
    COMB = None if args.no_model or args.no_combination else load_combination(profile.name)
    pool = None if args.no_model or args.no_event_pool else load_event_pool(profile.name)
    config = PipelineConfig(profile, cal)
    sampler = sample_player_events if args.sample == "events" else sample_rated_games
    folder = data / "pgn" / SPLITS[args.split]
    order = {g.game_id: i for i, g in enumerate(rated_games(folder))}
    # file order is round order: the pool step sees an event's games as they were played
    games = sorted(sampler(folder, args.games, seed=args.seed), key=lambda g: order[g.game_id])
    context = event_context(folder, games) if args.context == "event" else games
    t = time.time()

    async def run():
        async with EnginePool(size=args.engines, cache_path=ANALYSIS_CACHE) as pool:
            res = await assess_games(context, pool, config, progress=lambda i, n: print(f"\r{i}/{n} games", end="", file=sys.stderr))
            return res, pool.stats

    results, stats = asyncio.run(run())
    print(file=sys.stderr)
    if args.one_event:
        results = {gid: [a.model_copy(update={"event": args.one_event}) for a in moves] for gid, moves in results.items()}
        games = [replace(g, event=args.one_event) for g in games]
        context = [replace(g, event=args.one_event) for g in context]
    if args.strip_clocks:
        results = {gid: [without_clocks(a) for a in moves] for gid, moves in results.items()}
    if args.drop_clocks:
        rng = np.random.default_rng(args.seed)
        results = {gid: drop_clocks(moves, args.drop_clocks, rng) for gid, moves in results.items()}
    if args.min_clocked_share is not None:
        combination_module.MIN_CLOCKED_SHARE = args.min_clocked_share
    if args.warm:
        print(f"warm: profile {profile.name}, {len(context)} games, {stats.searches} searches ({stats.search_seconds:.0f} "
              f"engine-s), {stats.cache_hits} cache hits")
        return
    assert cal is not None  # loaded unless --warm
    if pool is not None:
        if COMB is None and pool.evidence == "combination":  # --no-combination: the event level from the model's evidence
            pool = replace(pool, evidence="model")
        PRIORS = event_priors(context, results, PipelineConfig(profile, cal, model=MODEL, combination=COMB, event_pool=pool))
        if pool.results_scale > 0:  # for the comparison: the event's level from the moves alone
            PRIORS_MOVES = event_priors(context, results, PipelineConfig(profile, cal, model=MODEL, combination=COMB,
                                                                       event_pool=replace(pool, results_scale=0.0)))
        POOL = pool
    if args.fit_interval_scale:
        if pool is None or MODEL is None:
            sys.exit("--fit-interval-scale needs the profile's move model and event pooling")
        fit_interval_scale(games, results, cal, pool, args)
        return
    game_rows = per_player_game(games, results, cal)
    event_rows, seen = per_player_event(games, results, cal)
    truth = np.array([e.truth for e in game_rows])
    source = f"{len(context)} games of their events" if args.context == "event" else "the sample"
    print(f"accuracy: profile {profile.name} ({profile.limits.key}), split {SPLITS[args.split]}, sample {args.sample} "
          f"(seed {args.seed}), {len(games)} games (event prior from {source}), {len(game_rows)} player-games, {len(event_rows)} player-events; "
          f"calibration {'PROVISIONAL' if cal.provisional else 'final'} ({cal.fitted_on}); {stats.searches} searches "
          f"({stats.search_seconds:.0f} engine-s), {stats.cache_hits} cache hits, {time.time() - t:.0f} s")
    print(f"FIDE ratings (per player-game): mean {truth.mean():.0f}, sd {truth.std():.0f}")
    table("per player-game", game_rows)
    if len(event_rows) >= 10:  # a random sample holds few players with 5+ games in one event: no table of one or two
        table("per player-event (5+ games)", event_rows)
    bands = [(name, [(e.band, e.truth) for e in rows if e.band is not None])
             for name, rows in (("player-game", game_rows), ("player-event", event_rows))]
    print("published 68 % band covers: " + ", ".join(f"{np.mean([b.low <= truth <= b.high for b, truth in rows]):.1%} "
                                                        f"per {name} ({len(rows)})" for name, rows in bands if rows))
    if MODEL is not None:
        print(f"move model: {MODEL.fitted_on} ({'PROVISIONAL' if MODEL.provisional else 'final'}); "
              f"temperature {MODEL.temperature}, person sd {MODEL.person_sd}")
    if COMB is not None:
        print(f"combination: {COMB.fitted_on} ({'PROVISIONAL' if COMB.provisional else 'final'}); {COMB.command}")
    method = "combination" if COMB is not None else "move model" if MODEL is not None else "posterior over c" if cal.has_c_map else "gain histogram, Alg. 4"
    if PRIORS:
        method = f"event prior, else {method}"
    print("\n| where the published error lies | rows | published | the event's error (the others' mean error) | "
          "the event's level known (error minus it) |")
    print("|---|---|---|---|---|")
    error_split("per player-game", game_rows)
    if len(event_rows) >= 10:
        error_split("per player-event", event_rows)
        if POOL is not None:
            results_oracle(event_rows, games, context, POOL)
    (prior, dev_players) = dev_population(data / "pgn" / "rated-dev")
    # the player-disjoint check: juniors and students recur across years, so some held-out players also played in
    # rated-dev, which the models were fitted on; their rows apart from the others show whether that helped
    disjoint = ("player-disjoint check (players who also played in rated-dev, the fitting set)",
                lambda e: "also in rated-dev" if e.player in dev_players else "not in rated-dev")
    groupings = [("event family", lambda e: e.family)] + ([("time-control class", lambda e: e.tclass)] if MODEL else []) + [disjoint]
    for label, key in groupings:
        grouped_table(method, f"{label}, per player-game", key, game_rows)
        if len(event_rows) >= 10:
            grouped_table(method, f"{label}, per player-event", key, event_rows)
    print(f"\n| {'counted ' if cal.has_c_map else ''}moves seen (player-event) | n | {method} MAE | constant's MAE | cut | bias "
          "| in 95 % | mean half-width |")
    print("|---|---|---|---|---|---|---|---|")
    for k in MOVES_SEEN:
        pts = [(e, t) for kk, e, t in seen if kk == k]
        if pts:
            truths = np.array([t for _, t in pts])
            err = np.array([e.rating for e, _ in pts]) - truths
            mae, const = np.mean(np.abs(err)), np.mean(np.abs(truths - truths.mean()))  # the constant: these rows' mean
            cover = np.mean([e.low <= t <= e.high for e, t in pts])
            print(f"| {k} | {len(pts)} | {mae:.0f} | {const:.0f} | {1 - mae / const:+.1%} | {np.mean(err):+.0f} | {cover:.1%} | "
                  f"{np.mean([e.half_width for e, _ in pts]):.0f} |")
    if MODEL is not None:
        before = before_counted_moves(games, results, cal)
        truths = np.array([t for t, _, _ in before])
        const = np.mean(np.abs(truths - truths.mean()))
        print("\n| before a game's first counted move (book plies), per player-game | n | MAE | constant's MAE | cut | bias "
              "| in 95 % | mean half-width |")
        print("|---|---|---|---|---|---|---|---|")
        for name, ests in (("published: the prior (event prior, else the class's)", [est for _, est, _ in before]),
                           ("gain reading (Ferreira Alg. 4)", [gain for _, _, gain in before])):
            err = np.array([e.rating for e in ests]) - truths
            mae = np.mean(np.abs(err))
            cover = np.mean([e.low <= t <= e.high for e, t in zip(ests, truths)])
            print(f"| {name} | {len(ests)} | {mae:.0f} | {const:.0f} | {1 - mae / const:+.1%} | {np.mean(err):+.0f} | "
                  f"{cover:.1%} | {np.mean([e.half_width for e in ests]):.0f} |")
    ll = outcome_loglik(games, results, cal, prior)
    print(f"\nNewcomers (not seen yet in the sample) start as the rated-dev population: {prior[0]:.0f} +/- {prior[1]:.0f}")
    names = list(next(iter(ll.values())))
    print("\n| outcome log-likelihood (1/T) sum ln(1-|s-p|) | games | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for key in ("0", "1-4", "5+", "all"):
        if key in ll:
            label = {"all": "all games"}.get(key, f"less-known player has {key} earlier games")
            print(f"| {label} | {len(ll[key][names[0]])} | " + " | ".join(f"{np.mean(ll[key][n]):.4f}" for n in names) + " |")
    if args.plots:
        print("\nplots: " + ", ".join(plots(profile.name, method, game_rows, event_rows, seen)))


def outside_ratio(rows: list[tuple[RatingEstimate, float]]) -> np.ndarray:
    """Per (estimate, truth): the truth's distance to the estimate over the distance to the interval's end on its side
    (at most 1 inside the interval)."""
    return np.array([(t - est.rating) / max(est.high - est.rating, 1e-9) if t >= est.rating
                     else (est.rating - t) / max(est.rating - est.low, 1e-9) for est, t in rows])


def fit_interval_scale(games: list[PgnGame], results, cal: Calibration, pool: EventPoolModel, args) -> None:  # noqa: ANN001
    """Step 4 of the event pooling, fitted on this (rated-dev) sample: per bucket of counted moves, the factor f on the
    published interval's distances to the estimate that puts 95 % of the FIDE ratings inside, i.e. the 95th percentile
    over the bucket's rows of (distance to the truth) / (distance to the interval's end on the truth's side), read
    with the scale off; a knot at the bucket's geometric mean of counted moves."""
    global POOL
    POOL = replace(pool, interval_scale=(), prior_scale=1.0)
    game_rows = per_player_game(games, results, cal)
    event_rows, seen = per_player_event(games, results, cal, moves_seen=FIT_MOVES_SEEN)
    rows = [(e.model, e.truth) for e in game_rows + event_rows] + [(est, t) for _, est, t in seen]
    n = np.array([est.n for est, _ in rows], float)
    ratio = outside_ratio(rows)
    edges = (*FIT_BUCKETS, math.inf)
    knots = []
    print(f"interval scale (step 4), {len(rows)} rows of rated-dev: {len(game_rows)} player-games, {len(event_rows)} "
          f"player-events at their end, {len(seen)} player-event checkpoints at {FIT_MOVES_SEEN} counted moves")
    print("| counted moves | rows | in 95 % unscaled | factor | knot at |")
    print("|---|---|---|---|---|")
    for lo, hi in zip(edges, edges[1:]):
        m = (n >= lo) & (n < hi)
        if m.sum() < 50:
            continue
        knot, factor = float(np.exp(np.mean(np.log(n[m])))), float(np.quantile(ratio[m], 0.95))
        knots.append((round(knot, 1), round(factor, 4)))
        print(f"| {f'{lo:.0f}+' if hi == math.inf else f'{lo:.0f}-{hi - 1:.0f}'} | {m.sum()} | {np.mean(ratio[m] <= 1):.1%} | {factor:.3f} | {knot:.1f} |")
    fitted = replace(pool, interval_scale=tuple(knots), interval_command=(
        f"python bench/accuracy.py --profile {args.profile} --split dev --sample {args.sample} --games {args.games} "
        f"--seed {args.seed}{context_flag(args)} --fit-interval-scale --write"))
    inside = [(e := est.scaled(fitted.scale_at(est.n))).low <= t <= e.high for est, t in rows]
    print(f"in 95 % with the scale, these rows: {np.mean(inside):.1%}")
    # before a game's first counted move the event prior itself is published: its own factor, from the same rows' games
    before = [(est, t) for t, est, _ in before_counted_moves(games, results, cal) if est.n == 0]
    ratio0 = outside_ratio(before)
    prior_scale = round(float(np.quantile(ratio0, 0.95)), 4)
    fitted = replace(fitted, prior_scale=prior_scale)
    print(f"before the first counted move: {len(before)} player-games, in 95 % unscaled {np.mean(ratio0 <= 1):.1%}, "
          f"factor {prior_scale:.3f}")
    if args.write:
        path = ROOT / "analyzers" / "calibrations" / f"{args.profile}.eventpool.json"
        fitted.save(path)
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
