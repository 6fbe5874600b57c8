"""CPU of following a live PGN feed: what each poll of a broadcast round costs, as the round grows.

    python bench/follow_cost.py [--boards 200] [--move-chance 1.0 0.25 0.05] [--timed 100] [--data DIR]

A round of ``--boards`` real games of rated-dev's largest event file, served as one feed that grows as a broadcast's
does: at each poll every unfinished game has made its next ply with probability ``--move-chance`` (1.0: every board
moved since the last poll, a blitz round polled slowly; 0.05: a classical round polled every 2 s), until every game
is over. Each poll's text goes through :func:`streamer.ingest.normalize_pgn` and
:meth:`streamer.follow.FeedTracker.update` (what ``kibitz follow`` runs per poll once the text is fetched and
decoded: parse, compare, the new events), which parses again only the games whose text changed
(:class:`~streamer.follow.FeedParser`). Baseline in the same run, on the same texts: :func:`streamer.follow.parse_feed`,
parsing every text whole (the parse alone, without the tracker's other work). Both give the same games
(checked at every timed poll). ``--timed`` polls spread evenly over the round are timed both ways; prints
milliseconds per poll, mean and the slowest, and the ratio of the means.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import chess.pgn
from common import add_data_argument, data_dir

from streamer.follow import FeedTracker, parse_feed
from streamer.ingest import normalize_pgn


def round_games(path: Path, boards: int) -> list[chess.pgn.Game]:
    """The first ``boards`` games of ``path`` with 20+ plies, each with its own White (one game id each)."""
    games: list[chess.pgn.Game] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        while len(games) < boards and (g := chess.pgn.read_game(f)) is not None:
            if sum(1 for _ in g.mainline()) >= 20:
                g.headers["White"] = f"{g.headers.get('White', '?')} (board {len(games) + 1})"
                games.append(g)
    return games


def shown(game: chess.pgn.Game, plies: int) -> str:
    """The game as a feed shows it after ``plies`` plies: the result "*" until its last ply."""
    nodes = list(game.mainline())
    out = chess.pgn.Game()
    for k, v in game.headers.items():
        out.headers[k] = v
    out.headers["Result"] = game.headers.get("Result", "*") if plies >= len(nodes) else "*"
    node: chess.pgn.GameNode = out
    for n in nodes[:plies]:
        node = node.add_variation(n.move)
        node.comment = n.comment
    return str(out) + "\n\n"


def feed_plies(lengths: list[int], chance: float, seed: int = 0) -> list[tuple[int, ...]]:
    """Each game's plies at each poll, from the round's first ply to its last."""
    rng = random.Random(seed)
    plies = [0] * len(lengths)
    out = []
    while True:
        for i, n in enumerate(lengths):
            if plies[i] < n and rng.random() < chance:
                plies[i] += 1
        out.append(tuple(plies))
        if plies == lengths:
            return out


class Feed:
    """The feed's text at each poll, each game's text made once per ply it reaches."""

    def __init__(self, games: list[chess.pgn.Game]) -> None:
        self.games = games
        self.lengths = [sum(1 for _ in g.mainline()) for g in games]
        self._texts: dict[tuple[int, int], str] = {}

    def text(self, plies: tuple[int, ...]) -> str:
        return "".join(self._game(i, k) for i, k in enumerate(plies))

    def _game(self, i: int, k: int) -> str:
        if (i, k) not in self._texts:
            self._texts[i, k] = shown(self.games[i], k)
        return self._texts[i, k]


def measure(feed: Feed, polls: list[tuple[int, ...]], timed: int) -> tuple[list[float], list[float], int]:
    """Seconds per poll for the tracker and for the whole-text parse, both on about ``timed`` polls spread evenly over
    the round (the tracker sees every poll), and the events the tracker delivered."""
    tracker, events, ours, fresh = FeedTracker("round"), 0, [], []
    every = -(-len(polls) // timed)
    for k, plies in enumerate(polls):
        text = feed.text(plies)
        t0 = time.perf_counter()
        events += len(tracker.update(normalize_pgn(text)))
        t1 = time.perf_counter()
        if k % every:
            continue
        games = parse_feed(text)
        t2 = time.perf_counter()
        ours.append(t1 - t0)
        fresh.append(t2 - t1)
        # the same games: the tracker's parser kept the last parse's, a fresh parse made them again
        kept = tracker._parser.parse(text)  # noqa: SLF001 - the bench checks the private parser against the fresh one
        assert [(g.moves, g.error) for g in kept] == [(g.moves, g.error) for g in games]
    return ours, fresh, events


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--boards", type=int, default=200)
    ap.add_argument("--move-chance", type=float, nargs="+", default=[1.0, 0.25, 0.05])
    ap.add_argument("--timed", type=int, default=100, help="polls timed against the whole-text parse (default 100)")
    add_data_argument(ap)
    args = ap.parse_args()
    src = max((data_dir(args) / "pgn" / "rated-dev").glob("*.pgn"), key=lambda p: p.stat().st_size)
    feed = Feed(round_games(src, args.boards))
    games, plies = feed.games, sum(feed.lengths)
    print(f"follow_cost: {len(games)} boards of {src.name} ({plies} plies), one feed growing poll by poll")
    print(f"{'move chance':>11} {'polls':>6} {'feed at end':>11} {'tracker ms/poll':>16} {'slowest':>8} "
          f"{'whole-text parse ms/poll':>25} {'slowest':>8} {'ratio':>6}")
    for chance in args.move_chance:
        polls = feed_plies(feed.lengths, chance)
        ours, fresh, events = measure(feed, polls, args.timed)
        assert events == len(games) * 2 + plies, "every game starts and ends once, every ply once"
        mo, mf = 1000 * sum(ours) / len(ours), 1000 * sum(fresh) / len(fresh)
        print(f"{chance:>11.2f} {len(polls):>6} {len(feed.text(polls[-1])) / 1e6:>9.2f}MB {mo:>16.1f} {1000 * max(ours):>8.1f} "
              f"{mf:>25.1f} {1000 * max(fresh):>8.1f} {mo / mf:>6.3f}")


if __name__ == "__main__":
    main()
