"""Headless Chromium for the overlay's browser test and latency benchmark (development only, like devkafka).

:class:`Browser` starts Debian's ``chromium`` with a DevTools port on 127.0.0.1 and drives one page over the Chrome
DevTools Protocol (a WebSocket, through aiohttp): navigate, evaluate JavaScript, take a screenshot.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise RuntimeError("Chromium not found: `make setup` installs Debian's chromium")


class Browser:
    """``async with Browser() as b: await b.goto(url); await b.eval("document.title")``."""

    def __init__(self, width: int = 1920, height: int = 1080) -> None:
        self.width, self.height = width, height
        # chromium's helper processes may still write to the profile as it is removed: never an error of the test
        self._profile = tempfile.TemporaryDirectory(prefix="kibitz-chromium-", ignore_cleanup_errors=True)
        self._proc: subprocess.Popen | None = None
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._ids = itertools.count(1)

    async def __aenter__(self) -> Browser:
        self._proc = subprocess.Popen(
            [find_chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--no-default-browser-check", "--hide-scrollbars", "--remote-debugging-address=127.0.0.1",
             "--remote-debugging-port=0", f"--user-data-dir={self._profile.name}",
             f"--window-size={self.width},{self.height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port_file = Path(self._profile.name) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self._proc.poll() is not None:
                raise RuntimeError("chromium did not open its DevTools port")
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        self._session = aiohttp.ClientSession()
        async with self._session.get(f"http://127.0.0.1:{port}/json/list") as r:
            pages = [t for t in await r.json() if t["type"] == "page"]
        self._ws = await self._session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)
        await self.call("Page.enable")
        await self.call("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height, deviceScaleFactor=1, mobile=False)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGTERM)  # the browser and its helper processes
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
        self._profile.cleanup()

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        """One DevTools command; its result (events arriving meanwhile are skipped)."""
        assert self._ws is not None
        cid = next(self._ids)
        await self._ws.send_str(json.dumps({"id": cid, "method": method, "params": params}))
        while True:
            msg = json.loads((await self._ws.receive()).data)
            if msg.get("id") == cid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    async def goto(self, url: str) -> None:
        await self.call("Page.navigate", url=url)

    async def eval(self, expression: str) -> Any:
        r = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return r.get("result", {}).get("value")

    async def screenshot(self, path: Path) -> None:
        data = await self.call("Page.captureScreenshot", format="png")
        Path(path).write_bytes(base64.b64decode(data["data"]))


#: What the overlay shows, read in one evaluation: the newest ply on the page, the newest analysed ply, both
#: players' shown ratings, the eval text, and White's name as text.
OVERLAY_STATE = ("JSON.stringify({ply: document.body.dataset.ply, evalPly: document.body.dataset.evalPly, "
                 "white: document.querySelector('#white .rating').textContent, black: document.querySelector('#black .rating').textContent, "
                 "eval: document.getElementById('eval-text').textContent, name: document.querySelector('#white .name').textContent, "
                 "scripts: document.querySelectorAll('script').length, clockRuns: document.body.dataset.clockRuns, "
                 "state: document.body.dataset.state, "
                 "whiteClock: document.querySelector('#white .clock').textContent, "
                 "blackClock: document.querySelector('#black .clock').textContent})")


async def overlay_state(browser: Browser) -> dict[str, Any]:
    return json.loads(await browser.eval(OVERLAY_STATE) or "{}")


async def wait_for(browser: Browser, ready, timeout: float = 30.0, poll: float = 0.01) -> dict[str, Any]:  # noqa: ANN001
    """Poll the overlay until ``ready(state)``; the state then. TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        state = await overlay_state(browser)
        if ready(state):
            return state
        if time.monotonic() > deadline:
            raise TimeoutError(f"overlay never got ready; last state {state}")
        await asyncio.sleep(poll)


async def watch_plies(browser: Browser, write, plies: range, timeout: float = 30.0) -> tuple[list[float], list[dict[str, Any]]]:  # noqa: ANN001
    """For each k in ``plies``: ``write(k)`` (the feed now holds k plies), then wait until the overlay shows the
    analysis of ply k (its eval and ratings). Returns the seconds from each write to the page showing it, and the
    page's state at that moment."""
    latencies, states = [], []
    for k in plies:
        t0 = time.monotonic()
        write(k)
        states.append(await wait_for(browser, lambda s, k=k: s.get("evalPly") == str(k - 1), timeout))
        latencies.append(time.monotonic() - t0)
    return latencies, states


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def follow_process(feed: Path, *args: str, timeout: float = 60.0, port: int | None = None,
                   wait: bool = True) -> Iterator[tuple[str, str]]:
    """``kibitz follow FEED --serve 127.0.0.1:<port> ARGS`` (a free port by default) as a user runs it, until its first
    game is served (``wait``; else until it serves at all, and the id is ""); yields (base URL, that game's id) and
    stops the process on exit."""
    port = port or free_port()
    proc = subprocess.Popen([sys.executable, "-m", "streamer.cli", "follow", str(feed), "--serve", f"127.0.0.1:{port}", *args],
                            cwd=Path(__file__).resolve().parent.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                games = json.loads(urllib.request.urlopen(f"{url}/api/games", timeout=1).read())
                if games or not wait:
                    break
            except OSError:
                pass
            if proc.poll() is not None:
                raise RuntimeError(f"kibitz follow exited: {proc.stderr.read().decode() if proc.stderr else ''}")
            if time.monotonic() > deadline:
                raise TimeoutError("kibitz follow did not serve the game")
            time.sleep(0.1)
        yield url, games[0]["game_id"] if games else ""
    finally:
        proc.terminate()
        proc.wait(20)
