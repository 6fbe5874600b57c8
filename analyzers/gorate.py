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

A network's evaluation (KataGo) values positions, not each candidate, so the agent's c has no candidates to read there.
Its evidence per move is :class:`NetworkEvidence`: the log of the network's prior of the played move, the points the
move lost (the mover's lead before plus the opponent's lead after), and whether it was the policy's first choice.
A scope keeps their sums; a calibration for a network reads the *score* (a weighted sum of their means, weights
fitted on the server's games) through the same :class:`RankModel` as c: knots from score to rating, the scatter
``a + b / n`` by moves seen, the population as prior (docs/models.md s. 11).

:class:`GoSkill` is one scope's state (a game, or a player's games so far): update per move, read an estimate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .calibration import Calibration
from .calibrations import read_fitted
from .engine.gtp import POLICY_FLOOR
from .errors import CalibrationError
from .gain import GainHistogram
from .gorank import rank_label
from .gridstats import central_interval
from .perceived import DEFAULT_LEVEL, RatingEstimate
from .posterior import SkillPosterior

#: The agent's K for Go, in points.
K_POINTS = 1.0
#: The calibrations shipped for Fox games (analyzers/calibrations/<name>.json): from KataGo's network evaluations (the
#: default: the one whose ratings separate players, docs/go.md) and from GNU Go's values at level 1.
KATAGO_PROFILE = "go-fox-katago-b10"
GNUGO_PROFILE = "go-fox-gnugo-l1"
DEFAULT_GO_PROFILE = KATAGO_PROFILE


def go_gain(values: Sequence[float], played: int) -> int:
    """Minus the points the played move lost to the best candidate, rounded to a whole point (<= 0)."""
    return -round(max(values) - values[played])


#: A move's points lost counts at most this much in a network's evidence (either way): a single evaluation of a
#: position swings by tens of points in a fight, and a mean over a game should not be one swing.
MAX_POINTS_LOST = 20.0
#: The names of :class:`NetworkEvidence`'s means, in the order of a calibration's ``weights``.
NETWORK_FEATURES = ("log_prior", "points_lost", "first_choice")


@dataclass
class NetworkEvidence:
    """Sums over a scope's moves of what a network's evaluations say of each (see the module docstring)."""

    n: int = 0
    log_prior: float = 0.0
    points_lost: float = 0.0
    first_choice: float = 0.0

    def add(self, prior: float, lost: float, first: bool) -> None:
        """One move: the network's prior of it, the points it lost (may be negative: the network's values are
        estimates) and whether it was the policy's first choice."""
        self.n += 1
        self.log_prior += math.log(max(prior, POLICY_FLOOR))
        self.points_lost += min(max(lost, -MAX_POINTS_LOST), MAX_POINTS_LOST)
        self.first_choice += 1.0 if first else 0.0

    def means(self) -> tuple[float, float, float]:
        """The means in :data:`NETWORK_FEATURES` order (zeros before the first move)."""
        if not self.n:
            return 0.0, 0.0, 0.0
        return self.log_prior / self.n, self.points_lost / self.n, self.first_choice / self.n

    def to_list(self) -> list[float]:
        return [self.n, self.log_prior, self.points_lost, self.first_choice]

    @classmethod
    def from_list(cls, v: Sequence[float]) -> NetworkEvidence:
        return cls(int(v[0]), float(v[1]), float(v[2]), float(v[3]))


@dataclass
class GoSkill:
    """One scope's evidence: the posterior over c (K in points, flat prior, as in the paper), the histogram of
    gains in points and, from a network's evaluations, :class:`NetworkEvidence`. The population enters only when a
    rating is read (:class:`RankModel`)."""

    posterior: SkillPosterior = field(default_factory=lambda: SkillPosterior(k=K_POINTS))
    gains: GainHistogram = field(default_factory=GainHistogram)
    network: NetworkEvidence = field(default_factory=NetworkEvidence)

    def add(self, values: Sequence[float], played: int, prior: float | None = None, first: bool = False) -> None:
        """One move: candidate values in points (side to move, the played move among them) and its index; with a
        network's evaluations (``prior``: its prior of the move) the values are (lead before, minus the lead after)."""
        self.posterior.update(values, played)
        self.gains.add(go_gain(values, played))
        if prior is not None:
            self.network.add(prior, values[0] - values[played], first)

    @property
    def moves(self) -> int:
        return self.posterior.n

    def estimate(self, model: Calibration | RankModel, level: float = DEFAULT_LEVEL) -> RatingEstimate:
        """The rating; pass the :class:`RankModel` (``RankModel.of(calibration)``) where many estimates are read."""
        return (model if isinstance(model, RankModel) else RankModel.of(model)).estimate_skill(self, level)


def go_statistic(skill: GoSkill, weights: Sequence[float] | None) -> tuple[float, int]:
    """What a rank model reads of a scope, and over how many moves: the posterior mean of c (``weights`` None), or the
    network score: ``weights`` . the means of :data:`NETWORK_FEATURES`."""
    if weights is None:
        return skill.posterior.mean, skill.posterior.n
    return float(np.dot(weights, skill.network.means())), skill.network.n


@dataclass(frozen=True)
class RankModel:
    """The rating from a posterior over c, as a measurement model (docs/models.md s. 11).

    A player of rating R shows c(R) on average (the calibration's knots, read from R to c) and a scope's posterior
    mean c_hat scatters around it with variance ``a + b / n`` after n moves (fitted: a is what more moves do not
    remove, a player's style and the engine's blind spots; b / n the sampling noise). The rating's posterior on a
    grid is prior(R) x N(c_hat; c(R), a + b / n): with few moves it stays near the population prior (the server's
    ranks) and says so by its width; with many it follows c_hat, never narrower than what ``a`` allows.
    """

    knots: tuple[tuple[float, float], ...]   # (c or score, rating), increasing in both
    prior_mean: float
    prior_sd: float
    var_a: float
    var_b: float
    #: None: the statistic is the posterior mean of c; else the score's weights over :data:`NETWORK_FEATURES`' means
    weights: tuple[float, ...] | None = None

    GRID = np.arange(0.0, 3600.0 + 1e-9, 10.0)

    @classmethod
    def of(cls, calibration: Calibration) -> RankModel:
        m = calibration.extra.get("rank_model")
        if not m:
            raise CalibrationError(f"calibration {calibration.profile!r} has no Go rank model (extra.rank_model)")
        weights = tuple(float(w) for w in m["weights"]) if m.get("weights") else None
        if weights is not None and len(weights) != len(NETWORK_FEATURES):
            raise CalibrationError(f"calibration {calibration.profile!r}: {len(weights)} score weights for "
                                   f"{len(NETWORK_FEATURES)} features {NETWORK_FEATURES}")
        return cls(tuple((float(c), float(r)) for c, r in calibration.c_knots), float(m["prior"][0]),
                   float(m["prior"][1]), float(m["c_var"][0]), float(m["c_var"][1]), weights)

    def estimate_skill(self, skill: GoSkill, level: float = DEFAULT_LEVEL) -> RatingEstimate:
        return self.estimate_from(*go_statistic(skill, self.weights), level)

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
        """The rating from a posterior over c (a model whose statistic is c)."""
        return self.estimate_from(posterior.mean, posterior.n, level)

    def estimate_from(self, stat: float, n: int, level: float = DEFAULT_LEVEL) -> RatingEstimate:
        """The rating from the statistic's value over ``n`` moves: prior(R) x N(stat; knots(R), a + b / n)."""
        r = self.GRID
        c_grid, logp = self._grid
        if n > 0:
            var = self.var_a + self.var_b / n
            logp = logp - 0.5 * (stat - c_grid) ** 2 / var
        p = np.exp(logp - logp.max())
        p /= p.sum()
        return RatingEstimate(float(p @ r), *central_interval(p, r, level, r[0], r[-1]), n, level)


def rank_range(est: RatingEstimate) -> tuple[str, str, str]:
    """Kyu/dan labels of an estimate and its interval's ends."""
    return rank_label(est.rating), rank_label(est.low), rank_label(est.high)


def load_go_calibration(profile: str = DEFAULT_GO_PROFILE) -> Calibration:
    d = read_fitted(f"{profile}.json")
    if d is None:
        raise CalibrationError(f"no Go calibration {profile!r} shipped; fit one with bench/go_accuracy.py --fit --write")
    return Calibration.from_dict(d)
