"""Does a loss statistic at the review's depth add power to its match count? A measurement on rated-dev.

    python bench/fairplay_calibration.py --split rated-dev --events 520 --honest-events 1000 --random 0 --tcec 0 \\
        --assist-depth 14 --warm --review-values   # the searches, once, into the analysis cache
    python bench/review_loss.py                    # the table, from the cache (2 minutes)

The review (streamer/review.py) counts how often a screened player chose its depth-12 first choice. A loss statistic
would add how much each counted move gives up at that depth, L = W(v_first) - W(v_played) in win probability, the
played move valued by a depth-12 search of the position after it when it is not the first choice
(:func:`fairplay_data.review_move_values`). Its honest expectation is read from the service's own expected loss for
the move (the move model at the reference rating over the depth-8 candidates): the mean and variance of L in 20
quantile bins of it, fitted on honest moves; z_loss = (sum of expected L - sum of L) / sqrt(sum of variances), positive
when the player gives up less than expected. The 72 whole player-events (5-11 games) of rated-dev's detection sample
are split by event into two folds: one fold's honest moves fit the bins and the correlation rho of the two z on its
player-events (for the combined z = (z_match + z_loss) / sqrt(2 + 2 rho)); the other fold is scored, honest and with
half of the player's moves replaced by the depth-14 first choice (as bench/fairplay_calibration.py does).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random

import numpy as np
from common import ANALYSIS_CACHE, add_data_argument, data_dir
from fairplay_calibration import event_moves
from fairplay_data import MIN_EVENT_GAMES, analyse, load_samples, review_first_values, review_loss, review_move_values, whole_player_events

from analyzers.engine import EnginePool, Limits
from analyzers.fairplay import DEFAULT_MIN_MOVES, DEFAULT_REVIEW_Z, FairPlayMove, ReviewCalibration, z_score
from analyzers.profiles import get_profile
from analyzers.ratingmodel import load_move_model
from schemas import MoveAssessment
from streamer.pipeline import PipelineConfig
from streamer.review import REVIEW_PROFILE, first_choices, review_move

#: Quantile bins of the service's expected loss in which the honest depth-12 loss is read.
BINS = 20
#: The assistance measured: the detection target's share.
SHARE = 0.5

Row = tuple[FairPlayMove, float]  # a counted move's review terms and its depth-12 loss


def loss_model(rows: list[Row]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bin edges, mean L, variance of L) per quantile bin of the service's expected loss, from honest moves."""
    e = np.array([m.expected_loss for m, _ in rows])
    loss = np.array([x for _, x in rows])
    edges = np.quantile(e, np.linspace(0, 1, BINS + 1)[1:-1])
    idx = np.searchsorted(edges, e)
    return edges, np.array([loss[idx == i].mean() for i in range(BINS)]), np.array([loss[idx == i].var() for i in range(BINS)])


def zs(rows: list[Row], lm: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[float, float] | None:
    """(z of the match count, z of the loss) of one player-event; None under the alerts' minimum of counted moves."""
    if len(rows) < DEFAULT_MIN_MOVES:
        return None
    edges, mean, var = lm
    z_match = z_score(sum(m.matched for m, _ in rows), sum(m.p_top for m, _ in rows),
                      sum(m.p_top * (1 - m.p_top) for m, _ in rows))
    idx = np.searchsorted(edges, np.array([m.expected_loss for m, _ in rows]))
    z_loss = (float(mean[idx].sum()) - sum(x for _, x in rows)) / math.sqrt(float(var[idx].sum()))
    return z_match, z_loss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=520, help="rated-dev games as whole player-events (as the warm run)")
    ap.add_argument("--seed", type=int, default=0)
    add_data_argument(ap)
    args = ap.parse_args()
    samples = load_samples(data_dir(args, "pgn/rated-dev"), args.events, args.events, 0, 0, args.seed, "rated-dev")
    model = load_move_model("fast")
    calibration = ReviewCalibration.load("fast")
    assert model is not None
    limits = get_profile(REVIEW_PROFILE).limits
    pes = sorted(whole_player_events(samples.events).items())
    units = [(g, "white" if g.white.id == pid else "black") for (_, pid), games in pes for g in games]

    async def searches():  # noqa: ANN202
        async with EnginePool(size=2, cache_path=ANALYSIS_CACHE) as pool:
            results, assisted = await analyse(pool, PipelineConfig(get_profile("fast")), samples,
                                              assist=Limits(depth=14, multipv=1))
            firsts = await first_choices(pool, units, results, limits)
            values = await review_move_values(pool, units, assisted, firsts, limits)
            first_values = await review_first_values(pool, units, firsts, limits)
            print(f"{pool.stats.searches} searches, {pool.stats.cache_hits} from the cache")
            return results, assisted, firsts, values, first_values

    results, assisted, firsts, values, first_values = asyncio.run(searches())

    def rows_of(moves: list[MoveAssessment]) -> list[Row]:
        out = []
        for a in moves:
            first = firsts.get((a.game_id, a.color), {}).get(a.ply)
            m = review_move(a, first, model, calibration) if first else None
            if m is None:
                continue
            out.append((m, review_loss(a, first, first_values, values)))
        return out

    scored = []  # (event, games, {share: rows})
    for (event, pid), games in pes:
        honest, helped = (event_moves(pid, games, results, assisted, f, args.seed) for f in (0.0, SHARE))
        if honest is not None and helped is not None:
            scored.append((event, len(games), {0.0: rows_of(honest), SHARE: rows_of(helped)}))
    names = sorted({e for e, _, _ in scored})
    random.Random(1).shuffle(names)
    print(f"rated-dev: {len(scored)} whole player-events ({sum(n >= 9 for _, n, _ in scored)} of 9+ games) in "
          f"{len(names)} events, two folds by event; z at the review's tier {DEFAULT_REVIEW_Z}")
    print("fold  share  games  events   match z mean (sd)   loss z mean (sd)   combined mean (sd)   flagged: match / loss / combined")
    for k, test_names in enumerate((set(names[::2]), set(names[1::2]))):
        train = [rows for e, _, rows in scored if e not in test_names]
        lm = loss_model([r for rows in train for r in rows[0.0]])
        pairs = np.array([z for rows in train if (z := zs(rows[0.0], lm))])
        rho = float(np.corrcoef(pairs.T)[0, 1])
        for share in (0.0, SHARE):
            for least in (MIN_EVENT_GAMES, 9):
                both = np.array([z for e, n, rows in scored if e in test_names and n >= least and (z := zs(rows[share], lm))])
                comb = (both[:, 0] + both[:, 1]) / math.sqrt(2 + 2 * rho)
                cells = [f"{c.mean():+6.2f} ({c.std(ddof=1):.2f})" for c in (both[:, 0], both[:, 1], comb)]
                flags = " / ".join(f"{np.mean(c >= DEFAULT_REVIEW_Z):.0%}" for c in (both[:, 0], both[:, 1], comb))
                print(f"{k:>4}  {share:>5.0%}  {least:>4}+  {len(both):>6}   " + "   ".join(f"{c:>17}" for c in cells)
                      + f"   {flags}   (rho {rho:.2f}: the other fold)")


if __name__ == "__main__":
    main()
