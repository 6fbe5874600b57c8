"""A Go position: the board (sgfmill's, with captures), simple ko, passes, side to move, GTP notation.

kibitz rates Go on area scoring (Chinese rules, as the default engine is run), so a position is fully described by
the stones, the side to move, the point simple ko forbids and the komi: that tuple is :func:`GoPosition.key`, the
engine cache's key, the same way the EPD is for chess. Legality follows what GTP engines accept: the point must be
on the board and empty, not the point simple ko forbids, and not suicide (a move whose own group would have no
liberty after captures). Passes are always legal; two in a row end the game.

Moves are written in GTP coordinates: a column letter A-T without I, then the row from the bottom ("D4", "Q16"),
or ``pass``. :func:`from_gtp` and :func:`to_gtp` convert them to sgfmill's (row, col) with row 0 at the bottom.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sgfmill import boards

from .errors import IllegalMove

#: GTP column letters: the alphabet without I (19 letters; boards up to 25 would continue "UVWXYZ").
COLUMNS = "ABCDEFGHJKLMNOPQRSTUVWXYZ"
#: Board sizes kibitz rates: the default engine (GNU Go) plays up to 19x19, and every calibration is for 19x19.
SUPPORTED_SIZES = (9, 13, 19)
PASS = "pass"


def to_gtp(point: tuple[int, int] | None) -> str:
    """(row, col) with row 0 at the bottom -> "D4"; None -> "pass"."""
    if point is None:
        return PASS
    row, col = point
    return f"{COLUMNS[col]}{row + 1}"


def from_gtp(move: str, size: int) -> tuple[int, int] | None:
    """"D4" (any case) -> (row, col); "pass" -> None. Raises :class:`ValueError` for anything else."""
    m = move.strip().upper()
    if m == "PASS":
        return None
    if len(m) < 2 or m[0] not in COLUMNS[:size] or not m[1:].isdigit():
        raise ValueError(f"not a GTP move on a {size}x{size} board: {move!r}")
    row, col = int(m[1:]) - 1, COLUMNS.index(m[0])
    if not 0 <= row < size:
        raise ValueError(f"not a GTP move on a {size}x{size} board: {move!r}")
    return row, col


@dataclass
class GoPosition:
    """A Go game in progress; :meth:`play` applies a move or raises :class:`~analyzers.errors.IllegalMove`."""

    size: int = 19
    komi: float = 7.5
    to_move: str = "b"                      # "b" or "w", sgfmill's colours
    ko: tuple[int, int] | None = None       # the point simple ko forbids to the side to move
    passes: int = 0                         # consecutive passes just played
    captures: dict[str, int] = field(default_factory=lambda: {"b": 0, "w": 0})  # stones each colour has taken
    #: the game so far as (colour, GTP move), for an engine that replays it
    moves: list[tuple[str, str]] = field(default_factory=list)
    board: boards.Board = field(init=False)

    def __post_init__(self) -> None:
        if self.size not in SUPPORTED_SIZES:
            raise ValueError(f"unsupported board size {self.size} (kibitz rates {', '.join(map(str, SUPPORTED_SIZES))})")
        self.board = boards.Board(self.size)

    @property
    def ply(self) -> int:
        return len(self.moves)

    @property
    def over(self) -> bool:
        return self.passes >= 2

    def key(self) -> str:
        """The position for the engine cache: size, komi, side to move, ko point and the stones, row by row."""
        rows = "/".join("".join(c or "." for c in self.board.board[r]) for r in range(self.size))
        return f"go{self.size} km{self.komi:g} {self.to_move} ko={to_gtp(self.ko) if self.ko else '-'} {rows}"

    def is_legal(self, move: str) -> bool:
        try:
            self.copy().play(move)
        except IllegalMove:
            return False
        return True

    def play(self, move: str, *, colour: str | None = None) -> None:
        """Apply ``move`` (GTP) for the side to move (or ``colour``, for records that let one side move twice)."""
        colour = colour or self.to_move
        try:
            point = from_gtp(move, self.size)
        except ValueError as e:
            raise IllegalMove(str(e)) from None
        if point is None:
            self.passes += 1
            self.ko = None
        else:
            if point == self.ko and colour == self.to_move:
                raise IllegalMove(f"{move} retakes a ko at once")
            row, col = point
            if self.board.get(row, col) is not None:
                raise IllegalMove(f"{move} is occupied")
            before = self.board.copy()
            opponent_stones = sum(1 for c, _ in before.list_occupied_points() if c != colour)
            ko = self.board.play(row, col, colour)
            if self.board.get(row, col) is None:  # sgfmill allows self-capture; GTP engines do not
                self.board = before
                raise IllegalMove(f"{move} is suicide")
            taken = opponent_stones - sum(1 for c, _ in self.board.list_occupied_points() if c != colour)
            self.captures[colour] += taken
            self.ko = ko
            self.passes = 0
        self.moves.append((colour, to_gtp(point)))
        self.to_move = "w" if colour == "b" else "b"

    def copy(self) -> GoPosition:
        other = GoPosition(self.size, self.komi, self.to_move, self.ko, self.passes, dict(self.captures), list(self.moves))
        other.board = self.board.copy()
        return other


# -- the game adapter's view (analyzers.engine.adapter.GO): the same functions as analyzers.chessboard ------------
#: Colours by side: 0 is the first player (Black in Go), 1 the second.
SIDES = ("b", "w")


def start(setup: str | None = None) -> GoPosition:
    """The position ``setup`` describes: "SIZE KOMI", optionally followed by moves (what :func:`snapshot` writes);
    an empty 19x19 board with komi 7.5 when None. Raises :class:`IllegalMove` for a setup that cannot be played."""
    return restore(setup) if setup else GoPosition()


def play(pos: GoPosition, move: str, side: int | None = None) -> None:
    """Play ``move`` (GTP) for the side to move, or for ``side`` (0 Black, 1 White: a record may let one side move
    twice, a pass left out)."""
    pos.play(move, colour=SIDES[side] if side is not None else None)


def mover(pos: GoPosition) -> int:
    """The side to move: 0 Black (the first player), 1 White."""
    return SIDES.index(pos.to_move)


def snapshot(pos: GoPosition) -> str:
    """The game as text :func:`restore` replays: size, komi, then each move as colour and GTP point."""
    return " ".join([str(pos.size), f"{pos.komi:g}", *(f"{c}:{m}" for c, m in pos.moves)])


def restore(text: str) -> GoPosition:
    try:
        size, komi, *moves = text.split()
        pos = GoPosition(size=int(size), komi=float(komi))
        for cm in moves:
            colour, move = cm.split(":", 1)
            pos.play(move, colour=colour)
    except ValueError as e:  # a size kibitz does not rate, or text that is not a snapshot
        raise IllegalMove(f"not a Go position: {text[:40]!r} ({e})") from None
    return pos
