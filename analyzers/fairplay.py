"""Fair-play statistics: how improbably close to the engine a player's moves are (docs/models.md s. 7).

For each analysed move the agent model (:mod:`analyzers.posterior`) at the player's reference skill c_ref gives
P(engine's first choice) = p_t and an expected loss. Over N moves:

- matches: expected ``sum p_t``, variance ``sum p_t (1 - p_t)``, ``z = (observed - expected) / sd``;
- loss: expected ``sum E_t[loss]``, variance ``sum Var_t[loss]``, ``z = (expected - observed) / sd``
  (positive when the player lost *less* than their rating predicts).

Both are O(1) per move from running sums. An alert needs z at or above the threshold (default 4.75, about one
false alarm per million clean performances for a one-sided normal tail) and enough moves for the normal
approximation to mean something.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from .posterior import K_PAWNS

#: Screening threshold: P(Z >= 4.75) is about 1e-6.
DEFAULT_Z_THRESHOLD = 4.75
#: Fewer moves than this never raise an alert.
DEFAULT_MIN_MOVES = 40
#: A player who stays flagged is alerted again only once the z-score has grown by this much since the last alert
#: (a standing flag re-sent at every game end is noise to the team reading the alerts).
REALERT_Z_STEP = 1.0


@dataclass(frozen=True, slots=True)
class FairPlayMove:
    """One move's terms of the running sums at a reference c: computed once per move, added to every scope."""

    matched: int
    p_top: float
    loss: float
    expected_loss: float
    loss_var: float

    @classmethod
    def of(cls, values: Sequence[float], played_index: int, c_ref: float, k: float = K_PAWNS) -> FairPlayMove | None:
        """The move's terms; None for a forced move (one candidate), which says nothing."""
        # plain Python: for the 2-6 candidates of a search this is several times faster than numpy's per-call cost
        if len(values) < 2:
            return None
        vmax = max(values)
        deltas = [vmax - float(v) for v in values]
        # P(i) as in posterior.move_probabilities: (delta_i + k)^-c normalised; the best move's weight is the largest
        w = [(d + k) ** -c_ref for d in deltas]
        total = sum(w)
        p = [x / total for x in w]
        best = deltas.index(0.0)
        e = sum(pi * d for pi, d in zip(p, deltas))
        return cls(int(deltas[played_index] == 0.0), p[best], deltas[played_index],
                   e, sum(pi * d * d for pi, d in zip(p, deltas)) - e * e)


@dataclass
class FairPlayStats:
    """Running sums for the match and loss statistics of one player (or one player in one game)."""

    n: int = 0
    matches: int = 0
    expected_matches: float = 0.0
    match_var: float = 0.0
    loss: float = 0.0
    expected_loss: float = 0.0
    loss_var: float = 0.0

    def update(self, values: Sequence[float], played_index: int, c_ref: float, k: float = K_PAWNS) -> None:
        """Add one move: candidate ``values`` (pawns, side to move, best first or not), the index played."""
        self.add(FairPlayMove.of(values, played_index, c_ref, k))

    def add(self, m: FairPlayMove | None) -> None:
        """Add one move's precomputed terms (None: a forced move, not counted)."""
        if m is None:
            return
        self.n += 1
        self.matches += m.matched
        self.expected_matches += m.p_top
        self.match_var += m.p_top * (1.0 - m.p_top)
        self.loss += m.loss
        self.expected_loss += m.expected_loss
        self.loss_var += m.loss_var

    @property
    def z_match(self) -> float:
        return (self.matches - self.expected_matches) / math.sqrt(self.match_var) if self.match_var > 0 else 0.0

    @property
    def z_loss(self) -> float:
        return (self.expected_loss - self.loss) / math.sqrt(self.loss_var) if self.loss_var > 0 else 0.0

    def flagged(self, threshold: float = DEFAULT_Z_THRESHOLD, min_moves: int = DEFAULT_MIN_MOVES) -> str | None:
        """The statistic that crosses ``threshold`` ("match" or "loss"), or None."""
        if self.n < min_moves:
            return None
        if self.z_match >= threshold:
            return "match"
        if self.z_loss >= threshold:
            return "loss"
        return None

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, float]) -> FairPlayStats:
        return cls(**{k: type(getattr(cls(), k))(v) for k, v in data.items()})
