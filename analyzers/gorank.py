"""Go ranks on a numeric scale, and back to kyu/dan for display.

kibitz rates Go on a rating scale with the European Go Federation's anchor points (GoR): 100 points a rank, 1 dan at
2100, so 1 kyu is 2000, 10 kyu 1100, 20 kyu 100, 9 dan 2900. Professional ranks (a Fox "P" or an "Np" rank) sit above
9 dan at 2900 + 30 x N, a display convention: a professional dan is far finer than an amateur one, and no
calibration here has enough of them to fit it. Ratings are published on this scale, with a kyu/dan label from
:func:`rank_label`.

Ranks as servers write them: ``3k``, ``18级`` (kyu), ``5d``, ``9段`` (dan), ``P9段`` or ``9p`` (pro); a trailing
``?`` (uncertain rank) or ``*`` is ignored.
"""

from __future__ import annotations

import re

#: 1 dan, and the points per rank.
DAN_1, PER_RANK = 2100.0, 100.0
PRO_BASE, PER_PRO = 2900.0, 30.0

_RANK = re.compile(r"^\s*(?P<pro>P)?(?P<n>\d{1,2})\s*(?P<unit>k|kyu|級|级|d|dan|段|p|pro)\s*[?*]?\s*$", re.IGNORECASE)


def parse_rank(text: str) -> float:
    """The rating of a rank string ("3k", "5d", "9段", "18级", "P9段", "9p"). Raises :class:`ValueError`."""
    m = _RANK.match(text or "")
    if not m:
        raise ValueError(f"not a Go rank: {text!r}")
    n, unit = int(m["n"]), m["unit"].lower()
    if m["pro"] or unit in ("p", "pro"):
        if not 1 <= n <= 9:
            raise ValueError(f"not a professional rank: {text!r}")
        return PRO_BASE + PER_PRO * n
    if unit in ("k", "kyu", "級", "级"):
        if not 1 <= n <= 30:
            raise ValueError(f"not a kyu rank: {text!r}")
        return DAN_1 - PER_RANK * n
    if not 1 <= n <= 9:
        raise ValueError(f"not an amateur dan rank: {text!r}")
    return DAN_1 + PER_RANK * (n - 1)


def rank_label(rating: float) -> str:
    """The nearest amateur rank of a rating: "3k", "1d", "9d" (9d and above are "9d"; 30k and below "30k")."""
    steps = round((rating - DAN_1) / PER_RANK)
    if steps >= 0:
        return f"{min(steps + 1, 9)}d"
    return f"{min(-steps, 30)}k"

