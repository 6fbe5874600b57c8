"""Perceived ratings from gain histograms: Ferreira's Algorithms 2, 3 and 4 (docs/models.md s. 1).

- :func:`tournament_ratings` (Algorithm 2): ratings of a field from pairwise histogram differences.
- :func:`engine_strength` (Algorithm 3): the Elo of the engine spike, from players of known Elo.
- :func:`live_rating` (Algorithm 4): a player's rating after each move, against the engine spike, with an
  interval.

The interval of the live rating (the paper gives none) comes from the per-move score against the spike,
``u = 1`` for a positive gain, ``0.5`` for zero, ``0`` for a loss, whose mean is Algorithm 4's ``p``. The three
category probabilities get a Dirichlet posterior (Jeffreys prior, 1/2 per category, by default); the interval
of ``p`` is its posterior mean +/- z posterior sd, clipped into (0, 1), and is mapped through the monotone
``rating_difference``. Mapping the interval's ends (rather than a delta-method sd) keeps it asymmetric and finite
near p = 0 or 1, where a rating after three moves must say "anything from 1900 to 3300", not "2861 +/- 0".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Iterable, Mapping
from statistics import NormalDist
from typing import NamedTuple, TypeVar

from .errors import ConvergenceError, RatingError
from .gain import GainHistogram, expected_score, rating_difference

#: Default width of every interval kibitz publishes.
DEFAULT_LEVEL = 0.95
#: A player's key in Ferreira's algorithms: any hashable id (a name, a FIDE id, a tuple).
PlayerKey = TypeVar("PlayerKey", bound=Hashable)


@functools.lru_cache(maxsize=64)  # called on every published estimate with one of a few levels
def z_for(level: float) -> float:
    """Two-sided normal quantile for a central interval of probability ``level``."""
    if not 0.0 < level < 1.0:
        raise ValueError("level must be in (0, 1)")
    return NormalDist().inv_cdf(0.5 + level / 2.0)


class RatingEstimate(NamedTuple):
    """A rating with its uncertainty: point, central interval [low, high] at ``level``, and ``n`` moves behind it.
    (An immutable named tuple rather than a frozen dataclass: several are made per move on the player step, and a
    frozen dataclass takes four times as long to build.)"""

    rating: float
    low: float
    high: float
    n: int
    level: float = DEFAULT_LEVEL

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    @property
    def sd(self) -> float:
        """A normal-equivalent standard deviation: half the interval over its z."""
        return self.half_width / z_for(self.level)

    def shifted(self, offset: float) -> RatingEstimate:
        return RatingEstimate(self.rating + offset, self.low + offset, self.high + offset, self.n, self.level)

    def scaled(self, factor: float) -> RatingEstimate:
        """The same rating with the interval's distances to it times ``factor``."""
        r = self.rating
        return RatingEstimate(r, r - factor * (r - self.low), r + factor * (self.high - r), self.n, self.level)


def tournament_ratings(
    diffs: Mapping[tuple[PlayerKey, PlayerKey], float],
    elo: Mapping[PlayerKey, float],
    *,
    tol: float = 1e-9,
    max_iter: int = 100_000,
) -> dict[PlayerKey, float]:
    """Ferreira's Algorithm 2: least-squares ratings from pairwise differences, mean pinned to the mean Elo.

    ``diffs[(i, j)]`` is the rating difference of ``i`` over ``j`` from their histograms (e.g.
    ``rating_difference(expected_score(h_i, h_j))``). Starting from ``r_i = elo[i]``, each ``r_i`` becomes
    ``mean_j (r_j + d_ij)`` over the pairs it appears in, until no rating moves by more than ``tol``; then all are
    shifted so their mean equals the mean Elo. Updates are applied in place (Gauss-Seidel), which converges on
    every connected field, including the two-player matches where simultaneous updates oscillate forever.
    """
    players = list(elo)
    neighbours: dict[PlayerKey, list[tuple[PlayerKey, float]]] = {p: [] for p in players}
    for (i, j), d in diffs.items():
        if i not in neighbours or j not in neighbours:
            raise RatingError(f"difference for ({i!r}, {j!r}) names a player without an Elo")
        if not math.isfinite(d):
            raise RatingError(f"difference of {i!r} over {j!r} is infinite (a perfect score cannot be rated)")
        neighbours[i].append((j, d))
    r = {p: float(elo[p]) for p in players}
    for _ in range(max_iter):
        moved = 0.0
        for p in players:
            if not neighbours[p]:
                continue
            new = sum(r[j] + d for j, d in neighbours[p]) / len(neighbours[p])
            moved = max(moved, abs(new - r[p]))
            r[p] = new
        if moved <= tol:
            break
    else:
        raise ConvergenceError(f"Algorithm 2 did not settle within {max_iter} sweeps")
    shift = sum(elo.values()) / len(elo) - sum(r.values()) / len(r)
    return {p: v + shift for p, v in r.items()}


def histogram_diffs(histograms: Mapping[PlayerKey, GainHistogram],
                    pairs: Iterable[tuple[PlayerKey, PlayerKey]] | None = None) -> dict[tuple[PlayerKey, PlayerKey], float]:
    """Rating differences d_ij between histograms, for the given pairs (default: every ordered pair)."""
    keys = list(histograms)
    if pairs is None:
        pairs = [(i, j) for i in keys for j in keys if i != j]
    return {(i, j): rating_difference(expected_score(histograms[i], histograms[j])) for i, j in pairs}


def engine_strength(histograms: Mapping[PlayerKey, GainHistogram], elo: Mapping[PlayerKey, float]) -> RatingEstimate:
    """Ferreira's Algorithm 3: the engine's Elo as mean(r_i - d_i) over players with known Elo.

    ``d_i`` is the rating difference of player ``i`` against the engine spike. Players whose score against the
    spike is 0 or 1 (an infinite difference) are an error, not silently dropped. The interval is the mean +/-
    1.96 standard errors over players.
    """
    vals = []
    for p, h in histograms.items():
        if p not in elo:
            continue
        d = rating_difference(h.score_vs_engine())
        if not math.isfinite(d):
            raise RatingError(f"player {p!r} scores {h.score_vs_engine()} against the engine: no finite difference")
        vals.append(elo[p] - d)
    if not vals:
        raise RatingError("no player with both a histogram and an Elo")
    mean = sum(vals) / len(vals)
    if len(vals) > 1:
        se = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1) / len(vals))
    else:
        se = math.inf
    z = z_for(DEFAULT_LEVEL)
    return RatingEstimate(mean, mean - z * se, mean + z * se, len(vals))


def spike_score_interval(h: GainHistogram, *, level: float = DEFAULT_LEVEL, prior: float = 0.5) -> tuple[float, float, float]:
    """Posterior mean and central interval of the expected score against the engine spike.

    The per-move score u is 0, 1/2 or 1; the three probabilities have a Dirichlet(prior + counts) posterior, and
    p = E[u] has mean ``sum w_k a_k / A`` and variance ``(sum w_k^2 a_k / A - mean^2) / (A + 1)``.
    """
    return _spike_interval(h.count, h.zeros, h.positives, level, prior)


def _spike_interval(count: int, zeros: int, positives: int, level: float, prior: float) -> tuple[float, float, float]:
    """:func:`spike_score_interval` from the histogram's three counts, all it depends on."""
    if prior <= 0:
        raise ValueError("the interval needs a positive prior pseudo-count")
    a_loss = count - zeros - positives + prior
    a_zero = zeros + prior
    a_pos = positives + prior
    total = a_loss + a_zero + a_pos
    mean = (0.5 * a_zero + a_pos) / total
    second = (0.25 * a_zero + a_pos) / total
    sd = math.sqrt(max(0.0, second - mean * mean) / (total + 1.0))
    z = z_for(level)
    eps = 1e-9
    return mean, min(max(mean - z * sd, eps), 1 - eps), min(max(mean + z * sd, eps), 1 - eps)


def live_rating(
    histogram: GainHistogram, engine_elo: float, *, level: float = DEFAULT_LEVEL, prior: float = 0.5
) -> RatingEstimate:
    """Ferreira's Algorithm 4: the perceived rating ``engine_elo + d`` from the moves so far, with an interval.

    The point uses the smoothed score (Dirichlet posterior mean with ``prior`` pseudo-moves per category), so it
    is finite from the first move; with ``prior=0`` it is the paper's raw ``p`` exactly (and may be +/-inf).
    The interval always uses a positive prior (see the module docstring).
    """
    if histogram.count == 0 and prior == 0:
        raise RatingError("no moves yet")
    if prior > 0:
        return spike_rating(histogram.count, histogram.zeros, histogram.positives, engine_elo, level, prior)
    _, lo, hi = spike_score_interval(histogram, level=level)
    return _spike_estimate(histogram.score_vs_engine(), lo, hi, engine_elo, histogram.count, level)


def spike_rating(count: int, zeros: int, positives: int, engine_elo: float, level: float = DEFAULT_LEVEL,
                 prior: float = 0.5) -> RatingEstimate:
    """:func:`live_rating` (``prior`` > 0) of a histogram with these counts: it depends on nothing else, so a caller
    may memoise it on them (players share their counts: every player's first move is one of three)."""
    mean, lo, hi = _spike_interval(count, zeros, positives, level, prior)
    return _spike_estimate(mean, lo, hi, engine_elo, count, level)


def _spike_estimate(p: float, lo: float, hi: float, engine_elo: float, n: int, level: float) -> RatingEstimate:
    return RatingEstimate(engine_elo + rating_difference(p), engine_elo + rating_difference(lo),
                          engine_elo + rating_difference(hi), n, level)
