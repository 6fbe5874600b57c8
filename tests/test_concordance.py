import time

import numpy as np
import pytest

from analyzers.concordance import kendall_tau_a, kendall_tau_a_naive


def test_matches_quadratic_definition_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(2, 80))
        x = rng.integers(0, 6, n).tolist()
        y = rng.integers(0, 6, n).tolist()
        assert kendall_tau_a(x, y) == pytest.approx(kendall_tau_a_naive(x, y), abs=1e-12)


def test_ties_stay_in_the_denominator():
    assert kendall_tau_a([1, 2, 3], [1, 2, 3]) == 1.0
    assert kendall_tau_a([1, 1, 2], [1, 2, 3]) == pytest.approx(2 / 3)  # tau_b would say 0.816...
    assert kendall_tau_a([3, 2, 1], [1, 2, 3]) == -1.0


def test_100000_pairs_in_well_under_a_second_or_two():
    rng = np.random.default_rng(1)
    x = rng.normal(size=100_000)
    y = x + rng.normal(size=100_000)
    t = time.perf_counter()
    tau = kendall_tau_a(x, y)
    elapsed = time.perf_counter() - t
    # for bivariate normal with correlation rho, tau = 2/pi asin(rho); rho = 1/sqrt(2) -> 0.5
    assert tau == pytest.approx(0.5, abs=0.01)
    assert elapsed < 2.0
