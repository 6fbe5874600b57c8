"""The pipeline both runtimes call: one step per game event, one step per player event. No I/O.

Game step (keyed by game_id): :func:`start_game`, :func:`apply_move`, :func:`assess_move`, :func:`end_game` keep a
:class:`GameState` and turn moves into :class:`~schemas.MoveAssessment` (one engine search per position, shared by the
gain, the posterior and fair play) and game ends into one :class:`~schemas.GameResult` per player. Positions are
handled only through the game's adapter (:mod:`analyzers.engine.adapter`); a Go game (``game`` "go") is assessed
and rated by the Go half of the pipeline (:mod:`streamer.gopipeline`: KataGo's evaluations or GNU Go's values in
points, read on the GoR scale) when the configuration has a Go calibration and the runtime a Go engine pool, and refused
with :class:`~analyzers.errors.UnsupportedGame` otherwise.

Player step (keyed by player_id): :func:`apply_player_event` updates a :class:`PlayerState` (gain histograms,
posteriors over c and fair-play sums for the game, event and player scopes; the Glicko-2 rating) and returns what to
publish: a game-scope :class:`~schemas.PerceivedRating` after every move; at a game end the
:class:`~schemas.RatingUpdate`, event- and player-scope perceived ratings and any :class:`~schemas.FairPlayAlert`.

Idempotency: a ply already applied is rejected by the game step (:class:`~analyzers.errors.DuplicatePly`) and
ignored by the player step, so a redelivered event changes nothing.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, TypeVar

import numpy as np

from analyzers import chessboard
from analyzers.calibration import Calibration
from analyzers.combination import Combination, MoveFeatures, ScopeFeatures, moments
from analyzers.engine.adapter import GAMES, GameAdapter, go_adapter
from analyzers.engine.analysis import Limits, PositionAnalysis
from analyzers.engine.gtp import GoLimits
from analyzers.engine.katago import GoEngineLimits, KataGoLimits
from analyzers.engine.pool import DEFAULT_TIMEOUT
from analyzers.errors import (
    CalibrationError,
    CorruptState,
    DuplicateGame,
    DuplicatePly,
    IllegalMove,
    KibitzError,
    LimitsMismatch,
    OutOfOrderPly,
    StateStoreError,
    UnknownGame,
    UnsupportedGame,
)
from analyzers.eventpool import EventEvidence, EventPoolModel, combine, platform_event_name
from analyzers.fairplay import (
    DEFAULT_MIN_MOVES,
    DEFAULT_PLAYER_WINDOW,
    DEFAULT_REVIEW_Z,
    DEFAULT_SCREEN_Z,
    DEFAULT_Z_THRESHOLD,
    TIERS,
    FairPlayMove,
    FairPlayStats,
    ReviewCalibration,
    exclusion,
)
from analyzers.gain import GainHistogram, gain
from analyzers.glicko2 import Glicko2Config, Glicko2Rating, update_after_game
from analyzers.goboard import SUPPORTED_SIZES
from analyzers.gorate import RankModel
from analyzers.perceived import DEFAULT_LEVEL, RatingEstimate, z_for
from analyzers.posterior import SkillPosterior, move_term, with_played_move
from analyzers.profiles import EngineProfile
from analyzers.ratingmodel import (
    BAND_LEVEL,
    DEFAULT_DECLARED_RD,
    FLAT_PRIOR,
    RATING_GRID,
    UNKNOWN_CLASS,
    MoveModel,
    PosteriorSummaries,
    Prior,
    RatingLikelihood,
    class_from_clock,
    class_from_event_name,
    clock_inputs,
    fair_play_reference,
    fair_play_source,
    parse_time_control,
    win_losses,
)
from schemas import (
    RESULT_SCORES,
    EventPrior,
    FairPlayAlert,
    GameEnded,
    GameRecord,
    GameResult,
    GameStarted,
    GlickoState,
    MoveAssessment,
    MoveEvent,
    PerceivedRating,
    PlayerInfo,
    RatingUpdate,
    ReviewRequest,
)

from .gopipeline import GoScope, count_go_move, go_assessment, go_perceived

log = logging.getLogger("kibitz.pipeline")
S = TypeVar("S", "ScopeStats", GoScope)  # a scope: chess's ScopeStats or Go's GoScope
#: The engine pool's search and look-ahead, on a position of the game's adapter and with the game's limits: a
#: python-chess board and Limits give a PositionAnalysis, a GoPosition and GoLimits a GoAnalysis.
Analyse = Callable[[Any, Any], Awaitable[Any]]
Prefetch = Callable[[Any, Any], None]
#: Finished games a player state remembers, so a late duplicate of their events is recognised.
_REMEMBER_GAMES = 256
SECONDS_PER_DAY = 86400.0
#: The stated bound on one player's serialised state with the default limits (tested): well under the 1 MB a Kafka
#: record may have by default, so a player's changelog record always fits.
PLAYER_STATE_BOUND = 400_000
#: Version of the stored form of GameState and PlayerState (``to_dict``). States without one are version 1; version 2:
#: a scope's posterior over c may hold deferred moves (:meth:`analyzers.posterior.SkillPosterior.add`), which a
#: version-1 reader would drop. Older versions are read; a state written by a newer kibitz is refused rather than misread.
STATE_FORMAT = 2


def _check_format(d: dict[str, Any], what: str) -> None:
    v = d.get("format", 1)
    if not (isinstance(v, int) and 1 <= v <= STATE_FORMAT):
        raise StateStoreError(f"{what} state has format {v}; this kibitz reads formats 1 to {STATE_FORMAT}")


@dataclass(frozen=True)
class PipelineConfig:
    profile: EngineProfile
    calibration: Calibration | None = None  # needed by the player step only (batch analysis runs without one)
    model: MoveModel | None = None  # the rating-conditioned move model: when set, it gives the published rating
    #: the learned combination on top of the move model: when set (with ``model``), it gives the moves-only rating
    combination: Combination | None = None
    #: the event prior from the other players' moves and one's results (docs/models.md s. 12): when set (with ``model``), the pool
    #: stage attaches each player's event prior to their assessments, and the game and event scopes start from it
    event_pool: EventPoolModel | None = None
    glicko: Glicko2Config = Glicko2Config()
    z_threshold: float = DEFAULT_Z_THRESHOLD  # the action tier (of the service's statistic; with ``review``: of no alert)
    review_z: float = DEFAULT_REVIEW_Z  # with ``review``: the action tier of the review's statistic
    screen_z: float = DEFAULT_SCREEN_Z  # the screening tier (a review queue)
    min_alert_moves: int = DEFAULT_MIN_MOVES
    #: The player scope's fair-play evidence: its last window to 2 x window counted moves (0: every move it ever had)
    player_fair_window: int = DEFAULT_PLAYER_WINDOW
    level: float = DEFAULT_LEVEL
    #: A player's unfinished game scopes and event scopes kept at most; the oldest goes first. With the player scope
    #: that bounds a player's state near (32 + 8 + 1) scopes x about 6 KB (see PLAYER_STATE_BOUND).
    max_open_games: int = 32
    max_events: int = 8
    #: The game step's sweep (Steps.sweep_games): an open game with no event for this long is evicted (a game
    #: abandoned without an end), and an ended game's end marker, which rejects late events and re-used ids, is kept
    #: this long.
    idle_game_seconds: float = 6 * 3600.0
    ended_game_seconds: float = 24 * 3600.0
    #: The pool step's sweep (Steps.sweep_events): an event with no counted move for this long is dropped.
    idle_event_seconds: float = 14 * 86400.0
    #: The engine pool's deadline per search; None: the profile's (EngineProfile.search_timeout).
    search_timeout: float | None = None
    #: Go (streamer.gopipeline): the server's calibration (analyzers.gorate.load_go_calibration) and the engine's
    #: limits (GNU Go's level, or KataGo's visits: then the Go pool runs KataGo, :attr:`go_game`); without a
    #: calibration, Go games are refused (UnsupportedGame)
    go_calibration: Calibration | None = None
    go_limits: GoEngineLimits = GoLimits()
    #: The review (streamer.review, ``--review``): when set, the player step keeps each player's last games and sends
    #: every fair-play finding with its scope's games for review (ReviewRequest), which the review step searches
    #: deeper; this calibrates the review's expectations
    review: ReviewCalibration | None = None

    def __post_init__(self) -> None:
        if self.event_pool is not None and self.event_pool.evidence == "combination" and self.combination is None:
            # its event sd was fitted for the combination's evidence: the model's alone would misstate the interval
            raise CalibrationError("this event pooling reads the combination's estimates (evidence 'combination'): "
                                   "configure the combination too, or an event pooling fitted on the move model's evidence")

    @cached_property
    def go_rank_model(self) -> RankModel:
        """The Go calibration's rank model, built once: its grid is shared by every Go estimate."""
        if self.go_calibration is None:
            raise UnsupportedGame(GO_NOT_CONFIGURED)
        return RankModel.of(self.go_calibration)

    @property
    def go_game(self) -> GameAdapter:
        """The Go pool's adapter: KataGo's analysis engine for KataGo's limits, else GTP (GNU Go)."""
        return go_adapter(self.go_limits)

    def limits_for(self, game: str) -> Any:
        """The engine limits of ``game``'s searches: the profile's (chess) or :attr:`go_limits`."""
        return self.go_limits if game == "go" else self.profile.limits

    def check_limits(self, a: MoveAssessment) -> None:
        """Refuse (:class:`~analyzers.errors.LimitsMismatch`) an assessment searched under other limits than this
        configuration's searches: its calibrations, fitted on those, do not hold for it. Every stage of a deployment
        must run the same profile; the game step's own assessments always pass."""
        want = self.limits_for(a.game).key
        if a.limits != want:
            raise LimitsMismatch(
                f"searched at {a.limits}, but this stage rates moves searched at {want}"
                + (f" (profile {self.profile.name})" if a.game == "chess" else "")
                + ": its calibration does not hold for other limits. Run every stage with the same --profile "
                + ("(and --depth, --nodes, --multipv)" if a.game == "chess" else "(and --go-profile, --go-level)"),
                game_id=a.game_id, ply=a.ply)

    @property
    def provisional(self) -> bool:
        """Whether the fits this configuration rates with are marked provisional (the move model where there is one,
        else the calibration): other limits than the profile's (``--depth``...), or a calibration not final."""
        if self.model is not None:
            return self.model.provisional
        return self.calibration is not None and self.calibration.provisional

    def calibrated_engine(self, game: str = "chess") -> str | None:
        """The engine ``game``'s calibrations were fitted on, as it names itself (``Calibration.engine``, e.g.
        "Stockfish 15.1"); None without a calibration."""
        cal = self.go_calibration if game == "go" else self.calibration
        return cal.engine if cal is not None else None

    def fitted_on(self, engine: str, game: str = "chess") -> bool:
        """Whether ``game``'s calibrations were fitted on ``engine`` (as it names itself), or name no engine."""
        calibrated = self.calibrated_engine(game)
        return calibrated is None or engine == calibrated

    def provisional_for(self, engine: str) -> bool:
        """Whether what this configuration rates from ``engine``'s chess searches is provisional: its fits are
        (:attr:`provisional`), or they were fitted on another engine."""
        return self.provisional or not self.fitted_on(engine)

    def other_engine(self, a: MoveAssessment) -> bool:
        """Whether an assessment was searched by another engine than the one its game's calibrations were fitted on
        (:meth:`calibrated_engine`: a newer Stockfish, another KataGo network: its values at the same limits differ, so
        the fits do not hold as measured). Such moves are still rated, as provisional; the first from each engine is
        logged."""
        if self.fitted_on(a.engine, a.game):
            return False
        warn_once(("engine", a.engine, a.game), "moves searched by another engine than the calibrations were fitted on: "
                  "their ratings are published as provisional, and fair-play expectations are not calibrated for it",
                  engine=a.engine, calibrated_engine=self.calibrated_engine(a.game), profile=self.profile.name)
        return True

    @property
    def go_timeout(self) -> float:
        """The deadline of one Go search: :attr:`search_timeout`, else the pool's default (a GNU Go search costs 0.1 s
        at level 1 and many times that at level 10; no per-level cost is measured to derive a tighter one from)."""
        return self.search_timeout or DEFAULT_TIMEOUT

    @property
    def timeout(self) -> float:
        return self.search_timeout or self.profile.search_timeout

    @property
    def limits(self) -> Limits:
        return self.profile.limits


#: What warn_once has logged in this process.
_WARNED: set[tuple[str, ...]] = set()


def warn_once(key: tuple[str, ...], message: str, **extra: Any) -> None:
    """Log ``message`` the first time this process meets ``key`` (a setting that holds for every record after it: one
    line says it, a line per record would flood)."""
    if key not in _WARNED:
        _WARNED.add(key)
        log.warning(message, extra=extra)


# == game step ===========================================================================================
#: How far ahead of its game's next ply a move may arrive and still wait for the plies before it (:func:`hold_move`):
#: a producer's retry, or two producers of one game, can swap a few of its records, and a move rejected for coming
#: early would leave every later move of its game out of order. A move further ahead is rejected (out_of_order_ply).
REORDER_PLIES = 16


@dataclass(frozen=True, slots=True)
class HeldMove:
    """A move that came before the plies ahead of it, kept in its game's state until they come, with where it came
    from (the source its dead letter names if they never do)."""

    event: MoveEvent
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.event.model_dump(mode="json", exclude_none=True), "source": self.source}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HeldMove:
        return cls(MoveEvent.model_validate(d["event"]), str(d.get("source", "")))


@dataclass
class GameState:
    game_id: str
    white: PlayerInfo
    black: PlayerInfo
    event: str = ""
    initial_fen: str | None = None  # the setup the adapter starts from: a FEN (chess), "SIZE KOMI" (Go)
    moves: list[str] = field(default_factory=list)
    pending_end: GameEnded | None = None
    ended: bool = False
    time_class: str = UNKNOWN_CLASS
    #: the base time (the larger of the first two clocks) and each side's last clock, for the move model's clock inputs
    clock_base: float | None = None
    last_clock: list[float | None] = field(default_factory=lambda: [None, None])  # per side (0 the first player)
    #: wall-clock time of the game's last event: open games idle too long and old end markers are swept
    touched: float = 0.0
    #: the input offset of the last record applied to this game (set by the transactional stage): a record at or
    #: before it was applied and committed already, and is skipped when a cut transaction re-reads it
    input_offset: int = -1
    game: str = "chess"  # the messages' ``game``: which adapter (analyzers.engine.adapter.GAMES) holds the rules
    #: the mover's clock after each move (None where the input had none): a game's record for the review
    clocks: list[float | None] = field(default_factory=list)
    #: the start's declared time control (GameStarted.time_control), which the game's record carries to the review
    time_control: str = ""
    #: a game that corrects another (GameStarted.corrects_from): its plies before this were counted under that game
    repeats_before: int = 0
    #: of such a game, the sides whose player is another than in that game (GameStarted.renamed): theirs were not
    renamed: tuple[str, ...] = ()
    #: moves that came before the plies ahead of them (:func:`hold_move`), by ply, each with where it came from
    held: dict[int, HeldMove] = field(default_factory=dict)
    #: where ``pending_end`` came from (the source its dead letter names if its game is evicted before its plies come)
    end_source: str = ""
    #: the next ply, when a move for it was refused as illegal (:func:`refuse_ply`): the game cannot go on past it, so
    #: an end that announced more plies finishes on the moves applied; a legal move for it clears it
    illegal_ply: int | None = None
    _position: Any = field(default=None, repr=False, compare=False)
    clock_warned: bool = field(default=False, repr=False, compare=False)  # an implausible clock was logged (not stored)

    @property
    def adapter(self) -> GameAdapter:
        return GAMES[self.game]

    def player(self, side: int) -> PlayerInfo:
        """Who plays ``side`` (0 the first player: White in chess, Black in Go)."""
        return self.black if (side == 0) == (self.game == "go") else self.white

    def colour(self, side: int) -> str:
        return "black" if (side == 0) == (self.game == "go") else "white"

    def position(self) -> Any:
        """The current position (the adapter's type: a python-chess board for chess), built on first use."""
        if self._position is None:
            game = self.adapter
            pos = game.start(self.initial_fen)
            for m in self.moves:
                game.play(pos, m)
            self._position = pos
        return self._position

    def recorded_clocks(self) -> list[float | None]:
        """The clocks a stored state or a game's record carries: none for a game without clocks (not a null per ply)."""
        return list(self.clocks) if any(c is not None for c in self.clocks) else []

    def copy(self) -> GameState:
        """An independent copy (its own move and clock lists; the position is rebuilt from the moves if it is
        needed), for a stage that may have to put a game back as it was before a record: a few us, where to_dict
        costs 30."""
        return replace(self, moves=list(self.moves), clocks=list(self.clocks), last_clock=list(self.last_clock),
                       held=dict(self.held), _position=None)

    def to_dict(self) -> dict[str, Any]:
        if self.ended:  # an end marker: enough to reject a late event or a re-used id, a few hundred bytes
            return {"format": STATE_FORMAT, "game_id": self.game_id, "white": self.white.model_dump(),
                    "black": self.black.model_dump(), "event": self.event, "ended": True, "touched": self.touched,
                    "input_offset": self.input_offset}
        return {
            "format": STATE_FORMAT, "game_id": self.game_id, "white": self.white.model_dump(), "black": self.black.model_dump(),
            "event": self.event, "initial_fen": self.initial_fen, "moves": list(self.moves),
            **({"clocks": clocks} if (clocks := self.recorded_clocks()) else {}),
            "pending_end": self.pending_end.model_dump() if self.pending_end else None, "ended": self.ended,
            **({"end_source": self.end_source} if self.pending_end and self.end_source else {}),
            **({"illegal_ply": self.illegal_ply} if self.illegal_ply is not None else {}),
            "time_class": self.time_class, "clock_base": self.clock_base, "last_clock": list(self.last_clock),
            "touched": self.touched, "input_offset": self.input_offset,
            **({"time_control": self.time_control} if self.time_control else {}),
            **({"repeats_before": self.repeats_before} if self.repeats_before else {}),
            **({"renamed": list(self.renamed)} if self.renamed else {}),
            **({"held": [h.to_dict() for _, h in sorted(self.held.items())]} if self.held else {}),
            # the current position, so a stored game is restored in O(1) instead of replaying every move
            "position": self.adapter.snapshot(self.position()),
            **({"game": self.game} if self.game != "chess" else {}),  # chess states keep their earlier form
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GameState:
        _check_format(d, "game")
        pending = d.get("pending_end")
        state = cls(
            d["game_id"], PlayerInfo(**d["white"]), PlayerInfo(**d["black"]), d["event"], d.get("initial_fen"),
            list(d.get("moves", ())), GameEnded(**pending) if pending else None, d["ended"],
            d.get("time_class", UNKNOWN_CLASS), d.get("clock_base"), list(d.get("last_clock") or [None, None]),
            float(d.get("touched", 0.0)), int(d.get("input_offset", -1)), d.get("game", "chess"),
        )
        # a game without clocks stores none (and states stored before clocks were kept have none): None per move
        state.clocks = list(d.get("clocks") or [None] * len(state.moves))
        state.time_control = d.get("time_control", "")
        state.repeats_before = int(d.get("repeats_before", 0))
        state.renamed = tuple(d.get("renamed", ()))
        state.held = {h.event.ply: h for h in map(HeldMove.from_dict, d.get("held", ()))}
        state.end_source = str(d.get("end_source", ""))
        state.illegal_ply = d.get("illegal_ply")
        stored = d.get("position") or d.get("fen")  # "fen": chess states stored before the adapter
        if stored:
            # the engine sees positions without history (see analyzers.engine.analysis), so this is all it needs
            try:
                state._position = state.adapter.restore(stored)
            except (ValueError, KibitzError) as e:  # written by kibitz, so a bad one is damage, not input
                raise CorruptState(f"game {state.game_id}: stored position {stored[:60]!r} cannot be read ({e})") from None
        return state


#: Why a pipeline refuses a Go game: it has no Go calibration (or its runtime no Go engine pool).
GO_NOT_CONFIGURED = ("this kibitz is not set up for Go: it needs a Go calibration and a GTP engine pool (the worker's "
                     "--go, `kibitz replay FILE.sgf`)")


#: Why a game with one player on both sides is refused: its moves would be counted twice in one player's scopes and its
#: result would move the player's own rating (a win against oneself: +240 from a new rating).
SELF_PLAY = "a game against oneself is not rated"


def start_game(existing: GameState | None, ev: GameStarted, prefetch: Prefetch | None, config: PipelineConfig) -> GameState:
    if ev.white.id == ev.black.id:
        raise UnsupportedGame(f"White and Black are the same player ({ev.white.id}); {SELF_PLAY}", game_id=ev.game_id)
    setup = ev.initial_fen
    if ev.game == "go":
        if config.go_calibration is None:
            raise UnsupportedGame(GO_NOT_CONFIGURED, game_id=ev.game_id)
        size = ev.board_size or 19
        if size not in SUPPORTED_SIZES:
            raise UnsupportedGame(f"board size {size}: kibitz rates Go on {', '.join(map(str, SUPPORTED_SIZES))}",
                                  game_id=ev.game_id)
        setup = f"{size} {7.5 if ev.komi is None else ev.komi:g}"
    if existing is not None:
        # an id names one game: a start after its end is late or a re-used id, and would open a game that never ends
        raise DuplicateGame("game already ended: a game id is used once" if existing.ended else "game already started",
                            game_id=ev.game_id)
    try:
        state = GameState(ev.game_id, ev.white, ev.black, ev.event, setup,
                          time_class=parse_time_control(ev.time_control), game=ev.game, time_control=ev.time_control,
                          repeats_before=(ev.corrects_from or 0) if ev.corrects else 0,
                          renamed=tuple(ev.renamed) if ev.corrects else ())
        position = state.position()
    except IllegalMove as e:
        raise IllegalMove(str(e), game_id=ev.game_id) from None
    if ev.event and platform_event_name(ev.event) and config.event_pool is not None:
        warn_once(("event", ev.event), "an event name that a platform gives every game of a kind: its games are pooled "
                  "as one event, whose intervals then cover about 88 % rather than 95 % (docs/accuracy.md); send such "
                  "games without an event, or rate them with --no-event-pool", event=ev.event, game_id=ev.game_id)
    if prefetch is not None:
        prefetch(position, config.limits_for(ev.game))  # the first position is known now: search it before the first move
    return state


def _check_ply(state: GameState | None, ev: MoveEvent) -> GameState:
    if state is None:
        raise UnknownGame("move for a game that was never started", game_id=ev.game_id, ply=ev.ply)
    if ev.game != state.game:
        raise UnsupportedGame(f"a {ev.game} move for a {state.game} game", game_id=ev.game_id, ply=ev.ply)
    if state.ended:
        raise UnknownGame("move for a game that has ended", game_id=ev.game_id, ply=ev.ply)
    n = len(state.moves)
    if ev.ply < n:
        same = state.moves[ev.ply] == ev.uci
        raise DuplicatePly("ply already applied" + ("" if same else f" with a different move ({state.moves[ev.ply]})"),
                           game_id=ev.game_id, ply=ev.ply)
    if ev.ply > n:
        raise OutOfOrderPly(f"expected ply {n}; a move up to {REORDER_PLIES} plies ahead waits for the plies before it, "
                            "one further ahead is rejected", game_id=ev.game_id, ply=ev.ply)
    return state


def hold_move(state: GameState | None, ev: MoveEvent, source: str = "") -> bool:
    """Keep ``ev`` in its game's state when it came before the plies ahead of it, at most :data:`REORDER_PLIES`
    ahead of the next one; True when held (:func:`next_held` gives it back once its turn comes). Any other move is
    for :func:`apply_move` to apply or reject. A ply that is held already is a duplicate."""
    if state is None or state.ended or ev.game != state.game:
        return False
    n = len(state.moves)
    if not n < ev.ply <= n + REORDER_PLIES:
        return False
    held = state.held.get(ev.ply)
    if held is not None:
        raise DuplicatePly("ply already held, waiting for the plies before it" + (
            "" if held.event.uci == ev.uci else f", with a different move ({held.event.uci})"), game_id=ev.game_id, ply=ev.ply)
    state.held[ev.ply] = HeldMove(ev, source)
    # rare in a healthy stream; a producer that numbers plies from 1 shows here first (its moves wait for a ply 0)
    log.info("move held for the plies before it", extra={"game_id": ev.game_id, "ply": ev.ply, "expected_ply": n,
                                                          "held": len(state.held), "source": source})
    return True


def next_held(state: GameState) -> HeldMove | None:
    """The held move whose turn has come (the game's next ply), taken out of the state; None if there is none."""
    return None if state.ended or not state.held else state.held.pop(len(state.moves), None)


def stranded(state: GameState) -> list[tuple[MoveEvent | GameEnded, str]]:
    """What the game waits with, each with its source: its held moves in ply order, then (an open game's) an end that
    waits for its plies. What an evicted game held (idle, or at a memory limit): the plies before them had not come."""
    out: list[tuple[MoveEvent | GameEnded, str]] = [(h.event, h.source) for _, h in sorted(state.held.items())]
    if state.pending_end is not None and not state.ended:
        out.append((state.pending_end, state.end_source))
    return out


def orphaned_held(state: GameState) -> list[tuple[MoveEvent | GameEnded, str]]:
    """The held moves of an ended game (:func:`stranded`), taken out of its state: the plies before them never came."""
    if not state.ended or not state.held:
        return []
    out = stranded(state)
    state.held.clear()
    return out


def _first_view(a: PositionAnalysis, side: int) -> int:
    """The evaluation from the first player's side (White's, in chess) when ``side`` is to move."""
    return a.best_cp if side == 0 else -a.best_cp


@dataclass
class AppliedMove:
    """A move validated and applied to its game; what the engine step needs, and any results it completed."""

    event: MoveEvent
    state: GameState
    before: Any   # the position before the move and after it (copies, the adapter's type)
    after: Any
    side: int     # who moved: 0 the first player (White), 1 the second
    results: list[GameResult]
    clock_spent: float | None = None  # the mover's previous clock minus this one
    captured_on: Any = None  # where the opponent's last move captured (chess: a square), if it captured
    clock: float | None = None  # the mover's clock after it (None where missing or implausible: plausible_clock)

    @property
    def white_moved(self) -> bool:
        return self.state.colour(self.side) == "white"


def apply_move(state: GameState | None, ev: MoveEvent) -> AppliedMove:
    """Validate a move and advance the game. Input errors leave the state untouched."""
    state = _check_ply(state, ev)
    game = state.adapter
    pos = state.position()
    before = game.copy(pos)
    captured_on = game.last_capture(pos)
    side = game.mover(pos)
    try:
        game.play(pos, ev.uci)
    except IllegalMove as e:
        raise IllegalMove(str(e), game_id=ev.game_id, ply=ev.ply) from None
    clock = plausible_clock(ev, state)
    state.moves.append(ev.uci)
    state.illegal_ply = None  # a legal move for a ply refused before (a corrected resend): the game goes on
    state.clocks.append(clock)
    # a game's first move of each side, counted from the game's start: a game set up from a FEN past the opening
    # (joined late, resumed) starts with clocks that are neither the base nor a guide to the time control
    first = game.ply(before) <= 1
    if state.time_class == UNKNOWN_CLASS and ev.ply <= 1:
        # no declared time control: the first clock is base + increment minus a few seconds; a game without clocks
        # (an over-the-board archive) may still have an event name that says it ("World Blitz")
        state.time_class = (class_from_clock(clock) if clock is not None and first
                            else class_from_event_name(state.event))
    spent = None
    if clock is not None:
        previous = state.last_clock[side]
        spent = max(previous - clock, 0.0) if previous is not None else None
        if first and clock > 0:
            state.clock_base = max(state.clock_base or 0.0, clock)
    # a move without its clock leaves the time spent on the mover's next move unknown: their previous clock minus
    # the next one would be the time of two moves
    state.last_clock[side] = clock
    return AppliedMove(ev, state, before, game.copy(pos), side, _maybe_finish(state), spent, captured_on, clock)


#: A clock over a day is no clock of a rated game: a producer's unit error (milliseconds for seconds) or a clock's
#: glitch. Such a clock is taken as missing (the move is rated without it); kept, one would set the move model's
#: time inputs far outside anything it was fitted on.
MAX_CLOCK = 86_400.0


def plausible_clock(ev: MoveEvent, state: GameState) -> float | None:
    """The move's clock, or None (logged once per game) if it is over :data:`MAX_CLOCK`."""
    if ev.clock is None or ev.clock <= MAX_CLOCK:
        return ev.clock
    if not state.clock_warned:
        state.clock_warned = True
        log.warning("implausible clock taken as missing", extra={"game_id": ev.game_id, "ply": ev.ply,
                                                                "clock": ev.clock, "max_clock": MAX_CLOCK})
    return None


async def assess_move(applied: AppliedMove, analyse: Analyse, config: PipelineConfig,
                      prefetch: Prefetch | None = None) -> MoveAssessment:
    """The engine step of a move: one search of the position before it (cached or already running, thanks to
    the look-ahead) and one of the position after it (which is also the next move's look-ahead). A Go move needs
    only the first (:func:`~streamer.gopipeline.go_assessment`); the next position is handed to ``prefetch``.

    The game has already advanced (:func:`apply_move`), so an engine failure here loses only this assessment.
    """
    ev, state, before_pos, after_pos = applied.event, applied.state, applied.before, applied.after
    if state.game == "go":
        network = isinstance(config.go_limits, KataGoLimits)  # a network values positions: the one after is needed now
        if prefetch is not None and not after_pos.over:
            prefetch(after_pos, config.go_limits)
        analysis = await analyse(before_pos, config.go_limits)
        return go_assessment(ev, mover=state.player(applied.side), colour=state.colour(applied.side), side=applied.side,
                             event=state.event, analysis=analysis,
                             after=await analyse(after_pos, config.go_limits) if network else None)
    white_moved = applied.white_moved
    limits = config.limits
    before = await analyse(before_pos, limits)
    after = await analyse(after_pos, limits)
    mover, colour = state.player(applied.side), state.colour(applied.side)
    rank = before.rank_of(ev.uci)
    # the recapture rule of fair play: the engine's first choice takes back what the opponent just took
    recapture = bool(before.candidates) and state.adapter.retakes(before_pos, before.candidates[0].uci, applied.captured_on)
    played_value = before.candidates[rank].value if rank is not None else -after.best_cp
    counted = (
        # past the book by the position's own move number: a game set up from a FEN is that far into the game
        state.adapter.ply(before_pos) >= config.profile.skip_plies
        and abs(before.best_cp) <= config.profile.decided_cp
        and len(before.candidates) > 1
    )
    s_before, s_after = _first_view(before, applied.side), _first_view(after, state.adapter.mover(after_pos))
    return MoveAssessment(
        game_id=ev.game_id, ply=ev.ply, player_id=mover.id, color=colour, uci=ev.uci,
        event=state.event, reference_rating=mover.rating, reference_rd=mover.rd, time_class=state.time_class,
        clock=applied.clock, clock_spent=applied.clock_spent, clock_base=state.clock_base,
        eval_before=s_before, eval_after=s_after,
        gain=gain(s_before, s_after, white_moved), loss=max(0, before.best_cp - played_value),
        # plain dicts: MoveAssessment validates them in one pass (a Candidate() each costs a Python-level __init__)
        candidates=[{"uci": c.uci, "cp": c.value, "mate": c.mate} for c in before.candidates],
        played_rank=rank, played_value=played_value, counted=counted, engine=before.engine, limits=before.limits,
        recapture=recapture, repeat=ev.ply < state.repeats_before and colour not in state.renamed,
    )


def end_game(state: GameState | None, ev: GameEnded) -> list[GameResult]:
    """Record the result; emits one GameResult per player once every announced ply has arrived, or at once when the
    game cannot go on (its next ply was refused as illegal: :func:`refuse_ply`)."""
    if state is None or state.ended:
        raise UnknownGame("end of a game that was never started or already ended", game_id=ev.game_id)
    state.pending_end = ev
    return _maybe_finish(state)


def refuse_ply(state: GameState, ply: int) -> list[GameResult]:
    """A move for the game's next ply ``ply`` was refused as illegal: the game cannot go on past it. An end that waits
    for plies past it (now or when it comes) finishes the game on the moves applied, rather than wait for ever and
    lose the result with the idle game; returns its results if it is here."""
    if state.ended or ply != len(state.moves):
        return []
    state.illegal_ply = ply
    return _maybe_finish(state)


def _maybe_finish(state: GameState) -> list[GameResult]:
    ev = state.pending_end
    if ev is None:
        return []
    n = len(state.moves)
    if ev.plies is not None and n < ev.plies:
        if state.illegal_ply != n:
            return []  # moves still to come (the end travelled on another topic and overtook them)
        log.warning("game ended short of the plies its end announced: a move was illegal", extra={
            "game_id": state.game_id, "announced": ev.plies, "applied": n, "illegal_ply": n})
    state.ended = True
    if ev.plies is not None and len(state.moves) > ev.plies:
        # the producer's end and its moves disagree: the game is scored on the moves that were applied (and rated)
        log.warning("game ended with more plies than its end announced", extra={
            "game_id": state.game_id, "announced": ev.plies, "applied": len(state.moves)})
    if state.game == "chess" and (on_board := chessboard.board_result(state.position())) not in (None, ev.result):
        # scored as declared: a forfeit, an arbiter's decision (a fair-play ruling) or the producer's error; the
        # declared result is the one that counts for a rating, but an operator should see the two differ (29 of the
        # 5,889 games of rated-dev that end in checkmate declare another result)
        log.warning("declared result differs from the board's", extra={
            "game_id": state.game_id, "declared": ev.result, "on_board": on_board, "plies": len(state.moves)})
    s = RESULT_SCORES[ev.result]
    record = GameRecord(game_id=state.game_id, white=state.white, black=state.black, event=state.event,
                        initial_fen=state.initial_fen, moves=state.moves, clocks=state.recorded_clocks(),
                        result=ev.result, time_control=state.time_control) if state.game == "chess" else None
    return [
        GameResult(game=state.game, game_id=state.game_id, player_id=state.white.id, color="white", score=s,
                   event=state.event, player=state.white, opponent=state.black, timestamp=ev.timestamp, record=record),
        GameResult(game=state.game, game_id=state.game_id, player_id=state.black.id, color="black", score=1.0 - s,
                   event=state.event, player=state.black, opponent=state.white, timestamp=ev.timestamp, record=record),
    ]


# == pool step (keyed by event) ==========================================================================
def pool_event(state: EventEvidence | None, ev: MoveAssessment | GameResult,
               config: PipelineConfig) -> tuple[EventEvidence, MoveAssessment | GameResult]:
    """The pool stage (docs/models.md s. 12): count a counted move in its event's evidence and attach the mover's
    event prior (from every other player's moves so far, and the mover's results in the event when the pooling
    model reads results) to the assessment; at a game result, record it and close the player-game; the result
    carries the prior too (the event scope's estimate at the game end starts from it). A duplicate ply or result
    changes nothing. Needs ``config.model`` and ``config.event_pool``; an event with no other player's counted move yet
    attaches no prior."""
    pool, model = config.event_pool, config.model
    if pool is None or model is None:
        raise ValueError("the pool step needs a move model and an event pooling model in PipelineConfig")
    state = state or EventEvidence()
    if isinstance(ev, MoveAssessment):
        config.check_limits(ev)
        if ev.counted:
            game = state.open.get(f"{ev.game_id}/{ev.player_id}")
            move_ll, tclass, features = move_likelihood(ev, model, game.feats.known_x_left if game is not None else None)
            state.add_move(ev.game_id, ev.player_id, ev.ply, move_ll, tclass, pool, model, features=features,
                           combination=config.combination)
    else:
        state.add_result(ev.game_id, ev.player_id, ev.opponent.id, ev.score)
        state.close(f"{ev.game_id}/{ev.player_id}")
    prior, games = state.prior_for(ev.player_id, pool)
    if prior is None:
        return state, ev
    return state, ev.model_copy(update={"event_prior": EventPrior(mean=round(prior.mean, 1), sd=round(prior.sd, 1),
                                                                 player_games=games)})


# == player step =========================================================================================
def move_clock_inputs(a: MoveAssessment) -> tuple[float, float]:
    """The move model's clock inputs (:func:`~analyzers.ratingmodel.clock_inputs`) of an assessment."""
    previous = a.clock + a.clock_spent if a.clock is not None and a.clock_spent is not None else None
    return clock_inputs(a.clock, previous, a.clock_base)


def has_clock(a: MoveAssessment) -> bool:
    """Whether the move's clock inputs are known (the mover's clock and the game's base time)."""
    return a.clock is not None and a.clock_base is not None


def clock_of(a: MoveAssessment, known_left: float | None = None) -> tuple[float, float] | None:
    """The clock inputs (x_left, x_spent) a move is read at: its own when its clock came; a move whose clock is
    missing in a game whose clocks came before (``known_left``: the mover's x_left as last known there,
    :func:`known_left_after`) at that time left and a typical think (x_spent 0); None for a move of a game without
    clocks (what the review calibration's "unclocked" term reads)."""
    if has_clock(a):
        return move_clock_inputs(a)
    return (known_left, 0.0) if known_left is not None else None


def known_left_after(a: MoveAssessment, known: float | None) -> float | None:
    """The mover's x_left as last known in the game once ``a`` is in, ``known`` before it: a counted move whose clock
    came sets it (the game scope's :attr:`~analyzers.combination.ScopeFeatures.known_x_left`)."""
    return move_clock_inputs(a)[0] if a.counted and has_clock(a) else known


def move_features(losses: Sequence[float] | np.ndarray, idx: int, clock: tuple[float, float], a: MoveAssessment) -> MoveFeatures:
    """What a counted move with these candidate ``losses`` and clock inputs adds to the combination's inputs."""
    clocked = has_clock(a)
    return MoveFeatures.of(losses, idx, clock, clocked, clocked and a.clock_spent is not None)


def move_choice(a: MoveAssessment) -> tuple[list[float], int]:
    """Candidate values (pawns, mover's view) and the index of the move played, outside moves appended."""
    values = [c.cp / 100.0 for c in a.candidates]
    if a.played_rank is not None:
        return values, a.played_rank
    return with_played_move(values, (a.played_value or 0) / 100.0)


@dataclass
class ScopeStats:
    """Everything kibitz knows about a player within one scope (a game, an event, or all their games)."""

    hist: GainHistogram = field(default_factory=GainHistogram)
    post: SkillPosterior = field(default_factory=SkillPosterior)
    fair: FairPlayStats = field(default_factory=FairPlayStats)
    last_ply: int = -1
    games: int = 0
    rating: RatingLikelihood = field(default_factory=RatingLikelihood)
    feats: ScopeFeatures = field(default_factory=ScopeFeatures)
    fair_plies: list[int] = field(default_factory=list)  # game scopes: the plies the fair-play statistics counted
    #: a move of this scope was searched by another engine than the calibrations' (PipelineConfig.other_engine): the
    #: scope's ratings are published as provisional from then on
    other_engine: bool = False

    def add(self, a: MoveAssessment, c_ref: float | None, model: MoveModel | None = None,
            known_left: float | None = None) -> None:
        """Count one move (see :func:`count_move`, which counts it in several scopes at once)."""
        count_move((self,), a, c_ref, model, known_left)

    def to_dict(self) -> dict[str, Any]:
        return {"hist": self.hist.to_dict(), "post": self.post.to_dict(), "fair": self.fair.to_dict(),
                "last_ply": self.last_ply, "games": self.games, "rating": self.rating.to_dict(), "feats": self.feats.to_dict(),
                **({"fair_plies": self.fair_plies} if self.fair_plies else {}),
                **({"other_engine": True} if self.other_engine else {})}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ScopeStats:
        return cls(GainHistogram.from_dict(d["hist"]), SkillPosterior.from_dict(d["post"]),
                   FairPlayStats.from_dict(d["fair"]), d["last_ply"], d["games"],
                   RatingLikelihood.from_dict(d["rating"]) if d.get("rating") else RatingLikelihood(),
                   ScopeFeatures.from_dict(d["feats"]) if d.get("feats") else ScopeFeatures(), list(d.get("fair_plies", [])),
                   bool(d.get("other_engine", False)))


def count_move(scopes: Sequence[ScopeStats], a: MoveAssessment, c_ref: float | None, model: MoveModel | None = None,
               known_left: float | None = None) -> FairPlayMove | None:
    """Count one move in each of a player's scopes (game, event, overall). What the scopes share is computed once:
    the candidates, the move model's log-likelihood over the rating grid (a move without its clock read at
    ``known_left``, the mover's x_left as last known in the game: the game scope's
    :attr:`~analyzers.combination.ScopeFeatures.known_x_left`), and the fair-play terms: from the move
    model at the move's reference rating when there is a model, else from the agent model at ``c_ref`` (None: no
    fair-play statistics); a move :func:`~analyzers.fairplay.exclusion` rules out adds nothing to them. The first
    scope's posterior over c takes the move at once (the game's, whose c is published after every move); the
    others defer it (:meth:`~analyzers.posterior.SkillPosterior.add`: read at game ends, they fold their moves
    in by batches)."""
    fair = None
    if a.counted:
        values, idx = move_choice(a)
        term = move_term(values, idx)
        if term is not None:
            scopes[0].post.add(term)
            for s in scopes[1:]:
                s.post.add(term, defer=True)
        deltas = win_losses([v * 100.0 for v in values])
        losses = deltas.tolist()
        if model is not None:
            move_ll, tclass, clock, shift = _move_loglik(a, model, deltas, idx, known_left)
            features = move_features(losses, idx, clock, a)
            for s in scopes:
                s.rating.add(move_ll, tclass)
                s.feats.add(features)
            if counts_for_fair_play(a, losses):
                sens, cons = model.params(fair_play_reference(a.reference_rating or 0), tclass)
                fair = FairPlayMove.from_model(losses, idx, float(sens) * math.exp(shift), float(cons))
        elif c_ref is not None and exclusion(losses, a.recapture) is None:
            fair = FairPlayMove.of(values, idx, c_ref)
    for s in scopes:
        s.hist.add(a.gain)
        s.fair.add(fair)  # None (not counted, excluded, no reference, or a forced move) adds nothing
        s.last_ply = a.ply
        if s.rating.ll is None:  # before its first counted move a scope's prior is the class of the moves seen
            s.rating.tclass = a.time_class or UNKNOWN_CLASS
    return fair


def in_decided_position(a: MoveAssessment, profile: EngineProfile) -> bool:
    """Whether a move is past ``profile``'s book plies, has a choice and stands in a position the profile calls
    decided (the best candidate beyond ``decided_cp`` either way): not counted for the rating nor by the service's
    fair-play statistics; a review whose calibration has a term for them counts it (:mod:`streamer.review`)."""
    return (not a.counted and a.ply >= profile.skip_plies and len(a.candidates) > 1
            and abs(a.candidates[0].cp) > profile.decided_cp)


def counts_for_fair_play(a: MoveAssessment, losses: Sequence[float]) -> bool:
    """Whether a counted move whose candidates lose ``losses`` in win probability (the best 0) enters the fair-play
    statistics under the move model: the mover has a reference rating, there is a choice, and
    :func:`~analyzers.fairplay.exclusion` does not rule it out. :func:`count_move` and the review
    (:mod:`streamer.review`) count the same moves by it."""
    return bool(a.reference_rating) and len(losses) > 1 and exclusion(losses, a.recapture) is None


def _move_loglik(a: MoveAssessment, model: MoveModel, deltas: np.ndarray, idx: int,
                 known_left: float | None = None) -> tuple[np.ndarray, str, tuple[float, float], float]:
    """log P(played | R) over the rating grid of a counted move with losses ``deltas``, its time-control class, its
    clock inputs and the clock's shift of log s. A move whose clock is missing in a game whose clocks came before
    (``known_left``: the mover's x_left as last known there) is read at that time left: read at x_left 0, the
    reference, a relay's dropped clock moved the rating (docs/accuracy.md, "Clocks missing here and there")."""
    tclass = a.time_class or UNKNOWN_CLASS
    clock = move_clock_inputs(a)
    shift = model.clock_shift(clock_of(a, known_left) or clock)  # 0 for a model without clock terms
    return model.move_loglik(deltas, idx, tclass, shift), tclass, clock, shift


def move_likelihood(a: MoveAssessment, model: MoveModel,
                    known_left: float | None = None) -> tuple[np.ndarray, str, MoveFeatures]:
    """log P(played | R) over the rating grid of a counted move, its time-control class and what it adds to the
    combination's inputs (as :func:`count_move`; ``known_left`` as in :func:`_move_loglik`)."""
    values, idx = move_choice(a)
    deltas = win_losses([v * 100.0 for v in values])
    move_ll, tclass, clock, _ = _move_loglik(a, model, deltas, idx, known_left)
    return move_ll, tclass, move_features(deltas, idx, clock, a)


def _scope(scopes: dict[str, S], key: str, limit: int | None = None, state: PlayerState | None = None,
           new: Callable[[], S] = ScopeStats, forget: dict[str, Any] | None = None) -> S:  # type: ignore[assignment]
    """The scope under ``key``, created if missing (``setdefault`` would build a throwaway one on every call). A new
    scope beyond ``limit`` evicts the oldest one (dicts keep creation order), counted in ``state.evicted``, and drops
    its key from ``forget`` too (what the state keeps about the scope elsewhere)."""
    found = scopes.get(key)
    if found is None:
        if limit is not None and len(scopes) >= limit:
            oldest = next(iter(scopes))
            del scopes[oldest]
            if forget:
                forget.pop(oldest, None)
            if state is not None:
                state.evicted += 1
                log.warning("player state at its scope limit: oldest scope evicted",
                            extra={"player_id": state.player_id, "evicted_scope": oldest, "limit": limit})
        found = scopes[key] = new()
    return found


def event_scope(state: PlayerState, event: str, config: PipelineConfig) -> ScopeStats:
    """The player's scope of ``event``, created if missing; the oldest event scope beyond ``config.max_events`` is
    evicted, and with it the event's entry in ``state.screened``: its evidence is gone, and an event of that name
    seen again starts unscreened."""
    return _scope(state.events, event, config.max_events, state, forget=state.screened)


#: With the review on, a player's state keeps this many of their last finished games (a player-scope alert is reviewed
#: over them: the scope's window is 300-600 counted moves, about 10-20 games) ...
REVIEW_GAMES = 20
#: ... and at most this many plies of them, so that long games cannot grow the state without bound (a 100-move game's
#: record is about 1.3 KB; 20 such games are 4,000 plies).
REVIEW_PLIES = 4_000


@dataclass
class PlayerState:
    player_id: str
    overall: ScopeStats = field(default_factory=ScopeStats)
    games: dict[str, ScopeStats] = field(default_factory=dict)
    events: dict[str, ScopeStats] = field(default_factory=dict)
    finished: list[str] = field(default_factory=list)
    glicko: Glicko2Rating | None = None
    last_game_at: float | None = None
    alert_tier: str | None = None  # the fair-play tier this player is over since their last alert (None: under all)
    evicted: int = 0  # game and event scopes dropped at their limits (PipelineConfig.max_open_games, max_events)
    #: Go (streamer.gopipeline): the open games' scopes and all the player's Go games; None for a chess player
    go_games: dict[str, GoScope] = field(default_factory=dict)
    go_overall: GoScope | None = None
    #: with the review on (PipelineConfig.review): the player's last REVIEW_GAMES finished chess games, oldest first
    #: as (game id, event, plies, the :class:`~schemas.GameRecord`'s JSON): the state is serialised at every
    #: transaction of the rate stage, and writing 20 records' moves and clocks as JSON text costs a tenth of
    #: serialising them afresh each time (measured: 390 us for 20 games of 80 plies)
    records: list[tuple[str, str, int, str]] = field(default_factory=list)
    crossing: str | None = None  # the game whose end opened the current crossing (None: under every tier)
    #: with the review on: event -> the crossing under which its own scope was last over a tier (while the event's
    #: scope is kept in ``events``); the event's later game ends are reviewed under that crossing even when every scope
    #: has fallen under the tiers (a player can be in several events at once)
    screened: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT, "player_id": self.player_id, "overall": self.overall.to_dict(),
            "games": {k: v.to_dict() for k, v in self.games.items()},
            "events": {k: v.to_dict() for k, v in self.events.items()},
            "finished": list(self.finished), "glicko": self.glicko.to_dict() if self.glicko else None,
            "last_game_at": self.last_game_at, "alert_tier": self.alert_tier, "evicted": self.evicted,
            **({"go_games": {k: v.to_dict() for k, v in self.go_games.items()}, "go_overall": self.go_overall.to_dict()}
               if self.go_overall is not None else {}),  # chess states keep their form
            **({"records": [list(r) for r in self.records]} if self.records else {}),
            **({"crossing": self.crossing} if self.crossing is not None else {}),
            **({"screened": dict(self.screened)} if self.screened else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PlayerState:
        _check_format(d, "player")
        return cls(
            d["player_id"], ScopeStats.from_dict(d["overall"]),
            {k: ScopeStats.from_dict(v) for k, v in d["games"].items()},
            {k: ScopeStats.from_dict(v) for k, v in d["events"].items()},
            list(d["finished"]), Glicko2Rating.from_dict(d["glicko"]) if d["glicko"] else None, d["last_game_at"],
            d.get("alert_tier"), int(d.get("evicted", 0)),  # absent in states written before they existed
            {k: GoScope.from_dict(v) for k, v in d.get("go_games", {}).items()},
            GoScope.from_dict(d["go_overall"]) if d.get("go_overall") else None,
            [(str(g), str(e), int(n), str(j)) for g, e, n, j in d.get("records", ())], d.get("crossing"),
            _screened(d.get("screened"), d["events"]),
        )

    def review_games(self, alert: FairPlayAlert) -> list[GameRecord]:
        """The kept games of the scope ``alert`` names: that game, the player's games in that event, or (player scope)
        every kept game."""
        if alert.scope == "game":
            return [GameRecord.model_validate_json(j) for g, _, _, j in self.records if g == alert.scope_id]
        if alert.scope == "event":
            return [GameRecord.model_validate_json(j) for _, e, _, j in self.records if e == alert.scope_id]
        return [GameRecord.model_validate_json(j) for _, _, _, j in self.records]


def _screened(raw: Any, events: Mapping[str, Any]) -> dict[str, str]:
    """A stored ``screened`` map, kept to the stored ``events`` (states written before :func:`event_scope` pruned it
    at eviction may name an evicted event); states written when it held one event kept it as an [event, crossing]
    pair."""
    if not raw:
        return {}
    pairs = [raw] if isinstance(raw, list) else raw.items()
    return {str(e): str(c) for e, c in pairs if e in events}


#: Crossings a player's review state remembers a verdict for (the oldest forgotten first).
REVIEW_VERDICTS = 20


@dataclass
class ReviewState:
    """What the review stage keeps per player: the crossings it has published a verdict for, so that a crossing
    reviewed again as its scope grows gets one verdict (one alert per crossing)."""

    player_id: str
    verdicts: list[str] = field(default_factory=list)

    def copy(self) -> ReviewState:
        return ReviewState(self.player_id, list(self.verdicts))

    def to_dict(self) -> dict:
        return {"player_id": self.player_id, "verdicts": list(self.verdicts)}

    @classmethod
    def from_dict(cls, d: dict) -> ReviewState:
        return cls(str(d["player_id"]), [str(v) for v in d["verdicts"]])


@dataclass(frozen=True)
class ModelEstimates:
    """What the move model (and the combination on top of it, when configured) says of one scope."""

    moves_only: RatingEstimate      # the published rating: the combination's when there is one, else the model's
    band: RatingEstimate            # the same at BAND_LEVEL (68 %)
    model: RatingEstimate           # the move model's posterior: with the population prior of the scope's class, or
                                    # (no combination, an event prior) under the event prior, then = moves_only
    prior: Prior
    method: str                     # "combination" or "model"
    provisional: bool               # whether a fit behind ``moves_only`` is marked provisional
    performance: RatingEstimate | None = None  # the posterior with the declared rating as prior
    performance_prior: Prior | None = None


def model_estimates(stats: ScopeStats, model: MoveModel, combination: Combination | None = None,
                    level: float = DEFAULT_LEVEL, declared: tuple[float | None, float | None] = (None, None),
                    event_prior: Prior | None = None, pool: EventPoolModel | None = None) -> ModelEstimates:
    """The moves-only estimate of a scope (docs/models.md s. 9 and 10) and, when a rating was ``declared`` as
    (rating, rd), the ``performance`` estimate. Before the scope's first counted move (a game's book plies) they are
    the priors themselves: what is known of the player then, with the width that says so. The tempered,
    convolved likelihood is computed once for all the priors. With an ``event_prior`` (s. 12, step 3) the
    moves-only estimate starts from it: the combination's estimate moved from the population prior to the event
    prior, or, where the combination does not apply or says too little, the move model's posterior under it; its
    interval and band are then scaled by ``pool``'s fitted factor at the scope's counted moves (step 4)."""
    lik = stats.rating
    prior = model.prior_for(lik.tclass)
    rating, rd = declared
    dprior = Prior(rating, rd or DEFAULT_DECLARED_RD) if rating else None
    if combination is not None and not combination.applies(stats.feats):
        combination = None
    # every prior in one call: the likelihood is tempered and convolved once (the costly part); the class prior's
    # posterior only where something reads it (under an event prior without the combination nothing does)
    named: dict[str, Prior] = {"class": prior} if event_prior is None or combination is not None else {}
    named |= {"flat": FLAT_PRIOR} if combination else {}
    named |= {"declared": dprior} if dprior else {}
    named |= {"event": event_prior} if event_prior else {}
    posts = model.posteriors(lik.ll, tuple(named.values()))
    row = {name: i for i, name in enumerate(named)}
    sums = PosteriorSummaries(posts, lik.n)  # every posterior's mean and cumulative sum in one pass
    m = band = None
    method = "model"
    if combination is not None:
        m = sums.at(row["class"], (level,))[0]
        x = stats.feats.vector(*moments(posts[row["flat"]]), lik.tclass)
        (main, band), method = combination.estimates(x, lik.n, (level, BAND_LEVEL)), "combination"
        moved = combine(main.rating, main.sd, prior, event_prior) if event_prior is not None else None
        if moved is not None:
            main, band = (normal_estimate(*moved, lik.n, lv) for lv in (level, BAND_LEVEL))
        elif event_prior is not None:  # the combination says too little: the move model's posterior under the event prior
            band, method = None, "model"
    if band is None:
        main, band = sums.at(row["event" if event_prior is not None else "class"], (level, BAND_LEVEL))
    if event_prior is not None:
        prior = event_prior
        factor = pool.scale_at(lik.n) if pool is not None else 1.0
        if factor != 1.0:
            main, band = main.scaled(factor), band.scaled(factor)
    perf = sums.at(row["declared"], (level,))[0] if dprior else None
    provisional = model.provisional or (combination is not None and combination.provisional)
    return ModelEstimates(main, band, m or main, prior, method, provisional, perf, dprior)


def normal_estimate(mean: float, sd: float, n: int, level: float) -> RatingEstimate:
    """A normal estimate's central interval at ``level``, its mean kept on the rating grid."""
    mean = min(max(mean, float(RATING_GRID[0])), float(RATING_GRID[-1]))
    half = z_for(level) * sd
    return RatingEstimate(mean, mean - half, mean + half, n, level)


def perceived(stats: ScopeStats, *, player_id: str, scope: str, scope_id: str, game_id: str, ply: int,
              config: PipelineConfig, declared: tuple[float | None, float | None] = (None, None),
              event_prior: EventPrior | None = None) -> PerceivedRating | None:
    """The published rating of one scope: from the move model (and the combination on top of it) when the profile
    has one (with the ``performance`` estimate when a rating was ``declared``: (rating, rd)), else from the
    posterior over c once it has counted moves, else from the gains."""
    cal = config.calibration
    if cal is None:
        raise ValueError("publishing perceived ratings needs a calibration in PipelineConfig")
    g = cal.from_histogram(stats.hist, config.level) if stats.hist.count else None
    extra: dict[str, Any] = {}
    model, lik = config.model, stats.rating
    eprior = Prior(event_prior.mean, event_prior.sd) if event_prior is not None else None
    est = (model_estimates(stats, model, config.combination, config.level, declared, eprior, config.event_pool)
           if model is not None else None)
    m = est.moves_only if est else None
    if est is not None:
        source = f"event ({event_prior.player_games} player-games)" if event_prior is not None else lik.tclass
        extra = {"band_low": round(est.band.low, 1), "band_high": round(est.band.high, 1), "time_class": lik.tclass,
                 "prior": f"{source} {est.prior.mean:.0f} +/- {est.prior.sd:.0f}"}
        if est.method == "combination":
            extra |= {"model_rating": round(est.model.rating, 1), "model_low": round(est.model.low, 1),
                      "model_high": round(est.model.high, 1)}
        if est.performance and est.performance_prior:
            perf, dprior = est.performance, est.performance_prior
            extra |= {"performance": round(perf.rating, 1), "performance_low": round(perf.low, 1),
                      "performance_high": round(perf.high, 1), "performance_prior": f"declared {dprior.mean:.0f} +/- {dprior.sd:.0f}"}
    # the posterior over c: its Elo reading is published only without a move model; its c always
    p = cal.from_posterior(stats.post, config.level) if m is None and stats.post.n and cal.has_c_map else None
    has_c = stats.post.n > 0 and cal.has_c_map
    main = m or p or g
    if main is None:
        return None
    return PerceivedRating(
        player_id=player_id, scope=scope, scope_id=scope_id, game_id=game_id, ply=max(ply, 0),
        rating=round(main.rating, 1), low=round(main.low, 1), high=round(main.high, 1), level=config.level,
        method=est.method if est else "posterior" if p else "gain", c_mean=round(stats.post.mean, 4) if has_c else None,
        c_sd=round(stats.post.std, 4) if has_c else None, moves=lik.n if m else stats.post.n,
        gain_rating=round(g.rating, 1) if g else None, gain_low=round(g.low, 1) if g else None,
        gain_high=round(g.high, 1) if g else None, gain_moves=stats.hist.count,
        profile=config.profile.name, provisional=(est.provisional if est else cal.provisional) or stats.other_engine, **extra,
    )


def apply_player_event(
    state: PlayerState | None, ev: MoveAssessment | GameResult, config: PipelineConfig
) -> tuple[PlayerState, list[PerceivedRating | RatingUpdate | FairPlayAlert | ReviewRequest]]:
    state = state or PlayerState(ev.player_id)
    if ev.game_id in state.finished:
        return state, []  # a redelivery of a game already closed for this player
    if isinstance(ev, MoveAssessment):
        return state, _apply_move(state, ev, config)
    return state, _apply_result(state, ev, config)


def _apply_move(state: PlayerState, a: MoveAssessment, config: PipelineConfig) -> list[PerceivedRating | RatingUpdate | FairPlayAlert | ReviewRequest]:
    if a.game == "go":
        return _apply_go_move(state, a, config)
    config.check_limits(a)
    game = _scope(state.games, a.game_id, config.max_open_games, state)
    if a.ply <= game.last_ply:
        return []  # duplicate (game_id, ply): already counted
    cal = config.calibration
    # the agent model's reference skill: the fair-play terms read it only where there is no move model
    c_ref = (cal.c_from_elo(fair_play_reference(a.reference_rating))
             if config.model is None and a.reference_rating and cal is not None and cal.has_c_map else None)
    state.overall.fair.window = config.player_fair_window  # the config decides, also for states stored before it
    # a ply of a corrected game that was counted under the game it corrects: once more in the player's wider scopes
    # would count the same evidence twice (fair play's above all)
    scopes = [game] if a.repeat else [game, state.overall] + ([event_scope(state, a.event, config)] if a.event else [])
    if config.other_engine(a):
        for scope in scopes:
            scope.other_engine = True
    if count_move(scopes, a, c_ref, config.model, game.feats.known_x_left) is not None:
        game.fair_plies.append(a.ply)
    out = perceived(game, player_id=a.player_id, scope="game", scope_id=a.game_id, game_id=a.game_id, ply=a.ply, config=config,
                    declared=(a.reference_rating, a.reference_rd), event_prior=a.event_prior)
    return [out] if out else []


def _apply_go_move(state: PlayerState, a: MoveAssessment, config: PipelineConfig) -> list[PerceivedRating | RatingUpdate | FairPlayAlert | ReviewRequest]:
    """A Go move (streamer.gopipeline): counted in the game's and the player's Go scopes; the game scope's rating."""
    calibration, model = config.go_calibration, config.go_rank_model  # raises UnsupportedGame without a calibration
    assert calibration is not None
    config.check_limits(a)
    game = _scope(state.go_games, a.game_id, config.max_open_games, state, GoScope)
    if a.ply <= game.last_ply:
        return []  # duplicate (game_id, ply): already counted
    state.go_overall = state.go_overall or GoScope()
    if config.other_engine(a):
        game.other_engine = state.go_overall.other_engine = True
    count_go_move((game, state.go_overall), a)
    return [go_perceived(game.skill, calibration, model, player_id=a.player_id, scope="game", scope_id=a.game_id,
                         game_id=a.game_id, ply=a.ply, other_engine=game.other_engine)]


def _fairplay_alert(state: PlayerState, r: GameResult, config: PipelineConfig, game: ScopeStats,
                    event: ScopeStats | None) -> tuple[FairPlayAlert | None, FairPlayAlert | None, str | None]:
    """At a game's end: (the alert for a new crossing or None, the finding, the crossing it is reviewed under). The
    player's tier is the highest any scope (this game, this event, the player's recent games:
    :attr:`PipelineConfig.player_fair_window`) crosses; an alert goes out when it rises above the tier of the last
    alert, naming the scope with the largest z at that tier. Falling under every tier re-arms the alerts: one alert
    per crossing. The finding is what the review searches (with ``config.review``; None: nothing to review): while
    the player stays over a tier, the same evidence for the scope now strongest, unpublished, so a screened player's
    scope is reviewed again at each game end while it grows. An event whose own scope was over a tier stays screened
    to its last game: at its later game ends the finding is the event's evidence (under the crossing that screened
    it, if every scope has fallen under the tiers since), because a half-assisted event's service z wanders under
    the screening tier and back while the review's deeper search keeps seeing it (docs/fairplay.md)."""
    scopes = [("game", r.game_id, game, 1), ("player", r.player_id, state.overall, state.overall.games)]
    if event is not None:
        scopes.insert(1, ("event", r.event, event, event.games))
    # with the review on, the service's statistic only screens: the action tier is the review's verdict (on rated-dev
    # the statistic's own action tier alarmed on honest players whom no review confirmed)
    action = config.z_threshold if config.review is None else math.inf
    tiers = {name: stats.fair.tier(config.screen_z, action, config.min_alert_moves) for name, _, stats, _ in scopes}
    rank: dict[str | None, int] = {None: 0, **{t: i + 1 for i, t in enumerate(TIERS)}}
    now = max(tiers.values(), key=rank.__getitem__)
    before = state.alert_tier
    screened = config.review is not None and event is not None and r.event in state.screened
    if now is None:
        state.alert_tier = state.crossing = None  # under every tier: re-armed
        if not screened:
            return None, None, None
        assert event is not None
        return None, _finding(r, "event", r.event, event, "screening", game, config), state.screened[r.event]
    if before is None:
        state.crossing = r.game_id  # the game whose end opened this crossing names it
    assert state.crossing is not None
    if config.review is not None and tiers.get("event") is not None:
        state.screened[r.event] = state.crossing  # until the event's scope is evicted (event_scope)
        screened = True
    crossed = rank[now] > rank[before]
    if not crossed and config.review is None:
        # no new crossing: still over a tier already alerted (a z that dips under the action tier and rises again is
        # the same finding; only falling under the screening tier re-arms the alerts); only the review reads the finding
        return None, None, None
    if crossed:
        state.alert_tier = now
    elif screened:  # the screened event's evidence, whatever scope is strongest now
        assert event is not None
        return None, _finding(r, "event", r.event, event, now, game, config), state.crossing
    name, scope_id, stats, games = max(((n, i, st, g) for n, i, st, g in scopes if tiers[n] == now),
                                       key=lambda x: x[2].fair.strongest()[1])
    alert = _finding(r, name, scope_id, stats, now, game, config, games)
    return (alert if crossed else None), alert, state.crossing


def _finding(r: GameResult, name: str, scope_id: str, stats: ScopeStats, tier: str, game: ScopeStats,
             config: PipelineConfig, games: int | None = None) -> FairPlayAlert:
    """The evidence of one scope at a game's end (``tier``: the player's tier it is published or reviewed at)."""
    stat, z = stats.fair.strongest()
    f = stats.fair
    obs, exp = (f.matches, f.expected_matches) if stat == "match" else (f.loss, f.expected_loss)
    assert r.player.rating is not None
    return FairPlayAlert(
        player_id=r.player_id, game_id=r.game_id, tier=tier, scope=name, scope_id=scope_id, statistic=stat, z=round(z, 3),
        threshold=config.z_threshold if tier == "action" else config.screen_z, moves=f.n, observed=round(obs, 4),
        expected=round(exp, 4), reference_rating=fair_play_reference(r.player.rating),
        reference_source=fair_play_source(r.player.rating),
        games=stats.games if games is None else games, plies=list(game.fair_plies), limits=config.limits.key,
        provisional=stats.other_engine or config.provisional,
    )


def _apply_result(state: PlayerState, r: GameResult, config: PipelineConfig) -> list[Any]:
    out: list[Any] = []
    gcfg = config.glicko
    me = state.glicko or gcfg.new_player(r.player.rating, r.player.rd, r.player.volatility)
    opp = gcfg.new_player(r.opponent.rating, r.opponent.rd, r.opponent.volatility)
    days = 0.0
    if r.timestamp is not None and state.last_game_at is not None:
        days = max(0.0, (r.timestamp - state.last_game_at) / SECONDS_PER_DAY)
    if r.color == "white":
        new, _ = update_after_game(me, opp, r.score, (days, 0.0), gcfg)
    else:
        _, new = update_after_game(opp, me, 1.0 - r.score, (0.0, days), gcfg)
    out.append(RatingUpdate(
        game=r.game, player_id=r.player_id, game_id=r.game_id, opponent_id=r.opponent.id, score=r.score,
        before=GlickoState(**me.to_dict()), after=GlickoState(**new.to_dict()), opponent=GlickoState(**opp.to_dict()),
    ))
    state.glicko = new
    if r.timestamp is not None:  # the latest game's time: a result that arrives late does not move it back
        state.last_game_at = r.timestamp if state.last_game_at is None else max(state.last_game_at, r.timestamp)
    state.finished = (state.finished + [r.game_id])[-_REMEMBER_GAMES:]
    if r.game == "go":  # the player scope's rating; Go has no event scope and no fair-play statistics
        last = state.go_games.pop(r.game_id, None)
        if state.go_overall is not None and config.go_calibration is not None:
            out.append(go_perceived(state.go_overall.skill, config.go_calibration, config.go_rank_model,
                                    player_id=r.player_id, scope="player", scope_id=r.player_id, game_id=r.game_id,
                                    ply=max(last.last_ply if last else 0, 0), other_engine=state.go_overall.other_engine))
        return out
    game = state.games.pop(r.game_id, ScopeStats())
    state.overall.games += 1
    declared = (r.player.rating, r.player.rd)
    ply = max(game.last_ply, 0)
    ev_stats = None
    if r.event:
        ev_stats = event_scope(state, r.event, config)
        ev_stats.games += 1
        pr = perceived(ev_stats, player_id=r.player_id, scope="event", scope_id=r.event, game_id=r.game_id, ply=ply, config=config,
                       declared=declared, event_prior=r.event_prior)
        out += [pr] if pr else []
    pr = perceived(state.overall, player_id=r.player_id, scope="player", scope_id=r.player_id, game_id=r.game_id, ply=ply,
                   config=config, declared=declared)
    out += [pr] if pr else []
    if config.review is not None and r.record is not None:
        rec = r.record
        state.records = [x for x in state.records if x[0] != r.game_id][-(REVIEW_GAMES - 1):] + \
            [(rec.game_id, rec.event, len(rec.moves), rec.model_dump_json())]
        while len(state.records) > 1 and sum(x[2] for x in state.records) > REVIEW_PLIES:
            del state.records[0]
    if r.player.rating:
        alert, finding, crossing = _fairplay_alert(state, r, config, game, ev_stats if r.event else None)
        out += [alert] if alert else []
        if finding is not None and config.review is not None and crossing is not None:
            out.append(ReviewRequest(player_id=r.player_id, crossing=crossing, alert=finding,
                                     games=state.review_games(finding)))
    return out
