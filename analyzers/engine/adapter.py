"""Game adapters: everything the pipeline and the engine pool know of a game, so that one core serves chess and Go.

A :class:`GameAdapter` has two halves:

- the rules (from :mod:`analyzers.chessboard` or :mod:`analyzers.goboard`): the initial position, a move applied in
  the game's notation (UCI, GTP) or refused with :class:`~analyzers.errors.IllegalMove`, the side to move (0 the
  first player: White in chess, Black in Go), a position stored as text and restored, and the facts the recapture
  rule of fair play reads (chess only; Go has none);
- the engine request: the engine protocol (a class with ``start``/``analyse``/``kill``/``quit``), the default
  binary, how a position is keyed for the cache, what the engine is shown (the position alone, so the key
  determines the answer), which positions need no search, and how an analysis is read back from the cache.

- :data:`CHESS`: python-chess boards, UCI engines (Stockfish);
- :data:`GO`: :class:`~analyzers.goboard.GoPosition` (sgfmill), GTP engines (GNU Go); :data:`GO_KATAGO` the same
  rules with KataGo's analysis engine (JSON).

:data:`GAMES` finds an adapter by the ``game`` field of the messages ("chess", "go").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .. import chessboard, goboard
from ..goboard import GoPosition
from .analysis import PositionAnalysis, canonical_board, position_key, terminal_analysis
from .gtp import GoAnalysis, GtpEngine
from .katago import KATAGO_HOME, KataGoEngine, KataGoLimits, katago_key
from .uci import DEFAULT_OPTIONS, UciEngine


@dataclass(frozen=True)
class GameAdapter:
    name: str                      # the messages' ``game`` field
    # -- rules ------------------------------------------------------------------------------------------
    start: Callable[..., Any]      # the initial position from the game's setup (chess: a FEN; Go: size, komi)
    play: Callable[..., None]      # play(position, move, side=None): apply a move in place or raise IllegalMove
    mover: Callable[[Any], int]    # the side to move: 0 the first player, 1 the second
    copy: Callable[[Any], Any]     # an independent copy (without history where the game has one)
    snapshot: Callable[[Any], str]  # the position as text, for stored state
    restore: Callable[[str], Any]   # ... and back
    last_capture: Callable[[Any], Any | None]     # where the last move captured (chess: a square), or None
    retakes: Callable[[Any, str, Any | None], bool]  # whether a move takes back on that point
    ply: Callable[[Any], int]      # half-moves played before a position, as the game counts them (chess: its FEN's)
    # -- engine request ---------------------------------------------------------------------------------
    default_engine: str            # binary looked up on PATH and in /usr/games
    engine_env: str                # environment variable that overrides it
    make_engine: Callable[[Any, Mapping[str, Any]], Any]
    key: Callable[[Any], str]      # the cache key of a position
    canonical: Callable[[Any], Any]  # what the engine is shown (an independent copy)
    terminal: Callable[[Any, str, Any], Any | None]  # the analysis of a position that needs no search, or None
    decode: Callable[[dict[str, Any]], Any]           # an analysis from its to_dict()
    describe: Callable[[Any], str]                     # the position in error messages
    default_options: dict[str, Any] = field(default_factory=dict)


CHESS = GameAdapter(
    name="chess", start=chessboard.start, play=chessboard.play, mover=chessboard.mover, copy=chessboard.copy,
    snapshot=chessboard.snapshot, restore=chessboard.restore, last_capture=chessboard.last_capture,
    retakes=chessboard.retakes, ply=chessboard.ply, default_engine="stockfish", engine_env="KIBITZ_ENGINE", make_engine=UciEngine,
    key=position_key, canonical=canonical_board, terminal=terminal_analysis, decode=PositionAnalysis.from_dict,
    describe=lambda b: b.epd(), default_options=dict(DEFAULT_OPTIONS),
)

GO = GameAdapter(
    name="go", start=goboard.start, play=goboard.play, mover=goboard.mover, copy=GoPosition.copy,
    snapshot=goboard.snapshot, restore=goboard.restore, last_capture=lambda pos: None,
    retakes=lambda pos, move, on: False, ply=lambda pos: pos.ply, default_engine="gnugo", engine_env="KIBITZ_GO_ENGINE", make_engine=GtpEngine,
    key=GoPosition.key, canonical=GoPosition.copy, terminal=lambda pos, engine, limits: None, decode=GoAnalysis.from_dict,
    describe=lambda p: f"go {p.size}x{p.size} after {p.ply} moves",
)

#: Go with KataGo's analysis engine (:mod:`.katago`): the same rules, a network's evaluation of each position. The
#: network reads the last moves too, so they are part of the key; binary, network and configuration from
#: ``$KIBITZ_KATAGO``, ``$KIBITZ_KATAGO_MODEL``, ``$KIBITZ_KATAGO_CONFIG`` (default: what deploy/katago/setup.sh installs).
GO_KATAGO = replace(GO, default_engine=str(KATAGO_HOME / "katago"), engine_env="KIBITZ_KATAGO", make_engine=KataGoEngine, key=katago_key)


def go_adapter(limits: object) -> GameAdapter:
    """The Go adapter whose engine searches to ``limits``: :data:`GO_KATAGO` for KataGo's visits, else :data:`GO`."""
    return GO_KATAGO if isinstance(limits, KataGoLimits) else GO


#: The adapters by the messages' ``game`` field.
GAMES: dict[str, GameAdapter] = {g.name: g for g in (CHESS, GO)}
