"""Go games from SGF files (sgfmill): one file may hold a collection of games.

Each game becomes a :class:`GoGame`: ids, players with their ranks as ratings (:mod:`analyzers.gorank`), komi,
result and the main line as (colour, GTP move). A game kibitz cannot rate comes back with its error instead of
moves, so one bad record never hides the rest of the file:

- a record that does not parse (a truncated file, not SGF): :class:`~analyzers.errors.MalformedRecord`;
- a board size without a calibration or a handicap game (setup stones, ``HA`` >= 2):
  :class:`~analyzers.errors.UnsupportedGame`.

Illegal moves are found when the game is played through (:class:`~analyzers.goboard.GoPosition`), naming the game
and the move. Server quirks handled here: Fox writes komi in hundredths (``KM[650]`` is 6.5) or in stones for Chinese
rules (``KM[375]``: 3.75 stones, 7.5 points), and ``KM[0]`` even in games played with komi (read as 6.5).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from sgfmill import sgf

from analyzers.errors import InputError, MalformedRecord, UnsupportedGame
from analyzers.goboard import SUPPORTED_SIZES, GoPosition, to_gtp
from analyzers.gorank import parse_rank
from schemas.messages import PlayerInfo, as_id

from .pipeline import SELF_PLAY

#: A collection file puts each game on a new line starting with "(;"; split there first, so a broken game is one
#: error and not the end of the file.
_GAME_START = re.compile(rb"\n(?=\s*\(;)")
#: Where a game tree starts (sgfmill's own pattern: "(" and ";" with blanks between).
_GAME_OPEN = re.compile(rb"\(\s*;")
#: What decides a game tree's depth: a parenthesis, or the start of a property value, skipped whole to its closing
#: bracket (escapes included).
_TREE_MARK = re.compile(rb"[()\[]")
_VALUE_REST = re.compile(rb"(?:[^\]\\]|\\.)*\]", re.S)
#: Komi used when a record says 0 in a game that was played with komi (Fox's quirk).
DEFAULT_KOMI = 6.5


@dataclass
class GoGame:
    game_id: str
    black: PlayerInfo
    white: PlayerInfo
    size: int = 19
    komi: float = DEFAULT_KOMI
    result: str = ""                 # "B+R", "W+3.5", "0" (draw) or "" when unknown
    moves: list[tuple[str, str]] = field(default_factory=list)  # (colour "b"/"w", GTP move)
    event: str = ""
    source: str = ""                 # "file.sgf#index"
    error: InputError | None = None
    record: bytes = b""              # the SGF record as read, for a dead letter

    def positions(self, plies: int | None = None) -> list[GoPosition]:
        """The position before each of the game's first ``plies`` moves (all of them when None), as the record plays
        them (a side moving twice included)."""
        pos, out = GoPosition(size=self.size, komi=self.komi), []
        for colour, move in self.moves[:plies]:
            out.append(pos.copy())
            pos.play(move, colour=colour)
        return out

    @property
    def black_score(self) -> float | None:
        """Black's score: 1, 0, 0.5 for a draw, None when the record has no result."""
        r = self.result.upper()
        if r.startswith("B+"):
            return 1.0
        if r.startswith("W+"):
            return 0.0
        if r in ("0", "DRAW", "JIGO"):
            return 0.5
        return None


def _komi(root: sgf.Tree_node, fox: bool) -> float:
    raw = root.get_raw("KM").decode(errors="replace").strip() if root.has_property("KM") else ""
    try:
        km = float(raw) if raw else DEFAULT_KOMI
    except ValueError:
        return DEFAULT_KOMI
    if fox:
        handicap = root.get("HA") if root.has_property("HA") else 0
        if km == 0:
            return 0.0 if handicap == 1 else DEFAULT_KOMI  # Fox's HA[1] is a game without komi
        if km >= 100:
            km /= 100
        if km == 3.75:  # Chinese komi in stones
            return 7.5
    return km


def _player(root: sgf.Tree_node, colour: str, game_id: str) -> PlayerInfo:
    tag = "PB" if colour == "b" else "PW"
    name = root.get(tag) if root.has_property(tag) else ""
    rank_tag = "BR" if colour == "b" else "WR"
    rating = None
    if root.has_property(rank_tag):
        try:
            rating = parse_rank(root.get(rank_tag))
        except ValueError:
            rating = None
    return PlayerInfo(id=as_id(name or "", fallback=as_id(f"{game_id}:{colour}")), name=name or "", rating=rating)


def parse_game(data: bytes, source: str) -> GoGame:
    """One SGF game record; errors are returned in :attr:`GoGame.error`, never raised."""
    game_id = as_id(f"{Path(source.split('#')[0]).stem}-{hashlib.sha1(data).hexdigest()[:10]}")
    unknown = PlayerInfo(id=as_id(f"{game_id}:b"))
    try:
        g = sgf.Sgf_game.from_bytes(data)
    except ValueError as e:
        return GoGame(game_id, unknown, PlayerInfo(id=as_id(f"{game_id}:w")), source=source, record=data,
                      error=MalformedRecord(f"{source}: not a readable SGF record ({e})", game_id=game_id))
    root = g.get_root()
    # Fox records name the server in a second AP, or carry its own time properties TC/TT
    fox = b"foxwq" in data[:2000] or (root.has_property("TC") and root.has_property("TT"))
    game = GoGame(game_id, _player(root, "b", game_id), _player(root, "w", game_id), size=g.get_size(),
                  komi=_komi(root, fox), result=(root.get("RE") if root.has_property("RE") else "") or "",
                  event=as_id((root.get("EV") if root.has_property("EV") else "") or "", fallback=""), source=source,
                  record=data)
    handicap = root.get("HA") if root.has_property("HA") else 0
    if game.black.id == game.white.id:  # one name on both sides (unnamed players get ids of their own)
        game.error = UnsupportedGame(f"{source}: Black and White are the same player ({game.black.id}); {SELF_PLAY}",
                                     game_id=game_id)
        return game
    if game.size not in SUPPORTED_SIZES:
        game.error = UnsupportedGame(f"{source}: board size {game.size} is not rated (sizes {SUPPORTED_SIZES})", game_id=game_id)
        return game
    if (handicap and int(handicap) >= 2) or root.has_property("AB") or root.has_property("AW"):
        game.error = UnsupportedGame(f"{source}: handicap games are not rated (HA {handicap}, setup stones "
                                     f"{'yes' if root.has_property('AB') or root.has_property('AW') else 'no'})", game_id=game_id)
        return game
    try:
        for node in g.get_main_sequence()[1:]:
            if node.has_setup_stones():  # stones added or removed mid-game: the position is not the moves' alone
                game.error = UnsupportedGame(f"{source}: stones set up after {len(game.moves)} moves (AB/AW/AE) are "
                                             "not rated: the moves alone do not give the position", game_id=game_id,
                                             ply=len(game.moves))
                return game
            colour, point = node.get_move()
            if colour is None:
                continue
            game.moves.append((colour, to_gtp(point)))
    except ValueError as e:
        game.error = MalformedRecord(f"{source}: unreadable move after {len(game.moves)} moves ({e})",
                                     game_id=game_id, ply=len(game.moves))
    return game


def split_collection(data: bytes) -> list[bytes]:
    """The game records of an SGF collection file: one per "(;" at the start of a line, and within a line one per
    game tree (a collection may run its games together, "(;...)(;...)", as files joined with ``cat`` do: only the
    first was read, the others lost without a word). A record that does not close is kept whole, to be reported."""
    return [game for part in _GAME_START.split(data) if part.strip() for game in _game_trees(part)]


def _game_trees(part: bytes) -> list[bytes]:
    """``part`` cut where a game tree closes and another starts ("(;" at depth 0). Property values are skipped whole
    (they may hold parentheses); a record that does not close is never cut, and a value that does not close ends the
    scan (so the scan is linear whatever the bytes)."""
    out, start, depth, closed, closed_at, i = [], 0, 0, False, 0, 0
    while (m := _TREE_MARK.search(part, i)) is not None:
        token, i = m.group(), m.end()
        if token == b"[":
            value = _VALUE_REST.match(part, i)
            if value is None:  # a value that never closes: nothing after it can be cut
                break
            i = value.end()
        elif token == b"(":
            if depth == 0 and closed and _GAME_OPEN.match(part, m.start()):
                out.append(part[start:closed_at])
                start = m.start()  # what lies between two game trees is not part of either
            depth += 1
        elif depth > 0:  # ")"
            depth -= 1
            closed, closed_at = depth == 0, i
    out.append(part[start:])
    return out


def read_sgf_games(path: str | Path) -> list[GoGame]:
    """Every game in an SGF file (a collection or a single game), in file order."""
    p = Path(path)
    return [parse_game(rec, f"{p.name}#{i}") for i, rec in enumerate(split_collection(p.read_bytes()))]
