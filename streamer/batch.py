"""Offline analysis of whole PGN games through the same game step the runtimes use (for fitting and benchmarks)."""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Iterable, Sequence
from pathlib import Path

from analyzers.engine import EnginePool
from schemas import DeadLetter, MoveAssessment

from .ingest import PgnGame, pgn_game_from, rating_from_tag, read_game, read_pgn_games
from .pipeline import PipelineConfig
from .steps import Steps


async def assess_game(game: PgnGame, steps: Steps) -> list[MoveAssessment]:
    """Every assessable move of one game, in order, through the game step the runtimes use (stops at the first
    rejected move)."""
    games: dict = {}
    out: list[MoveAssessment] = []
    for ev in game.events():
        if ev.type == "game_ended":
            break
        outputs = await steps.game(games, ev, source=game.game_id)
        if any(isinstance(o.message, DeadLetter) for o in outputs):
            break
        out += [o.message for o in outputs if isinstance(o.message, MoveAssessment)]
    return out


async def assess_games(games: Sequence[PgnGame], pool: EnginePool, config: PipelineConfig, *, progress=None) -> dict[str, list[MoveAssessment]]:
    """Assess many games, ``pool.size`` x 2 at a time so every engine always has work queued."""
    sem = asyncio.Semaphore(pool.size * 2)
    steps = Steps(config, pool)
    results: dict[str, list[MoveAssessment]] = {}

    async def one(g: PgnGame) -> None:
        async with sem:
            results[g.game_id] = await assess_game(g, steps)
            if progress:
                progress(len(results), len(games))

    await asyncio.gather(*(one(g) for g in games))
    return results


def rated_games(folder: Path, *, min_plies: int = 30) -> list[PgnGame]:
    """Every game of a folder of PGNs with both players rated and ``min_plies``+ plies, in file order, without
    duplicates (same players and first 40 plies: some events are published twice). Remembered per (folder,
    min_plies), however the call spells them (parsing rated-dev takes minutes); treat the list as read-only."""
    return _rated_games(Path(folder), min_plies)


@functools.lru_cache(maxsize=4)
def _rated_games(folder: Path, min_plies: int) -> list[PgnGame]:
    games: list[PgnGame] = []
    seen: set[tuple] = set()
    for path in sorted(folder.glob("*.pgn")):
        for g in read_pgn_games(path):
            key = (g.white.id, g.black.id, tuple(g.moves[:40]))
            if g.errors or len(g.moves) < min_plies or not g.white.rating or not g.black.rating or key in seen:
                continue
            seen.add(key)
            games.append(g)
    return games


def sample_rated_games(folder: Path, n: int, *, seed: int = 0, min_plies: int = 30) -> list[PgnGame]:
    """``n`` games from a folder of PGNs with both players rated, seeded and deduplicated by players and moves."""
    games = rated_games(folder, min_plies=min_plies)
    rng = random.Random(seed)
    return rng.sample(list(games), min(n, len(games)))


def sample_player_events(folder: Path, n: int, *, seed: int = 0, min_games: int = 5, min_plies: int = 30) -> list[PgnGame]:
    """At least ``n`` games chosen as whole player-events: players picked at random (seeded) among those with
    ``min_games`` or more rated games in one event, all of their games in that event taken, until ``n`` games are
    in. Gives long histories (per-event ratings, accuracy after 80-160 moves, outcome prediction from pre-game
    ratings) besides the single games. Returned in file order, which is round order in these files."""
    games = rated_games(folder, min_plies=min_plies)
    by_pe: dict[tuple[str, str], list[int]] = {}
    for i, g in enumerate(games):
        for p in (g.white, g.black):
            by_pe.setdefault((g.event, p.id), []).append(i)
    eligible = sorted(k for k, v in by_pe.items() if len(v) >= min_games)
    random.Random(seed).shuffle(eligible)
    chosen: set[int] = set()
    for k in eligible:
        if len(chosen) >= n:
            break
        chosen.update(by_pe[k])
    return [games[i] for i in sorted(chosen)]


def sample_rated_games_from_file(path: Path, n: int, *, seed: int = 0, min_plies: int = 30) -> list[PgnGame]:
    """``n`` games with both players rated from one large PGN file: a header-only scan, then only the chosen games
    are parsed (elite-otb holds 77,729 games). Game ids carry the game's position in the file."""
    import chess.pgn

    starts = []
    with open(path, encoding="utf-8", errors="replace") as f:
        while True:
            at = f.tell()
            headers = chess.pgn.read_headers(f)
            if headers is None:
                break
            if rating_from_tag(headers.get("WhiteElo")) and rating_from_tag(headers.get("BlackElo")):
                starts.append(at)
    out: list[PgnGame] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for at in random.Random(seed).sample(starts, len(starts)):
            if len(out) >= n:
                break
            f.seek(at)
            game = read_game(f)
            if game is None:
                continue
            g = pgn_game_from(game, Path(path), at)
            if not g.errors and len(g.moves) >= min_plies:
                out.append(g)
    return out


def by_player_game(assessments: Iterable[MoveAssessment]) -> dict[tuple[str, str], list[MoveAssessment]]:
    out: dict[tuple[str, str], list[MoveAssessment]] = {}
    for a in assessments:
        out.setdefault((a.game_id, a.color), []).append(a)
    return out
