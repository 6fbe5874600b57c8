"""The broadcast end to end: ``kibitz follow`` on a PGN file that grows one ply at a time, with ``--serve``, seen by
headless Chromium (Debian's chromium) through the overlay page; the JSON API and its escaping; Server-Sent Events.
Real Stockfish, real browser, real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import aiohttp
import numpy as np
import pytest
from conftest import BROADCAST, ROOT, pgn_upto

from streamer.devbrowser import Browser, follow_process, overlay_state, wait_for, watch_plies

XSS = "<script>alert(1)</script>"
FAST = ["--profile", "fast", "--engines", "2"]


def seconds(shown: str) -> int:
    """A clock as the overlay shows it ("1:02:03", "4:05") in seconds."""
    total = 0
    for part in shown.split(":"):
        total = total * 60 + int(part)
    return total


def write_feed(path: Path, k: int) -> None:
    # in place, as a board relay rewrites its file: a poll may catch it truncated or half-written
    path.write_text(pgn_upto(k, white=XSS))


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory, stockfish) -> Path:
    """An analysis cache holding the fixture's positions (the target latency is with analyses cached)."""
    cache = tmp_path_factory.mktemp("cache") / "analysis.sqlite"
    subprocess.run([sys.executable, "-m", "streamer.cli", "replay", str(BROADCAST), "--max-speed", "--no-ui", *FAST,
                    "--cache", str(cache)], check=True, cwd=ROOT, capture_output=True, timeout=300)
    return cache


@pytest.fixture
def follow(tmp_path, warm_cache):
    """``kibitz follow FEED --serve`` on a feed holding one ply; yields (feed path, base URL, game id)."""
    feed = tmp_path / "games.pgn"
    write_feed(feed, 1)
    with follow_process(feed, "--interval", "0.05", *FAST, "--cache", str(warm_cache)) as (url, gid):
        yield feed, url, gid


@pytest.mark.solo
async def test_overlay_follows_a_growing_file_ply_by_ply_in_chromium(follow, tmp_path):
    feed, url, gid = follow
    plies = 49
    async with Browser() as b:
        await b.goto(f"{url}/overlay/{gid}?show=names,clocks,eval,ratings,sparkline,lastmove,board")
        await wait_for(b, lambda s: s.get("evalPly") == "0")
        latencies, states = await watch_plies(b, lambda k: write_feed(feed, k), range(2, plies))
        # the game goes on (no result yet): the clock of the side to move counts down on the page between moves
        running = await overlay_state(b)
        await asyncio.sleep(2.2)
        later = await overlay_state(b)
        side = "white" if (plies - 1) % 2 == 0 else "black"
        assert running["clockRuns"] == later["clockRuns"] == side
        assert seconds(later[f"{side}Clock"]) <= seconds(running[f"{side}Clock"]) - 1
        other = "black" if side == "white" else "white"
        assert later[f"{other}Clock"] == running[f"{other}Clock"]  # the other clock stands
        more, final_states = await watch_plies(b, lambda k: write_feed(feed, k), range(plies, plies + 1))
        latencies, states = latencies + more, states + final_states
        shot = Path(os.environ.get("KIBITZ_OVERLAY_SCREENSHOT") or tmp_path / "overlay.png")
        await b.screenshot(shot)
        final = await overlay_state(b)
    assert final["clockRuns"] == ""  # the game has its result: no clock runs
    p50, p95 = np.percentile(latencies, [50, 95])
    print(f"\noverlay latency over {len(latencies)} plies (file write -> page shows the ply's analysis): "
          f"p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms; screenshot {shot}")
    assert p95 < 1.0  # the target, with analyses cached
    assert len({s["eval"] for s in states}) >= 10  # the eval moves with the game
    assert len({s["white"] for s in states}) >= 5 and len({s["black"] for s in states}) >= 5  # and both ratings
    assert "performing at" in final["white"] and "moves" in final["white"]  # labelled: declared rating -> performance
    assert "provisional" not in final["white"]  # the calibrations' engine at the profile's limits
    assert final["name"].startswith(XSS) and final["scripts"] == 1  # the name is text; no script was injected
    assert shot.stat().st_size > 20_000


async def test_an_overlay_recovers_unattended_when_kibitz_restarts_before_its_feed_shows_the_game_again(tmp_path, warm_cache):
    """A streaming program keeps the overlay loaded while kibitz follow is restarted; the new process answers the
    overlay's events with 404 until its feed shows the game (here: the feed is empty for a while). The browser does not
    reconnect after such an answer by itself; the page tries again until the game is back, and the page itself is
    served for a game not seen yet, so a reload in that window waits too."""
    from streamer.devbrowser import free_port

    feed, port = tmp_path / "games.pgn", free_port()
    write_feed(feed, 1)
    async with Browser() as b:
        with follow_process(feed, "--interval", "0.05", *FAST, "--cache", str(warm_cache), port=port) as (url, gid):
            await b.goto(f"{url}/overlay/{gid}")
            await wait_for(b, lambda s: s.get("evalPly") == "0" and s.get("state") == "live")
        feed.write_text("")  # the relay's file is rewritten while kibitz is down
        with follow_process(feed, "--interval", "0.05", *FAST, "--cache", str(warm_cache), port=port, wait=False) as (url, _):
            await wait_for(b, lambda s: s.get("state") == "waiting", timeout=30)  # 404: the game is not there
            async with aiohttp.ClientSession() as s, s.get(f"{url}/overlay/{gid}") as r:
                assert r.status == 200  # a reload now gets the page, which waits
            write_feed(feed, 5)
            shown = await wait_for(b, lambda s: s.get("evalPly") == "4", timeout=60)
    assert shown["state"] == "live" and shown["ply"] == "5"


async def test_api_lists_games_and_players_escapes_names_and_streams_events(follow):
    feed, url, gid = follow
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{url}/api/games") as r:
            body = await r.text()
            assert r.headers["Content-Type"].startswith("application/json") and r.headers["X-Content-Type-Options"] == "nosniff"
        assert "<script>" not in body and json.loads(body)[0]["white"] == XSS  # inert in HTML, the same string in JSON
        async with s.get(f"{url}/api/games/{gid}") as r:
            game = await r.json()
        assert game["white"]["name"] == XSS and game["white"]["declared"] == 2618
        async with s.get(f"{url}/api/players/{game['black']['id']}") as r:
            player = await r.json()
        assert player["declared"] == 1507 and gid in player["games"]
        async with s.get(f"{url}/api/games/nope") as r:
            assert r.status == 404
        async with s.post(f"{url}/api/games") as r:
            assert r.status == 405  # read-only
        async with s.get(f"{url}/openapi.json") as r:
            spec = await r.json()
        assert {"/api/games", "/api/games/{game_id}", "/api/players/{player_id}", "/overlay/{game_id}"} <= set(spec["paths"])
        async with s.get(f"{url}/") as r:
            assert r.status == 200 and "kibitz" in await r.text()
        async with s.get(f"{url}/overlay/{gid}/events") as r:
            first = json.loads((await r.content.readline()).decode().removeprefix("data: "))
            await r.content.readline()
            write_feed(feed, 6)
            while True:  # every change arrives as one event, until ply 5's analysis
                line = (await asyncio.wait_for(r.content.readline(), 30)).decode()
                if line.startswith("data: ") and json.loads(line[6:])["eval_ply"] == 5:
                    break
        assert first["game_id"] == gid and first["moves"] == 1
