"""Game adapters: what the engine pool needs to know about a game, so that one pool serves chess and Go.

A :class:`GameAdapter` names the game's engine protocol (a class with ``start``/``analyse``/``kill``/``quit``), the
default binary, how a position is keyed for the cache, what the engine is shown (the position alone, so the key
determines the answer), which positions need no search, and how an analysis is read back from the cache. Moves
are applied by each game's position type: python-chess boards (UCI), :class:`~analyzers.goboard.GoPosition` (GTP).

- :data:`CHESS`: UCI engines (Stockfish) on python-chess boards;
- :data:`GO`: GTP engines (GNU Go) on :class:`~analyzers.goboard.GoPosition`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..goboard import GoPosition
from .analysis import PositionAnalysis, canonical_board, position_key, terminal_analysis
from .gtp import GoAnalysis, GtpEngine
from .uci import DEFAULT_OPTIONS, UciEngine


@dataclass(frozen=True)
class GameAdapter:
    name: str
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
    name="chess", default_engine="stockfish", engine_env="KIBITZ_ENGINE", make_engine=UciEngine,
    key=position_key, canonical=canonical_board, terminal=terminal_analysis, decode=PositionAnalysis.from_dict,
    describe=lambda b: b.epd(), default_options=dict(DEFAULT_OPTIONS),
)

GO = GameAdapter(
    name="go", default_engine="gnugo", engine_env="KIBITZ_GO_ENGINE", make_engine=GtpEngine,
    key=GoPosition.key, canonical=GoPosition.copy, terminal=lambda pos, engine, limits: None, decode=GoAnalysis.from_dict,
    describe=lambda p: f"go {p.size}x{p.size} after {p.ply} moves",
)
