"""Central intervals of a distribution held as masses at the points of a uniform grid (docs/models.md s. 9).

Every posterior kibitz keeps is such a grid: the rating's (:mod:`.ratingmodel`), the skill parameter c's
(:mod:`.posterior`), a Go rank's (:mod:`.gorate`). A point's mass stands for its *cell*, the interval between the
midpoints to its neighbours, spread evenly over it: the mean is the points' weighted mean, and the cumulative mass
up to a point is reached at its cell's upper edge, so a quantile is interpolated linearly between cell edges. Read at
the points themselves, every quantile would sit half a grid step low.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["cell_edges", "central_interval", "central_quantiles", "edge_cdf"]


def cell_edges(grid: np.ndarray, lo: float = -np.inf, hi: float = np.inf) -> np.ndarray:
    """The ``len(grid) + 1`` edges of the cells of a uniform, increasing ``grid``; the outer ones half a step beyond
    the end points, but not past a hard bound of the support (``lo``, ``hi``)."""
    half = (grid[1] - grid[0]) / 2 if grid.size > 1 else 0.5
    return np.concatenate(([max(grid[0] - half, lo)], (grid[1:] + grid[:-1]) / 2, [min(grid[-1] + half, hi)]))


def edge_cdf(p: np.ndarray) -> np.ndarray:
    """The cumulative mass at each cell edge of masses ``p`` (the last axis): 0 at the first, the total at the last."""
    out = np.zeros(p.shape[:-1] + (p.shape[-1] + 1,))
    p.cumsum(axis=-1, out=out[..., 1:])
    return out


def central_quantiles(cdf: np.ndarray, edges: np.ndarray, levels: Sequence[float]) -> list[float]:
    """The ends of the central intervals at ``levels`` of one distribution: (low, high) for each level in turn,
    read off its cumulative mass at the cell edges (:func:`edge_cdf`, normalised to 1)."""
    tails = [(1.0 - lv) / 2.0 for lv in levels]
    q: list[float] = np.interp([x for t in tails for x in (t, 1.0 - t)], cdf, edges).tolist()
    return q


def central_interval(p: np.ndarray, grid: np.ndarray, level: float, lo: float = -np.inf,
                     hi: float = np.inf) -> tuple[float, float]:
    """The central ``level`` interval of normalised masses ``p`` on ``grid`` (support bounded by ``lo``, ``hi``)."""
    low, high = central_quantiles(edge_cdf(p), cell_edges(grid, lo, hi), (level,))
    return low, high
