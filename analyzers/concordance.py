"""Concordance between two orderings: Kendall's tau_a (Gomboc 2004; docs/models.md s. 6).

tau_a = (concordant - discordant) / (m (m - 1) / 2); a pair tied in either ordering counts as neither but stays
in the denominator. (scipy's default, tau_b, divides by a tie-corrected denominator: a different number.)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


def _count_inversions(a: np.ndarray) -> int:
    """Number of pairs i < j with a[i] > a[j] (strictly): a bottom-up merge sort, one vectorised pass per level.

    Before level w every block of w elements is sorted. A stable sort of (block of 2w, value) keys merges each
    block's two sorted halves; numpy's stable sort (timsort) finds the two runs, so a level costs O(n) and the whole
    count O(n log n). In the merged block, a right-half element's position minus its position within the right half
    is the number of left-half elements <= it (the stable sort puts equal left elements first), so it forms
    ``w - that`` inversions with the left half. Each inverted pair is counted once, at the level where its two
    elements first meet.
    """
    n = a.size
    _, cur = np.unique(a, return_inverse=True)       # dense ranks: keys stay small integers
    cur = cur.astype(np.int64)
    stride = np.int64(n + 1)
    idx = np.arange(n, dtype=np.int64)
    inv = 0
    w = 1
    while w < n:
        start = (idx // (2 * w)) * (2 * w)
        order = np.argsort(start * stride + cur, kind="stable")
        pos = np.empty(n, dtype=np.int64)
        pos[order] = idx                              # where each element lands in the merged order
        right = idx - start >= w
        left_le = (pos[right] - start[right]) - (idx[right] - start[right] - w)
        inv += int((w - left_le).sum())
        cur = cur[order]
        w *= 2
    return inv


def _tied_pairs(*cols: np.ndarray) -> int:
    """Pairs equal in every given column."""
    _, counts = np.unique(np.stack(cols, axis=1), axis=0, return_counts=True)
    return int((counts * (counts - 1) // 2).sum())


def kendall_tau_a(x: npt.ArrayLike, y: npt.ArrayLike) -> float:
    """Kendall's tau_a between ``x`` and ``y`` in O(n log n): sorts, tie counts and one inversion count."""
    xa = np.asarray(x, dtype=float)
    ya = np.asarray(y, dtype=float)
    if xa.shape != ya.shape or xa.ndim != 1:
        raise ValueError("x and y must be 1-d and of equal length")
    m = xa.size
    if m < 2:
        raise ValueError("need at least two pairs")
    total = m * (m - 1) // 2
    tx = _tied_pairs(xa)
    ty = _tied_pairs(ya)
    txy = _tied_pairs(xa, ya)
    # sort by x then y; discordant pairs are then strict inversions in y among pairs not tied in x
    order = np.lexsort((ya, xa))
    discordant = _count_inversions(ya[order])
    untied = total - tx - ty + txy
    concordant = untied - discordant
    return (concordant - discordant) / total


def kendall_tau_a_naive(x: Sequence[float], y: Sequence[float]) -> float:
    """The O(n^2) definition, for tests."""
    m = len(x)
    s = 0
    for i in range(m):
        for j in range(i + 1, m):
            a = int(x[i] > x[j]) - int(x[i] < x[j])
            b = int(y[i] > y[j]) - int(y[i] < y[j])
            s += a * b
    return s / (m * (m - 1) / 2)
