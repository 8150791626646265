"""The order items' inline chart (``cdc_lake/marts/chart.py``): the top customers as text bars,
short enough for Dagster's UI to show on the asset's page."""

from __future__ import annotations

import io
import random

from PIL import Image

from cdc_lake.marts.chart import INLINE_MD_LIMIT, PNG_COLORS, bars_markdown, chart_png


def _stats(n: int, id_len: int = 5) -> list[dict]:
    return [
        {"customer_id": f"C{i:0{id_len - 1}d}", "revenue": 1000.0 * (n - i) + 0.4} for i in range(n)
    ]


def test_bars_are_proportional_to_revenue_and_in_order():
    text = bars_markdown(_stats(4), top=10, width=16)
    rows = [line for line in text.splitlines() if line.startswith("| C")]
    assert [r.split("|")[1].strip() for r in rows] == ["C0000", "C0001", "C0002", "C0003"]
    assert [r.split("|")[2].strip() for r in rows] == ["$4,000", "$3,000", "$2,000", "$1,000"]
    bars = [r.split("|")[3].strip() for r in rows]
    assert bars == ["█" * 16, "█" * 12, "█" * 8, "█" * 4]


def test_it_stays_under_the_inline_limit_with_long_ids_by_showing_fewer_rows():
    short = bars_markdown(_stats(30))
    assert "top 10 customers" in short and len(short) < INLINE_MD_LIMIT
    long_ids = bars_markdown(_stats(30, id_len=60))
    assert len(long_ids) < INLINE_MD_LIMIT
    shown = sum(line.startswith("| C") for line in long_ids.splitlines())
    assert 1 <= shown < 10 and f"top {shown} customers" in long_ids


def test_no_customers_is_said():
    assert bars_markdown([]) == "no order items yet"


def test_the_png_is_a_palette_image_a_fraction_of_full_colors_size():
    """It is stored with every materialization: 91 customers' chart (Northwind's count) in a
    palette of PNG_COLORS colors, at the size it is drawn."""
    rng = random.Random(1)
    stats = sorted(
        (
            {"customer_id": f"C{i:04d}", "revenue": rng.uniform(1e3, 3e4),
             "orders": rng.randint(1, 30), "avg_quantity": rng.uniform(5, 40),
             "avg_revenue": rng.uniform(100, 900)}
            for i in range(91)
        ),
        key=lambda s: -s["revenue"],
    )  # fmt: skip
    png = chart_png(stats)
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.mode == "P" and image.size == (960, 360)
    assert len(image.getcolors() or []) <= PNG_COLORS
    # matplotlib's own RGBA output of this chart is about 75 kB.
    assert len(png) < 35_000
