"""A chess position for the game step: python-chess's board, UCI notation, legality, and the recapture rule's facts.

The counterpart of :mod:`analyzers.goboard`; :data:`analyzers.engine.adapter.CHESS` binds these functions to the
UCI engine so that the pipeline handles positions only through the adapter. Moves travel in UCI notation
("e2e4", "e7e8q"); :func:`play` applies one or raises :class:`~analyzers.errors.IllegalMove` saying why, leaving the
board unchanged. A position is stored as its FEN (:func:`snapshot`, :func:`restore`): the engine sees positions
without history (:func:`~analyzers.engine.analysis.canonical_board`), so nothing else is needed to go on.
"""

from __future__ import annotations

import chess

from .errors import IllegalMove


def start(fen: str | None = None) -> chess.Board:
    """The initial position (``fen``, or the standard one); raises :class:`IllegalMove` for an invalid FEN."""
    try:
        return chess.Board(fen) if fen else chess.Board()
    except ValueError as e:
        raise IllegalMove(f"invalid initial position: {e}") from None


def play(board: chess.Board, move: str, side: int | None = None) -> None:
    """Push ``move`` (UCI) for the side to move; ``side`` (0 White, 1 Black), when given, must be that side."""
    try:
        m = chess.Move.from_uci(move)
    except ValueError:
        raise IllegalMove(f"not a UCI move: {move}") from None
    if side is not None and side != mover(board):
        raise IllegalMove(f"{move}: {'Black' if board.turn == chess.BLACK else 'White'} is to move in {board.fen()}")
    if m not in board.legal_moves:
        raise IllegalMove(f"{move} is illegal in {board.fen()}")
    board.push(m)


def mover(board: chess.Board) -> int:
    """The side to move: 0 White (the first player), 1 Black."""
    return 0 if board.turn == chess.WHITE else 1


def copy(board: chess.Board) -> chess.Board:
    """An independent copy of the position without its move history (what the engine step keeps of it)."""
    return board.copy(stack=False)


def snapshot(board: chess.Board) -> str:
    return board.fen()


def restore(text: str) -> chess.Board:
    return chess.Board(text)


def last_capture(board: chess.Board) -> int | None:
    """The square the last move of ``board`` captured on, or None. Read from the board alone: a move captured if
    it reset the halfmove clock and was not a pawn push (a pawn captures when it changes file)."""
    if not board.move_stack:
        return None
    last = board.move_stack[-1]
    piece = board.piece_at(last.to_square)
    if piece is not None and piece.piece_type == chess.PAWN:
        captured = chess.square_file(last.from_square) != chess.square_file(last.to_square)
    else:
        captured = board.halfmove_clock == 0
    return last.to_square if captured else None


def retakes(board: chess.Board, move: str, captured_on: int | None) -> bool:
    """Whether ``move`` (UCI) in ``board`` takes back on ``captured_on`` (the fair-play recapture rule)."""
    if captured_on is None:
        return False
    m = chess.Move.from_uci(move)
    return m.to_square == captured_on and board.is_capture(m)
