"""Typed errors raised by :mod:`analyzers`.

Every failure a caller may want to handle differently has its own type; all derive from
:class:`KibitzError` so a runtime can catch "anything kibitz rejected" in one place and dead-letter it.
"""

from __future__ import annotations


class KibitzError(Exception):
    """Base class of every error kibitz raises on purpose."""


def where(game_id: str | None, ply: int | None) -> str:
    """``"game G, ply N"``, or as much of it as is known ("" when neither is)."""
    return ", ".join(p for p in (f"game {game_id}" if game_id else "", f"ply {ply}" if ply is not None else "") if p)


# -- input ---------------------------------------------------------------------------------------------
class InputError(KibitzError):
    """An event that cannot be applied; the runtime dead-letters it and carries on."""

    #: short machine-readable reason, used in dead-letter records and metrics labels
    reason = "invalid_input"

    def __init__(self, message: str, *, game_id: str | None = None, ply: int | None = None) -> None:
        at = where(game_id, ply)
        super().__init__(f"{at}: {message}" if at else message)
        self.game_id = game_id
        self.ply = ply


class MalformedEvent(InputError):
    """Bytes that are not JSON, or JSON that does not validate against a schema."""

    reason = "malformed"


class KeyMismatch(InputError):
    """A record of the input topic whose Kafka key is not its game's id. A game's events must share one key: it
    keeps them on one partition, in order, and the worker keeps each game's state and its exactly-once bookkeeping
    (what a retried transaction restores, which records were applied) under that key."""

    reason = "key_mismatch"


class IllegalMove(InputError):
    """A move that is not legal (or not even UCI) in the game's current position."""

    reason = "illegal_move"


class UnknownGame(InputError):
    """A move or game end for a game_id that was never started (or has already ended)."""

    reason = "unknown_game"


class DuplicatePly(InputError):
    """A ply that was already applied: a redelivery or a producer duplicate. It changes nothing."""

    reason = "duplicate_ply"


class OutOfOrderPly(InputError):
    """A ply that skips ahead of the next expected one: earlier plies are missing."""

    reason = "out_of_order_ply"


class DuplicateGame(InputError):
    """A GameStarted for a game_id that is already in progress."""

    reason = "duplicate_game"


class UnsupportedGame(InputError):
    """A game kibitz cannot rate: a chess variant (Chess960, Crazyhouse...), a Go board size or handicap setup it has
    no calibration for."""

    reason = "unsupported_game"


class LimitsMismatch(InputError):
    """An assessment searched under other engine limits than the ones the rating stage's calibrations are for: a
    stage of a split deployment started with another ``--profile`` (or ``--depth``, ``--nodes``, ``--multipv``), or
    assessments left on the topic by a deployment's earlier profile. Its candidates' values are on another scale, so
    rating it would move the player's ratings without a word (depth 10, 10 lines rated by ``fast``'s model, fitted on
    depth 8, 5 lines: 230-890 Elo higher on the 16 player-games of London 2011 rounds 1-2); it is dead-lettered
    instead, the record kept."""

    reason = "limits_mismatch"


class MalformedRecord(InputError):
    """A game record that cannot be read: an SGF record truncated or not SGF at all, or a kept chess game (a review
    request's :class:`~schemas.GameRecord`) whose moves do not replay."""

    reason = "malformed_record"


# -- engines -------------------------------------------------------------------------------------------
class EngineError(KibitzError):
    """An engine failed to analyse a position even after a retry on a fresh process."""

    reason = "engine_error"


class EngineTimeout(EngineError):
    """An engine did not answer within the pool's timeout; it was killed and replaced."""

    reason = "engine_timeout"


class EngineCrashed(EngineError):
    """An engine process died, or answered something that is not UCI."""

    reason = "engine_crashed"


class PoolClosed(EngineError):
    """The engine pool was used outside its ``async with`` block."""

    reason = "pool_closed"


# -- rating math ---------------------------------------------------------------------------------------
class RatingError(KibitzError):
    """A rating that cannot be computed from the data given (rather than a wrong one)."""


class ConvergenceError(RatingError):
    """An iterative solver hit its iteration cap without converging."""


class UnratablePool(RatingError):
    """A pool with perfect scores or disconnected groups: maximum likelihood gives no finite rating."""

    def __init__(self, message: str, *, perfect: list[str] | None = None, components: list[list[str]] | None = None):
        super().__init__(message)
        self.perfect = perfect or []
        self.components = components or []


class CalibrationError(KibitzError):
    """A calibration file that is missing, malformed, or for another engine profile."""


# -- runtime ----------------------------------------------------------------------------------------------
class ConfigurationError(KibitzError):
    """Settings that cannot work (an unknown security protocol, SASL without credentials, a certificate file that is
    not there): refused when they are read, naming the setting, before anything connects."""


class BrokerRefused(ConfigurationError):
    """The broker answers but refuses this client's credentials or TLS setup (a wrong password or user, a SASL
    mechanism it does not enable, a certificate that does not verify): no retry can get past it, so the client stops
    naming the settings to check rather than wait for the broker as if it were away."""


class NotAuthorized(BrokerRefused):
    """The broker takes the credentials but denies an operation kibitz needs on one of its topics, consumer groups or
    transactional ids (an ACL missing): the client stops naming what was denied and where the needed ACLs are listed,
    rather than fail later with a traceback or hang."""


class StateStoreError(KibitzError):
    """A worker's local state store cannot be used (in use by another process, unreadable, missing library)."""


class DeploymentMismatch(StateStoreError):
    """Kafka topics whose states were kept under another layout or by another deployment than this worker's: it stops
    rather than rate from states it cannot own (the subclasses say which)."""


class PartitionsChanged(DeploymentMismatch):
    """A stage's input topic and its state changelog no longer have the partitions its states were kept under
    (partitions were added to a keyed topic: Kafka cannot take them away). A state lives in the changelog partition
    of its key's input partition; with another count, games and players hash to partitions whose state does not hold
    them, so the worker stops rather than rate them from an empty state."""


class AppMismatch(DeploymentMismatch):
    """A stage's state changelog holds states another deployment (another ``--app-id`` on the same topics) wrote: the
    worker stops rather than read the inputs again from their start against them."""


class RuntimeMismatch(DeploymentMismatch):
    """The other worker runtime (transactional or faust) has rated these topics under this app id: the one starting
    keeps its states elsewhere and would rate every input again from its start, so it stops."""


class CorruptState(StateStoreError):
    """A stored state that cannot be read back (e.g. its position is not a FEN or Go snapshot). The transactional
    worker's stores drop such a key with an error line, so it starts afresh; where a step meets one (a faust table's
    value), the record that needed it is dead-lettered and the key is dropped the same way."""

    reason = "corrupt_state"


class TopicsNotCreated(KibitzError):
    """The broker refused to create kibitz's topics (a replication factor above the brokers up, no right to create
    topics): the client stops rather than let the broker make them with its own defaults at the first send."""


class SourceUnavailable(KibitzError):
    """A followed feed cannot be read right now (missing file, HTTP error, refused connection): polled again."""


class DeliveryFailed(KibitzError):
    """The broker refused a record a producer sent (not a broker away, which is waited for: a refusal such as an
    authorization error or a record over its size limit). The producer stops, having sent the records before it."""


class PoisonRecord(KibitzError):
    """A record whose transaction aborted again and again (e.g. an output larger than the broker accepts): it is
    dead-lettered unapplied so its partition moves on."""

    reason = "poison"


def reasons() -> list[str]:
    """Every rejection reason a dead letter can carry (the ``reason`` of each error type, and "error" for a bug)."""
    found, stack = {"error"}, [KibitzError]
    while stack:
        cls = stack.pop()
        stack += cls.__subclasses__()
        if isinstance(cls.__dict__.get("reason"), str):
            found.add(cls.__dict__["reason"])
    return sorted(found)
