"""The fitted files shipped per engine profile: ``<profile>.json`` (the calibration of c and gains to Elo),
``<profile>.model.json`` (the move model), ``<profile>.combination.json`` (the combination on top of it),
``<profile>.eventpool.json`` (event pooling, with its interval scale), ``<profile>.review.json`` (the fair-play review's
calibration). Each records the command that fitted it."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any


def read_fitted(name: str, path: str | Path | None = None) -> dict[str, Any] | None:
    """The JSON of a shipped file ``name`` (e.g. "fast.model.json"), or None when none is shipped; a file given by
    ``path`` is read instead and must exist."""
    if path is not None:
        return json.loads(Path(path).read_text())
    f = resources.files(__name__).joinpath(name)
    return json.loads(f.read_text()) if f.is_file() else None
