"""kibitz's thinking half: everything that rates, with no I/O and no Kafka. Both runtimes import it.

Move-based skill (from the moves alone):

- :mod:`.gain`: Ferreira's gain per move, :class:`~.gain.GainHistogram`, exact expected scores between histograms;
- :mod:`.perceived`: Ferreira's Algorithms 2 (a tournament), 3 (engine strength), 4 (live rating with an interval);
- :mod:`.posterior`: the stochastic agent E(c) and :class:`~.posterior.SkillPosterior`, a Bayesian posterior over c;
- :mod:`.ratingmodel`: the rating-conditioned move model P(move | rating, time control) and the per-player posterior
  over the rating it gives (moves only, and "performance" from a declared rating);
- :mod:`.combination`: a learned combination of a scope's running features on top of the move model: the published
  moves-only rating where the moves had clocks, with an interval from its cross-validated errors;
- :mod:`.eventpool`: the event prior: an event's level read from its *other* players' moves, moved by the player's
  own results in it; one event's evidence is a state kept within byte budgets, so it fits one Kafka record;
- :mod:`.calibration`: c and gain histograms to Elo for one engine profile (:mod:`.profiles`), with model error;
- :mod:`.fairplay`: z-scores of engine matching and loss against a player's reference rating;
- :mod:`.gridstats`: the central intervals of every grid posterior (the rating's, c's, a Go rank's), read one way.

Result-based ratings: :mod:`.glicko2` (platform updates after each game), :mod:`.pool` (Ordo-style pool fit with
error bars), :mod:`.concordance` (Kendall's tau_a, how well one ordering agrees with another).

Games: a game adapter (:mod:`.engine.adapter`, ``CHESS`` and ``GO``) is everything the pipeline and the engine pool
know of a game: the rules (:mod:`.chessboard` on python-chess, :mod:`.goboard` on sgfmill: the initial position, a move
in the game's notation applied or refused with ``IllegalMove``, the side to move, a position stored and restored) and
the engine request. Engines: :mod:`.engine`, an asyncio pool of deterministic searches with a cache and fault
handling, one pool for both games: UCI engines for chess, GTP engines (GNU Go) or KataGo's analysis engine for Go.

Go (docs/models.md s. 11): :mod:`.goboard` (the position: captures, ko, suicide, passes, GTP notation),
:mod:`.gorank` (kyu/dan ranks on the GoR scale), :mod:`.gorate` (points lost, the posterior over c in points, a
network's evidence from KataGo's evaluations, a rating per server's calibration).

Errors are types, all in :mod:`.errors`. State-holding classes have ``to_dict``/``from_dict`` so any store can keep
them. Published reference figures (docs/models.md) are reproduced in ``tests/``.

>>> from analyzers.gain import GainHistogram, expected_score, rating_difference
>>> byrne, fischer = GainHistogram([-1, -5, -13, 0]), GainHistogram([0, -16, 2, 0])
>>> round(expected_score(fischer, byrne), 3)
0.688
"""
