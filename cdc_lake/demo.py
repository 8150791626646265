"""``cdc-lake demo``: the README's main job.

Installs what is missing, brings the local stack up, loads the Dagster definitions and prints a
summary with the endpoints and how to open the Dagster UI on the same state.
"""

from __future__ import annotations

import time

from cdc_lake.stack import LocalStack, StackSettings
from cdc_lake.stack.install import install


def _load_definitions():
    from cdc_lake.definitions import defs

    return defs() if callable(defs) else defs


def run_demo(settings: StackSettings) -> int:
    t0 = time.monotonic()
    install(settings)
    stack = LocalStack(settings)
    timings = stack.up()
    definitions = _load_definitions()
    repo = definitions.get_repository_def()
    asset_keys = sorted(k.to_user_string() for k in repo.asset_graph.get_all_asset_keys())
    desc = stack.describe()
    print()
    print("cdc-lake demo summary")
    print(f"  stack up in {sum(timings.values()):.1f}s (total {time.monotonic() - t0:.1f}s)")
    for name, st in desc["services"].items():
        print(f"  {name:<8} {'healthy' if st['healthy'] else 'UNHEALTHY':<10} {st['log']}")
    print(f"  postgres  {settings.host}:{settings.port('postgres')}/{settings.pg_database}")
    print(f"  kafka     {settings.kafka_bootstrap}")
    print(f"  connect   {settings.connect_url}")
    print(f"  s3        {settings.s3_endpoint} buckets {', '.join(settings.buckets)}")
    print(f"  spark     local[*] with {len(desc['spark']['jars'])} extra jars")
    print(f"  definitions: {len(asset_keys)} assets {asset_keys}")
    print()
    print("Open the Dagster UI on this state:")
    print("  .venv/bin/dagster dev -w workspace.yaml   # then http://127.0.0.1:3000")
    print("Stop the stack with: .venv/bin/cdc-lake stack down")
    return 0 if desc["healthy"] else 1
