"""Does a deeper search say more about a player's rating than the service's depth 8? A measurement on rated-dev.

    python bench/depth_signal.py --warm   # the depth-12 searches of the sample's counted moves, once, into the cache
    python bench/depth_signal.py          # the tables, from the cache (3 minutes for the default 520 games)

The perceived rating reads the service's depth-8 search (profile ``fast``). Whether a deeper analysis would place
players better is measured here on rated-dev games drawn as whole player-events (seeded as the fair-play benchmark
draws them): every player-event of 40+ counted moves in those games (the drawn players' and their opponents'), with
the review's depth-12 search (one PV) of each position and of the position after each played move that is not its
first choice (as ``bench/review_loss.py`` values moves):

1. per player-event, the correlation with the FIDE rating of four summaries of the same moves: the mean loss in win
   probability at depth 8 and at depth 12, and how often the player chose depth 8's and depth 12's first choice;
2. the move model (docs/models.md s. 9) with one more term, a bonus beta(R) = beta0 + beta1 z for the depth-12 first
   choice in the choice among the depth-8 candidates (P(i) proportional to exp(-(delta_i / s)^c + beta(R) [i is it])),
   fitted by maximum likelihood at the declared ratings on one half of the events (split by event) and scored on the
   other: the log-likelihood per move it adds, and each scored player-event's posterior mean under the population
   prior with and without the term (the shipped model's temperature and person effect for both).

The bonus is the most a depth-12 first choice can add to the choice model: if stronger players found it more often
than their depth-8 choice says, beta1 would be large and the rating posterior sharper.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
from collections.abc import Sequence

import numpy as np
from common import ANALYSIS_CACHE, add_data_argument, data_dir
from fairplay_data import analyse, load_samples, player_event_units, review_first_values, review_loss, review_move_values
from scipy.optimize import minimize

from analyzers.engine import EnginePool
from analyzers.profiles import get_profile
from analyzers.ratingmodel import RATING_GRID, UNKNOWN_CLASS, MoveModel, choice_loglik, load_move_model, log_s_and_c, rating_z
from schemas import MoveAssessment
from streamer.pipeline import PipelineConfig, move_clock_inputs
from streamer.review import REVIEW_PROFILE, first_choices, review_terms, with_deep_choice

#: Counted moves a player-event needs to be scored (the fair-play alerts' minimum).
MIN_MOVES = 40
#: Candidates per move in the padded arrays: the profile's 5, an unlisted played move and an unlisted deeper choice.
WIDTH = 7


class Moves:
    """One set of counted moves as padded arrays: log losses (the best move's -inf, padding +inf), the played and
    the depth-12 first choice's index, the declared rating, and the class and clock terms of log s."""

    def __init__(self, rows: Sequence[tuple[MoveAssessment, str, list[float], int]], model: MoveModel) -> None:
        n = len(rows)
        losses = np.full((n, WIDTH), np.inf)
        self.played = np.zeros(n, dtype=int)
        self.target = np.zeros(n, dtype=int)
        self.rating = np.zeros(n)
        self.offset = np.zeros(n)
        for i, (a, first, row, idx) in enumerate(rows):
            row, self.target[i] = with_deep_choice(a, row, first)  # as the review reads an unlisted first choice
            losses[i, :len(row)] = row
            self.played[i] = idx
            self.rating[i] = float(a.reference_rating or 0)
            self.offset[i] = model.class_offsets.get(a.time_class or UNKNOWN_CLASS, 0.0) + model.clock_shift(move_clock_inputs(a))
        with np.errstate(divide="ignore"):
            self.log_d = np.log(losses)

    def loglik(self, model: MoveModel, ratings: np.ndarray, beta: tuple[float, float]) -> np.ndarray:
        """log P(played) per move (rows) at ``ratings`` (one per move, or a grid: moves x grid): the move model's
        choice with the bonus beta(R) added to the depth-12 first choice's exponent."""
        grid = ratings.ndim > 1
        log_s, c = log_s_and_c(model.a, model.b, ratings, self.offset[:, None] if grid else self.offset)
        hit = np.arange(WIDTH) == self.target[:, None]
        bonus = (beta[0] + beta[1] * rating_z(ratings))[..., None] * (hit[:, None, :] if grid else hit)
        played = np.broadcast_to(self.played[:, None], ratings.shape) if grid else self.played
        return choice_loglik(self.log_d[:, None, :] if grid else self.log_d, played, log_s, c, bonus)


def fit_bonus(moves: Moves, model: MoveModel) -> tuple[float, float]:
    """(beta0, beta1) by maximum likelihood at the declared ratings."""
    fit = minimize(lambda b: -moves.loglik(model, moves.rating, (b[0], b[1])).sum(), [0.0, 0.0], method="Nelder-Mead")
    return float(fit.x[0]), float(fit.x[1])


def corr(x: Sequence[float], y: Sequence[float]) -> float:
    return float(np.corrcoef(x, y)[0, 1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=520, help="rated-dev games drawn as whole player-events (seeded)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warm", action="store_true", help="run the searches (into the analysis cache) and stop")
    add_data_argument(ap)
    args = ap.parse_args()
    samples = load_samples(data_dir(args, "pgn/rated-dev"), args.events, args.events, 0, 0, args.seed, "rated-dev")
    model = load_move_model("fast")
    assert model is not None
    limits = get_profile(REVIEW_PROFILE).limits
    events = sorted(player_event_units(samples.events).items())
    units = [u for _, us in events for u in us]

    async def searches():  # noqa: ANN202
        async with EnginePool(size=2, cache_path=ANALYSIS_CACHE) as pool:
            results, _ = await analyse(pool, PipelineConfig(get_profile("fast")), samples, assist_events=0)
            firsts = await first_choices(pool, units, results, limits)
            values = await review_move_values(pool, units, {}, firsts, limits)
            first_values = await review_first_values(pool, units, firsts, limits)
            print(f"{pool.stats.searches} searches, {pool.stats.cache_hits} from the cache", file=sys.stderr)
            return results, firsts, values, first_values

    results, firsts, values, first_values = asyncio.run(searches())
    if args.warm:
        return
    scored = []  # (event, FIDE rating, rows, (d8 loss, d12 loss, d8 match, d12 match))
    for (event, _), us in events:
        rows, summary = [], []
        for g, color in us:
            for a in results.get(g.game_id, []):
                first = firsts.get((g.game_id, color), {}).get(a.ply)
                terms = review_terms(a) if a.color == color and first else None
                if terms is None or first is None:
                    continue
                idx, losses, _ = terms
                rows.append((a, first, losses, idx))
                summary.append((losses[idx], review_loss(a, first, first_values, values), a.played_rank == 0, a.uci == first))
        if len(rows) >= MIN_MOVES:
            scored.append((event, float(rows[0][0].reference_rating or 0), rows, np.mean(summary, axis=0)))
    truth = [r for _, r, _, _ in scored]
    print(f"rated-dev, --events {args.events} (seed {args.seed}): {len(scored)} player-events of {MIN_MOVES}+ counted "
          f"moves ({sum(len(rows) for _, _, rows, _ in scored):,} moves) in {len({e for e, *_ in scored})} events\n")
    print("| per player-event, correlation with the FIDE rating | depth 8 (the service) | depth 12 |")
    print("|---|---|---|")
    for j, name in ((0, "mean loss in win probability"), (2, "share of the first choice played")):
        print(f"| {name} | {corr(truth, [s[j] for *_, s in scored]):+.3f} | {corr(truth, [s[j + 1] for *_, s in scored]):+.3f} |")

    names = sorted({e for e, *_ in scored})
    random.Random(1).shuffle(names)
    estimates: dict[str, list[tuple[float, float]]] = {"the move model (depth 8)": [], "+ depth-12 first-choice bonus": []}
    print("\n| fold (scored events) | beta0, beta1 (fitted on the other) | log-lik per scored move added |")
    print("|---|---|---|")
    for k, test in enumerate((set(names[::2]), set(names[1::2]))):
        fit_on = Moves([row for e, _, rows, _ in scored if e not in test for row in rows], model)
        beta = fit_bonus(fit_on, model)
        held = Moves([row for e, _, rows, _ in scored if e in test for row in rows], model)
        gain = (held.loglik(model, held.rating, beta) - held.loglik(model, held.rating, (0.0, 0.0))).mean()
        print(f"| {k} ({len(test)}) | {beta[0]:+.3f}, {beta[1]:+.3f} | {gain:+.4f} |")
        for e, r, rows, _ in scored:
            if e not in test:
                continue
            m = Moves(rows, model)
            grid = np.broadcast_to(RATING_GRID, (len(rows), len(RATING_GRID)))
            prior = model.prior_for(rows[0][0].time_class or UNKNOWN_CLASS)
            for name, b in zip(estimates, ((0.0, 0.0), beta), strict=True):
                post = model.posterior(m.loglik(model, grid, b).sum(axis=0), prior)
                estimates[name].append((r, float(post @ RATING_GRID)))
    print("\n| per player-event (scored fold), posterior mean | MAE | bias | r |")
    print("|---|---|---|---|")
    for name, est in estimates.items():
        t, e = np.array(est).T
        print(f"| {name} | {np.abs(e - t).mean():.0f} | {(e - t).mean():+.0f} | {corr(t, e):.3f} |")


if __name__ == "__main__":
    main()
