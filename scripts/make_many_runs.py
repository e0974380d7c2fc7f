#!/usr/bin/env python3
"""A TensorBoard logdir of many profiler runs (issue 25: `--list-runs` and
`--run` among thousands of runs), for `scripts/bench-linearity --many`.

Every run is `LOGDIR/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/host.xplane.pb`,
the one XSpace given (e.g. `memtool-gen xspace --events 1000 -o x.xplane.pb`)
hard-linked into each (copied where links are refused), so 30,000 runs
cost one file's bytes.

Example:
  memtool-gen xspace --events 1000 -o /tmp/x.xplane.pb
  scripts/make_many_runs.py --runs 30000 --xspace /tmp/x.xplane.pb -o /tmp/logdir
"""

import argparse
import datetime
import os
import shutil
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--runs", type=int, required=True)
    p.add_argument("--xspace", required=True, help="the XSpace every run holds")
    p.add_argument("-o", "--output", required=True, help="the logdir made")
    args = p.parse_args()
    if not os.path.isfile(args.xspace):
        sys.exit(f"{args.xspace}: no such file")
    root = os.path.join(args.output, "plugins", "profile")
    start = datetime.datetime(2026, 1, 1)
    for i in range(args.runs):
        # One run a minute: names in time order, as the profilers write them.
        name = (start + datetime.timedelta(minutes=i)).strftime("%Y_%m_%d_%H_%M_%S")
        run = os.path.join(root, name)
        os.makedirs(run, exist_ok=True)
        target = os.path.join(run, "host.xplane.pb")
        if os.path.exists(target):
            continue
        try:
            os.link(args.xspace, target)
        except OSError:
            shutil.copyfile(args.xspace, target)
    print(f"{args.output}: {args.runs} runs")


if __name__ == "__main__":
    main()
