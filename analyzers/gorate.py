"""Go skill from moves: points lost, the posterior over c in points, and a rating on the Go scale (docs/models.md s. 11).

The same models as chess, with the engine's move values in points instead of pawns:

- the gain of a move is minus the points it lost against the engine's best candidate (``v_max - v_played``, from
  the mover's side), kept in a :class:`~analyzers.gain.GainHistogram` of whole points;
- the agent of Di Fatta, Haworth and Regan picks candidate i with probability proportional to
  ``(v_max - v_i + K) ** -c`` with K = :data:`K_POINTS` (one point: the Go counterpart of chess's 0.1 pawn, about
  the smallest difference between moves a strong amateur tells apart); :class:`~analyzers.posterior.SkillPosterior`
  keeps the posterior over c, O(grid x candidates) per move;
- a per-server calibration (:class:`~analyzers.calibration.Calibration` with a :class:`RankModel` in its ``extra``)
  gives the rating on the scale of :mod:`analyzers.gorank` (GoR: 1d = 2100, 100 a rank): c(R) through the rank
  groups' centroids, the scatter of a scope's c around it by moves seen, and the server's population as the prior;
  fitted by ``bench/go_accuracy.py``.

:class:`GoSkill` is one scope's state (a game, or a player's games so far): update per move, read an estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .calibration import Calibration
from .calibrations import read_fitted
from .errors import CalibrationError
from .gain import GainHistogram
from .gorank import rank_label
from .perceived import DEFAULT_LEVEL, RatingEstimate
from .posterior import SkillPosterior

#: The agent's K for Go, in points.
K_POINTS = 1.0
#: The calibration shipped for Fox games analysed by GNU Go at level 1 (analyzers/calibrations/<name>.json).
DEFAULT_GO_PROFILE = "go-fox-gnugo-l1"


def go_gain(values: Sequence[float], played: int) -> int:
    """Minus the points the played move lost to the best candidate, rounded to a whole point (<= 0)."""
    return -round(max(values) - values[played])


@dataclass
class GoSkill:
    """One scope's evidence: the posterior over c (K in points, flat prior, as in the paper) and the histogram of
    gains in points. The population enters only when a rating is read (:class:`RankModel`)."""

    posterior: SkillPosterior = field(default_factory=lambda: SkillPosterior(k=K_POINTS))
    gains: GainHistogram = field(default_factory=GainHistogram)

    def add(self, values: Sequence[float], played: int) -> None:
        """One move: candidate values in points (side to move, the played move among them) and its index."""
        self.posterior.update(values, played)
        self.gains.add(go_gain(values, played))

    @property
    def moves(self) -> int:
        return self.posterior.n

    def estimate(self, model: Calibration | RankModel, level: float = DEFAULT_LEVEL) -> RatingEstimate:
        """The rating; pass the :class:`RankModel` (``RankModel.of(calibration)``) where many estimates are read."""
        return (model if isinstance(model, RankModel) else RankModel.of(model)).estimate(self.posterior, level)


@dataclass(frozen=True)
class RankModel:
    """The rating from a posterior over c, as a measurement model (docs/models.md s. 11).

    A player of rating R shows c(R) on average (the calibration's knots, read from R to c) and a scope's posterior
    mean c_hat scatters around it with variance ``a + b / n`` after n moves (fitted: a is what more moves do not
    remove, a player's style and the engine's blind spots; b / n the sampling noise). The rating's posterior on a
    grid is prior(R) x N(c_hat; c(R), a + b / n): with few moves it stays near the population prior (the server's
    ranks) and says so by its width; with many it follows c_hat, never narrower than what ``a`` allows.
    """

    knots: tuple[tuple[float, float], ...]   # (c, rating), increasing in both
    prior_mean: float
    prior_sd: float
    var_a: float
    var_b: float

    GRID = np.arange(0.0, 3600.0 + 1e-9, 10.0)

    @classmethod
    def of(cls, calibration: Calibration) -> RankModel:
        m = calibration.extra.get("rank_model")
        if not m:
            raise CalibrationError(f"calibration {calibration.profile!r} has no Go rank model (extra.rank_model)")
        return cls(tuple((float(c), float(r)) for c, r in calibration.c_knots), float(m["prior"][0]),
                   float(m["prior"][1]), float(m["c_var"][0]), float(m["c_var"][1]))

    def c_of(self, ratings: np.ndarray) -> np.ndarray:
        """c(R): the knots read from rating to c, linear beyond the end knots."""
        cs = np.array([k[0] for k in self.knots])
        rs = np.array([k[1] for k in self.knots])
        out = np.interp(ratings, rs, cs)
        lo_slope = (cs[1] - cs[0]) / (rs[1] - rs[0]) if rs[1] > rs[0] else 0.0
        hi_slope = (cs[-1] - cs[-2]) / (rs[-1] - rs[-2]) if rs[-1] > rs[-2] else 0.0
        out = np.where(ratings < rs[0], cs[0] + lo_slope * (ratings - rs[0]), out)
        return np.where(ratings > rs[-1], cs[-1] + hi_slope * (ratings - rs[-1]), out)

    @cached_property
    def _grid(self) -> tuple[np.ndarray, np.ndarray]:
        """c(R) and the log prior on :attr:`GRID`: the same for every estimate, computed once."""
        r = self.GRID
        return self.c_of(r), -0.5 * ((r - self.prior_mean) / self.prior_sd) ** 2

    def estimate(self, posterior: SkillPosterior, level: float = DEFAULT_LEVEL) -> RatingEstimate:
        r = self.GRID
        c_grid, logp = self._grid
        if posterior.n > 0:
            var = self.var_a + self.var_b / posterior.n
            logp = logp - 0.5 * (posterior.mean - c_grid) ** 2 / var
        p = np.exp(logp - logp.max())
        p /= p.sum()
        cdf = np.cumsum(p)
        tail = (1.0 - level) / 2
        mean = float((p * r).sum())
        return RatingEstimate(mean, float(np.interp(tail, cdf, r)), float(np.interp(1.0 - tail, cdf, r)),
                              posterior.n, level)


def rank_range(est: RatingEstimate) -> tuple[str, str, str]:
    """Kyu/dan labels of an estimate and its interval's ends."""
    return rank_label(est.rating), rank_label(est.low), rank_label(est.high)


def load_go_calibration(profile: str = DEFAULT_GO_PROFILE) -> Calibration:
    d = read_fitted(f"{profile}.json")
    if d is None:
        raise CalibrationError(f"no Go calibration {profile!r} shipped; fit one with bench/go_accuracy.py --fit --write")
    return Calibration.from_dict(d)
