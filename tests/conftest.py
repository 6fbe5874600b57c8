"""Shared fixtures. Engine tests use the real Stockfish; Kafka tests start the real broker (see test_kafka_*)."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def stockfish_path() -> str:
    path = os.environ.get("KIBITZ_ENGINE") or shutil.which("stockfish") or "/usr/games/stockfish"
    if not Path(path).exists():
        raise RuntimeError("Stockfish not found: `make setup` installs it (apt-get install stockfish)")
    return path


#: The folder of a parallel run's lock files (:func:`machine_share`): made by the pytest-xdist controller before it
#: starts its workers, which inherit it through the environment, and removed when the run ends.
LOCKS_ENV = "KIBITZ_TEST_LOCKS"
_LOCKS = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "solo: its assertions time the service (a latency bound, a fault that must fall "
                            "mid-stream), so under pytest-xdist it runs while no other test does (conftest.py)")
    if not hasattr(config, "workerinput") and config.getoption("numprocesses", None):
        config.stash[_LOCKS] = os.environ[LOCKS_ENV] = tempfile.mkdtemp(prefix="kibitz-tests-")


def pytest_unconfigure(config: pytest.Config) -> None:
    locks = config.stash.get(_LOCKS, None)
    if locks is not None:
        shutil.rmtree(locks, ignore_errors=True)
        os.environ.pop(LOCKS_ENV, None)


@contextmanager
def _file_lock(path: Path, mode: int) -> Iterator[None]:
    with open(path, "a") as f:
        fcntl.flock(f, mode)  # released when the file closes
        yield


@contextmanager
def machine_share(base: Path, solo: bool) -> Iterator[None]:
    """One test's share of the machine among parallel test processes that share the lock files ``base``.lock and
    ``base``.turnstile: a solo test holds the lock exclusively, every other test shares it. The turnstile gives a
    waiting solo test precedence: while it waits, the other processes start no new test (flock alone would let
    shared holders take turns ahead of it forever)."""
    with ExitStack() as turnstile:
        turnstile.enter_context(_file_lock(base.with_suffix(".turnstile"), fcntl.LOCK_EX))
        with _file_lock(base.with_suffix(".lock"), fcntl.LOCK_EX if solo else fcntl.LOCK_SH):
            if not solo:
                turnstile.close()  # a sharer is in: let the next test through
            yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Under pytest-xdist, each test (its setup, which may start a broker, its call and its teardown) runs within its
    :func:`machine_share`; in a plain run tests run one at a time anyway."""
    run = getattr(item.config, "workerinput", {}).get("testrunuid")
    if run is None:
        return (yield)
    # the controller's folder; a worker started without it (another controller) shares the run's files in /tmp
    base = Path(os.environ[LOCKS_ENV]) / "share" if LOCKS_ENV in os.environ else Path(tempfile.gettempdir()) / f"kibitz-tests-{run}"
    with machine_share(base, item.get_closest_marker("solo") is not None):
        return (yield)


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """The file ``name`` made by ``make(path)`` once per test run, however many pytest-xdist workers ask for it: the
    first takes a lock in the temporary directory they share and makes it, the others wait for the lock and read the
    same file. A marker written after ``make`` returns tells a finished file from one a failed ``make`` left."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # each worker's base directory sits in the run's one
    path, done = root / name, root / f"{name}.done"
    with _file_lock(root / f"{name}.lock", fcntl.LOCK_EX):
        if not done.exists():
            make(path)
            done.touch()
    return path


@pytest.fixture(scope="session")
def stockfish() -> str:
    return stockfish_path()


@pytest.fixture(scope="session")
def london() -> Path:
    """The London Chess Classic 2011 (36 games, Ferreira 2012's test event), shipped as a fixture."""
    return FIXTURES / "london_chess_classic_2011.pgn"


@pytest.fixture(scope="session")
def london_rounds_1_to_4(london: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Rounds 1-4 of London 2011 (16 games, every one of the 9 players in 3 or 4 of them): the fault-injection
    streaming tests need a stream with several games per player, not the whole event."""
    import chess.pgn

    out = tmp_path_factory.mktemp("london") / "london_2011_rounds_1_to_4.pgn"
    with open(london) as f, open(out, "w") as w:
        while (game := chess.pgn.read_game(f)) is not None:
            if int(game.headers["Round"]) <= 4:
                print(game, file=w, end="\n\n")
    return out


BROADCAST = FIXTURES / "broadcast_game.pgn"  # a rated blitz game with [%clk] clocks (49 plies, 1-0)


def pgn_upto(plies: int, *, white: str | None = None, black: str | None = None, result: str | None = None,
             source: Path = BROADCAST) -> str:
    """The broadcast fixture as a live feed shows it after ``plies`` plies: the result is "*" until the last ply
    (or ``result``); ``white`` and ``black`` rename White and Black."""
    import chess.pgn

    with open(source) as f:
        full = chess.pgn.read_game(f)
    assert full is not None
    game = chess.pgn.Game()
    for k, v in full.headers.items():
        game.headers[k] = v
    if white is not None:
        game.headers["White"] = white
    if black is not None:
        game.headers["Black"] = black
    nodes = list(full.mainline())
    game.headers["Result"] = result or (full.headers["Result"] if plies >= len(nodes) else "*")
    node: chess.pgn.GameNode = game
    for n in nodes[:plies]:
        node = node.add_variation(n.move)
        node.comment = n.comment
    return str(game) + "\n\n"
