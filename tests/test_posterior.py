"""The Bayesian agent E(c): probabilities, posterior updates, coverage by simulation."""

import numpy as np
import pytest

from analyzers.posterior import SkillPosterior, move_probabilities, with_played_move


def test_move_probabilities_definition():
    vals = [0.5, 0.3, -1.0]
    c = 1.2
    lik = [(0.5 - v + 0.1) ** -c for v in vals]
    assert move_probabilities(vals, c) == pytest.approx(np.array(lik) / sum(lik))
    assert move_probabilities(vals, 0.0) == pytest.approx([1 / 3] * 3)  # c = 0 plays at random
    assert move_probabilities(vals, 20)[0] > 0.999  # large c plays the best move


def simulate(c_true, n_moves, rng, post=None):
    post = post or SkillPosterior()
    for _ in range(n_moves):
        k = rng.integers(2, 11)
        vals = np.concatenate(([0.0], -np.sort(rng.exponential(0.6, k - 1))))
        played = rng.choice(k, p=move_probabilities(vals, c_true))
        post.update(vals, int(played))
    return post


def test_posterior_interval_covers_true_c_in_90_percent_of_200_runs():
    covered = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        c_true = rng.uniform(0.5, 2.5)
        post = simulate(c_true, 120, rng)
        lo, hi = post.interval(0.95)
        covered += lo <= c_true <= hi
    assert covered >= 180, covered


def test_posterior_sd_shrinks_like_one_over_sqrt_n():
    sds = {100: [], 1600: []}
    for seed in range(20):
        for n in sds:
            sds[n].append(simulate(1.3, n, np.random.default_rng(1000 + seed)).std)
    ratio = np.mean(sds[100]) / np.mean(sds[1600])
    assert ratio == pytest.approx(4.0, rel=0.2)


def test_refinement_keeps_posterior_consistent_with_a_fixed_fine_grid():
    rng1, rng2 = np.random.default_rng(5), np.random.default_rng(5)
    adaptive = simulate(1.1, 3000, rng1)
    fine = simulate(1.1, 3000, rng2, SkillPosterior(0.5, 2.0, 3001))
    assert adaptive.grid[-1] - adaptive.grid[0] < 1.0  # it did refine
    assert adaptive.mean == pytest.approx(fine.mean, abs=2e-3)
    assert adaptive.std == pytest.approx(fine.std, rel=0.05)


def test_move_outside_candidates_does_not_kill_the_posterior():
    post = SkillPosterior()
    vals, idx = with_played_move([0.2, 0.1, 0.0], played_value=0.5)
    assert vals[idx] == 0.0  # capped at the worst listed candidate
    for _ in range(5):
        post.update(vals, idx)
    assert np.isfinite(post.mean) and post.mean < 1.0  # repeated bad moves pull c down, nothing breaks


def test_single_candidate_is_ignored_and_state_round_trips():
    post = SkillPosterior()
    post.update([0.3], 0)
    assert post.n == 0
    rng = np.random.default_rng(1)
    simulate(1.0, 50, rng, post)
    again = SkillPosterior.from_dict(post.to_dict())
    assert again.mean == pytest.approx(post.mean, abs=1e-9) and again.n == post.n
    with pytest.raises(IndexError):
        post.update([0.1, 0.2], 5)


def test_update_all_gives_the_numbers_of_updating_each_posterior_in_turn():
    """The player step updates a move's three scopes (game, event, overall) in one stacked numpy pass."""
    rng = np.random.default_rng(4)
    apart = [SkillPosterior() for _ in range(3)]
    together = [SkillPosterior() for _ in range(3)]
    for i in range(120):
        values = list(np.concatenate(([0.0], -np.sort(rng.exponential(0.6, 4)))))
        played = int(rng.integers(5))
        first = 0 if i < 40 else 1 if i < 80 else 2  # scopes of different ages: grids differ
        for p in apart[first:]:
            p.update(values, played)
        SkillPosterior.update_all(together[first:], values, played)
    for a, b in zip(apart, together):
        assert a.n == b.n and np.array_equal(a.grid, b.grid)
        assert np.array_equal(a.logp, b.logp) and a.mean == b.mean  # bit for bit: the runtimes must agree exactly


def test_deferred_moves_fold_to_the_numbers_of_immediate_updates_and_survive_storage():
    """A scope read only at game ends (event, overall) defers its moves and folds them in by batches: the same sum of
    log-likelihoods, grid checks per batch. A stored state keeps the waiting moves, so when a runtime stores it
    changes nothing."""
    from analyzers.posterior import DEFER_BATCH, move_term

    rng = np.random.default_rng(8)
    now, later, stored = SkillPosterior(), SkillPosterior(), SkillPosterior()
    for i in range(300):
        k = int(rng.integers(2, 7))
        values = list(np.concatenate(([0.0], -np.sort(rng.exponential(0.6, k - 1)))))
        term = move_term(values, int(rng.integers(k)))
        now.add(term)
        later.add(term, defer=True)
        stored.add(term, defer=True)
        stored = SkillPosterior.from_dict(stored.to_dict())  # stored after every move, as a worker may
        assert later.n == now.n == i + 1
        if i == 40:  # a read folds the waiting moves in
            assert 0 < len(later._pending) < DEFER_BATCH and later.mean == pytest.approx(now.mean, abs=1e-3)
            assert not later._pending
            assert stored.mean == later.mean  # the stored copy folds the same moves
    assert later._pending and stored.to_dict() == later.to_dict()  # bit for bit, waiting moves included
    assert later.mean == pytest.approx(now.mean, abs=1e-3) and later.std == pytest.approx(now.std, rel=0.02)
    assert stored.mean == later.mean and stored.interval() == later.interval()
    assert move_term([0.3], 0) is None  # one candidate: nothing to count
    with pytest.raises(ValueError):
        SkillPosterior(k=0.5).add(term)  # a term is for one k


def test_a_stored_deferred_move_outside_its_candidates_is_damage():
    """A state whose waiting move names a candidate it does not have is refused when read (the steps dead-letter the
    record as a corrupt state), not folded in later."""
    from analyzers.posterior import move_term

    post = SkillPosterior()
    post.add(move_term([0.3, 0.2, 0.0], 1), defer=True)
    d = post.to_dict()
    assert len(d["pending"]) == 1 and SkillPosterior.from_dict(d).n == 1
    d["pending"][0][0] = 7
    with pytest.raises(ValueError, match="played index"):
        SkillPosterior.from_dict(d)


def test_grid_exponentials_and_batches_give_the_direct_formula():
    """The posterior evaluates exp(-d c) on its uniform grid as coarse x fine exponentials and a batch's log-likelihood
    through products of its moves' sums: both equal the direct formula (one exp per point, one log per move)."""
    from analyzers.posterior import _batch_loglik, _exp_neg_outer, _move_loglik

    rng = np.random.default_rng(7)
    for n in (3, 7, 101, 301, 302):
        lo = rng.uniform(0, 3)
        grid = np.linspace(lo, lo + rng.uniform(0.1, 3), n)
        stacked = np.array([np.linspace(0, 6, n), grid])
        d = np.concatenate([[0.0], rng.uniform(0, 7, 6)])
        for g in (grid, stacked):
            direct = np.exp(np.multiply.outer(-d, g))
            assert _exp_neg_outer(d, g).shape == direct.shape
            np.testing.assert_allclose(_exp_neg_outer(d, g), direct, rtol=1e-13, atol=0)
        moves = [(np.concatenate([[0.0], rng.uniform(0, 7, rng.integers(1, 9))]), 0) for _ in range(40)]
        moves = [(d, int(rng.integers(0, d.size))) for d, _ in moves]

        def direct_loglik(d, played, grid=grid):
            return -grid * d[played] - np.log(np.exp(np.multiply.outer(-d, grid)).sum(axis=0))

        np.testing.assert_allclose(_move_loglik(grid, *moves[0]), direct_loglik(*moves[0]), rtol=0, atol=1e-12)
        np.testing.assert_allclose(_batch_loglik(grid, moves), sum(direct_loglik(d, p) for d, p in moves), rtol=0, atol=1e-9)
