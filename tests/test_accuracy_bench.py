"""The accuracy bench's interval for a group's bias (bench/accuracy.py): its rows share their event's error, so the
interval counts events, not rows."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from accuracy import clustered_mean  # noqa: E402  (bench/ is scripts, not a package)


def draw(rng: np.random.Generator, events: int, rows: int, shared: float) -> tuple[np.ndarray, list[str]]:
    """Errors with mean 0: each event's rows share an effect of sd ``shared`` and add their own of sd 1."""
    x = np.concatenate([rng.normal(0, shared) + rng.normal(0, 1, rows) for _ in range(events)])
    return x, [f"e{i}" for i in range(events) for _ in range(rows)]


def test_the_bias_interval_covers_about_95_percent_when_events_share_their_error():
    rng = np.random.default_rng(3)
    covered, naive_covered = [], []
    for _ in range(2000):
        x, events = draw(rng, 8, 6, shared=1.0)
        mean, half, g = clustered_mean(x, events)
        assert g == 8 and mean == np.mean(x)
        covered.append(abs(mean) <= half)
        naive_covered.append(abs(mean) <= 1.96 * x.std(ddof=1) / np.sqrt(x.size))  # rows taken as independent
    assert 0.93 <= np.mean(covered) <= 0.97
    assert np.mean(naive_covered) < 0.85  # what counting rows would claim: far too narrow


def test_one_event_gives_no_interval():
    mean, half, g = clustered_mean(np.array([10.0, 20.0, 30.0]), ["a", "a", "a"])
    assert (mean, g) == (20.0, 1) and np.isnan(half)
