"""The rating-conditioned move model and the per-player posterior over the rating (docs/models.md s. 9).

**Move model.** For a counted move with candidates i (values v_i in cp, side to move; the played move appended when
the search did not list it, as for the posterior over c), the loss of candidate i in the win-probability domain is
``delta_i = W(v_max) - W(v_i)`` with ``W(v) = 1 / (1 + exp(-v / WIN_SCALE_CP))``. A player of rating R in
time-control class t picks candidate i with probability (Regan's model, with its sensitivity s and consistency c)::

    P(i | R, t) = exp(-(delta_i / s)^c) / sum_j exp(-(delta_j / s)^c)
    log s = a_0 + a_1 z + a_2 z^2 + a_t + k_left x_left + k_spent x_spent
    c = exp(b_0 + b_1 z)        z = (R - 1800) / 400

so both parameters are smooth functions of the rating, and the time control and the clock (:func:`clock_inputs`:
the share of the base time left, and the time spent on the move) shift the sensitivity. The
coefficients are fitted by maximum likelihood on rated games (``bench/fit_model.py``) and stored with the profile's
calibration (``analyzers/calibrations/<profile>.model.json``).

**Rating posterior.** Per scope (a game, an event, a player's history) kibitz keeps the sum over moves of
``log P(played | R, t)`` on a fixed grid of ratings (:data:`RATING_GRID`): O(grid) per move, the same array whatever
prior is applied later. A published estimate combines it with a prior at publish time:

- ``moves only``: the population prior of the game's time-control class (fitted on rated-dev, configurable); the
  declared ratings are never used;
- ``performance``: the player's declared rating (with its RD, or :data:`DEFAULT_DECLARED_RD`) as the prior.

Two corrections, fitted on rated-dev so that the intervals cover what they claim: the moves of one player are not
independent draws (the summed log-likelihood is tempered by ``temperature`` < 1), and a player's FIDE rating is not
exactly the strength their moves show (the likelihood is convolved with a normal of sd ``person_sd`` before the prior
multiplies it: strength = rating + a person effect). With no move the estimate is the prior and says so by its
width; with many moves the interval narrows towards +/- 1.96 ``person_sd``, never to zero.
"""

from __future__ import annotations

import base64
import copy
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .calibrations import read_fitted
from .errors import CalibrationError
from .gridstats import cell_edges, central_quantiles, edge_cdf
from .perceived import DEFAULT_LEVEL, RatingEstimate

#: Centipawns per unit of the logistic win-probability curve (lichess's 0.00368208 per cp).
WIN_SCALE_CP = 1 / 0.00368208
#: Ratings the posterior is kept on: 400..3400 in steps of RATING_STEP (beyond any FIDE rating in the data by 200+;
#: the quantiles are interpolated, and no interval is narrower than a few grid steps).
RATING_STEP = 20.0
RATING_GRID = np.arange(400.0, 3400.0 + 1e-9, RATING_STEP)
#: The edges of the grid's cells, one step wide around each point (:mod:`.gridstats`: read at the points themselves,
#: every quantile would sit half a step, 10 Elo, low).
RATING_EDGES = cell_edges(RATING_GRID)
#: Centre and scale of z = (R - RATING_CENTER) / RATING_SCALE in the parameter functions.
RATING_CENTER, RATING_SCALE = 1800.0, 400.0
#: The declared ratings the move model and the review calibration were fitted on: rated-dev's and elite-otb's Elo tags
#: run from 1000 (their 0.1 % quantile and 1 % 1096; FIDE's floor) to 2882. Fair play reads a declared rating outside
#: them at the nearer end (:func:`fair_play_reference`): extrapolated past its data, the model's expectation of how
#: often a player rated 300 plays the engine's move is a guess, and a wrong one raises alerts or hides them.
FITTED_RATINGS = (1000.0, 2900.0)
#: Time-control classes, by the estimated game duration base + 40 x increment (seconds).
TIME_CLASSES = ("blitz", "rapid", "classical")
UNKNOWN_CLASS = "unknown"
#: The RD assumed for a declared rating that comes without one (the performance estimate's prior).
DEFAULT_DECLARED_RD = 100.0
#: The 68 % band published next to the 95 % interval.
BAND_LEVEL = 0.68


def win_probability(cp: np.ndarray | float) -> np.ndarray:
    """W(v): expected score of the side to move at evaluation ``cp`` (lichess's logistic curve)."""
    return 1.0 / (1.0 + np.exp(-np.asarray(cp, dtype=float) / WIN_SCALE_CP))


def win_losses(values_cp: Sequence[float]) -> np.ndarray:
    """delta_i = W(v_max) - W(v_i) >= 0 for candidate values in cp (side to move)."""
    # plain Python for a search's few candidates (numpy's per-call cost dominates at this size); the exponent is
    # clipped where exp would overflow, far beyond any clamped evaluation
    w = [1.0 / (1.0 + math.exp(min(-float(v) / WIN_SCALE_CP, 700.0))) for v in values_cp]
    top = max(w)
    return np.array([top - x for x in w])


def time_class(base_seconds: float | None, increment: float = 0.0) -> str:
    """The class of a time control from its estimated duration base + 40 x increment (lichess's convention, with
    bullet folded into blitz): under 8 min blitz, under 60 min rapid, else classical; None is unknown."""
    if base_seconds is None or not math.isfinite(base_seconds) or base_seconds <= 0:
        return UNKNOWN_CLASS
    est = base_seconds + 40.0 * max(increment, 0.0)
    return "blitz" if est < 480 else "rapid" if est < 3600 else "classical"


def parse_time_control(tc: str) -> str:
    """A class from a PGN-style ``TimeControl`` in seconds ("180+2", "600", "40/7200:3600") or a time control as
    players write it, minutes + seconds ("3+2", "15+10", "90+30").

    A "base+increment" is read as minutes when its base is under 60 or its increment over a fifth of its base: no
    time control played in seconds has either (1+0 is "60+0", 2+12 "120+12") but the players' shorthand has one of
    them from 3+2 to 90+30 and 120+30, which read as seconds made a 15+10 or a 90+30 blitz. The one reading this
    gives up is the PGN of a game under a minute ("30+0" for 1/2+0, read as 30 minutes)."""
    tc = tc.strip()
    if not tc or tc in ("-", "?"):
        return UNKNOWN_CLASS
    first = tc.split(":")[0]
    if "/" in first:
        first = first.split("/", 1)[1]
    base_s, plus, inc_s = first.partition("+")
    try:
        base, inc = float(base_s), float(inc_s or 0)
    except ValueError:
        return UNKNOWN_CLASS
    if plus and (base < 60 or inc > 0.2 * base):
        base *= 60
    return time_class(base, inc)


#: Words in an event's name that say its time control, for games that carry neither a TimeControl nor clocks (an
#: over-the-board archive): "World Blitz", "Amber Rapid", "chess.com Speed 2020". Bullet is folded into blitz.
EVENT_NAME_CLASSES = {"blitz": ("blitz", "bullet", "speed", "armageddon"), "rapid": ("rapid",)}


def class_from_event_name(name: str | None) -> str:
    """The class an event's name states, or unknown when it names none or more than one ("Rapid and Blitz")."""
    words = (name or "").lower()
    found = [tc for tc, keys in EVENT_NAME_CLASSES.items() if any(k in words for k in keys)]
    return found[0] if len(found) == 1 else UNKNOWN_CLASS


def class_from_clock(first_clock: float | None) -> str:
    """A class inferred from the mover's clock after a game's first move (base + increment - a few seconds)."""
    return time_class(first_clock)


#: The clock inputs are centred on half the base time left and on base / 40 spent on a move (0 = typical, and the
#: value of a move without clocks); the small constants keep the logarithms finite at 0.
CLOCK_LEFT_REF, CLOCK_SPENT_REF, CLOCK_EPS_LEFT, CLOCK_EPS_SPENT = 0.5, 1.0 / 40.0, 0.05, 0.005
#: The most of the base a clock's time left (increments and added time: rarely 1.5) and time spent are read as: a
#: clock's glitch or a corrected clock beyond them is read as them, not as a time the inputs were never fitted on.
CLOCK_LEFT_MAX, CLOCK_SPENT_MAX = 4.0, 1.0


def clock_inputs(left: float | None, previous: float | None, base: float | None) -> tuple[float, float]:
    """(x_left, x_spent) of a move: ``log((left/base + e) / (ref + e))`` for the mover's time left after it, and the same
    of the time spent on it (the mover's previous clock minus this one; the increment is not known, so it is left
    out), each ratio to the base read as at most :data:`CLOCK_LEFT_MAX` / :data:`CLOCK_SPENT_MAX`. Each is 0 where
    its clocks are not known."""
    if left is None or base is None or not base > 0:
        return 0.0, 0.0
    x_left = math.log((min(left / base, CLOCK_LEFT_MAX) + CLOCK_EPS_LEFT) / (CLOCK_LEFT_REF + CLOCK_EPS_LEFT))
    if previous is None:
        return x_left, 0.0
    spent = min(max(previous - left, 0.0) / base, CLOCK_SPENT_MAX)
    return x_left, math.log((spent + CLOCK_EPS_SPENT) / (CLOCK_SPENT_REF + CLOCK_EPS_SPENT))


def fair_play_reference(declared: float) -> float:
    """The reference rating fair play expects a player's moves from: the declared one, within :data:`FITTED_RATINGS`."""
    lo, hi = FITTED_RATINGS
    return min(max(float(declared), lo), hi)


def fair_play_source(declared: float) -> str:
    """A fair-play alert's ``reference_source`` for a declared rating (what :func:`fair_play_reference` made of it)."""
    if fair_play_reference(declared) == declared:
        return "declared"
    lo, hi = FITTED_RATINGS
    return f"declared {declared:g}, read at the nearer end of the ratings the models were fitted on ({lo:g}-{hi:g})"


def rating_z(ratings: np.ndarray | float) -> Any:
    """z = (R - RATING_CENTER) / RATING_SCALE, the rating as the parameter functions read it. A single rating stays a
    float (the fair-play reference, once per move): no array round trip."""
    return ((ratings if isinstance(ratings, float) else np.asarray(ratings, dtype=float)) - RATING_CENTER) / RATING_SCALE


def log_s_and_c(a: Sequence[float], b: Sequence[float], ratings: np.ndarray | float,
                offset: np.ndarray | float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """The move model's parameters at ``ratings``: log s = a0 + a1 z + a2 z^2 + offset, c = exp(b0 + b1 z)."""
    z = rating_z(ratings)
    return a[0] + a[1] * z + a[2] * z * z + offset, np.exp(b[0] + b[1] * z)


def choice_loglik(log_d: np.ndarray, played: int | np.ndarray, log_s: np.ndarray, c: np.ndarray,
                  extra: np.ndarray | None = None) -> np.ndarray:
    """log P(played) under P(i) proportional to exp(-(delta_i / s)^c), for any broadcastable batch: ``log_d``
    (..., candidates) holds log delta (-inf for the best move's 0; +inf pads a missing candidate), ``log_s`` and ``c``
    the batch's parameters, ``played`` one index for all or one per row. ``extra`` (broadcast to the batch x
    candidates) adds a term of a candidate's own to its exponent (bench/depth_signal.py's bonus for a deeper choice)."""
    # (delta / s)^c = exp(c (log delta - log s)): one exp over the batch x candidates
    with np.errstate(over="ignore"):
        x = -np.exp(c[..., None] * (log_d - log_s[..., None]))
    if extra is not None:
        x = x + extra
    chosen = x[..., played] if isinstance(played, int) else np.take_along_axis(x, played[..., None], axis=-1)[..., 0]
    # every x <= 0 and the best move's is 0, so the log-sum-exp needs no shift (an ``extra`` of a few units keeps it so)
    # einsum sums the short candidate axis ~3x faster than .sum(axis=-1)
    return chosen - np.log(np.einsum("...j->...", np.exp(x)))


class Prior(NamedTuple):
    """A normal prior over the rating (a named tuple: built per move on the player step, like
    :class:`~analyzers.perceived.RatingEstimate`)."""

    mean: float
    sd: float

    def log_density(self, grid: np.ndarray = RATING_GRID) -> np.ndarray:
        """The log density up to a constant, read at an sd of one grid step at least: a narrower prior (a declared RD
        or an event prior of a few Elo) would put its mass on the nearest grid point, and the estimate would snap to
        it (up to half a step from the prior's mean) with an interval one cell wide, narrower than the grid can tell."""
        return -0.5 * ((grid - self.mean) / max(self.sd, RATING_STEP)) ** 2


#: How many priors' log densities :meth:`MoveModel.posteriors` keeps (1.2 KB each).
PRIOR_ROWS_KEPT = 4096

#: A prior that adds nothing: the posterior is the (tempered, convolved) likelihood alone.
FLAT_PRIOR = Prior(0.0, math.inf)


@dataclass(frozen=True)
class MoveModel:
    """The fitted move model of one engine profile and the corrections of its posterior (see the module docstring)."""

    profile: str
    a: tuple[float, float, float]                   # log s = a0 + a1 z + a2 z^2 (+ the class offset)
    b: tuple[float, float]                          # log c = b0 + b1 z
    class_offsets: dict[str, float]                 # a_t per time-control class; unknown: the fitting moves' mean (0 if absent)
    priors: dict[str, Prior]                        # population prior per class, and "unknown" (all of rated-dev)
    temperature: float = 1.0
    person_sd: float = 0.0
    clock: tuple[float, float] = (0.0, 0.0)          # (k_left, k_spent): the clock inputs' weights in log s
    fitted_on: str = ""
    command: str = ""
    provisional: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    #: derived arrays (grid parameters per class, the person-effect kernel), computed once
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    # -- the move model ---------------------------------------------------------------------------------
    def params(self, ratings: np.ndarray | float, tclass: str) -> tuple[np.ndarray, np.ndarray]:
        """(s, c) at each rating (or at one, a float) for class ``tclass``."""
        log_s, c = log_s_and_c(self.a, self.b, ratings, self.class_offsets.get(tclass, 0.0))
        return np.exp(log_s), c

    def clock_shift(self, inputs: Sequence[float]) -> float:
        """The clock's term in log s: k_left x_left + k_spent x_spent for the (x_left, x_spent) of :func:`clock_inputs`."""
        return self.clock[0] * inputs[0] + self.clock[1] * inputs[1]

    def move_loglik(self, deltas: np.ndarray, played: int, tclass: str, shift: float = 0.0) -> np.ndarray:
        """log P(played | R, tclass) at every rating of :data:`RATING_GRID`; ``shift`` adds to log s (the clock's
        term, :meth:`clock_shift`)."""
        # choice_loglik's numbers for one move, laid out candidates x grid (the sum over candidates adds whole rows)
        # with c log s kept per class: fewer numpy calls on the player step's path
        c, c_log_s = self._choice_params(tclass)
        with np.errstate(divide="ignore", over="ignore"):
            t = np.multiply.outer(np.log(deltas), c)  # c log delta; the best move's 0 gives -inf: (0 / s)^c = 0
            t -= c_log_s + shift * c if shift else c_log_s
            x = np.negative(np.exp(t, out=t), out=t)  # -(delta / s)^c
            chosen = x[played].copy()
            return chosen - np.log(np.exp(x, out=x).sum(axis=0))

    def _choice_params(self, tclass: str) -> tuple[np.ndarray, np.ndarray]:
        """(c, c log s) on the grid for ``tclass``, computed once."""
        key = f"c, c log s:{tclass}"
        hit = self._cache.get(key)
        if hit is None:
            log_s, c = self._grid_params(tclass)
            hit = self._cache[key] = (c, c * log_s)
        return hit

    def _grid_params(self, tclass: str) -> tuple[np.ndarray, np.ndarray]:
        """(log s, c) on the grid for ``tclass``, computed once."""
        key = f"params:{tclass}"
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = log_s_and_c(self.a, self.b, RATING_GRID, self.class_offsets.get(tclass, 0.0))
        return hit

    # -- estimates ----------------------------------------------------------------------------------------
    def prior_for(self, tclass: str) -> Prior:
        return self.priors.get(tclass) or self.priors[UNKNOWN_CLASS]

    def estimate(self, loglik: np.ndarray, n: int, prior: Prior, level: float = DEFAULT_LEVEL) -> RatingEstimate:
        """The posterior mean and central interval at ``level`` of the rating, from a scope's summed log-likelihood
        over ``n`` moves and a prior."""
        post = self.posterior(loglik, prior)
        return summarise(post, n, level)

    def posterior(self, loglik: np.ndarray, prior: Prior) -> np.ndarray:
        """Normalised posterior over :data:`RATING_GRID`: prior x (tempered likelihood convolved with the person
        effect)."""
        return self.posteriors(loglik, (prior,))[0]

    def posteriors(self, loglik: np.ndarray | None, priors: Sequence[Prior]) -> np.ndarray:
        """:meth:`posterior` under several priors, one row each; the likelihood is tempered and convolved once.
        ``loglik`` None: no move yet, each prior itself on the grid."""
        if loglik is None:
            post = self._prior_densities(priors, log=False)
            post /= post.sum(axis=1, keepdims=True)
            return post
        ll = loglik if self.temperature == 1.0 else self.temperature * loglik
        # all priors at once: one (priors x grid) array, a handful of numpy calls whatever their number
        if self.person_sd > 0:
            # the person effect spreads the likelihood as wide as its kernel, so prior density x likelihood can be
            # taken as it is, without logs, unless the prior sits where the likelihood is nothing (then in log space)
            like = np.exp(ll - ll.max()) @ self._kernel()
            post = self._prior_densities(priors, log=False)
            post *= like
            total = post.sum(axis=1, keepdims=True)
            if total.min() > 1e-200:
                post /= total
                return post
            ll = np.log(np.maximum(like, 1e-300))
        log_post = self._prior_densities(priors, log=True)
        log_post += ll
        log_post -= log_post.max(axis=1, keepdims=True)
        post = np.exp(log_post, out=log_post)
        post /= post.sum(axis=1, keepdims=True)
        return post

    def _prior_densities(self, priors: Sequence[Prior], log: bool) -> np.ndarray:
        """The priors' densities (scaled to peak 1) or log densities stacked (priors x grid), a new array. Each row
        is kept per (mean, sd): a scope publishes under the same class and declared priors move after move (an event
        prior changes as its event's games come in, so a cache of whole stacks would miss)."""
        rows: dict[tuple[float, float, bool], np.ndarray] = self._cache.setdefault("prior rows", {})
        stack = []
        for prior in priors:
            key = (prior.mean, prior.sd, log)
            row = rows.get(key)
            if row is None:
                if len(rows) >= PRIOR_ROWS_KEPT:  # declared ratings and event priors are many: keep it bounded
                    rows.clear()
                row = rows[key] = prior.log_density() if log else np.exp(prior.log_density())
            stack.append(row)
        return np.array(stack)

    def _kernel(self) -> np.ndarray:
        """The person-effect convolution as a grid x grid matrix: ``like @ K`` equals ``np.convolve(like, k,
        "same")`` for the normal kernel k cut at +/- 3 sd (99.7 % of it), and one matrix product costs half as much."""
        K = self._cache.get("kernel")
        if K is None:
            step = float(RATING_GRID[1] - RATING_GRID[0])
            half = int(math.ceil(3 * self.person_sd / step))
            x = np.arange(-half, half + 1) * step
            k = np.exp(-0.5 * (x / self.person_sd) ** 2)
            k /= k.sum()
            n = RATING_GRID.size
            offset = np.arange(n)[None, :] - np.arange(n)[:, None]  # K[i, j] = k[half + j - i]
            K = np.where(np.abs(offset) <= half, k[np.clip(offset + half, 0, 2 * half)], 0.0)
            self._cache["kernel"] = K
        return K

    # -- file -----------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        # field by field: asdict would also deep-copy the derived cache, whose keys hold Prior tuples
        d = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self) if f.name != "_cache"}
        d["priors"] = {k: v._asdict() for k, v in self.priors.items()}
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MoveModel:
        try:
            priors = {k: Prior(float(v["mean"]), float(v["sd"])) for k, v in d["priors"].items()}
            if UNKNOWN_CLASS not in priors:
                raise KeyError(f"priors[{UNKNOWN_CLASS!r}]")
            return cls(
                profile=d["profile"], a=(float(d["a"][0]), float(d["a"][1]), float(d["a"][2])),
                b=(float(d["b"][0]), float(d["b"][1])),
                class_offsets={k: float(v) for k, v in d.get("class_offsets", {}).items()}, priors=priors,
                temperature=float(d.get("temperature", 1.0)), person_sd=float(d.get("person_sd", 0.0)),
                clock=(float(d.get("clock", (0, 0))[0]), float(d.get("clock", (0, 0))[1])),
                fitted_on=d.get("fitted_on", ""), command=d.get("command", ""),
                provisional=bool(d.get("provisional", True)), extra=dict(d.get("extra", {})),
            )
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise CalibrationError(f"malformed move model: {e!r}") from e

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")


class RatingLikelihood:
    """A scope's summed log P(played | R) over :data:`RATING_GRID` and the number of moves in it: O(grid) per move.

    Kept apart from any prior, so the moves-only and the performance estimates come from the same state."""

    __slots__ = ("ll", "n", "tclass")

    def __init__(self, ll: np.ndarray | None = None, n: int = 0, tclass: str = UNKNOWN_CLASS) -> None:
        self.ll = ll
        self.n = n
        self.tclass = tclass  # the class of the last move added: its population prior is the one applied

    def add(self, move_ll: np.ndarray, tclass: str) -> None:
        self.ll = move_ll.copy() if self.ll is None else self.ll + move_ll
        self.n += 1
        self.tclass = tclass

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON; the array is little-endian float64 in base64 (exact)."""
        return {"n": self.n, "tclass": self.tclass,
                "ll_f64": base64.b64encode(np.ascontiguousarray(self.ll, dtype="<f8").tobytes()).decode()
                if self.ll is not None else None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RatingLikelihood:
        raw = d.get("ll_f64")
        ll = np.frombuffer(base64.b64decode(raw), dtype="<f8").astype(float) if raw else None
        if ll is not None and ll.shape != RATING_GRID.shape:
            raise CalibrationError(f"stored rating likelihood has {ll.size} points; this kibitz's grid has {RATING_GRID.size}")
        return cls(ll, int(d.get("n", 0)), str(d.get("tclass", UNKNOWN_CLASS)))


def summarise(post: np.ndarray, n: int, level: float = DEFAULT_LEVEL) -> RatingEstimate:
    """Mean and central ``level`` interval of a posterior over :data:`RATING_GRID` (interpolated quantiles)."""
    return PosteriorSummaries(post[None, :], n).at(0, (level,))[0]


class PosteriorSummaries:
    """:func:`summarise` of the rows of a (posteriors x grid) array, as :meth:`MoveModel.posteriors` returns, at any
    levels: every row's mean and cumulative sum in one numpy pass, then the quantiles of the rows asked for."""

    __slots__ = ("cdf", "means", "n")

    def __init__(self, posts: np.ndarray, n: int) -> None:
        self.means: list[float] = (posts @ RATING_GRID).tolist()
        self.cdf = edge_cdf(posts)  # at RATING_EDGES
        self.n = n

    def at(self, row: int, levels: Sequence[float]) -> list[RatingEstimate]:
        """Mean and central interval at each of ``levels`` of posterior ``row`` (:mod:`.gridstats`)."""
        q = central_quantiles(self.cdf[row], RATING_EDGES, levels)
        mean = self.means[row]
        return [RatingEstimate(mean, q[2 * i], q[2 * i + 1], self.n, lv) for i, lv in enumerate(levels)]


def load_move_model(profile: str, path: str | Path | None = None) -> MoveModel | None:
    """The shipped move model of ``profile`` (``analyzers/calibrations/<profile>.model.json``), or None if there is
    none; a file given by ``path`` must exist."""
    d = read_fitted(f"{profile}.model.json", path)
    return MoveModel.from_dict(d) if d is not None else None


__all__ = [
    "BAND_LEVEL", "DEFAULT_DECLARED_RD", "FLAT_PRIOR", "MoveModel", "PosteriorSummaries", "Prior", "RATING_GRID", "RatingLikelihood",
    "TIME_CLASSES", "UNKNOWN_CLASS",
    "choice_loglik", "class_from_clock", "clock_inputs", "log_s_and_c", "load_move_model", "parse_time_control", "summarise",
    "time_class", "win_losses", "win_probability",
]
