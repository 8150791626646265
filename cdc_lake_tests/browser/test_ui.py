"""The Dagster UI in a real browser (Playwright driving Debian's Chromium) on the session stack:

1. the lineage upstream of the order items shows the outbox's five assets and their four edges,
   and upstream of the customers' Hudi table its four assets and three edges, as the
   definitions declare them, each edge from its upstream node to its downstream node;
2. materialising the Hudi table and the order items from the UI ("Materialize all" on the
   ``lake_refresh`` job's page, whose graph is those two assets) runs and succeeds;
3. after a workload, turning ``raw_cdc_files_sensor`` on in the UI makes exactly one
   ``lake_refresh`` run, which succeeds, and the next tick requests nothing more;
4. the order items page has the chart as its first metadata entry, rendered on the page without
   a click (text bars of the top customers, short enough for the UI to show inline); the PNG
   chart is the next entry, behind "[Show Markdown]";
5. the Hudi table's page shows the commit time, as a date, as its first metadata entry, and its
   freshness policy's state.

Asset names come from the definitions' keys, never written here. The tests run in this order
(2 gives the order items their chart; 3 starts from the lake 2 left). About 4-6 minutes on an
idle machine, most of it the two Spark runs.
"""

from __future__ import annotations

import contextlib
import re
import time

import dagster as dg
import psycopg2

from bench.outbox import HUDI_KEY, HUDI_OP, lake_refresh_job, raw_cdc_files_sensor
from cdc_lake.definitions import defs as load_defs
from cdc_lake.defs.keys import ORDER_ITEMS_KEY, table_keys
from cdc_lake.ops.instance import LOCATION, materializations, sensor_runs
from cdc_lake.ops.run_timeline import run_timeline
from cdc_lake.source.captured import CUSTOMERS, OUTBOX
from cdc_lake.source.workload import Workload
from cdc_lake.stack import LocalStack
from cdc_lake_tests.browser.conftest import Ui

RUN_TIMEOUT_S = 900


def _graph(sink: dg.AssetKey) -> dict[dg.AssetKey, set[dg.AssetKey]]:
    """``sink`` and every asset upstream of it, each with its upstream keys."""
    definitions = load_defs() if callable(load_defs) else load_defs
    graph = definitions.resolve_asset_graph()
    out: dict[dg.AssetKey, set[dg.AssetKey]] = {}
    todo = [sink]
    while todo:
        key = todo.pop()
        out[key] = set(graph.get(key).parent_keys)
        todo += [k for k in out[key] if k not in out]
    return out


def _asset_url(ui: Ui, key: dg.AssetKey, view: str) -> str:
    return f"{ui.url}/assets/{'/'.join(key.path)}?view={view}"


def _open(ui: Ui, page, url: str) -> None:
    page.goto(url, wait_until="domcontentloaded")


def _label_matches(label: str, name: str) -> bool:
    """A node shows the key's last part, shortened with an ellipsis in the middle when long."""
    if "…" not in label:
        return label == name
    head, tail = label.split("…", 1)
    return name.startswith(head) and name.endswith(tail) and len(name) > len(label) - 1


NODES_AND_EDGES_JS = """() => {
  const svg = document.querySelector('svg[class*="AssetNodeLineageGraph"]');
  if (!svg) return null;
  const nodes = [...svg.querySelectorAll('foreignObject')].flatMap(fo => {
    const name = fo.querySelector('[class*="AssetNode_assetName"]');
    return name ? [{label: name.textContent.trim(),
      x: +fo.getAttribute('x'), y: +fo.getAttribute('y'),
      w: +fo.getAttribute('width'), h: +fo.getAttribute('height')}] : [];
  });
  const edges = [...svg.querySelectorAll('path[marker-end]')].map(p => p.getAttribute('d'));
  return {nodes, edges};
}"""


def _wait_for_run(ui: Ui, run_id: str) -> dg.DagsterRun:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        run = ui.instance.get_run_by_id(run_id)
        if run is not None and run.is_finished:
            return run
        time.sleep(2)
    raise AssertionError(f"run {run_id} did not finish in {RUN_TIMEOUT_S}s")


def test_lineage_shows_each_table_s_assets_and_edges(ui: Ui, page):
    customers = table_keys(CUSTOMERS).history
    assert customers is not None  # their declaration keeps a history
    for sink, assets in ((ORDER_ITEMS_KEY, 5), (customers, 5)):
        _check_lineage(ui, page, sink, assets)


def _check_lineage(ui: Ui, page, sink: dg.AssetKey, assets: int) -> None:
    graph = _graph(sink)
    names = {key: key.path[-1] for key in graph}
    expected_edges = {(up, key) for key, ups in graph.items() for up in ups}
    # What the UI must show: a chain.
    assert len(graph) == assets and len(expected_edges) == assets - 1
    with ui.step(page, f"lineage-{sink.path[-1]}"):
        _open(ui, page, _asset_url(ui, sink, "lineage") + "&lineageScope=upstream&lineageDepth=9")
        page.wait_for_function(
            f"() => {{ const r = ({NODES_AND_EDGES_JS})(); "
            f"return r && r.nodes.length >= {len(graph)} && r.edges.length >= 1; }}",
            timeout=240_000,
        )
        page.wait_for_timeout(1000)  # let the layout settle before reading positions
        found = page.evaluate(NODES_AND_EDGES_JS)
    nodes, edges = found["nodes"], found["edges"]
    assert sorted(n["label"] for n in nodes) == sorted(
        next(n["label"] for n in nodes if _label_matches(n["label"], name))
        for name in names.values()
    ), (nodes, names)
    assert len(edges) == len(expected_edges), edges

    def node_at(point: tuple[float, float], side: str) -> dict:
        x, y = point

        # An edge leaves its upstream node's right side and ends at the downstream's left.
        def gap(n):
            edge_x = n["x"] + n["w"] if side == "right" else n["x"]
            inside = n["y"] <= y <= n["y"] + n["h"]
            return abs(edge_x - x) if inside else float("inf")

        best = min(nodes, key=gap)
        assert gap(best) < 40, (x, y, side, nodes)
        return best

    drawn = set()
    for d in edges:
        points = [(float(x), float(y)) for x, y in re.findall(r"(-?[\d.]+),(-?[\d.]+)", d)]
        start, end = node_at(points[0], "right"), node_at(points[-1], "left")
        drawn.add((start["label"], end["label"]))
    for up, down in expected_edges:
        assert any(
            _label_matches(a, names[up]) and _label_matches(b, names[down]) for a, b in drawn
        ), (up, down, drawn)


def test_materialize_hudi_and_order_items_from_the_ui(ui: Ui, page):
    before = {r.dagster_run.run_id for r in ui.instance.get_run_records()}
    with ui.step(page, "materialize-lake-refresh"):
        # The job's page shows exactly its assets, the Hudi table and the order items.
        _open(ui, page, f"{ui.url}/locations/{LOCATION}/jobs/{lake_refresh_job.name}")
        page.locator("button", has_text="Materialize all").first.click()
        # This fresh instance never materialized the raw asset: the UI asks to confirm.
        confirm = page.get_by_role("button", name="Confirm")
        with contextlib.suppress(Exception):
            confirm.wait_for(timeout=20_000)
        if confirm.is_visible():
            confirm.click()
    deadline = time.monotonic() + 120
    new = []
    while not new and time.monotonic() < deadline:
        new = [
            r.dagster_run
            for r in ui.instance.get_run_records()
            if r.dagster_run.run_id not in before
        ]
        time.sleep(1)
    assert len(new) == 1, new
    run = _wait_for_run(ui, new[0].run_id)
    with ui.step(page, "materialize-run"):
        _open(ui, page, f"{ui.url}/runs/{run.run_id}")
        page.get_by_text("Success", exact=False).first.wait_for()
    assert run.status == dg.DagsterRunStatus.SUCCESS, run.run_id
    done = set(materializations(ui.instance, run.run_id))
    assert done == {HUDI_KEY, ORDER_ITEMS_KEY}


def test_sensor_turned_on_after_a_workload_runs_one_refresh(
    ui: Ui, page, local_stack: LocalStack, resources
):
    from cdc_lake.streaming.topics import wait_for_consumer

    conn = psycopg2.connect(local_stack.settings.pg_dsn())
    try:
        assert Workload(conn, seed=77).run(10, rate_per_s=0)
    finally:
        conn.close()
    cdc = resources["cdc"]
    time.sleep(3)  # Debezium publishes, then the sink flushes what the topic holds
    wait_for_consumer(
        resources["kafka"].client_conf(), cdc.sink_consumer_group, cdc.topic_of(OUTBOX), 120
    )
    name = raw_cdc_files_sensor.name
    since = time.time()
    with ui.step(page, "sensor-on"):
        _open(ui, page, f"{ui.url}/locations/{LOCATION}/sensors/{name}")
        toggle = page.locator("input[type=checkbox]").first  # the "Running" switch
        toggle.wait_for(state="attached")
        assert not toggle.is_checked()
        toggle.locator("xpath=..").click()  # the input itself is hidden behind the switch
        page.wait_for_function(
            "() => document.querySelector('input[type=checkbox]').checked", timeout=30_000
        )
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        runs: list[dg.DagsterRun] = []
        while time.monotonic() < deadline:
            runs = sensor_runs(ui.instance, name, since)
            if runs and all(r.is_finished for r in runs):
                break
            time.sleep(2)
        assert len(runs) == 1, runs
        run = runs[0]
        assert run.job_name == lake_refresh_job.name
        assert run.status == dg.DagsterRunStatus.SUCCESS, run.run_id
        # The daemon's path, part by part: the run queue, a run worker of its own, the steps.
        timeline = run_timeline(ui.instance, run.run_id)
        assert timeline.queued is not None and timeline.launch is not None, timeline
        assert HUDI_OP in timeline.steps and timeline.total is not None
        spent = timeline.queued + timeline.launch + sum(timeline.steps.values())
        assert spent <= timeline.total
        # The next tick after the run sees the lake holding everything: no second run.
        finished = time.time()
        ticks = _wait_for_tick_after(ui, name, finished)
        assert ticks[0].status.value == "SKIPPED", ticks[0]
        assert len(sensor_runs(ui.instance, name, since)) == 1
        with ui.step(page, "sensor-ticks"):
            # The tick table shows the latest 25 ticks of every status; on a slow machine the
            # skipped ticks during the run push the requesting one off it. The "Requested"
            # filter (``status=success``) keeps only ticks that requested runs.
            _open(ui, page, f"{ui.url}/locations/{LOCATION}/sensors/{name}?status=success")
            page.get_by_text("1 run requested").first.wait_for()
    finally:
        with ui.step(page, "sensor-off"):
            toggle = page.locator("input[type=checkbox]").first
            if toggle.is_checked():
                toggle.locator("xpath=..").click()


def _wait_for_tick_after(ui: Ui, sensor: str, after: float) -> list:
    (state,) = [s for s in ui.instance.all_instigator_state() if s.instigator_name == sensor]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ticks = ui.instance.get_ticks(state.instigator_origin_id, state.selector_id, limit=5)
        later = [t for t in ticks if t.timestamp > after and t.status.value != "STARTED"]
        if later:
            return later
        time.sleep(2)
    raise AssertionError(f"no tick of {sensor} after the run within 120s")


def test_the_chart_shows_on_the_order_items_page_without_a_click(ui: Ui, page):
    items = materializations(ui.instance, _last_run_of(ui, ORDER_ITEMS_KEY))[ORDER_ITEMS_KEY]
    top = items.metadata["top_customers"].value.records[0].data["customer"]  # type: ignore[union-attr]
    with ui.step(page, "order-items-page"):
        _open(ui, page, _asset_url(ui, ORDER_ITEMS_KEY, "overview"))
        first = page.locator("table tbody tr").first
        first.locator("td").first.wait_for()
        assert first.locator("td").first.inner_text().strip() == "chart"
        # The bars render in the row itself: a table naming the top customer, no click.
        assert "[Show Markdown]" not in first.inner_text()
        first.locator("table").first.get_by_text(top, exact=True).wait_for(state="visible")
        assert "█" in first.inner_text()
    with ui.step(page, "order-items-chart-png"):
        row = page.locator("table tbody tr", has=page.locator("td", has_text="chart_png")).first
        row.get_by_text("[Show Markdown]").click()
        chart = page.locator("img[src^='data:image/png']").first
        chart.wait_for(state="visible")
        chart.scroll_into_view_if_needed()
        box = chart.bounding_box()
    assert box is not None and box["width"] > 100 and box["height"] > 100, box
    assert chart.evaluate("img => img.complete && img.naturalWidth > 0")


def test_the_hudi_page_shows_the_commit_time_first_and_its_freshness(ui: Ui, page):
    with ui.step(page, "hudi-page"):
        _open(ui, page, _asset_url(ui, HUDI_KEY, "overview"))
        # The metadata table (the columns' table comes before it on this page).
        rows = page.locator("table", has=page.locator("td", has_text="commit_instant"))
        first = rows.first.locator("tbody tr").first
        first.locator("td").first.wait_for()
        first.scroll_into_view_if_needed()
        assert first.locator("td").first.inner_text().strip() == "commit_time"
        shown = first.locator("td").last.inner_text().strip()
        # Freshness is on the asset's page (the catalog's list shows only the status).
        page.get_by_text("Freshness policy", exact=True).first.wait_for()
        page.get_by_text("Passing", exact=True).first.wait_for()
    # A date as people read it, not the raw instant (20261126115208658).
    assert re.search(r"[A-Z][a-z]{2}", shown) and not re.fullmatch(r"\d{17}", shown), shown


def _last_run_of(ui: Ui, key: dg.AssetKey) -> str:
    event = ui.instance.get_latest_materialization_event(key)
    assert event is not None and event.run_id, f"{key} was never materialized"
    return event.run_id
