"""What the rest of an event says about a player: the event's level pooled from everyone's moves (docs/models.md s. 12).

One game's moves say little about a player, so the moves-only estimate starts from a population prior and stays near
it. Players of one event are of a similar level (an age group, a rating section, an invitational field), and the
moves of everyone *else* in the event say where that level is. The model, with each player-game g's move-model
likelihood (s. 9: tempered, convolved with the person effect, no prior) summarised by its mean m_g and sd s_g:

    R_g ~ N(mu_E, w^2)             a player-game's rating around the event's level (w: the within-event spread)
    mu_E ~ N(mu_0, tau^2)          event levels in the population
    m_g | mu_E ~ N(mu_E, s_g^2 + w^2)

so the event's level, from the player-games of every player but p, is normal with (step 1)

    Lambda_p = 1 / tau^2 + sum_{g not p's} 1 / (s_g^2 + w^2),
    mean_p   = (mu_0 / tau^2 + sum_{g not p's} m_g / (s_g^2 + w^2)) / Lambda_p,

and p's prior is (step 2) N(mean_p, w^2 + e^2 + 1 / Lambda_p), where e (the event sd) widens it for what the moves
get wrong about a whole event's level (a field whose habits the move model does not know). The player's own moves
never enter their prior, and no declared rating enters anything.

What (m_g, s_g) summarise is the model's ``evidence``: ``"model"``, the move model's likelihood alone; or
``"combination"``, where the combination (s. 10) rates the player-game (its moves clocked), its estimate with the
population prior divided out (step 3's likelihood, :func:`deprior`) and its sd times a fitted f >= 1
(``evidence_scale``: the regression's de-prior'd likelihood is overconfident about a game, and summed over an
event's games it would pin the level too tightly), which reads the clock and the position difficulty too, and the
move model's likelihood elsewhere.

Step 2b, the event's results (with ``results_scale`` kappa > 0): the player's finished games in the event say where
they stand against their opponents. Each opponent o is placed by their own moves under their event prior (steps 1-2
without o and without p, so p's moves still never enter p's prior): precision P_o = 1 / sd_o^2 + sum 1 / s_g^2,
mean mu_o = (mean_o / sd_o^2 + sum m_g / s_g^2) / P_o, known relative to the event's level to within
v_o = 1 / (1 / w^2 + sum 1 / s_g^2) (the level's own uncertainty is shared by p's prior and cancels in R_p - R_o).
A result s against o has the Elo likelihood E^s (1 - E)^(1 - s), E = 1 / (1 + exp(-k_o (R_p - mu_o))), with
k = kappa ln(10) / 400 flattened for o's uncertainty as in Glicko, k_o = k / sqrt(1 + 3 k^2 v_o / pi^2). p's prior is
the normal at the mode of step 2's prior times these likelihoods, with the curvature there (Newton's method, a
concave log density). Only the opponent's id and the score are read: never a declared rating.

Step 3, the estimate: under the move model the event prior replaces the class prior on the grid (s. 9). The
combination (s. 10) is a regression that already shrinks toward the population N(mu_pop, sd_pop^2), so its estimate
R_c with sd sd_c (from its interval) is read as a normal posterior under that prior: dividing the prior out leaves
the likelihood N(mu_pop + (R_c - mu_pop) / k, sd_c^2 / k) with k = 1 - sd_c^2 / sd_pop^2, which is then multiplied by
the event prior (:func:`combine`). With k <= :data:`MIN_SHRINK` the combination says next to nothing beyond the
population and the move model's posterior under the event prior is published instead.

:class:`EventPoolModel` holds the four numbers (fitted on rated-dev by ``bench/event_pooling.py --write``);
:class:`EventEvidence` is one event's state: per player the sums over their closed player-games, and each open
player-game's likelihood so far (its contribution changes with every move), and each player's results in the event.
O(players + the player's results) per move.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .calibrations import read_fitted
from .combination import Combination, MoveFeatures, ScopeFeatures, moments
from .errors import CalibrationError
from .ratingmodel import FLAT_PRIOR, MoveModel, Prior, RatingLikelihood

#: The stated bound on one event's serialised state (tested with ids of the longest kind): well under the 1 MB a Kafka
#: record may have by default, so the pool stage's changelog record of an event of any size fits. Each part of the state
#: keeps to a budget of its own (JSON bytes, counted as entries come and go), the oldest going first; the open
#: player-games get most, as a game closed while it goes on comes back as a second piece of evidence:
EVENT_STATE_BOUND = 900_000
#: - open player-games, about 2.2 KB each (the likelihood over the grid): beyond, the one idle longest is closed, its
#:   contribution so far staying (about 260 open at once with ids of a usual length: 130 boards of one round);
OPEN_BUDGET = 650_000
#: - players' sums: beyond, the player idle longest is retired: their sums join the retired totals, so the event's level
#:   keeps their evidence, and their results and open games go (about 690 players with ids of a usual length);
PLAYERS_BUDGET = 100_000
#: - results: beyond, the player with the most results loses their oldest one (about 1,500 results: the last five
#:   rounds of a 300-player Swiss).
RESULTS_BUDGET = 120_000


@dataclass(frozen=True)
class EventPoolModel:
    """The event pooling's hyper-parameters (module docstring): within-event sd w, the population of event levels
    N(mu_0, tau^2), the event sd e; with what it was fitted on and the command."""

    within_sd: float
    mean0: float
    tau: float
    event_sd: float
    evidence: str = "model"  # what summarises a player-game: "model" or "combination" (module docstring)
    evidence_scale: float = 1.0  # f: the sd of a game's combination evidence about the level times f (docstring)
    results_scale: float = 0.0  # kappa: the weight of the event's results (step 2b); 0 reads no result
    #: step 4: (counted moves, factor) knots of the published interval's scale under the event prior (none: 1)
    interval_scale: tuple[tuple[float, float], ...] = ()
    #: step 4 before a scope's first counted move (a game's book plies), where the event prior itself is published
    prior_scale: float = 1.0
    interval_command: str = ""  # the command that fitted interval_scale and prior_scale
    profile: str = ""
    fitted_on: str = ""
    command: str = ""
    provisional: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if min(self.within_sd, self.tau) <= 0 or self.event_sd < 0:
            raise CalibrationError(f"event pooling needs w > 0, tau > 0, e >= 0; got {self.within_sd}, {self.tau}, {self.event_sd}")
        if self.evidence_scale < 1.0:
            raise CalibrationError(f"event pooling's evidence scale must be >= 1, got {self.evidence_scale}")
        if self.results_scale < 0:
            raise CalibrationError(f"event pooling's results scale must be >= 0, got {self.results_scale}")
        if self.evidence not in EVIDENCE:
            raise CalibrationError(f"event pooling evidence must be one of {EVIDENCE}, got {self.evidence!r}")
        knots = [n for n, _ in self.interval_scale]
        if any(n <= 0 for n in knots) or knots != sorted(set(knots)) or any(f <= 0 for _, f in self.interval_scale):
            raise CalibrationError(f"event pooling's interval scale needs increasing moves > 0 and factors > 0, got "
                                   f"{self.interval_scale}")
        if not self.prior_scale > 0:
            raise CalibrationError(f"event pooling's prior scale must be > 0, got {self.prior_scale}")

    def scale_at(self, moves: int) -> float:
        """Step 4: the factor on the published interval's half-widths under the event prior after ``moves`` counted
        moves, linear in log moves between the knots and constant beyond them; 1 without knots. Before the first counted
        move, :attr:`prior_scale`. (Plain floats over a handful of knots: it runs at every published rating, where
        np.interp's call costs more.)"""
        if moves == 0:
            return self.prior_scale
        knots = self.interval_scale
        if not knots:
            return 1.0
        if moves <= knots[0][0]:
            return knots[0][1]
        for (n0, f0), (n1, f1) in zip(knots, knots[1:]):
            if moves <= n1:
                return f0 + (f1 - f0) * math.log(moves / n0) / math.log(n1 / n0)
        return knots[-1][1]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EventPoolModel:
        try:
            fields = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
            if "interval_scale" in fields:
                fields["interval_scale"] = tuple((float(n), float(f)) for n, f in fields["interval_scale"])
            return cls(**fields)
        except (TypeError, KeyError, ValueError) as e:
            raise CalibrationError(f"not an event pooling model: {e}") from e

    def save(self, path: str | Path) -> None:
        import json

        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    def contribution(self, m: float, s: float) -> tuple[float, float]:
        """A player-game's terms in Lambda and in Lambda x mean: 1 / (s^2 + w^2) and m / (s^2 + w^2)."""
        v = s * s + self.within_sd ** 2
        return 1.0 / v, m / v

    def level(self, a: float, b: float) -> tuple[float, float]:
        """Step 1: the event's level (mean, precision Lambda) from summed contributions (a, b)."""
        lam = 1.0 / self.tau ** 2 + a
        return (self.mean0 / self.tau ** 2 + b) / lam, lam

    def prior(self, a: float, b: float, games: int) -> Prior | None:
        """Steps 1-2 from the other players' summed contributions (a, b) over ``games`` player-games; None without any."""
        if games == 0:
            return None
        mean, lam = self.level(a, b)
        return Prior(mean, math.sqrt(self.prior_var(lam)))

    def prior_var(self, lam: float) -> float:
        """Step 2's variance w^2 + e^2 + 1 / Lambda."""
        return self.within_sd ** 2 + self.event_sd ** 2 + 1.0 / lam

    def opponent(self, a: float, b: float, c: float, d: float) -> tuple[float, float]:
        """Step 2b: an opponent placed by their own moves (c = sum 1 / s_g^2, d = sum m_g / s_g^2) under their event
        prior from the contributions (a, b) of everyone but them and the player: (mu_o, v_o)."""
        mean, lam = self.level(a, b)
        prior_var = self.prior_var(lam)
        mu = (mean / prior_var + d) / (1.0 / prior_var + c)
        return mu, 1.0 / (1.0 / self.within_sd ** 2 + c)

    def with_results(self, prior: Prior, results: list[tuple[float, float, float]]) -> Prior:
        """Step 2b: ``prior`` times the Elo likelihoods of ``results`` [(mu_o, v_o, score)], as the normal at the mode
        with the curvature there."""
        if self.results_scale == 0 or not results:
            return prior
        k = self.results_scale * ELO_SLOPE
        # (slope k_o, mu_o, score) per result; a few results per player: plain floats beat numpy here
        terms = [(k / math.sqrt(1.0 + 3.0 * k * k * v / math.pi ** 2), mu, score) for mu, v, score in results]
        x, prec = prior.mean, 1.0 / prior.sd ** 2
        curv = prec
        for _ in range(_MAX_NEWTON):
            grad, curv = -(x - prior.mean) * prec, prec
            for slope, mu, score in terms:
                e = 1.0 / (1.0 + math.exp(-slope * (x - mu)))
                grad += slope * (score - e)
                curv += slope * slope * e * (1.0 - e)
            step = max(-_MAX_STEP, min(_MAX_STEP, grad / curv))  # the log density is concave: Newton, steps bounded
            x += step
            if abs(step) < 0.01:
                break  # converged: the curvature at x - step is the curvature at x to well within rounding
        return Prior(x, math.sqrt(1.0 / curv))


#: What may summarise a player-game's evidence about the event's level (module docstring).
EVIDENCE = ("model", "combination")

#: The Elo model's slope: a 400-point gap is 10:1 odds.
ELO_SLOPE = math.log(10.0) / 400.0
_MAX_NEWTON = 50
_MAX_STEP = 400.0
#: A player's sums [a, b, player-games, c, d] before any move of theirs.
_NO_SUMS = (0.0, 0.0, 0.0, 0.0, 0.0)
#: Results an event keeps per player at most (the oldest go first).
MAX_RESULTS = 200
#: The JSON bytes an open player-game takes besides its two ids, at most (its likelihood, features and sums).
_OPEN_GAME_BYTES = 2_400
#: The JSON bytes of a player's five sums besides their id, at most (five floats of up to 24 characters).
_SUMS_BYTES = 130


def _json_len(s: str) -> int:
    """The bytes ``s`` takes as a JSON string (non-ASCII characters are escaped, up to 12 bytes each)."""
    return len(json.dumps(s))


#: The least shrinkage k of the combination (step 3) read as evidence; below it, the move model's estimate is used.
MIN_SHRINK = 0.05


def deprior(estimate: float, sd: float, population: Prior, scale: float = 1.0) -> tuple[float, float] | None:
    """Step 3's likelihood: an estimate (mean, sd) made under the ``population`` prior, read as a normal posterior,
    with the prior divided out: (mean, variance) N(mu_pop + (R_c - mu_pop) / k, f^2 sd^2 / k), k = 1 - sd^2 / sd_pop^2,
    f = ``scale``; None when k <= :data:`MIN_SHRINK` (next to nothing beyond the prior)."""
    k = 1.0 - (sd / population.sd) ** 2
    if k <= MIN_SHRINK:
        return None
    return population.mean + (estimate - population.mean) / k, (scale * sd) ** 2 / k


def combine(estimate: float, sd: float, population: Prior, event: Prior) -> tuple[float, float] | None:
    """Step 3: an estimate (mean, sd) made under the ``population`` prior, moved to the ``event`` prior: the mean and
    sd of the product of its likelihood (:func:`deprior`) and the event prior; None when it is too close to the prior
    alone."""
    lik = deprior(estimate, sd, population)
    if lik is None:
        return None
    l_mean, l_var = lik
    precision = 1.0 / l_var + 1.0 / event.sd ** 2
    return (l_mean / l_var + event.mean / event.sd ** 2) / precision, math.sqrt(1.0 / precision)


def likelihood_moments(model: MoveModel, lik: RatingLikelihood) -> tuple[float, float]:
    """Mean and sd of a scope's tempered, convolved likelihood over the rating grid, normalised with no prior (the
    combination's "model mean" and "model sd" inputs)."""
    assert lik.ll is not None
    return moments(model.posteriors(lik.ll, (FLAT_PRIOR,))[0])


def game_evidence(model: MoveModel, lik: RatingLikelihood, feats: ScopeFeatures | None = None,
                  combination: Combination | None = None, scale: float = 1.0) -> tuple[float, float]:
    """(m_g, s_g) of a player-game (module docstring): the combination's estimate with the population prior divided
    out (its sd times ``scale``) where it rates the game (``combination`` given and applying, k above
    :data:`MIN_SHRINK`), else the move model's likelihood moments."""
    m, s = likelihood_moments(model, lik)
    # a game whose state predates its features (feats.n < lik.n) stays the model's evidence
    if combination is None or feats is None or feats.n != lik.n or not combination.applies(feats):
        return m, s
    est = combination.estimate(feats.vector(m, s, lik.tclass), lik.n, 0.95)
    found = deprior(est.rating, est.sd, model.prior_for(lik.tclass), scale)
    return (found[0], math.sqrt(found[1])) if found is not None else (m, s)


@dataclass
class OpenGame:
    """An open player-game: its likelihood so far and the contribution it currently adds to its player's sums."""

    player_id: str
    lik: RatingLikelihood = field(default_factory=RatingLikelihood)
    feats: ScopeFeatures = field(default_factory=ScopeFeatures)  # the combination's inputs (evidence "combination")
    last_ply: int = -1
    a: float = 0.0
    b: float = 0.0
    touched: float = 0.0
    c: float = 0.0  # the game's terms in its player's own sums (step 2b): 1 / s_g^2 and m_g / s_g^2
    d: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"player_id": self.player_id, "lik": self.lik.to_dict(), "feats": self.feats.to_dict(),
                "last_ply": self.last_ply, "a": self.a, "b": self.b, "touched": self.touched, "c": self.c, "d": self.d}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OpenGame:
        # states written before the combination's inputs were kept have none: the game goes on as the model's evidence;
        # before step 2b, no own sums: the game's next move sets them
        return cls(d["player_id"], RatingLikelihood.from_dict(d["lik"]), ScopeFeatures.from_dict(d.get("feats", {})),
                   int(d["last_ply"]), float(d["a"]), float(d["b"]), float(d.get("touched", 0.0)),
                   float(d.get("c", 0.0)), float(d.get("d", 0.0)))


@dataclass
class EventEvidence:
    """One event's evidence: per player [a, b, player-games, c, d], the sums over their player-games (open ones at their
    current contribution) of their terms in the level (a, b) and in their own rating (c = sum 1 / s_g^2,
    d = sum m_g / s_g^2), the players least recently active first; the open player-games keyed ``game_id/player_id``;
    per player their finished games' results {game_id: [opponent_id, score]} (step 2b); and ``retired`` [a, b,
    player-games], the sums of the players retired to keep the state within its budgets (:data:`EVENT_STATE_BOUND`)."""

    players: dict[str, list[float]] = field(default_factory=dict)
    open: dict[str, OpenGame] = field(default_factory=dict)
    touched: float = 0.0
    results: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    retired: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    # the JSON bytes each budgeted part takes (estimates from above), kept as entries come and go; not stored
    _open_bytes: int = field(default=0, init=False, repr=False, compare=False)
    _players_bytes: int = field(default=0, init=False, repr=False, compare=False)
    _results_bytes: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._open_bytes = sum(self._open_entry(k) for k in self.open)
        self._players_bytes = sum(_json_len(p) + _SUMS_BYTES for p in self.players)
        self._results_bytes = sum(_json_len(p) + 4 + sum(self._result_entry(gid, r[0]) for gid, r in mine.items())
                                  for p, mine in self.results.items())

    @staticmethod
    def _open_entry(key: str) -> int:
        return 2 * _json_len(key) + _OPEN_GAME_BYTES  # the key, and the player id inside it (shorter)

    @staticmethod
    def _result_entry(game_id: str, opponent_id: str) -> int:
        return _json_len(game_id) + _json_len(opponent_id) + 10

    def add_move(self, game_id: str, player_id: str, ply: int, move_ll: np.ndarray, tclass: str,
                 pool: EventPoolModel, model: MoveModel, now: float | None = None, *,
                 features: MoveFeatures | None = None, combination: Combination | None = None) -> bool:
        """Count one move of ``player_id`` in ``game_id``; False (nothing changes) for a ply already counted. With the
        ``"combination"`` evidence the move's :class:`MoveFeatures` and the ``combination`` are needed too."""
        key = f"{game_id}/{player_id}"
        g = self.open.get(key)
        if g is None:
            entry = self._open_entry(key)
            while self.open and self._open_bytes + entry > OPEN_BUDGET:
                self.close(min(self.open, key=lambda k: self.open[k].touched))
            g = self.open[key] = OpenGame(player_id)
            self._open_bytes += entry
            if player_id not in self.players:
                self.players[player_id] = list(_NO_SUMS)
                self._players_bytes += _json_len(player_id) + _SUMS_BYTES
            self.players[player_id][2] += 1
        if ply <= g.last_ply:
            return False
        self._active(player_id)
        g.lik.add(move_ll, tclass)
        if features is not None:
            g.feats.add(features)
        g.last_ply = ply
        use = combination if pool.evidence == "combination" else None
        m, s = game_evidence(model, g.lik, g.feats, use, pool.evidence_scale)
        a, b = pool.contribution(m, s)
        c, d = 1.0 / (s * s), m / (s * s)
        sums = self.players[player_id]
        sums[0] += a - g.a  # replace the game's previous contribution by its new one
        sums[1] += b - g.b
        sums[3] += c - g.c
        sums[4] += d - g.d
        g.a, g.b, g.c, g.d = a, b, c, d
        g.touched = self.touched = time.time() if now is None else now
        return True

    def close(self, key: str) -> None:
        """A player-game ended (``game_id/player_id``): its likelihood is no longer needed; its contribution stays."""
        if self.open.pop(key, None) is not None:
            self._open_bytes -= self._open_entry(key)

    def add_result(self, game_id: str, player_id: str, opponent_id: str, score: float) -> bool:
        """Record ``player_id``'s result in ``game_id`` (step 2b); False (nothing changes) for a game already recorded."""
        mine = self.results.get(player_id)
        if mine is None:
            mine = self.results[player_id] = {}
            self._results_bytes += _json_len(player_id) + 4
        if game_id in mine:
            return False
        if len(mine) >= MAX_RESULTS:
            self._drop_oldest_result(player_id)
        mine[game_id] = [opponent_id, float(score)]
        self._results_bytes += self._result_entry(game_id, opponent_id)
        while self._results_bytes > RESULTS_BUDGET:
            self._drop_oldest_result(max(self.results, key=lambda p: len(self.results[p])))
        if player_id in self.players:
            self._active(player_id)
        return True

    def _drop_oldest_result(self, player_id: str) -> None:
        mine = self.results[player_id]
        game_id = next(iter(mine))
        self._results_bytes -= self._result_entry(game_id, mine.pop(game_id)[0])
        if not mine:
            del self.results[player_id]
            self._results_bytes -= _json_len(player_id) + 4

    def _active(self, player_id: str) -> None:
        """``player_id`` (one of :attr:`players`) was just active: last in the order; then retire the players least
        recently active while the players' sums are over their budget."""
        self.players[player_id] = self.players.pop(player_id)
        while self._players_bytes > PLAYERS_BUDGET and len(self.players) > 1:
            self._retire(next(iter(self.players)))

    def _retire(self, player_id: str) -> None:
        """Fold a player's sums into :attr:`retired` (the level keeps their evidence: every other player's prior still
        counts it) and drop what is theirs alone: their own sums, results and open games."""
        sums = self.players.pop(player_id)
        self._players_bytes -= _json_len(player_id) + _SUMS_BYTES
        for i in range(3):
            self.retired[i] += sums[i]
        while player_id in self.results:
            self._drop_oldest_result(player_id)
        for key in [k for k, g in self.open.items() if g.player_id == player_id]:
            self.close(key)

    def prior_for(self, player_id: str, pool: EventPoolModel) -> tuple[Prior | None, int]:
        """Player ``player_id``'s prior from every other player's player-games (steps 1-2) and, with
        ``pool.results_scale``, their own results against players placed by their moves (step 2b); and how many
        player-games of others it rests on. O(players + the player's results)."""
        # every player's sums and the retired ones, each column summed exactly (the same whatever the players' order)
        total = [math.fsum(col) for col in zip(*self.players.values(), (*self.retired, 0.0, 0.0), strict=True)]
        mine = self.players.get(player_id, _NO_SUMS)
        a, b, n = total[0] - mine[0], total[1] - mine[1], total[2] - mine[2]
        prior = pool.prior(a, b, int(n))
        if prior is None or pool.results_scale == 0 or not self.results.get(player_id):
            return prior, int(n)
        found = []
        for opp, score in self.results[player_id].values():
            theirs = self.players.get(opp, _NO_SUMS)
            oa, ob = a - theirs[0], b - theirs[1]  # the level without the player and without the opponent
            found.append((*pool.opponent(oa, ob, theirs[3], theirs[4]), score))
        return pool.with_results(prior, found), int(n)

    def to_dict(self) -> dict[str, Any]:
        return {"players": {k: list(s) for k, s in self.players.items()},
                "open": {k: g.to_dict() for k, g in self.open.items()}, "touched": self.touched,
                "results": {k: dict(r) for k, r in self.results.items()},
                **({"retired": list(self.retired)} if any(self.retired) else {})}  # an event that never retired keeps its form

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EventEvidence:
        # states written before step 2b keep three sums per player and no results: the own sums start at zero
        retired = [float(x) for x in d.get("retired", (0.0, 0.0, 0.0))]
        if len(retired) != 3:
            raise ValueError(f"retired sums must be [a, b, player-games], not {retired!r}")
        return cls({k: [float(x) for x in v] + [0.0] * (5 - len(v)) for k, v in d["players"].items()},
                   {k: OpenGame.from_dict(g) for k, g in d["open"].items()}, float(d.get("touched", 0.0)),
                   {k: {gid: [str(r[0]), float(r[1])] for gid, r in v.items()} for k, v in d.get("results", {}).items()},
                   retired)


def load_event_pool(profile: str, path: str | Path | None = None) -> EventPoolModel | None:
    """The shipped event pooling of ``profile`` (``analyzers/calibrations/<profile>.eventpool.json``), or None."""
    d = read_fitted(f"{profile}.eventpool.json", path)
    return EventPoolModel.from_dict(d) if d is not None else None


#: Event names that platforms give every game of a kind rather than an event: Lichess's exports ("Rated Blitz game",
#: "Casual Rapid game") and chess.com's ("Live Chess", "Let's Play!"). Pooled as one event, such games are read as a
#: tournament's field around one level, and the intervals under-cover (docs/accuracy.md: 87.6 % for a 95 % interval).
PLATFORM_EVENT_NAMES = re.compile(r"(?i)^((rated|casual) [a-z0-9 ]+ game|live chess|let's play!?)$")


def platform_event_name(name: str) -> bool:
    """Whether ``name`` is a platform's name for every game of a kind (:data:`PLATFORM_EVENT_NAMES`), not an event."""
    return bool(PLATFORM_EVENT_NAMES.match(name.strip()))
