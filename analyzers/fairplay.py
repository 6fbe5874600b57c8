"""Fair-play statistics: how improbably close to the engine a player's moves are (REFERENCES.md section 7).

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

import numpy as np

from .posterior import K_PAWNS, move_probabilities

#: Screening threshold: P(Z >= 4.75) is about 1e-6.
DEFAULT_Z_THRESHOLD = 4.75
#: Fewer moves than this never raise an alert.
DEFAULT_MIN_MOVES = 40


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
        v = np.asarray(values, dtype=float)
        if v.size < 2:
            return  # a forced move says nothing
        p = move_probabilities(v, c_ref, k)
        best = int(np.argmax(v))
        deltas = v.max() - v
        p_top = float(p[best])
        self.n += 1
        self.matches += int(played_index == best or deltas[played_index] == 0.0)
        self.expected_matches += p_top
        self.match_var += p_top * (1.0 - p_top)
        e = float(p @ deltas)
        self.loss += float(deltas[played_index])
        self.expected_loss += e
        self.loss_var += float(p @ deltas**2) - e * e

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
