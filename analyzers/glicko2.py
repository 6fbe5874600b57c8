"""Glicko-2 (Glickman, "Example of the Glicko-2 system"; docs/models.md s. 4).

:func:`rate` is one rating period exactly as in Glickman's paper, with the Illinois solver for the volatility
(including the 2022 correction, ``<=`` in step 5.4(b)). :func:`decay` grows RD for inactivity measured in
(possibly fractional) periods. :class:`Glicko2Config` and :func:`update_after_game` rate one game as its own
period, the way live platforms do.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from .errors import ConvergenceError

#: Glicko-2 scale factor: mu = (r - 1500) / SCALE.
SCALE = 173.7178
#: Convergence tolerance of the volatility iteration (Glickman's epsilon).
EPSILON = 1e-6
#: Iteration cap of the Illinois solver; it converges in a few dozen steps on any sane input.
MAX_ITERATIONS = 200


@dataclass(frozen=True, slots=True)
class Glicko2Rating:
    """An immutable Glicko-2 rating on the familiar scale: rating, RD and volatility."""

    rating: float = 1500.0
    rd: float = 350.0
    volatility: float = 0.06

    @property
    def mu(self) -> float:
        return (self.rating - 1500.0) / SCALE

    @property
    def phi(self) -> float:
        return self.rd / SCALE

    @classmethod
    def from_internal(cls, mu: float, phi: float, sigma: float) -> Glicko2Rating:
        return cls(1500.0 + SCALE * mu, SCALE * phi, sigma)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Glicko2Rating:
        return cls(float(data["rating"]), float(data["rd"]), float(data["volatility"]))


def g(phi: float) -> float:
    return 1.0 / math.sqrt(1.0 + 3.0 * phi * phi / (math.pi * math.pi))


def expected(mu: float, mu_j: float, phi_j: float) -> float:
    """E(mu, mu_j, phi_j): the expected score against opponent j."""
    return 1.0 / (1.0 + math.exp(-g(phi_j) * (mu - mu_j)))


def _volatility(phi: float, sigma: float, delta: float, v: float, tau: float) -> float:
    """Step 5: the new volatility by the Illinois algorithm."""
    a = math.log(sigma * sigma)
    d2, p2 = delta * delta, phi * phi

    def f(x: float) -> float:
        ex = math.exp(x)
        return ex * (d2 - p2 - v - ex) / (2.0 * (p2 + v + ex) ** 2) - (x - a) / (tau * tau)

    big_a = a
    if d2 > p2 + v:
        big_b = math.log(d2 - p2 - v)
    else:
        k = 1
        while f(a - k * tau) < 0:
            k += 1
            if k > MAX_ITERATIONS:
                raise ConvergenceError("Glicko-2: no lower bracket for the volatility")
        big_b = a - k * tau
    fa, fb = f(big_a), f(big_b)
    for _ in range(MAX_ITERATIONS):
        if abs(big_b - big_a) <= EPSILON:
            return math.exp(big_a / 2.0)
        big_c = big_a + (big_a - big_b) * fa / (fb - fa)
        fc = f(big_c)
        if fc * fb <= 0:        # the 2022 correction: "<=", not "<"
            big_a, fa = big_b, fb
        else:
            fa /= 2.0
        big_b, fb = big_c, fc
    raise ConvergenceError(f"Glicko-2 volatility did not converge in {MAX_ITERATIONS} iterations")


def rate(player: Glicko2Rating, outcomes: Iterable[tuple[Glicko2Rating | tuple[float, float], float]], tau: float = 0.5) -> Glicko2Rating:
    """One rating period. ``outcomes``: (opponent, score) with opponent a rating or (rating, RD), score in [0, 1].

    With no outcomes, only RD grows: phi' = sqrt(phi^2 + sigma^2).
    """
    games = []
    for opp, s in outcomes:
        if not 0.0 <= s <= 1.0:
            raise ValueError(f"score must be in [0, 1], got {s}")
        o = opp if isinstance(opp, Glicko2Rating) else Glicko2Rating(opp[0], opp[1])
        games.append((o.mu, o.phi, s))
    mu, phi, sigma = player.mu, player.phi, player.volatility
    if not games:
        return Glicko2Rating.from_internal(mu, math.sqrt(phi * phi + sigma * sigma), sigma)
    v_inv = 0.0
    dsum = 0.0
    for mu_j, phi_j, s in games:
        gj = g(phi_j)
        e = expected(mu, mu_j, phi_j)
        v_inv += gj * gj * e * (1.0 - e)
        dsum += gj * (s - e)
    v = 1.0 / v_inv
    delta = v * dsum
    sigma2 = _volatility(phi, sigma, delta, v, tau)
    phi_star = math.sqrt(phi * phi + sigma2 * sigma2)
    phi2 = 1.0 / math.sqrt(1.0 / (phi_star * phi_star) + 1.0 / v)
    return Glicko2Rating.from_internal(mu + phi2 * phi2 * dsum, phi2, sigma2)


def decay(player: Glicko2Rating, periods: float) -> Glicko2Rating:
    """RD growth for ``periods`` (fractional) rating periods without games: phi^2 += periods * sigma^2."""
    if periods < 0:
        raise ValueError("periods must be >= 0")
    phi = math.sqrt(player.phi ** 2 + periods * player.volatility ** 2)
    return replace(player, rd=phi * SCALE)


@dataclass(frozen=True, slots=True)
class Glicko2Config:
    """Settings of a live platform that rates every game as its own period (defaults: docs/models.md s. 4)."""

    tau: float = 0.75
    rating: float = 1500.0
    rd: float = 500.0
    volatility: float = 0.09
    rd_min: float = 45.0
    rd_max: float = 500.0
    periods_per_day: float = 0.21
    #: RD given to a player whose rating is declared (e.g. a FIDE Elo in GameStarted) but has no RD of its own
    declared_rd: float = 150.0

    def new_player(self, rating: float | None = None, rd: float | None = None, volatility: float | None = None) -> Glicko2Rating:
        """The starting rating of a player, from what is declared about them (if anything)."""
        if rating is None:
            return Glicko2Rating(self.rating, self.rd if rd is None else rd, self.volatility if volatility is None else volatility)
        return Glicko2Rating(rating, self.declared_rd if rd is None else rd, self.volatility if volatility is None else volatility)

    def clamp(self, r: Glicko2Rating) -> Glicko2Rating:
        return replace(r, rd=min(self.rd_max, max(self.rd_min, r.rd)))


def update_after_game(
    white: Glicko2Rating,
    black: Glicko2Rating,
    score: float,
    elapsed_days: float | tuple[float, float] = 0.0,
    config: Glicko2Config = Glicko2Config(),
) -> tuple[Glicko2Rating, Glicko2Rating]:
    """Rate one game as its own period, for both players; ``score`` is White's (1, 0.5 or 0).

    ``elapsed_days`` (one number, or one per player) since each player's last rated game first grows their RD as
    fractional periods; RD is kept within the config's bounds before and after.
    """
    ew, eb = elapsed_days if isinstance(elapsed_days, tuple) else (elapsed_days, elapsed_days)
    w = config.clamp(decay(white, ew * config.periods_per_day))
    b = config.clamp(decay(black, eb * config.periods_per_day))
    new_w = config.clamp(rate(w, [(b, score)], tau=config.tau))
    new_b = config.clamp(rate(b, [(w, 1.0 - score)], tau=config.tau))
    return new_w, new_b
