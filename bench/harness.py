"""Paired benchmark runs and their report.

Every comparison runs both sides in one invocation, alternating A B A B over ``reps``
repetitions, and reports medians and their ratio: on a shared machine a single absolute time
means little. Results are printed as a table, written as JSON, and appended, with machine info
and the exact command, to ``docs/benchmarks-log.md`` (``docs/benchmarks.md`` holds today's
figure for each goal).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class Figure:
    benchmark: str
    name: str
    value: float
    unit: str
    goal: str = ""
    note: str = ""


@dataclass
class Report:
    figures: list[Figure] = field(default_factory=list)
    load: dict[str, float] | None = None  # ``LoadSampler.summary()`` of the run
    sections: list[str] = field(default_factory=list)  # markdown after the figures (``soak``)

    def add(self, *figures: Figure) -> None:
        self.figures.extend(figures)

    def table(self) -> str:
        lines = ["| benchmark | figure | value | goal | note |", "|---|---|---|---|---|"]
        for f in self.figures:
            value = f"{f.value:,.3f} {f.unit}".strip()
            lines.append(f"| {f.benchmark} | {f.name} | {value} | {f.goal} | {f.note} |")
        return "\n".join(lines)


def paired(
    a: Callable[[], Any], b: Callable[[], Any], reps: int, progress: Callable[[str], None]
) -> tuple[list[float], list[float]]:
    """Seconds of ``a`` and ``b``, run alternately ``reps`` times each."""
    ta: list[float] = []
    tb: list[float] = []
    for i in range(reps):
        for label, fn, out in (("A", a, ta), ("B", b, tb)):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
            progress(f"  rep {i + 1}/{reps}: {label} {out[-1]:.3f}s")
    return ta, tb


def rotation(items: tuple[T, ...], rep: int) -> tuple[T, ...]:
    """The sides of a paired benchmark in repetition ``rep``: each repetition starts one side
    later (A B C D, B C D A, ...), so no side always goes first; the order is not neutral (the
    table created first in a run is the slower one: ``bench.commit_cost``'s control)."""
    k = rep % len(items)
    return items[k:] + items[:k]


class LoadSampler:
    """The machine's 1-minute load average, sampled every ``every_s`` seconds while a run lasts,
    with ``busy`` busy-looping processes beside it: a load that the command line reproduces
    (``python -m bench --background-load N``), where another suite's would not."""

    def __init__(self, busy: int = 0, every_s: float = 5.0) -> None:
        self.busy, self.every_s = busy, every_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._procs: list[subprocess.Popen[bytes]] = []
        self._thread = threading.Thread(target=self._sample, name="load-sampler", daemon=True)

    def _sample(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self.every_s):
                return

    def __enter__(self) -> LoadSampler:
        # Each loop ends with its parent, however the benchmark ends.
        burn = "import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n    pass"
        try:
            for _ in range(self.busy):
                self._procs.append(subprocess.Popen([sys.executable, "-c", burn]))
            self._thread.start()
        except BaseException:
            self._kill()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._kill()

    def _kill(self) -> None:
        for proc in self._procs:
            proc.kill()
            proc.wait()

    def summary(self) -> dict[str, float]:
        xs = self.samples or [os.getloadavg()[0]]
        return {
            "busy_processes": self.busy,
            "samples": len(xs),
            "min": min(xs),
            "median": statistics.median(xs),
            "max": max(xs),
        }

    @staticmethod
    def describe(load: dict[str, float]) -> str:
        busy = int(load["busy_processes"])
        beside = f", with {busy} busy-looping process(es) beside it" if busy else ""
        return (
            f"load average (1 min) during the run: median {load['median']:.1f}, "
            f"{load['min']:.1f}-{load['max']:.1f} over {int(load['samples'])} samples{beside}"
        )


def materialize(assets: Sequence[Any], **kwargs: Any) -> Any:
    """``dg.materialize`` with Dagster's console at INFO, as the demo runs: the benchmarks'
    progress lines and the assets' own, not every engine event at DEBUG."""
    import dagster as dg

    from cdc_lake.ops.demo import QUIET

    return dg.materialize(assets, run_config=QUIET, **kwargs)


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def machine_info() -> dict[str, str]:
    mem = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) // 1024 // 1024} GiB"
    except OSError:
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    return {
        "cpus": str(os.cpu_count()),
        "memory": mem,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "java": java.splitlines()[0] if java else "",
    }


def write_outputs(report: Report, json_path: Path, md_path: Path | None, command: str) -> None:
    info = machine_info()
    payload = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "command": command,
        "machine": info,
        "figures": [asdict(f) for f in report.figures],
        "load": report.load,
        "sections": report.sections,
    }
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(payload, indent=2))
    if md_path is not None:
        section = (
            f"\n## Run of {payload['when']}\n\n"
            f"Command: `{command}`\n\n"
            f"Machine: {info['cpus']} CPUs, {info['memory']}, Python {info['python']}, "
            f"{info['java']}, {info['platform']}"
            + (f"; {LoadSampler.describe(report.load)}" if report.load else "")
            + f"\n\n{report.table()}\n"
            + "".join(f"\n{section}\n" for section in report.sections)
        )
        md_path.parent.mkdir(parents=True, exist_ok=True)
        if not md_path.exists():
            md_path.write_text(
                "# Benchmarks\n\nAppended by `python -m bench`; newest run last. Figures are "
                "medians of paired, alternating runs; ratios compare two sides measured in "
                "the same run.\n"
            )
        with md_path.open("a") as f:
            f.write(section)


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
