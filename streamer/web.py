"""The read-only HTTP server of a broadcast: the games list, an overlay page per game, a JSON API, live updates.

Routes (documented for clients in ``streamer/static/openapi.json``, served at ``/openapi.json``):

- ``/``: the games, each linking to its overlay;
- ``/overlay/{game_id}``: a transparent 1920x1080 page for a streamer's browser source (names, clocks, eval bar,
  both players' ratings with their band, a sparkline of the rating over the game, the last move), kept current by
  Server-Sent Events from ``/overlay/{game_id}/events``; query parameters ``theme`` (dark, light) and ``show`` (a
  comma-separated subset of names, clocks, eval, ratings, sparkline, lastmove, and board: the position itself, off by
  default since the video shows the board, on for previews);
- ``/api/games``, ``/api/games/{game_id}``, ``/api/players/{player_id}``: the :class:`~streamer.live.LiveStore`'s
  snapshots as JSON.

Nothing here writes: there is no POST route. Player-supplied strings (names, events) reach the page only as JSON
and are put in the page with ``textContent``, never as HTML; the JSON itself escapes ``<``, ``>`` and ``&`` so it
is inert even if a client pastes it into HTML.
"""

from __future__ import annotations

import asyncio
import json
import logging
from importlib import resources
from typing import Any

from aiohttp import web

from .live import LiveStore

log = logging.getLogger("kibitz.web")

#: Seconds between SSE keep-alive comments (proxies close idle connections).
KEEPALIVE_SECONDS = 15.0
#: Security headers on every response: no framing by other sites is *not* set, since OBS and overlays embed pages.
SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                    "Content-Security-Policy": "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:"}
STORE_KEY: web.AppKey[LiveStore] = web.AppKey("store", LiveStore)


def safe_json(data: Any) -> str:
    """JSON with ``<``, ``>`` and ``&`` as unicode escapes: the same value for a JSON parser, inert in HTML."""
    return json.dumps(data, ensure_ascii=False).replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.Response(text=safe_json(data), status=status, content_type="application/json")


def _static(name: str) -> str:
    return resources.files("streamer.static").joinpath(name).read_text(encoding="utf-8")


_TYPES = {".html": "text/html", ".js": "application/javascript", ".css": "text/css"}


def _page(name: str) -> web.Response:
    return web.Response(text=_static(name), content_type=_TYPES[name[name.rindex("."):]], charset="utf-8")


def openapi() -> dict[str, Any]:
    """The API description (OpenAPI 3.1), shipped in the package."""
    return json.loads(_static("openapi.json"))


@web.middleware
async def _headers(request: web.Request, handler):  # noqa: ANN001, ANN202
    resp = await handler(request)
    for k, v in SECURITY_HEADERS.items():
        resp.headers.setdefault(k, v)
    return resp


async def _index(request: web.Request) -> web.Response:
    return _page("index.html")


async def _overlay(request: web.Request) -> web.Response:
    # served for a game not seen (yet): a streaming program that loads the page while kibitz restarts, or before the
    # feed shows the game, gets a page that waits for the game (its events answer 404 until then, and it tries again)
    return _page("overlay.html")


async def _asset(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in ("overlay.js", "overlay.css", "index.js"):
        raise web.HTTPNotFound()
    return _page(name)


async def _games(request: web.Request) -> web.Response:
    return json_response(request.app[STORE_KEY].games())


async def _game(request: web.Request) -> web.Response:
    g = request.app[STORE_KEY].game(request.match_info["game_id"])
    return json_response(g) if g is not None else json_response({"error": "no such game"}, 404)


async def _player(request: web.Request) -> web.Response:
    p = request.app[STORE_KEY].player(request.match_info["player_id"])
    return json_response(p) if p is not None else json_response({"error": "no such player"}, 404)


async def _openapi(request: web.Request) -> web.Response:
    return json_response(request.app["openapi"])


async def _board(request: web.Request) -> web.Response:
    """The game's board as SVG (python-chess's renderer): the overlay's optional ``board`` element, for previews."""
    import chess
    import chess.svg

    g = request.app[STORE_KEY].game(request.match_info["game_id"])
    if g is None:
        raise web.HTTPNotFound(text="no such game")
    lm = g["last_move"]
    svg = chess.svg.board(chess.Board(g["fen"]), lastmove=chess.Move.from_uci(lm["uci"]) if lm else None, size=900,
                          coordinates=True)
    return web.Response(text=svg, content_type="image/svg+xml", headers={"Cache-Control": "no-store"})


async def _events(request: web.Request) -> web.StreamResponse:
    """Server-Sent Events: the game's snapshot now, then after every change."""
    store = request.app[STORE_KEY]
    gid = request.match_info["game_id"]
    snap = store.game(gid)
    if snap is None:
        raise web.HTTPNotFound(text="no such game")
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                       "X-Accel-Buffering": "no"})
    await resp.prepare(request)
    q = store.subscribe(gid)
    try:
        await resp.write(f"data: {safe_json(snap)}\n\n".encode())
        while True:
            try:
                snap = await asyncio.wait_for(q.get(), KEEPALIVE_SECONDS)
                await resp.write(f"data: {safe_json(snap)}\n\n".encode())
            except TimeoutError:
                await resp.write(b": keep-alive\n\n")
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        store.unsubscribe(gid, q)
    return resp


def build_app(store: LiveStore) -> web.Application:
    app = web.Application(middlewares=[_headers])
    app[STORE_KEY] = store
    app["openapi"] = openapi()
    app.add_routes([
        web.get("/", _index),
        web.get("/overlay/{game_id}", _overlay),
        web.get("/overlay/{game_id}/events", _events),
        web.get("/overlay/{game_id}/board.svg", _board),
        web.get("/static/{name}", _asset),
        web.get("/api/games", _games),
        web.get("/api/games/{game_id}", _game),
        web.get("/api/players/{player_id}", _player),
        web.get("/openapi.json", _openapi),
    ])
    return app


def parse_hostport(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``:PORT`` for 127.0.0.1) as a pair, the port in 0-65535 (0: any free one); ValueError
    otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"expected HOST:PORT with a port in 0-65535, got {text!r}")
    return host or "127.0.0.1", int(port)


class Server:
    """The app on HOST:PORT for the lifetime of an ``async with``."""

    def __init__(self, store: LiveStore, host: str = "127.0.0.1", port: int = 8080) -> None:
        self.store, self.host, self.port = store, host, port
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> Server:
        self._runner = web.AppRunner(build_app(self.store), access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        if self.port == 0:  # an ephemeral port (tests): read back which one
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        log.info("serving", extra={"url": self.url})
        return self

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
