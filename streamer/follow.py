"""Following live PGN feeds: a file that a board relay rewrites, or a URL a broadcast site serves, polled; or a URL
that streams.

A :class:`PgnSource` fetches the feed's text only when it changed (size and mtime for a file; a conditional GET
with ``If-None-Match`` / ``If-Modified-Since`` for a URL). A :class:`PgnStream` (``stream+https://...``) reads a
URL that keeps its connection open and sends a game's whole PGN at each change, and gives the latest PGN of every
game as the feed's text. A :class:`FeedTracker` turns each new text into the
events it adds: a :class:`~schemas.GameStarted` for a game seen for the first time, a :class:`~schemas.MoveEvent`
(with its ``[%clk]`` clock) per new ply, a :class:`~schemas.GameEnded` once the result tag is set.

A feed is rewritten while it is read, so nothing in one poll is taken as final. A whole game's text ends with its
result token (``*`` while it is being played), as PGN requires; the last game of a text that does not is being
written, and what it shows may still change:

- its tag pairs until a blank line or the moves follow them: until then the game is not seen at all (a half-written
  White or Black tag would name another game);
- its last move (``O-O`` may be the start of ``O-O-O``, its ``[%clk]`` comment may still be coming) and its end
  (the moves after the last one shown may be missing): both wait until the text grows, or until it has stayed as it
  is for :data:`STABLE_POLLS` polls (a feed that leaves out the result token);
- a game shorter than before (the file is being rewritten, or half-written) is left as it is: its known plies stay,
  and the next poll sees the rest;
- a move that fails to parse at the end of the text is a half-written move, retried at the next poll; one that
  fails elsewhere, or is still there after :data:`STABLE_POLLS` polls, is rejected (a dead letter) and the game
  waits for its correction;
- a game whose moves *change* (an operator corrected a wrongly entered move) is restarted under a new id
  (``<id>~2``, ...), with a warning in the log: the plies already rated stay rated in the old game; its start names
  the game it corrects and the first ply that differs (``GameStarted.corrects``, ``corrects_from``), so an overlay of
  the old id goes on showing the game, and the plies before the correction count in the new game's own scope only,
  not a second time in the players' event and overall scopes;
- a game whose tags change (an operator corrected a player's name or the round, which makes another key) is the
  same kind of correction when the game under its new tags begins with every move delivered of a game that has just
  left the text, is not over and has the same player on one side at least, one to one (:meth:`FeedTracker._renamed`):
  its start names the old game and the sides whose player changed (``GameStarted.renamed``), whose plies count in
  full for the new player;
- a game missing from the text for :data:`STABLE_POLLS` polls in a row otherwise (taken out, both names corrected at
  once) is taken as over, with a warning in the log, so a follow ``until_ended`` is not held up by it; followed again
  if it comes back;
- an internal error on one game (a fault of kibitz) is logged once and that game left alone; the others go on.

Game ids are stable across polls and restarts of ``kibitz follow``: the source's name and a hash of the headers
that identify a game (Event, Site, Date, Round, White, Black). Games of one feed that share those headers (a tiebreak
game under the same Round, boards whose players are not named yet) are told apart by their moves, in the order of the
text: the first has the id a game alone would have, the others ``<id>#2``, ``#3``...
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import io
import logging
import os
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import chess
import chess.pgn

from analyzers.errors import IllegalMove, InputError, MalformedEvent, SourceUnavailable
from schemas import RESULT_SCORES, Color, GameEnded, GameStarted, MoveEvent, as_id

from .ingest import blank_game, decode_pgn, ends_in_result, mainline, named_player_id, player_info, read_game, refusal, setup_fen

log = logging.getLogger("kibitz.follow")

#: Seconds between polls of a source (broadcast sites refresh their round PGN every few seconds).
DEFAULT_INTERVAL = 2.0
#: The end of a feed's text that is not a whole game (a parse error, a last game without its result token) is taken as
#: the feed's content once the same text has been polled this many times.
STABLE_POLLS = 3
#: A feed's text is read whole at every change (a relay rewrites it), so it has a bound: 64 MB is some 12,000 games
#: with clocks, far beyond a round of any broadcast. A larger one (a whole database, a URL serving something else) is
#: the feed being unavailable, so memory stays bounded whatever a URL serves.
MAX_FEED_BYTES = 64 * 1024 * 1024
#: The version of a saved follow state (:meth:`Follower.state`); a state of another version is refused, not guessed at.
STATE_VERSION = 1
#: Headers that identify a game within a feed.
IDENT_HEADERS = ("Event", "Site", "Date", "Round", "White", "Black")

FeedEvent = GameStarted | MoveEvent | GameEnded


def feed_text(where: str, data: bytes, *, partial: bool = False) -> tuple[str, str]:
    """A feed's bytes as text and the encoding read (:func:`~streamer.ingest.decode_pgn`). Markup (an HTML page: a
    wrong URL, a login or error page served as 200), compressed or binary bytes are the feed ``where`` being
    unavailable, not PGN: python-chess would find moves in their words ("e4") and start games of them."""
    try:
        text, encoding = decode_pgn(data, partial=partial)
    except MalformedEvent as e:
        raise SourceUnavailable(f"{where}: {e}") from None
    if text.lstrip("\ufeff \t\r\n").startswith("<"):
        raise SourceUnavailable(f"{where} is markup (an HTML page?), not PGN")
    return text, encoding


def feed_name(location: str) -> str:
    """A feed's short name, the first part of its games' ids: the file name of its path or URL path, without suffix."""
    url = urlparse(location)
    return Path(url.path if url.scheme in ("http", "https") else location).stem or "feed"


#: Query parameters of a feed's URL whose values are credentials (a private broadcast's ``?token=...``).
SECRET_QUERY = re.compile(r"(?i)(token|key|secret|password|passwd|pwd|auth|signature|sig|credential|session)")


def _query(query: str) -> list[tuple[str, str, str]]:
    """A URL query's parameters as (name, "=" or "", value), in order."""
    return [part.partition("=") for part in query.split("&") if part]


def _secret(name: str, value: str) -> bool:
    return bool(value) and SECRET_QUERY.search(name) is not None


def shown_url(location: str) -> str:
    """A feed's location as messages and logs show it: a URL's password and the values of its credential-like query
    parameters (:data:`SECRET_QUERY`) as ``***``; a path as it is."""
    url = urlparse(location)
    if url.scheme not in ("http", "https", "stream+http", "stream+https"):
        return location
    netloc = url.netloc
    if url.password is not None:
        netloc = f"{url.username or ''}:***@{url.hostname or ''}" + (f":{url.port}" if url.port else "")
    query = "&".join(f"{k}=***" if _secret(k, v) else k + sep + v for k, sep, v in _query(url.query))
    return url._replace(netloc=netloc, query=query).geturl()


def url_secrets(location: str) -> list[str]:
    """The credentials :func:`shown_url` hides, raw and percent-decoded, for the log formatter to cut out of every line
    (a library's error may quote the URL as it fetched it)."""
    url = urlparse(location.removeprefix(STREAM_PREFIX))
    if url.scheme not in ("http", "https"):
        return []
    found = [url.password or ""] + [v for k, _, v in _query(url.query) if _secret(k, v)]
    return sorted({form for v in found if v for form in (v, unquote(v))})


def identifying_tags(headers: chess.pgn.Headers, extra: tuple[str, ...] = ()) -> str:
    """The tags that identify a game within a feed (:data:`IDENT_HEADERS`, then ``extra``), joined."""
    return "|".join(headers.get(k, "") for k in (*IDENT_HEADERS, *extra))


class PgnSource:
    """One feed: a local path or an http(s) URL. :meth:`fetch` returns the text when it changed, else None."""

    def __init__(self, location: str, *, timeout: float = 10.0) -> None:
        self.location = location
        self.shown = shown_url(location)  # what messages and logs name (no credentials of the URL)
        self.is_url = urlparse(location).scheme in ("http", "https")
        self.name = feed_name(location)
        self.timeout = timeout
        self._etag: str | None = None
        self._modified: str | None = None
        self._stat: tuple[int, int] | None = None
        self._session: Any = None  # an aiohttp.ClientSession, made at the first fetch of a URL
        self._encoding = "utf-8"   # what the last text was read as (decode_pgn)

    async def fetch(self) -> str | None:
        """The feed's text if it changed since the last fetch, None if not. Raises :class:`SourceUnavailable` when
        the feed cannot be read now (missing file, HTTP error, connection refused): the caller keeps its state and
        polls again."""
        return await (self._fetch_url() if self.is_url else asyncio.to_thread(self._fetch_file))

    def _fetch_file(self) -> str | None:
        try:
            st = os.stat(self.location)
            stat = (st.st_size, st.st_mtime_ns)
            if stat == self._stat:
                return None
            with open(self.location, "rb") as f:
                data = f.read(MAX_FEED_BYTES + 1)  # the file may grow between the stat and the read
        except OSError as e:
            raise SourceUnavailable(f"cannot read {self.shown}: {e.strerror or e}") from e
        self._check_size(len(data))
        text = self._pgn_text(data)
        self._stat = stat
        return text

    async def _fetch_url(self) -> str | None:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        headers = {}
        if self._etag:
            headers["If-None-Match"] = self._etag
        if self._modified:
            headers["If-Modified-Since"] = self._modified
        size = 0
        try:
            async with self._session.get(self.location, headers=headers) as r:
                if r.status == 304:
                    return None
                if r.status != 200:
                    raise SourceUnavailable(f"{self.shown} answered HTTP {r.status}")
                self._check_size(r.content_length or 0)  # a stated length over the bound: not even read
                chunks: list[bytes] = []
                async for chunk in r.content.iter_chunked(1 << 16):
                    size += len(chunk)
                    self._check_size(size)
                    chunks.append(chunk)
                text = self._pgn_text(b"".join(chunks))
                self._etag = r.headers.get("ETag")
                self._modified = r.headers.get("Last-Modified")
        except TimeoutError as e:
            if size:  # a body that does not end: a streaming endpoint, which a poll never reads to its end
                raise SourceUnavailable(
                    f"{self.shown} was still sending after {self.timeout:g} s ({size} bytes): a streaming endpoint? "
                    f"A URL is fetched whole at every poll: follow {STREAM_PREFIX}{self.shown} to read it as a "
                    "stream, or the URL that serves the round's whole PGN") from e
            raise SourceUnavailable(f"cannot fetch {self.shown}: no answer within {self.timeout:g} s") from e
        except aiohttp.ClientError as e:
            raise SourceUnavailable(f"cannot fetch {self.shown}: {e!r}") from e
        return text

    def _check_size(self, size: int) -> None:
        if size > MAX_FEED_BYTES:
            bound = f"{MAX_FEED_BYTES // 2**20} MB" if MAX_FEED_BYTES >= 2**20 else f"{MAX_FEED_BYTES} bytes"
            raise SourceUnavailable(f"{self.shown} is over the {bound} a feed may be (a feed is read whole at every "
                                    "change): follow a file per round or per game")

    def _pgn_text(self, data: bytes) -> str:
        """The feed's bytes as text (:func:`feed_text`). Nothing of a text refused is remembered, so it is fetched and
        refused again."""
        text, encoding = feed_text(self.shown, data, partial=True)
        if encoding != self._encoding:  # logged when it changes, not at every poll
            if encoding != "utf-8":
                log.warning("feed is not UTF-8: read as %s", encoding, extra={"source": self.shown, "encoding": encoding})
            self._encoding = encoding
        return text

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


#: How a URL is named to be read as a stream (:class:`PgnStream`): ``stream+https://...``.
STREAM_PREFIX = "stream+"
#: Seconds a stream may stay silent before it is taken as lost and opened again (a quiet round sends nothing).
STREAM_IDLE = 300.0
#: Seconds between a stream's end (or failure) and its next opening.
STREAM_RETRY = 2.0
#: The games a stream keeps (a round has at most a few hundred): past it, the game updated longest ago is dropped, so
#: a stream that never stops bringing new games (a platform's) holds bounded memory.
MAX_STREAM_GAMES = 2_000
#: The end of one game's PGN in a stream: its result token, then a blank line (or, in a stream that leaves the blank
#: line out, the next game's first tag pair).
_GAME_END = re.compile(rb"(?:1-0|0-1|1/2-1/2|\*)[ \t]*\r?\n(?:[ \t]*\r?\n|(?=\[))")
#: How far before new bytes a game's end may start: "1/2-1/2" and a CRLF (blank runs are bounded by it in practice).
_GAME_END_SPAN = 64


class PgnStream:
    """A feed that a URL streams: the connection stays open and each game's whole PGN is sent again whenever it
    changes (Lichess's ``/api/stream/broadcast/round/ID.pgn`` sends every game of the round first, then a game's PGN at
    each of its moves). Named ``stream+https://...``. The stream is read in the background and opened again when it
    ends or fails; :meth:`fetch` gives, when something arrived since the last fetch, the latest PGN of every game
    seen, in the order they were first seen: the text a polled feed would have, so the same :class:`FeedTracker` reads
    it. A game is taken once its PGN is whole (its result token and a blank line have arrived)."""

    def __init__(self, location: str, *, timeout: float = 10.0) -> None:
        if not location.startswith(STREAM_PREFIX):
            raise ValueError(f"a stream is named {STREAM_PREFIX}URL: {location}")
        self.location = location
        self.url = location[len(STREAM_PREFIX):]
        self.shown = shown_url(self.url)  # what messages and logs name (no credentials of the URL)
        self.name = feed_name(self.url)
        self.timeout = timeout
        self._games: dict[str, str] = {}  # a game's identifying tags -> its latest PGN, in the order first seen
        self._updated: dict[str, None] = {}  # the same tags, the game updated longest ago first
        self._changed = False
        self._error: str | None = None   # why the stream is down, while it is
        self._task: asyncio.Task | None = None

    async def fetch(self) -> str | None:
        """The latest PGN of every game seen if any arrived since the last fetch, None if not. Raises
        :class:`SourceUnavailable` while the stream is down (it is opened again in the background)."""
        if self._task is None:
            self._task = asyncio.create_task(self._read())
        if self._changed:
            self._changed = False
            text = "".join(self._games.values())
            if len(text) > MAX_FEED_BYTES:
                raise SourceUnavailable(f"{self.shown}: the games streamed are over the {MAX_FEED_BYTES // 2**20} MB a "
                                        "feed may be")
            return text
        if self._error is not None:
            raise SourceUnavailable(self._error)
        return None

    async def _read(self) -> None:
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=None, connect=self.timeout, sock_read=STREAM_IDLE)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                try:
                    async with session.get(self.url) as r:
                        if r.status != 200:
                            raise SourceUnavailable(f"{self.shown} answered HTTP {r.status}")
                        self._error, pending = None, bytearray()
                        async for chunk in r.content.iter_any():
                            if not pending and chunk.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<"):
                                raise SourceUnavailable(f"{self.shown} is markup (an HTML page?), not PGN")
                            # only the new bytes (and the few before them a game's end may start in) are searched
                            since = max(len(pending) - _GAME_END_SPAN, 0)
                            pending += chunk
                            del pending[: self._take_games(pending, since)]
                            if len(pending) > MAX_FEED_BYTES:
                                raise SourceUnavailable(f"{self.shown} streamed {len(pending)} bytes without a whole game")
                        if pending.strip():  # what a game's PGN was still missing when the stream ended is dropped
                            raise SourceUnavailable(f"{self.shown} ended its stream in the middle of a game's PGN")
                except SourceUnavailable as e:
                    self._error = str(e)
                except TimeoutError:
                    self._error = f"cannot stream {self.shown}: no answer within {self.timeout:g} s, or silent for {STREAM_IDLE:g} s"
                except aiohttp.ClientError as e:
                    self._error = f"cannot stream {self.shown}: {e!r}"
                except Exception as e:  # noqa: BLE001 - a fault of kibitz: logged, and the stream opened again
                    log.exception("stream read failed", extra={"source": self.shown})
                    self._error = f"cannot stream {self.shown}: {e!r}"
                await asyncio.sleep(STREAM_RETRY)

    def _take_games(self, data: bytes | bytearray, since: int = 0) -> int:
        """Take every whole game at the start of ``data`` (no game ends before ``since``); returns how many bytes they
        took (what follows is a game still arriving)."""
        start = 0
        for m in _GAME_END.finditer(data, since):
            text, _ = feed_text(self.shown, bytes(data[start:m.end()]))
            start = m.end()
            headers = chess.pgn.read_headers(io.StringIO(text))
            if headers is None:
                continue
            ident = identifying_tags(headers, ("GameURL", "ChapterURL"))
            self._games[ident] = text if text.endswith("\n\n") else text.rstrip() + "\n\n"
            self._updated.pop(ident, None)
            self._updated[ident] = None
            self._changed = True
            if len(self._games) > MAX_STREAM_GAMES:  # the tracker takes the dropped game as over once it is missing
                oldest = next(iter(self._updated))
                del self._games[oldest], self._updated[oldest]
        return start

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


def open_source(location: str) -> PgnSource | PgnStream:
    """The source a ``kibitz follow`` argument names: a stream (``stream+https://...``), else a polled file or URL."""
    return PgnStream(location) if location.startswith(STREAM_PREFIX) else PgnSource(location)


def http_date(ts: float) -> str:
    """An HTTP date (RFC 7231) for a Last-Modified header."""
    return email.utils.formatdate(ts, usegmt=True)


@dataclass
class _Game:
    game_id: str
    moves: list[str] = field(default_factory=list)
    ended: bool = False
    revision: int = 1
    tail: str | None = None  # this game's text at the feed's end at the last poll, and for how many polls in a row
    tail_polls: int = 0
    rejected: bool = False
    over: bool = False  # ended, or rejected with its result set in the feed: nothing more to wait for unless corrected
    absent: int = 0     # polls in a row whose text did not have this game (it was renamed or taken out of the feed)
    gone: bool = False  # absent long enough to be taken as over
    result: str | None = None  # the result it ended with
    changed_after_end: bool = False  # its text changed after its end (logged once)
    players: list[str] = field(default_factory=lambda: ["", ""])  # White's and Black's ids, as its start gave them


#: The fields of a followed game that a saved follow state keeps (the rest are about the polls in progress).
_SAVED_FIELDS = ("game_id", "moves", "ended", "revision", "rejected", "over", "gone", "result", "changed_after_end",
                 "players")


@dataclass
class ParsedGame:
    """One game of a feed's text as far as it parses."""

    headers: chess.pgn.Headers
    moves: list[str]
    clocks: list[float | None]
    error: str | None       # the first parse error (an illegal or unreadable move), None if the game parsed whole
    at_end: bool            # the last game of the text: a half-written move there is expected
    whole: bool = True      # its text is complete: another game follows it, or it ends with its result token
    text: str = ""          # the last game's text, from its first tag to the end of the feed
    error_type: type[InputError] = IllegalMove  # what ``error`` is reported as once final


#: The tag pairs of a game's text are over: a blank line or a line of moves follows one.
_TAGS_OVER = re.compile(r"\][ \t\r]*\n[ \t\r]*(\n|[^\s\[])")


def tags_complete(raw: str) -> bool:
    """Whether a game's text (from its first tag) has got past its tag pairs, so its identifying tags are whole."""
    s = raw.lstrip("\ufeff \t\r\n")  # a byte order mark (files written on Windows) is not the game's text
    return bool(s) and (not s.startswith("[") or _TAGS_OVER.search(s) is not None)


def parse_feed(text: str) -> list[ParsedGame]:
    """Every game of a PGN text, each up to its first unreadable move; the last one only once its tag pairs are
    whole (:func:`tags_complete`), marked ``whole`` if the text ends with its result token."""
    return FeedParser().parse(text)


class FeedParser:
    """:func:`parse_feed` for a feed polled again and again: a game whose text is the same as at the last parse is
    not parsed again (its :class:`ParsedGame` is reused), so a poll costs the games that changed, not the round.

    A game's parse is a function of the lines python-chess read for it, and it stops at the blank line that ends the
    game, never reading ahead: so the exact text read for a game that ended before the end of the feed (its *chunk*)
    gives the same game wherever it appears in a later text. Each chunk of the last parse is kept with its game; at
    each game of a new text, python-chess's :func:`chess.pgn.skip_game` (tokens only, no moves played: some 35 times
    cheaper) finds where the game seems to end, and the game is reused if that text is a kept chunk; otherwise it is
    parsed in full. A wrong guess can only miss, never reuse a game for another text. The last game of a text (it ends
    at the end of the feed, where it may be growing) is always parsed.
    """

    def __init__(self) -> None:
        self._chunks: dict[str, ParsedGame] = {}  # the last parse's chunks (see above) and their games

    def parse(self, text: str) -> list[ParsedGame]:
        """The games of ``text`` as :func:`parse_feed` gives them."""
        stream = io.StringIO(text)
        out: list[ParsedGame] = []
        chunks: dict[str, ParsedGame] = {}
        last_start = 0
        while True:
            start = stream.tell()
            try:
                pg, chunk = self._next_game(stream, text, start)
            except Exception as e:  # noqa: BLE001 - python-chess may raise on garbage; the rest is retried next poll
                log.warning("unreadable PGN text", extra={"error": repr(e)})
                break
            if pg is None:
                break
            if chunk is not None:
                chunks[chunk] = pg
            if blank_game(pg.headers, pg.moves, pg.error):
                continue  # a comment outside any game (a relay's header line), not a game
            out.append(pg)
            last_start = start
        self._chunks = chunks  # games no longer in the text are forgotten: the memory is one feed's text
        if out and not tags_complete(text[last_start:]):
            out.pop()  # its tags are still being written: which game it is is not known yet
        if out:  # a copy: the game kept for its chunk is not the one marked as the text's end
            out[-1] = replace(out[-1], at_end=True, whole=ends_in_result(text), text=text[last_start:])
        return out

    def _next_game(self, stream: io.StringIO, text: str, start: int) -> tuple[ParsedGame | None, str | None]:
        """The game at ``start`` and its chunk (None when it reached the end of the text: it may be growing)."""
        try:
            skipped = chess.pgn.skip_game(stream)
        except Exception:  # noqa: BLE001 - only a guess: the full parse below decides what the text holds
            skipped = False
        chunk = text[start:stream.tell()] if skipped else ""
        if (known := self._chunks.get(chunk)) is not None:
            return known, chunk
        stream.seek(start)
        game = read_game(stream)
        if game is None:
            return None, None
        end = stream.tell()
        moves, clocks, stop = mainline(game)
        if stop is not None:
            pg = ParsedGame(game.headers, moves, clocks, stop.why, False, error_type=stop.kind)
        else:
            pg = ParsedGame(game.headers, moves, clocks, str(game.errors[0]) if game.errors else None, False)
        return pg, (text[start:end] if end < len(text) else None)


def _agrees(known: list[str], moves: list[str]) -> bool:
    """Whether a game's delivered moves and the moves a text shows of it are one game's (one a prefix of the other)."""
    n = min(len(known), len(moves))
    return known[:n] == moves[:n]


class FeedTracker:
    """What one feed has delivered so far, and the events each new text adds (see the module docstring)."""

    def __init__(self, name: str, on_error: Callable[[InputError], None] | None = None,
                 on_gone: Callable[[str], None] | None = None) -> None:
        self.name = name
        self.on_error = on_error or (lambda e: None)
        self.on_gone = on_gone or (lambda game_id: None)  # told the id of a game taken as over because it left the feed
        self.games: dict[str, _Game] = {}
        self._last: str | None = None  # the text of the last poll that returned one
        self._waiting = False          # whether that text's end is waiting to be confirmed by later polls
        self._present: set[str] = set()  # the games of the last text parsed
        self._failed: set[str] = set()   # games whose update raised (an internal error, logged once)
        self._parser = FeedParser()      # parses only the games whose text changed since the last poll
        self._alike: dict[str, list[str]] = {}  # key from the tags -> the keys of the games that share those tags

    def snapshot(self) -> dict[str, Any]:
        """What this tracker delivered, as JSON-ready data: each game's id, delivered moves and state, and the games
        told apart under shared tags (:meth:`restore` reads it back)."""
        return {"games": {key: {f: getattr(g, f) for f in _SAVED_FIELDS} for key, g in self.games.items()},
                "alike": self._alike}

    def restore(self, data: dict[str, Any]) -> None:
        """Take up what :meth:`snapshot` saved: a text polled next delivers only what came since."""
        # a state saved before a field was kept has the field's default
        self.games = {key: _Game(**{f: g[f] for f in _SAVED_FIELDS if f in g}) for key, g in data["games"].items()}
        self._alike = {k: list(v) for k, v in data["alike"].items()}

    def game_key(self, headers: chess.pgn.Headers) -> str:
        ident = identifying_tags(headers)
        return as_id(f"{self.name}:{hashlib.sha1(ident.encode()).hexdigest()[:10]}")

    def update(self, text: str | None) -> list[FeedEvent]:
        """The events ``text`` (the feed's whole current content; None: unchanged since the last poll) adds to what
        was delivered. An unchanged text is read again only while the end of its last game waits
        (:data:`STABLE_POLLS`)."""
        if text is None:
            if self._last is None or not self._waiting:
                self._count_absent()
                return []
            text = self._last
        self._last, self._waiting = text, False
        out: list[FeedEvent] = []
        games = self._parser.parse(text)
        parsed = list(zip(self._keys(games), games))
        renamed = self._renamed(parsed)
        for key, pg in parsed:
            if key in self._failed:
                continue
            try:
                out += self._update_game(key, pg, renamed.get(key))
            except Exception:  # noqa: BLE001 - a fault of kibitz on one game must not stop the feed's other games
                # its state may be half updated: the game is left alone from now on (logged once)
                self._failed.add(key)
                if key in self.games:
                    self.games[key].over = True  # nothing more will come of it: a follow until_ended does not wait
                log.exception("internal error following a game of the feed: skipped", extra={"game_id": key})
        self._present = {key for key, _ in parsed}
        self._count_absent()
        return out

    def _keys(self, games: list[ParsedGame]) -> list[str]:
        """Each game's key: :meth:`game_key`, unless several games share the tags it is made of (a tiebreak game the
        feed does not tell apart from the game before it, boards whose players are not named yet). Those are told
        apart by their moves: each, in the order of the text, takes the key of a game of those tags whose delivered
        moves agree with its own (one whose moves it takes further, else the one with the most), else a key not in use yet (``<key>#2``, ``#3``...). Keyed by
        the tags alone, two such games were one game whose moves changed at every poll, restarted again and again. A
        game listed twice (the same tags, moves and result) is one game."""
        tags = [self.game_key(pg.headers) for pg in games]
        counts = Counter(tags)
        keys: list[str] = []
        taken: set[str] = set()
        listed: dict[tuple[str, tuple[str, ...], str], str] = {}  # a game as listed in this text -> its key
        for tag_key, pg in zip(tags, games):
            alike = self._alike.setdefault(tag_key, [tag_key])
            if counts[tag_key] == 1 and len(alike) == 1:
                keys.append(tag_key)
                continue
            same = (tag_key, tuple(pg.moves), pg.headers.get("Result", "*"))
            if same in listed:
                keys.append(listed[same])
                continue
            free = [k for k in alike if k not in taken]
            agree = [k for k in free if k in self.games and _agrees(self.games[k].moves, pg.moves)]
            unused = [k for k in free if k not in self.games]
            if agree:  # the text taking a game's delivered moves further first (a shorter text is being rewritten)
                key = max(agree, key=lambda k: (len(self.games[k].moves) <= len(pg.moves), len(self.games[k].moves)))
            elif unused:
                key = unused[0]
            else:
                key = as_id(f"{tag_key}#{len(alike) + 1}")
                alike.append(key)
            taken.add(key)
            keys.append(key)
            listed[same] = key
        return keys

    def _renamed(self, parsed: list[tuple[str, ParsedGame]]) -> dict[str, _Game]:
        """The games of this text that are games followed so far under other tags: the operator corrected a player's
        name or the round, which makes another key. Each new game is matched to a game gone from this text that is
        not over, whose delivered moves its own moves begin with, and that has the same player on one side at least
        (a name corrected on one side at a time, or the round); only a match that is one to one on both sides is
        taken (two boards of a round may share their opening). New key -> the game it renames."""
        present = {key for key, _ in parsed}
        gone = [g for key, g in self.games.items() if key not in present and not g.over and key not in self._failed]
        if not gone:
            return {}
        found: dict[str, list[_Game]] = {}
        for key, pg in parsed:
            if key in self.games or key in self._failed:
                continue
            ids = [named_player_id(pg.headers, colour) for colour in ("White", "Black")]
            found[key] = [g for g in gone if pg.moves[:len(g.moves)] == g.moves
                          and any(i is not None and i == was for i, was in zip(ids, g.players))]
        claimed = Counter(g.game_id for games in found.values() for g in games)
        return {key: games[0] for key, games in found.items() if len(games) == 1 and claimed[games[0].game_id] == 1}

    def _count_absent(self) -> None:
        """Count the polls in a row without each game. A game gone for :data:`STABLE_POLLS` polls (the operator
        renamed it, e.g. corrected a player's name or the round, which makes it another game, or took it out) is
        over: it cannot end in this feed. Logged once; a game that comes back is followed again (:meth:`_update_game`)."""
        for key, g in self.games.items():
            if key in self._present:
                g.absent = 0
            elif not g.over:
                g.absent += 1
                if g.absent >= STABLE_POLLS:
                    g.over = g.gone = True
                    log.warning("game no longer in the feed: taken as over", extra={
                        "game_id": g.game_id, "plies": len(g.moves), "polls": STABLE_POLLS})
                    if not g.ended:
                        self.on_gone(g.game_id)

    def _update_game(self, key: str, pg: ParsedGame, renames: _Game | None = None) -> list[FeedEvent]:
        """The events of one game of the text; ``renames``: the game it is under new tags (:meth:`_renamed`)."""
        g = self.games.get(key)
        out: list[FeedEvent] = []
        if g is None:
            g = self.games[key] = _Game(key)
            refused = refusal(pg.headers, key, self.name)  # decided once, at first sight: its moves are never read
            if refused is not None:
                g.ended = g.rejected = g.over = True
                self.on_error(refused)
                return out
            start = self._started(g.game_id, pg, renames)
            g.players = [start.white.id, start.black.id]
            out.append(start)
            if renames is not None:
                # the old game can no longer end in this feed; its overlay follows this one (the start names it)
                renames.over = renames.gone = True
                log.warning("game renamed in the feed: followed under its new id", extra={
                    "game_id": renames.game_id, "new_game_id": g.game_id, "plies": len(renames.moves),
                    "renamed": start.renamed})
        if g.gone:
            g.gone, g.over = False, g.ended
            log.info("game back in the feed", extra={"game_id": g.game_id})
        if g.ended:
            if g.result is not None:
                self._check_after_end(g, pg)
            return out
        # the end of the text: what it shows of this game is final once whole, or once it stays the same long enough
        settled = not pg.at_end or self._settled(g, pg)
        if pg.error is not None and not self._error_is_final(g, pg, settled):
            self._waiting = True
            return out  # a half-written move: wait for the next poll
        whole = pg.whole or settled
        moves, clocks = pg.moves, pg.clocks
        if not whole and pg.error is None and moves:
            # the text stops after this move: it may be half-written ("O-O" of "O-O-O"), its clock still to come
            moves, clocks = moves[:-1], clocks[:-1]
            self._waiting = True
        known = g.moves
        common = next((i for i, (a, b) in enumerate(zip(known, moves)) if a != b), min(len(known), len(moves)))
        if common < len(known) and common < len(moves):
            # a move changed: the operator corrected the game; rate it again from the start under a new id
            g.revision += 1
            new_id = as_id(f"{key}~{g.revision}")
            log.warning("game corrected in the feed: restarted", extra={
                "game_id": g.game_id, "new_game_id": new_id, "ply": common, "was": known[common], "now": moves[common]})
            old = replace(g, moves=g.moves[:common])
            g.game_id, g.moves, g.rejected = new_id, [], False
            out.append(self._started(new_id, pg, old))
            known = g.moves
        if len(moves) > len(known):
            out += [MoveEvent(game_id=g.game_id, ply=i, uci=moves[i], clock=clocks[i])
                    for i in range(len(known), len(moves))]
            g.moves = list(moves)
        # a result ends the game only once its moves parsed whole: a half-written game keeps its "*" anyway, and a
        # text cut short of its last moves may already carry the final result tag
        result = pg.headers.get("Result", "*")
        if pg.error is None and result in RESULT_SCORES and len(moves) >= len(g.moves):
            if whole:
                g.ended, g.result = True, result
                out.append(GameEnded(game_id=g.game_id, result=result, plies=len(g.moves)))
            else:
                self._waiting = True
        # a game rejected at a move (no end is sent: it is not scored) whose result is set is over in the feed, unless
        # the operator corrects it later
        g.over = g.ended or (g.rejected and pg.error is not None and result in RESULT_SCORES)
        return out

    @staticmethod
    def _check_after_end(g: _Game, pg: ParsedGame) -> None:
        """A game's end is final: its rating updates are out. An operator who changes its result or moves afterwards
        (a result set too early, then moves added; a result corrected) is told so in the log, once, since nothing of
        it is applied (a shorter text is a feed being rewritten, not a change)."""
        result = pg.headers.get("Result", "*")
        moves = pg.moves[: len(g.moves)]
        if g.changed_after_end or (result in (g.result, "*") and moves == g.moves[: len(moves)] and len(pg.moves) <= len(g.moves)):
            return
        g.changed_after_end = True
        log.warning("game changed in the feed after its end: not applied", extra={
            "game_id": g.game_id, "plies": len(g.moves), "result": g.result, "feed_plies": len(pg.moves),
            "feed_result": result})

    @staticmethod
    def _settled(g: _Game, pg: ParsedGame) -> bool:
        """Count the polls in a row that showed this game's text unchanged at the feed's end; whether it is now taken
        as it is."""
        g.tail_polls = g.tail_polls + 1 if g.tail == pg.text else 1
        g.tail = pg.text
        return g.tail_polls >= STABLE_POLLS

    def _error_is_final(self, g: _Game, pg: ParsedGame, settled: bool) -> bool:
        """Whether a parse error should be taken as the feed's content (rejected once) rather than retried."""
        if not settled:
            return False
        if not g.rejected:
            g.rejected = True
            self.on_error(pg.error_type(f"{self.name}: {pg.error}", game_id=g.game_id, ply=len(pg.moves)))
        return True

    def _started(self, game_id: str, pg: ParsedGame, corrects: _Game | None = None) -> GameStarted:
        """The start of ``game_id``; ``corrects``: the game it replaces, with the moves they have in common."""
        h = pg.headers
        white, black = player_info(h, "White", game_id), player_info(h, "Black", game_id)
        renamed: list[Color] = []
        if corrects is not None:
            # (a state saved before the players were kept knows none: taken as the same)
            sides: tuple[Color, Color] = ("white", "black")
            renamed = [c for c, p, was in zip(sides, (white, black), corrects.players) if was and p.id != was]
        return GameStarted(game_id=game_id, white=white, black=black,
                           event=as_id(h.get("Event", ""), fallback=""), time_control=h.get("TimeControl", ""),
                           initial_fen=setup_fen(h), corrects=corrects.game_id if corrects else None,
                           corrects_from=len(corrects.moves) if corrects else None, renamed=renamed)


class Follower:
    """Polls sources every ``interval`` seconds and hands each new event to ``submit``. Runs until cancelled, or
    with ``until_ended`` until every game seen is over (:meth:`all_ended`; at least one was seen, every source was
    polled). Each source is polled on its own, so one that is slow to answer (a URL that hangs until its timeout)
    holds up only its own games."""

    def __init__(self, sources: Iterable[PgnSource | PgnStream], submit: Callable[[FeedEvent], object], *, interval: float = DEFAULT_INTERVAL,
                 on_error: Callable[[InputError], None] | None = None, on_gone: Callable[[str], None] | None = None) -> None:
        # a source named twice is followed once (twice, each poll would count towards a half-written end settling)
        self.sources = list({s.location: s for s in sources}.values())
        self.submit = submit
        self.interval = interval
        self._on_error = on_error or (lambda e: None)
        self._rejected = 0  # rejections handed to on_error: a poll that only rejects has sent something too
        self.trackers = {s.location: FeedTracker(s.name, self._reject, on_gone) for s in self.sources}
        self.unavailable: dict[str, str] = {}  # location -> last error, logged once per outage

    async def poll_once(self) -> int:
        """Poll every source once, all at the same time; returns the number of events submitted."""
        return sum(await asyncio.gather(*(self.poll(s) for s in self.sources)))

    def _reject(self, e: InputError) -> None:
        self._rejected += 1
        self._on_error(e)

    async def poll(self, s: PgnSource | PgnStream) -> int:
        """Poll one source; returns the number of events submitted and rejections reported."""
        try:
            text = await s.fetch()
        except SourceUnavailable as e:
            if self.unavailable.get(s.location) != str(e):
                log.warning("feed unavailable, retrying", extra={"source": s.shown, "error": str(e)})
            self.unavailable[s.location] = str(e)
            return 0
        if self.unavailable.pop(s.location, None) is not None:
            log.info("feed available again", extra={"source": s.shown})
        n, rejected = 0, self._rejected
        for ev in self.trackers[s.location].update(text):  # None (unchanged): what waited may now be taken
            self.submit(ev)
            n += 1
        return n + self._rejected - rejected

    def state(self) -> dict[str, Any]:
        """What every source delivered so far (:meth:`FeedTracker.snapshot`), to be saved and given to
        :meth:`restore` when the follow starts again, so that it does not send everything again."""
        return {"version": STATE_VERSION, "feeds": {loc: t.snapshot() for loc, t in self.trackers.items()}}

    def restore(self, state: dict[str, Any]) -> None:
        """Take up a saved :meth:`state`; the sources it does not name start afresh. Raises ValueError for data that is
        not such a state (another version, a damaged file)."""
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise ValueError(f"not a follow state of version {STATE_VERSION}")
        try:
            for loc, saved in state["feeds"].items():
                if loc in self.trackers:
                    self.trackers[loc].restore(saved)
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"a damaged follow state ({e!r})") from None

    def all_ended(self) -> bool:
        """Whether at least one game was seen and every game seen is over: ended, refused, or rejected at a move with
        its result set (it would wait for a correction that a finished round does not bring)."""
        games = [g for t in self.trackers.values() for g in t.games.values()]
        return bool(games) and all(g.over for g in games)

    async def run(self, *, until_ended: bool = False, after_poll: Callable[[], Awaitable[None]] | None = None) -> None:
        """Poll until cancelled (or every game is over); ``after_poll`` is awaited after each poll that submitted
        something (e.g. to flush what was sent and save :meth:`state`)."""
        polled: set[str] = set()

        async def follow(s: PgnSource | PgnStream) -> None:  # returns only once every game is over (until_ended)
            while True:
                if await self.poll(s) and after_poll is not None:
                    await after_poll()
                polled.add(s.location)
                if until_ended and len(polled) == len(self.trackers) and self.all_ended():
                    return
                await asyncio.sleep(self.interval)

        tasks = [asyncio.create_task(follow(s)) for s in self.sources]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                t.result()  # a failure to submit (the runtime or the producer gone) stops the follow, raised here
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for s in self.sources:
                await s.close()
