"""The engine pool: UCI engine processes shared by many concurrent callers.

>>> async with EnginePool("stockfish", size=2) as pool:          # doctest: +SKIP
...     a = await pool.analyse(chess.Board(), depth=10, multipv=5)
...     a.best_cp, a.candidates[0].uci

- :mod:`.analysis`: :class:`PositionAnalysis`, what one search returns (plain data, JSON-able);
- :mod:`.cache`: the position cache (bounded memory LRU, optional SQLite file);
- :mod:`.pool`: :class:`EnginePool`, scheduling, look-ahead, fault handling.
"""

from .analysis import Limits, PositionAnalysis, ScoredMove, position_key
from .cache import AnalysisCache
from .pool import EnginePool, PoolStats

__all__ = ["AnalysisCache", "EnginePool", "Limits", "PoolStats", "PositionAnalysis", "ScoredMove", "position_key"]
