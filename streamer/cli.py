"""The ``kibitz`` command. Subcommands only move events; the work is in :mod:`analyzers` and :mod:`.pipeline`.

Exit codes: 0 all input processed; 3 some input was rejected (each rejection printed, dead-lettered, the rest
processed); 2 usage error; 1 a fatal error (no engine, unreadable file).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import json
import math
import os
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlparse

from pydantic import BaseModel

from analyzers.calibration import Calibration, load_calibration
from analyzers.combination import load_combination
from analyzers.engine import EnginePool
from analyzers.engine.gtp import GoLimits
from analyzers.engine.katago import GoEngineLimits, KataGoLimits
from analyzers.errors import (
    CalibrationError,
    ConfigurationError,
    DeliveryFailed,
    EngineError,
    InputError,
    RatingError,
    StateStoreError,
    TopicsNotCreated,
    where,
)
from analyzers.eventpool import load_event_pool
from analyzers.fairplay import DEFAULT_REVIEW_Z, DEFAULT_SCREEN_Z, DEFAULT_Z_THRESHOLD, ReviewCalibration
from analyzers.gorate import DEFAULT_GO_PROFILE, load_go_calibration
from analyzers.profiles import DEFAULT_PROFILE, PROFILES, get_profile
from analyzers.ratingmodel import Prior, load_move_model
from schemas import DeadLetter, FairPlayAlert, GameStarted, PerceivedRating, RatingUpdate, export_json_schemas

from .embedded import MAX_GAMES, MAX_PLAYERS
from .follow import DEFAULT_INTERVAL, STREAM_PREFIX, url_secrets
from .kafka_config import STAGES, denied_as, input_records, rejection_record, topic_prefix, wait_for_broker, wait_for_topics
from .logs import setup_logging
from .redrive import REDRIVABLE, reason_option, redrive

EXIT_OK, EXIT_FATAL, EXIT_USAGE, EXIT_REJECTED = 0, 1, 2, 3
#: What --out receives (assessments are internal traffic; add them with --out-assessments).
PUBLISHED = (PerceivedRating, RatingUpdate, FairPlayAlert)


# -- shared options ---------------------------------------------------------------------------------------
def add_engine_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("engine")
    g.add_argument("--profile", default=DEFAULT_PROFILE, choices=sorted(PROFILES), help="engine profile (limits and calibration); default %(default)s")
    lim = g.add_mutually_exclusive_group()
    lim.add_argument("--depth", type=positive(int), help="override the profile's search depth (results are then not calibrated)")
    lim.add_argument("--nodes", type=positive(int), help="search a fixed number of nodes instead of a depth")
    g.add_argument("--multipv", type=positive(int), help="override the profile's number of candidate moves")
    g.add_argument("--engines", type=positive(int), default=2, help="engine processes (one core each); default %(default)s")
    g.add_argument("--engine", default=None, help="engine binary (default: $KIBITZ_ENGINE or stockfish)")
    g.add_argument("--cache", type=Path, default=None, help="SQLite file caching analyses across runs")
    g.add_argument("--search-timeout", type=positive(float), default=None, metavar="SECONDS",
                   help="deadline of one engine search before the engine is replaced and the search retried once "
                        "(default: 50x the profile's mean search time, at least 5 s)")
    g.add_argument("--prior", type=population_prior, metavar="MEAN:SD", default=None,
                   help="the population the moves-only estimate starts from, e.g. 2600:150 for an elite event; the move "
                        "model's posterior under it is then published, not the combination fitted on rated online events "
                        "(default: the combination, and the move model's prior per time-control class)")
    g.add_argument("--no-event-pool", action="store_true",
                   help="rate each player from their own moves only, without the prior the other players' moves (and the player's results) in the "
                        "same event give (docs/models.md s. 12; default: on for games with an event name)")
    g.add_argument("--metrics-port", type=tcp_port, default=None, help="serve Prometheus metrics on PORT")
    g.add_argument("--metrics-host", default="127.0.0.1", help="address the metrics server binds (default %(default)s; "
                   "0.0.0.0 where a scraper in another container or pod reads it)")
    fp = p.add_argument_group("fair play (docs/models.md s. 7)")
    fp.add_argument("--screen-z", type=positive_z, default=DEFAULT_SCREEN_Z, metavar="Z",
                    help="the screening tier, a review queue (default %(default)s; lower reviews more players: the "
                         "tables of docs/fairplay.md give detection and honest reviews per trigger)")
    fp.add_argument("--action-z", type=positive_z, default=DEFAULT_Z_THRESHOLD, metavar="Z",
                    help="the action tier of the service's statistic (default %(default)s); at least --screen-z")
    fp.add_argument("--review-z", type=positive_z, default=DEFAULT_REVIEW_Z, metavar="Z",
                    help="with --review, the action tier of the review's match statistic (default %(default)s, what "
                         "rated-dev supports: docs/fairplay.md)")


def add_review_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--review", action="store_true", help="follow every fair-play alert with a review of the scope it names "
                   "(the depth-12 search of `kibitz review`, on the same engines; the worker: its review stage); a review "
                   "that reaches the action tier is published as an alert of stage 'review' (docs/fairplay.md)")


def add_go_options(parser: argparse.ArgumentParser, title: str) -> argparse._ArgumentGroup:
    go = parser.add_argument_group(title)
    go.add_argument("--go-engine", default=None, help="Go engine binary (default, by the calibration's engine: "
                    "$KIBITZ_GO_ENGINE or gnugo; $KIBITZ_KATAGO or what deploy/katago/setup.sh installs)")
    go.add_argument("--go-profile", default=DEFAULT_GO_PROFILE, help="Go calibration (analyzers/calibrations/NAME.json), "
                    "which names its engine: go-fox-katago-b10 (KataGo, the default) or go-fox-gnugo-l1 (GNU Go)")
    go.add_argument("--go-level", type=int, default=None, help="GNU Go level, for a GNU Go calibration (default: the "
                    "calibration's)")
    return go


def go_setup(args: argparse.Namespace) -> tuple[Calibration, GoEngineLimits]:
    """The Go calibration the options name and its engine's limits: KataGo's visits for a calibration fitted on KataGo,
    else GNU Go's level (the calibration's unless --go-level)."""
    cal = load_go_calibration(args.go_profile)
    if "visits" in cal.extra:
        return cal, KataGoLimits(int(cal.extra["visits"]))
    return cal, GoLimits(int(cal.extra.get("level", 1)) if args.go_level is None else args.go_level)


def population_prior(text: str) -> Prior:
    """``MEAN:SD`` as a prior (an argparse type)."""
    mean, _, sd = text.partition(":")
    try:
        prior = Prior(float(mean), float(sd))
    except ValueError:
        raise argparse.ArgumentTypeError(f"want MEAN:SD, e.g. 2600:150; got {text!r}") from None
    if not (0 < prior.mean < 4000 and 0 < prior.sd <= 1000):
        raise argparse.ArgumentTypeError(f"want a mean in (0, 4000) and an sd in (0, 1000]; got {text!r}")
    return prior


def positive_z(text: str) -> float:
    """A fair-play tier's z (an argparse type): a number in (0, 100)."""
    try:
        z = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"want a number, e.g. 3.0; got {text!r}") from None
    if not 0 < z < 100:
        raise argparse.ArgumentTypeError(f"want a z in (0, 100); got {text!r}")
    return z


def build_config(args: argparse.Namespace):
    from .pipeline import PipelineConfig

    profile = get_profile(args.profile)
    calibration = load_calibration(profile.name)
    model = load_move_model(profile.name)  # the rating-conditioned move model, where the profile has one
    # the learned combination on top of it gives the moves-only rating; it was fitted on rated-dev's population, so
    # a platform that states its own population (--prior) gets the move model's posterior under that prior instead
    combination = load_combination(profile.name) if model is not None else None
    # the event pooling's population of event levels is rated-dev's too: off with a platform's own population
    event_pool = None if model is None or getattr(args, "no_event_pool", False) else load_event_pool(profile.name)
    if model is not None and getattr(args, "prior", None) is not None:
        model = replace(model, priors={k: args.prior for k in model.priors}, _cache={})
        combination = event_pool = None
    if profile.gains_only:
        # a gains-only profile publishes no posterior and no fair-play statistics: not a live service
        raise CalibrationError(f"profile {profile.name!r} rates by gains only (one PV); it is for bench/ferreira_tables.py "
                               "and bench/accuracy.py. The live service needs a posterior calibration: --profile fast or standard")
    if args.depth or args.nodes or args.multipv:
        profile = replace(
            profile, name=f"{profile.name}*", depth=args.depth if args.depth else (None if args.nodes else profile.depth),
            nodes=args.nodes, multipv=args.multipv or profile.multipv,
        )
        print(f"note: limits {profile.name} differ from the calibrated profile; ratings are not calibrated for them", file=sys.stderr)
        calibration = replace(calibration, provisional=True)
        model = replace(model, provisional=True, _cache={}) if model else None
        combination = replace(combination, provisional=True) if combination else None
        event_pool = replace(event_pool, provisional=True) if event_pool else None
    screen, action = getattr(args, "screen_z", DEFAULT_SCREEN_Z), getattr(args, "action_z", DEFAULT_Z_THRESHOLD)
    if screen > action:
        raise CalibrationError(f"--screen-z {screen} is above --action-z {action}: the screening tier is the lower one")
    review = None
    if getattr(args, "review", False):
        review = ReviewCalibration.load(profile.name)
        if model is None or review is None:
            raise CalibrationError(f"--review needs the profile's move model and review calibration; profile {profile.name} "
                                   "has " + ("no move model" if model is None else "no review calibration (bench/fit_review.py fits one)"))
    config = PipelineConfig(profile, calibration, model=model, combination=combination, event_pool=event_pool,
                            search_timeout=getattr(args, "search_timeout", None), screen_z=screen, z_threshold=action,
                            review_z=getattr(args, "review_z", DEFAULT_REVIEW_Z), review=review)
    idle = getattr(args, "idle_game_seconds", None)
    return replace(config, idle_game_seconds=idle) if idle else config


class JsonLines:
    def __init__(self, path: Path | None, *, stream=None, types=PUBLISHED, flush: bool = False) -> None:
        self.f = open(path, "w") if path else stream
        self.types = types
        self.flush = flush  # per message: a consumer of a live stream sees each rating as it is made

    def __call__(self, msg: BaseModel) -> None:
        if self.f is not None and isinstance(msg, self.types):
            self.f.write(msg.model_dump_json() + "\n")
            if self.flush:
                self.f.flush()

    def close(self) -> None:
        if self.f is not None and self.f not in (sys.stdout, sys.stderr):
            self.f.close()


def positive(kind: type[int] | type[float]) -> Callable[[str], int | float]:
    """An argparse type: a number of ``kind`` above 0 (engine counts, intervals, speeds, limits), refused as a usage
    error otherwise (0 engines or a negative poll interval would fail later, or poll without pause)."""

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not 0 < value < float("inf"):  # NaN fails it too
            raise argparse.ArgumentTypeError(f"must be above 0: {text!r}")
        return value

    parse.__name__ = f"positive {kind.__name__}"  # argparse names the type in its error
    return parse


def game_file(text: str) -> Path:
    """An argparse type: a PGN or SGF file to read. A missing file, a directory (not read as the files in it: name
    them, e.g. ``DIR/*.pgn``) or a file that is not a text (compressed, binary: :func:`~streamer.ingest.not_a_text`)
    is a usage error naming it."""
    from .ingest import SNIFF_BYTES, not_a_text

    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory: name its files, e.g. {text.rstrip('/')}/*.pgn")
    if path.exists() and not path.is_file():
        raise argparse.ArgumentTypeError(not_regular(text))
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    try:
        with path.open("rb") as f:
            why = not_a_text(f.read(SNIFF_BYTES))
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot read {text}: {e.strerror or e}") from None
    if why is not None:
        raise argparse.ArgumentTypeError(f"{text} is not a PGN or SGF text: {why}")
    return path


def not_regular(text: str) -> str:
    """Why a path that exists but is neither a file nor a directory (a pipe such as ``<(zcat games.pgn.gz)``, a
    device) is refused: its start is read to check what it holds, and a pipe's bytes can be read only once."""
    return (f"{text} is not a regular file (a pipe or a device: its bytes can be read only once); save the games to a "
            f"file first, e.g. zcat games.pgn.gz > games.pgn")


def is_sgf(path: Path) -> bool:
    """Whether a games file holds Go (SGF): named ``.sgf``, or an SGF record whatever its name."""
    from .ingest import SNIFF_BYTES, sgf_text

    if path.suffix.lower() == ".sgf":
        return True
    with path.open("rb") as f:
        return sgf_text(f.read(SNIFF_BYTES))


def pgn_file(text: str) -> Path:
    """An argparse type: a PGN file (:func:`game_file`) for a command that rates chess only; an SGF record is a usage
    error (read as PGN it was one game of "?" against "?" without a move)."""
    path = game_file(text)
    if is_sgf(path):
        raise argparse.ArgumentTypeError(f"{text} is an SGF record (Go games): this command reads chess games, in PGN")
    return path


def _number(text: str) -> float:
    """``text`` as a float, NaN when it is none: a NaN fails every range check of the argparse types below."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def anchor_spec(text: str) -> tuple[str, float]:
    """An argparse type: ``NAME=RATING`` (``kibitz pool --anchor``), the rating a number in [0, 4000]."""
    name, _, value = text.rpartition("=")
    rating = _number(value)
    if not name or not 0 <= rating <= 4000:
        raise argparse.ArgumentTypeError(f"want NAME=RATING with a rating in [0, 4000], e.g. 'Carlsen,M=2826'; got {text!r}")
    return name, rating


def rating_value(text: str) -> float:
    """An argparse type: a rating, a number in [0, 4000] (NaN made the pool's fit fail to converge, with a traceback)."""
    value = _number(text)
    if not 0 <= value <= 4000:
        raise argparse.ArgumentTypeError(f"want a rating in [0, 4000]; got {text!r}")
    return value


def auto_or(low: float, high: float, what: str) -> Callable[[str], float | str]:
    """An argparse type: "auto" or a number in the open interval (low, high) (``kibitz pool``'s white advantage and
    draw rate), a usage error otherwise (a draw rate of 1.5 read as 150 %, "xyz" a traceback)."""

    def parse(text: str) -> float | str:
        if text == "auto":
            return text
        value = _number(text)
        if not low < value < high:
            raise argparse.ArgumentTypeError(f"want auto or {what} in ({low:g}, {high:g}); got {text!r}")
        return value

    parse.__name__ = what
    return parse


def count(text: str) -> int:
    """An argparse type: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"want a whole number >= 0; got {text!r}")
    return value


def tcp_port(text: str) -> int:
    """An argparse type: a TCP port, 1-65535 (70000 was an OverflowError traceback from bind)."""
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"want a port in 1-65535; got {text!r}")
    return int(text)


def host_port(text: str) -> str:
    """An argparse type: ``HOST:PORT`` (``:PORT`` for 127.0.0.1) for a server to listen on, checked now (a bad one was
    a traceback once the engines had started)."""
    from .web import parse_hostport

    try:
        parse_hostport(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def feed_source(text: str) -> str:
    """An argparse type: a feed for ``kibitz follow``, an http(s) URL (``stream+`` before it: read as a stream) or a
    file path. A file that does not exist yet
    is accepted (a relay may write it later: it is polled until it appears); a directory, an SGF file or a URL of
    another scheme would never give a PGN text and is a usage error."""
    scheme = urlparse(text.removeprefix(STREAM_PREFIX)).scheme
    if "://" in text and scheme not in ("http", "https"):
        raise argparse.ArgumentTypeError(f"not an http(s) URL, a stream+http(s) URL or a file: {text}")
    if "://" not in text and Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory: name its PGN files, e.g. {text.rstrip('/')}/*.pgn")
    if "://" not in text and Path(text).exists() and not Path(text).is_file():
        raise argparse.ArgumentTypeError(not_regular(text) + " (a feed file is read again at each poll)")
    if "://" not in text and Path(text).is_file() and is_sgf(Path(text)):
        # a feed URL serving SGF is unavailable until it serves PGN; a file here is Go games, which follow does not read
        raise argparse.ArgumentTypeError(f"{text} is an SGF record (Go games): follow reads PGN feeds; "
                                         "rate SGF files with kibitz replay or kibitz produce")
    return text


def print_rejection(d: DeadLetter | InputError) -> None:
    """One stderr line per rejected input: its reason, where it was (game and ply, else the source) and why."""
    error = d.error if isinstance(d, DeadLetter) else str(d)
    at = where(d.game_id, d.ply) or (d.source if isinstance(d, DeadLetter) else "")
    if at and not error.startswith(at):  # an InputError's message names its game and ply already
        error = f"{at}: {error}"
    print(f"rejected ({d.reason}) {error}", file=sys.stderr)


# -- replay -----------------------------------------------------------------------------------------------
async def _replay_go(args: argparse.Namespace, paths: list[Path]) -> int:
    """``kibitz replay FILE.sgf...``: Go games through the calibration's engine and the embedded runtime
    (streamer.goreplay)."""
    from analyzers.engine.adapter import go_adapter
    from analyzers.engine.pool import DEFAULT_TIMEOUT

    from .goreplay import replay_go
    from .sgf import read_sgf_games

    games = []
    for p in paths:  # each checked by game_file when the arguments were read
        games.extend(read_sgf_games(p))
    try:
        cal, limits = go_setup(args)
    except CalibrationError as e:
        print(f"kibitz: {e}", file=sys.stderr)
        return EXIT_FATAL
    out = JsonLines(args.out, types=(*PUBLISHED, DeadLetter))
    rejected = published = 0
    started = time.monotonic()
    katago = isinstance(limits, KataGoLimits)
    engines = 1 if katago else args.engines  # one KataGo process evaluates on every core (OpenCL)
    print(f"kibitz replay: {len(games)} Go games from {', '.join(p.name for p in paths)}; calibration {cal.profile} "
          f"({'KataGo' if katago else 'GNU Go'} {limits.key}), {engines} engine{'s' if engines > 1 else ''}", flush=True)
    if cal.provisional:
        print(f"calibration is PROVISIONAL: {cal.fitted_on}; see docs/go.md for what it measures", flush=True)
    try:
        async with EnginePool(args.go_engine, size=engines, cache_path=args.cache, game=go_adapter(limits),
                              timeout=args.search_timeout or DEFAULT_TIMEOUT) as pool:
            async for msg in replay_go(games, pool, cal, limits=limits, partitions=args.engines):
                out(msg)
                if isinstance(msg, DeadLetter):
                    rejected += 1
                    print_rejection(msg)
                elif isinstance(msg, PerceivedRating):
                    published += 1
                    if msg.scope == "game" and not args.quiet:
                        print(f"{msg.game_id} move {msg.ply + 1:>3} {msg.player_id[:24]:<24} {msg.rank:>3} "
                              f"[{msg.rank_low}..{msg.rank_high}] ({msg.rating:.0f} {msg.low:.0f}-{msg.high:.0f}), "
                              f"{msg.moves} moves", flush=True)
                elif isinstance(msg, RatingUpdate):
                    print(f"{msg.game_id} glicko-2 {msg.player_id[:24]}: {msg.before.rating:.0f} -> "
                          f"{msg.after.rating:.0f} (RD {msg.after.rd:.0f})", flush=True)
            stats = pool.stats
    except EngineError as e:
        print(f"kibitz: {e}", file=sys.stderr)
        return EXIT_FATAL
    finally:
        out.close()
    print(f"{len(games)} games in {time.monotonic() - started:.1f}s; {published} perceived ratings; engine searches "
          f"{stats.searches}, cache hits {stats.cache_hits}; rejected {rejected}" + (f"; output in {args.out}" if args.out else ""))
    return EXIT_REJECTED if rejected else EXIT_OK


#: ``replay``'s options that only a chess replay reads, with their defaults: (option, attribute, default).
CHESS_REPLAY_OPTIONS = (("--serve", "serve", None), ("--review", "review", False), ("--profile", "profile", DEFAULT_PROFILE),
                        ("--depth", "depth", None), ("--nodes", "nodes", None), ("--multipv", "multipv", None),
                        ("--engine", "engine", None), ("--prior", "prior", None), ("--no-event-pool", "no_event_pool", False),
                        ("--metrics-port", "metrics_port", None), ("--screen-z", "screen_z", DEFAULT_SCREEN_Z),
                        ("--action-z", "action_z", DEFAULT_Z_THRESHOLD), ("--review-z", "review_z", DEFAULT_REVIEW_Z))


#: ``replay``'s options that only a Go (SGF) replay reads.
GO_REPLAY_OPTIONS = (("--go-profile", "go_profile", DEFAULT_GO_PROFILE), ("--go-engine", "go_engine", None),
                     ("--go-level", "go_level", None), ("--quiet", "quiet", False))


def options_given(args: argparse.Namespace, options: tuple[tuple[str, str, object], ...]) -> list[str]:
    """Which of ``options`` (option, attribute, default) ``args`` sets away from their defaults."""
    return [opt for opt, attr, default in options if getattr(args, attr, default) != default]


async def _replay(args: argparse.Namespace) -> int:
    from rich.console import Console

    from .broadcast import serving
    from .embedded import EmbeddedRuntime
    from .ingest import DEMO_PGN, paced, read_pgn_games, replay_timeline
    from .live import LiveStore
    from .ui import ReplayView

    paths: list[Path] = args.pgn or [DEMO_PGN]
    sgf = [p for p in paths if is_sgf(p)]
    if sgf:
        if len(sgf) != len(paths):
            print("kibitz: replay takes PGN files or SGF files, not both at once", file=sys.stderr)
            return EXIT_USAGE
        chess_only = options_given(args, CHESS_REPLAY_OPTIONS)
        if chess_only:
            # each was ignored without a word: --serve served nothing (the overlay draws chess), --review reviewed nothing
            print(f"kibitz: {', '.join(chess_only)}: for chess (PGN) games; an SGF replay rates Go with --go-profile, "
                  "--go-engine, --go-level, --engines, --cache, --search-timeout, --out and --quiet", file=sys.stderr)
            return EXIT_USAGE
        return await _replay_go(args, sgf)
    go_only = options_given(args, GO_REPLAY_OPTIONS)
    if go_only:
        print(f"kibitz: {', '.join(go_only)}: for Go (SGF) games, and these are PGN", file=sys.stderr)
        return EXIT_USAGE
    config = build_config(args)
    games: list = []
    for p in paths:  # each checked by game_file when the arguments were read
        games.extend(read_pgn_games(p))
    speed = None if args.max_speed else args.speed
    timeline = replay_timeline(games, speed=speed)
    console = Console(stderr=False)
    out = JsonLines(args.out)
    store = LiveStore(clock_rate=speed)  # a paced replay's clocks run at its speed; at full speed, not at all
    rejections: list[DeadLetter] = []

    def on_reject(d: DeadLetter) -> None:
        rejections.append(d)
        print_rejection(d)

    cal = config.calibration
    console.print(f"kibitz replay: {len(games)} games from {', '.join(p.name for p in paths)}; profile {config.profile.name} "
                  f"({config.limits.key}), {args.engines} engines; speed {'max' if speed is None else f'x{speed:g}'}")
    model = config.model
    provisional = config.provisional
    if provisional:
        console.print(f"[yellow]{'move model' if model else 'calibration'} is PROVISIONAL[/yellow]: "
                      f"{model.fitted_on if model else cal.fitted_on}")
    started = time.monotonic()
    with ExitStack() as stack:
        view = stack.enter_context(ReplayView(console, len(timeline), live=not args.no_ui and console.is_terminal))

        def sink(msg: BaseModel) -> None:
            out(msg)
            view.publish(msg)
            store.apply(msg)

        async with EnginePool(args.engine, size=args.engines, cache_path=args.cache, timeout=config.timeout) as pool:
            if not config.fitted_on(pool.engine_name):
                provisional = True
                console.print(f"[yellow]engine {pool.engine_name} is not the one the calibrations were fitted on "
                              f"({config.calibrated_engine()}): ratings are PROVISIONAL[/yellow]")
            async with EmbeddedRuntime(pool, config, sink, on_reject) as rt, serving(store, args.serve):
                if args.metrics_port:
                    rt.metrics.serve(args.metrics_port, args.metrics_host)
                for g in games:
                    for err in g.errors:
                        rt.reject(err, err.args[0], source=g.game_id)
                async for te in paced(timeline):
                    if isinstance(te.event, GameStarted):
                        view.started(te.event)
                    store.apply(te.event)
                    rt.submit(te.event, source=te.event.game_id)
                    view.advance()
                await rt.drain()
                if args.serve:
                    print("kibitz: replay finished; still serving the overlay (Ctrl-C to stop)", file=sys.stderr, flush=True)
                    await asyncio.Event().wait()
            stats = pool.stats
    out.close()
    console.print(view.final_table(provisional=provisional, profile=config.profile.name))
    console.print(
        f"{len(timeline)} events in {time.monotonic() - started:.1f}s; engine searches {stats.searches}, cache hits "
        f"{stats.cache_hits}, joined {stats.joined}; rejected {len(rejections)}" + (f"; output in {args.out}" if args.out else "")
    )
    return EXIT_REJECTED if rejections else EXIT_OK


async def _stream(args: argparse.Namespace) -> int:
    """JSON-lines events on stdin, published messages as JSON lines on stdout (or --out), one event at a time: each
    line is processed as it arrives and its output flushed, so a live feed gets its ratings live. Any bytes are
    accepted: what is not a valid event (not UTF-8, not JSON, too long, too deep) becomes a dead letter."""
    from schemas.messages import MAX_EVENT_BYTES

    from .embedded import EmbeddedRuntime
    from .ingest import read_line

    config = build_config(args)
    out = JsonLines(args.out, stream=sys.stdout, flush=True)
    rejected = 0

    def on_reject(d: DeadLetter) -> None:
        nonlocal rejected
        rejected += 1
        print_rejection(d)

    stdin = sys.stdin.buffer
    async with EnginePool(args.engine, size=args.engines, cache_path=args.cache, timeout=config.timeout) as pool:
        async with EmbeddedRuntime(pool, config, out, on_reject, max_games=args.max_games, max_players=args.max_players) as rt:
            if args.metrics_port:
                rt.metrics.serve(args.metrics_port, args.metrics_host)
            loop = asyncio.get_running_loop()
            n = 0
            while (line := await loop.run_in_executor(None, read_line, stdin, MAX_EVENT_BYTES)) is not None:
                n += 1
                if line.strip():
                    rt.submit_raw(line, source=f"stdin:{n}")
            await rt.drain()
    out.close()
    return EXIT_REJECTED if rejected else EXIT_OK


# -- pool -------------------------------------------------------------------------------------------------
async def _review(args: argparse.Namespace) -> int:
    from .ingest import read_pgn_games
    from .review import REVIEW_PROFILE, review_player

    config = build_config(args)
    calibration = ReviewCalibration.load(config.profile.name)
    if config.model is None or calibration is None:
        raise CalibrationError(f"profile {config.profile.name} has no move model or no review calibration "
                               "(bench/fit_review.py fits one); the review needs both")
    read = [g for p in args.pgn for g in read_pgn_games(p)]
    games = [g for g in read if args.event is None or g.event == args.event]
    if not games and read:
        events = sorted({g.event for g in read})
        print(f"kibitz: no game of event {args.event!r} in these games; their events: "
              + ", ".join(map(repr, events[:10])) + (f" and {len(events) - 10} more" if len(events) > 10 else ""),
              file=sys.stderr)
        return EXIT_USAGE
    for e in (e for g in games for e in g.errors):
        print_rejection(e)
    players = {pl.id: pl.name for g in games for pl in (g.white, g.black)}
    ids = sorted(pid for pid, name in players.items() if args.player in (pid, name))
    if len(ids) != 1:
        near = sorted(f"{name!r} (id {pid})" for pid, name in players.items() if args.player.casefold() in name.casefold())
        hint = (f" ({', '.join(ids)}); pass one id" if ids else
                f"; did you mean {', '.join(near[:5])}{' ...' if len(near) > 5 else ''}?" if near else "")
        print(f"kibitz: {'no player' if not ids else 'several players'} named {args.player!r} in these games{hint}",
              file=sys.stderr)
        return EXIT_USAGE
    async with EnginePool(args.engine, size=args.engines, cache_path=args.cache, timeout=config.timeout) as pool:
        review = await review_player(pool, config, config.model, games, ids[0], calibration)
        engine = pool.engine_name
    provisional = config.provisional_for(engine)  # as FairPlayAlert.provisional
    if args.json:
        print(json.dumps({**review.to_dict(), "provisional": provisional}))
    else:
        s = review.stats
        print(f"review of {ids[0]}: {len(review.games)} games, {s.n} counted moves against the {REVIEW_PROFILE} profile's "
              f"first choice ({review.limits}): played it {s.matches} times, expected {s.expected_matches:.1f}, "
              f"z {review.z:+.2f} -> {review.tier(config.screen_z, config.review_z) or 'no tier'}")
        if provisional:
            print(f"PROVISIONAL: the expectation's calibrations were fitted on {config.calibrated_engine()} at the "
                  f"profile's limits; searched by {engine}{' at other limits' if config.provisional else ''}")
    return EXIT_OK if not any(g.errors for g in games) else EXIT_REJECTED


def _pool(args: argparse.Namespace) -> int:
    from collections import Counter

    from analyzers.pool import fit_pool, purge_perfect

    from .ingest import read_pgn_games
    from .pipeline import SELF_PLAY

    def label(p) -> str:  # noqa: ANN001 - one pool entry per player id, shown by name
        return p.name if p.id == p.name else f"{p.name} ({p.id})"

    games: list = []
    selfplay: Counter[str] = Counter()
    for p in args.pgn:
        for g in read_pgn_games(p):
            if g.white_score is None:
                continue
            if g.white.id == g.black.id:  # as the service refuses it: it would only move White's advantage
                selfplay[label(g.white)] += 1
                continue
            games.append((label(g.white), label(g.black), g.white_score))
    for player, n in selfplay.items():
        print(f"kibitz pool: {n} game{'s' if n > 1 else ''} of {player} against {player} left out: {SELF_PLAY}", file=sys.stderr)
    anchors = dict(args.anchor or [])  # each checked by anchor_spec
    wa, dr = args.white_advantage, args.draw_rate  # "auto" or a number, checked by auto_or
    rated, purged = purge_perfect(games, anchored=list(anchors))
    for name, (pts, n) in purged.items():  # reported as such (docs/models.md s. 5), the rest of the pool is rated
        print(f"kibitz pool: not rated, a perfect score has no maximum-likelihood rating: {name} {pts:g}/{n}",
              file=sys.stderr)
    if games and not rated:
        print("kibitz pool: cannot rate this pool: every player has a perfect score once the others are set aside",
              file=sys.stderr)
        return EXIT_FATAL
    try:
        res = fit_pool(rated, average=args.average, anchors=anchors or None, white_advantage=wa, draw_rate=dr,
                       simulations=args.simulations, seed=args.seed)
    except RatingError as e:  # a pool maximum likelihood cannot rate, or a fit that did not converge
        print(f"kibitz pool: cannot rate this pool: {e}", file=sys.stderr)
        return EXIT_FATAL
    # an anchored player's rating is given, not estimated: it has no error (the simulations pin it, so theirs is 0)
    rows = [
        {"rank": i, "player": p, "rating": round(res.ratings[p], 1),
         "error": round(res.errors[p], 1) if res.errors and p not in anchors else None, "anchored": p in anchors,
         "points": res.points[p], "games": res.games[p], "score": round(100 * res.points[p] / res.games[p], 1)}
        for i, p in enumerate(res.ranking(), 1)
    ]
    if args.json:
        json.dump({"white_advantage": res.white_advantage, "draw_rate": res.draw_rate, "simulations": res.simulations,
                   "players": rows, "unrated": [{"player": p, "points": pts, "games": n, "why": "perfect score"}
                                                for p, (pts, n) in purged.items()]}, sys.stdout, indent=2)
        print()
        return EXIT_OK
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    print(f"{'#':>3} {'PLAYER':<24} {'RATING':>7} {'ERROR':>6} {'POINTS':>7} {'PLAYED':>6} {'(%)':>6}")
    for r in rows:
        err = "anchor" if r["anchored"] else f"{r['error']:.0f}" if r["error"] is not None else "-"
        print(f"{r['rank']:>3} {r['player']:<24} {r['rating']:>7.1f} {err:>6} {r['points']:>7.1f} {r['games']:>6} {r['score']:>6.1f}")
    print(f"\nWhite advantage = {res.white_advantage:.1f}   Draw rate (equal opponents) = {100 * res.draw_rate:.1f} %")
    if res.simulations:
        print(f"Errors: 95 % from {res.simulations} simulated replays of every game")
    return EXIT_OK


# -- kafka ------------------------------------------------------------------------------------------------
def kafka_settings(args: argparse.Namespace):
    from .kafka_config import KafkaSettings, Topics

    return KafkaSettings.from_env(broker=args.broker, app_id=getattr(args, "app_id", None),
                                  partitions=getattr(args, "partitions", None),
                                  replication_factor=getattr(args, "replication_factor", None),
                                  topics=Topics(prefix=args.topic_prefix))


def _worker(args: argparse.Namespace) -> int:
    import socket

    from .kafka_eos import check_runtime, ensure_topics
    from .state_store import resolve_store

    settings = kafka_settings(args)
    config = build_config(args)
    if config.review is not None and args.runtime != "transactional":
        print("kibitz: --review needs the transactional runtime (its review stage)", file=sys.stderr)
        return EXIT_USAGE
    if args.idle_game_seconds is not None and args.runtime != "transactional":
        print("kibitz: --idle-game-seconds needs the transactional runtime (its analyse stage sweeps the games)",
              file=sys.stderr)
        return EXIT_USAGE
    if args.go:
        if args.runtime != "transactional":
            print("kibitz: --go needs the transactional runtime", file=sys.stderr)
            return EXIT_USAGE
        cal, limits = go_setup(args)
        config = replace(config, go_calibration=cal, go_limits=limits)
    stages: list[str] = []
    if args.runtime == "transactional":
        from .kafka_config import running_stages

        try:  # before anything is made on disk
            stages = running_stages([x.strip() for x in args.stages.split(",") if x.strip()], config.review is not None)
        except ValueError as e:
            print(f"kibitz: --stages {args.stages!r}: {e}", file=sys.stderr)
            return EXIT_USAGE
    args.store = resolve_store(args.store)
    args.instance_id = args.instance_id or os.environ.get("KIBITZ_INSTANCE_ID") or socket.gethostname()
    # one directory per worker (two workers of one app on one host must not share a RocksDB), for either runtime
    worker_dir = args.data_dir / settings.app_id.strip(".") / args.instance_id
    if args.store == "rocksdb":
        try:  # now, not once the broker answers and the first partition is assigned
            worker_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StateStoreError(f"--data-dir {args.data_dir}: the worker's state directory {worker_dir} cannot be "
                                  f"made: {e.strerror or e}") from None
    print(f"kibitz worker ({args.runtime}): broker {settings.broker}, app {settings.app_id}, topics {settings.topics.moves} -> "
          f"{settings.topics.perceived}, profile {config.profile.name}, {args.engines} engines, {args.store} store"
          + (f" in {worker_dir}" if args.store == "rocksdb" else ""), file=sys.stderr, flush=True)
    if args.runtime == "transactional":
        return _transactional_worker(args, settings, config, stages, worker_dir if args.store == "rocksdb" else None)
    from faust.worker import Worker

    from .kafka_app import create_app

    asyncio.run(wait_for_broker(settings))
    asyncio.run(ensure_topics(settings))
    asyncio.run(check_runtime(settings, "faust"))
    app, metrics = create_app(settings, config, engines=args.engines, engine=args.engine, cache_path=args.cache, store=args.store,
                     guarantee=args.guarantee, data_dir=worker_dir)
    if args.metrics_port:
        metrics.serve(args.metrics_port, args.metrics_host)
    worker = Worker(app, loglevel=args.log_level.lower(), quiet=True, redirect_stdouts=False)
    worker.execute_from_commandline()
    return EXIT_OK


def _transactional_worker(args: argparse.Namespace, settings, config, stages: list[str],  # noqa: ANN001
                          store_dir: Path | None) -> int:
    import signal

    from .kafka_eos import run_worker

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await run_worker(settings, config, instance_id=args.instance_id, engines=args.engines, engine=args.engine,
                             go_engines=args.go_engines if args.go else 0, go_engine=args.go_engine,
                             cache_path=args.cache, metrics_port=args.metrics_port, metrics_host=args.metrics_host,
                             transaction_timeout_ms=int(args.transaction_timeout * 1000),
                             stages=stages, store_dir=store_dir)

    asyncio.run(main())
    return EXIT_OK


async def _produce(args: argparse.Namespace) -> int:
    """``kibitz produce``: the files' games into the input topic. At ``--max-speed`` one game at a time, file after file
    (memory: one file's text and one game, so a backfill of any size fits); paced, every chess game's events merged
    on one clock (:func:`~streamer.ingest.replay_timeline`), which needs all of them first. A refused game's dead
    letter is sent where its game comes."""
    from .goreplay import game_events
    from .ingest import paced, read_pgn_games, replay_timeline
    from .input_producer import InputProducer
    from .kafka_eos import ensure_topics
    from .sgf import read_sgf_games

    settings = kafka_settings(args)
    sgf_files = {p: is_sgf(p) for p in args.pgn}
    pgn, sgf = [p for p in args.pgn if not sgf_files[p]], [p for p in args.pgn if sgf_files[p]]
    await wait_for_broker(settings)
    # as kibitz configures them, not by a first send on a broker that creates topics
    await ensure_topics(settings, settings.topics.written_by_producers())
    sent = chess_games = go_games = refused = 0

    async with InputProducer(settings) as producer:  # leaving it waits until the broker has every record

        async def send(ev: BaseModel) -> None:
            nonlocal sent
            for topic, key, value in input_records(settings.topics, ev):
                await producer.send(topic, key, value)
            sent += 1

        async def refuse(error: InputError, source: str) -> None:
            nonlocal refused
            topic, key, d = rejection_record(settings.topics, error, source=source)
            print_rejection(d)
            await producer.send(topic, key, d.model_dump_json().encode())
            refused += 1

        if args.max_speed:
            for p in pgn:
                for g in read_pgn_games(p):
                    chess_games += 1
                    for e in g.errors:
                        await refuse(e, p.name)
                    for ev in g.events():
                        await send(ev)
        elif pgn:
            games = [(g, p.name) for p in pgn for g in read_pgn_games(p)]
            chess_games = len(games)
            for g, name in games:
                for e in g.errors:
                    await refuse(e, name)
            async for te in paced(replay_timeline((g for g, _ in games), speed=args.speed)):
                await send(te.event)
        for p in sgf:  # Go games: no clocks to pace by, sent as fast as the broker takes them
            for go in read_sgf_games(p):
                evs, error = game_events(go)
                go_games += any(isinstance(ev, GameStarted) for ev in evs)
                if error is not None:
                    await refuse(error, go.source)
                for ev in evs:
                    await send(ev)
    print(f"produced {sent} events of {chess_games} chess games and {go_games} Go games to {settings.topics.moves}",
          file=sys.stderr)
    return EXIT_REJECTED if refused else EXIT_OK


async def _follow(args: argparse.Namespace) -> int:
    from .broadcast import follow

    config = build_config(args)
    out = JsonLines(args.out, flush=True)
    rejected = 0

    def on_reject(d: DeadLetter) -> None:
        nonlocal rejected
        rejected += 1
        print_rejection(d)

    try:
        await follow(args, config, out, on_reject)
    finally:
        out.close()
    return EXIT_REJECTED if rejected else EXIT_OK


async def _serve(args: argparse.Namespace) -> int:
    from .broadcast import serve

    await serve(args)
    return EXIT_OK


async def _tail(args: argparse.Namespace) -> int:
    from aiokafka import AIOKafkaConsumer

    settings = kafka_settings(args)
    await wait_for_broker(settings)
    topic = args.topic if args.topic.startswith(settings.topics.prefix + "kibitz.") else settings.topics.name(args.topic)
    if not await wait_for_topics(settings, [topic], who="tail", timeout=args.idle):
        return EXIT_OK  # --idle passed without the topic, so without a record
    consumer = AIOKafkaConsumer(topic, group_id=None, isolation_level="read_committed",
                                auto_offset_reset="earliest" if args.from_beginning else "latest", **settings.aiokafka_kwargs())
    await consumer.start()
    n = 0
    try:
        last = time.monotonic()
        while args.max is None or n < args.max:
            with denied_as(settings, f"reading {topic} (READ)"):
                batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                for r in records:
                    # a record without a value (a tombstone) is printed as JSON's null, so every line stays a JSON value
                    print("null" if r.value is None else r.value.decode("utf-8", "replace"), flush=True)
                    n += 1
                    last = time.monotonic()
            if args.idle and time.monotonic() - last > args.idle:
                break
    finally:
        await consumer.stop()
    return EXIT_OK


async def _redrive(args: argparse.Namespace) -> int:
    reports = await redrive(kafka_settings(args), args.reason, dry_run=args.dry_run)
    for r in reports:
        print(json.dumps({"dry_run": args.dry_run} | r.to_dict()), flush=True)
    # a chosen dead letter left as it is (the report says why) is a rejection, as in the other commands
    return EXIT_REJECTED if any(r.skipped for r in reports) else EXIT_OK


def _schemas(args: argparse.Namespace) -> int:
    for p in export_json_schemas(args.directory):
        print(p)
    return EXIT_OK


# -- parser -----------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="kibitz",
        description="Rate chess players live from the quality of their moves (engine analysis, perceived Elo with "
                    "intervals, Glicko-2 on results, fair-play alerts).",
        epilog="Exit codes: 0 ok, 3 some input rejected (rest processed), 2 usage, 1 fatal.",
    )
    ap.add_argument("--log-level", default="WARNING", type=str.upper, choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
                    help="structured JSON logs on stderr at this level (default %(default)s)")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser("replay", help="replay PGN (chess) or SGF (Go) games, live", description=
                       "Replay PGN games at accelerated live speed through the embedded runtime (no broker): a live "
                       "table per board, then perceived rating vs Elo per player. Without PGN files: the demo, round 1 "
                       "of the London Chess Classic 2011. SGF files (Go) are rated through the Go calibration's engine "
                       "(KataGo by default, GNU Go with --go-profile go-fox-gnugo-l1): a perceived rank per move for "
                       "both players, Glicko-2 at each game's end.")
    r.add_argument("pgn", nargs="*", type=game_file, help="PGN or SGF files (default: the London 2011 round-1 demo)")
    r.add_argument("--demo", action="store_true", help="replay the shipped demo (the default when no PGN is given)")
    sp = r.add_mutually_exclusive_group()
    sp.add_argument("--speed", type=positive(float), default=60.0, help="time compression: 60 plays a minute of thinking in a second (default %(default)s)")
    sp.add_argument("--max-speed", action="store_true", help="as fast as the engines allow")
    r.add_argument("--out", type=Path, help="write every PerceivedRating, RatingUpdate and FairPlayAlert as JSON lines")
    r.add_argument("--no-ui", action="store_true", help="no live view (the final table is still printed)")
    r.add_argument("--serve", metavar="HOST:PORT", type=host_port, default=None, help="serve the overlay and API (e.g. 127.0.0.1:8080) "
                   "during the replay and, after it, until interrupted")
    add_engine_options(r)
    add_review_option(r)
    go = add_go_options(r, "Go (SGF files)")
    go.add_argument("--quiet", action="store_true", help="Go: print only game ends and rejections, not every move")
    r.set_defaults(func=lambda a: asyncio.run(_replay(a)))

    s = sub.add_parser("stream", help="JSON-lines events on stdin, published messages on stdout", description=
                       "Read GameStarted / MoveEvent / GameEnded events, one JSON object per line, from stdin; write "
                       "PerceivedRating, RatingUpdate and FairPlayAlert as JSON lines to stdout (or --out).")
    s.add_argument("--out", type=Path, help="write here instead of stdout")
    s.add_argument("--max-games", type=positive(int), default=MAX_GAMES, help="games kept in memory; the least recently "
                   "active beyond this are evicted, counted in kibitz_evicted_total (default %(default)s)")
    s.add_argument("--max-players", type=positive(int), default=MAX_PLAYERS, help="players kept in memory, likewise "
                   "(default %(default)s; with the games' default about 200 MB of state)")
    s.add_argument("--idle-game-seconds", type=positive(float), default=None, help="evict an open game with no event for this "
                   "long (default 6 h)")
    add_engine_options(s)
    add_review_option(s)
    s.set_defaults(func=lambda a: asyncio.run(_stream(a)))

    p = sub.add_parser("pool", help="Ordo-style ratings of a pool of players from game results", description=
                       "Fit maximum-likelihood ratings to the results in PGN files (Ordo's logistic model).")
    p.add_argument("pgn", nargs="+", type=pgn_file, help="PGN files with the games' results")
    p.add_argument("--average", type=rating_value, default=2300.0, help="mean rating of the pool (default %(default)s)")
    p.add_argument("--anchor", action="append", type=anchor_spec, metavar="NAME=RATING", help="pin a player's rating (repeatable)")
    p.add_argument("--white-advantage", type=auto_or(-1000, 1000, "rating points"), default=0.0, metavar="auto|X",
                   help="White's advantage in rating points, or auto")
    p.add_argument("--draw-rate", type=auto_or(0, 1, "a rate"), default=0.5, metavar="auto|X",
                   help="draw rate between equal players (0 to 1), or auto")
    p.add_argument("--simulations", type=count, default=0, help="simulated replays for error bars and CFS")
    p.add_argument("--seed", type=int, default=0)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="JSON on stdout instead of a table")
    fmt.add_argument("--csv", type=Path, help="also write the table as CSV")
    p.set_defaults(func=_pool)

    rv = sub.add_parser("review", help="review one player's games: their moves against a deeper search", description=
                        "The second stage after a screening alert (docs/models.md s. 7): assess the player's games as "
                        "the service does, search every position whose move counts for fair play again at the deep "
                        "profile (depth 12), and test how often the player chose its first choice against the move "
                        "model's expectation for their rating (calibrated on rated-dev by bench/fit_review.py).")
    rv.add_argument("pgn", nargs="+", type=pgn_file, help="PGN files with the player's games")
    rv.add_argument("--player", required=True, help="the player's name as in the PGN headers, or their id")
    rv.add_argument("--event", default=None, help="only the games of this event (the Event header)")
    rv.add_argument("--json", action="store_true", help="the evidence as one JSON object")
    add_engine_options(rv)
    rv.set_defaults(func=lambda a: asyncio.run(_review(a)))

    def kafka_options(p: argparse.ArgumentParser) -> None:
        g = p.add_argument_group("kafka")
        g.add_argument("--broker", default=None, help="bootstrap servers host:port[,host:port...] (default $KIBITZ_KAFKA or 127.0.0.1:9092); "
                       "security settings come from KIBITZ_KAFKA_SECURITY_PROTOCOL, _SASL_MECHANISM, _SASL_USERNAME, "
                       "_SASL_PASSWORD, _SSL_CAFILE")
        g.add_argument("--topic-prefix", type=topic_prefix, default="", help="prefix for every topic name (default none: kibitz.moves, ...)")

    w = sub.add_parser("worker", help="run a streaming worker on Kafka", description=
                       "Consume game events from kibitz.moves, publish assessments, perceived ratings, Glicko-2 updates, "
                       "fair-play alerts and dead letters, each record's effects exactly once (Kafka transactions). "
                       "Scale out by starting more workers (up to the partition count), each with its own --instance-id.")
    kafka_options(w)
    w.add_argument("--app-id", default=None, help="the deployment's id: its consumer groups and transactional ids, one "
                   "per set of topics (default kibitz, or $KIBITZ_KAFKA_APP_ID)")
    w.add_argument("--partitions", type=positive(int), default=None, help="partitions for topics this worker creates (default 4)")
    w.add_argument("--replication-factor", type=positive(int), default=None, help="replicas of the topics this worker creates "
                   "(default 1, or $KIBITZ_KAFKA_REPLICATION_FACTOR; 3 on a production cluster)")
    w.add_argument("--runtime", choices=["transactional", "faust"], default="transactional",
                   help="transactional: aiokafka transactions, exactly once (default); faust: the faust-streaming app")
    w.add_argument("--instance-id", default=None, help="stable id of this worker, unique among workers (transactional "
                   "runtime; default $KIBITZ_INSTANCE_ID or the host name): names its local state directory and client id")
    w.add_argument("--stages", default=",".join(STAGES), help="which stages this process runs (transactional runtime): "
                   "all (default; review only with --review), or some, with other processes running the others, each on "
                   "its own core")
    w.add_argument("--transaction-timeout", type=positive(float), default=30.0, help="seconds before the broker aborts the open "
                   "transaction of a worker that died and whose partitions no other worker took over (readers of what it "
                   "wrote wait that long); default %(default)s")
    w.add_argument("--store", choices=["auto", "memory", "rocksdb"], default="auto", help="where game and player state "
                   "lives: rocksdb (local RocksDB under --data-dir, caught up from the changelogs on assignment; needs "
                   "pip install 'kibitz[rocksdb]') or memory (rebuilt from the changelogs whenever partitions are "
                   "assigned); auto (the default): rocksdb if rocksdict is installed, else memory")
    w.add_argument("--data-dir", type=Path, default=Path(os.environ.get("KIBITZ_DATA_DIR", "kibitz-data")),
                   help="directory of the rocksdb store (default $KIBITZ_DATA_DIR or ./kibitz-data)")
    w.add_argument("--guarantee", choices=["at_least_once", "exactly_once"], default="at_least_once",
                   help="faust processing guarantee (default %(default)s; see README: exactly_once lost data in our tests)")
    w.add_argument("--idle-game-seconds", type=positive(float), default=None, help="evict an open game with no event for "
                   "this long (transactional runtime; default 6 h); what it still waited with (moves held for plies that "
                   "never came, an end waiting for them) is dead-lettered, out_of_order_ply")
    add_engine_options(w)
    add_review_option(w)
    go = add_go_options(w, "Go (transactional runtime)")
    go.add_argument("--go", action="store_true", help="rate Go games too (events with game \"go\"): a pool of the Go "
                    "calibration's engine (KataGo or GNU Go) in the analyse stage and the calibration in the rate stage; "
                    "without it they are dead-lettered")
    go.add_argument("--go-engines", type=positive(int), default=1, help="Go engine processes with --go (default %(default)s; one "
                    "KataGo process already uses every core)")
    w.set_defaults(func=_worker)

    pr = sub.add_parser("produce", help="replay PGN games into the input topic", description=
                        "Send each game's GameStarted, moves and GameEnded to kibitz.moves (key = game_id), and a copy of "
                        "GameStarted/GameEnded to kibitz.games, at live speed or as fast as possible.")
    pr.add_argument("pgn", nargs="+", type=game_file, help="PGN files, or SGF files (Go games, for a worker started with --go)")
    kafka_options(pr)
    sp2 = pr.add_mutually_exclusive_group()
    sp2.add_argument("--speed", type=positive(float), default=60.0, help="time compression (default %(default)s)")
    sp2.add_argument("--max-speed", action="store_true", help="as fast as the broker takes them, one game at a time "
                     "(a backfill of any size; paced, every game is read first)")
    pr.set_defaults(func=lambda a: asyncio.run(_produce(a)))

    fo = sub.add_parser("follow", help="follow live PGN feeds (files or URLs) and rate their games", description=
                        "Poll PGN feeds (a file a board relay rewrites, or an http(s) URL a broadcast serves) and rate "
                        "each new ply as it appears: in the embedded runtime, or with --produce on Kafka. Corrected games "
                        "restart under a new id; half-written files and failing URLs are retried.")
    fo.add_argument("sources", nargs="+", metavar="SOURCE", type=feed_source,
                    help="PGN file (polled until it exists), http(s) URL (polled), or stream+http(s) URL (a stream)")
    fo.add_argument("--interval", type=positive(float), default=DEFAULT_INTERVAL, help="seconds between polls (default %(default)s)")
    fo.add_argument("--serve", metavar="HOST:PORT", type=host_port, default=None, help="serve the overlay and API (e.g. 127.0.0.1:8080)")
    fo.add_argument("--produce", action="store_true", help="send the events to the Kafka input topic instead of rating here")
    fo.add_argument("--out", type=Path, help="write every PerceivedRating, RatingUpdate and FairPlayAlert as JSON lines")
    fo.add_argument("--until-ended", action="store_true", help="stop once every game seen has a result")
    fo.add_argument("--state", type=Path, default=None, help="with --produce: a file that keeps what was sent (saved once "
                    "the broker has it), so that a follow started again sends only what is new")
    fo.add_argument("--linger", type=float, default=0.0, help="with --until-ended and --serve: keep serving this many seconds")
    add_engine_options(fo)
    add_review_option(fo)
    kafka_options(fo)
    fo.set_defaults(func=lambda a: asyncio.run(_follow(a)))

    sv = sub.add_parser("serve", help="serve the overlay and API from the Kafka output topics", description=
                        "Read the games, assessments and rating topics and serve the overlay and API (read-only).")
    sv.add_argument("--listen", metavar="HOST:PORT", type=host_port, default="127.0.0.1:8080", help="address to serve on (default %(default)s)")
    kafka_options(sv)
    sv.set_defaults(func=lambda a: asyncio.run(_serve(a)))

    tl = sub.add_parser("tail", help="print a topic as JSON lines", description=
                        "Print the committed records of a topic, one JSON value per line. TOPIC may be short (ratings.perceived).")
    tl.add_argument("topic")
    kafka_options(tl)
    tl.add_argument("--from-beginning", action="store_true", help="start at the oldest record, not the newest")
    tl.add_argument("--max", type=positive(int), default=None, help="stop after this many records")
    tl.add_argument("--idle", type=positive(float), default=None, help="stop after this many seconds without a record")
    tl.set_defaults(func=lambda a: asyncio.run(_tail(a)))

    rd = sub.add_parser("redrive", help="send dead letters' records back to their topics, once the cause is mended",
                        description="For each --reason, in the order given: send the record each dead letter of that "
                        "reason holds back to the topic the worker read it from (under its key), for the dead letters "
                        "written since that reason's last run (a consumer group APP.redrive.REASON; the records sent and "
                        "its move are one Kafka transaction, so each is sent once). Prints a JSON line per reason: "
                        "dead letters read, sent by topic, and the ones left, by why. Re-drivable: "
                        + "; ".join(f"{k}: {v}" for k, v in REDRIVABLE.items()) + ".")
    rd.add_argument("--reason", action="append", required=True, type=reason_option, metavar="REASON",
                    help="a dead-letter reason to re-drive (repeatable; e.g. --reason poison)")
    rd.add_argument("--dry-run", action="store_true", help="count what would be sent; send nothing, move no cursor")
    rd.add_argument("--app-id", default=None, help="the deployment's id, which names the cursors (default kibitz, or "
                    "$KIBITZ_KAFKA_APP_ID)")
    kafka_options(rd)
    rd.set_defaults(func=lambda a: asyncio.run(_redrive(a)))

    sc = sub.add_parser("schemas", help="message schemas", description="Work with the wire schemas.")
    scs = sc.add_subparsers(dest="action", required=True, metavar="ACTION")
    ex = scs.add_parser("export", help="write the JSON Schema of every message", description="Write <Message>.v<N>.schema.json files.")
    ex.add_argument("directory", type=Path)
    ex.set_defaults(func=_schemas)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # a followed feed URL's password or token is cut out of every log line, as the broker's password is
    setup_logging(args.log_level, more=[x for src in getattr(args, "sources", None) or () for x in url_secrets(src)])
    try:
        return args.func(args)
    except (EngineError, CalibrationError, StateStoreError, DeliveryFailed, TopicsNotCreated) as e:
        print(f"kibitz: {e}", file=sys.stderr)
        return EXIT_FATAL
    except ConfigurationError as e:
        print(f"kibitz: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # the reader of stdout went away (`kibitz stream | head -1`): stop quietly, as filters do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the interpreter's last flush does not fail once more
        return EXIT_FATAL
    except OSError as e:  # the machine's, not kibitz's: a file that cannot be written, a port in use...
        if args.log_level.upper() == "DEBUG":
            raise
        print(f"kibitz: {e} (--log-level DEBUG shows where)", file=sys.stderr)
        return EXIT_FATAL
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
