"""Following live PGN feeds (streamer.follow): a growing file, a URL answering 304/404/500, half-written text,
corrections. The URL tests run a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import logging
import os

import pytest
from aiohttp import web
from conftest import pgn_upto

from analyzers.errors import IllegalMove
from schemas import GameEnded, GameStarted, MoveEvent
from streamer.follow import STABLE_POLLS, FeedTracker, Follower, PgnSource, http_date

N_PLIES = 49


def moves_of(events) -> list[tuple[str, int, str]]:
    return [(e.game_id, e.ply, e.uci) for e in events if isinstance(e, MoveEvent)]


def test_a_growing_feed_gives_each_new_ply_once_with_its_clock_and_ends_on_the_result():
    t = FeedTracker("round1")
    first = t.update(pgn_upto(2))
    assert isinstance(first[0], GameStarted) and first[0].white.name == "Bai, Jinshi" and first[0].white.rating == 2618
    assert [e.ply for e in first[1:]] == [0, 1] and first[1].clock == 180.0 and first[2].clock == 164.1
    assert t.update(pgn_upto(2)) == []  # the same text again: nothing new
    grown = t.update(pgn_upto(5))
    assert [e.ply for e in grown] == [2, 3, 4]
    end = t.update(pgn_upto(N_PLIES))
    assert [e.ply for e in end if isinstance(e, MoveEvent)] == list(range(5, N_PLIES))
    assert isinstance(end[-1], GameEnded) and end[-1].result == "1-0" and end[-1].plies == N_PLIES
    assert t.update(pgn_upto(N_PLIES)) == []


def test_a_shorter_or_half_written_feed_loses_nothing_and_invents_nothing():
    t = FeedTracker("round1")
    t.update(pgn_upto(10))
    assert t.update(pgn_upto(6)) == []  # being rewritten: known plies stay, no restart
    assert t.update("") == []
    full = pgn_upto(12)
    assert t.update(full[: full.index("6. b3") + len("6. b")]) == []  # stops inside a move: retried
    # stops right after a move's last character: it may be half-written ("O-O" of "O-O-O" is legal), so it waits
    upto_b3 = full[: full.index("6. b3") + len("6. b3")]
    assert t.update(upto_b3) == []
    assert moves_of(t.update(upto_b3 + " ")) == [(next(iter(t.games)), 10, "b2b3")]
    assert [e.ply for e in t.update(pgn_upto(12))] == [11]


def test_a_half_written_move_at_the_end_is_retried_and_an_illegal_one_rejected_once():
    errors = []
    t = FeedTracker("round1", errors.append)
    t.update(pgn_upto(4))
    bad = pgn_upto(4).replace("*", "3. Qxh7 *")  # illegal in the position
    for _ in range(STABLE_POLLS - 1):
        assert t.update(bad) == [] and errors == []  # could be a move still being typed
    assert t.update(bad) == [] and len(errors) == 1 and isinstance(errors[0], IllegalMove)
    assert t.update(bad) == [] and len(errors) == 1  # rejected once, not at every poll
    assert [e.ply for e in t.update(pgn_upto(6))] == [4, 5]  # the operator fixed it


def test_a_corrected_move_restarts_the_game_under_a_new_id_with_a_log_line(caplog):
    t = FeedTracker("round1")
    start = t.update(pgn_upto(6))
    gid = start[0].game_id
    corrected = pgn_upto(6).replace("3. g3", "3. e3")
    with caplog.at_level(logging.WARNING, logger="kibitz.follow"):
        out = t.update(corrected)
    assert isinstance(out[0], GameStarted) and out[0].game_id == f"{gid}~2"
    assert [(e.game_id, e.ply) for e in out[1:]] == [(f"{gid}~2", p) for p in range(6)]
    assert any(r.message == "game corrected in the feed: restarted" and r.ply == 4 for r in caplog.records)


def test_two_games_in_one_feed_have_distinct_stable_ids():
    a, b = pgn_upto(3), pgn_upto(3).replace('Round "1.7"', 'Round "1.8"')
    ids = {e.game_id for e in FeedTracker("r").update(a + b) if isinstance(e, GameStarted)}
    again = {e.game_id for e in FeedTracker("r").update(a + b) if isinstance(e, GameStarted)}
    assert len(ids) == 2 and ids == again


async def test_a_growing_file_is_followed_ply_by_ply(tmp_path):
    path = tmp_path / "games.pgn"
    got: list = []
    follower = Follower([PgnSource(str(path))], got.append, interval=0.01)
    assert await follower.poll_once() == 0 and follower.unavailable  # not there yet: retried, not fatal
    for k in (1, 2, 3, 10, 10, N_PLIES):
        path.write_text(pgn_upto(k))
        os.utime(path, ns=(k * 10**9, k * 10**9))  # a distinct mtime even within one clock tick
        await follower.poll_once()
    assert [e.ply for e in got if isinstance(e, MoveEvent)] == list(range(N_PLIES))
    assert isinstance(got[-1], GameEnded) and follower.all_ended()


class Feed:
    """A broadcast site on 127.0.0.1: serves ``text`` with an ETag and Last-Modified, honours conditional GETs, or
    answers the next queued status instead."""

    def __init__(self) -> None:
        self.text = ""
        self.version = 0
        self.fail: list[int] = []
        self.conditional = 0

    async def handle(self, request: web.Request) -> web.Response:
        if self.fail:
            return web.Response(status=self.fail.pop(0), text="unavailable")
        etag = f'"v{self.version}"'
        if request.headers.get("If-None-Match") == etag:
            self.conditional += 1
            return web.Response(status=304)
        return web.Response(text=self.text, headers={"ETag": etag, "Last-Modified": http_date(1_600_000_000 + self.version)})

    def set(self, text: str) -> None:
        self.text, self.version = text, self.version + 1


@pytest.fixture
async def feed():
    f = Feed()
    app = web.Application()
    app.router.add_get("/round1.pgn", f.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    yield f, f"http://127.0.0.1:{port}/round1.pgn"
    await runner.cleanup()


async def test_a_url_answering_304_404_500_or_half_written_text_never_loses_a_ply(feed):
    f, url = feed
    got: list = []
    follower = Follower([PgnSource(url)], got.append, interval=0.01)
    f.set(pgn_upto(3))
    await follower.poll_once()
    await follower.poll_once()  # unchanged: a 304, nothing parsed
    assert f.conditional == 1
    f.set(pgn_upto(8))
    f.fail = [404, 500]  # the site hiccups while plies 3..7 exist
    await follower.poll_once()
    await follower.poll_once()
    assert follower.unavailable and [e.ply for e in got if isinstance(e, MoveEvent)] == [0, 1, 2]
    full = pgn_upto(12)
    f.set(full[: full.index("6... c5")])  # half-written upload
    await follower.poll_once()
    f.set(pgn_upto(N_PLIES))
    await follower.poll_once()
    assert not follower.unavailable
    assert [e.ply for e in got if isinstance(e, MoveEvent)] == list(range(N_PLIES))
    assert isinstance(got[-1], GameEnded)


async def test_an_unreachable_url_is_retried(feed):
    _, url = feed
    dead = url.replace(url.split(":")[2].split("/")[0], "1")  # port 1: connection refused
    follower = Follower([PgnSource(dead, timeout=1)], lambda e: None, interval=0.01)
    assert await follower.poll_once() == 0 and "cannot fetch" in follower.unavailable[dead]
    await asyncio.sleep(0)
    await follower.sources[0].close()
