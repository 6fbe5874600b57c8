"""The pipeline's Go half (docs/models.md s. 11): what the game step and the player step do differently for Go.

Everything else is the chess pipeline's (:mod:`streamer.pipeline`): ply order, duplicates, dead letters, the engine
pool's cache and look-ahead, Glicko-2 at the game end.

- Game step: :func:`go_assessment` judges a move against the GTP engine's candidates (values in points for the side
  to move) and writes a :class:`~schemas.MoveAssessment` with ``game`` "go": values in hundredths of a point, the
  gain in whole points (minus the points lost). GNU Go values moves, not positions, so ``eval_before`` and
  ``eval_after`` are the best move's and the played move's values, from Black's view.
  With KataGo (a network's evaluation of each position) a move is judged from the positions before and after it
  and the assessment carries the network's prior of the move (MoveAssessment v5).
- Player step: a player's Go evidence is one :class:`GoScope` per open game and one for all their games, each a
  :class:`~analyzers.gorate.GoSkill` (the posterior over c with K in points, the gain histogram, a network's evidence);
  :func:`go_perceived` reads a rating on the GoR scale with its kyu/dan labels through the server's calibration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analyzers.calibration import Calibration
from analyzers.engine.gtp import GoAnalysis
from analyzers.gain import GainHistogram
from analyzers.gorate import GoSkill, NetworkEvidence, RankModel, go_gain, rank_range
from analyzers.posterior import SkillPosterior
from schemas import MoveAssessment, MoveEvent, PerceivedRating, PlayerInfo


def go_assessment(ev: MoveEvent, *, mover: PlayerInfo, colour: str, side: int, event: str,
                  analysis: GoAnalysis, after: GoAnalysis | None = None) -> MoveAssessment:
    """The assessment of Go move ``ev`` by ``mover`` (``side`` 0 Black, 1 White) from the search of the position
    before it. A move the engine did not list is worth 0 points (GNU Go lists every move worth something).

    A network's evaluation (``analysis.lead`` set) values the position, so the move is judged with ``after``, the
    evaluation of the position after it: the candidates are the policy's first choice at the mover's lead before and
    the played move at minus the opponent's lead after, and ``prior`` is the network's prior of the move."""
    values, idx, prior = analysis.judged(ev.uci, after)
    # a network's two values are the policy's first choice before the move and the played move after it
    candidates = list(analysis.candidates) if prior is None else [(analysis.candidates[0][0], values[0]), (ev.uci, values[1])]
    listed = idx < len(candidates)
    black_view = 1 if side == 0 else -1
    return MoveAssessment(
        game="go", game_id=ev.game_id, ply=ev.ply, player_id=mover.id, color=colour, uci=ev.uci, event=event,
        reference_rating=mover.rating, reference_rd=mover.rd,
        eval_before=round(black_view * max(values) * 100), eval_after=round(black_view * values[idx] * 100),
        gain=go_gain(values, idx), loss=round((max(values) - values[idx]) * 100),
        candidates=[{"uci": m, "cp": round(v * 100)} for m, v in candidates],
        played_rank=idx if listed else None, played_value=round(values[idx] * 100),
        counted=len(values) > 1, engine=analysis.engine, limits=analysis.limits, prior=prior,
    )


def go_choice(a: MoveAssessment) -> tuple[list[float], int]:
    """The candidate values in points and the played move's index, as the engine gave them (the inverse of
    :func:`go_assessment`)."""
    values = [c.cp / 100.0 for c in a.candidates]
    if a.played_rank is not None:
        return values, a.played_rank
    return [*values, (a.played_value or 0) / 100.0], len(values)


@dataclass
class GoScope:
    """A player's Go evidence in one scope (a game, or all their games) and the last ply counted in it."""

    skill: GoSkill = field(default_factory=GoSkill)
    last_ply: int = -1
    #: a move of this scope was searched by another engine than the calibration's: its ratings are provisional
    other_engine: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"posterior": self.skill.posterior.to_dict(), "gains": self.skill.gains.to_dict(), "last_ply": self.last_ply,
                **({"network": self.skill.network.to_list()} if self.skill.network.n else {}),
                **({"other_engine": True} if self.other_engine else {})}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GoScope:
        network = NetworkEvidence.from_list(d["network"]) if d.get("network") else NetworkEvidence()
        return cls(GoSkill(SkillPosterior.from_dict(d["posterior"]), GainHistogram.from_dict(d["gains"]), network),
                   int(d["last_ply"]), bool(d.get("other_engine", False)))


def count_go_move(scopes: tuple[GoScope, ...], a: MoveAssessment) -> None:
    """One move in each of a player's Go scopes: the posteriors in one numpy pass, the gain in each histogram, and
    a network's evidence (:class:`~analyzers.gorate.NetworkEvidence`) when the move was judged by one."""
    if a.counted:
        values, idx = go_choice(a)
        SkillPosterior.update_all([s.skill.posterior for s in scopes], values, idx)
        if a.prior is not None:
            first = a.candidates[0].uci.upper() == a.uci.upper()
            for s in scopes:
                s.skill.network.add(a.prior, values[0] - values[idx], first)
    for s in scopes:
        s.skill.gains.add(a.gain)
        s.last_ply = a.ply


def go_perceived(skill: GoSkill, calibration: Calibration, model: RankModel, *, player_id: str, scope: str,
                 scope_id: str, game_id: str, ply: int, other_engine: bool = False) -> PerceivedRating:
    """The published rating of a Go scope: the posterior over c, or a network's score, read through the server's rank
    model; provisional when the calibration is, or when ``other_engine`` searched some of its moves."""
    est = skill.estimate(model)
    rank, low, high = rank_range(est)
    mean, sd = skill.posterior.moments()
    return PerceivedRating(
        game="go", player_id=player_id, scope=scope, scope_id=scope_id, game_id=game_id, ply=ply,
        rating=round(est.rating, 1), low=round(est.low, 1), high=round(est.high, 1),
        method="posterior" if model.weights is None else "network",
        c_mean=round(mean, 4), c_sd=round(sd, 4), moves=skill.moves, gain_moves=skill.gains.count,
        profile=calibration.profile, provisional=calibration.provisional or other_engine, rank=rank, rank_low=low, rank_high=high)
