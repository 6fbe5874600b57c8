"""Fair-play alerts calibrated on held-out games: false alarms on honest play, detection of simulated assistance.

    nice -n 19 python bench/fairplay_calibration.py --warm   # the engine work only (resumable, about 1.5 h on 2 cores)
    python bench/fairplay_calibration.py                     # the tables, from the analysis cache

The samples and how assistance is simulated: bench/fairplay_data.py.
"""

from __future__ import annotations

import argparse
import asyncio

from common import ANALYSIS_CACHE, add_data_argument, data_dir
from fairplay_data import analyse, load_samples

from analyzers.engine import EnginePool
from analyzers.profiles import get_profile
from streamer.pipeline import PipelineConfig


def arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="fast")
    ap.add_argument("--events", type=int, default=520, help="held-out games as whole player-events, for detection")
    ap.add_argument("--honest-events", type=int, default=2000, help="held-out games as whole player-events, honest")
    ap.add_argument("--random", type=int, default=600, help="held-out games at random, honest")
    ap.add_argument("--tcec", type=int, default=100, help="TCEC engine games")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", type=int, default=2)
    ap.add_argument("--warm", action="store_true", help="only run the engine searches into the cache")
    add_data_argument(ap)
    return ap.parse_args()


def main() -> None:
    args = arguments()
    data = data_dir(args, "pgn/rated-holdout", "pgn/engine-tcec")
    config = PipelineConfig(get_profile(args.profile))
    samples = load_samples(data, args.events, args.honest_events, args.random, args.tcec, args.seed)

    async def run():  # noqa: ANN202
        async with EnginePool(size=args.engines, cache_path=ANALYSIS_CACHE) as pool:
            return await analyse(pool, config, samples)

    results, assisted = asyncio.run(run())
    if args.warm:
        return


if __name__ == "__main__":
    main()
