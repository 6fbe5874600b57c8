"""What one engine search returns, as plain data that can be cached, logged and sent on the wire."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import chess

from ..gain import MATE_CP, score_cp


@dataclass(frozen=True, slots=True)
class Limits:
    """Search limits: exactly one of depth or nodes, and the number of principal variations."""

    depth: int | None = None
    nodes: int | None = None
    multipv: int = 1

    def __post_init__(self) -> None:
        if (self.depth is None) == (self.nodes is None):
            raise ValueError("give exactly one of depth or nodes")
        if self.multipv < 1:
            raise ValueError("multipv must be >= 1")

    @property
    def key(self) -> str:
        return (f"d{self.depth}" if self.depth is not None else f"n{self.nodes}") + f"-mpv{self.multipv}"

    @classmethod
    def from_key(cls, key: str) -> Limits:
        """The limits a :attr:`key` names (``d8-mpv5``, ``n20000-mpv1``)."""
        bound, sep, multipv = key.partition("-mpv")
        if not sep or bound[:1] not in ("d", "n") or not bound[1:].isdigit() or not multipv.isdigit():
            raise ValueError(f"not a limits key: {key!r}")
        n = int(bound[1:])
        return cls(depth=n, multipv=int(multipv)) if bound[0] == "d" else cls(nodes=n, multipv=int(multipv))


#: EPD strings of recently keyed positions. Every position is keyed twice in a row (after one move, then before the
#: next), and python-chess builds an EPD square by square (a third of a cached move's CPU), so remember the last few.
_EPD_MEMO: OrderedDict[tuple, str] = OrderedDict()
_EPD_MEMO_SIZE = 4096


def position_key(board: chess.Board) -> str:
    """The position without move counters (EPD: placement, side, castling, legal en passant)."""
    # piece bitboards, side, castling rights and the *legal* en passant square: exactly what EPD encodes
    memo_key = (board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings,
                board.occupied_co[chess.WHITE], board.occupied_co[chess.BLACK], board.promoted, board.turn,
                board.clean_castling_rights(), board.ep_square if board.has_legal_en_passant() else None)
    epd = _EPD_MEMO.get(memo_key)
    if epd is None:
        epd = _EPD_MEMO[memo_key] = board.epd()
        if len(_EPD_MEMO) > _EPD_MEMO_SIZE:
            _EPD_MEMO.popitem(last=False)
    else:
        _EPD_MEMO.move_to_end(memo_key)
    return epd


def canonical_board(board: chess.Board) -> chess.Board:
    """The board the engine is shown: the position alone, counters reset, no history.

    This is what makes the cache key (:func:`position_key`) determine the search completely: two move orders that
    reach the same position get the same answer. (The price: the engine cannot see repetitions or the 50-move
    counter, which matter in a vanishing fraction of real positions.)
    """
    return chess.Board(board.epd() + " 0 1")


@dataclass(frozen=True, slots=True)
class ScoredMove:
    """A candidate move with its score from the side to move: centipawns, or a UCI mate distance."""

    uci: str
    cp: int | None = None
    mate: int | None = None

    @property
    def value(self) -> int:
        """Centipawns under Ferreira's rules (mate = +/-3900, clamped)."""
        return score_cp(self.cp, self.mate)


@dataclass(frozen=True, slots=True)
class PositionAnalysis:
    """One search of one position: candidates best first, scores from the side to move."""

    key: str
    candidates: tuple[ScoredMove, ...]
    engine: str
    limits: str
    depth: int = 0
    nodes: int = 0
    time: float = 0.0
    terminal: str | None = None  # "checkmate" or "stalemate": no search was needed

    @property
    def best_cp(self) -> int:
        """The position's value for the side to move, in centipawns (mates and clamping applied)."""
        if self.terminal == "checkmate":
            return -MATE_CP
        if self.terminal == "stalemate" or not self.candidates:
            return 0
        return self.candidates[0].value

    def values_pawns(self) -> list[float]:
        return [c.value / 100.0 for c in self.candidates]

    def rank_of(self, uci: str) -> int | None:
        for i, c in enumerate(self.candidates):
            if c.uci == uci:
                return i
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key, "engine": self.engine, "limits": self.limits, "depth": self.depth,
            "nodes": self.nodes, "time": self.time, "terminal": self.terminal,
            "candidates": [[c.uci, c.cp, c.mate] for c in self.candidates],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PositionAnalysis:
        return cls(
            key=d["key"], engine=d["engine"], limits=d["limits"], depth=d["depth"], nodes=d["nodes"],
            time=d["time"], terminal=d["terminal"],
            candidates=tuple(ScoredMove(u, cp, m) for u, cp, m in d["candidates"]),
        )


def terminal_analysis(board: chess.Board, engine: str, limits: Limits) -> PositionAnalysis | None:
    """The analysis of a position with no legal moves, without asking an engine."""
    if board.is_checkmate():
        return PositionAnalysis(position_key(board), (), engine, limits.key, terminal="checkmate")
    if board.is_stalemate():
        return PositionAnalysis(position_key(board), (), engine, limits.key, terminal="stalemate")
    return None
