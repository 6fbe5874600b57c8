"""Skill as a stochastic agent: the Bayesian posterior over c (Di Fatta, Haworth, Regan 2009; docs/models.md s. 2).

The agent E(c) picks candidate i of a multi-PV search with probability proportional to
``(v_max - v_i + K) ** -c`` (values in pawns from the side to move, K = 0.1). c = 0 plays at random, larger c
plays closer to the engine. :class:`SkillPosterior` holds a discrete posterior over c on a grid, updated in log
space in O(grid x candidates) per move.

Documented choices beyond the paper:

- *A move outside the candidate list.* The paper gives it probability 0, which would zero the posterior for
  every c. kibitz appends it as one more candidate whose value is its own evaluation when the caller knows it
  (kibitz's pipeline takes it from the search of the position after the move), but never better than the worst
  listed candidate, since the search ranked it below all of them: see :func:`with_played_move`.
- *Grid refinement.* The paper refines the grid in batch (coarse first, then finer around the mode). A live
  posterior cannot revisit past moves, so refinement happens in place: when the posterior sd falls below
  ``REFINE_POINTS_PER_SD`` grid steps, the grid is rebuilt over mean +/- ``REFINE_SPAN_SD`` sd with the same number
  of points and the log posterior is interpolated onto it. The log posterior is a sum of concave functions of c
  (each move contributes -c a - logsumexp(-c b_j)), so it is smooth and nearly quadratic near its mode and
  linear interpolation at the trigger spacing changes it by at most ~0.002 nats. Later moves are exact on the
  new grid. If mass later drifts to an edge that is not a hard bound, the grid widens again (log density
  extended linearly, which for a concave function errs on the wide side).
- *Deferred moves.* A scope nobody reads after each move (a player's event and overall scopes, read at game ends)
  takes its moves with ``SkillPosterior.add(term, defer=True)``: they are kept as they came and folded in together,
  in one numpy pass, when ``DEFER_BATCH`` are waiting or a summary is read. The sum of the moves' log-likelihoods is
  the same; only the grid checks run per batch instead of per move. The waiting moves are part of the stored state,
  so when they are folded in does not depend on when a runtime stores it.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .gridstats import central_interval
from .perceived import DEFAULT_LEVEL

#: The paper's K, in pawns: keeps the best move's likelihood finite.
K_PAWNS = 0.1
#: Default grid: c in [C_MIN, C_MAX] with GRID_POINTS points.
C_MIN, C_MAX, GRID_POINTS = 0.0, 6.0, 301
#: Refine when the posterior sd spans fewer than this many grid steps ...
REFINE_POINTS_PER_SD = 8.0
#: ... onto a grid covering mean +/- this many sd.
REFINE_SPAN_SD = 12.0
#: Widen when the mass in the outermost tenth of the grid (at a non-hard edge) exceeds this.
EDGE_MASS = 1e-6


def move_probabilities(values: npt.ArrayLike, c: float, k: float = K_PAWNS) -> np.ndarray:
    """P(m_i | c) for candidates with ``values`` (pawns, side to move): normalised ``(v_max - v_i + k) ** -c``."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        raise ValueError("no candidates")
    logl = -c * np.log(v.max() - v + k)
    logl -= logl.max()
    p = np.exp(logl)
    return p / p.sum()


def with_played_move(values: Sequence[float], played_value: float | None = None) -> tuple[list[float], int]:
    """Candidates plus a played move that is not among them; returns (values, index of the played move).

    Its value is ``played_value`` when known, capped at the worst listed candidate's value, else that worst value.
    """
    vals = list(values)
    worst = min(vals)
    v = worst if played_value is None else min(played_value, worst)
    vals.append(v)
    return vals, len(vals) - 1


def _exp_neg_outer(d: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """exp(-d_i c) for every entry of ``d`` and every point c of a uniform ``grid`` (a linspace, or a stack of them
    one per row), shape ``d.shape + grid.shape``. Exponentials are the costly part of a posterior's update (numpy's
    float64 exp is scalar without AVX-512, ~10 ns each), and on a uniform grid c_{Bj+l} = c_{Bj} + (c_l - c_0), so
    exp(-d c) is a product of one of ~sqrt(n) coarse and one of ~sqrt(n) fine exponentials: 2 sqrt(n) of them per
    entry instead of n, and one multiplication per point (two roundings: relative error under 1e-15)."""
    n = grid.shape[-1]
    b = math.isqrt(n - 1) + 1                                       # fine steps per coarse step; b * b >= n
    coarse = np.exp(np.multiply.outer(-d, grid[..., ::b]))          # at c_0, c_b, c_2b, ...
    fine = np.exp(np.multiply.outer(-d, grid[..., :b] - grid[..., :1]))  # at c_l - c_0, l < b
    out = coarse[..., :, None] * fine[..., None, :]
    return out.reshape(*out.shape[:-2], -1)[..., :n]


def _batch_loglik(grid: np.ndarray, moves: Sequence[tuple[np.ndarray, int]]) -> np.ndarray:
    """Sum over ``moves`` of log P(played | c) at every point of one grid; each move is (d, played) with d_i =
    log(delta_i + k) - min_j log(delta_j + k) as in :func:`_move_loglik`, whose numbers it gives move by move."""
    m = max(d.size for d, _ in moves)
    d_all = np.zeros((len(moves), m))   # moves x candidates, short rows padded with d = 0 ...
    pads = np.zeros(len(moves))
    for i, (d, _) in enumerate(moves):
        d_all[i, :d.size] = d
        pads[i] = m - d.size
    s = _exp_neg_outer(d_all, grid).sum(axis=1)
    if pads.any():
        s -= pads[:, None]                 # ... each of which added exp(0) = 1
    chosen = sum(float(d[played]) for d, played in moves)
    # each move's sum is in [1, m], so a product of DEFER_BATCH of them stays far from overflow: one log per grid
    # point and batch of moves, not per move
    products = np.multiply.reduceat(s, np.arange(0, len(moves), DEFER_BATCH), axis=0)
    return -grid * chosen - np.log(products).sum(axis=0)


class MoveTerm(NamedTuple):
    """What one move contributes to a posterior with this ``k``, whatever its grid: d_i = log(delta_i + k) -
    min_j log(delta_j + k) >= 0 per candidate and the played move's index. Computed once per move for all of a
    player's scopes (:func:`move_term`)."""

    d: np.ndarray
    played: int
    k: float


def move_term(values: Sequence[float] | np.ndarray, played_index: int, k: float = K_PAWNS) -> MoveTerm | None:
    """The :class:`MoveTerm` of the move ``played_index`` among candidates with ``values`` (pawns); None for a
    position with a single candidate, which carries no information."""
    if not 0 <= played_index < len(values):
        raise IndexError(f"played_index {played_index} outside {len(values)} candidates")
    if len(values) < 2:
        return None
    # one log per candidate, not per grid point; plain Python for a search's few candidates (numpy's per-call cost
    # dominates at this size)
    vmax = max(float(v) for v in values)
    logd = [math.log(vmax - float(v) + k) for v in values]
    low = min(logd)
    return MoveTerm(np.array([x - low for x in logd]), played_index, k)


def _move_loglik(grid: np.ndarray, d: np.ndarray, played: int) -> np.ndarray:
    """log P(played | c) at every grid point for a move's ``d`` (:class:`MoveTerm`): log P = -c d_played - log
    sum_j exp(-c d_j). For c >= 0 every exponent is <= 0 and the best move's is 0, so the sum is in [1, m]: stable
    without a max pass."""
    # candidates on the first axis: the sum over them adds whole contiguous rows (summing a short last axis costs
    # ~3x more); grid may be a stack of grids (one row per posterior)
    s = _exp_neg_outer(d, grid).sum(axis=0)
    return -grid * d[played] - np.log(s)


_INITIAL: dict[tuple[float, float, int], tuple[np.ndarray, np.ndarray]] = {}


def _initial(c_min: float, c_max: float, points: int) -> tuple[np.ndarray, np.ndarray]:
    """The shared, read-only grid and flat log density of a new posterior."""
    key = (c_min, c_max, points)
    hit = _INITIAL.get(key)
    if hit is None:
        grid, flat = np.linspace(c_min, c_max, points), np.zeros(points)
        grid.flags.writeable = flat.flags.writeable = False
        hit = _INITIAL[key] = (grid, flat)
    return hit


#: A deferred posterior folds its waiting moves in when this many are waiting (see the module docstring).
DEFER_BATCH = 16

#: After this many moves the grid is checked for refinement every ADAPT_EVERY moves, not after each one: the
#: posterior sd shrinks like 1/sqrt(n), so a few moves' delay changes nothing and saves most of the bookkeeping.
ADAPT_EVERY = 8


class SkillPosterior:
    """A posterior over the skill parameter c on an adaptive grid, starting from a flat prior.

    >>> post = SkillPosterior()
    >>> post.update([0.30, 0.25, -0.40], played_index=0)
    >>> round(post.mean, 3) > 0
    True
    """

    __slots__ = ("grid", "logp", "_n", "k", "c_min", "c_max", "_moments", "_pending", "_basis")

    def __init__(self, c_min: float = C_MIN, c_max: float = C_MAX, points: int = GRID_POINTS, k: float = K_PAWNS) -> None:
        if not c_max > c_min >= 0 or points < 3:
            raise ValueError("need 0 <= c_min < c_max and at least 3 grid points")
        self.c_min, self.c_max, self.k = c_min, c_max, k
        # a new posterior shares one read-only grid and flat density per (c_min, c_max, points): a player's state
        # holds a posterior per scope, most never counted a move, and each array is 2.4 KB. The first update replaces
        # the shared density (see _take); a refinement replaces the grid.
        self.grid, self.logp = _initial(c_min, c_max, points)
        self._n = 0  # moves in logp
        self._moments: tuple[float, float] | None = None  # (mean, sd) until the density changes: one pass per move
        self._pending: list[tuple[np.ndarray, int]] = []  # deferred moves, not yet in logp: (d, played)
        self._basis: np.ndarray | None = None  # (1, c, c^2) at each grid point, for the moments (_weighted_moments)

    @property
    def n(self) -> int:
        """Moves counted (a position with a single candidate is not), deferred ones included."""
        return self._n + len(self._pending)

    # -- updating -------------------------------------------------------------------------------------
    def update(self, values: Sequence[float] | np.ndarray, played_index: int) -> None:
        """Multiply in the likelihood of the move ``played_index`` among candidates with ``values`` (pawns).

        A position with a single candidate carries no information and is ignored (n is not counted).
        """
        term = move_term(values, played_index, self.k)
        if term is not None:
            self.add(term)

    def add(self, term: MoveTerm, defer: bool = False) -> None:
        """:meth:`update` with a move's :class:`MoveTerm`; ``defer``: folded in later with other moves (module
        docstring), when ``DEFER_BATCH`` moves wait or a summary is read."""
        if term.k != self.k:
            raise ValueError(f"a move term for k {term.k} added to a posterior with k {self.k}")
        if defer:
            self._pending.append((term.d, term.played))
            if len(self._pending) >= DEFER_BATCH:
                self._fold()
            return
        self._fold()  # the moves in the order they came
        self._take(_move_loglik(self.grid, term.d, term.played))

    def _take(self, ll: np.ndarray, moves: int = 1) -> None:
        """Add ``moves`` moves' summed log-likelihood ``ll`` on the current grid; check the grid (each move while
        there are few, then every ADAPT_EVERY)."""
        if self.logp.flags.writeable:
            self.logp += ll
        else:  # the shared flat density of a new posterior: 0 + ll
            self.logp = ll.copy()
        before, self._n = self._n, self._n + moves
        self._moments = None
        if self._n < 2 * ADAPT_EVERY or self._n // ADAPT_EVERY > before // ADAPT_EVERY:
            self._adapt()

    def _fold(self) -> None:
        """Fold the deferred moves into the log density, in one pass."""
        if self._pending:
            ll, moves = _batch_loglik(self.grid, self._pending), len(self._pending)
            self._pending = []
            self._take(ll, moves)

    @staticmethod
    def update_all(posteriors: Sequence[SkillPosterior], values: Sequence[float] | np.ndarray, played_index: int) -> None:
        """:meth:`update` of several posteriors (a player's game, event and overall scopes) with one move, in one
        numpy pass over their stacked grids; the same numbers as updating each in turn."""
        if not posteriors:
            return
        if len({(p.k, p.grid.size) for p in posteriors}) > 1:  # stacking needs one k and one grid size
            for p in posteriors:
                p.update(values, played_index)
            return
        term = move_term(values, played_index, posteriors[0].k)
        if term is None:
            return
        for p in posteriors:
            p._fold()  # the moves in the order they came
        # scopes that share a grid (a player's event and overall scopes through their first event, every new scope
        # before its first refinement) share its likelihood: each distinct grid (linspace(lo, hi), one size) once
        grids = {(p.grid[0], p.grid[-1]): p.grid for p in posteriors}
        row = {key: r for r, key in enumerate(grids)}
        # np.array of equal-length rows stacks them at a quarter of np.stack's cost
        loglik = _move_loglik(np.array(list(grids.values())), term.d, term.played)
        for p in posteriors:
            p._take(loglik[row[(p.grid[0], p.grid[-1])]])

    def _adapt(self) -> None:
        self.logp -= self.logp.max()               # keep it bounded; normalisation is implicit
        w = np.exp(self.logp)                      # unnormalised probabilities(), whose shift by the max is now 0
        total, (mean, sd) = self._weighted_moments(w)
        self._moments = mean, sd
        step = self.grid[1] - self.grid[0]
        tenth = max(1, self.grid.size // 10)
        lo_soft = self.grid[0] > self.c_min + 1e-12
        hi_soft = self.grid[-1] < self.c_max - 1e-12
        edge = EDGE_MASS * total
        if (lo_soft and w[:tenth].sum() > edge) or (hi_soft and w[-tenth:].sum() > edge):
            width = self.grid[-1] - self.grid[0]
            self._regrid(max(self.c_min, self.grid[0] - width), min(self.c_max, self.grid[-1] + width))
        elif sd > 0 and sd < REFINE_POINTS_PER_SD * step:
            self._regrid(max(self.c_min, mean - REFINE_SPAN_SD * sd), min(self.c_max, mean + REFINE_SPAN_SD * sd))

    def _regrid(self, lo: float, hi: float) -> None:
        old_grid, old = self.grid, self.logp
        new_grid = np.linspace(lo, hi, old_grid.size)
        new = np.interp(new_grid, old_grid, old)
        # outside the old range, extend the log density linearly from the nearest end segment
        left = new_grid < old_grid[0]
        right = new_grid > old_grid[-1]
        if left.any():
            slope = (old[1] - old[0]) / (old_grid[1] - old_grid[0])
            new[left] = old[0] + slope * (new_grid[left] - old_grid[0])
        if right.any():
            slope = (old[-1] - old[-2]) / (old_grid[-1] - old_grid[-2])
            new[right] = old[-1] + slope * (new_grid[right] - old_grid[-1])
        self.grid, self.logp = new_grid, new - new.max()
        self._moments = self._basis = None

    # -- summaries ------------------------------------------------------------------------------------
    def probabilities(self) -> np.ndarray:
        """Normalised posterior mass at each grid point."""
        w = self._weights()
        return w / w.sum()

    def _weights(self) -> np.ndarray:
        """The posterior mass at each grid point, unnormalised (the largest is 1), the deferred moves folded in."""
        self._fold()
        return np.exp(self.logp - self.logp.max())

    def _weighted_moments(self, w: np.ndarray) -> tuple[float, tuple[float, float]]:
        """(sum of w, (mean, sd) of c) under weights ``w`` on the grid: one product with the (1, c, c^2) basis (the
        game scope's c is published after every move). Var = E[c^2] - E[c]^2 carries a relative rounding error of
        about 1e-16 E[c^2] / Var: under 1e-8 for any sd above 1e-3, since c <= 6."""
        if self._basis is None:
            g = self.grid
            self._basis = np.column_stack((np.ones_like(g), g, g * g))
        total, s1, s2 = (w @ self._basis).tolist()
        m = s1 / total
        return total, (m, math.sqrt(max(s2 / total - m * m, 0.0)))

    def moments(self) -> tuple[float, float]:
        """(mean, sd) of c, computed once per change of the density."""
        if self._pending or self._moments is None:
            self._moments = self._weighted_moments(self._weights())[1]
        return self._moments

    @property
    def mean(self) -> float:
        return self.moments()[0]

    @property
    def std(self) -> float:
        return self.moments()[1]

    def interval(self, level: float = DEFAULT_LEVEL) -> tuple[float, float]:
        """Central credible interval for c: quantiles between the grid's cell edges (:mod:`.gridstats`), within
        [c_min, c_max]."""
        return central_interval(self.probabilities(), self.grid, level, self.c_min, self.c_max)

    def summary(self, level: float = DEFAULT_LEVEL) -> tuple[float, float, float, float]:
        """(mean, sd, low, high) in one pass over the grid."""
        p = self.probabilities()
        m, sd = self._weighted_moments(p)[1]
        return (m, sd, *central_interval(p, self.grid, level, self.c_min, self.c_max))

    # -- state ----------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON state; the log density is little-endian float64 in base64: exact, and 4x smaller and ~50x
        faster to write than a list of decimal numbers (the player state goes to a changelog on every move)."""
        return {
            "c_min": self.c_min, "c_max": self.c_max, "k": self.k, "n": self._n,
            "lo": float(self.grid[0]), "hi": float(self.grid[-1]),
            "logp_f64": _b64(self.logp),
            **({"pending": [[played, _b64(d)] for d, played in self._pending]} if self._pending else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SkillPosterior:
        if "logp_f64" in data:
            logp = _unb64(data["logp_f64"])
        else:
            logp = np.asarray(data["logp"], dtype=float)
        out = cls(data["c_min"], data["c_max"], logp.size, data["k"])
        out.grid, out._basis = np.linspace(data["lo"], data["hi"], logp.size), None
        out.logp = logp
        out._n = int(data["n"])
        out._pending = [(_unb64(d), int(played)) for played, d in data.get("pending", ())]
        if any(not 0 <= played < d.size for d, played in out._pending):
            raise ValueError("a deferred move's played index is outside its candidates")
        return out


def _b64(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a, dtype="<f8").tobytes()).decode()


def _unb64(s: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(s), dtype="<f8").astype(float)
