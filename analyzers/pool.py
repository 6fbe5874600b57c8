"""Pool ratings from game results, the way Ordo computes them (docs/models.md s. 5).

White's expected score is ``f = 1 / (1 + exp(-beta (R_w - R_b + W)))`` with ``beta = ln(0.76 / 0.24) / scale``
(a ``scale``-point gap is a 76 % expectancy). :func:`fit_pool` finds the maximum-likelihood ratings (draws as half
points), where every player's expected points equal their points, by Newton's method; the mean rating is fixed to
``average`` unless ``anchors`` pin ratings. The white advantage ``W`` can be fitted jointly ("auto"), which makes
White's expected points equal White's points. Error bars come from simulating every game from the fitted model
(wins, draws and losses by the draw model below) and refitting.

Draw model: between players with expected score p, ``D = nu sqrt(W L)`` with ``nu = 2 Deq / (1 - Deq)`` and
``W + D / 2 = p``, ``W + D + L = 1``; Deq is the draw rate between equal players.

Maximum likelihood has no finite answer when a player won or lost every game, or when the pool is not strongly
connected (some group scored nothing at all against the rest, or groups never met): those raise
:class:`~analyzers.errors.UnratablePool` naming the players or groups, instead of inventing a number.
:func:`purge_perfect` sets perfect scores aside first, as Ordo does, so the rest of the pool can be rated.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from .errors import ConvergenceError, UnratablePool
from .perceived import DEFAULT_LEVEL, z_for

#: Ordo's default: a 202-point gap is a 76 % expectancy.
DEFAULT_SCALE = 202.0
DEFAULT_AVERAGE = 2300.0
DEFAULT_DRAW_RATE = 0.5
_MAX_NEWTON = 100
_MAX_STEP = 400.0


def beta_for(scale: float = DEFAULT_SCALE) -> float:
    return math.log(0.76 / 0.24) / scale


def expectancy_to_points(p: float, scale: float = DEFAULT_SCALE) -> float:
    """Rating gap that gives an expected score ``p`` (Ordo's expectancy table)."""
    return math.log(p / (1.0 - p)) / beta_for(scale)


def points_to_expectancy(d: float, scale: float = DEFAULT_SCALE) -> float:
    return 1.0 / (1.0 + math.exp(-beta_for(scale) * d))


def draw_probability(p: np.ndarray | float, draw_rate: float) -> np.ndarray | float:
    """D for an expected score p under the draw model with draw rate ``draw_rate`` between equals.

    Solves D^2 (1 - nu^2/4) + D nu^2/2 - nu^2 p (1 - p) = 0 for its root in [0, 1].
    """
    if not 0.0 < draw_rate < 1.0:
        raise ValueError("draw rate must be in (0, 1)")
    nu2 = (2.0 * draw_rate / (1.0 - draw_rate)) ** 2
    a = 1.0 - nu2 / 4.0
    b = nu2 / 2.0
    c = -nu2 * np.asarray(p) * (1.0 - np.asarray(p))
    if abs(a) < 1e-12:
        return -c / b
    disc = np.sqrt(b * b - 4.0 * a * c)
    # the numerically stable form of the root that is 0 at p = 0 or 1
    return (-2.0 * c) / (b + disc)


def wdl(p: float, draw_rate: float) -> tuple[float, float, float]:
    """(win, draw, loss) probabilities for an expected score ``p``."""
    d = float(draw_probability(p, draw_rate))
    return p - d / 2.0, d, 1.0 - p - d / 2.0


@dataclass
class PoolResult:
    """The fitted pool. ``errors`` are half-widths at ``level`` (empty without simulations)."""

    ratings: dict[Hashable, float]
    points: dict[Hashable, float]
    games: dict[Hashable, int]
    white_advantage: float
    draw_rate: float
    errors: dict[Hashable, float] = field(default_factory=dict)
    cfs: dict[tuple[Hashable, Hashable], float] = field(default_factory=dict)
    simulations: int = 0
    level: float = DEFAULT_LEVEL

    def ranking(self) -> list[Hashable]:
        return sorted(self.ratings, key=lambda p: -self.ratings[p])


def _strong_components(n: int, edges: set[tuple[int, int]]) -> list[list[int]]:
    """Strongly connected components (Kosaraju, iterative)."""
    fwd: list[list[int]] = [[] for _ in range(n)]
    rev: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        fwd[a].append(b)
        rev[b].append(a)
    order: list[int] = []
    seen = [False] * n
    for s in range(n):
        if seen[s]:
            continue
        stack = [(s, iter(fwd[s]))]
        seen[s] = True
        while stack:
            v, it = stack[-1]
            for w in it:
                if not seen[w]:
                    seen[w] = True
                    stack.append((w, iter(fwd[w])))
                    break
            else:
                order.append(v)
                stack.pop()
    comp = [-1] * n
    comps: list[list[int]] = []
    for s in reversed(order):
        if comp[s] >= 0:
            continue
        comps.append([])
        stack2 = [s]
        comp[s] = len(comps) - 1
        while stack2:
            v = stack2.pop()
            comps[-1].append(v)
            for w in rev[v]:
                if comp[w] < 0:
                    comp[w] = comp[s]
                    stack2.append(w)
    return comps


#: The groups an unratable pool's error names (the largest first); every group is in its ``components``.
SHOWN_GROUPS = 5


def _check_ratable(names: list[Hashable], wi: np.ndarray, bi: np.ndarray, s: np.ndarray, anchored: set[int]) -> None:
    n = len(names)
    pts = np.bincount(wi, s, n) + np.bincount(bi, 1.0 - s, n)
    cnt = np.bincount(wi, minlength=n) + np.bincount(bi, minlength=n)
    perfect = [names[i] for i in range(n) if i not in anchored and (pts[i] == 0 or pts[i] == cnt[i])]
    if perfect:
        raise UnratablePool(f"perfect scores cannot be rated by maximum likelihood: {perfect}", perfect=[str(p) for p in perfect])
    # i -> j when i took points from j; a finite MLE needs every group to take points from every other
    edges: set[tuple[int, int]] = set()
    for w, b, x in zip(wi.tolist(), bi.tolist(), s.tolist()):
        if x > 0:
            edges.add((w, b))
        if x < 1:
            edges.add((b, w))
    comps = _strong_components(n, edges)
    if len(comps) > 1:
        # with anchors, each group may be pinned by an anchor of its own
        if anchored and all(any(i in anchored for i in c) for c in comps):
            return
        groups = sorted(([names[i] for i in c] for c in comps), key=len, reverse=True)
        shown = groups[:SHOWN_GROUPS]  # the largest: a pool of several events may split into a hundred
        more = f" | and {len(groups) - len(shown)} more groups" if len(groups) > len(shown) else ""
        raise UnratablePool(
            f"the pool splits into {len(groups)} groups that did not all take points off each other (rate each event "
            f"apart, or pin a player of each group with an anchor): "
            # names are often "Last, First": players apart by "; ", groups by " | "
            + " | ".join(f"{len(g)} players: " + "; ".join(map(str, g[:5])) + (" ..." if len(g) > 5 else "") for g in shown)
            + more,
            components=[[str(p) for p in g] for g in groups],
        )


def _newton(
    n: int, wi: np.ndarray, bi: np.ndarray, s: np.ndarray, beta: float, *,
    start: np.ndarray, w0: float, fit_w: bool, anchored: dict[int, float], average: float,
) -> tuple[np.ndarray, float]:
    r = start.copy()
    for i, v in anchored.items():
        r[i] = v
    w = w0
    free = np.array([i for i in range(n) if i not in anchored], dtype=np.int64)
    m = free.size + (1 if fit_w else 0)
    if m == 0:  # every player anchored and White's advantage given: nothing left to fit
        return r, w
    gauge = not anchored
    for _ in range(_MAX_NEWTON):
        with np.errstate(over="ignore"):  # a fit running off to infinity (it then fails to converge): exp -> inf, f -> 0
            f = 1.0 / (1.0 + np.exp(-beta * (r[wi] - r[bi] + w)))
        res = s - f
        h = beta * beta * f * (1.0 - f)
        grad_r = beta * (np.bincount(wi, res, n) - np.bincount(bi, res, n))
        hess = np.zeros((n + 1, n + 1))
        add_at: Any = np.add.at  # numpy's stubs reject a tuple of an int and an index array, which it accepts
        add_at(hess, (wi, wi), h)
        add_at(hess, (bi, bi), h)
        add_at(hess, (wi, bi), -h)
        add_at(hess, (bi, wi), -h)
        add_at(hess, (n, wi), h)
        add_at(hess, (n, bi), -h)
        add_at(hess, (wi, n), h)
        add_at(hess, (bi, n), -h)
        hess[n, n] = h.sum()
        idx = np.concatenate((free, [n])) if fit_w else free
        grad = np.concatenate((grad_r, [beta * res.sum()]))[idx]
        a = hess[np.ix_(idx, idx)]
        try:
            if gauge:  # KKT system: sum of rating steps is 0, so the mean stays where it is
                k = np.zeros((m + 1, m + 1))
                k[:m, :m] = a
                k[:free.size, m] = 1.0
                k[m, :free.size] = 1.0
                step = np.linalg.solve(k, np.concatenate((grad, [0.0])))[:m]
            else:
                step = np.linalg.solve(a, grad)
        except np.linalg.LinAlgError:
            # the ratings of a connected pool without perfect scores are determined (_check_ratable); White's
            # advantage is not when every pairing's games give White to the same player (one game between two)
            raise UnratablePool("these games cannot tell White's advantage from the players' ratings (each pair "
                                "played with the same colours): give White's advantage a value instead of fitting it"
                                if fit_w else "the pool's ratings are not determined by its games") from None
        big = np.abs(step).max()
        if big > _MAX_STEP:
            step *= _MAX_STEP / big
        r[free] += step[: free.size]
        if fit_w:
            w += step[-1]
        if big < 1e-9:
            break
    else:
        raise ConvergenceError("pool fit did not converge" + (
            ": with White's advantage fitted, the games may not pin it (a few games, White's results one-sided); give it "
            "a value instead" if fit_w else ""))
    if gauge:
        r += average - r.mean()
    return r, w


def _fit_draw_rate(p: np.ndarray, draws: float) -> float:
    """Deq such that the expected number of draws equals the observed one (bisection; monotone in Deq)."""
    lo, hi = 1e-6, 1.0 - 1e-6
    if draws <= float(np.sum(draw_probability(p, lo))):
        return lo
    if draws >= float(np.sum(draw_probability(p, hi))):
        return hi
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if float(np.sum(draw_probability(p, mid))) < draws:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def purge_perfect(games: Sequence[tuple[Hashable, Hashable, float]], anchored: Sequence[Hashable] = ()
                  ) -> tuple[list[tuple[Hashable, Hashable, float]], dict[Hashable, tuple[float, int]]]:
    """The games left once every player who won or lost all their games is set aside, repeatedly (a player's other
    results may become perfect once such a player's games are gone), as Ordo purges them; and the players set aside
    with their (points, games) in the whole pool. Anchored players stay: an anchor pins a rating a score cannot."""
    points = _scores(games)
    keep = list(games)
    purged: dict[Hashable, tuple[float, int]] = {}
    pinned = set(anchored)
    tally = points
    while keep:
        perfect = [p for p, (pts, n) in tally.items() if p not in pinned and (pts == 0 or pts == n)]  # in game order
        if not perfect:
            break
        purged |= {p: points[p] for p in perfect}
        keep = [g for g in keep if g[0] not in purged and g[1] not in purged]
        tally = _scores(keep)
    return keep, purged


def _scores(games: Sequence[tuple[Hashable, Hashable, float]]) -> dict[Hashable, tuple[float, int]]:
    """Each player's (points, games) in ``games``, in the order they first appear."""
    out: dict[Hashable, tuple[float, int]] = {}
    for w, b, x in games:
        for p, got in ((w, x), (b, 1.0 - x)):
            pts, n = out.get(p, (0.0, 0))
            out[p] = (pts + got, n + 1)
    return out


def fit_pool(
    games: Sequence[tuple[Hashable, Hashable, float]],
    *,
    average: float = DEFAULT_AVERAGE,
    anchors: Mapping[Hashable, float] | None = None,
    white_advantage: float | str = 0.0,
    draw_rate: float | str = DEFAULT_DRAW_RATE,
    scale: float = DEFAULT_SCALE,
    simulations: int = 0,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
) -> PoolResult:
    """Fit ratings to ``games`` = (white, black, white's score in {0, 0.5, 1}) triples; see the module docstring."""
    if not games:
        raise UnratablePool("no games")
    names: list[Hashable] = []
    index: dict[Hashable, int] = {}
    for w, b, _ in games:
        for p in (w, b):
            if p not in index:
                index[p] = len(names)
                names.append(p)
    n = len(names)
    wi = np.array([index[w] for w, _, _ in games], dtype=np.int64)
    bi = np.array([index[b] for _, b, _ in games], dtype=np.int64)
    s = np.array([float(x) for _, _, x in games])
    if np.any((s < 0) | (s > 1)):
        raise ValueError("scores must be in [0, 1]")
    anchored = {index[k]: float(v) for k, v in (anchors or {}).items() if k in index}
    if anchors and not anchored:
        raise UnratablePool("none of the anchors played in this pool")
    _check_ratable(names, wi, bi, s, set(anchored))
    fit_w = white_advantage == "auto"
    w0 = 0.0 if fit_w else float(white_advantage)
    beta = beta_for(scale)
    r, w = _newton(n, wi, bi, s, beta, start=np.full(n, average), w0=w0, fit_w=fit_w, anchored=anchored, average=average)
    p = 1.0 / (1.0 + np.exp(-beta * (r[wi] - r[bi] + w)))
    deq = _fit_draw_rate(p, float(np.sum(s == 0.5))) if draw_rate == "auto" else float(draw_rate)
    pts = np.bincount(wi, s, n) + np.bincount(bi, 1.0 - s, n)
    cnt = np.bincount(wi, minlength=n) + np.bincount(bi, minlength=n)
    result = PoolResult(
        ratings={names[i]: float(r[i]) for i in range(n)},
        points={names[i]: float(pts[i]) for i in range(n)},
        games={names[i]: int(cnt[i]) for i in range(n)},
        white_advantage=float(w), draw_rate=deq, level=level,
    )
    if simulations > 0:
        _simulate(result, names, wi, bi, p, r, w, deq, beta, simulations, seed, anchored, fit_w, average, level)
    return result


def _simulate(result, names, wi, bi, p, r, w, deq, beta, simulations, seed, anchored, fit_w, average, level) -> None:
    rng = np.random.default_rng(seed)
    n = len(names)
    d = np.asarray(draw_probability(p, deq))
    pw = p - d / 2.0
    fits = []
    for _ in range(simulations):
        u = rng.random(p.size)
        sim = np.where(u < pw, 1.0, np.where(u < pw + d, 0.5, 0.0))
        try:
            _check_ratable(names, wi, bi, sim, set(anchored))
            rr, _ = _newton(n, wi, bi, sim, beta, start=r, w0=w, fit_w=fit_w, anchored=anchored, average=average)
        except (UnratablePool, ConvergenceError):
            continue  # a simulated pool with a perfect score has no MLE; it says nothing about the spread
        fits.append(rr)
    if len(fits) < 2:
        return
    sims = np.array(fits)
    z = z_for(level)
    sd = sims.std(axis=0, ddof=1)
    result.errors = {names[i]: float(z * sd[i]) for i in range(n)}
    result.simulations = len(fits)
    phi = NormalDist().cdf
    for i in range(n):
        for j in range(n):
            if i != j:
                diff_sd = float((sims[:, i] - sims[:, j]).std(ddof=1))
                dr = r[i] - r[j]
                result.cfs[(names[i], names[j])] = phi(dr / diff_sd) if diff_sd > 0 else float(dr > 0)
