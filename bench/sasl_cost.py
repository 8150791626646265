"""What Kafka's SASL and ACLs cost (issue 50): the latency benchmark on two stacks that differ in
Kafka's security alone, paired and alternated.

``python -m bench --only sasl`` starts the stack as a user gets it (SASL/SCRAM on every listener,
``StandardAuthorizer`` deny by default) and a second one beside it (its own state directory,
port base + 300) with ``StackSettings.kafka_sasl`` off: PLAINTEXT listeners, no authorizer,
clients without a login. Both have the same jars and credentials. Each side runs the latency
benchmark's lane on its own stack, with its own warm lake server, in rounds A B, B A, ... on the
same workloads (same seeds), so each side's figure sees the same machine load.

SASL acts on the path's Kafka hops only: Debezium's producer (the "debezium" share), the S3
sink's consumer (inside the "sink" share) and the run's Kafka reads (offsets and lag for the
checks, inside the "run" share). SCRAM costs a handshake per new connection; after it, the
requests travel as PLAINTEXT's do, each authorized against the ACLs in memory.

Figures: each side's p50 and p95 commit -> Hudi with its shares, the median run (the small
commit, as a run of the lake asset makes it, checks included), and the ratios SASL / PLAINTEXT.
The PLAINTEXT stack is open to every local user while the benchmark runs: never point it at real
data.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bench.harness import Figure
from bench.latency import Profile, bench_latency
from cdc_lake.stack import LocalStack
from cdc_lake.stack.process import write_private

# The twin's port base, from the first stack's: clear of the bases the docs give other
# benchmarks (17400 + 300 = 17700).
PLAINTEXT_PORT_OFFSET = 300


def plaintext_twin(stack: LocalStack, state_dir: Path) -> LocalStack:
    """A stack like ``stack`` (same jars, same credentials) in ``state_dir``, whose Kafka takes
    every client without SASL or ACLs."""
    s = stack.settings
    # The same credentials, so one environment serves both stacks' resources.
    write_private(state_dir / "credentials.json", (s.state_dir / "credentials.json").read_text())
    twin = replace(
        s,
        state_dir=state_dir,
        port_base=s.port_base + PLAINTEXT_PORT_OFFSET,
        kafka_sasl=False,
        _credentials=[],
    )
    return LocalStack(twin, verbose=False)


def bench_sasl_cost(
    stack: LocalStack,
    duration_s: float,
    rate: float,
    rounds: int,
    say: Callable[[str], None],
    flush_ms: int = 2_000,
    sensor_s: float = 5.0,
) -> list[Figure]:
    """The latency lanes "sasl" (on ``stack``) and "plaintext" (on its twin), with the tuned
    latency settings (``flush_ms``, ``sensor_s``) so that Kafka's hops weigh more in the total."""
    assert stack.settings.kafka_sasl, "the first stack is the one a user gets: with SASL"
    stack.settings.credentials  # noqa: B018 - written to the state directory if not yet there
    state = Path(tempfile.mkdtemp(prefix="cdc-lake-bench-plaintext-"))
    state.chmod(0o755)  # as the bench's own state directory: PostgreSQL runs as postgres
    twin = plaintext_twin(stack, state)
    try:
        say(f"sasl: the PLAINTEXT twin up in {sum(twin.up().values()):.1f}s")
        profiles = [Profile("sasl", flush_ms, sensor_s), Profile("plaintext", flush_ms, sensor_s)]
        figures = bench_latency(
            stack, duration_s, rate, profiles, rounds, say, {"plaintext": twin}, spark="server"
        )
    finally:
        twin.down()
        shutil.rmtree(state, ignore_errors=True)
    return [replace(f, benchmark="sasl cost") for f in figures]
