"""Fair-play statistics: how improbably close to the engine a player's moves are (docs/models.md s. 7).

For each analysed move the agent model (:mod:`analyzers.posterior`) at the player's reference skill c_ref gives
P(engine's first choice) = p_t and an expected loss. Over N moves:

- matches: expected ``sum p_t``, variance ``sum p_t (1 - p_t)``, ``z = (observed - expected) / sd``;
- loss: expected ``sum E_t[loss]``, variance ``sum Var_t[loss]``, ``z = (expected - observed) / sd``
  (positive when the player lost *less* than their rating predicts).

Both are O(1) per move from running sums. Expected behaviour comes from the rating-conditioned move model
(:mod:`analyzers.ratingmodel`) at the player's reference rating, time control and clock
(:meth:`FairPlayMove.from_model`, losses in win probability), or where no model is loaded from the agent model at
the calibrated c (:meth:`FairPlayMove.of`, losses in pawns).

Moves that say nothing are not counted (:func:`exclusion`): besides the book plies, forced moves and decided
positions that no statistic counts, a position whose best move is obvious (the second candidate loses at least
:data:`OBVIOUS_GAP` in win probability) and an obvious recapture (the engine's first choice takes back on the square
the opponent just captured on). A strong player and an engine agree there anyway.

Alerts come in Regan's two tiers: **screening** (z >= :data:`DEFAULT_SCREEN_Z`, a review queue) and **action**
(z >= :data:`DEFAULT_Z_THRESHOLD`, about one in a million clean performances for a one-sided normal tail), each
needing :data:`DEFAULT_MIN_MOVES` counted moves for the normal approximation to mean something.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, NamedTuple

from .calibrations import read_fitted
from .errors import CalibrationError
from .posterior import K_PAWNS
from .ratingmodel import rating_z

#: Action threshold: P(Z >= 4.75) is about 1e-6.
DEFAULT_Z_THRESHOLD = 4.75
#: Screening threshold (a review queue; P(Z >= 1.5) is about 0.067 under the null). Chosen on rated-dev by
#: bench/fairplay_calibration.py's rule, the highest trigger whose review flags 90 % of the half-assisted player-events
#: of 9+ games; the queue it fills there: 87 alerts in 2,000 honest player-games, 78 of 918 players (docs/fairplay.md).
DEFAULT_SCREEN_Z = 1.5
#: A position whose second-best candidate is at least this much worse in win probability has an obvious best move.
OBVIOUS_GAP = 0.20
#: Tiers from the lowest; an alert names the highest one crossed.
TIERS = ("screening", "action")
#: The review's action tier (its match count, :class:`ReviewStats`), chosen on rated-dev by two rules, the higher one:
#: the lowest tier at which a normal model of the honest reviews bounds the false alarms by 1 per 1,000
#: player-events (``bench/fairplay_calibration.py --split rated-dev``: 0.98 at 4.25, 0.53 at 4.5), and a tier above
#: every honest player-event's review z cross-validated (``bench/fit_review.py``: the highest is 4.26); docs/fairplay.md.
DEFAULT_REVIEW_Z = 4.5
#: The weighted statistic's weights 1 / p floor p here, so that one improbable match cannot decide alone.
REVIEW_P_FLOOR = 0.1
#: Fewer moves than this never raise an alert.
DEFAULT_MIN_MOVES = 40
#: The player scope's evidence is its last DEFAULT_PLAYER_WINDOW to 2 x DEFAULT_PLAYER_WINDOW counted moves (about
#: 10-20 games): a sum over every game a player ever played would let any small, persistent misfit of the model for an
#: honest player grow as sqrt(moves) until it crossed a tier.
DEFAULT_PLAYER_WINDOW = 300


def z_score(observed: float, expected: float, var: float) -> float:
    """(observed - expected) / sqrt(var), 0 without variance (no counted move, or only certain ones)."""
    return (observed - expected) / math.sqrt(var) if var > 0 else 0.0


def exclusion(win_losses: Sequence[float], recapture: bool) -> str | None:
    """Why a counted move says nothing about assistance ("recapture", "obvious"), or None when it counts.
    ``win_losses``: each candidate's loss in win probability against the best (0 for the best)."""
    if recapture:
        return "recapture"
    if len(win_losses) > 1 and sorted(win_losses)[1] >= OBVIOUS_GAP:
        return "obvious"
    return None


class FairPlayMove(NamedTuple):
    """One move's terms of the running sums at a reference c: computed once per move, added to every scope."""

    matched: int
    p_top: float
    loss: float
    expected_loss: float
    loss_var: float

    @classmethod
    def of(cls, values: Sequence[float], played_index: int, c_ref: float, k: float = K_PAWNS) -> FairPlayMove | None:
        """The move's terms under the agent model at ``c_ref`` (losses in pawns); None for a forced move."""
        # plain Python: for the 2-6 candidates of a search this is several times faster than numpy's per-call cost
        if len(values) < 2:
            return None
        vmax = max(values)
        deltas = [vmax - float(v) for v in values]
        # P(i) as in posterior.move_probabilities: (delta_i + k)^-c normalised; the best move's weight is the largest
        w = [(d + k) ** -c_ref for d in deltas]
        return cls.from_probabilities(w, deltas, played_index)

    @classmethod
    def from_model(cls, win_losses: Sequence[float], played_index: int, s: float, c: float,
                   target: int | None = None) -> FairPlayMove | None:
        """The move's terms under the move model (docs/models.md s. 9) with sensitivity ``s`` and consistency ``c``
        at the reference rating: P(i) proportional to exp(-(delta_i / s)^c), losses in win probability.
        ``target``: see :meth:`from_probabilities`."""
        if len(win_losses) < 2:
            return None
        deltas = [float(d) for d in win_losses]
        return cls.from_probabilities([math.exp(-((d / s) ** c)) for d in deltas], deltas, played_index, target)

    @classmethod
    def from_probabilities(cls, weights: Sequence[float], deltas: Sequence[float], played_index: int,
                           target: int | None = None) -> FairPlayMove:
        """The terms from unnormalised choice probabilities and each candidate's loss (0 for the best). The match
        statistic counts playing ``target`` (default: the best candidate, any of the best on a tie); a review passes
        the index of a deeper search's first choice (:func:`streamer.review.review_move`)."""
        total = sum(weights)
        p = [x / total for x in weights]
        e = sum(pi * d for pi, d in zip(p, deltas))
        if target is None:
            target = min(range(len(deltas)), key=deltas.__getitem__)
            matched = deltas[played_index] <= 0.0
        else:
            matched = played_index == target
        return cls(int(matched), p[target], deltas[played_index], e, sum(pi * d * d for pi, d in zip(p, deltas)) - e * e)


@dataclass
class FairPlayStats:
    """Running sums for the match and loss statistics of one player (or one player in one game).

    With ``window`` > 0 the sums cover only the most recent counted moves, between ``window`` and 2 x ``window`` of
    them, in O(1) state: ``block`` sums the moves since the last full block, the totals sum that block and the one
    before; when ``block`` fills, the older block leaves and the totals become the full block's sums (copied, not
    subtracted, so no rounding accumulates)."""

    n: int = 0
    matches: int = 0
    expected_matches: float = 0.0
    match_var: float = 0.0
    loss: float = 0.0
    expected_loss: float = 0.0
    loss_var: float = 0.0
    window: int = 0  # 0: every move counts; else the recency window above
    block: FairPlayStats | None = None  # the moves since the last full block (window > 0 only)

    def update(self, values: Sequence[float], played_index: int, c_ref: float, k: float = K_PAWNS) -> None:
        """Add one move: candidate ``values`` (pawns, side to move, best first or not), the index played."""
        self.add(FairPlayMove.of(values, played_index, c_ref, k))

    def add(self, m: FairPlayMove | None) -> None:
        """Add one move's precomputed terms (None: a forced move, not counted)."""
        if m is None:
            return
        self._sum(m)
        if self.window > 0:
            block = self.block = self.block or FairPlayStats()
            block._sum(m)
            if block.n >= self.window:
                # the older block leaves the window: what is left is this full block
                self._copy_sums(block)
                self.block = FairPlayStats()

    def _sum(self, m: FairPlayMove) -> None:
        self.n += 1
        self.matches += m.matched
        self.expected_matches += m.p_top
        self.match_var += m.p_top * (1.0 - m.p_top)
        self.loss += m.loss
        self.expected_loss += m.expected_loss
        self.loss_var += m.loss_var

    def _copy_sums(self, other: FairPlayStats) -> None:
        self.n, self.matches, self.expected_matches, self.match_var = other.n, other.matches, other.expected_matches, other.match_var
        self.loss, self.expected_loss, self.loss_var = other.loss, other.expected_loss, other.loss_var

    @property
    def z_match(self) -> float:
        return z_score(self.matches, self.expected_matches, self.match_var)

    @property
    def z_loss(self) -> float:
        return z_score(self.expected_loss, self.loss, self.loss_var)  # positive when the player lost less

    def flagged(self, threshold: float = DEFAULT_Z_THRESHOLD, min_moves: int = DEFAULT_MIN_MOVES) -> str | None:
        """The statistic that crosses ``threshold`` ("match" or "loss"), or None."""
        if self.n < min_moves:
            return None
        if self.z_match >= threshold:
            return "match"
        if self.z_loss >= threshold:
            return "loss"
        return None

    def strongest(self) -> tuple[str, float]:
        """The statistic with the larger z, and that z."""
        return ("match", self.z_match) if self.z_match >= self.z_loss else ("loss", self.z_loss)

    def tier(self, screen: float = DEFAULT_SCREEN_Z, action: float = DEFAULT_Z_THRESHOLD, min_moves: int = DEFAULT_MIN_MOVES) -> str | None:
        """The highest tier this scope crosses ("screening", "action"), or None."""
        if self.n < min_moves:
            return None
        z = self.strongest()[1]
        return "action" if z >= action else "screening" if z >= screen else None

    def to_dict(self) -> dict[str, Any]:
        d = self._fields()
        if not self.window:  # the states of game and event scopes stay as they were
            del d["window"], d["block"]
        return d

    def _fields(self) -> dict[str, Any]:
        """What ``dataclasses.asdict`` gives, without its deep copy of every value: this runs for every scope of every
        player a transaction stores."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.block is not None:
            d["block"] = self.block._fields()
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FairPlayStats:
        block = data.get("block")
        fields = {k: type(getattr(cls(), k))(v) for k, v in data.items() if k != "block"}
        return cls(**fields, block=cls.from_dict(block) if block else None)


#: The review statistics :meth:`ReviewStats.z_of` names: the match count (what the review decides on) and the weighted
#: count measured beside it.
REVIEW_STATISTICS = ("match", "weighted")


@dataclass
class ReviewStats(FairPlayStats):
    """The review's sums over its counted moves (docs/models.md s. 7), m = 1 when the player played the deeper
    search's first choice and p its honest probability (the calibrated move model): :class:`FairPlayStats`' sums,
    whose match count the review decides on (:attr:`z_match`; its loss sums are the service's values, not the
    review's), and a weighted count measured beside it (:attr:`z_weighted`, ``bench/fairplay_calibration.py
    --statistic weighted``):

        z = sum w (m - p) / sqrt(sum w^2 p (1 - p)),   w = 1 / max(p, REVIEW_P_FLOOR),

    the score test of "a share f of the moves are an assistant's" at f = 0 (with P(match) = f + (1 - f) p the
    log-likelihood's slope there is sum (m - p) / p): the most powerful test against a small share when p is right.
    It weighs most the matches honest players rarely find, which is where the calibration errs for the strongest
    players: on rated-dev it detects more, but it puts honest super-grandmasters over the tier it supports (docs/fairplay.md)."""

    weighted: float = 0.0            # sum w m
    weighted_expected: float = 0.0   # sum w p
    weighted_var: float = 0.0        # sum w^2 p (1 - p)

    def _sum(self, m: FairPlayMove) -> None:
        super()._sum(m)
        p = m.p_top
        w = 1.0 / max(p, REVIEW_P_FLOOR)
        self.weighted += w * m.matched
        self.weighted_expected += w * p
        self.weighted_var += w * w * p * (1.0 - p)

    @property
    def z_weighted(self) -> float:
        """The weighted count's z."""
        return z_score(self.weighted, self.weighted_expected, self.weighted_var)

    def z_of(self, statistic: str) -> float:
        """The z of one of :data:`REVIEW_STATISTICS`."""
        if statistic not in REVIEW_STATISTICS:
            raise ValueError(f"no review statistic {statistic!r}; one of {REVIEW_STATISTICS}")
        return self.z_weighted if statistic == "weighted" else self.z_match


@dataclass(frozen=True, slots=True)
class ReviewCalibration:
    """How often honest players play a deeper search's first choice, from the move model's probability p of that move
    (docs/models.md s. 7, the review; fitted on rated-dev and elite-otb by ``bench/fit_review.py``):

        P(match) = sigmoid(b0 + b1 logit(p) + b2 top + b3 z + k1 x_left + k2 x_spent + k3 unclocked),
                   top = 1 when it is also the service's first candidate, z = (R - 1800) / 400, R the reference rating,
                   x_left, x_spent the move model's clock inputs of the move (0 where unknown), unclocked = 1 for a move
                   without clock inputs;

    and for a move in a decided position (the service does not count it; a review whose calibration has this term,
    ``d``, does; the shipped one has none, docs/fairplay.md):

        P(match) = sigmoid(d0 + d1 logit(p) + d2 top + d3 z + d4 ahead),   ahead = 1 when the mover is the side winning.

    The model prices every move from the service's shallower values, in which the deeper choice is often not the
    best; honest players find it more often than those values say, and the stronger they are the more often (b3:
    an elite classical player finds the deeper move that the shallow search misses). In a decided position every
    candidate's loss in win probability is small, so p says less and the winning side finds the deeper move more
    often than the losing side. The time a move took tells how hard its position was beyond what the shallow values
    say: the longer honest players think, the less often they play the deeper choice (the move model does not read
    the time spent; its fitted clock term is on the time left). A calibration without b3 (earlier files) reads it as
    0; one without ``clock`` has no clock term; one without ``d`` counts no move in a decided position."""

    b0: float
    b1: float
    b2: float
    b3: float = 0.0
    command: str = ""
    d: tuple[float, ...] = ()  # (d0, d1, d2, d3, d4), or () without the decided-position term
    clock: tuple[float, ...] = ()  # (k1, k2, k3), or () without the clock term

    @staticmethod
    def features(p: float, top: bool, rating: float | None = None) -> tuple[float, float, float]:
        """(logit p, top, z): what b1, b2, b3 (and d1, d2, d3) weigh (bench/fit_review.py fits on these columns);
        ``rating`` None or 0 (unknown) counts as the centre of the scale (z = 0)."""
        p = min(max(p, 1e-6), 1.0 - 1e-6)
        return math.log(p / (1.0 - p)), float(top), float(rating_z(float(rating))) if rating else 0.0

    @staticmethod
    def clock_features(clock: tuple[float, float] | None) -> tuple[float, float, float]:
        """(x_left, x_spent, unclocked): what k1, k2, k3 weigh, from a move's clock inputs
        (:func:`~analyzers.ratingmodel.clock_inputs`), None for a move without them."""
        return (0.0, 0.0, 1.0) if clock is None else (float(clock[0]), float(clock[1]), 0.0)

    def __post_init__(self) -> None:
        if self.d and len(self.d) != 5:
            raise CalibrationError(f"review calibration: the decided-position term has {len(self.d)} coefficients, not 5")
        if self.clock and len(self.clock) != 3:
            raise CalibrationError(f"review calibration: the clock term has {len(self.clock)} coefficients, not 3")

    @property
    def counts_decided(self) -> bool:
        """Whether the review counts moves in decided positions (the calibration has their term)."""
        return bool(self.d)

    def probability(self, p: float, top: bool, rating: float | None = None, ahead: bool | None = None,
                    clock: tuple[float, float] | None = None) -> float:
        """P(match) for a move the model gives probability ``p``; ``ahead`` None for a move the service counts, else
        a move in a decided position whose mover is (True) or is not (False) the side winning; ``clock`` the move's
        clock inputs (x_left, x_spent), None without them (read by the clock term only)."""
        logit, t, z = self.features(p, top, rating)
        if ahead is None:
            x = self.b0 + self.b1 * logit + self.b2 * t + self.b3 * z
            if self.clock:
                x += sum(k * f for k, f in zip(self.clock, self.clock_features(clock)))
        elif self.counts_decided:
            d0, d1, d2, d3, d4 = self.d
            x = d0 + d1 * logit + d2 * t + d3 * z + d4 * float(ahead)
        else:
            raise ValueError("this review calibration has no term for moves in decided positions")
        return 1.0 / (1.0 + math.exp(-x))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for term in ("d", "clock"):
            if d[term]:
                d[term] = list(d[term])
            else:
                del d[term]  # files without the term stay as they were
        return d

    @classmethod
    def load(cls, profile: str, path: str | Path | None = None) -> ReviewCalibration | None:
        """The shipped calibration of ``profile`` (``analyzers/calibrations/<profile>.review.json``), or None."""
        d = read_fitted(f"{profile}.review.json", path)
        if not d:
            return None
        return cls(float(d["b0"]), float(d["b1"]), float(d["b2"]), float(d.get("b3", 0.0)), str(d.get("command", "")),
                   tuple(float(x) for x in d.get("d", ())), tuple(float(x) for x in d.get("clock", ())))
