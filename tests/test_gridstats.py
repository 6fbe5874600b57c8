"""Central intervals of the grid posteriors (analyzers.gridstats): the rating's, c's and a Go rank's are read the
same way, each point's mass spread over its cell, so a normal posterior gives its normal interval, not one half a
grid step low."""

import numpy as np
import pytest

from analyzers.gorate import RankModel
from analyzers.gridstats import cell_edges, central_interval
from analyzers.posterior import SkillPosterior


def test_cell_edges_are_the_midpoints_and_half_a_step_beyond_the_ends_within_the_support():
    grid = np.array([0.0, 0.5, 1.0, 1.5])
    assert cell_edges(grid).tolist() == [-0.25, 0.25, 0.75, 1.25, 1.75]
    assert cell_edges(grid, lo=0.0, hi=1.6).tolist() == [0.0, 0.25, 0.75, 1.25, 1.6]


def test_a_point_mass_is_spread_over_its_cell():
    grid = np.arange(0.0, 10.0)
    p = np.zeros(10)
    p[4] = 1.0
    assert central_interval(p, grid, 0.5) == pytest.approx((3.75, 4.25))


def test_the_posterior_over_c_gives_a_normal_density_its_normal_interval():
    """On the new posterior's grid (step 0.02) a normal density of sd 0.1 gives mean +/- 1.96 sd to within 0.001 (read
    at the grid points, both ends were 0.01 low)."""
    post = SkillPosterior()
    for mean in (1.2, 1.213, 2.5):
        post.logp = -0.5 * ((post.grid - mean) / 0.1) ** 2
        post._moments = None
        lo, hi = post.interval(0.95)
        assert lo == pytest.approx(mean - 0.196, abs=1e-3) and hi == pytest.approx(mean + 0.196, abs=1e-3)
        m, sd, lo2, hi2 = post.summary(0.95)
        assert (lo2, hi2) == (lo, hi) and m == pytest.approx(mean, abs=1e-4) and sd == pytest.approx(0.1, abs=1e-3)


def test_the_posterior_over_c_stays_within_its_hard_bounds():
    post = SkillPosterior()
    post.logp = np.where(post.grid == 0.0, 0.0, -50.0)  # all the mass at c = 0
    lo, hi = post.interval(0.95)
    assert 0.0 <= lo < hi <= post.grid[1]


def test_a_go_rank_with_no_moves_is_its_normal_prior():
    """The rank model's grid has a step of 10: with no moves the interval is the prior's mean +/- 1.96 sd within 1
    (read at the grid points, both ends were 5 low)."""
    model = RankModel(knots=((0.5, 1000.0), (1.5, 2500.0)), prior_mean=1863.0, prior_sd=180.0, var_a=0.1, var_b=1.0)
    est = model.estimate_from(0.0, 0)
    assert est.rating == pytest.approx(1863.0, abs=0.5)
    assert est.low == pytest.approx(1863.0 - 1.96 * 180.0, abs=1.0)
    assert est.high == pytest.approx(1863.0 + 1.96 * 180.0, abs=1.0)
