"""The engine pool: UCI engine processes shared by many concurrent callers.

>>> async with EnginePool("stockfish", size=2) as pool:          # doctest: +SKIP
...     a = await pool.analyse(chess.Board(), depth=10, multipv=5)
...     a.best_cp, a.candidates[0].uci

- :mod:`.analysis`: :class:`PositionAnalysis`, what one search returns (plain data, JSON-able);
- :mod:`.cache`: the position cache (bounded memory LRU, optional SQLite file);
- :mod:`.pool`: :class:`EnginePool`, scheduling, look-ahead, fault handling;
- :mod:`.adapter`: what the pool needs of a game (:data:`~.adapter.CHESS`, :data:`~.adapter.GO`);
- :mod:`.uci`, :mod:`.gtp`, :mod:`.katago`: one engine process of each protocol (Stockfish over UCI, GNU Go over GTP,
  KataGo's JSON analysis engine).

>>> async with EnginePool(size=2, game=GO) as pool:             # doctest: +SKIP
...     a = await pool.analyse_limits(GoPosition(), GoLimits(level=1))
...     a.candidates[0]                                          # ("Q16", 75.0): a move and its value in points
"""

from .analysis import Limits, PositionAnalysis, ScoredMove, position_key
from .cache import AnalysisCache
from .pool import EnginePool, PoolStats

__all__ = ["AnalysisCache", "EnginePool", "Limits", "PoolStats", "PositionAnalysis", "ScoredMove", "position_key"]
