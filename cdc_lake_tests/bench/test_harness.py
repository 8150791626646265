"""The benchmark report: the load it ran under, sampled and written with the figures."""

from __future__ import annotations

import json
import time

from bench.harness import Figure, LoadSampler, Report, write_outputs


def test_the_load_is_sampled_with_busy_processes_beside_and_reported(tmp_path):
    sampler = LoadSampler(busy=1, every_s=0.05)
    with sampler:
        procs = list(sampler._procs)
        assert len(procs) == 1 and procs[0].poll() is None  # burning while the run lasts
        time.sleep(0.3)
    assert all(p.poll() is not None for p in procs)  # and stopped after it
    load = sampler.summary()
    assert load["busy_processes"] == 1 and load["samples"] >= 3
    assert 0 <= load["min"] <= load["median"] <= load["max"]

    report = Report([Figure("b", "f", 1.0, "s")], load=load)
    out_json, out_md = tmp_path / "r.json", tmp_path / "benchmarks.md"
    write_outputs(report, out_json, out_md, "python -m bench --background-load 1")
    assert json.loads(out_json.read_text())["load"] == load
    text = out_md.read_text()
    assert f"median {load['median']:.1f}" in text and "with 1 busy-looping process(es)" in text
