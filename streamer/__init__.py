"""kibitz's runtimes: they move events through :mod:`analyzers`; no rating logic lives here.

- :mod:`.pipeline`: the per-game and per-player steps both runtimes call (game state, assessments, ratings);
- :mod:`.embedded`: the in-process runtime on asyncio queues (no broker): ``kibitz replay``;
- :mod:`.ingest`: PGN files and JSON-lines streams into input events;
- :mod:`.cli`: the ``kibitz`` command; :mod:`.ui`: the live terminal view.
"""
