"""Go replay: SGF games through the Go engine pool and the Go skill model, publishing the same messages as chess.

For every move of a game (after a game's error-free moves, an illegal move stops that game only):

- a :class:`~schemas.messages.PerceivedRating` (``game`` "go", ``method`` "posterior") for the mover's game scope
  and for the player's games so far in this replay ("player" scope), with its interval on the GoR scale and the
  kyu/dan labels;
- at the end of a game with a result, a Glicko-2 :class:`~schemas.messages.RatingUpdate` for each player, starting
  from the declared rank (``BR``/``WR``) or the platform default;
- for a game that cannot be rated (unreadable record, unsupported size or handicap, illegal move, engine failure),
  a :class:`~schemas.messages.DeadLetter` with the whole SGF record, naming the game and the move, and the next game
  goes on.

:func:`replay_go` is I/O-free apart from the engine pool: the CLI (``kibitz replay FILE.sgf``) prints what it yields.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from analyzers.calibration import Calibration
from analyzers.engine.gtp import GoLimits
from analyzers.engine.pool import EnginePool
from analyzers.errors import KibitzError
from analyzers.glicko2 import Glicko2Config, Glicko2Rating, update_after_game
from analyzers.gorate import GoSkill, RankModel, rank_range
from schemas.messages import DeadLetter, GlickoState, PerceivedRating, PlayerInfo, RatingUpdate

from .goassess import GoMove, go_moves
from .sgf import GoGame
from .steps import dead_letter

GoOutput = PerceivedRating | RatingUpdate | DeadLetter


@dataclass
class GoPlayers:
    """What the replay keeps per player across games: the evidence of all their moves and their Glicko-2 rating."""

    skill: dict[str, GoSkill] = field(default_factory=dict)
    glicko: dict[str, Glicko2Rating] = field(default_factory=dict)

    def skill_of(self, player_id: str) -> GoSkill:
        return self.skill.setdefault(player_id, GoSkill())


def perceived(skill: GoSkill, calibration: Calibration, model: RankModel, *, player_id: str, scope: str, scope_id: str,
              game_id: str, ply: int) -> PerceivedRating:
    est = skill.estimate(model)
    rank, low, high = rank_range(est)
    mean, sd = skill.posterior.moments()
    return PerceivedRating(
        game="go", player_id=player_id, scope=scope, scope_id=scope_id, game_id=game_id, ply=ply,
        rating=round(est.rating, 1), low=round(est.low, 1), high=round(est.high, 1), method="posterior",
        c_mean=round(mean, 4), c_sd=round(sd, 4), moves=skill.moves, gain_moves=skill.gains.count,
        profile=calibration.profile, provisional=calibration.provisional, rank=rank, rank_low=low, rank_high=high)


def _glicko_updates(game: GoGame, players: GoPlayers, config: Glicko2Config) -> list[RatingUpdate]:
    score = game.black_score
    if score is None:
        return []

    def start(p: PlayerInfo) -> Glicko2Rating:
        return players.glicko.get(p.id) or config.new_player(p.rating, p.rd, p.volatility)

    b0, w0 = start(game.black), start(game.white)
    # update_after_game takes the first player's score: Black is the first player in Go
    b1, w1 = update_after_game(b0, w0, score, config=config)
    players.glicko[game.black.id], players.glicko[game.white.id] = b1, w1

    def state(r: Glicko2Rating) -> GlickoState:
        return GlickoState(rating=round(r.rating, 1), rd=round(r.rd, 1), volatility=round(r.volatility, 6))

    return [
        RatingUpdate(game="go", player_id=game.black.id, game_id=game.game_id, opponent_id=game.white.id, score=score,
                     before=state(b0), after=state(b1), opponent=state(w0)),
        RatingUpdate(game="go", player_id=game.white.id, game_id=game.game_id, opponent_id=game.black.id,
                     score=1.0 - score, before=state(w0), after=state(w1), opponent=state(b0)),
    ]


async def replay_go(games: Sequence[GoGame], pool: EnginePool, calibration: Calibration, *, limits: GoLimits,
                    players: GoPlayers | None = None, glicko: Glicko2Config | None = None) -> AsyncIterator[GoOutput]:
    """Rate ``games`` in order; yields every message as it is produced."""
    players = players if players is not None else GoPlayers()
    glicko = glicko or Glicko2Config()
    model = RankModel.of(calibration)  # once: its grid is shared by every estimate
    for game in games:
        if game.error is not None:
            yield dead_letter(game.error, game.record, source=game.source, key=game.game_id)
            continue
        in_game = {"b": GoSkill(), "w": GoSkill()}
        ids = {"b": game.black.id, "w": game.white.id}
        error: KibitzError | None = None
        async for m in go_moves(game, pool, limits):
            if not isinstance(m, GoMove):
                error = m
                break
            pid = ids[m.colour]
            for skill in (in_game[m.colour], players.skill_of(pid)):
                skill.add(m.values, m.played)
            yield perceived(in_game[m.colour], calibration, model, player_id=pid, scope="game", scope_id=game.game_id,
                            game_id=game.game_id, ply=m.ply)
            yield perceived(players.skill_of(pid), calibration, model, player_id=pid, scope="player", scope_id=pid,
                            game_id=game.game_id, ply=m.ply)
        if error is not None:
            yield dead_letter(error, game.record, source=game.source, key=game.game_id)
            continue
        for update in _glicko_updates(game, players, glicko):
            yield update
