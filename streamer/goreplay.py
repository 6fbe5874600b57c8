"""Go replay: SGF games as a stream of events through the embedded runtime, the same steps as every other game.

:func:`game_events` turns one SGF game into the events a producer would send (``game`` "go": the start with the
board size, komi and the players' declared ranks, one :class:`~schemas.MoveEvent` per move in GTP, the end with
the result); :func:`replay_go` runs them through :class:`~streamer.embedded.EmbeddedRuntime` with a GTP engine
pool, and yields what the runtime publishes:

- a :class:`~schemas.messages.PerceivedRating` (``game`` "go", ``method`` "posterior") for the mover's game scope
  after every move, with its interval on the GoR scale and the kyu/dan labels, and the player scope at each game end;
- at the end of a game with a result, a Glicko-2 :class:`~schemas.messages.RatingUpdate` for each player, starting
  from the declared rank (``BR``/``WR``) or the platform default;
- for a game that cannot be rated (unreadable record, unsupported size or handicap) or not to its end (an illegal
  move, a side moving twice: the moves before it are rated, the game is not scored), and for an engine failure, a
  :class:`~schemas.messages.DeadLetter` naming the game and the move (with the whole SGF record when the record itself
  is at fault), and the other games go on.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from analyzers.calibration import Calibration
from analyzers.engine.katago import GoEngineLimits
from analyzers.engine.pool import EnginePool
from analyzers.errors import IllegalMove, InputError, UnsupportedGame
from analyzers.glicko2 import Glicko2Config
from analyzers.goboard import GoPosition
from analyzers.profiles import get_profile
from schemas import MAX_PLIES, DeadLetter, GameEnded, GameStarted, MoveEvent, PerceivedRating, RatingUpdate

from .embedded import EmbeddedRuntime
from .ingest import TOO_LONG
from .pipeline import PipelineConfig
from .sgf import GoGame
from .steps import GameEvent, dead_letter

GoOutput = PerceivedRating | RatingUpdate | DeadLetter
#: The stream's result from Black's score (the messages name White's score first, as chess's PGN results do).
_RESULTS = {1.0: "0-1", 0.0: "1-0", 0.5: "1/2-1/2"}


def game_events(game: GoGame) -> tuple[list[GameEvent], InputError | None]:
    """The events of ``game`` up to the end of play (two passes), and the error that stopped them, if any. A record
    at fault (unreadable, unsupported size, handicap) gives no events; an illegal move or a side moving twice (the
    stream's moves alternate; a record may leave a pass out) gives the start and the moves before it, and no end, as
    a PGN game with an illegal move does (:meth:`streamer.ingest.PgnGame.events`): the moves played are rated, the
    game is not scored."""
    if game.error is not None:
        return [], game.error
    pos = GoPosition(size=game.size, komi=game.komi)
    moves: list[str] = []
    error: InputError | None = None
    for i, (colour, move) in enumerate(game.moves):
        if pos.over:
            break
        if i == MAX_PLIES:
            error = UnsupportedGame(TOO_LONG, game_id=game.game_id, ply=i)
            break
        where = f"move {i + 1} ({colour.upper()} {move})"
        if colour != pos.to_move:
            error = IllegalMove(f"{where}: {'Black' if colour == 'b' else 'White'} moves twice (a pass left out?); "
                                "a streamed game alternates", game_id=game.game_id, ply=i)
            break
        try:
            pos.play(move)
        except IllegalMove as e:
            error = IllegalMove(f"{where}: {e}", game_id=game.game_id, ply=i)
            break
        moves.append(move)
    events: list[GameEvent] = [GameStarted(game="go", game_id=game.game_id, white=game.white, black=game.black,
                                           event=game.event, board_size=game.size, komi=game.komi)]
    events += [MoveEvent(game="go", game_id=game.game_id, ply=i, uci=m) for i, m in enumerate(moves)]
    if game.black_score is not None and error is None:
        events.append(GameEnded(game_id=game.game_id, result=_RESULTS[game.black_score], plies=len(moves)))
    return events, error


async def replay_go(games: Sequence[GoGame], pool: EnginePool, calibration: Calibration, *, limits: GoEngineLimits,
                    glicko: Glicko2Config | None = None, partitions: int = 1) -> AsyncIterator[GoOutput]:
    """Rate ``games`` through the embedded runtime (``partitions`` games at a time); yields every published message
    as it is produced."""
    # the chess profile is the configuration's required default; a Go game never reads it
    config = PipelineConfig(get_profile("fast"), go_calibration=calibration, go_limits=limits,
                            glicko=glicko or Glicko2Config())
    queue: asyncio.Queue[object] = asyncio.Queue()
    done = object()
    async with EmbeddedRuntime(None, config, queue.put_nowait, queue.put_nowait, partitions=partitions,
                               go_pool=pool) as runtime:
        for game in games:
            events, error = game_events(game)
            if error is not None:
                yield dead_letter(error, game.record, source=game.source, key=game.game_id)
            for ev in events:
                runtime.submit(ev, source=game.source)

        async def finish() -> None:
            await runtime.drain()
            queue.put_nowait(done)

        finishing = asyncio.create_task(finish())
        while (msg := await queue.get()) is not done:
            if isinstance(msg, (PerceivedRating, RatingUpdate, DeadLetter)):
                yield msg
        await finishing
