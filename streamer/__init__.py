"""kibitz's runtimes: they move events through :mod:`analyzers`; no rating logic lives here.

- :mod:`.steps`: **the one driver**. :class:`~.steps.Steps` turns a game event into assessments and a player event
  into ratings, dead-letters bad input and records every metric; every runtime calls it and only routes its typed
  :class:`~.steps.Output` by :class:`~.steps.Route`;
- :mod:`.pipeline`: what the steps do, as plain functions and state classes (game state, assessments, player state);
- :mod:`.embedded`: the in-process runtime on asyncio queues (no broker): ``kibitz replay`` and ``kibitz stream``;
- :mod:`.kafka_eos`: the transactional Kafka worker (the default ``kibitz worker``); :mod:`.kafka_app`: the
  faust-streaming app (``--runtime faust``); :mod:`.kafka_config`: broker, topics, security; :mod:`.state_store`:
  a stage's state in memory or RocksDB; :mod:`.redrive`: dead letters' records sent back once the cause is mended
  (``kibitz redrive``);
- :mod:`.batch`: whole PGN games through the game step, for benchmarks and fitting;
- :mod:`.review`: the fair-play review of a screened player, their games searched deeper (``kibitz review``);
- :mod:`.ingest`: PGN files and JSON-lines streams into input events (player identity, replay pacing);
- :mod:`.cli`: the ``kibitz`` command; :mod:`.ui`: the live terminal view; :mod:`.metrics`: Prometheus.
"""
