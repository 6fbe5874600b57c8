"""Concordance between two orderings: Kendall's tau_a (Gomboc 2004; REFERENCES.md section 5).

tau_a = (concordant - discordant) / (m (m - 1) / 2); a pair tied in either ordering counts as neither but stays
in the denominator. (scipy's default, tau_b, divides by a tie-corrected denominator: a different number.)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _count_inversions(a: np.ndarray) -> int:
    """Number of pairs i < j with a[i] > a[j] (strictly), in O(n log^2 n) with one vectorised pass per level.

    At level w the array is cut into blocks of 2w; each element of a block's right half counts the elements of
    its left half that are strictly greater. Every inverted pair is counted at exactly one level: the one where
    the two elements first fall into different halves of the same block.
    """
    n = a.size
    # dense ranks so that (block, rank) packs into one sortable integer key
    _, rank = np.unique(a, return_inverse=True)
    rank = rank.astype(np.int64)
    stride = np.int64(n + 1)
    idx = np.arange(n, dtype=np.int64)
    inv = 0
    w = 1
    while w < n:
        block = idx // (2 * w)
        right = (idx // w) % 2 == 1
        left_keys = np.sort(block[~right] * stride + rank[~right])
        rb, rr = block[right], rank[right]
        end_of_block = np.searchsorted(left_keys, (rb + 1) * stride, side="left")
        upto = np.searchsorted(left_keys, rb * stride + rr, side="right")
        inv += int((end_of_block - upto).sum())
        w *= 2
    return inv


def _tied_pairs(*cols: np.ndarray) -> int:
    """Pairs equal in every given column."""
    _, counts = np.unique(np.stack(cols, axis=1), axis=0, return_counts=True)
    return int((counts * (counts - 1) // 2).sum())


def kendall_tau_a(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau_a between ``x`` and ``y`` in O(n log n)."""
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
