"""The message models. See the package docstring; the README's topic table says which topic carries which."""

from __future__ import annotations

import codecs
import hashlib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, AliasChoices, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, ValidationInfo, field_validator, model_validator

from analyzers.errors import MalformedEvent

SCHEMA_VERSION: Final = 1

#: UCI move syntax: from-square, to-square, optional promotion piece.
UCI_PATTERN = r"^[a-h][1-8][a-h][1-8][qrbn]?$"
#: GTP move syntax (Go): a column A-Z without I, a row 1-25, or "pass" (any case).
GTP_PATTERN = r"^(?i:pass|[a-hj-z](?:[1-9]|1[0-9]|2[0-5]))$"
#: The games kibitz knows; "chess" when a message does not say.
Game = Literal["chess", "go"]
_MOVE_PATTERNS = {"chess": re.compile(UCI_PATTERN), "go": re.compile(GTP_PATTERN)}

Rating = Annotated[float, Field(ge=0, le=4000, description="rating on the Elo scale")]
RD = Annotated[float, Field(gt=0, le=1000)]
#: Plies beyond this are refused: no real game comes near 1,000 moves, and a bound keeps hostile input cheap.
MAX_PLIES = 2000
#: An input record longer than this is refused before it is parsed.
MAX_EVENT_BYTES = 64 * 1024
#: A review request holds up to 20 games' moves: its own bound, under Kafka's default 1 MB record.
MAX_REVIEW_BYTES = 900 * 1024
Ply = Annotated[int, Field(ge=0, le=MAX_PLIES, strict=True,
                           description="half-moves played before this one: 0 is White's first move (a JSON integer)")]
#: Seconds since the epoch; finite (NaN and infinities are refused).
#: Timestamps kibitz accepts: years 1653 to 2286. A producer that sends milliseconds (1.7e12 for 2023) is refused, not
#: read as a date 50,000 years ahead, after which no player's Glicko-2 deviation would ever grow with time again.
MAX_TIMESTAMP = 1e10


def _seconds(value: float) -> float:
    if not -MAX_TIMESTAMP <= value <= MAX_TIMESTAMP:
        hint = " (milliseconds? it is seconds)" if MAX_TIMESTAMP < abs(value) <= 1e13 else ""
        raise ValueError(f"a timestamp in seconds since the epoch is within +/-{MAX_TIMESTAMP:.0e}{hint}")
    return value


Timestamp = Annotated[float, Field(allow_inf_nan=False, description="seconds since the epoch (years 1653-2286)"),
                      AfterValidator(_seconds)]
#: Game and player ids: 1-200 characters, no control characters (which also keeps them apart from the state store's
#: internal keys, which start with NUL).
MAX_ID = 200
_NOT_CONTROL = r"[^\x00-\x1f\x7f]"
Id = Annotated[str, Field(min_length=1, max_length=MAX_ID, pattern=f"^{_NOT_CONTROL}+$")]
#: An event's name: it keys the pool stage's state and a player's event scope, so it has an id's bounds (empty: no
#: event); :func:`as_id` makes one of any text too.
EventName = Annotated[str, Field(max_length=MAX_ID, pattern=f"^{_NOT_CONTROL}*$")]
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def _cut_to(limit: int) -> AfterValidator:
    """A text kept to ``limit`` characters (its start, then "..."), for free text that travels with every
    record of a game: a player's name and a time control repeat in the game's state, its record and the review's
    requests, so one name of 60 KB made the player's kept games over the broker's record limit."""
    return AfterValidator(lambda v: v if len(v) <= limit else v[: limit - 3] + "...")


#: Free text of a game start, kept to these lengths (longer is a producer's bug; the start is kept, not refused).
MAX_NAME, MAX_TIME_CONTROL = 200, 100
Name = Annotated[str, _cut_to(MAX_NAME)]


def as_id(text: str, fallback: str = "?") -> str:
    """``text`` (a player's name, a file's stem) made a valid :data:`Id`: control characters become spaces, and a text
    longer than :data:`MAX_ID` keeps its start and a hash of the whole (stable, and distinct for distinct texts); an
    empty one is ``fallback``. Ingest makes ids from names and file names with it, so no PGN or SGF text can make a
    start message the schema refuses."""
    clean = " ".join(_CONTROL.sub(" ", text).split()) or fallback
    if len(clean) <= MAX_ID:
        return clean
    return f"{clean[:MAX_ID - 11]}~{hashlib.sha1(text.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"
#: A side of a game (in Go too: Black and White).
Color = Literal["white", "black"]
Score = Literal[0.0, 0.5, 1.0]  # type: ignore[valid-type]  # pydantic validates float literals; PEP 586 has none
#: White's score for each decisive PGN result ("*", unfinished, has none).
RESULT_SCORES: dict[str, float] = {"1-0": 1.0, "0-1": 0.0, "1/2-1/2": 0.5}


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False, populate_by_name=True)
    schema_version: Literal[1] = SCHEMA_VERSION


# -- inputs ---------------------------------------------------------------------------------------------
def unrated(value: Any) -> bool:
    """Whether a declared rating says "no rating": 0, as PGN's Elo tags and many platforms write it, or a text that is
    empty, "0", "-" or "?"."""
    if isinstance(value, str):
        return value.strip() in ("", "0", "-", "?")
    return isinstance(value, int | float) and not isinstance(value, bool) and value == 0


class PlayerInfo(BaseModel):
    """A player as the producer knows them at the start of a game. A rating of 0 (or "", "-", "?") is no rating
    (:func:`unrated`): read as a rating it started the player's Glicko-2 at 0, and their opponent lost points for
    every game against them."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: Id
    name: Name = ""
    rating: Rating | None = None
    rd: RD | None = None
    volatility: float | None = Field(default=None, gt=0, le=1)

    @field_validator("rating", mode="before")
    @classmethod
    def _unrated(cls, v: Any) -> Any:
        return None if unrated(v) else v


class GameStarted(Message):
    """A game begins. Version 2 adds ``game`` ("chess" or "go"; version 1 messages are chess and still parse); version
    3 the Go setup, ``board_size`` and ``komi`` (refused for chess); version 4 ``corrects``; version 5 ``renamed``. In Go,
    Black moves first."""

    type: Literal["game_started"] = "game_started"
    schema_version: Literal[1, 2, 3, 4, 5] = 5  # type: ignore[assignment]
    game: Game = "chess"
    game_id: Id
    white: PlayerInfo
    black: PlayerInfo
    event: EventName = ""
    time_control: Annotated[str, _cut_to(MAX_TIME_CONTROL)] = Field(
        default="", description='a PGN TimeControl in seconds ("900+10", "40/5400+30:1800+30") or minutes + seconds as '
        'players write it ("15+10", "90+30"); "" when unknown; kept to 100 characters')
    initial_fen: str | None = None
    timestamp: Timestamp | None = None
    board_size: int | None = Field(default=None, ge=2, le=25, strict=True, description="Go: the board's size (default 19, v3)")
    komi: float | None = Field(default=None, ge=-1000, le=1000, allow_inf_nan=False, description="Go: the komi (default 7.5, v3)")
    corrects: Id | None = Field(default=None, description="the game this one replaces: a feed's operator corrected one of "
                                "its moves, or its tags (a player's name, the round), so it is rated again from the "
                                "start under this id; an overlay of the old id shows this game (v4)")
    corrects_from: Ply | None = Field(default=None, description="with corrects: the first ply that differs from the game "
                                      "it corrects; the plies before it were counted there, so they count again in this "
                                      "game's own scope only, not in the players' event and overall scopes (v4)")
    renamed: list[Color] = Field(default_factory=list, max_length=2, description="with corrects: the sides whose "
                                 "player is another than in the game it corrects (a name corrected in the feed); their "
                                 "plies before corrects_from were counted under the old player, so they count in all of "
                                 "this player's scopes (v5)")

    @model_validator(mode="after")
    def _setup_fits_the_game(self) -> GameStarted:
        if self.game == "chess" and (self.board_size is not None or self.komi is not None):
            raise ValueError("board_size and komi are Go's setup; a chess game has initial_fen")
        if self.game == "go" and self.initial_fen is not None:
            raise ValueError("initial_fen is chess's setup; a Go game has board_size and komi")
        return self


class MoveEvent(Message):
    """One move. Version 2 adds ``game``: for Go, ``uci`` holds a GTP move ("Q16", "pass"; ``move`` is accepted as its
    name on input). Version 1 messages are chess and still parse."""

    type: Literal["move"] = "move"
    schema_version: Literal[1, 2] = 2  # type: ignore[assignment]
    game: Game = "chess"
    game_id: Id
    ply: Ply
    uci: str = Field(validation_alias=AliasChoices("uci", "move"), description="UCI (chess) or GTP (Go) move")
    clock: float | None = Field(default=None, ge=0, allow_inf_nan=False, description="mover's remaining time in seconds")
    timestamp: Timestamp | None = None

    @field_validator("uci")
    @classmethod
    def _move_syntax(cls, v: str, info: ValidationInfo) -> str:
        game = info.data.get("game", "chess")
        if not _MOVE_PATTERNS[game].match(v):
            raise ValueError(f"not a UCI move (from-square, to-square, promotion piece: e2e4, e7e8q): {v!r}"
                             if game == "chess" else f"not a GTP move (a point such as D4, or pass): {v!r}")
        return v


class GameEnded(Message):
    type: Literal["game_ended"] = "game_ended"
    game_id: Id
    result: Literal["1-0", "0-1", "1/2-1/2"]
    plies: int | None = Field(default=None, ge=0, le=MAX_PLIES, strict=True,
                              description="plies in the game, so an end can wait for late moves")
    timestamp: Timestamp | None = None


InputEvent = Annotated[GameStarted | MoveEvent | GameEnded, Field(discriminator="type")]
_INPUT = TypeAdapter(InputEvent)


def parse_event(raw: bytes | str | None) -> GameStarted | MoveEvent | GameEnded:
    """Parse one input event from JSON; raises :class:`~analyzers.errors.MalformedEvent` with a short reason."""
    return _parse(_INPUT, raw)


def _parse(adapter: TypeAdapter, raw: bytes | str | None, max_bytes: int = MAX_EVENT_BYTES) -> Any:
    """Validate JSON in one pass (pydantic's Rust parser); a failure becomes a MalformedEvent naming the field. A Kafka
    record without a value (None: a tombstone) is one too."""
    if raw is None:
        raise MalformedEvent("message: a record without a value (null, a tombstone?)")
    if len(raw) > max_bytes:
        raise MalformedEvent(f"message: {len(raw)} bytes, more than the {max_bytes} accepted")
    # a byte order mark, which Windows tools write before UTF-8 text (RFC 8259 s. 8.1 lets a parser ignore it): a
    # JSON-lines file's first line, its game's start, was malformed, and every move of that game unknown
    if isinstance(raw, bytes):
        raw = raw.removeprefix(codecs.BOM_UTF8)
    else:
        raw = raw.removeprefix("\ufeff")
    try:
        return adapter.validate_json(raw)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "message"
        data = None
        try:
            data = json.loads(raw)  # only for the game and ply of the error message
        except (ValueError, RecursionError):
            pass
        gid = data.get("game_id") if isinstance(data, dict) and isinstance(data.get("game_id"), str) else None
        ply = data.get("ply") if isinstance(data, dict) and type(data.get("ply")) is int else None
        raise MalformedEvent(f"{where}: {first['msg']}", game_id=gid, ply=ply) from None


# -- outputs --------------------------------------------------------------------------------------------
class Candidate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    uci: str = Field(description="the move: UCI (chess) or GTP (Go), checked by the assessment that holds it")
    cp: int = Field(description="centipawns from the side to move, mates as +/-3900; Go: hundredths of a point")
    mate: int | None = None


class EventPrior(BaseModel):
    """The prior the event's other players' moves (and the player's own results in it) give a player (docs/models.md
    s. 12), attached by the pool stage."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    mean: float = Field(ge=0, le=4000, allow_inf_nan=False)
    sd: float = Field(gt=0, le=4000, allow_inf_nan=False)
    player_games: int = Field(ge=1, description="the other players' player-games behind it")


class MoveAssessment(Message):
    """One analysed move, re-keyed by the mover's player_id. Version 3 adds ``event_prior``, set by the pool stage for
    a game of an event (versions 1-2 still parse); version 4 ``game``: a Go assessment has GTP moves, its values
    (``candidates``' cp, ``loss``, ``played_value``) in hundredths of a point, its evaluations from Black's view, and
    ``gain`` in whole points (docs/models.md s. 11). Version 5 adds ``prior``, for a Go move judged by a network's
    evaluations (KataGo): the network's prior of the played move; its ``candidates`` are then the policy's first
    choice valued at the mover's lead before the move and the played move at minus the opponent's lead after it.
    Version 6 adds ``repeat``."""

    type: Literal["assessment"] = "assessment"
    game_id: Id
    ply: Ply
    player_id: Id
    color: Color
    uci: str
    event: EventName = ""
    schema_version: Literal[1, 2, 3, 4, 5, 6] = 6  # type: ignore[assignment]  # v2-v6 add fields; older ones still parse
    game: Game = "chess"
    reference_rating: Rating | None = None
    reference_rd: RD | None = Field(default=None, description="the declared rating's RD, when the producer gave one")
    time_class: str | None = Field(default=None, description="blitz, rapid, classical or unknown (v2)")
    clock: float | None = Field(default=None, ge=0, allow_inf_nan=False, description="mover's time left after the move, s (v2)")
    clock_spent: float | None = Field(default=None, ge=0, allow_inf_nan=False,
                                      description="mover's previous clock minus this one, s (v2)")
    clock_base: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                                     description="the game's base time: the larger of its first two clocks, s (v2)")
    eval_before: int = Field(description="s_(k-1), centipawns from White's view")
    eval_after: int = Field(description="s_k, centipawns from White's view")
    gain: int = Field(description="Ferreira's gain for the mover, centipawns")
    loss: int | None = Field(default=None, ge=0, description="v_max - v_played inside the multi-PV search, cp")
    candidates: list[Candidate]
    played_rank: int | None = Field(default=None, ge=0, description="index of the played move among candidates")
    played_value: int | None = Field(default=None, description="value of the played move (cp, mover's view)")
    counted: bool = Field(description="used for the posterior and fair play (not opening, not decided, not forced)")
    engine: str
    limits: str
    recapture: bool = Field(default=False, description="the engine's first choice takes back on the square the opponent "
                            "just captured on (not counted for fair play)")
    event_prior: EventPrior | None = Field(default=None, description="the event prior from the other players' moves and the player's results (v3)")
    prior: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False,
                                description="Go, a network's evaluations: its prior of the played move (v5)")
    repeat: bool = Field(default=False, description="a ply counted already under the game this one corrects "
                         "(GameStarted.corrects_from): counted in this game's scope only (v6)")

    @model_validator(mode="after")
    def _moves_in_the_games_notation(self) -> MoveAssessment:
        pattern = _MOVE_PATTERNS[self.game]
        for move in (self.uci, *(c.uci for c in self.candidates)):
            if not pattern.match(move):
                raise ValueError(f"not a {'UCI' if self.game == 'chess' else 'GTP'} move: {move!r}")
        # the steps index the candidates by these: an inconsistent record is refused here, with its reason
        if self.played_rank is not None and self.played_rank >= len(self.candidates):
            raise ValueError(f"played_rank {self.played_rank} outside the {len(self.candidates)} candidates")
        if self.counted and not self.candidates:
            raise ValueError("a counted move needs its candidates")
        return self


class GameRecord(BaseModel):
    """A chess game as the game step applied it: the start, every move in ply order with the mover's clock, and the
    result. What a fair-play review searches again (streamer.review)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    game_id: Id
    white: PlayerInfo
    black: PlayerInfo
    event: EventName = ""
    initial_fen: str | None = None
    moves: list[Annotated[str, Field(pattern=UCI_PATTERN)]] = Field(max_length=MAX_PLIES)
    clocks: list[Annotated[float, Field(ge=0, allow_inf_nan=False)] | None] = Field(
        default_factory=list, max_length=MAX_PLIES, description="the mover's clock after each move, s (None where the "
        "input had none)")
    result: str = "*"
    time_control: Annotated[str, _cut_to(MAX_TIME_CONTROL)] = Field(
        default="", description="the game start's declared time control, which the review reads as the game step did "
        "(GameResult v5, ReviewRequest v2)")


class GameResult(Message):
    """The end of a game for one player, on the assessments topic so it follows that player's moves in order. Version
    2 adds ``event_prior`` (as in :class:`MoveAssessment`), version 3 ``game``, version 4 ``record`` (a chess game's
    moves, which the player step keeps for the review when the service reviews), version 5 the record's
    ``time_control``."""

    type: Literal["game_result"] = "game_result"
    schema_version: Literal[1, 2, 3, 4, 5] = 5  # type: ignore[assignment]
    game: Game = "chess"  # v3
    game_id: Id
    player_id: Id
    color: Color
    score: Score
    event: EventName = ""
    player: PlayerInfo
    opponent: PlayerInfo
    timestamp: Timestamp | None = None
    event_prior: EventPrior | None = None
    record: GameRecord | None = None  # v4


PlayerEvent = Annotated[MoveAssessment | GameResult, Field(discriminator="type")]
_PLAYER_EVENT = TypeAdapter(PlayerEvent)


def parse_player_event(raw: bytes | str | None) -> MoveAssessment | GameResult:
    """Parse one record of ``kibitz.assessments`` (an assessment or a game result); raises MalformedEvent."""
    return _parse(_PLAYER_EVENT, raw)


class PerceivedRating(Message):
    """A perceived rating of one scope. Version 2 adds the rating-conditioned model's estimates (``method`` "model"):
    a 68 % band, the prior the moves-only estimate starts from, and ``performance``: the same moves with the
    player's declared rating as the prior (absent when no rating was declared). Version 3 adds ``method``
    "combination" (the learned combination on top of the move model gives ``rating``, ``low``, ``high`` and the band)
    with the move model's own moves-only estimate beside it in ``model_rating``, ``model_low``, ``model_high``.
    Version 4 adds ``game`` and, for Go, ``rank``: the kyu/dan label of ``rating`` (Go ratings are on the GoR scale of
    :mod:`analyzers.gorank`: 1d = 2100, 100 a rank). Versions 1-3 still parse (and are chess). Version 5 adds
    ``method`` "network": a Go rating read from a network's evaluations (KataGo: docs/models.md s. 11)."""

    type: Literal["perceived"] = "perceived"
    schema_version: Literal[1, 2, 3, 4, 5] = 5  # type: ignore[assignment]  # v2-v5 add fields; older ones still parse
    game: Game = "chess"
    player_id: Id
    scope: Literal["game", "event", "player"]
    scope_id: str
    game_id: Id
    ply: Ply
    rating: float
    low: float
    high: float
    level: float = 0.95
    method: Literal["combination", "model", "posterior", "gain", "network"]
    band_low: float | None = Field(default=None, description="68 % band (v2)")
    band_high: float | None = None
    prior: str | None = Field(default=None, description="the moves-only estimate's prior, e.g. 'rapid 1729 +/- 377' (v2)")
    time_class: str | None = None
    model_rating: float | None = Field(default=None, description="the move model's moves-only estimate, when the "
                                       "combination gives the rating (v3)")
    model_low: float | None = None
    model_high: float | None = None
    performance: float | None = Field(default=None, description="the moves with the declared rating as prior (v2)")
    performance_low: float | None = None
    performance_high: float | None = None
    performance_prior: str | None = Field(default=None, description="e.g. 'declared 2750 +/- 100' (v2)")
    c_mean: float | None = None
    c_sd: float | None = None
    moves: int = Field(ge=0, description="moves behind the posterior (counted moves)")
    gain_rating: float | None = None
    gain_low: float | None = None
    gain_high: float | None = None
    gain_moves: int = Field(ge=0)
    profile: str
    provisional: bool
    rank: str | None = Field(default=None, description="Go: the kyu/dan label of rating, e.g. '3d' (v4)")
    rank_low: str | None = None
    rank_high: str | None = None


class GlickoState(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    rating: float
    rd: float
    volatility: float


class RatingUpdate(Message):
    """A Glicko-2 update after a game. Version 2 adds ``game`` (version 1 messages are chess and still parse)."""

    type: Literal["glicko2"] = "glicko2"
    schema_version: Literal[1, 2] = 2  # type: ignore[assignment]
    game: Game = "chess"
    player_id: Id
    game_id: Id
    opponent_id: Id
    score: Score
    before: GlickoState
    after: GlickoState
    opponent: GlickoState


class FairPlayAlert(Message):
    """A player's play crossed a fair-play tier (docs/models.md s. 7): one alert per player per crossing, naming
    the scope whose z crossed, with the evidence. Version 2 adds ``tier``, the event scope, ``scope_id``,
    ``reference_source`` and ``plies``; version 3 ``stage`` and ``limits``: an alert of stage "review" is the verdict
    of the deeper search that follows a service alert when the runtime reviews (``--review``); version 4
    ``provisional``. Versions 1-3 still parse."""

    type: Literal["fairplay"] = "fairplay"
    schema_version: Literal[1, 2, 3, 4] = 4  # type: ignore[assignment]
    stage: Literal["service", "review"] = Field(default="service", description="service: the live statistic at the "
                                                "service's search; review: the same scope searched again deeper (v3)")
    limits: str = Field(default="", description="the search behind the statistic, e.g. d12-mpv1 (v3)")
    player_id: Id
    game_id: Id
    tier: Literal["screening", "action"] = "action"
    scope: Literal["game", "event", "player"]
    scope_id: str = ""
    statistic: Literal["match", "loss"]
    z: float
    threshold: float = Field(description="the tier's z threshold")
    moves: int = Field(description="counted moves behind the statistic (player scope: its recent window of them)")
    observed: float = Field(description="engine matches, or summed loss (win probability with the move model)")
    expected: float
    reference_rating: Rating
    reference_source: str = Field(default="declared", description="where the reference rating came from")
    games: int = Field(description="games in the scope (player scope: every game of the player so far)")
    plies: list[int] = Field(default_factory=list, description="the counted plies of the game that ended the crossing")
    provisional: bool = Field(default=False, description="the expectations come from calibrations that do not hold as "
                              "fitted for the searches behind the statistic: moves searched by another engine than "
                              "the calibrations', or at other limits, or a provisional calibration (v4)")


class ReviewRequest(Message):
    """A finding of the service's fair-play statistic and the games of the scope it names, for the review stage
    (``kibitz.reviews``, keyed by player). With the review on, the player step sends one at each game end of a player
    over a tier: the alert of a new crossing, or, while the crossing lasts, the same evidence for the scope now
    strongest (unpublished), so the review sees the scope grow; at each later game end of an event whose own scope
    was over a tier, that event's evidence (unpublished, under the crossing that screened it, whatever the tiers say
    now). ``crossing`` names the crossing (the game whose end opened it): the review stage publishes at most one
    verdict per crossing. Version 2: the games' records carry their ``time_control``."""

    type: Literal["review_request"] = "review_request"
    schema_version: Literal[1, 2] = 2  # type: ignore[assignment]
    player_id: Id
    crossing: Id
    alert: FairPlayAlert
    games: list[GameRecord] = Field(max_length=100)


def parse_review_request(raw: bytes | str | None) -> ReviewRequest:
    """Parse one record of ``kibitz.reviews``; raises MalformedEvent."""
    return _parse(_REVIEW_REQUEST, raw, MAX_REVIEW_BYTES)


#: The largest dead letter (its JSON): a record kibitz writes stays under the broker's default max.message.bytes
#: (1 MiB), as a review request does; an original too large for it keeps its start (:attr:`DeadLetter.raw_size`).
MAX_DEAD_LETTER_BYTES = MAX_REVIEW_BYTES


class DeadLetter(Message):
    """A rejected input: the original bytes (as text, and base64 when they are not UTF-8) and why. Version 2 adds
    ``raw_size``: the dead letter of an input too large to be written whole (its JSON stays under
    :data:`MAX_DEAD_LETTER_BYTES`) keeps the original's start."""

    type: Literal["deadletter"] = "deadletter"
    schema_version: Literal[1, 2] = 2  # type: ignore[assignment]
    source: str
    key: str | None = None
    reason: str
    error: str
    game_id: str | None = None
    ply: int | None = None
    raw: str
    raw_base64: str | None = None
    raw_size: int | None = Field(default=None, ge=0, description="the original's size in bytes when raw (and "
                                 "raw_base64) hold only its start (v2)")


MESSAGES: dict[str, type[BaseModel]] = {
    m.__name__: m
    for m in (GameStarted, MoveEvent, GameEnded, MoveAssessment, GameResult, PerceivedRating, RatingUpdate, FairPlayAlert,
              ReviewRequest, DeadLetter)
}
INPUT_EVENTS = (GameStarted, MoveEvent, GameEnded)
_REVIEW_REQUEST = TypeAdapter(ReviewRequest)


def export_json_schemas(directory: str | Path) -> list[Path]:
    """Write ``<Name>.v<version>.schema.json`` for every message; returns the paths written."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, model in MESSAGES.items():
        version = model.model_fields["schema_version"].default
        p = out / f"{name}.v{version}.schema.json"
        p.write_text(json.dumps(model.model_json_schema(), indent=2) + "\n")
        paths.append(p)
    return paths
