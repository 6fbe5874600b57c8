"""What the overlay and the HTTP API show: the live state of every game, built from the messages the pipeline
publishes (and the game lifecycle events), with no I/O of its own.

Any runtime feeds it: ``kibitz follow`` and ``kibitz replay`` hand it their inputs and outputs in process;
``kibitz serve`` reads the same messages off the Kafka topics. :meth:`LiveStore.apply` takes a message,
:meth:`LiveStore.game` gives a game's snapshot (a plain JSON-able dict), and :meth:`LiveStore.subscribe` a queue
that receives a game's snapshot after every change (what the overlay's Server-Sent Events carry).

The clock of the side to move runs: a snapshot names it (``clock_runs``), says how far it has run since the last
move (``clock_elapsed``, game seconds) and how fast it runs (``clock_rate``, game seconds per second: 1 for a live
game, the time compression of a paced replay), so the overlay counts it down between snapshots as a broadcast's
clock does. The last move is timed when it reaches the store (``kibitz serve``: when the worker published it), so a
polled feed's clock runs from the poll that saw the move, a few seconds after it was made.

Which rating a viewer sees: a player with a declared rating is shown "performing at" (the game's moves with the
declared rating as prior); a player without one the "moves only" estimate. Each snapshot labels the one it shows.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import chess
from pydantic import BaseModel

from analyzers import chessboard
from analyzers.errors import IllegalMove
from schemas import GameEnded, GameStarted, MoveAssessment, MoveEvent, PerceivedRating, PlayerInfo, RatingUpdate

#: Games kept (the oldest finished ones go first).
MAX_GAMES = 2_000
#: Players kept (their names and player- and event-scope ratings); the one updated longest ago goes first. A store
#: fed by a platform's topics for weeks sees millions of players; the games kept name at most 2 * MAX_GAMES of them.
MAX_PLAYERS = 20_000
#: Rating points per game and player kept for the sparkline.
MAX_HISTORY = 400
#: A subscriber that does not keep up keeps only the newest snapshot.
QUEUE_SIZE = 1
#: Messages about a game not started yet are held (topics interleave: a rating can overtake its game's start) up to
#: this many games and messages per game.
MAX_EARLY_GAMES, MAX_EARLY_MESSAGES = 1_000, 1_000

COLORS = ("white", "black")


@dataclass
class _Side:
    info: PlayerInfo
    clock: float | None = None
    rating: dict[str, Any] | None = None
    history: list[tuple[int, float]] = field(default_factory=list)
    glicko: dict[str, float] | None = None


@dataclass
class _Game:
    game_id: str
    event: str
    sides: dict[str, _Side]
    board: chess.Board
    moves: int = 0
    last_move: dict[str, Any] | None = None
    eval_cp: int | None = None
    eval_ply: int = -1
    result: str | None = None
    updated: float = field(default_factory=time.time)
    moved_at: float | None = None  # when the last move reached the store (epoch seconds)


def shown_rating(p: PerceivedRating) -> dict[str, Any]:
    """The estimate an overlay shows for a player, labelled: the performance estimate when the player declared a
    rating, else the moves-only estimate."""
    if p.performance is not None and p.performance_low is not None and p.performance_high is not None:
        return {"kind": "performance", "label": "performing at", "rating": round(p.performance),
                "low": round(p.performance_low), "high": round(p.performance_high), "moves": p.moves,
                "prior": p.performance_prior, "provisional": p.provisional}
    band = ({"band_low": round(p.band_low), "band_high": round(p.band_high)}
            if p.band_low is not None and p.band_high is not None else {})
    return {"kind": "moves_only", "label": "moves only", "rating": round(p.rating), "low": round(p.low),
            "high": round(p.high), **band, "moves": p.moves, "prior": p.prior, "provisional": p.provisional}


class LiveStore:
    """``clock_rate``: game seconds per second of the messages' arrival (1 for live games, a paced replay's speed);
    None for a replay at full speed, whose clocks do not run between moves."""

    def __init__(self, max_games: int = MAX_GAMES, max_players: int = MAX_PLAYERS, *, clock_rate: float | None = 1.0) -> None:
        if clock_rate is not None and not (math.isfinite(clock_rate) and clock_rate > 0):
            raise ValueError(f"clock_rate must be positive, got {clock_rate}")
        self.max_games = max_games
        self.max_players = max_players
        self.clock_rate = clock_rate
        self._games: dict[str, _Game] = {}
        self._players: dict[str, dict[str, Any]] = {}
        self._subscribers: dict[str, set[asyncio.Queue]] = {}
        self._early: dict[str, list[tuple[BaseModel, float]]] = {}
        self._not_chess: dict[str, None] = {}  # the last max_games games of another game (Go), whose messages are dropped
        #: a corrected game's id -> the id it is rated under now (GameStarted.corrects): its overlay follows the game
        self._corrected: dict[str, str] = {}

    # -- input --------------------------------------------------------------------------------------------
    def apply(self, msg: BaseModel, at: float | None = None) -> None:
        """Take one message (others are ignored); subscribers of the game it concerns get the new snapshot. ``at``:
        when the message was made (epoch seconds; a Kafka record's timestamp), else now: a move's time, from which
        the clock of the side to move runs."""
        gid: str | None = getattr(msg, "game_id", None)
        if getattr(msg, "game", "chess") != "chess" or gid in self._not_chess:
            # the overlay draws chess: a Go game is rated on the topics, not shown here (its GoR ratings are not Elo)
            if gid is not None and isinstance(msg, GameStarted):
                self._not_chess[gid] = None
                while len(self._not_chess) > self.max_games:
                    del self._not_chess[next(iter(self._not_chess))]
                self._early.pop(gid, None)
            return
        if isinstance(msg, GameStarted):
            self._start(msg)
            for early, early_at in self._early.pop(msg.game_id, []):
                self.apply(early, early_at)
        elif gid is None:
            return
        elif gid not in self._games:
            if gid not in self._corrected:  # a corrected game's late messages (its old plies' ratings) are not shown
                self._hold(gid, msg, time.time() if at is None else at)
            return
        elif isinstance(msg, MoveAssessment):
            self._assessed(self._games[gid], msg, at)
        elif isinstance(msg, MoveEvent):
            self._moved(self._games[gid], msg, at)
        elif isinstance(msg, PerceivedRating):
            if msg.scope != "game":
                self._player(msg.player_id)[msg.scope] = shown_rating(msg)
                return
            self._rated(self._games[gid], msg)
        elif isinstance(msg, RatingUpdate):
            side = next((s for s in self._games[gid].sides.values() if s.info.id == msg.player_id), None)
            if side is not None:
                side.glicko = {"rating": round(msg.after.rating), "rd": round(msg.after.rd)}
        elif isinstance(msg, GameEnded):
            self._games[gid].result = msg.result
        else:
            return
        if gid is not None and gid in self._games:
            self._games[gid].updated = time.time()
            self._publish(gid)

    def _hold(self, gid: str, msg: BaseModel, at: float) -> None:
        """Keep a message (and when it came) whose game has not started here yet; the oldest held game goes first
        when full."""
        held = self._early.get(gid)
        if held is None:
            if len(self._early) >= MAX_EARLY_GAMES:
                del self._early[next(iter(self._early))]
            held = self._early[gid] = []
        if len(held) < MAX_EARLY_MESSAGES:
            held.append((msg, at))

    def _start(self, ev: GameStarted) -> None:
        try:
            board = chessboard.start(ev.initial_fen)
        except IllegalMove:
            return  # a start that does not read: the game step dead-letters the game, and there is no board to show
        self._games.pop(ev.game_id, None)
        self._games[ev.game_id] = _Game(ev.game_id, ev.event, {"white": _Side(ev.white), "black": _Side(ev.black)}, board)
        self._corrected.pop(ev.game_id, None)  # an id started (again) shows its own game
        if ev.corrects is not None and ev.corrects != ev.game_id:
            self._correct(ev.corrects, ev.game_id)
        for p in (ev.white, ev.black):
            self._player(p.id).update({"id": p.id, "name": p.name, "declared": p.rating})
        while len(self._games) > self.max_games:
            oldest = next((k for k, g in self._games.items() if g.result), next(iter(self._games)))
            del self._games[oldest]

    def _correct(self, old: str, new: str) -> None:
        """``old`` is rated again as ``new`` (a feed's operator corrected a move): the old game leaves the list, and
        its id, and every id that led to it, now show the new game; whoever watches it is moved over at once."""
        self._games.pop(old, None)
        for k, v in self._corrected.items():
            if v == old:
                self._corrected[k] = new
        self._corrected.pop(old, None)
        self._corrected[old] = new
        while len(self._corrected) > self.max_games:
            del self._corrected[next(iter(self._corrected))]
        watching = self._subscribers.pop(old, None)
        if watching:
            self._subscribers.setdefault(new, set()).update(watching)

    def pause(self, game_id: str) -> None:
        """The game left its feed without a result (taken out): its clock stops, where it would run down to
        0:00; a move that comes later starts it again."""
        g = self._games.get(self.resolve(game_id))
        if g is not None and g.moved_at is not None:
            g.moved_at = None
            self._publish(g.game_id)

    def resolve(self, game_id: str) -> str:
        """The id a game is shown under: its own, or for a corrected game the id it is rated under now."""
        return self._corrected.get(game_id, game_id)

    def _moved(self, g: _Game, ev: MoveEvent, at: float | None = None) -> None:
        """A move as it arrives (before its analysis): the board, the last move and the clock move on at once."""
        if ev.ply != g.moves:
            return  # out of order or repeated: the game step rejects it, the overlay ignores it
        try:
            move = chess.Move.from_uci(ev.uci)
            if move not in g.board.legal_moves:
                return
        except ValueError:
            return
        color = COLORS[0] if g.board.turn == chess.WHITE else COLORS[1]
        # the move's number as the board counts it: a game set up from a FEN at move 30 shows "30. Re1", not "1. Re1"
        g.last_move = {"ply": ev.ply, "number": g.board.fullmove_number, "uci": ev.uci, "san": g.board.san(move),
                       "color": color}
        g.board.push(move)
        g.moves += 1
        g.moved_at = time.time() if at is None else at
        if ev.clock is not None:
            g.sides[color].clock = ev.clock

    def _assessed(self, g: _Game, a: MoveAssessment, at: float | None = None) -> None:
        if a.ply == g.moves:  # a runtime that feeds only outputs (kibitz serve): the assessment moves the board
            self._moved(g, MoveEvent(game_id=a.game_id, ply=a.ply, uci=a.uci, clock=a.clock), at)
        if g.eval_ply < a.ply < g.moves:  # the newest analysed position (moves may be ahead of their analysis)
            g.eval_cp, g.eval_ply = a.eval_after, a.ply

    def _rated(self, g: _Game, p: PerceivedRating) -> None:
        side = next((s for s in g.sides.values() if s.info.id == p.player_id), None)
        if side is None:
            return
        side.rating = shown_rating(p)
        side.history.append((p.ply, side.rating["rating"]))
        del side.history[:-MAX_HISTORY]

    def _player(self, pid: str) -> dict[str, Any]:
        """The player's entry, made the most recently updated (dicts keep insertion order: the first is the oldest)."""
        p = self._players.pop(pid, None)
        if p is None:
            p = {"id": pid}
            if len(self._players) >= self.max_players:
                del self._players[next(iter(self._players))]
        self._players[pid] = p
        return p

    # -- output -------------------------------------------------------------------------------------------
    def games(self) -> list[dict[str, Any]]:
        """Every game, newest first, in brief."""
        return [{"game_id": g.game_id, "event": g.event, "white": g.sides["white"].info.name,
                 "black": g.sides["black"].info.name, "moves": g.moves, "result": g.result}
                for g in sorted(self._games.values(), key=lambda g: -g.updated)]

    def running_clock(self, g: _Game, now: float | None = None) -> tuple[str | None, float]:
        """Whose clock runs in ``g`` at ``now`` (default: now) and how many game seconds it has run since the last
        move (at most its time left): the side to move's, while the game has no result and that side's clock is
        known (from its own last move), in a store whose clocks run."""
        if self.clock_rate is None or g.result is not None or g.moved_at is None or g.board.is_game_over():
            return None, 0.0
        color = COLORS[0] if g.board.turn == chess.WHITE else COLORS[1]
        left = g.sides[color].clock
        if left is None:
            return None, 0.0
        ran = max((time.time() if now is None else now) - g.moved_at, 0.0) * self.clock_rate
        return color, min(ran, left)

    def game(self, game_id: str) -> dict[str, Any] | None:
        """A game's snapshot (a corrected game's id gives the game it is rated under now), None if not kept."""
        g = self._games.get(self.resolve(game_id))
        if g is None:
            return None
        runs, elapsed = self.running_clock(g)
        return {
            "game_id": g.game_id, "event": g.event, "moves": g.moves, "result": g.result, "fen": g.board.fen(),
            "turn": "white" if g.board.turn == chess.WHITE else "black", "last_move": g.last_move,
            "eval_cp": g.eval_cp, "eval_ply": g.eval_ply, "updated": g.updated,
            "clock_runs": runs, "clock_elapsed": round(elapsed, 3), "clock_rate": self.clock_rate if runs else None,
            **{c: {"id": s.info.id, "name": s.info.name, "declared": s.info.rating, "clock": s.clock,
                   "rating": s.rating, "history": [r for _, r in s.history], "glicko2": s.glicko}
               for c, s in g.sides.items()},
        }

    def player(self, player_id: str) -> dict[str, Any] | None:
        """A player's name, declared rating, player- and event-scope ratings and games kept; None for a player in no
        game kept and not among the last ``max_players`` updated."""
        sides = [(g.game_id, s.info) for g in self._games.values() for s in g.sides.values() if s.info.id == player_id]
        p = self._players.get(player_id)
        if p is None:
            if not sides:
                return None
            info = sides[-1][1]  # dropped from the players kept while a game of theirs is: its start names them
            p = {"id": player_id, "name": info.name, "declared": info.rating}
        return {**p, "games": list(dict.fromkeys(gid for gid, _ in sides))}

    def subscribe(self, game_id: str) -> asyncio.Queue:
        q: asyncio.Queue = asyncio.Queue(QUEUE_SIZE)
        self._subscribers.setdefault(self.resolve(game_id), set()).add(q)
        return q

    def unsubscribe(self, game_id: str, q: asyncio.Queue) -> None:
        gid = self.resolve(game_id)  # where a correction since the subscription moved it
        subs = self._subscribers.get(gid)
        if subs is not None:
            subs.discard(q)
            if not subs:
                del self._subscribers[gid]

    def _publish(self, game_id: str) -> None:
        subs = self._subscribers.get(game_id)
        if not subs:
            return
        snap = self.game(game_id)
        for q in subs:
            if q.full():
                q.get_nowait()  # a slow viewer skips to the newest state
            q.put_nowait(snap)

    def __iter__(self) -> Iterator[str]:
        return iter(self._games)
