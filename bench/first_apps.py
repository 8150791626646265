"""First apps: what a user's first refreshes after ``cdc-lake stack up`` cost on the lake server,
against the later ones.

``python -m bench.first_apps --port-base 18800 [--refreshes 10] [--at-once]`` starts an S3
server and a lake server of its own, waits for the lake server's warm-up to end (``--at-once``:
does not wait, as a user who refreshes right after ``stack up``), then runs the ``warm``
benchmark's refresh in a fresh run process: first the build of a table of ``--orders`` orders,
then ``--refreshes`` refreshes of 2 files × 5 changes. It prints each one's upsert step and
the warm-up's rounds from the lake server's log. Read the first refreshes against the last
ones of the same run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import say
from bench.synthetic import SyntheticLake, event
from bench.warm_spark import run_refresh
from cdc_lake.stack import LocalStack, StackSettings
from cdc_lake.stack.lake_server import request, token_path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.first_apps", description=__doc__)
    ap.add_argument("--port-base", type=int, default=18800)
    ap.add_argument("--orders", type=int, default=2_000)
    ap.add_argument("--refreshes", type=int, default=10)
    ap.add_argument("--at-once", action="store_true", help="do not wait for the warm-up")
    args = ap.parse_args(argv)
    state = Path(tempfile.mkdtemp(prefix="cdc-lake-first-apps-"))
    state.chmod(0o755)  # as every bench state directory (PostgreSQL runs as postgres)
    project = StackSettings.from_env()
    s = StackSettings.from_env(state_dir=state, port_base=args.port_base, jars_dir=project.jars_dir)
    stack = LocalStack(s, verbose=False, only=["s3", "lake_server"])
    try:
        t0 = time.monotonic()
        say(f"first apps: S3 and the lake server up in {sum(stack.up().values()):.1f}s")
        port, token = s.port("lake_server"), token_path(s)
        while (
            not args.at_once and request(s.host, port, token, "GET", "/health")["warm_up"] is None
        ):
            if time.monotonic() > t0 + 900:
                raise SystemExit("first apps: the lake server's warm-up did not end in 15 minutes")
            time.sleep(1)
        say(f"first apps: starting {time.monotonic() - t0:.1f}s after `up`")
        lake = SyntheticLake(stack.service("s3").client(), s.raw_bucket, s.lake_bucket)  # type: ignore[attr-defined]
        per_file = max(1, args.orders // 10)
        for start in range(0, args.orders, per_file):
            lake.put(
                [event(i, 100, i + 1) for i in range(start, min(args.orders, start + per_file))]
            )
        _, got = run_refresh(stack, lake.name, "server")
        print(f"build of {args.orders:,} orders: upsert step {got['upsert_s']:.2f}s")
        clock = 1_000
        for k in range(args.refreshes):
            for f in range(2):
                lake.put([event((clock + i * 7) % args.orders, clock + i, clock + i)
                          for i in range(5)], partition=f)  # fmt: skip
                clock += 5
            _, got = run_refresh(stack, lake.name, "server")
            print(f"refresh {k + 1}: upsert step {got['upsert_s']:.2f}s")
        for line in stack.service("lake_server").log.read_text().splitlines():
            if "warm" in line:
                print(line)
    finally:
        stack.down()
        shutil.rmtree(state, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
