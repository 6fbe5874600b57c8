"""The review of a screened player: their games searched again, deeper, and matched against the deeper first choice.

A screening alert (docs/models.md s. 7) says a player's moves agree with the service's own search more than their
rating predicts. The service searches shallowly (profile ``fast``: depth 8), and an assistant that searches deeper
often plays a move the shallow search ranks second or third, so its agreement shows only in part. The review takes
the player's games (a PGN), assesses them as the service does (same profile, same counting rules, the analysis
cache's results where it has them) and searches every position whose move counts for fair play again at
:data:`REVIEW_PROFILE` (depth 12, one principal variation). Its match statistic counts the moves that are the deeper
search's first choice, each expected with the move model's probability of that move for a player of the reference
rating (:func:`review_move`): the same model, inputs and exclusions as the service's statistic, only the reference
move changes; its action tier is its own (:data:`~analyzers.fairplay.DEFAULT_REVIEW_Z`, ``--review-z``). A review
calibration with a term for moves in decided positions (:attr:`~analyzers.fairplay.ReviewCalibration.d`) makes it
count those too (measured and not shipped: docs/fairplay.md). ``kibitz review`` runs it;
``bench/fairplay_calibration.py`` measures it on held-out games.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import chess

from analyzers import chessboard
from analyzers.engine import EnginePool, Limits
from analyzers.errors import IllegalMove, MalformedRecord
from analyzers.fairplay import (
    DEFAULT_MIN_MOVES,
    DEFAULT_REVIEW_Z,
    DEFAULT_SCREEN_Z,
    FairPlayMove,
    ReviewCalibration,
    ReviewStats,
)
from analyzers.profiles import EngineProfile, get_profile
from analyzers.ratingmodel import UNKNOWN_CLASS, MoveModel, fair_play_reference, win_losses
from schemas import FairPlayAlert, GameRecord, MoveAssessment, ReviewRequest

from .batch import assess_games
from .ingest import PgnGame
from .pipeline import PipelineConfig, clock_of, counts_for_fair_play, in_decided_position, known_left_after, move_choice, move_clock_inputs

log = logging.getLogger("kibitz.review")

#: The review's search: deeper than any live profile, one principal variation (its first choice is all it needs).
REVIEW_PROFILE = "deep"


def positions(game: PgnGame, color: str) -> list[tuple[int, chess.Board]]:
    """(ply, board before the move) for every move of ``color`` in ``game``."""
    board = chess.Board(game.initial_fen) if game.initial_fen else chess.Board()
    out = []
    for ply, uci in enumerate(game.moves):
        if (board.turn == chess.WHITE) == (color == "white"):
            out.append((ply, board.copy(stack=False)))
        board.push_uci(uci)
    return out


def review_terms(a: MoveAssessment, profile: EngineProfile | None = None) -> tuple[int, list[float], bool | None] | None:
    """(index played, each candidate's loss in win probability, ahead) of a move the review counts, else None: a move
    the service's fair-play statistics count (counted, and :func:`~streamer.pipeline.counts_for_fair_play`; ahead
    None) and, given the service's ``profile``, a move in a position it calls decided
    (:func:`~streamer.pipeline.in_decided_position`) that passes the same rules (ahead: whether the mover is the side
    winning)."""
    if a.counted:
        ahead = None
    elif profile is not None and in_decided_position(a, profile):
        ahead = a.candidates[0].cp > 0
    else:
        return None
    values, idx = move_choice(a)
    losses = win_losses([v * 100.0 for v in values]).tolist()
    return (idx, losses, ahead) if counts_for_fair_play(a, losses) else None


def decided_profile(profile: EngineProfile, calibration: ReviewCalibration | None) -> EngineProfile | None:
    """The service's ``profile`` where the review counts moves in decided positions (``calibration`` prices them,
    :attr:`~analyzers.fairplay.ReviewCalibration.counts_decided`), else None: what :func:`first_choices` and
    :func:`review_stats` take, so that no position is searched for a move the review will not count."""
    return profile if calibration is not None and calibration.counts_decided else None


def counts_for_review(a: MoveAssessment, profile: EngineProfile | None = None) -> bool:
    """Whether the review counts this move (:func:`review_terms`)."""
    return review_terms(a, profile) is not None


def with_deep_choice(a: MoveAssessment, losses: list[float], deep_uci: str) -> tuple[list[float], int]:
    """(``losses`` of :func:`review_terms`, the index of the deeper search's first choice ``deep_uci`` among them): an
    unlisted one that the player did not play is appended with the worst listed value (:func:`review_move` says
    why)."""
    ucis = [c.uci for c in a.candidates] + ([a.uci] if a.played_rank is None else [])
    if deep_uci in ucis:
        return losses, ucis.index(deep_uci)
    return [*losses, max(losses)], len(losses)  # the worst listed value loses the most


def review_move(a: MoveAssessment, deep_uci: str, model: MoveModel, calibration: ReviewCalibration | None = None,
                profile: EngineProfile | None = None, known_left: float | None = None) -> FairPlayMove | None:
    """One move's fair-play terms with the deeper search's first choice ``deep_uci`` as the reference move: matched
    when the player played it, expected with the move model's probability of it at the move's reference rating, time
    class and clock (as :func:`~streamer.pipeline.count_move`). A first choice that the service's search did not list
    and the player did not play gets the worst listed value (what :func:`~analyzers.posterior.with_played_move`
    gives an unlisted played move): a move outside the search's top candidates is rarely better than its last, so its
    probability, and the expected matches, err high and the review's z errs low. ``calibration`` maps that
    probability to how often honest players of rated-dev matched (:class:`~analyzers.fairplay.ReviewCalibration`);
    without it the raw model probability is used. A move in a decided position (:func:`review_terms`, given the
    service's ``profile``) counts only with a calibration that has their term, or without any (the raw p, for the
    fit). A move whose clock is missing in a game whose clocks came (``known_left``, the mover's x_left as last known
    there: :func:`known_lefts`) is read at that time left, as the service reads it, not as a move of a game without
    clocks. None when the move does not count."""
    terms = review_terms(a, profile)
    if terms is None:
        return None
    idx, losses, ahead = terms
    if ahead is not None and calibration is not None and not calibration.counts_decided:
        return None
    losses, target = with_deep_choice(a, losses, deep_uci)
    clock = clock_of(a, known_left)
    shift = model.clock_shift(clock or move_clock_inputs(a))
    reference = fair_play_reference(a.reference_rating or 0)
    sens, cons = model.params(reference, a.time_class or UNKNOWN_CLASS)
    m = FairPlayMove.from_model(losses, idx, float(sens) * math.exp(shift), float(cons), target=target)
    if m is None or calibration is None:
        return m
    return m._replace(p_top=calibration.probability(m.p_top, target == 0, reference, ahead, clock))


def known_lefts(assessments: Iterable[MoveAssessment]) -> dict[int, float | None]:
    """ply -> the mover's x_left as last known before that move in its game (the game scope's
    :attr:`~analyzers.combination.ScopeFeatures.known_x_left`: over the mover's counted moves whose clock came), for
    one player's assessments of one game in ply order."""
    out: dict[int, float | None] = {}
    known: float | None = None
    for a in assessments:
        out[a.ply], known = known, known_left_after(a, known)
    return out


def review_stats(moves: Iterable[tuple[MoveAssessment, str]], model: MoveModel,
                 calibration: ReviewCalibration | None = None, profile: EngineProfile | None = None,
                 known: Mapping[tuple[str, int], float | None] | None = None) -> ReviewStats:
    """The review's sums over (the service's assessment, the deeper search's first choice) pairs; ``known``: (game id,
    ply) -> the mover's last known x_left (:func:`known_lefts`), for moves whose clock is missing."""
    stats = ReviewStats()
    for a, deep in moves:
        stats.add(review_move(a, deep, model, calibration, profile, (known or {}).get((a.game_id, a.ply))))
    return stats


@dataclass
class Review:
    """What a review found for one player: the evidence an alert carries, at the review's depth."""

    player_id: str
    games: list[str]
    limits: str
    stats: ReviewStats
    plies: dict[str, list[int]] = field(default_factory=dict)  # game id -> the plies counted

    @property
    def z(self) -> float:
        """The match count's z (:class:`~analyzers.fairplay.ReviewStats`)."""
        return self.stats.z_match

    def tier(self, screen: float = DEFAULT_SCREEN_Z, action: float = DEFAULT_REVIEW_Z,
             min_moves: int = DEFAULT_MIN_MOVES) -> str | None:
        """The tier the review's match statistic crosses ("screening", "action"), or None."""
        if self.stats.n < min_moves:
            return None
        return "action" if self.z >= action else "screening" if self.z >= screen else None

    def to_dict(self) -> dict:
        s = self.stats
        return {"player_id": self.player_id, "games": self.games, "limits": self.limits, "statistic": "match",
                "counted_moves": s.n, "observed": s.matches, "expected": round(s.expected_matches, 2),
                "z": round(self.z, 3), "tier": self.tier(), "plies": self.plies}


async def first_choices(pool: EnginePool, units: Sequence[tuple[PgnGame, str]], assessed: Mapping[str, Sequence[MoveAssessment]],
                        limits: Limits, profile: EngineProfile | None = None) -> dict[tuple[str, str], dict[int, str]]:
    """(game id, color) -> {ply: the first choice of a search at ``limits``} for each move of that side in
    ``assessed`` (the service's assessments by game id) that the review counts (:func:`counts_for_review`, moves in
    decided positions too given the service's ``profile``); all searches queued at once, ``pool.size`` x 2 in flight."""
    sem = asyncio.Semaphore(pool.size * 2)
    out: dict[tuple[str, str], dict[int, str]] = {}

    async def one(key: tuple[str, str], ply: int, board: chess.Board) -> None:
        async with sem:
            res = await pool.analyse_limits(board, limits)
        if res.candidates:
            out.setdefault(key, {})[ply] = res.candidates[0].uci

    todo = []
    for g, color in units:
        counted = {a.ply for a in assessed.get(g.game_id, []) if a.color == color and counts_for_review(a, profile)}
        todo += [((g.game_id, color), ply, b) for ply, b in positions(g, color) if ply in counted]
    await asyncio.gather(*(one(*t) for t in todo))
    return out


async def review_player(pool: EnginePool, config: PipelineConfig, model: MoveModel, games: Sequence[PgnGame],
                        player_id: str, calibration: ReviewCalibration | None, review: EngineProfile | None = None) -> Review:
    """Assess ``games`` as the service does, then search each position where ``player_id``'s move counts for fair
    play at ``review``'s limits (default :data:`REVIEW_PROFILE`) and sum the review's statistic."""
    limits = (review or get_profile(REVIEW_PROFILE)).limits
    mine = [(g, "white" if g.white.id == player_id else "black") for g in games if player_id in (g.white.id, g.black.id)]
    assessed = await assess_games([g for g, _ in mine], pool, config)
    profile = decided_profile(config.profile, calibration)
    firsts = await first_choices(pool, mine, assessed, limits, profile)
    pairs: list[tuple[MoveAssessment, str]] = []
    plies: dict[str, list[int]] = {}
    known: dict[tuple[str, int], float | None] = {}
    for g, color in mine:
        deep = firsts.get((g.game_id, color), {})
        own = sorted((a for a in assessed.get(g.game_id, []) if a.color == color), key=lambda a: a.ply)
        known |= {(g.game_id, ply): x for ply, x in known_lefts(own).items()}
        for a in own:
            if a.ply in deep:
                pairs.append((a, deep[a.ply]))
                plies.setdefault(g.game_id, []).append(a.ply)
    return Review(player_id, [g.game_id for g, _ in mine], limits.key, review_stats(pairs, model, calibration, profile, known),
                  plies)


def record_of(game: PgnGame) -> GameRecord:
    """A game as the game step's result carries it (the inverse of :func:`game_of`)."""
    return GameRecord(game_id=game.game_id, white=game.white, black=game.black, event=game.event,
                      initial_fen=game.initial_fen, moves=game.moves, clocks=game.clocks, result=game.result,
                      time_control=game.time_control)


def game_of(record: GameRecord) -> PgnGame:
    """A kept game (:class:`~schemas.GameRecord`) as the batch assessment reads games. The game step records only
    moves it applied, so a record whose start does not read or whose moves stop being legal came from elsewhere (or
    was damaged): :class:`~analyzers.errors.MalformedRecord`, the request's dead letter, rather than a review of part
    of it."""
    try:  # replayed as the game step applies moves
        board = chessboard.start(record.initial_fen)
        for uci in record.moves:
            chessboard.play(board, uci)
    except IllegalMove as e:
        raise MalformedRecord(f"a kept game that does not replay: {e}", game_id=record.game_id) from None
    clocks = list(record.clocks) + [None] * (len(record.moves) - len(record.clocks))
    return PgnGame(record.game_id, record.white, record.black, record.event, record.result, list(record.moves),
                   clocks[:len(record.moves)], record.initial_fen, time_control=record.time_control)


class Reviewer:
    """The review run by the service itself (``--review``): at each game end of a player over a fair-play tier, the
    player step sends a :class:`~schemas.ReviewRequest` holding the games of the scope its finding names (the player's
    state keeps their last games for it), and the review stage searches them again here (:func:`review_player`, on the
    runtime's engine pool). A review that reaches the action tier becomes an alert of stage "review" with its own
    evidence, once per crossing (:class:`ReviewState`). The action is meant to be taken on those: on rated-dev the
    service's own action tier raised honest alarms that no review confirmed (docs/fairplay.md)."""

    def __init__(self, pool: EnginePool, config: PipelineConfig, calibration: ReviewCalibration) -> None:
        if config.model is None:
            raise ValueError("the review needs the profile's move model")
        self.pool, self.config, self.calibration = pool, config, calibration

    async def review(self, req: ReviewRequest) -> tuple[Review, FairPlayAlert | None]:
        """The review of the request's games, and the alert it raises (None under the action tier)."""
        alert, cfg, model = req.alert, self.config, self.config.model
        assert model is not None
        r = await review_player(self.pool, cfg, model, [game_of(g) for g in req.games], req.player_id, self.calibration)
        s = r.stats
        tier = r.tier(cfg.screen_z, cfg.review_z, cfg.min_alert_moves)
        log.info("review", extra={"player_id": req.player_id, "scope": alert.scope, "scope_id": alert.scope_id,
                                  "games": len(r.games), "moves": s.n, "z": round(r.z, 3), "service_z": alert.z,
                                  "tier": tier or "none"})
        if tier != "action":
            return r, None
        return r, FairPlayAlert(
            player_id=req.player_id, game_id=alert.game_id, tier="action", stage="review", scope=alert.scope,
            scope_id=alert.scope_id, statistic="match", z=round(r.z, 3), threshold=cfg.review_z, moves=s.n,
            observed=s.matches, expected=round(s.expected_matches, 4), reference_rating=alert.reference_rating,
            reference_source=alert.reference_source, games=len(r.games), plies=r.plies.get(alert.game_id, []),
            limits=r.limits, provisional=alert.provisional or cfg.provisional_for(self.pool.engine_name),
        )
