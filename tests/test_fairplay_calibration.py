import numpy as np
import pytest

from analyzers.calibration import Calibration, load_calibration
from analyzers.errors import CalibrationError
from analyzers.fairplay import FairPlayStats
from analyzers.posterior import SkillPosterior, move_probabilities


def moves(c, n, rng, stats, c_ref):
    for _ in range(n):
        vals = np.concatenate(([0.0], -np.sort(rng.exponential(0.5, 7))))
        stats.update(vals, int(rng.choice(8, p=move_probabilities(vals, c))), c_ref)


def test_clean_player_is_not_flagged_and_engine_like_player_is():
    rng = np.random.default_rng(2)
    clean = FairPlayStats()
    moves(1.0, 300, rng, clean, c_ref=1.0)
    assert abs(clean.z_match) < 4 and clean.flagged() is None
    cheat = FairPlayStats()
    moves(6.0, 300, rng, cheat, c_ref=1.0)
    assert cheat.z_match > 4.75 and cheat.flagged() == "match"
    assert FairPlayStats.from_dict(cheat.to_dict()) == cheat


def test_fairplay_z_is_calibrated_under_the_null():
    rng = np.random.default_rng(9)
    zs = []
    for _ in range(200):
        s = FairPlayStats()
        moves(1.2, 60, rng, s, c_ref=1.2)
        zs.append(s.z_match)
    assert np.mean(zs) == pytest.approx(0, abs=0.2) and np.std(zs) == pytest.approx(1, abs=0.2)


def test_calibration_maps_and_validates(tmp_path):
    cal = Calibration("x", "Stockfish", 2900, [(0.5, 1000), (1.5, 2500)], 300)
    assert cal.elo_from_c(1.0) == 1750 and cal.elo_from_c(2.0) == 3250
    assert cal.c_from_elo(1750) == pytest.approx(1.0)
    post = SkillPosterior()
    post.update([0, -0.5], 0)
    est = cal.from_posterior(post)
    assert est.low <= est.rating <= est.high
    cal.save(tmp_path / "c.json")
    assert Calibration.load(tmp_path / "c.json") == cal
    with pytest.raises(CalibrationError):
        Calibration("x", "e", 1, [(1, 2000), (0.5, 2100)], 1)
    with pytest.raises(CalibrationError):
        load_calibration("no-such-profile")


def test_error_model_intervals_narrow_with_moves_and_survive_a_round_trip():
    from analyzers.calibration import Calibration
    from analyzers.posterior import SkillPosterior

    cal = Calibration("t", "e", 2500.0, [(0.0, 1000.0), (2.0, 2600.0)], 400.0, model_sd=300.0, error_var=(200.0**2, 300.0**2 * 10))
    assert Calibration.from_dict(cal.to_dict()) == cal
    post = SkillPosterior()
    widths = {}
    for n in range(1, 161):
        post.update([0.0, -0.3, -1.0], 1 if n % 3 == 0 else 0)
        if n in (10, 40, 160):
            est = cal.from_posterior(post)
            widths[n] = est.half_width
            assert est.n == n and est.low < est.rating < est.high
    # half-width = 1.96 sqrt(a + b / n): 1.96 * sqrt(40000 + 90000) at n = 10, approaching 1.96 * 200
    assert widths[10] == pytest.approx(1.96 * (200.0**2 + 300.0**2) ** 0.5, rel=1e-3)
    assert widths[10] > widths[40] > widths[160] > 1.96 * 200.0


def test_gains_only_calibration_rates_by_algorithm_4_and_refuses_the_c_map():
    """A one-PV profile (deep) counts no move for the posterior: its calibration has no c map, and a perceived
    rating from it is Algorithm 4's even if a posterior somehow has moves."""
    from analyzers.gain import GainHistogram
    from analyzers.profiles import get_profile
    from streamer.pipeline import PipelineConfig, ScopeStats, perceived

    cal = Calibration("deep", "Stockfish", 2500.0, [], 400.0, gain_model_sd=300.0)
    assert not cal.has_c_map and Calibration.from_dict(cal.to_dict()) == cal
    post = SkillPosterior()
    post.update([0.0, -0.5], 0)
    for call in (lambda: cal.from_posterior(post), lambda: cal.elo_from_c(1.0), lambda: cal.c_from_elo(2000.0)):
        with pytest.raises(CalibrationError, match="gains only"):
            call()
    stats = ScopeStats(hist=GainHistogram(), post=post)
    for g in (0, 0, -30, -120, 0, -5, 0, -60):
        stats.hist.add(g)
    out = perceived(stats, player_id="p", scope="game", scope_id="g", game_id="g", ply=20,
                    config=PipelineConfig(get_profile("deep"), cal))
    assert out.method == "gain" and out.rating == out.gain_rating and out.c_mean is None
    assert out.low < out.rating < out.high
    with pytest.raises(CalibrationError, match="at least two knots"):
        Calibration("x", "e", 1, [(1.0, 2000.0)], 1)
