"""What the other games of an event say about a player: a measurement on rated-dev (the fitting set), not a service feature.

    python bench/event_pooling.py [--dev 1000] [--seed 0]      # analyses from the cache (bench/warm_cache.py)

The published per-game estimate starts from a population prior (per time-control class) and one game's moves say
little, so it stays near that population. Players of one event are of a similar level (age groups, rating sections,
an invitational field), and the moves of everyone in the event say where that level is. This compares, per
player-game of the rated-dev player-events sample (whole games in the analysis cache only), the move model's
moves-only posterior (docs/models.md s. 9: tempered, person effect, class prior) with:

1. the opponent's moves: a bivariate normal prior on the two players' ratings (the population's, with the
   correlation of opponents' FIDE ratings in the sample's headers), the opponent's likelihood integrated out;
2. event pooling: the event's mean level mu from the moves of all its other player-games (each player's rating
   ~ N(mu, within-event sd), the event means ~ N(population), both read from the sample's headers; the player's own
   games left out), the player's prior the predictive N(mu, within sd^2 + event sd^2); ``event sd`` widens it for
   what the moves get wrong about a whole population (printed for three values);
3. for reference, an oracle: the prior centred on the event's true mean FIDE rating (what pooling could reach if the
   moves measured an event's level without error).

No declared rating enters an estimate; the headers give the truth and the hyper-parameters only.
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from common import add_data_argument, data_dir
from fit_model import analysed

from analyzers.profiles import get_profile
from analyzers.ratingmodel import FLAT_PRIOR, RATING_GRID, UNKNOWN_CLASS, MoveModel, load_move_model, summarise, win_losses
from schemas import MoveAssessment
from streamer.batch import sample_player_events
from streamer.pipeline import move_choice

G = RATING_GRID


@dataclass
class PlayerGame:
    event: str
    player: str
    truth: float
    like: np.ndarray    # tempered likelihood convolved with the person effect, max 1
    moves: int
    tclass: str


def likelihood(model: MoveModel, moves: list[MoveAssessment]) -> tuple[np.ndarray, int, str]:
    """The move model's likelihood of one player-game over the rating grid, as the service's posterior uses it."""
    ll, n, tclass = np.zeros_like(G), 0, UNKNOWN_CLASS
    for a in moves:
        if a.counted:
            values, idx = move_choice(a)
            tclass = a.time_class or UNKNOWN_CLASS
            ll = ll + model.move_loglik(win_losses([v * 100 for v in values]), idx, tclass)
            n += 1
    like = model.posteriors(ll, (FLAT_PRIOR,))[0]  # tempered and convolved, as the service does, with no prior
    return like / like.max(), n, tclass


def normal_rows(centres: np.ndarray, sd: float) -> np.ndarray:
    """M[i, j] = N(G[j]; centres[i], sd), each row normalised over the grid."""
    m = np.exp(-0.5 * ((G[None, :] - centres[:, None]) / sd) ** 2)
    return m / m.sum(axis=1, keepdims=True)


def row(name: str, truth: np.ndarray, est: list, const: float) -> str:  # noqa: ANN001
    r = np.array([e.rating for e in est])
    mae = float(np.abs(r - truth).mean())
    cover = np.mean([e.low <= t <= e.high for e, t in zip(est, truth, strict=True)])
    width = np.mean([e.high - e.low for e in est]) / 2
    return (f"| {name} | {mae:.0f} | {100 * (1 - mae / const):+.1f} % | {np.mean(r - truth):+.0f} | "
            f"{np.corrcoef(r, truth)[0, 1]:.2f} | {100 * cover:.1f} % | {width:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dev", type=int, default=1000, help="rated-dev games, as whole player-events (as warm_cache draws them)")
    ap.add_argument("--seed", type=int, default=0)
    add_data_argument(ap)
    args = ap.parse_args()
    data = data_dir(args, "pgn/rated-dev")
    model = load_move_model("fast")
    assert model is not None
    sample = sample_player_events(data / "pgn" / "rated-dev", args.dev, seed=args.seed)
    games, results = analysed([(g, False) for g in sample], get_profile("fast"))
    # hyper-parameters from the sample's headers: opponents' correlation, event means and within-event spread
    ratings = defaultdict(list)
    for g in sample:
        ratings[g.event] += [g.white.rating, g.black.rating]
    rho = float(np.corrcoef([g.white.rating for g in sample], [g.black.rating for g in sample])[0, 1])
    within = math.sqrt(np.mean([np.var(v) for v in ratings.values()]))
    means = np.array([np.mean(v) for v in ratings.values()])
    pgs: list[PlayerGame] = []
    opponent: dict[int, int] = {}
    for g, _ in games:
        here = {}
        for color, p in (("white", g.white), ("black", g.black)):
            like, n, tclass = likelihood(model, [a for a in results[g.game_id] if a.color == color])
            here[color] = len(pgs)
            pgs.append(PlayerGame(g.event, p.id, float(p.rating or 0), like, n, tclass))
        opponent[here["white"]], opponent[here["black"]] = here["black"], here["white"]
    counted = [i for i, x in enumerate(pgs) if x.moves > 0]
    truth = np.array([pgs[i].truth for i in counted])
    print(f"{len(games)} rated-dev games fully analysed ({len(sample)} drawn), {len(counted)} player-games with counted "
          f"moves, {len(ratings)} events; opponents' FIDE correlation {rho:.2f}; within-event sd {within:.0f}; "
          f"event means {means.mean():.0f} +/- {means.std():.0f}")

    def posterior(prior: np.ndarray, x: PlayerGame):  # noqa: ANN202
        p = prior * x.like
        return summarise(p / p.sum(), x.moves)

    def class_prior(x: PlayerGame) -> np.ndarray:
        pr = model.prior_for(x.tclass)
        return np.exp(-0.5 * ((G - pr.mean) / pr.sd) ** 2)

    base = [posterior(class_prior(pgs[i]), pgs[i]) for i in counted]
    # 1. the opponent's moves, through a bivariate normal prior with correlation rho
    opp = []
    for i in counted:
        x, y = pgs[i], pgs[opponent[i]]
        pr = model.prior_for(x.tclass)
        cond = normal_rows(pr.mean + rho * (G - pr.mean), pr.sd * math.sqrt(1 - rho ** 2))  # R_opp | R
        opp.append(posterior(class_prior(x) * (cond @ y.like), x))
    # 2. event pooling: log p(moves of a player-game | mu) = log sum_R like(R) N(R; mu, within)
    k_within = normal_rows(G, within)
    log_m = np.array([np.log(k_within @ x.like + 1e-300) for x in pgs])
    log_mu_prior = -0.5 * ((G - means.mean()) / means.std()) ** 2
    by_event = defaultdict(list)
    for i in counted:
        by_event[pgs[i].event].append(i)
    pooled: dict[float, list] = {}
    mu_err = []
    for i in counted:
        x = pgs[i]
        others = [j for j in by_event[x.event] if pgs[j].player != x.player]
        lm = log_mu_prior + log_m[others].sum(axis=0)
        p_mu = np.exp(lm - lm.max())
        p_mu /= p_mu.sum()
        mu_err.append(abs(float(p_mu @ G) - np.mean(ratings[x.event])))
        for event_sd in (0.0, 100.0, 200.0):
            prior = p_mu @ normal_rows(G, math.hypot(within, event_sd))
            pooled.setdefault(event_sd, []).append(posterior(prior, x))
    # 3. the oracle: the event's true mean FIDE rating
    oracle = [posterior(np.exp(-0.5 * ((G - np.mean(ratings[pgs[i].event])) / within) ** 2), pgs[i]) for i in counted]

    const = float(np.abs(truth - truth.mean()).mean())
    print(f"\nper player-game ({len(counted)}); constant = the sample's mean FIDE (oracle), MAE {const:.0f}; the event's "
          f"mean from its other player-games' moves misses the event's mean FIDE by {np.mean(mu_err):.0f} on average\n")
    print("| estimate | MAE | cut vs constant | bias | r | FIDE in the 95 % interval | mean half-width |")
    print("|---|---|---|---|---|---|---|")
    print(row("move model, class prior (the service's model posterior)", truth, base, const))
    print(row("+ the opponent's moves", truth, opp, const))
    for event_sd, est in pooled.items():
        print(row(f"event pooling from moves, event sd {event_sd:.0f}", truth, est, const))
    print(row("oracle: prior at the event's mean FIDE (reference, not an estimate)", truth, oracle, const))


if __name__ == "__main__":
    main()
