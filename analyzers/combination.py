"""A learned combination on top of the move model: the moves-only rating (docs/models.md s. 10).

The move model (:mod:`.ratingmodel`) scores each move alone. What a scope's moves say *together* (how often the
player found the only move, how they spent their clock, how hard their positions were) it leaves out. A linear
combination of a few running means, fitted on rated games (``bench/fit_combination.py``), adds it:

    R_hat = w . phi(x) + w0,     phi(x) = (x, x / sqrt(1 + n / 20))

where x (:data:`FEATURES`) holds, for the scope's n counted moves: log(1 + n); the mean win-probability loss delta
of the played move (s. 9), of sqrt(delta), the shares of delta = 0 and delta > 0.02, 0.05, 0.1, 0.2; the mean loss
of the second candidate and the mean number of candidates within 0.05 of the best (position difficulty); the mean
and sd of the move model's likelihood over the rating (tempered and convolved, no prior); the mean and sd of the
clock's x_spent, the last x_left, the share of moves played in under e^-2 of base / 40 (:func:`.ratingmodel.clock_inputs`);
the share of best moves where the second candidate was more than 0.1 worse; one indicator per time-control class.
The second half of phi lets the fit trust the means more as n grows.

The combination rates only scopes whose counted moves had their clocks, all or nearly all (:meth:`Combination.applies`,
:data:`MIN_CLOCKED_SHARE`): it was fitted on clocked games, and its clock inputs carry most of what it adds. The clock
inputs are means over the moves whose clock was known, so a relay that drops a clock here and there changes them by
what those moves would have added, not by a zero read as a clock. Elsewhere the move model's estimate is published.

Every input is a running sum, so a scope keeps :class:`ScopeFeatures` (17 numbers) and the estimate still updates
per move in O(1) plus the posterior the move model computes anyway. The interval is empirical: the quantiles of the
cross-validated residuals (truth - R_hat) on the fitting data, in bins of n, so it is as wide as the errors were
at that many moves, at any level between the stored tails.

Neither player's declared rating is an input. The ``performance`` estimate stays the move model's posterior with
the declared rating as its prior (:meth:`.ratingmodel.MoveModel.posteriors`).
"""

from __future__ import annotations

import json
import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .calibrations import read_fitted
from .errors import CalibrationError
from .perceived import RatingEstimate
from .ratingmodel import RATING_GRID, TIME_CLASSES, UNKNOWN_CLASS

#: The classes one-hot encoded, in order.
CLASSES = (*TIME_CLASSES, UNKNOWN_CLASS)
#: The inputs x, in the order of the fitted weights (phi repeats them, shrunk).
FEATURES = ("log moves", "mean delta", "mean sqrt delta", "best", "delta>0.02", "delta>0.05", "delta>0.1", "delta>0.2",
            "second's loss", "playable", "model mean", "model sd", "x_spent mean", "x_spent sd", "last x_left",
            "fast moves", "best when only one", *(f"class {c}" for c in CLASSES))
#: The inputs that come from the clock (the ablation drops them together).
CLOCK_FEATURES = ("x_spent mean", "x_spent sd", "last x_left", "fast moves")
#: Thresholds on the played move's loss delta, on a playable candidate, on an "only move" and on a fast move's x_spent.
DELTA_STEPS = (0.02, 0.05, 0.1, 0.2)
PLAYABLE_DELTA, ONLY_MOVE_GAP, FAST_X_SPENT = 0.05, 0.1, -2.0
#: The n in phi's shrunk half, x / sqrt(1 + n / SHRINK_MOVES).
SHRINK_MOVES = 20.0
#: The combination rates a scope where at least this share of its counted moves had their clock; the clock inputs are
#: then read over those moves. Below it the scope's clock inputs rest on too few moves and the move model's estimate
#: is published (``bench/accuracy.py --drop-clocks``, docs/accuracy.md).
MIN_CLOCKED_SHARE = 0.8


class MoveFeatures(NamedTuple):
    """What one counted move adds to :class:`ScopeFeatures`."""

    delta: float                 # the played move's win-probability loss
    second: float                # the second-best candidate's loss (1 when there is none), capped at 1
    playable: int                # candidates within PLAYABLE_DELTA of the best
    clock: tuple[float, float]   # (x_left, x_spent)
    clocked: bool                # whether the clock was known (else ``clock`` is (0, 0))
    sqrt_delta: float            # sqrt(delta), and ...
    over: tuple[int, ...]        # ... 1 for each of DELTA_STEPS that delta exceeds: once per move, not per scope
    timed: bool                  # whether the time spent on it was known too (the mover's previous clock came)

    @classmethod
    def of(cls, deltas: Sequence[float] | np.ndarray, played: int, clock: tuple[float, float], clocked: bool,
           timed: bool | None = None) -> MoveFeatures:
        """From the candidates' losses (the best 0, the played move's at ``played``), the clock inputs of
        :func:`.ratingmodel.clock_inputs`, whether the clock was known and whether the time spent was (default: as
        the clock; a move after one whose clock is missing has its clock but not its time spent)."""
        ordered = sorted(min(float(x), 1.0) for x in deltas)
        second = ordered[1] if len(ordered) > 1 else 1.0  # a lone candidate: every other move is a blunder
        delta = float(deltas[played])
        return cls(delta, second, sum(x < PLAYABLE_DELTA for x in ordered), clock, clocked, math.sqrt(delta),
                   tuple(int(delta > step) for step in DELTA_STEPS), clocked if timed is None else clocked and timed)


class ScopeFeatures:
    """The running sums behind :data:`FEATURES` for one scope: :meth:`add` per counted move, O(candidates)."""

    __slots__ = ("n", "delta", "sqrt_delta", "best", "over", "second", "playable", "x_spent", "x_spent2", "last_x_left",
                 "fast", "only", "only_best", "clocked", "timed")

    def __init__(self) -> None:
        self.n = 0
        self.delta = self.sqrt_delta = self.second = self.playable = self.x_spent = self.x_spent2 = 0.0
        self.last_x_left = 0.0
        self.best = self.fast = self.only = self.only_best = self.clocked = self.timed = 0
        self.over = [0, 0, 0, 0]  # counts of delta above each of DELTA_STEPS

    def add(self, move: MoveFeatures) -> None:
        """One counted move (:meth:`MoveFeatures.of`, computed once for all of a player's scopes)."""
        d = move.delta
        self.n += 1
        self.delta += d
        self.sqrt_delta += move.sqrt_delta
        self.best += d == 0.0
        self.over = [a + b for a, b in zip(self.over, move.over)]
        self.second += move.second
        self.playable += move.playable
        # a move without its clock adds nothing to the clock inputs (means over the moves whose clock came), one
        # without its time spent nothing to the time spent's (its x_spent 0 would read as a think of base / 40)
        if move.clocked:
            x_left, x_spent = move.clock
            self.last_x_left = x_left
            self.clocked += 1
            if move.timed:
                self.x_spent += x_spent
                self.x_spent2 += x_spent * x_spent
                self.fast += x_spent < FAST_X_SPENT
                self.timed += 1
        if move.second > ONLY_MOVE_GAP:
            self.only += 1
            self.only_best += d == 0.0

    @property
    def known_x_left(self) -> float | None:
        """x_left of the last move whose clock came, None before one did: a game scope's is the mover's time left
        as last known, which the move model reads for a move whose clock is missing (``known_left`` of
        :func:`streamer.pipeline.count_move`)."""
        return self.last_x_left if self.clocked else None

    def vector(self, model_mean: float, model_sd: float, tclass: str) -> np.ndarray:
        """x in the order of :data:`FEATURES`, given the move model's likelihood mean and sd (no prior); the clock
        inputs over the moves whose clock (time spent) was known."""
        n, nc = max(self.n, 1), max(self.timed, 1)
        xs = self.x_spent / nc
        return np.array([
            math.log1p(self.n), self.delta / n, self.sqrt_delta / n, self.best / n, *(c / n for c in self.over),
            self.second / n, self.playable / n, model_mean, model_sd, xs, math.sqrt(max(self.x_spent2 / nc - xs * xs, 0.0)),
            self.last_x_left, self.fast / nc, self.only_best / self.only if self.only else 0.5,
            *(float(tclass == c) for c in CLASSES),
        ])

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScopeFeatures:
        out = cls()
        for k in cls.__slots__:
            if k in d:
                setattr(out, k, list(d[k]) if k == "over" else d[k])
        if "timed" not in d:  # a state from before the count: its clocked moves all had their time spent
            out.timed = out.clocked
        return out


def moments(post: np.ndarray) -> tuple[float, float]:
    """Mean and sd of a distribution over :data:`~.ratingmodel.RATING_GRID`: the "model mean" and "model sd" inputs,
    from the move model's likelihood without a prior (:data:`~.ratingmodel.FLAT_PRIOR`)."""
    mean = float(post @ RATING_GRID)
    return mean, float(np.sqrt(post @ (RATING_GRID - mean) ** 2))


def phi(x: np.ndarray) -> np.ndarray:
    """(x, x / sqrt(1 + n / 20)) for one vector or a batch (rows); n = exp(x[0]) - 1."""
    x = np.asarray(x, dtype=float)
    n = np.expm1(x[..., :1])
    return np.concatenate([x, x / np.sqrt(1.0 + n / SHRINK_MOVES)], axis=-1)


@dataclass(frozen=True)
class Combination:
    """Fitted weights over :func:`phi` of :data:`FEATURES`, and the residual quantiles that make its interval."""

    profile: str
    features: tuple[str, ...]
    weights: tuple[float, ...]          # w over phi(x): 2 x len(features)
    intercept: float
    moves_edges: tuple[int, ...]        # residual bins: n < edges[0], edges[0] <= n < edges[1], ..., n >= edges[-1]
    tails: tuple[float, ...]            # the probabilities the residual quantiles are stored at, ascending
    residual_quantiles: tuple[tuple[float, ...], ...]  # per bin, one quantile per tail
    model_fitted_on: str = ""           # the move model whose likelihood it reads (model mean, model sd)
    fitted_on: str = ""
    command: str = ""
    provisional: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if tuple(self.features) != FEATURES:
            raise CalibrationError(f"combination fitted on features {list(self.features)}; this kibitz computes {list(FEATURES)}")
        if len(self.weights) != 2 * len(FEATURES):
            raise CalibrationError(f"combination has {len(self.weights)} weights; phi has {2 * len(FEATURES)}")
        if len(self.residual_quantiles) != len(self.moves_edges) + 1 or any(len(q) != len(self.tails) for q in self.residual_quantiles):
            raise CalibrationError("combination's residual table does not match its bins and tails")

    @staticmethod
    def applies(feats: ScopeFeatures) -> bool:
        """Whether the combination may rate a scope: at least :data:`MIN_CLOCKED_SHARE` of its counted moves had their
        clock. It was fitted on clocked games only; a scope without clocks has no clock inputs to read, and there the
        move model alone is published."""
        return feats.n > 0 and feats.clocked >= MIN_CLOCKED_SHARE * feats.n

    @cached_property
    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The weights split into phi's two halves, the tails and the quantile table as arrays, built once (a publish
        would otherwise convert the tuples on every call)."""
        w = np.asarray(self.weights)
        k = len(FEATURES)
        return w[:k], w[k:], np.asarray(self.tails), np.asarray(self.residual_quantiles)

    def predict(self, x: np.ndarray) -> np.ndarray | np.float64:
        """R_hat for one x or a batch, inside the rating grid."""
        w1, w2, _, _ = self._arrays
        x = np.asarray(x, dtype=float)
        if x.ndim == 1:  # one scope, at every publish: plain floats (numpy's per-call cost dominates at this size)
            shrink = 1.0 / math.sqrt(1.0 + math.expm1(x[0]) / SHRINK_MOVES)
            r = float(x @ w1) + shrink * float(x @ w2) + self.intercept
            return np.float64(min(max(r, RATING_GRID[0]), RATING_GRID[-1]))
        shrinks = 1.0 / np.sqrt(1.0 + np.expm1(x[:, 0]) / SHRINK_MOVES)  # phi(x) @ w without building phi
        return np.clip(x @ w1 + shrinks * (x @ w2) + self.intercept, RATING_GRID[0], RATING_GRID[-1])

    def residual_quantiles_at(self, n: int, ps: Sequence[float]) -> np.ndarray:
        """The ps-quantiles of truth - R_hat at n moves (interpolated between the stored tails)."""
        _, _, tails, table = self._arrays
        if min(ps) < tails[0] or max(ps) > tails[-1]:
            raise ValueError(f"a level needs quantiles {list(ps)}; the combination stores {tails[0]}..{tails[-1]}")
        return np.interp(ps, tails, table[bisect_right(self.moves_edges, n)])

    def residual_quantile(self, n: int, p: float) -> float:
        """The p-quantile of truth - R_hat at n moves."""
        return float(self.residual_quantiles_at(n, (p,))[0])

    def estimates(self, x: np.ndarray, n: int, levels: Sequence[float]) -> list[RatingEstimate]:
        """R_hat with its empirical central interval at each of ``levels`` after ``n`` counted moves."""
        r = float(self.predict(x))
        tails = [(1.0 - lv) / 2.0 for lv in levels]
        q = self.residual_quantiles_at(n, [p for t in tails for p in (t, 1.0 - t)])
        return [RatingEstimate(r, r + q[2 * i], r + q[2 * i + 1], n, lv) for i, lv in enumerate(levels)]

    def estimate(self, x: np.ndarray, n: int, level: float) -> RatingEstimate:
        """R_hat with its empirical central interval at ``level`` after ``n`` counted moves."""
        return self.estimates(x, n, (level,))[0]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # fields only: the cached arrays stay out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Combination:
        try:
            return cls(
                profile=d["profile"], features=tuple(d["features"]), weights=tuple(float(w) for w in d["weights"]),
                intercept=float(d["intercept"]), moves_edges=tuple(int(e) for e in d["moves_edges"]),
                tails=tuple(float(t) for t in d["tails"]),
                residual_quantiles=tuple(tuple(float(q) for q in row) for row in d["residual_quantiles"]),
                model_fitted_on=d.get("model_fitted_on", ""), fitted_on=d.get("fitted_on", ""),
                command=d.get("command", ""), provisional=bool(d.get("provisional", True)), extra=dict(d.get("extra", {})),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise CalibrationError(f"malformed combination: {e!r}") from e

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")


def load_combination(profile: str, path: str | Path | None = None) -> Combination | None:
    """The shipped combination of ``profile`` (``analyzers/calibrations/<profile>.combination.json``), or None."""
    d = read_fitted(f"{profile}.combination.json", path)
    return Combination.from_dict(d) if d is not None else None


__all__ = ["CLASSES", "CLOCK_FEATURES", "Combination", "FEATURES", "MoveFeatures", "ScopeFeatures", "load_combination", "moments", "phi"]
