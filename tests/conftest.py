"""Shared fixtures. Engine tests use the real Stockfish; Kafka tests start the real broker (see test_kafka_*)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def stockfish_path() -> str:
    path = os.environ.get("KIBITZ_ENGINE") or shutil.which("stockfish") or "/usr/games/stockfish"
    if not Path(path).exists():
        raise RuntimeError("Stockfish not found: `make setup` installs it (apt-get install stockfish)")
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


def pgn_upto(plies: int, *, white: str | None = None, result: str | None = None, source: Path = BROADCAST) -> str:
    """The broadcast fixture as a live feed shows it after ``plies`` plies: the result is "*" until the last ply
    (or ``result``); ``white`` renames White."""
    import chess.pgn

    with open(source) as f:
        full = chess.pgn.read_game(f)
    assert full is not None
    game = chess.pgn.Game()
    for k, v in full.headers.items():
        game.headers[k] = v
    if white is not None:
        game.headers["White"] = white
    nodes = list(full.mainline())
    game.headers["Result"] = result or (full.headers["Result"] if plies >= len(nodes) else "*")
    node: chess.pgn.GameNode = game
    for n in nodes[:plies]:
        node = node.add_variation(n.move)
        node.comment = n.comment
    return str(game) + "\n\n"
