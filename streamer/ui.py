"""The live terminal view of a replay (rich): one row per board, a progress bar, and the final table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import chess
from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from schemas import GameStarted, MoveAssessment, PerceivedRating, RatingUpdate


def fmt_rating(p: PerceivedRating | None) -> str:
    if p is None:
        return "-"
    return f"{p.rating:.0f} [{p.low:.0f}, {p.high:.0f}]"


def fmt_performance(p: PerceivedRating | None) -> str:
    """'performing at' estimate: the same moves with the declared rating as the prior."""
    if p is None or p.performance is None or p.performance_low is None or p.performance_high is None:
        return "-"
    return f"{p.performance:.0f} +/- {(p.performance_high - p.performance_low) / 2:.0f}"


def fmt_eval(cp: int) -> str:
    if abs(cp) >= 3900:
        return "mate" if cp > 0 else "-mate"
    return f"{cp / 100:+.2f}"


@dataclass
class BoardView:
    started: GameStarted
    board: chess.Board = field(default_factory=chess.Board)
    last: str = ""
    eval_cp: int = 0
    ply: int = -1
    ratings: dict[str, PerceivedRating] = field(default_factory=dict)
    result: str = ""


class ReplayView:
    """Collects what the runtime publishes and renders it; also used (without Live) for the final table."""

    def __init__(self, console: Console, total_events: int, *, live: bool) -> None:
        self.console = console
        self.boards: dict[str, BoardView] = {}
        self.players: dict[str, PerceivedRating] = {}
        self.elo: dict[str, float | None] = {}
        self.glicko: dict[str, RatingUpdate] = {}
        self.progress = Progress(TextColumn("replay"), BarColumn(), MofNCompleteColumn(), TextColumn("events"), TimeElapsedColumn())
        self.task = self.progress.add_task("replay", total=total_events)
        self.live = Live(self.render(), console=console, refresh_per_second=4, transient=False) if live else None

    def __enter__(self) -> ReplayView:
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live:
            self.live.update(self.render())
            self.live.__exit__(*exc)

    def started(self, ev: GameStarted) -> None:
        self.boards[ev.game_id] = BoardView(ev, chess.Board(ev.initial_fen) if ev.initial_fen else chess.Board())
        for p in (ev.white, ev.black):
            self.elo[p.id] = p.rating

    def advance(self) -> None:
        self.progress.advance(self.task)
        if self.live:
            self.live.update(self.render())

    def publish(self, msg) -> None:
        if isinstance(msg, MoveAssessment):
            bv = self.boards.get(msg.game_id)
            if bv is not None and msg.ply > bv.ply:
                # assessments of one game arrive in ply order, so the view's board stays in sync
                try:
                    mv = chess.Move.from_uci(msg.uci)
                    # numbered as the board counts (a game set up from a FEN at move 30 starts at 30)
                    bv.last = f"{bv.board.fullmove_number}{'.' if msg.color == 'white' else '...'}{bv.board.san(mv)}"
                    bv.board.push(mv)
                except (ValueError, AssertionError):
                    bv.last = msg.uci
                bv.eval_cp, bv.ply = msg.eval_after, msg.ply
        elif isinstance(msg, PerceivedRating):
            if msg.scope == "game" and msg.game_id in self.boards:
                self.boards[msg.game_id].ratings[msg.player_id] = msg
            elif msg.scope == "player":
                self.players[msg.player_id] = msg
        elif isinstance(msg, RatingUpdate):
            self.glicko[msg.player_id] = msg
            bv = self.boards.get(msg.game_id)
            if bv is not None and msg.player_id == bv.started.white.id:
                bv.result = {1.0: "1-0", 0.0: "0-1", 0.5: "1/2"}[msg.score]
        if self.live:
            self.live.update(self.render())

    def render(self):
        t = Table(title="kibitz: live ratings from this game's moves (95 %): moves only | performing at", expand=False)
        for col in ("board", "white", "moves only", "performing at", "last move", "eval", "black", "moves only",
                    "performing at", "result"):
            t.add_column(col)
        for i, bv in enumerate(self.boards.values(), 1):
            w, b = bv.started.white, bv.started.black
            wr, br = bv.ratings.get(w.id), bv.ratings.get(b.id)
            t.add_row(
                str(i), f"{w.name} ({w.rating:.0f})" if w.rating else w.name, fmt_rating(wr), fmt_performance(wr),
                bv.last or "-", fmt_eval(bv.eval_cp), f"{b.name} ({b.rating:.0f})" if b.rating else b.name,
                fmt_rating(br), fmt_performance(br), bv.result or "*",
            )
        return Group(t, self.progress)

    def final_table(self, *, provisional: bool, profile: str) -> Table:
        t = Table(title=f"perceived rating vs Elo, profile {profile}{' (PROVISIONAL)' if provisional else ''}")
        for col in ("player", "Elo", "moves only [95 %]", "performing at", "moves", "from gains", "Glicko-2"):
            t.add_column(col, justify="left" if col == "player" else "right")
        for pid, p in sorted(self.players.items(), key=lambda kv: -kv[1].rating):
            elo = self.elo.get(pid)
            g = self.glicko.get(pid)
            t.add_row(
                pid, f"{elo:.0f}" if elo else "-", fmt_rating(p), fmt_performance(p),
                f"{p.moves}/{p.gain_moves}", f"{p.gain_rating:.0f}" if p.gain_rating is not None else "-",
                f"{g.after.rating:.0f} ({g.after.rd:.0f})" if g else "-",
            )
        prior = next((p.prior for p in self.players.values() if p.prior), None)
        t.caption = ("moves only: from the moves and the prior" + (f" ({prior})" if prior else "")
                     + "; performing at: the same moves with the declared rating as prior; moves: counted / all; "
                     "Glicko-2: rating (RD) after this game")
        return t
