"""Ingestion: PGN files and JSON-lines streams turned into kibitz input events.

PGN games become ``GameStarted``, one ``MoveEvent`` per ply (with the mover's clock when the PGN has ``[%clk]``)
and ``GameEnded``. A game whose movetext has an illegal move (or a null move), or a file cut off mid-game, still
yields its events up to the point of failure, plus an :class:`~analyzers.errors.InputError` naming the game and ply; a
game that cannot be rated at all (a chess variant, a start position that does not read: :func:`refusal`) yields its
error alone; the other games are unaffected.
"""

from __future__ import annotations

import asyncio
import codecs
import hashlib
import logging
import re
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, NamedTuple, TextIO, cast

import chess
import chess.pgn

from analyzers import chessboard
from analyzers.errors import IllegalMove, InputError, MalformedEvent, UnsupportedGame
from schemas import MAX_PLIES, RESULT_SCORES, GameEnded, GameStarted, MoveEvent, PlayerInfo, as_id
from schemas.messages import unrated

from .pipeline import SELF_PLAY

log = logging.getLogger("kibitz.ingest")

#: The demo: round 1 of the London Chess Classic 2011 (4 games), shipped with the package.
DEMO_PGN = Path(__file__).resolve().parent / "data" / "london2011_round1.pgn"

#: Seconds per ply assumed when a PGN has no clocks: replays then run at a steady, watchable pace.
NOMINAL_SECONDS_PER_PLY = 60.0
#: The tokens that end a game in PGN movetext.
RESULT_TOKENS = ("1-0", "0-1", "1/2-1/2", "*")


class TruncatedInput(InputError):
    """A PGN file that ends in the middle of a game."""

    reason = "truncated"


@dataclass
class PgnGame:
    game_id: str
    white: PlayerInfo
    black: PlayerInfo
    event: str
    result: str
    moves: list[str]
    clocks: list[float | None]
    initial_fen: str | None = None
    errors: list[InputError] = field(default_factory=list)
    time_control: str = ""  # the TimeControl tag, as a feed's game start carries it
    refused: bool = False  # not rated at all (:func:`refusal`): its error is all it gives

    @property
    def white_score(self) -> float | None:
        return RESULT_SCORES.get(self.result)

    def events(self) -> list[GameStarted | MoveEvent | GameEnded]:
        if self.refused:
            return []
        evs: list[GameStarted | MoveEvent | GameEnded] = [
            GameStarted(game_id=self.game_id, white=self.white, black=self.black, event=self.event,
                        time_control=self.time_control, initial_fen=self.initial_fen)
        ]
        evs += [MoveEvent(game_id=self.game_id, ply=i, uci=u, clock=c) for i, (u, c) in enumerate(zip(self.moves, self.clocks))]
        if self.result in RESULT_SCORES and not self.errors:
            evs.append(GameEnded(game_id=self.game_id, result=self.result, plies=len(self.moves)))
        return evs

    def think_times(self) -> list[float]:
        """Seconds each ply took, from ``[%clk]`` when both of the mover's clocks are known, else nominal."""
        out = []
        for i, c in enumerate(self.clocks):
            prev = self.clocks[i - 2] if i >= 2 else None
            if c is not None and prev is not None and 0 <= prev - c <= 3600:
                out.append(max(1.0, prev - c))
            else:
                out.append(NOMINAL_SECONDS_PER_PLY)
        return out


def rating_from_tag(value: str | None) -> float | None:
    """A PGN Elo tag's rating; None where it says unrated (:func:`~schemas.messages.unrated`) and for any text that
    is no rating (an archive's junk is not worth a game)."""
    if value is None or unrated(value):
        return None
    try:
        r = float(value)
    except ValueError:
        return None
    return r if 0 < r <= 4000 else None


#: Names that stand for "unknown player" in public PGN files; each gets an id of its own per game and side.
PLACEHOLDER_NAMES = frozenset({"", "?", "??", "???", "nn", "n.n.", "n.n", "unknown", "-"})


def is_placeholder(name: str) -> bool:
    return name.strip().casefold() in PLACEHOLDER_NAMES


def player_id_for(headers: chess.pgn.Headers, color: str, game_id: str) -> str:
    """A player's id: ``fide:<id>`` from the ``WhiteFideId``/``BlackFideId`` tag when present, else the name. A
    placeholder name (:data:`PLACEHOLDER_NAMES`) gets ``anon:<game id>:<color>``, so two unknown players are never
    merged into one rating, within a game or across games."""
    known = named_player_id(headers, color)
    if known is None:
        name = headers.get(color, "").strip()
        log.warning("placeholder player name: rated as a player of its own", extra={"game_id": game_id, "color": color.lower(), "player_name": name})
        return as_id(f"anon:{game_id}:{color.lower()}")
    return known


def named_player_id(headers: chess.pgn.Headers, color: str) -> str | None:
    """The id :func:`player_id_for` gives a named player (``fide:<id>``, else the name made a valid id), None for a
    placeholder name."""
    fide = headers.get(f"{color}FideId", "").strip()
    if fide.isdigit() and int(fide) > 0:
        return f"fide:{int(fide)}"
    name = headers.get(color, "").strip()
    return None if is_placeholder(name) else as_id(name)  # a name over 200 characters or with a tab makes a valid id


def player_info(headers: chess.pgn.Headers, color: str, game_id: str) -> PlayerInfo:
    """White's or Black's PlayerInfo from a game's tags: its id (:func:`player_id_for`), name and declared rating; the
    one reading of a file's games and a feed's."""
    name = headers.get(color, "?").strip() or "?"
    return PlayerInfo(id=player_id_for(headers, color, game_id), name=name, rating=rating_from_tag(headers.get(f"{color}Elo")))


def game_id_for(path: Path, index: int, headers: chess.pgn.Headers) -> str:
    """Stable id: file stem, index in the file, and a short hash of the identifying headers."""
    ident = "|".join(headers.get(k, "") for k in ("Event", "Round", "White", "Black", "Date"))
    return as_id(f"{path.stem}:{index}:{hashlib.sha1(ident.encode()).hexdigest()[:6]}")


class GameBuilder(chess.pgn.GameBuilder):
    """python-chess's game builder without its own log line per parse error: the errors stay in ``game.errors``,
    and kibitz reports each one once, as a rejection naming the game and the ply."""

    def handle_error(self, error: Exception) -> None:
        self.game.errors.append(error)

    def end_variation(self) -> None:
        # a ")" that closes no variation is skipped: python-chess would pop the main line itself and fail with an
        # IndexError at the next comment or annotation of the game
        if len(self.variation_stack) > 1:
            super().end_variation()


#: The tags of a game whose text sets none (python-chess's Seven Tag Roster defaults).
_NO_TAGS = dict(chess.pgn.Headers())


def blank_game(tags: chess.pgn.Headers, moves: Sequence[object], errors: object) -> bool:
    """Whether python-chess's "game" is no game: no tag set, no move (``moves``: its moves or main-line variations)
    and no error. A comment before a file's first tag pair (``{ Generated by ... }``, as some exports and relays write)
    or after its last game is read as such a game: it was rated as a game of "?" against "?" without a move, which in
    a followed feed never ends."""
    return not moves and not errors and dict(tags) == _NO_TAGS


def setup_fen(tags: chess.pgn.Headers) -> str | None:
    """The game's initial position from its tags (``FEN``, with or without ``SetUp``), None for the standard one."""
    return tags.get("FEN") if tags.get("SetUp") == "1" or "FEN" in tags else None


def refusal(tags: chess.pgn.Headers, game_id: str, source: str) -> InputError | None:
    """Why a game cannot be rated at all, from its tags, or None: a variant other than standard chess (its ``Variant``
    tag: Chess960, Crazyhouse, Atomic...), whose moves the game step, the engine profiles and the models do not read,
    an initial position that does not read (:func:`analyzers.chessboard.start`), or one player on both sides."""
    try:
        standard = tags.variant() is chess.Board and not tags.is_chess960()
    except ValueError:  # a variant python-chess does not know
        standard = False
    if not standard:
        return UnsupportedGame(f"{source}: variant {tags.get('Variant', '?')!r} is not rated: kibitz rates standard "
                               "chess", game_id=game_id)
    try:
        chessboard.start(setup_fen(tags))
    except IllegalMove as e:
        return IllegalMove(f"{source}: {e}", game_id=game_id)
    white = named_player_id(tags, "White")
    if white is not None and white == named_player_id(tags, "Black"):
        return UnsupportedGame(f"{source}: White and Black are the same player ({white}); {SELF_PLAY}", game_id=game_id)
    return None


#: Why the plies of a game past :data:`~schemas.MAX_PLIES` are not rated (a bound that keeps hostile input cheap; the
#: longest real games have about 500).
TOO_LONG = f"the game is longer than {MAX_PLIES} plies: ply {MAX_PLIES} and after are not rated"


class Stop(NamedTuple):
    """Why :func:`mainline` stopped reading a game's moves, and the error it is reported as."""

    why: str
    kind: type[InputError] = IllegalMove


def mainline(game: chess.pgn.Game) -> tuple[list[str], list[float | None], Stop | None]:
    """The UCI moves and ``[%clk]`` clocks of a game's main line, up to a move that is no move of chess (python-chess
    reads ``--`` as the null move, which no board of kibitz plays) or to :data:`~schemas.MAX_PLIES` plies, and why it
    stopped there (None if it did not). Files and feeds read a game's moves with it."""
    moves: list[str] = []
    clocks: list[float | None] = []
    for node in game.mainline():
        if not node.move:
            return moves, clocks, Stop(f"a null move (--) is not a move of chess (ply {len(moves)})")
        if len(moves) == MAX_PLIES:
            return moves, clocks, Stop(TOO_LONG, UnsupportedGame)
        moves.append(node.move.uci())
        clocks.append(node.clock())
    return moves, clocks, None


def read_game(stream: TextIO | TextLines) -> chess.pgn.Game | None:
    """The next game of a PGN stream (None at its end), its parse errors in ``game.errors``, none logged."""
    # python-chess reads a game with readline() alone, all a TextLines has
    return chess.pgn.read_game(cast(TextIO, stream), Visitor=GameBuilder)


def pgn_game_from(game: chess.pgn.Game, path: Path, index: int) -> PgnGame:
    """A parsed python-chess game as kibitz's :class:`PgnGame`; an illegal move becomes an error at its ply, a game
    that cannot be rated at all (:func:`refusal`) its error and no moves, a game past :data:`~schemas.MAX_PLIES` its
    first MAX_PLIES plies and an error."""
    gid = game_id_for(path, index, game.headers)
    refused = refusal(game.headers, gid, path.name)
    moves, clocks, stop = mainline(game) if refused is None else ([], [], None)
    g = PgnGame(gid, player_info(game.headers, "White", gid), player_info(game.headers, "Black", gid),
                as_id(game.headers.get("Event", ""), fallback=""),
                game.headers.get("Result", "*"), moves, clocks, setup_fen(game.headers),
                time_control=game.headers.get("TimeControl", ""))
    if refused is not None:
        g.errors.append(refused)
        g.refused = True
        return g
    why = [(stop.kind, stop.why)] if stop is not None else [(IllegalMove, str(err)) for err in game.errors]
    g.errors += [kind(f"{path.name}: {text}", game_id=gid, ply=len(moves)) for kind, text in why]
    return g


#: The first bytes of compressed files a games file may come as (database downloads): decompressed first, by the user.
COMPRESSED = {b"\x1f\x8b": "gzip", **{b"BZh%d" % level: "bzip2" for level in range(1, 10)}, b"PK\x03\x04": "zip",
              b"\x28\xb5\x2f\xfd": "zstd", b"\xfd7zXZ\x00": "xz", b"7z\xbc\xaf\x27\x1c": "7z"}
#: How much of a file :func:`not_a_text` reads.
SNIFF_BYTES = 8192
#: A UTF-16 text starts with one of these (Windows "Unicode" text): it has NULs, and :func:`decode_pgn` reads it.
UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def not_a_text(data: bytes) -> str | None:
    """Why ``data`` (a file's first bytes) is not a games text (PGN or SGF), or None: a compressed file, or binary
    content (a NUL byte where no text encoding kibitz reads has one). python-chess finds moves in any bytes ("e4" in
    a binary's strings), so such a file would start games of garbage."""
    head = data[:SNIFF_BYTES]
    for magic, kind in COMPRESSED.items():
        if head.startswith(magic):
            return f"{kind}-compressed: decompress it first"
    if head.startswith(UTF16_BOMS):
        return None
    return "binary content, not a text" if b"\x00" in head else None


#: An SGF record (Go) starts with its first game tree, "(;", after white space (and a UTF-8 byte order mark). No PGN
#: starts so: "(" opens a variation, which needs a move before it.
SGF_START = re.compile(r"\A\ufeff?\s*\(\s*;")


def sgf_text(head: bytes) -> bool:
    """Whether a file's first bytes are an SGF record (Go games) rather than PGN, whatever the file is named."""
    return SGF_START.match(head[:SNIFF_BYTES].decode("utf-8", "replace")) is not None


def decode_pgn(data: bytes, *, partial: bool = False) -> tuple[str, str]:
    """PGN bytes as text and the encoding read: UTF-8 (what current sources write), else Windows-1252, which older
    databases and ChessBase exports use (Latin-1 when a byte is not Windows-1252); UTF-16 with its byte order mark
    (Windows "Unicode" text). Read as UTF-8 with replacement characters, "Müller" and "Möller" in such a file would
    both be "M\ufffdller": one id, one rating. A text mostly in UTF-8 with a stray bad byte stays UTF-8 (the bad byte
    replaced). ``partial``: the text may stop inside a character (a feed being written); that character is left for
    the next read. The text is then made one python-chess reads right (:func:`normalize_pgn`). Raises
    :class:`~analyzers.errors.MalformedEvent` for bytes that are not a text (:func:`not_a_text`) or an SGF record."""
    text, encoding = _decode(data, partial)
    if SGF_START.match(text):
        # python-chess reads one game of "?" against "?" out of it, never ended (a feed followed for ever)
        raise MalformedEvent("an SGF record (Go games), not PGN")
    return normalize_pgn(text), encoding


#: A carriage return that is not part of a CRLF line end.
_LONE_CR = re.compile(r"\r(?!\n)")
#: Chess figures (U+2654-U+265F) and the SAN letters they stand for (none for a pawn).
_FIGURES = tuple(chr(c) for c in range(0x2654, 0x2660))
_FIGURINE_LETTERS = str.maketrans({f: "KQRBN"[i % 6] if i % 6 < 5 else "" for i, f in enumerate(_FIGURES)})
#: A draw written "1/2" as the last token of a game's moves (before a blank line or the end of the text).
_SHORT_DRAW = re.compile(r"(?<=\s)1/2(?=[ \t]*(?:\r?\n[ \t]*\r?\n|\s*\Z))")
#: A line break followed by a tag pair's line: where a game's tags may start.
_TAG_LINE = re.compile(r'\n\[[A-Za-z0-9_]+[ \t]+"')


def normalize_pgn(text: str) -> str:
    """A PGN text as python-chess reads it right. Each of these read wrong, without a word of error:

    - a carriage return alone ends a line (old Mac text): python-chess reads lines at LF, so the text was one line;
    - a game's moves running straight into the next game's tag pairs (files joined with ``cat``, one not ending in a
      blank line) get the blank line python-chess ends a game's moves at: it read the tags as moves, and the next
      game as "?" against "?";
    - byte order marks go (files joined with ``cat``, each written with one): python-chess skips one only at the start
      of a game's first line, and one after a blank line made a game of "?" against "?" without a move;
    - a draw written "½-½", or "1/2" where the game's Result tag says so, becomes "1/2-1/2": neither is a result
      token, so the game was taken as cut short;
    - figurine notation (♘f3) becomes SAN letters (Nf3): python-chess skipped the figure, read "f3", and rejected the
      game at a later move that this made illegal.
    """
    if "\ufeff" in text:
        text = text.replace("\ufeff", "")
    if "½" in text:  # the result as some exports write a draw: not a result token for python-chess
        text = text.replace("½-½", "1/2-1/2")
    if '[Result "1/2"]' in text:  # older databases' draw: in the Result tag, and as the token ending the moves
        text = _SHORT_DRAW.sub("1/2-1/2", text.replace('[Result "1/2"]', '[Result "1/2-1/2"]'))
    if any(f in text for f in _FIGURES):  # figurine notation (♘f3): python-chess skips the figure and reads "f3", a pawn move
        text = text.translate(_FIGURINE_LETTERS)
    if "\r" in text:
        text = _LONE_CR.sub("\n", text)
    cuts = []
    for m in _TAG_LINE.finditer(text):
        end = m.start() - (text[m.start() - 1] == "\r")
        if text[end - 1] in "]\n":  # after a tag pair or a blank line, as nearly every tag pair is: nothing to do
            continue
        before = text[text.rfind("\n", 0, m.start()) + 1 : m.start()].strip()
        if before and not before.startswith("["):  # a line of moves (or a comment, where a blank line is harmless)
            cuts.append(m.start() + 1)
    if not cuts:
        return text
    return "".join(text[a:b] + "\n" for a, b in zip([0, *cuts], cuts)) + text[cuts[-1]:]


def _decode(data: bytes, partial: bool) -> tuple[str, str]:
    why = not_a_text(data)
    if why is not None:
        raise MalformedEvent(f"not a PGN text: {why}")
    if data.startswith(UTF16_BOMS):
        utf16 = codecs.getincrementaldecoder("utf-16")(errors="replace")
        return utf16.decode(data, final=not partial), "utf-16"
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        return decoder.decode(data, final=not partial), "utf-8"
    except UnicodeDecodeError:
        pass
    text = data.decode("utf-8", errors="replace")
    if any(ord(c) > 127 and c != "\ufffd" for c in text):  # valid multi-byte characters too: a UTF-8 text, damaged
        return text, "utf-8"
    try:
        return data.decode("cp1252"), "cp1252"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


def ends_in_result(text: str) -> bool:
    """Whether a PGN text's last game is whole: its last token, past any comments after it (``... 1-0 { end of round
    }``), is a result. A file that does not is cut short; a feed's last game may still be growing."""
    return last_token(text).endswith(RESULT_TOKENS)


def last_token(text: str) -> str:
    """A PGN text's last token past any comments after it: a whole game's result, else what the text stops at (a
    move, or a mark that is no PGN result such as a database's forfeit "+/-"), which a truncation error names."""
    text = text.rstrip()
    while text.endswith("}") and (i := text.rfind("{")) >= 0:
        text = text[:i].rstrip()
    return text.rsplit(None, 1)[-1] if text else ""


class TextLines:
    """The lines of a text, read as python-chess reads a PGN (``readline``), without a copy of it: io.StringIO keeps
    its own, at four bytes a character once a line is not ASCII (a 52 MB file of 77,783 games read and turned into
    events one game at a time: 309 MB peak with it, 160 MB without, 60 MB of them the interpreter and its imports)."""

    __slots__ = ("text", "pos")

    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def readline(self) -> str:
        end = self.text.find("\n", self.pos) + 1 or len(self.text)
        line, self.pos = self.text[self.pos:end], end
        return line


def read_pgn_games(path: str | Path) -> Iterator[PgnGame]:
    """Every game in a PGN file, with input errors attached to the game they concern (:func:`decode_pgn` reads its
    encoding), one at a time: a caller that takes each game as it comes holds the file's text and one game, not every
    game (a PgnGame is about 13 KB; a 52 MB file of 77,783 games held 1 GB as a list). A file that is not a text raises
    :class:`~analyzers.errors.MalformedEvent` naming it."""
    path = Path(path)
    try:
        text, encoding = decode_pgn(path.read_bytes())
    except MalformedEvent as e:
        raise MalformedEvent(f"{path.name}: {e}") from None
    if encoding != "utf-8":
        log.warning("PGN file is not UTF-8: read as %s", encoding, extra={"file": path.name, "encoding": encoding})
    truncated = bool(text.strip()) and not ends_in_result(text)
    stream = TextLines(text)
    index, previous = 0, None
    while (game := read_game(stream)) is not None:
        if blank_game(game.headers, game.variations, game.errors):
            continue  # a comment outside any game: the next game keeps the index it has without it
        if previous is not None:
            yield previous
        previous, index = pgn_game_from(game, path, index), index + 1
    if previous is not None:
        if truncated:  # known once the game after it is known to be none
            previous.errors.append(TruncatedInput(
                f"{path.name} ends in the middle of this game: its text stops at {last_token(text)[-40:]!r}, not at a "
                f"result ({', '.join(RESULT_TOKENS)})", game_id=previous.game_id, ply=len(previous.moves)))
        yield previous


def read_line(stream: BinaryIO, limit: int) -> bytes | None:
    """The next line of a byte stream (None at its end). A line longer than ``limit`` bytes is read to its end but
    only its first ``limit + 1`` bytes are kept, so it is rejected as too long without holding it in memory."""
    line = stream.readline(limit + 1)
    if not line:
        return None
    if len(line) > limit and not line.endswith(b"\n"):
        while (rest := stream.readline(limit)) and not rest.endswith(b"\n"):
            pass
    return line


@dataclass(order=True)
class TimedEvent:
    at: float
    seq: int
    event: GameStarted | MoveEvent | GameEnded = field(compare=False)


def replay_timeline(games: Iterable[PgnGame], *, speed: float | None) -> list[TimedEvent]:
    """All games' events merged on one clock, as if the games were played side by side from time 0.

    ``speed`` divides real thinking times (60 = a minute of play per second); ``None`` means as fast as possible
    (everything at t = 0, in order).
    """
    out: list[TimedEvent] = []
    seq = 0
    for g in games:
        t = 0.0
        evs = g.events()
        times = g.think_times()
        for ev in evs:
            if isinstance(ev, MoveEvent) and speed:
                t += times[ev.ply] / speed
            out.append(TimedEvent(t if speed else 0.0, seq, ev))
            seq += 1
    out.sort()
    return out


async def paced(timeline: Iterable[TimedEvent]) -> AsyncIterator[TimedEvent]:
    """Yield each event of a :func:`replay_timeline` when its time comes (at once when it is already due)."""
    t0 = time.monotonic()
    for te in timeline:
        delay = te.at - (time.monotonic() - t0)
        if delay > 0:
            await asyncio.sleep(delay)
        yield te
