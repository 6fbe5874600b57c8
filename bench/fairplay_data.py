"""The games and engine analyses the fair-play calibration rests on (bench/fairplay_calibration.py).

Three samples, all analysed at the service's profile through the game step the runtimes use:

- **honest**: rated-holdout games drawn as whole player-events (:func:`~streamer.batch.sample_player_events`,
  seed 0; the first 520 games are the accuracy benchmark's sample) and 600 at random. Evaluation data: nothing here
  is fitted.
- **assisted**: the players whose whole events are in the honest sample. For each of their moves the position is
  also searched at a deeper limit (:data:`ASSIST_LIMITS`, single PV): its first choice is the move an assisted player
  would have played. When the service's search did not list that move, the position after it is searched at the
  service's limit too, so the substituted move is valued exactly as the service would value it ("re-analysed at
  the service's limit").
- **engine**: TCEC engine-vs-engine games, the 100 % reference.

``--warm`` does the engine work only, writing every search to the analysis cache at once (resumable: a rerun skips
finished positions). Without it the samples are read back from the cache (minutes).
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import chess

from analyzers.engine import EnginePool, Limits
from analyzers.ratingmodel import win_probability
from schemas import MoveAssessment
from streamer.batch import assess_games, sample_player_events, sample_rated_games
from streamer.ingest import PgnGame, read_pgn_games
from streamer.pipeline import PipelineConfig
from streamer.review import positions

#: The "assistant": a deeper single-PV search than any service profile (``--assist-depth`` sets another depth).
ASSIST_LIMITS = Limits(depth=12, multipv=1)
#: {(game id, color): {ply: the assisted move's assessment}}
Assisted = dict[tuple[str, str], dict[int, MoveAssessment]]
#: Games per player-event below which a player's event is not used for detection (the issue asks for 9-game events;
#: the held-out events have 5 to 11 rounds).
MIN_EVENT_GAMES = 5


@dataclass
class Samples:
    honest: list[PgnGame]
    events: list[PgnGame]          # the player-events part of ``honest`` (whole events for the chosen players)
    tcec: list[PgnGame]
    split: str = "rated-holdout"   # where honest and events come from (the labels in progress and tables say it)


def load_samples(data: Path, events: int, honest_events: int, random_: int, tcec: int, seed: int = 0,
                 split: str = "rated-holdout") -> Samples:
    """The three samples, seeded: ``events`` games as whole player-events for detection, ``honest_events`` (a
    superset: the sampler takes events in one shuffled order) plus ``random_`` random games for false alarms, all from
    ``split`` (rated-holdout, where the calibration is measured; rated-dev, where a method is chosen)."""
    holdout = data / "pgn" / split
    ev = sample_player_events(holdout, events, seed=seed)
    more = sample_player_events(holdout, honest_events, seed=seed) if honest_events > events else ev
    rnd = sample_rated_games(holdout, random_, seed=seed) if random_ else []
    seen: set[str] = set()
    # in the order --warm analyses them: the detection events, the random games, then the further events
    honest = []
    for g in ev + rnd + more:
        if g.game_id not in seen:
            seen.add(g.game_id)
            honest.append(g)
    engine_games = [g for p in sorted((data / "pgn" / "engine-tcec").glob("*.pgn")) for g in read_pgn_games(p)
                    if not g.errors and len(g.moves) >= 40]
    engine_games = random.Random(seed).sample(engine_games, min(tcec, len(engine_games)))
    return Samples(honest, ev, engine_games, split)


def whole_player_events(games: Sequence[PgnGame], min_games: int = MIN_EVENT_GAMES) -> dict[tuple[str, str], list[PgnGame]]:
    """(event, player id) -> the player's games in that event, round order, for players with ``min_games``+."""
    out: dict[tuple[str, str], list[PgnGame]] = {}
    for g in games:
        for p in (g.white, g.black):
            out.setdefault((g.event, p.id), []).append(g)
    return {k: v for k, v in out.items() if len(v) >= min_games}


async def assist_searches(pool: EnginePool, config: PipelineConfig, game: PgnGame, color: str,
                          honest: list[MoveAssessment], limits: Limits = ASSIST_LIMITS) -> dict[int, MoveAssessment]:
    """ply -> the assessment of the deeper search's first choice in that position, valued at the service's limit
    (the honest assessment itself where the player already chose it)."""
    by_ply = {a.ply: a for a in honest if a.color == color}
    out: dict[int, MoveAssessment] = {}
    for ply, board in positions(game, color):
        a = by_ply.get(ply)
        if a is None:
            continue  # the game step stopped before this move (it does on an illegal one)
        deep = await pool.analyse_limits(board, limits)
        if not deep.candidates:
            continue
        uci = deep.candidates[0].uci
        if uci == a.uci:
            out[ply] = a
            continue
        ranks = [c.uci for c in a.candidates]
        if uci in ranks:
            rank = ranks.index(uci)
            value = a.candidates[rank].cp
        else:
            after = board.copy(stack=False)
            after.push_uci(uci)
            rank, value = None, -(await pool.analyse_limits(after, config.limits)).best_cp
        best = a.candidates[0].cp if a.candidates else value
        out[ply] = a.model_copy(update={"uci": uci, "played_rank": rank, "played_value": value,
                                        "loss": max(0, best - value)})
    return out


def player_event_units(games: Sequence[PgnGame]) -> dict[tuple[str, str], list[tuple[PgnGame, str]]]:
    """(event, player id) -> the player's (game, color) in that event, in the games' order."""
    out: dict[tuple[str, str], list[tuple[PgnGame, str]]] = {}
    for g in games:
        for color, p in (("white", g.white), ("black", g.black)):
            out.setdefault((g.event, p.id), []).append((g, color))
    return out


async def analyse(pool: EnginePool, config: PipelineConfig, samples: Samples, *, progress: bool = True,
                  assist_events: int | None = None, assist: Limits = ASSIST_LIMITS) -> tuple[dict[str, list[MoveAssessment]], Assisted]:
    """Assess every game, then the assisted alternatives for every whole player-event. Returns (assessments by game
    id, {(game id, color): {ply: assisted assessment}})."""

    def say(name: str):  # noqa: ANN202
        return (lambda i, n: print(f"\r{name}: {i}/{n} games", end="", file=sys.stderr, flush=True)) if progress else None

    t = time.time()
    results = await assess_games(samples.events, pool, config, progress=say(f"{samples.split} player-events"))
    assisted: Assisted = {}
    pes = sorted(whole_player_events(samples.events).items())[:assist_events]
    jobs = [(g, "white" if g.white.id == pid else "black") for (_, pid), games in pes for g in games]
    sem = asyncio.Semaphore(pool.size * 2)

    async def one(g: PgnGame, color: str) -> None:
        async with sem:
            assisted[(g.game_id, color)] = await assist_searches(pool, config, g, color, results.get(g.game_id, []), assist)
            if progress:
                print(f"\rassisted: {len(assisted)}/{len(jobs)} player-games", end="", file=sys.stderr, flush=True)

    await asyncio.gather(*(one(g, c) for g, c in jobs))
    results.update(await assess_games(samples.tcec, pool, config, progress=say("TCEC")))
    rest = [g for g in samples.honest if g.game_id not in results]
    results.update(await assess_games(rest, pool, config, progress=say(f"{samples.split} random")))
    if progress:
        print(f"\n{pool.stats.searches} searches, {pool.stats.cache_hits} cache hits, {time.time() - t:.0f} s",
              file=sys.stderr, flush=True)
    return results, assisted


async def review_move_values(pool: EnginePool, units: Sequence[tuple[PgnGame, str]], assisted: Assisted,
                             firsts: dict[tuple[str, str], dict[int, str]],
                             limits: Limits) -> dict[tuple[str, str], dict[int, dict[str, int]]]:
    """(game id, color) -> {ply: {move: its value at ``limits``, centipawns for the mover}} for every move the review
    counts (``firsts`` holds its first choices) in ``units``: the player's own move and, where ``assisted`` has one,
    the assistant's. A move that is the review's first choice is not searched again (its value is that search's); any
    other is valued by a search of the position after it, as the assistant's unlisted moves are. These are the inputs
    of a loss statistic at the review's depth (how much a move gives up against the deeper search), beside its match
    count; every search goes to the pool's cache, so ``--warm --review-values`` prepares them once."""
    todo: list[tuple[tuple[str, str], int, chess.Board, str]] = []
    for g, color in units:
        key = (g.game_id, color)
        counted = firsts.get(key, {})
        alt = assisted.get(key, {})
        boards = dict(positions(g, color)) if counted else {}
        for ply, first in counted.items():
            moves = {g.moves[ply]} | ({alt[ply].uci} if ply in alt else set())
            todo += [(key, ply, boards[ply], uci) for uci in sorted(moves - {first})]
    sem = asyncio.Semaphore(pool.size * 2)
    out: dict[tuple[str, str], dict[int, dict[str, int]]] = {}
    done = 0

    async def one(key: tuple[str, str], ply: int, board: chess.Board, uci: str) -> None:
        nonlocal done
        after = board.copy(stack=False)
        after.push_uci(uci)
        async with sem:
            value = -(await pool.analyse_limits(after, limits)).best_cp
        out.setdefault(key, {}).setdefault(ply, {})[uci] = value
        done += 1
        if done % 200 == 0 or done == len(todo):
            print(f"\rreview values: {done}/{len(todo)} positions after a move", end="", file=sys.stderr, flush=True)

    await asyncio.gather(*(one(*t) for t in todo))
    print(file=sys.stderr)
    return out


async def review_first_values(pool: EnginePool, units: Sequence[tuple[PgnGame, str]],
                              firsts: dict[tuple[str, str], dict[int, str]], limits: Limits) -> dict[tuple[str, str, int], int]:
    """(game id, color, ply) -> the value at ``limits`` of the first choice of each position in ``firsts`` (centipawns
    for the mover): the searches :func:`~streamer.review.first_choices` made, read back from the pool's cache."""
    return {(g.game_id, color, ply): (await pool.analyse_limits(board, limits)).best_cp
            for g, color in units for ply, board in positions(g, color) if ply in firsts.get((g.game_id, color), {})}


def review_loss(a: MoveAssessment, first: str, first_values: dict[tuple[str, str, int], int],
                values: dict[tuple[str, str], dict[int, dict[str, int]]]) -> float:
    """What ``a``'s move gives up against the review's first choice ``first`` at the review's depth, in win
    probability (0 for the first choice itself), from :func:`review_first_values` and :func:`review_move_values`."""
    v1 = first_values[(a.game_id, a.color, a.ply)]
    vp = v1 if a.uci == first else values[(a.game_id, a.color)][a.ply][a.uci]
    return max(0.0, float(win_probability(v1) - win_probability(vp)))
