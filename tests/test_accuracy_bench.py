"""Helpers of the benches: the interval for a mean over clustered rows (bench/common.py; the accuracy bench's bias of a
group, whose rows share their event's error, so the interval counts events, not rows) and the fair-play bench's draws
of assisted moves."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from common import clustered_mean  # noqa: E402  (bench/ is scripts, not a package)


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


def test_assistance_draws_are_reproducible_independent_and_at_their_share():
    """bench/fairplay_calibration.py --assist-draws: each draw of which moves are assisted is seeded (the first is the
    single-draw run's), draws differ from one another, and each replaces about the share asked for."""
    from fairplay_calibration import draw_seed, event_moves

    from schemas import Candidate, MoveAssessment, PlayerInfo
    from streamer.ingest import PgnGame

    def move(ply: int, uci: str) -> MoveAssessment:
        return MoveAssessment(game_id="g", ply=ply, player_id="p", color="white", uci=uci, eval_before=0, eval_after=0,
                              gain=0, candidates=[Candidate(uci="e2e4", cp=0)], counted=True, engine="sf", limits="d8")

    game = PgnGame("g", PlayerInfo(id="p"), PlayerInfo(id="q"), "open", "1-0", [], [])
    honest = {"g": [move(2 * i, "a2a3") for i in range(400)]}
    assisted = {("g", "white"): {2 * i: move(2 * i, "e2e4") for i in range(400)}}

    def replaced(seed: int | str) -> set[int]:
        moves = event_moves("p", [game], honest, assisted, 0.5, seed)
        assert moves is not None and len(moves) == 400
        return {a.ply for a in moves if a.uci == "e2e4"}

    first, again, second, third = replaced(0), replaced(draw_seed(0, 0)), replaced(draw_seed(0, 1)), replaced(draw_seed(0, 2))
    assert first == again
    assert len({frozenset(first), frozenset(second), frozenset(third)}) == 3
    assert all(150 <= len(s) <= 250 for s in (first, second, third))
