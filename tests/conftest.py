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
