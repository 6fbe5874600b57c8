"""Overlay latency: from a ply landing in a followed PGN file to headless Chromium showing its analysis.

    python bench/overlay_latency.py [--plies 49] [--screenshot docs/img/overlay.png]

What it does, as a broadcast runs: the analyses of the game are cached first (``kibitz replay --cache``: the target is
the serving path, not the engine), then ``kibitz follow FEED --serve`` polls a file every 0.1 s (a DGT relay's
``games.pgn``), and the file is rewritten one ply at a time. For each ply the time runs from the write to the
overlay page (Debian's chromium, over the DevTools protocol) showing that ply's evaluation and ratings. Prints p50,
p95 and max, and the same for the raw baseline of the page itself: the time to read the page's state once (the
polling resolution of the measurement). The game is tests/fixtures/broadcast_game.pgn (49 plies, with clocks).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import ROOT

from streamer.devbrowser import Browser, follow_process, overlay_state, wait_for, watch_plies

sys.path.insert(0, str(ROOT / "tests"))
from conftest import BROADCAST, pgn_upto  # noqa: E402  (the fixture and its live-feed view, shared with the test)

ENGINE = ["--profile", "fast", "--engines", "2"]


async def measure(feed: Path, cache: Path, plies: int, interval: float, shot: Path | None) -> None:
    feed.write_text(pgn_upto(1))
    with follow_process(feed, "--interval", str(interval), *ENGINE, "--cache", str(cache)) as (url, gid):
        async with Browser() as b:
            await b.goto(f"{url}/overlay/{gid}?show=names,clocks,eval,ratings,sparkline,lastmove,board")
            await wait_for(b, lambda s: s.get("evalPly") == "0")
            latencies, _ = await watch_plies(b, lambda k: feed.write_text(pgn_upto(k)), range(2, plies + 1))
            reads = []
            for _ in range(50):
                t0 = time.monotonic()
                await overlay_state(b)
                reads.append(time.monotonic() - t0)
            if shot:
                await b.screenshot(shot)
    ms = np.array(latencies) * 1000
    print(f"overlay latency, {len(ms)} plies, poll interval {interval * 1000:.0f} ms, analyses cached: "
          f"p50 {np.percentile(ms, 50):.0f} ms, p95 {np.percentile(ms, 95):.0f} ms, max {ms.max():.0f} ms")
    print(f"baseline, one read of the page's state: p50 {np.percentile(reads, 50) * 1000:.1f} ms")
    if shot:
        print(f"screenshot: {shot}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plies", type=int, default=49)
    ap.add_argument("--interval", type=float, default=0.1, help="follow's poll interval, s")
    ap.add_argument("--screenshot", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "analysis.sqlite"
        subprocess.run([sys.executable, "-m", "streamer.cli", "replay", str(BROADCAST), "--max-speed", "--no-ui", *ENGINE,
                        "--cache", str(cache)], check=True, cwd=ROOT, capture_output=True)
        asyncio.run(measure(Path(tmp) / "games.pgn", cache, args.plies, args.interval, args.screenshot))


if __name__ == "__main__":
    main()
