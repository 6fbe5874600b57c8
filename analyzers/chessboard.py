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

#: What makes a position no position of chess (python-chess's status flags): a side without a king or with two, a pawn
#: on its first or last rank, the side not to move in check, an empty board. Stockfish is not made for such
#: positions (without a king it crashes: a restart per search, then a dead letter). Castling rights or an en-passant
#: square the position does not allow are not among them: python-chess and the engine ignore those.
NOT_CHESS = {chess.STATUS_EMPTY: "an empty board", chess.STATUS_NO_WHITE_KING: "no white king",
             chess.STATUS_NO_BLACK_KING: "no black king", chess.STATUS_TOO_MANY_KINGS: "more than one king a side",
             chess.STATUS_PAWNS_ON_BACKRANK: "a pawn on the first or last rank",
             chess.STATUS_OPPOSITE_CHECK: "the side not to move is in check"}


def start(fen: str | None = None) -> chess.Board:
    """The initial position (``fen``, or the standard one); raises :class:`IllegalMove` for a FEN that does not read
    or that is no position of chess (:data:`NOT_CHESS`)."""
    try:
        board = chess.Board(fen) if fen else chess.Board()
    except ValueError as e:
        raise IllegalMove(f"invalid initial position: {e}") from None
    status = board.status()
    wrong = [why for flag, why in NOT_CHESS.items() if status & flag]
    if wrong:
        raise IllegalMove(f"invalid initial position {fen}: {', '.join(wrong)}")
    return board


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


def ply(board: chess.Board) -> int:
    """Half-moves played before ``board`` as its move number says: a game set up from a FEN (a thematic opening, a
    game resumed or joined late) starts as far into the game as the FEN's move number, not at ply 0."""
    return board.ply()


def board_result(board: chess.Board) -> str | None:
    """The result the rules give ``board`` by themselves: checkmate ("1-0", "0-1") or stalemate ("1/2-1/2"); None
    where the game could go on (or end only by a claim, a flag or an agreement)."""
    if board.is_checkmate():
        return "0-1" if board.turn == chess.WHITE else "1-0"
    return "1/2-1/2" if board.is_stalemate() else None


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
