"""Helpers shared by the benchmarks: where the data is, and a reproducible sample of real positions."""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
from pathlib import Path

import chess
import chess.pgn
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
#: Where the large validation sets are looked for by default: $KIBITZ_DATA, else ../shared/data beside the checkout.
DEFAULT_DATA = Path(os.environ.get("KIBITZ_DATA") or ROOT.parent / "shared" / "data")
#: The analysis cache the benchmarks share: $KIBITZ_ANALYSIS_CACHE, else .cache/analysis.sqlite in the checkout. Point
#: it outside the checkout to keep hours of engine analysis when the checkout is replaced.
ANALYSIS_CACHE = Path(os.environ.get("KIBITZ_ANALYSIS_CACHE") or ROOT / ".cache" / "analysis.sqlite")
sys.path.insert(0, str(ROOT))


#: Event families of rated-holdout, by file name: where the errors differ (juniors, time controls, level).
FAMILIES = {"fide-world-youth-rapid": "juniors U14/U18, online rapid", "queens-festival": "women, online rapid (Queen's)",
            "wuocc-rapid": "university players, online rapid", "world-rapid-and-blitz": "elite, World Rapid and Blitz"}


def family(game_id: str) -> str:
    """The event family of a rated-holdout game (ids start with the file's name), "other" outside FAMILIES."""
    return next((v for k, v in FAMILIES.items() if game_id.startswith(k)), "other")


def fide(rating: float | None) -> float:
    """A sampled rated game's player rating: the samplers keep only games where both players have one, so a missing
    one is a bug in the sample, not a value to guess."""
    if rating is None:
        raise ValueError("a game from a rated sample has a player without a rating")
    return float(rating)


def add_data_argument(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA,
                    help=f"folder of the validation sets (default $KIBITZ_DATA or {DEFAULT_DATA})")


def add_review_statistic_argument(ap: argparse.ArgumentParser) -> None:
    """``--statistic``: which of the review's statistics (analyzers.fairplay.REVIEW_STATISTICS) the z tables read."""
    from analyzers.fairplay import REVIEW_STATISTICS

    ap.add_argument("--statistic", choices=REVIEW_STATISTICS, default=REVIEW_STATISTICS[0],
                    help="the review's statistic: its match count (what the service decides on), or the count weighted "
                         "by 1/p (analyzers.fairplay.ReviewStats), measured beside it")


def data_dir(args: argparse.Namespace, *needed: str) -> Path:
    """The ``--data`` folder, after checking it holds ``needed`` (sub-paths); exits with one line saying what is
    missing and where it was expected."""
    data = Path(args.data)
    missing = [n for n in needed if not (data / n).exists()]
    if missing:
        raise SystemExit(f"validation data missing: {', '.join(missing)} not found under {data} "
                         "(pass --data DIR or set KIBITZ_DATA)")
    return data


def sample_positions(n: int, data: Path, *, folder: str = "pgn/rated-dev", seed: int = 1, min_ply: int = 20, max_ply: int = 70) -> list[chess.Board]:
    """``n`` distinct middlegame positions (plies ``min_ply``..``max_ply``) from real games under ``data``, seeded."""
    rng = random.Random(seed)
    files = sorted((data / folder).glob("*.pgn"))
    seen: set[str] = set()
    out: list[chess.Board] = []
    while len(out) < n:
        path = rng.choice(files)
        with open(path, encoding="utf-8", errors="replace") as f:
            # skip a random number of games into the file, then take one position from the next game
            for _ in range(rng.randrange(50)):
                if chess.pgn.skip_game(f) is False:
                    break
            game = chess.pgn.read_game(f)
        if game is None:
            continue
        moves = list(game.mainline_moves())
        if len(moves) <= min_ply:
            continue
        stop = rng.randrange(min_ply, min(max_ply, len(moves)))
        board = game.board()
        for m in moves[:stop]:
            board.push(m)
        if board.is_game_over() or board.epd() in seen:
            continue
        seen.add(board.epd())
        out.append(chess.Board(board.epd() + " 0 1"))
    return out


def follow_player_events(games, results, checkpoints, at, *, counted_only: bool = True, model=None):  # noqa: ANN001, ANN201
    """Replay each player's moves through one ScopeStats per (event, player), in the order of ``games`` (round
    order), calling ``at(n, scope, player, opponent, assessment)`` when a scope's posterior reaches n counted moves, n in
    ``checkpoints`` (with ``counted_only=False``: when its gain histogram reaches n moves, for gains-only profiles);
    ``model``: the move model the scopes also feed (None: none).
    Returns {(event, player id): (scope, [player's PlayerInfo per game], [opponent's])}."""
    from streamer.pipeline import ScopeStats, known_left_after

    scopes: dict = {}
    for g in games:
        for color, me, opp in (("white", g.white, g.black), ("black", g.black, g.white)):
            s, mine, theirs = scopes.setdefault((g.event, me.id), (ScopeStats(), [], []))
            s.games += 1
            mine.append(me)
            theirs.append(opp)
            left = None  # the player's time left as last known in the game (ScopeFeatures.known_x_left of its scope)
            for a in results.get(g.game_id, []):
                if a.color == color:
                    s.add(a, None, model, left)
                    left = known_left_after(a, left)
                    if counted_only and a.counted and s.post.n in checkpoints:
                        at(s.post.n, s, me, opp, a)
                    elif not counted_only and s.hist.count in checkpoints:
                        at(s.hist.count, s, me, opp, a)
    return scopes


def add_context_argument(ap: argparse.ArgumentParser) -> None:
    """``--context``: what the pool step reads an event from (:func:`event_context`)."""
    ap.add_argument("--context", choices=("sample", "event"), default="sample", help="where the event prior reads the "
                    "event's other games from: the sampled games only, or every rated game of the sampled games' events "
                    "up to the last sampled one (as a live service does; the others are not scored)")


def context_flag(args: argparse.Namespace) -> str:
    """``--context`` as a recorded command spells it: " --context event", or "" for the default."""
    return " --context event" if args.context == "event" else ""


def event_context(folder, games):  # noqa: ANN001, ANN201
    """Every rated game of ``folder`` in the events of ``games`` up to the last sampled game of its event, in file
    order (the sampled games among them): a game's event prior reads only the games before it."""
    from streamer.batch import rated_games

    everything = rated_games(folder)
    ids = {g.game_id for g in games}
    last = {g.event: i for i, g in enumerate(everything) if g.game_id in ids}
    return [g for i, g in enumerate(everything) if i <= last.get(g.event, -1)]


def event_priors(games, results, config) -> dict:  # noqa: ANN001
    """The event prior the pool step attaches to each assessment (docs/models.md s. 12), replaying the sample's games
    in their order (round order) through :func:`streamer.pipeline.pool_event`, one game after another: a live event
    also has the concurrent games of a round, so this is the prior a little earlier than live. Each game ends with its
    two game results, as the game step sends them. Returns {(game_id, ply): Prior} for the assessments that got one."""
    from analyzers.eventpool import EventEvidence
    from analyzers.ratingmodel import Prior
    from schemas import GameResult
    from streamer.pipeline import pool_event

    events: dict[str, EventEvidence] = {}
    out = {}
    for g in games:
        for a in results.get(g.game_id, []):
            if not a.event:
                continue
            events[a.event], passed = pool_event(events.get(a.event), a, config)
            if passed.event_prior is not None:
                out[(a.game_id, a.ply)] = Prior(passed.event_prior.mean, passed.event_prior.sd)
        if g.event not in events:
            continue
        score = g.white_score
        if score is None:  # no result: the game's player-games close without one
            for a in results.get(g.game_id, [])[-2:]:
                events[g.event].close(f"{a.game_id}/{a.player_id}")
            continue
        for color, me, opp, s in (("white", g.white, g.black, score), ("black", g.black, g.white, 1.0 - score)):
            r = GameResult(game_id=g.game_id, player_id=me.id, color=color, score=s, event=g.event, player=me, opponent=opp)
            events[g.event], _ = pool_event(events[g.event], r, config)
    return out


def clustered_mean(x: np.ndarray, clusters: list[str]) -> tuple[float, float, int]:
    """(mean of ``x``, the half-width of its 95 % interval, number of clusters). Rows of one cluster share an error
    (the rows of one event share its prior's error, since event pooling reads the event's level from everyone's moves;
    the assistance draws of one player-event share that player's games), so the interval treats each cluster as one
    draw: the cluster-robust (sandwich) standard error with the small-sample factor G / (G - 1) and Student's t on
    G - 1 degrees of freedom; nan with a single cluster."""
    from scipy.stats import t as student_t  # scipy comes with the bench extra: benches without it still import common

    m = float(np.mean(x))
    _, cluster = np.unique(clusters, return_inverse=True)
    sums = np.bincount(cluster, weights=x - m)  # each cluster's summed deviation from the mean
    g = sums.size
    if g < 2:
        return m, float("nan"), g
    se = math.sqrt(g / (g - 1) * float(sums @ sums)) / len(x)
    return m, float(student_t.ppf(0.975, g - 1)) * se, g
