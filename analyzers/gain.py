"""Gain per move and gain histograms (Ferreira 2012; docs/models.md s. 1).

The evaluation ``s_k`` is the engine's score of the position after ply ``k``, in centipawns from White's point of
view, clamped to +/- :data:`MATE_CP`. The gain of ply ``k`` is ``s_k - s_(k-1)`` for a White move and its negation
for a Black move: how much the move changed the evaluation for the side that made it (usually <= 0).

A :class:`GainHistogram` is a player's empirical distribution of gains at 1 cp resolution. It is updated in O(1)
per move and compared with another in O(m log m) by :func:`expected_score`, exactly (integer counts, no binning).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

#: A forced mate is worth the material on the board at the start: 39 pawns. Scores beyond it are clamped.
MATE_CP = 3900

#: Scale of the normal-curve Elo difference: d = ELO_NORMAL_SCALE * Phi^-1(p).
ELO_NORMAL_SCALE = 200.0 * math.sqrt(2.0)

_NORMAL = NormalDist()


def clamp_cp(cp: float) -> int:
    """Round and clamp a centipawn score to [-MATE_CP, MATE_CP]."""
    return int(max(-MATE_CP, min(MATE_CP, round(cp))))


def score_cp(cp: int | None, mate: int | None) -> int:
    """A score as centipawns under Ferreira's rules: a mate in any number of moves is +/- MATE_CP.

    ``mate`` follows UCI: positive when the side the score is for mates, negative when it is mated, and ``0``
    for a side that is already checkmated (which scores ``-MATE_CP``).
    """
    if mate is not None:
        return MATE_CP if mate > 0 else -MATE_CP
    if cp is None:
        raise ValueError("a score needs cp or mate")
    return clamp_cp(cp)


def gain(before_white_cp: int, after_white_cp: int, white_moved: bool) -> int:
    """The gain of one ply for its mover, from two White-view evaluations (both clamped first)."""
    delta = clamp_cp(after_white_cp) - clamp_cp(before_white_cp)
    return delta if white_moved else -delta


def gains_from_evals(evals: Sequence[float], *, white_first: bool = True) -> list[int]:
    """Gains of every ply from the evaluations of every position, start position first.

    ``evals[k]`` is ``s_k`` in centipawns from White's view (mates already converted with :func:`score_cp`);
    values are clamped to +/- :data:`MATE_CP`. Returns ``len(evals) - 1`` gains, each signed for its mover.
    """
    out: list[int] = []
    white = white_first
    for before, after in zip(evals, evals[1:]):
        out.append(gain(int(before), int(after), white))
        white = not white
    return out


class GainHistogram:
    """A normalisable histogram of gains at 1 cp resolution, with O(1) updates.

    Besides the counts it keeps running totals (n, sum, sum of squares, zeros, positives) so the mean, the
    variance and the expected score against the engine spike are O(1).
    """

    __slots__ = ("_counts", "_n", "_sum", "_sumsq", "_zero", "_pos")

    def __init__(self, gains: Iterable[int] = ()) -> None:
        self._counts: dict[int, int] = {}
        self._n = 0
        self._sum = 0
        self._sumsq = 0
        self._zero = 0
        self._pos = 0
        self.extend(gains)

    @classmethod
    def engine(cls) -> GainHistogram:
        """The engine's own histogram: a single spike of probability 1 at gain 0 (Ferreira's Algorithm 3)."""
        return cls([0])

    def add(self, g: int, count: int = 1) -> None:
        """Record ``count`` moves of gain ``g`` (centipawns, rounded to an int)."""
        g = int(round(g))
        if count <= 0:
            raise ValueError("count must be positive")
        self._counts[g] = self._counts.get(g, 0) + count
        self._n += count
        self._sum += g * count
        self._sumsq += g * g * count
        if g == 0:
            self._zero += count
        elif g > 0:
            self._pos += count

    def extend(self, gains: Iterable[int]) -> None:
        for g in gains:
            self.add(g)

    def merge(self, other: GainHistogram) -> GainHistogram:
        """A new histogram holding the moves of both."""
        out = self.copy()
        for g, c in other._counts.items():
            out.add(g, c)
        return out

    def copy(self) -> GainHistogram:
        out = GainHistogram()
        out._counts = dict(self._counts)
        out._n, out._sum, out._sumsq, out._zero, out._pos = self._n, self._sum, self._sumsq, self._zero, self._pos
        return out

    # -- statistics ------------------------------------------------------------------------------------
    @property
    def count(self) -> int:
        """Number of moves recorded."""
        return self._n

    def __len__(self) -> int:
        return self._n

    @property
    def zeros(self) -> int:
        """Moves with gain exactly 0 (the engine's choice, as far as the evaluation can tell)."""
        return self._zero

    @property
    def positives(self) -> int:
        """Moves with a positive gain (better than the engine expected one ply earlier)."""
        return self._pos

    @property
    def mean(self) -> float:
        """Mean gain in centipawns (nan when empty)."""
        return self._sum / self._n if self._n else math.nan

    @property
    def variance(self) -> float:
        """Population variance of the gains (nan when empty)."""
        if not self._n:
            return math.nan
        m = self._sum / self._n
        return max(0.0, self._sumsq / self._n - m * m)

    def pmf(self) -> dict[int, float]:
        """The normalised histogram: gain -> probability."""
        return {g: c / self._n for g, c in sorted(self._counts.items())}

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Sorted distinct gains and their integer counts, as numpy arrays."""
        if not self._counts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        items = sorted(self._counts.items())
        return np.fromiter((g for g, _ in items), np.int64, len(items)), np.fromiter((c for _, c in items), np.int64, len(items))

    def score_vs_engine(self) -> float:
        """Expected score against the engine spike: 0.5 P(g = 0) + P(g > 0), in O(1)."""
        if not self._n:
            raise ValueError("empty histogram")
        return (0.5 * self._zero + self._pos) / self._n

    # -- state -----------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON state: ``{"counts": {"<gain>": n, ...}}`` (string keys, as JSON requires)."""
        return {"counts": {str(g): c for g, c in sorted(self._counts.items())}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GainHistogram:
        out = cls()
        for g, c in data["counts"].items():
            out.add(int(g), int(c))
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GainHistogram) and self._counts == other._counts

    def __repr__(self) -> str:
        return f"GainHistogram(n={self._n}, mean={self.mean:.1f})"


def expected_score(a: GainHistogram, b: GainHistogram) -> float:
    """Expected score of the player with histogram ``a`` against ``b``: 0.5 P(A = B) + P(A > B).

    Exact: computed from integer counts with sorted cumulative sums, O((m + n) log(m + n)) for m and n distinct
    gains. ``expected_score(a, b) + expected_score(b, a) == 1`` up to float rounding.
    """
    if not a.count or not b.count:
        raise ValueError("expected_score needs two non-empty histograms")
    ga, ca = a.arrays()
    gb, cb = b.arrays()
    cum_b = np.concatenate(([0], np.cumsum(cb)))
    below = cum_b[np.searchsorted(gb, ga, side="left")]   # moves of b strictly below each gain of a
    upto = cum_b[np.searchsorted(gb, ga, side="right")]   # ... at or below it
    # 2 * (wins + draws / 2) in integers, so the sum is exact before the one division
    twice = int(np.dot(ca, below + upto))
    return twice / (2.0 * a.count * b.count)


def rating_difference(p: float) -> float:
    """Normal-curve Elo difference for an expected score ``p``: 200 sqrt(2) Phi^-1(p); +/-inf at 1 and 0."""
    if not 0.0 <= p <= 1.0 or math.isnan(p):
        raise ValueError(f"expected score must be in [0, 1], got {p}")
    if p == 0.0:
        return -math.inf
    if p == 1.0:
        return math.inf
    return ELO_NORMAL_SCALE * _NORMAL.inv_cdf(p)


def expected_from_difference(d: float) -> float:
    """Inverse of :func:`rating_difference`: the expected score for an Elo difference ``d``."""
    return _NORMAL.cdf(d / ELO_NORMAL_SCALE)
