"""kibitz's wire messages: one pydantic v2 model per message, versioned, strict, exportable as JSON Schema.

Every message carries ``type`` (its discriminator) and ``schema_version``; unknown fields are rejected. Input
events (what producers send) are :class:`GameStarted`, :class:`MoveEvent` and :class:`GameEnded`, parsed with
:func:`parse_event`. Everything else is what kibitz publishes. Nothing here knows about Kafka. Game and player ids
are 1-:data:`MAX_ID` characters without control characters; :func:`as_id` makes one of any text (a name, a file name).
"""

from .messages import (
    INPUT_EVENTS,
    MAX_ID,
    MAX_PLIES,
    MESSAGES,
    RESULT_SCORES,
    SCHEMA_VERSION,
    Candidate,
    Color,
    DeadLetter,
    EventPrior,
    FairPlayAlert,
    GameEnded,
    GameRecord,
    GameResult,
    GameStarted,
    GlickoState,
    InputEvent,
    MoveAssessment,
    MoveEvent,
    PerceivedRating,
    PlayerInfo,
    RatingUpdate,
    ReviewRequest,
    as_id,
    export_json_schemas,
    parse_event,
    parse_player_event,
    parse_review_request,
)

__all__ = [
    "INPUT_EVENTS", "MAX_ID", "MAX_PLIES", "MESSAGES", "SCHEMA_VERSION", "Candidate", "Color", "DeadLetter", "EventPrior", "FairPlayAlert", "GameEnded",
    "GameRecord", "GameResult", "GameStarted", "GlickoState", "InputEvent", "MoveAssessment", "MoveEvent", "PerceivedRating",
    "PlayerInfo", "RESULT_SCORES", "RatingUpdate", "ReviewRequest", "as_id", "export_json_schemas", "parse_event",
    "parse_player_event", "parse_review_request",
]
