"""Following live PGN feeds: a file that a board relay rewrites, or a URL a broadcast site serves, polled.

A :class:`PgnSource` fetches the feed's text only when it changed (size and mtime for a file; a conditional GET
with ``If-None-Match`` / ``If-Modified-Since`` for a URL). A :class:`FeedTracker` turns each new text into the
events it adds: a :class:`~schemas.GameStarted` for a game seen for the first time, a :class:`~schemas.MoveEvent`
(with its ``[%clk]`` clock) per new ply, a :class:`~schemas.GameEnded` once the result tag is set.

A feed is rewritten while it is read, so nothing in one poll is taken as final:

- a game shorter than before (the file is being rewritten, or half-written) is left as it is: its known plies stay,
  and the next poll sees the rest;
- a move that fails to parse at the end of the text is a half-written move, retried at the next poll; one that
  fails elsewhere, or is still there after :data:`STABLE_POLLS` polls, is rejected (a dead letter) and the game
  waits for its correction;
- a game whose moves *change* (an operator corrected a wrongly entered move) is restarted under a new id
  (``<id>~2``, ...), with a warning in the log: the plies already rated stay rated in the old game.

Game ids are stable across polls and restarts of ``kibitz follow``: the source's name and a hash of the headers
that identify a game (Event, Site, Date, Round, White, Black).
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import io
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import chess
import chess.pgn

from analyzers.errors import IllegalMove, InputError, SourceUnavailable
from schemas import RESULT_SCORES, GameEnded, GameStarted, MoveEvent, PlayerInfo

from .ingest import RESULT_TOKENS, player_id_for, rating_from_tag, read_game

log = logging.getLogger("kibitz.follow")

#: Seconds between polls of a source (broadcast sites refresh their round PGN every few seconds).
DEFAULT_INTERVAL = 2.0
#: A parse error at the end of a feed is retried this many polls before it is taken as the feed's content.
STABLE_POLLS = 3
#: Headers that identify a game within a feed.
IDENT_HEADERS = ("Event", "Site", "Date", "Round", "White", "Black")

FeedEvent = GameStarted | MoveEvent | GameEnded


class PgnSource:
    """One feed: a local path or an http(s) URL. :meth:`fetch` returns the text when it changed, else None."""

    def __init__(self, location: str, *, timeout: float = 10.0) -> None:
        self.location = location
        self.is_url = urlparse(location).scheme in ("http", "https")
        self.name = Path(urlparse(location).path if self.is_url else location).stem or "feed"
        self.timeout = timeout
        self._etag: str | None = None
        self._modified: str | None = None
        self._stat: tuple[int, int] | None = None
        self._session: Any = None  # an aiohttp.ClientSession, made at the first fetch of a URL

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
                data = f.read()
        except OSError as e:
            raise SourceUnavailable(f"cannot read {self.location}: {e.strerror or e}") from e
        self._stat = stat
        return data.decode("utf-8", errors="replace")

    async def _fetch_url(self) -> str | None:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        headers = {}
        if self._etag:
            headers["If-None-Match"] = self._etag
        if self._modified:
            headers["If-Modified-Since"] = self._modified
        try:
            async with self._session.get(self.location, headers=headers) as r:
                if r.status == 304:
                    return None
                if r.status != 200:
                    raise SourceUnavailable(f"{self.location} answered HTTP {r.status}")
                body = await r.read()
                self._etag = r.headers.get("ETag")
                self._modified = r.headers.get("Last-Modified")
        except (TimeoutError, aiohttp.ClientError) as e:
            raise SourceUnavailable(f"cannot fetch {self.location}: {e!r}") from e
        return body.decode("utf-8", errors="replace")

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def http_date(ts: float) -> str:
    """An HTTP date (RFC 7231) for a Last-Modified header."""
    return email.utils.formatdate(ts, usegmt=True)


@dataclass
class _Game:
    game_id: str
    moves: list[str] = field(default_factory=list)
    ended: bool = False
    revision: int = 1
    error_at: tuple[int, str] | None = None  # (ply, message) of a parse error seen at the feed's end
    error_polls: int = 0
    rejected: bool = False


@dataclass
class ParsedGame:
    """One game of a feed's text as far as it parses."""

    headers: chess.pgn.Headers
    moves: list[str]
    clocks: list[float | None]
    error: str | None       # the first parse error (an illegal or unreadable move), None if the game parsed whole
    at_end: bool            # the last game of the text: a half-written move there is expected


def parse_feed(text: str) -> list[ParsedGame]:
    """Every game of a PGN text, each up to its first unreadable move."""
    stream = io.StringIO(text)
    out: list[ParsedGame] = []
    while True:
        try:
            game = read_game(stream)
        except Exception as e:  # noqa: BLE001 - python-chess may raise on garbage; the rest is retried next poll
            log.warning("unreadable PGN text", extra={"error": repr(e)})
            break
        if game is None:
            break
        moves, clocks = [], []
        for node in game.mainline():
            moves.append(node.move.uci())
            clocks.append(node.clock())
        out.append(ParsedGame(game.headers, moves, clocks, str(game.errors[0]) if game.errors else None, False))
    if out:
        last = out[-1]
        last.at_end = True
        tail = text.rstrip()
        if text == tail and tail[-1:].isalnum() and not tail.endswith(RESULT_TOKENS) and last.moves:
            # the text stops inside a token: its last move may be half-written ("O-O" of "O-O-O"); next poll
            del last.moves[-1], last.clocks[-1]
    return out


class FeedTracker:
    """What one feed has delivered so far, and the events each new text adds (see the module docstring)."""

    def __init__(self, name: str, on_error: Callable[[InputError], None] | None = None) -> None:
        self.name = name
        self.on_error = on_error or (lambda e: None)
        self.games: dict[str, _Game] = {}

    def game_key(self, headers: chess.pgn.Headers) -> str:
        ident = "|".join(headers.get(k, "") for k in IDENT_HEADERS)
        return f"{self.name}:{hashlib.sha1(ident.encode()).hexdigest()[:10]}"

    def update(self, text: str) -> list[FeedEvent]:
        """The events ``text`` (the feed's whole current content) adds to what was delivered."""
        out: list[FeedEvent] = []
        for pg in parse_feed(text):
            out += self._update_game(pg)
        return out

    def _update_game(self, pg: ParsedGame) -> list[FeedEvent]:
        key = self.game_key(pg.headers)
        g = self.games.get(key)
        out: list[FeedEvent] = []
        if g is None:
            g = self.games[key] = _Game(key)
            out.append(self._started(g.game_id, pg))
        if g.ended:
            return out
        if pg.error is not None and not self._error_is_final(g, pg):
            return out  # a half-written move: wait for the next poll
        known = g.moves
        common = next((i for i, (a, b) in enumerate(zip(known, pg.moves)) if a != b), min(len(known), len(pg.moves)))
        if common < len(known) and common < len(pg.moves):
            # a move changed: the operator corrected the game; rate it again from the start under a new id
            g.revision += 1
            new_id = f"{key}~{g.revision}"
            log.warning("game corrected in the feed: restarted", extra={
                "game_id": g.game_id, "new_game_id": new_id, "ply": common, "was": known[common], "now": pg.moves[common]})
            g.game_id, g.moves, g.rejected, g.error_at = new_id, [], False, None
            out.append(self._started(new_id, pg))
            known = g.moves
        if len(pg.moves) > len(known):
            out += [MoveEvent(game_id=g.game_id, ply=i, uci=pg.moves[i], clock=pg.clocks[i])
                    for i in range(len(known), len(pg.moves))]
            g.moves = list(pg.moves)
        # a result ends the game only once its moves parsed whole: a half-written game keeps its "*" anyway
        result = pg.headers.get("Result", "*")
        if pg.error is None and result in RESULT_SCORES and len(pg.moves) >= len(g.moves):
            g.ended = True
            out.append(GameEnded(game_id=g.game_id, result=result, plies=len(g.moves)))
        return out

    def _error_is_final(self, g: _Game, pg: ParsedGame) -> bool:
        """Whether a parse error should be taken as the feed's content (rejected once) rather than retried."""
        at = (len(pg.moves), pg.error or "")
        if pg.at_end:
            g.error_polls = g.error_polls + 1 if g.error_at == at else 1
            g.error_at = at
            if g.error_polls < STABLE_POLLS:
                return False
        if not g.rejected:
            g.rejected = True
            self.on_error(IllegalMove(f"{self.name}: {pg.error}", game_id=g.game_id, ply=len(pg.moves)))
        return True

    def _started(self, game_id: str, pg: ParsedGame) -> GameStarted:
        h = pg.headers
        players = [PlayerInfo(id=player_id_for(h, c, game_id), name=(h.get(c, "?").strip() or "?"),
                              rating=rating_from_tag(h.get(f"{c}Elo"))) for c in ("White", "Black")]
        fen = h.get("FEN") if h.get("SetUp") == "1" or "FEN" in h else None
        return GameStarted(game_id=game_id, white=players[0], black=players[1], event=h.get("Event", ""),
                           time_control=h.get("TimeControl", ""), initial_fen=fen)


class Follower:
    """Polls sources every ``interval`` seconds and hands each new event to ``submit``. Runs until cancelled, or
    with ``until_ended`` until every game seen has ended (and at least one was seen)."""

    def __init__(self, sources: Iterable[PgnSource], submit: Callable[[FeedEvent], object], *, interval: float = DEFAULT_INTERVAL,
                 on_error: Callable[[InputError], None] | None = None) -> None:
        self.sources = list(sources)
        self.submit = submit
        self.interval = interval
        self.trackers = {s.location: FeedTracker(s.name, on_error) for s in self.sources}
        self.unavailable: dict[str, str] = {}  # location -> last error, logged once per outage

    async def poll_once(self) -> int:
        """Poll every source once; returns the number of events submitted."""
        n = 0
        for s in self.sources:
            try:
                text = await s.fetch()
            except SourceUnavailable as e:
                if self.unavailable.get(s.location) != str(e):
                    log.warning("feed unavailable, retrying", extra={"source": s.location, "error": str(e)})
                self.unavailable[s.location] = str(e)
                continue
            if self.unavailable.pop(s.location, None) is not None:
                log.info("feed available again", extra={"source": s.location})
            if text is None:
                continue
            for ev in self.trackers[s.location].update(text):
                self.submit(ev)
                n += 1
        return n

    def all_ended(self) -> bool:
        games = [g for t in self.trackers.values() for g in t.games.values()]
        return bool(games) and all(g.ended for g in games)

    async def run(self, *, until_ended: bool = False) -> None:
        try:
            while True:
                await self.poll_once()
                if until_ended and self.all_ended():
                    return
                await asyncio.sleep(self.interval)
        finally:
            for s in self.sources:
                await s.close()
