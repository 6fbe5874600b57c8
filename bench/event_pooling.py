"""Fit and measure event pooling (docs/models.md s. 12) on rated-dev, the fitting set. Never on rated-holdout.

    python bench/event_pooling.py [--profile fast] [--dev 1000] [--seed 0] [--write]   # analyses from the cache

Players of one event are of a similar level, and the moves of everyone else in the event say where that level is.
The pool step (streamer.pipeline.pool_event) turns them into each player's prior; this fits its four numbers and
shows what it does, per player-game of the rated-dev player-events sample (whole games in the analysis cache only):

1. From the sample's headers (dev data; no declared rating enters an estimate): the within-event sd w of the FIDE
   ratings, and the mean mu_0 and sd tau of the events' mean ratings.
2. For each event sd e on a grid: the game-scope estimate at each player-game's end with the event prior the pool
   step gives, replaying the games in sample (round) order through the service's own code, one game after another
   (a live round also has its concurrent games: this is the prior a little earlier than live). The published e is
   the smallest whose 95 % interval covers 95 % of the FIDE ratings.
3. For comparison on the same rows: the move model with its class prior, the combination (fitted on rated-dev,
   these games included, so flattered here), and an oracle prior at the event's true mean FIDE rating.

``--write`` saves analyzers/calibrations/<profile>.eventpool.json with the command.
"""

from __future__ import annotations

import argparse
import logging
import math
from collections import defaultdict

import numpy as np
from common import ROOT, add_data_argument, data_dir, event_priors
from fit_model import analysed

from analyzers.combination import load_combination
from analyzers.eventpool import EventPoolModel
from analyzers.perceived import RatingEstimate
from analyzers.profiles import get_profile
from analyzers.ratingmodel import Prior, load_move_model
from streamer.batch import sample_player_events
from streamer.pipeline import PipelineConfig, ScopeStats, model_estimates

#: Event sds tried (step 2).
EVENT_SDS = (0.0, 100.0, 150.0, 175.0, 200.0, 225.0, 250.0, 275.0, 300.0, 350.0)


def row(name: str, truth: np.ndarray, est: list[RatingEstimate], const: float) -> str:
    r = np.array([e.rating for e in est])
    mae = float(np.abs(r - truth).mean())
    cover = np.mean([e.low <= t <= e.high for e, t in zip(est, truth, strict=True)])
    width = np.mean([e.high - e.low for e in est]) / 2
    return (f"| {name} | {mae:.0f} | {100 * (1 - mae / const):+.1f} % | {np.mean(r - truth):+.0f} | "
            f"{np.corrcoef(r, truth)[0, 1]:.2f} | {100 * cover:.1f} % | {width:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="fast")
    ap.add_argument("--dev", type=int, default=1000, help="rated-dev games, as whole player-events (as warm_cache draws them)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", action="store_true", help="write analyzers/calibrations/<profile>.eventpool.json")
    add_data_argument(ap)
    args = ap.parse_args()
    logging.getLogger("kibitz").setLevel(logging.ERROR)  # each game not in the cache is a rejection: counted instead
    data = data_dir(args, "pgn/rated-dev")
    profile = get_profile(args.profile)
    model, comb = load_move_model(profile.name), load_combination(profile.name)
    assert model is not None, f"profile {profile.name} has no move model"
    sample = sample_player_events(data / "pgn" / "rated-dev", args.dev, seed=args.seed)
    complete, results = analysed([(g, False) for g in sample], profile)
    games = [g for g, _ in complete]

    # 1. hyper-parameters from the sample's headers
    ratings = defaultdict(list)
    for g in sample:
        ratings[g.event] += [g.white.rating, g.black.rating]
    within = math.sqrt(np.mean([np.var(v) for v in ratings.values()]))
    means = np.array([np.mean(v) for v in ratings.values()])
    print(f"{len(games)} rated-dev games fully analysed ({len(sample)} drawn), {len(ratings)} events; 1. within-event sd "
          f"w {within:.0f}; event means mu_0 {means.mean():.0f}, tau {means.std():.0f}")

    # the player-game scopes at their end, and the last assessment of each (its event prior is the published one's)
    scopes, truths, lasts, events = [], [], [], []
    for g in games:
        for color, me in (("white", g.white), ("black", g.black)):
            s, last = ScopeStats(), None
            for a in results[g.game_id]:
                if a.color == color:
                    s.add(a, None, model)
                    last = a
            if s.rating.n:
                scopes.append(s)
                truths.append(float(me.rating or 0))
                lasts.append(last)
                events.append(g.event)
    truth = np.array(truths)
    const = float(np.abs(truth - truth.mean()).mean())

    def published(priors: dict) -> list[RatingEstimate]:
        out = []
        for s, a in zip(scopes, lasts, strict=True):
            est = model_estimates(s, model, comb, event_prior=priors.get((a.game_id, a.ply)))
            assert est is not None
            out.append(est.moves_only)
        return out

    print(f"\n2-3. per player-game ({len(truth)}); constant = the rows' mean FIDE (oracle), MAE {const:.0f}\n")
    print("| estimate | MAE | cut vs constant | bias | r | FIDE in the 95 % interval | mean half-width |")
    print("|---|---|---|---|---|---|---|")
    base = [model_estimates(s, model) for s in scopes]
    print(row("move model, class prior", truth, [e.model for e in base if e], const))
    if comb is not None:
        print(row("combination where it applies, else move model (fitted on these games)", truth, published({}), const))
    chosen = None
    for e_sd in EVENT_SDS:
        pool = EventPoolModel(round(within, 1), round(float(means.mean()), 1), round(float(means.std()), 1), e_sd)
        est = published(event_priors(games, results, PipelineConfig(profile, model=model, event_pool=pool)))
        cover = np.mean([e.low <= t <= e.high for e, t in zip(est, truth, strict=True)])
        print(row(f"event prior from the other players' moves, event sd {e_sd:.0f}", truth, est, const))
        if chosen is None and cover >= 0.95:
            chosen = pool
    oracle = [model_estimates(s, model, event_prior=Prior(float(np.mean(ratings[ev])), within)) for s, ev in zip(scopes, events, strict=True)]
    print(row("oracle: prior at the event's mean FIDE (reference, not an estimate)", truth, [e.moves_only for e in oracle if e], const))
    if chosen is None:
        raise SystemExit("no event sd on the grid reaches 95 % coverage")
    print(f"\nchosen: event sd {chosen.event_sd:.0f} (the smallest whose 95 % interval covers 95 %)")
    if args.write:
        out = EventPoolModel(
            chosen.within_sd, chosen.mean0, chosen.tau, chosen.event_sd, profile=profile.name,
            fitted_on=f"{len(games)} rated-dev games (player-events, seed {args.seed}), {len(ratings)} events; move model: "
                      f"{model.fitted_on}",
            command=f"python bench/event_pooling.py --profile {profile.name} --dev {args.dev} --seed {args.seed} --write",
            provisional=model.provisional,
        )
        dest = ROOT / "analyzers" / "calibrations" / f"{profile.name}.eventpool.json"
        out.save(dest)
        print(f"written {dest}")


if __name__ == "__main__":
    main()
