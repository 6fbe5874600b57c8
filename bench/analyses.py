"""The engine analyses the benchmarks read, shipped in the repository so a fresh clone does not redo them.

    python bench/analyses.py import   # every shard into the analysis cache (entries the cache has are left alone)
    python bench/analyses.py export   # the cache's entries that no shard holds yet, as one new shard
    python bench/analyses.py list     # the shards and how many entries each holds

Fitting and evaluating the rating models reads hundreds of thousands of engine searches (bench/warm_cache.py: about a
day on two cores for the whole fitting sample). The searches are deterministic (docs/models.md; Threads=1, fixed
limits, ``ucinewgame``, the position only), so their results are data: each shard in bench/analyses/ holds analysis
cache rows exactly as the cache stores them, one ``key<TAB>value`` line each, sorted, xz-compressed (30-35 bytes a
search). Shards are append-only: ``export`` writes only what no shard holds, so a shard, once committed, never
changes. A row's key names the engine, its options and the limits (``Stockfish 15.1|Hash=16,Threads=1|d8-mpv5|...``):
under another engine build no key matches and everything is searched afresh. tests/test_analyses.py searches a sample
of the shipped rows again with the installed Stockfish and compares.

The cache is $KIBITZ_ANALYSIS_CACHE, else .cache/analysis.sqlite in the checkout (``--cache`` overrides both).
"""

from __future__ import annotations

import argparse
import lzma
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

from common import ANALYSIS_CACHE, ROOT

from analyzers.engine.cache import AnalysisCache

SHARDS = ROOT / "bench" / "analyses"


def shard_paths(folder: Path = SHARDS) -> list[Path]:
    return sorted(folder.glob("*.tsv.xz"))


def read_shard(path: Path) -> Iterator[tuple[str, str]]:
    """The (key, value) rows of one shard."""
    with lzma.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("\t")
            yield key, value


def connect(cache: Path) -> sqlite3.Connection:
    """The cache's SQLite file, created with the cache's own schema if missing."""
    AnalysisCache(path=cache).close()
    return sqlite3.connect(str(cache), isolation_level=None)


def import_shards(cache: Path, folder: Path = SHARDS) -> tuple[int, int]:
    """Every shard's rows into ``cache``; rows whose key it has stay as they are. Returns (rows read, rows added)."""
    db = connect(cache)
    read = added = 0
    try:
        for path in shard_paths(folder):
            rows = list(read_shard(path))
            before = db.total_changes
            db.execute("BEGIN")
            db.executemany("INSERT OR IGNORE INTO analyses (key, value) VALUES (?, ?)", rows)
            db.execute("COMMIT")
            read += len(rows)
            added += db.total_changes - before
    finally:
        db.close()
    return read, added


def export_new(cache: Path, folder: Path = SHARDS) -> tuple[Path | None, int]:
    """The cache's rows that no shard holds, as the next shard (None when there is nothing new)."""
    shipped = {key for path in shard_paths(folder) for key, _ in read_shard(path)}
    db = sqlite3.connect(f"file:{cache}?mode=ro", uri=True)
    try:
        rows = [(k, v) for k, v in db.execute("SELECT key, value FROM analyses ORDER BY key") if k not in shipped]
    finally:
        db.close()
    if not rows:
        return None, 0
    existing = shard_paths(folder)
    number = int(existing[-1].name.split(".")[0]) + 1 if existing else 0
    path = folder / f"{number:03d}.tsv.xz"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    with lzma.open(tmp, "wt", encoding="utf-8", preset=9 | lzma.PRESET_EXTREME) as f:
        for k, v in rows:
            if "\t" in k or "\n" in k or "\n" in v:
                raise ValueError(f"a cache row that one line cannot hold: {k!r}")
            f.write(f"{k}\t{v}\n")
    tmp.rename(path)  # a shard appears whole or not at all
    return path, len(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("import", "export", "list"))
    ap.add_argument("--cache", type=Path, default=ANALYSIS_CACHE, help="the analysis cache (SQLite)")
    ap.add_argument("--shards", type=Path, default=SHARDS, help="the shard folder")
    args = ap.parse_args()
    if args.command == "import":
        read, added = import_shards(args.cache, args.shards)
        print(f"imported {len(shard_paths(args.shards))} shards into {args.cache}: {read} rows read, {added} added")
    elif args.command == "export":
        if not args.cache.exists():
            sys.exit(f"no analysis cache at {args.cache}")
        path, n = export_new(args.cache, args.shards)
        print(f"wrote {path} ({n} rows, {path.stat().st_size / 1e6:.1f} MB)" if path else "nothing new to export")
    else:
        for path in shard_paths(args.shards):
            print(f"{path.name}: {sum(1 for _ in read_shard(path))} rows, {path.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
