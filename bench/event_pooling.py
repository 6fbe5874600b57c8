"""Fit and measure event pooling (docs/models.md s. 12) on rated-dev, the fitting set. Never on rated-holdout.

    python bench/event_pooling.py [--profile fast] [--dev 1000] [--seed 0] [--evidence combination] [--rule mae]
                                  [--context event] [--write]

Players of one event are of a similar level, and the moves of everyone else in the event say where that level is.
The pool step (streamer.pipeline.pool_event) turns them into each player's prior; this fits its numbers and
shows what it does, per player-game of the rated-dev player-events sample (whole games in the analysis cache only):

1. From the sample's headers (dev data; no declared rating enters an estimate): the within-event sd w of the FIDE
   ratings, and the mean mu_0 and sd tau of the events' mean ratings; and the correlation of two opponents' ratings
   about their event's mean (near 0, a player's own opponents would say little beyond the event's level).
2. For each kind of evidence a player-game gives about the level (the move model's likelihood; the combination's
   estimate where it applies, its sd times f: docs/models.md s. 12), each f and each event sd e on a grid: the
   game-scope estimate at each player-game's end (and the event scope of each player-event of 5+ games at its last
   move) with the event prior the pool step gives, replaying the games in sample (round) order through the service's
   own code, one game after another (a live round also has its concurrent games: this is the prior a little earlier
   than live). Then, with the f that step chooses, the event's results (step 2b) at each weight kappa and event sd e
   on a grid. f is the one with the highest mean log density of the FIDE ratings among those whose 95 % interval
   covers 95 % of them per player-game, without results. The published (e, kappa) for ``--evidence`` (``--rule
   mae``, the default) have the lowest MAE per player-game (within 1 Elo of it, the lowest per player-event): the
   interval is calibrated afterwards, by step 4 (``bench/accuracy.py --fit-interval-scale``); ``--rule coverage``
   keeps the highest log density among those covering 95 % per player-game and 94.5 % per player-event (a player's
   results and moves are not independent evidence, so the results narrow an event's interval too).
3. For comparison on the same rows: the move model with its class prior, the combination (fitted on rated-dev,
   these games included, so flattered here), and an oracle prior at the event's true mean FIDE rating.

``--context event`` replays every rated game of the sample's events up to each event's last sampled game (in file
order, bench/common.event_context) through the pool step, as a live service reads an event; only the sample is scored.
Without it (``sample``) the prior comes from the sampled games alone. The context's games need their analyses:
``python bench/accuracy.py --split dev --sample events --games N --context event --warm`` fills the cache for them.

``--write`` saves analyzers/calibrations/<profile>.eventpool.json with the command.
"""

from __future__ import annotations

import argparse
import logging
import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from common import ROOT, add_context_argument, add_data_argument, context_flag, data_dir, event_context, event_priors, fide
from fit_model import analysed

from analyzers.combination import load_combination
from analyzers.eventpool import EVIDENCE, EventPoolModel
from analyzers.perceived import RatingEstimate
from analyzers.profiles import get_profile
from analyzers.ratingmodel import Prior, load_move_model
from schemas import MoveAssessment
from streamer.batch import sample_player_events
from streamer.pipeline import PipelineConfig, ScopeStats, model_estimates

#: How the table names each kind of evidence.
WHAT = {"model": "move-model likelihoods", "combination": "combination estimates (else likelihoods)"}
#: Event sds tried (step 2).
EVENT_SDS = (0.0, 100.0, 150.0, 200.0, 250.0, 300.0, 350.0)
#: Scales f of the sd of a game's combination evidence about the level, tried.
EVIDENCE_SCALES = (1.0, 2.0, 3.0, 4.0)
#: Weights kappa of the event's results (step 2b), tried with the f chosen without results; 0 is the rows above.
RESULTS_SCALES = (0.25, 0.35, 0.5, 0.75, 1.0)
#: Event sds tried with results (e enters before the results, so each is a replay of its own).
RESULTS_EVENT_SDS = (150.0, 200.0, 250.0, 300.0)


@dataclass
class EventScope:
    """One player's scope over their games of one event, for the per-player-event rows."""

    stats: ScopeStats = field(default_factory=ScopeStats)
    last: MoveAssessment | None = None  # their last assessment in the event (its event prior is the scope's)
    games: set[str] = field(default_factory=set)
    ratings: list[float] = field(default_factory=list)  # their declared rating in each game (the truth)


def coverage(est: list[RatingEstimate], truth: np.ndarray) -> float:
    """The share of FIDE ratings inside their estimate's interval."""
    return float(np.mean([e.low <= t <= e.high for e, t in zip(est, truth, strict=True)]))


def log_density(est: list[RatingEstimate], truth: np.ndarray) -> float:
    """The mean log density of the FIDE rating under each estimate read as a normal (its mean, its interval's sd): a
    proper score, so it rewards sharp estimates only where they are right."""
    return float(np.mean([-math.log(e.sd) - 0.5 * ((t - e.rating) / e.sd) ** 2 for e, t in zip(est, truth, strict=True)])
                 - 0.5 * math.log(2 * math.pi))


def mae(est: list[RatingEstimate], truth: np.ndarray) -> float:
    return float(np.mean(np.abs(np.array([e.rating for e in est]) - truth)))


def row(name: str, truth: np.ndarray, est: list[RatingEstimate], const: float) -> str:
    r = np.array([e.rating for e in est])
    err = mae(est, truth)
    width = np.mean([e.high - e.low for e in est]) / 2
    return (f"| {name} | {err:.0f} | {100 * (1 - err / const):+.1f} % | {np.mean(r - truth):+.0f} | "
            f"{np.corrcoef(r, truth)[0, 1]:.2f} | {100 * coverage(est, truth):.1f} % | {width:.0f} | "
            f"{log_density(est, truth):.4f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="fast")
    ap.add_argument("--dev", type=int, default=1000, help="rated-dev games, as whole player-events (as warm_cache draws them)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--evidence", choices=EVIDENCE, default="combination",
                    help="what summarises a player-game for the published fit (both are measured)")
    ap.add_argument("--rule", choices=("mae", "coverage"), default="mae",
                    help="how (e, kappa) are chosen: the lowest MAE per player-game (step 4 then calibrates the interval), "
                    "or the highest log density among those covering 95 %%")
    add_context_argument(ap)
    ap.add_argument("--write", action="store_true", help="write analyzers/calibrations/<profile>.eventpool.json")
    add_data_argument(ap)
    args = ap.parse_args()
    logging.getLogger("kibitz").setLevel(logging.ERROR)  # each game not in the cache is a rejection: counted instead
    data = data_dir(args, "pgn/rated-dev")
    profile = get_profile(args.profile)
    model, comb = load_move_model(profile.name), load_combination(profile.name)
    assert model is not None, f"profile {profile.name} has no move model"
    sample = sample_player_events(data / "pgn" / "rated-dev", args.dev, seed=args.seed)
    replay = event_context(data / "pgn" / "rated-dev", sample) if args.context == "event" else sample
    complete, results = analysed([(g, False) for g in replay], profile)
    done = {g.game_id for g, _ in complete}
    games = [g for g in sample if g.game_id in done]  # scored: the sample's fully analysed games
    context = [g for g in replay if g.game_id in done]  # replayed through the pool step: these and, as live, the rest

    # 1. hyper-parameters from the sample's headers
    ratings: defaultdict[str, list[float]] = defaultdict(list)
    for g in sample:
        ratings[g.event] += [fide(g.white.rating), fide(g.black.rating)]
    event_mean = {ev: float(np.mean(v)) for ev, v in ratings.items()}
    means = np.array(list(event_mean.values()))
    within = round(math.sqrt(np.mean([np.var(v) for v in ratings.values()])), 1)
    mean0, tau = round(float(means.mean()), 1), round(float(means.std()), 1)
    # whether a player's opponents say more than the event's level: the correlation of opponents' ratings about it
    dev = np.array([[fide(p.rating) - event_mean[g.event] for p in (g.white, g.black)] for g in sample])
    print(f"{len(games)} rated-dev games fully analysed ({len(sample)} drawn), {len(ratings)} events, the event prior "
          f"from {len(context)} games ({args.context} context); 1. within-event sd "
          f"w {within:.0f}; event means mu_0 {means.mean():.0f}, tau {means.std():.0f}; opponents' ratings about their "
          f"event's mean correlate {np.corrcoef(dev[:, 0], dev[:, 1])[0, 1]:+.2f}")

    # the player-game scopes at their end, and the last assessment of each (its event prior is the published one's)
    # and each player's event scope at their last move in the event (player-events of 5+ games are scored)
    scopes: list[ScopeStats] = []
    truths: list[float] = []
    lasts: list[MoveAssessment] = []
    events: list[str] = []
    ev_scopes: dict[tuple[str, str], EventScope] = {}
    for g in games:
        for color, me in (("white", g.white), ("black", g.black)):
            s, last = ScopeStats(), None
            for a in results[g.game_id]:
                if a.color == color:
                    left = s.feats.known_x_left  # the mover's time left as last known in the game
                    s.add(a, None, model, left)
                    last = a
                    ev = ev_scopes.setdefault((g.event, a.player_id), EventScope())
                    ev.stats.add(a, None, model, left)
                    ev.last = a
                    ev.games.add(g.game_id)
            if s.rating.n:
                assert last is not None  # a counted move was seen
                scopes.append(s)
                truths.append(float(me.rating or 0))
                lasts.append(last)
                events.append(g.event)
                ev_scopes[(g.event, last.player_id)].ratings.append(float(me.rating or 0))
    truth = np.array(truths)
    const = float(np.abs(truth - truth.mean()).mean())
    pe = [v for v in ev_scopes.values() if len(v.games) >= 5 and v.ratings]
    pe_truth = np.array([np.mean(v.ratings) for v in pe])
    pe_const = float(np.abs(pe_truth - pe_truth.mean()).mean())

    def published(priors: dict, e_sd: float = 0.0, per_event: bool = False) -> list[RatingEstimate]:
        """The published estimates with the event priors ``priors`` (made with e = 0) widened to event sd ``e_sd``:
        of the player-games, or (``per_event``) of the player-events of 5+ games."""
        out = []
        for s, a in ([(v.stats, v.last) for v in pe] if per_event else zip(scopes, lasts, strict=True)):
            assert a is not None  # every scope scored has counted a move
            p = priors.get((a.game_id, a.ply))
            p = Prior(p.mean, math.hypot(p.sd, e_sd)) if p is not None else None  # step 2's sd: e enters only here
            est = model_estimates(s, model, comb, event_prior=p)
            assert est is not None
            out.append(est.moves_only)
        return out

    print(f"\n2-3. per player-game ({len(truth)}); constant = the rows' mean FIDE (oracle), MAE {const:.0f}\n")
    print("| estimate | MAE | cut vs constant | bias | r | FIDE in the 95 % interval | mean half-width | log density |")
    print("|---|---|---|---|---|---|---|---|")
    base = [model_estimates(s, model) for s in scopes]
    print(row("move model, class prior", truth, [e.model for e in base if e], const))
    if comb is not None:
        print(row("combination where it applies, else move model (fitted on these games)", truth, published({}), const))
    # (evidence, f, e, kappa) -> (mean log density of the FIDE rating, coverage per player-game, per player-event, MAE
    # per player-game, per player-event); without results e only widens the prior, so one replay per f
    scores: dict[tuple[str, float, float, float], tuple[float, float, float, float, float]] = {}
    event_rows: list[str] = []

    def measure(key: tuple[str, float, float, float], name: str, est: list[RatingEstimate],
                pe_est: list[RatingEstimate]) -> None:
        """Score one (evidence, f, e, kappa) and print its rows (the player-event rows after the player-game table)."""
        scores[key] = (log_density(est, truth), coverage(est, truth), coverage(pe_est, pe_truth), mae(est, truth),
                       mae(pe_est, pe_truth))
        print(row(name, truth, est, const))
        event_rows.append(row(name, pe_truth, pe_est, pe_const))

    def covering() -> dict[tuple[str, float, float, float], tuple[float, float, float, float, float]]:
        """The rule's candidates: 95 % covered per player-game and, with results (which narrow the player-event
        intervals too), 94.5 % per player-event (95 % to the nearest percent)."""
        return {k: v for k, v in scores.items() if k[0] == args.evidence and v[1] >= 0.95 and (k[3] == 0 or v[2] >= 0.945)}
    for evidence in EVIDENCE:
        if evidence == "combination" and comb is None:
            continue
        for scale in EVIDENCE_SCALES if evidence == "combination" else (1.0,):
            pool = EventPoolModel(within, mean0, tau, 0.0, evidence=evidence, evidence_scale=scale)
            priors = event_priors(context, results, PipelineConfig(profile, model=model, combination=comb, event_pool=pool))
            for e_sd in EVENT_SDS:
                measure((evidence, scale, e_sd, 0.0),
                        f"event prior from the other players' {WHAT[evidence]}, f {scale:g}, event sd {e_sd:.0f}",
                        published(priors, e_sd), published(priors, e_sd, per_event=True))
    if chosen := covering():  # step 2b: the event's results, with the f chosen without them
        f_best = max(chosen, key=lambda k: chosen[k][0])[1]
        for kappa in RESULTS_SCALES:
            for e_sd in RESULTS_EVENT_SDS:
                pool = EventPoolModel(within, mean0, tau, e_sd, evidence=args.evidence, evidence_scale=f_best,
                                      results_scale=kappa)
                priors = event_priors(context, results, PipelineConfig(profile, model=model, combination=comb, event_pool=pool))
                measure((args.evidence, f_best, e_sd, kappa),
                        f"event prior from the other players' {WHAT[args.evidence]} and the results, f {f_best:g}, "
                        f"event sd {e_sd:.0f}, kappa {kappa:g}", published(priors), published(priors, per_event=True))
    chosen = covering()
    oracle = [model_estimates(s, model, event_prior=Prior(event_mean[ev], within)) for s, ev in zip(scopes, events, strict=True)]
    print(row("oracle: prior at the event's mean FIDE (reference, not an estimate)", truth, [e.moves_only for e in oracle if e], const))
    print(f"\nper player-event, 5+ games ({len(pe)}; the event scope at the player's last move), constant MAE {pe_const:.0f}\n")
    print("| estimate | MAE | cut vs constant | bias | r | FIDE in the 95 % interval | mean half-width | log density |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(event_rows))
    if not chosen:
        raise SystemExit("no (f, e) on the grid reaches 95 % coverage")
    if args.rule == "coverage":
        _, f_sd, e_sd, kappa = max(chosen, key=lambda k: chosen[k][0])
        why = ("the highest mean log density of the FIDE rating among those whose 95 % interval covers 95 %; with results, "
               "94.5 % per player-event")
    else:  # the interval is step 4's to calibrate: the most accurate estimate, the player-event MAE breaking near-ties
        mine = {k: v for k, v in scores.items() if k[0] == args.evidence and k[1] == f_best}  # f: chosen without results
        best = min(v[3] for v in mine.values())
        _, f_sd, e_sd, kappa = min((k for k, v in mine.items() if v[3] < best + 1.0), key=lambda k: mine[k][4])
        why = ("the lowest MAE per player-game, within 1 Elo of it the lowest per player-event; its interval is step 4's "
               "to calibrate: bench/accuracy.py --fit-interval-scale")
    print(f"\nchosen: evidence {args.evidence}, f {f_sd:g}, event sd {e_sd:.0f}, results kappa {kappa:g} ({why})")
    if args.write:
        out = EventPoolModel(
            within, mean0, tau, e_sd, evidence=args.evidence, evidence_scale=f_sd, results_scale=kappa, profile=profile.name,
            fitted_on=f"{len(games)} rated-dev games (player-events, seed {args.seed}), {len(ratings)} events, the event "
                      f"prior from {len(context)} games of them ({args.context} context); move model: {model.fitted_on}",
            command=f"python bench/event_pooling.py --profile {profile.name} --dev {args.dev} --seed {args.seed} "
                    f"--evidence {args.evidence} --rule {args.rule}{context_flag(args)} --write",
            provisional=model.provisional or (args.evidence == "combination" and comb is not None and comb.provisional),
        )
        dest = ROOT / "analyzers" / "calibrations" / f"{profile.name}.eventpool.json"
        out.save(dest)
        print(f"written {dest}, without an interval scale (step 4): fit it next with python bench/accuracy.py --profile "
              f"{profile.name} --split dev --sample events --games 3200 --seed {args.seed}{context_flag(args)} "
              "--fit-interval-scale --write")


if __name__ == "__main__":
    main()
