"""Go moves through the engine: one :class:`GoMove` per move, the typed step both the replay and the benchmarks use.

A game is played through a :class:`~analyzers.goboard.GoPosition`; before each move the pool (a Go
:class:`~analyzers.engine.pool.EnginePool`) analyses the position, and the move is judged against the candidates:
its value, the best value, the points lost. A network's evaluation (KataGo, :mod:`analyzers.engine.katago`) values the
position, not each move, so a move is judged from the positions before and after it: the mover's lead before is the
best value, minus the opponent's lead after is the played move's, and the network's prior of the move comes with it.
An illegal move ends the game's assessment with
:class:`~analyzers.errors.IllegalMove` naming the game and the move; the moves before it stay assessed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from analyzers.engine.adapter import GO
from analyzers.engine.gtp import GoAnalysis
from analyzers.engine.katago import GoEngineLimits
from analyzers.engine.pool import EnginePool
from analyzers.errors import EngineError, IllegalMove, InputError
from analyzers.goboard import SIDES, GoPosition

from .sgf import GoGame


@dataclass(frozen=True)
class GoMove:
    game_id: str
    ply: int                   # moves played before this one (0: the first move)
    colour: str                # "b" or "w"
    move: str                  # GTP, or "pass"
    values: tuple[float, ...]  # candidate values in points, side to move; the played move included
    played: int                # index of the played move in values
    best_move: str
    prior: float | None = None  # a network's policy prior of the played move (KataGo); None from GNU Go

    @property
    def loss(self) -> float:
        """Points lost by the move: best value minus its value (>= 0)."""
        return max(self.values) - self.values[self.played]


def judge(game_id: str, pos: GoPosition, colour: str, move: str, analysis: GoAnalysis,
          after: GoAnalysis | None = None) -> GoMove:
    """The move against the search of the position before it; for a network's evaluation (``analysis.lead`` set) also
    against ``after``, the evaluation of the position after it: values (lead before, minus the lead after), played 1."""
    values, played, prior = analysis.judged(move, after)
    return GoMove(game_id, pos.ply, colour, move, tuple(values), played,
                  analysis.candidates[0][0] if analysis.candidates else "pass", prior)


async def go_moves(game: GoGame, pool: EnginePool, limits: GoEngineLimits, *,
                   max_plies: int | None = None) -> AsyncIterator[GoMove | InputError | EngineError]:
    """``game``'s moves (the first ``max_plies``) as they are judged; the error that stops it, if any, comes last.

    The next position's search starts while the current one is judged (look-ahead), as in the chess pipeline."""
    if game.error is not None:
        yield game.error
        return
    pos = GoPosition(size=game.size, komi=game.komi)  # the record's setup, already checked by the SGF reader
    moves = game.moves[:max_plies] if max_plies is not None else game.moves
    for i, (colour, move) in enumerate(moves):
        if pos.over:
            return
        nxt = GO.copy(pos)
        try:
            GO.play(nxt, move, SIDES.index(colour))
        except IllegalMove as e:
            yield IllegalMove(f"move {i + 1} ({colour.upper()} {move}): {e}", game_id=game.game_id, ply=i)
            return
        if i + 1 < len(moves) and not nxt.over:
            pool.prefetch(nxt, limits)
        pos.to_move = colour  # a record may let one side move twice (a pass left out): the mover is the one to judge
        try:
            analysis = await pool.analyse_limits(pos, limits)
            # a network values positions: the move's worth needs the position after it (the next move's, cached)
            after = await pool.analyse_limits(nxt, limits) if analysis.lead is not None else None
        except EngineError as e:
            yield e
            return
        yield judge(game.game_id, pos, colour, move, analysis, after)
        pos = nxt


async def assess_go_game(game: GoGame, pool: EnginePool, limits: GoEngineLimits, *,
                         max_plies: int | None = None) -> tuple[list[GoMove], InputError | EngineError | None]:
    """All of :func:`go_moves` at once: the moves, and the error that stopped the game (None when none did)."""
    out: list[GoMove] = []
    async for x in go_moves(game, pool, limits, max_plies=max_plies):
        if isinstance(x, GoMove):
            out.append(x)
        else:
            return out, x
    return out, None
