"""Kafka settings for the streaming runtime: broker, topic names (README, "Topics"), security. Defined once, used by the
worker, the producer, ``kibitz tail`` and the tests.

Credentials are :class:`pydantic.SecretStr`: they print as ``**********`` in reprs, logs and errors, and are only
unwrapped when handed to faust or aiokafka.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import ssl
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from analyzers.errors import BrokerRefused, ConfigurationError, InputError, NotAuthorized
from schemas import DeadLetter

from .steps import Route, dead_letter

DEFAULT_BROKER = "127.0.0.1:9092"
#: The stages of a worker, in pipeline order: analyse (moves -> assessments; those of a game in an event go by way of
#: the pool stage, keyed by event, which attaches the event prior), rate (assessments -> ratings), review (with
#: --review: each alert's scope searched again deeper -> alerts of stage review).
STAGES = ("analyse", "pool", "rate", "review")


def running_stages(stages: Sequence[str], review: bool) -> list[str]:
    """The stages among ``stages`` a worker runs: the review stage only when the service reviews (--review). Raises
    ValueError for a name that is no stage, or when none is left to run."""
    unknown = sorted(set(stages) - set(STAGES))
    if unknown:
        raise ValueError(f"no stage named {', '.join(unknown)} (the stages: {', '.join(STAGES)})")
    if not stages:
        raise ValueError(f"no stage given (the stages: {', '.join(STAGES)})")
    running = [s for s in stages if s != "review" or review]
    if not running:
        raise ValueError("the review stage runs only with --review")
    return running


TOPIC_PREFIX_MAX = 180


def topic_prefix(text: str) -> str:
    """An argparse type: a prefix Kafka accepts in topic names (:class:`Topics`), else a usage error naming why."""
    try:
        return Topics(prefix=text).prefix
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a topic prefix is at most {TOPIC_PREFIX_MAX} of the characters "
                                         "Kafka allows in topic names (ASCII letters, digits, '.', '_', '-')") from None


class Topics(BaseModel):
    """Topic names; ``prefix`` namespaces them (tests use a fresh prefix per run)."""

    model_config = ConfigDict(frozen=True)
    #: Kafka's topic names are ASCII letters, digits, ".", "_" and "-", 249 at most; the prefix leaves room for the
    #: longest name kibitz and faust make of it
    prefix: str = Field(default="", pattern=r"^[A-Za-z0-9._-]*$", max_length=TOPIC_PREFIX_MAX)

    def name(self, base: str) -> str:
        return f"{self.prefix}kibitz.{base}"

    @property
    def games(self) -> str:
        """Game starts and ends (a copy of the lifecycle events, for downstream consumers)."""
        return self.name("games")

    @property
    def moves(self) -> str:
        """The input: every game event, keyed by game."""
        return self.name("moves")

    @property
    def assessments(self) -> str:
        """Move assessments and game results, keyed by player (the rate stage's input)."""
        return self.name("assessments")

    @property
    def pool(self) -> str:
        """Assessments and game results of games in an event, keyed by event (the pool stage's input)."""
        return self.name("assessments.events")

    @property
    def perceived(self) -> str:
        return self.name("ratings.perceived")

    @property
    def glicko2(self) -> str:
        return self.name("ratings.glicko2")

    @property
    def alerts(self) -> str:
        return self.name("alerts.fairplay")

    @property
    def deadletter(self) -> str:
        return self.name("deadletter")

    @property
    def reviews(self) -> str:
        """Review requests (an alert and its scope's games), keyed by player (the review stage's input)."""
        return self.name("reviews")

    @property
    def state_games(self) -> str:
        """Compacted changelog of game state (the transactional runtime's analyse stage)."""
        return self.name("state.games")

    @property
    def state_players(self) -> str:
        """Compacted changelog of player state (the rate stage)."""
        return self.name("state.players")

    @property
    def state_events(self) -> str:
        """Compacted changelog of event evidence (the pool stage)."""
        return self.name("state.events")

    @property
    def state_reviews(self) -> str:
        """Compacted changelog of each player's crossings with a review verdict (the review stage)."""
        return self.name("state.reviews")

    def for_route(self, route: Route) -> str:
        """The topic an output of ``route`` is published to."""
        return {Route.ASSESSMENTS: self.assessments, Route.POOL: self.pool, Route.PERCEIVED: self.perceived, Route.GLICKO2: self.glicko2,
                Route.FAIRPLAY: self.alerts, Route.REVIEWS: self.reviews, Route.DEADLETTER: self.deadletter}[route]

    def changelogs(self) -> list[str]:
        return [self.state_games, self.state_events, self.state_players, self.state_reviews]

    def written_by_producers(self) -> list[str]:
        """The topics ``produce`` and ``follow --produce`` write: the input, its lifecycle copy, the dead letters."""
        return [self.moves, self.games, self.deadletter]

    def all(self) -> list[str]:
        return [self.games, self.moves, self.pool, self.assessments, self.perceived, self.glicko2, self.alerts, self.reviews,
                self.deadletter]


def stage_topics(t: Topics) -> dict[str, tuple[str, str]]:
    """Each stage's input topic and its state changelog."""
    analyse, pool_, rate, review = STAGES
    return {analyse: (t.moves, t.state_games), pool_: (t.pool, t.state_events), rate: (t.assessments, t.state_players),
            review: (t.reviews, t.state_reviews)}


async def seek_committed(consumer: Any, tps: Sequence[Any]) -> None:
    """Set each partition of ``tps`` to its consumer group's committed offset, or its beginning when none is.

    ``consumer`` must be made with ``auto_offset_reset="earliest"``. On assign(), aiokafka's fetcher looks up each
    partition's committed offset itself and, finding none, resets it by its default strategy; a seek_to_beginning
    made while that reset's offset request is in flight is answered with that request's offset (aiokafka 0.14,
    ``Fetcher._update_fetch_positions``). With the default "latest", a partition could start at its end, and a
    pass over it read nothing of it."""
    for tp in tps:
        committed = await consumer.committed(tp)
        if committed is None:
            await consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, committed)


class KafkaSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    broker: str = Field(default_factory=lambda: os.environ.get("KIBITZ_KAFKA", DEFAULT_BROKER), validate_default=True)
    app_id: str = "kibitz"
    partitions: int = Field(default=4, ge=1)
    #: replicas of each topic kibitz creates: 1 for a single dev broker; 3 on a production cluster (with the brokers'
    #: min.insync.replicas at 2, a topic stays writable with one broker down and no acknowledged record is lost)
    replication_factor: int = Field(default=1, ge=1)
    topics: Topics = Topics()
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None

    @field_validator("broker")
    @classmethod
    def _bootstrap_servers(cls, v: str) -> str:
        """HOST[:PORT] entries separated by commas (an IPv6 host in brackets): one that cannot be an address (no host,
        a port that is not a number in 1-65535) would be retried for ever by the wait for the broker."""
        for entry in (e.strip() for e in v.split(",")):
            port: str | None = None  # None: no port given (aiokafka's default)
            if entry.startswith("["):  # [IPv6] or [IPv6]:PORT
                host, bracket, rest = entry[1:].partition("]")
                if not bracket or (rest and not rest.startswith(":")):
                    host = ""
                port = rest[1:] if rest else None
            elif entry.count(":") == 1:  # HOST:PORT
                host, port = entry.split(":")
            else:  # a name, an IPv4 address, or an IPv6 one without brackets (and so without a port)
                host = entry
            if not host or (port is not None and not (port.isdigit() and 1 <= int(port) <= 65535)):
                raise ValueError(f"not a broker address: {entry!r} (want HOST[:PORT], several separated by commas, e.g. "
                                 f"{DEFAULT_BROKER})")
        return v

    @model_validator(mode="after")
    def _security_fits_together(self) -> KafkaSettings:
        sasl = self.security_protocol.startswith("SASL")
        if sasl and not (self.sasl_mechanism and self.sasl_username and self.sasl_password):
            raise ValueError(f"security_protocol {self.security_protocol} needs sasl_mechanism, sasl_username and "
                             "sasl_password")
        if not sasl and self.sasl_mechanism:
            raise ValueError(f"sasl_mechanism {self.sasl_mechanism} is used only with security_protocol SASL_PLAINTEXT "
                             f"or SASL_SSL, not {self.security_protocol}")
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            path = getattr(self, name)
            if path is not None and not os.path.isfile(path):
                raise ValueError(f"{name} {path!r} is not a file")
        return self

    @classmethod
    def from_env(cls, **overrides: Any) -> KafkaSettings:
        """Settings from ``KIBITZ_KAFKA_*`` environment variables (e.g. KIBITZ_KAFKA_SASL_PASSWORD), then overrides.
        Settings that cannot work raise :class:`~analyzers.errors.ConfigurationError` naming the variable."""
        env = {}
        for field in cls.model_fields:
            v = os.environ.get(f"KIBITZ_KAFKA_{field.upper()}")
            if v is not None and field not in ("topics",):
                env[field] = v
        given = {k: v for k, v in overrides.items() if v is not None}
        env.update(given)
        try:
            settings = cls(**env)
            settings.ssl_context()  # the certificates load now, not at the first connection
        except (ValidationError, OSError, ssl.SSLError) as e:
            raise ConfigurationError(f"Kafka settings: {_explain(e, given)}") from None
        return settings

    def ssl_context(self) -> ssl.SSLContext | None:
        if "SSL" not in self.security_protocol:
            return None
        ctx = ssl.create_default_context(cafile=self.ssl_cafile)
        if self.ssl_certfile:
            ctx.load_cert_chain(self.ssl_certfile, self.ssl_keyfile)
        return ctx

    def aiokafka_kwargs(self) -> dict[str, Any]:
        """Connection keyword arguments for aiokafka producers, consumers and admin clients."""
        kw: dict[str, Any] = {"bootstrap_servers": self.broker, "security_protocol": self.security_protocol}
        if self.sasl_mechanism:
            kw.update(sasl_mechanism=self.sasl_mechanism, sasl_plain_username=self.sasl_username,
                      sasl_plain_password=self.sasl_password.get_secret_value() if self.sasl_password else None)
        ctx = self.ssl_context()
        if ctx is not None:
            kw["ssl_context"] = ctx
        return kw

    def faust_credentials(self):
        """The same security settings as a faust ``broker_credentials`` object (None for PLAINTEXT)."""
        import faust

        if self.sasl_mechanism:
            return faust.SASLCredentials(
                username=self.sasl_username, password=self.sasl_password.get_secret_value() if self.sasl_password else None,
                mechanism=self.sasl_mechanism, ssl_context=self.ssl_context(),
            )
        ctx = self.ssl_context()
        return faust.SSLCredentials(ctx) if ctx is not None else None


def _explain(e: Exception, given: dict[str, Any]) -> str:
    """A settings error in the user's terms: each field as the option or ``KIBITZ_KAFKA_*`` variable it came from."""
    if not isinstance(e, ValidationError):
        return f"the TLS certificates do not load: {e}"
    parts = []
    for err in e.errors():
        field = str(err["loc"][0]) if err["loc"] else ""
        where = (f"--{field.replace('_', '-')}" if field in given else f"KIBITZ_KAFKA_{field.upper()}") if field else ""
        if field == "broker" and field not in given and "KIBITZ_KAFKA_BROKER" not in os.environ:
            where = "KIBITZ_KAFKA"  # the broker's address has a variable of its own name (the default's)
        msg = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {msg}" if where else msg)
    return "; ".join(parts) + " (each setting NAME comes from $KIBITZ_KAFKA_NAME, or an option where the command has one)"


async def wait_for_broker(settings: KafkaSettings, *, timeout: float | None = None, first: float = 0.5,
                          most: float = 10.0) -> float:
    """Wait until the broker answers a metadata request, retrying with exponential backoff (``first`` doubling up to
    ``most`` seconds). Says so in one line on stderr when it has to wait, and once more when the broker answers;
    aiokafka's own connection errors are kept out of the log meanwhile (:class:`ClientErrors`). Returns the seconds
    waited; raises TimeoutError after ``timeout`` seconds (None: wait for ever), and
    :class:`~analyzers.errors.BrokerRefused` at once when the broker refuses the credentials or the TLS setup."""
    import asyncio
    import sys
    import time

    from aiokafka.admin import AIOKafkaAdminClient

    started = time.monotonic()
    delay = first
    said = False
    with ClientErrors(quiet=True) as seen:
        while True:
            admin = AIOKafkaAdminClient(**settings.aiokafka_kwargs(), request_timeout_ms=5000)
            try:
                await admin.start()
                await admin.list_topics()
                waited = time.monotonic() - started
                if said:
                    print(f"kibitz: Kafka broker at {settings.broker} answered after {waited:.0f} s", file=sys.stderr, flush=True)
                return waited
            except Exception as e:  # noqa: BLE001 - any failure to connect means: not yet, unless the broker refused
                if seen.refusal is not None:
                    raise BrokerRefused(refusal_message(settings, seen.refusal)) from None
                if timeout is not None and time.monotonic() - started + delay > timeout:
                    raise TimeoutError(f"Kafka broker at {settings.broker} did not answer within {timeout:g} s: {e!r}") from e
                if not said:  # one line from kibitz, not one per failed connection from aiokafka
                    # a broker that takes the connection and closes it at once may be starting, or expect TLS or SASL
                    # from the first byte (a plaintext client on a TLS listener waited here with no hint)
                    closed = any("closed" in str(r) for r in seen.errors)
                    # a TLS client on a plaintext listener: the broker reads the TLS hello as a request too large and
                    # resets the connection in the handshake, as a broker going down may (this client waited unhinted)
                    reset = settings.security_protocol.endswith("SSL") and any(
                        isinstance(r, ConnectionResetError | ssl.SSLEOFError) for r in seen.errors)
                    hint = (f"; it closes each connection: if its listener expects TLS or SASL, set "
                            f"KIBITZ_KAFKA_SECURITY_PROTOCOL (now {settings.security_protocol})" if closed else
                            f"; it resets each TLS handshake: if its listener is not TLS, set KIBITZ_KAFKA_SECURITY_PROTOCOL "
                            f"(now {settings.security_protocol}) to {settings.security_protocol.replace('SSL', 'PLAINTEXT')}"
                            if reset else "")
                    print(f"kibitz: waiting for the Kafka broker at {settings.broker} ({type(e).__name__}{hint}); "
                          f"retrying with backoff up to {most:g} s", file=sys.stderr, flush=True)
                    said = True
            finally:
                await admin.close()
                seen.errors.clear()
            await asyncio.sleep(delay)
            delay = min(delay * 2, most)


class ClientErrors(logging.Handler):
    """aiokafka's errors, read from its log records, where the cause of a failed connection is: its bootstrap turns
    every failure, a refused password included, into one "Unable to bootstrap" error, and a running client retries a
    refused connection for ever, logging it. ``refusal`` is the first error that is the broker refusing this client
    (:func:`refused`). With ``quiet`` (while the broker is waited for) the records are kept out of the log, aiokafka
    logging each failed connection at error level, the first of them before kibitz's own line said it waits, and their
    exceptions are kept in ``errors``; without, the log is left as it is."""

    def __init__(self, *, quiet: bool = False) -> None:
        super().__init__(logging.DEBUG)
        self.quiet = quiet
        self.errors: list[BaseException] = []
        self.refusal: BaseException | None = None
        self._logger = logging.getLogger("aiokafka")

    def emit(self, record: logging.LogRecord) -> None:
        if not isinstance(record.args, tuple):
            return
        for a in record.args:
            if isinstance(a, BaseException):
                if self.quiet:
                    self.errors.append(a)
                if self.refusal is None and refused(a):
                    self.refusal = a

    def __enter__(self) -> ClientErrors:
        self._propagate = self._logger.propagate
        self._logger.addHandler(self)
        if self.quiet:
            self._logger.propagate = False
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
        self._logger.propagate = self._propagate

    def check(self, settings: KafkaSettings) -> None:
        """Raise :class:`~analyzers.errors.BrokerRefused` if the broker has refused this client while it ran (its
        credentials rotated or revoked: else a client retried for ever, idle)."""
        if self.refusal is not None:
            raise BrokerRefused(refusal_message(settings, self.refusal) + " (refused while running)")

    async def watch(self, settings: KafkaSettings, every: float = 1.0) -> None:
        """:meth:`check` every ``every`` seconds until it raises (a worker's liveness probe would stay content)."""
        import asyncio

        while True:
            self.check(settings)
            await asyncio.sleep(every)


@contextlib.contextmanager
def denied_as(settings: KafkaSettings, what: str) -> Iterator[None]:
    """Raise the broker's denial of ``what`` to these credentials (an aiokafka authorization error in the block) as
    :class:`~analyzers.errors.NotAuthorized` (:func:`not_authorized`); other errors pass as they are."""
    try:
        yield
    except Exception as e:
        denied = not_authorized(settings, e, what)
        if denied is None:
            raise
        raise denied from None


def refused(error: BaseException) -> bool:
    """Whether a connection's error is the broker refusing this client's settings, which no retry gets past: a SASL
    authentication that failed or a mechanism the broker does not enable, or a TLS handshake that fails (a
    certificate that does not verify). A TLS client on a plaintext listener is not told apart: the broker closes the
    connection, as one starting may (:func:`wait_for_broker` says so)."""
    from aiokafka import errors as kafka_errors

    if isinstance(error, ssl.SSLError):
        # a connection cut during the handshake (a broker restarting) ends it so too: that is waited for
        return not isinstance(error, (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError))
    return isinstance(error, (kafka_errors.SaslAuthenticationFailed, kafka_errors.AuthenticationFailedError,
                              kafka_errors.AuthenticationMethodNotSupported, kafka_errors.UnsupportedSaslMechanismError,
                              kafka_errors.IllegalSaslStateError))


def not_authorized(settings: KafkaSettings, error: BaseException, what: str) -> NotAuthorized | None:
    """``error`` as :class:`~analyzers.errors.NotAuthorized` when it is the broker denying ``what`` (e.g. "the rate
    stage's consumer group") to these credentials, else None."""
    from aiokafka import errors as kafka_errors

    if not isinstance(error, (kafka_errors.TopicAuthorizationFailedError, kafka_errors.GroupAuthorizationFailedError,
                              kafka_errors.TransactionalIdAuthorizationFailed, kafka_errors.ClusterAuthorizationFailedError)):
        return None
    who = f"user {settings.sasl_username}" if settings.sasl_username else "this client"
    return NotAuthorized(f"the Kafka broker at {settings.broker} denies {who} {what}: {str(error)[:300]}. Grant the "
                         f"ACLs that README, 'Kafka ACLs', lists (app id {settings.app_id}, topic prefix "
                         f"{settings.topics.prefix!r})")


def refusal_message(settings: KafkaSettings, error: BaseException) -> str:
    """What :class:`~analyzers.errors.BrokerRefused` says: the broker's refusal and the settings behind it."""
    check = ("KIBITZ_KAFKA_SSL_CAFILE (the CA that signed the broker's certificate) and KIBITZ_KAFKA_SECURITY_PROTOCOL "
             "(the listener's)" if isinstance(error, ssl.SSLError) else
             "KIBITZ_KAFKA_SASL_USERNAME, KIBITZ_KAFKA_SASL_PASSWORD and KIBITZ_KAFKA_SASL_MECHANISM (one the broker "
             "enables)")
    text = str(error)[:300]
    why = text if type(error).__name__ in text else f"{type(error).__name__}: {text}"  # aiokafka's errors name themselves
    return (f"the Kafka broker at {settings.broker} refused this client ({settings.security_protocol}"
            f"{', ' + settings.sasl_mechanism if settings.sasl_mechanism else ''}): {why}; check {check}")


async def missing_topics(settings: KafkaSettings, names: Sequence[str]) -> tuple[list[str], list[str]]:
    """Which of ``names`` the broker does not have, and the kibitz topics of this prefix it has (asked without
    subscribing: see :func:`wait_for_topics`)."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(**settings.aiokafka_kwargs())
    try:
        await admin.start()
        known = set(await admin.list_topics())
    finally:
        await admin.close()
    return [n for n in names if n not in known], sorted(t for t in known if t.startswith(settings.topics.prefix + "kibitz."))


#: Seconds between two looks for topics not there yet (:func:`wait_for_topics`).
TOPIC_POLL_SECONDS = 2.0


async def wait_for_topics(settings: KafkaSettings, names: Sequence[str], *, who: str, timeout: float | None = None) -> bool:
    """Wait until the broker has every topic of ``names`` (True), or ``timeout`` seconds have passed (False); says once
    on stderr which are missing and which kibitz topics the broker has (a mistyped name or prefix shows there). A
    reader must not subscribe before: a broker that creates topics on first use (Kafka's default) would create a
    missing one with its own defaults (one partition, one replica) for the reader, and the worker would then find
    it there and use it as it is, its input unscaled and unreplicated."""
    import asyncio
    import sys
    import time

    started, said = time.monotonic(), False
    while True:
        missing, ours = await missing_topics(settings, names)
        if not missing:
            return True
        if not said:
            # a broker shows a client only the topics its ACLs let it describe: a topic there but not for this user
            # looks missing (Kafka does not tell the two apart)
            acls = (f"; or user {settings.sasl_username} may not describe {'it' if len(missing) == 1 else 'them'}: "
                    f"README, 'Kafka ACLs'" if settings.sasl_username else "")
            print(f"kibitz {who}: no topic {', '.join(missing)} on the broker yet; waiting for "
                  f"{'it' if len(missing) == 1 else 'them'} (kibitz's topics there: {', '.join(ours) or 'none'}{acls})",
                  file=sys.stderr, flush=True)
            said = True
        if timeout is not None and time.monotonic() - started >= timeout:
            return False
        await asyncio.sleep(TOPIC_POLL_SECONDS if timeout is None else min(TOPIC_POLL_SECONDS, timeout))


def rejection_record(topics: Topics, error: InputError, *, source: str) -> tuple[str, bytes, DeadLetter]:
    """(topic, key, dead letter) of an input a producer refused before sending it (a game with an illegal move, an
    unsupported variant, a feed that does not parse): on ``kibitz.deadletter`` keyed by its game, as the worker's own
    rejections are, so that one topic holds everything that was not rated. The raw text is the error's message: the
    refused input is a piece of a file or feed, not a record."""
    key = error.game_id or source
    return topics.deadletter, key.encode(), dead_letter(error, str(error), source=source, key=key)


def input_records(topics: Topics, ev: BaseModel) -> list[tuple[str, bytes, bytes]]:
    """(topic, key, value) of the records one input event becomes: the event on ``kibitz.moves`` keyed by game,
    and a game start or end also on ``kibitz.games`` (the lifecycle copy for downstream consumers)."""
    key, value = ev.game_id.encode(), ev.model_dump_json().encode()  # type: ignore[attr-defined]
    out = [(topics.moves, key, value)]
    if getattr(ev, "type", None) in ("game_started", "game_ended"):
        out.append((topics.games, key, value))
    return out
