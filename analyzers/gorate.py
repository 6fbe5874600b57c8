"""Go skill from moves: points lost, the posterior over c in points, and a rating on the Go scale (docs/models.md s. 11).

The same models as chess, with the engine's move values in points instead of pawns:

- the gain of a move is minus the points it lost against the engine's best candidate (``v_max - v_played``, from
  the mover's side), kept in a :class:`~analyzers.gain.GainHistogram` of whole points;
- the agent of Di Fatta, Haworth and Regan picks candidate i with probability proportional to
  ``(v_max - v_i + K) ** -c`` with K = :data:`K_POINTS` (one point: the Go counterpart of chess's 0.1 pawn, about
  the smallest difference between moves a strong amateur tells apart); :class:`~analyzers.posterior.SkillPosterior`
  keeps the posterior over c, O(grid x candidates) per move;
- a per-server :class:`~analyzers.calibration.Calibration` maps c to the rating scale of :mod:`analyzers.gorank`
  (GoR: 1d = 2100, 100 a rank), with an error that shrinks with the moves seen (``error_var``: a + b / n), fitted by
  ``bench/go_accuracy.py``.

:class:`GoSkill` is one scope's state (a game, or a player's games so far): update per move, read an estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

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
    """One scope's evidence: the posterior over c (K in points) and the histogram of gains in points.

    ``prior`` (mean, sd) is the population's c (the calibration's ``extra["c_prior"]``): it starts the posterior, so
    that the first moves move the estimate from the population's typical rank instead of from the middle of the grid.
    """

    prior: tuple[float, float] | None = None
    posterior: SkillPosterior = field(default_factory=lambda: SkillPosterior(k=K_POINTS))
    gains: GainHistogram = field(default_factory=GainHistogram)

    def __post_init__(self) -> None:
        if self.prior is not None and self.posterior.n == 0:
            self.posterior.apply_prior(*self.prior)

    @classmethod
    def for_calibration(cls, calibration: Calibration) -> GoSkill:
        p = calibration.extra.get("c_prior")
        return cls(prior=(float(p[0]), float(p[1])) if p else None)

    def add(self, values: Sequence[float], played: int) -> None:
        """One move: candidate values in points (side to move, the played move among them) and its index."""
        self.posterior.update(values, played)
        self.gains.add(go_gain(values, played))

    @property
    def moves(self) -> int:
        return self.posterior.n

    def estimate(self, calibration: Calibration, level: float = DEFAULT_LEVEL) -> RatingEstimate:
        return calibration.from_posterior(self.posterior, level)


def rank_range(est: RatingEstimate) -> tuple[str, str, str]:
    """Kyu/dan labels of an estimate and its interval's ends."""
    return rank_label(est.rating), rank_label(est.low), rank_label(est.high)


def load_go_calibration(profile: str = DEFAULT_GO_PROFILE) -> Calibration:
    d = read_fitted(f"{profile}.json")
    if d is None:
        raise CalibrationError(f"no Go calibration {profile!r} shipped; fit one with bench/go_accuracy.py --fit --write")
    return Calibration.from_dict(d)
