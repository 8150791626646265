"""Charts of the order items, as in the reference dashboard: revenue of the top customers, and
each customer's average quantity against average revenue, sized by orders.

The Spark app reports per-customer figures as JSON (``cdc_lake.marts.figures.customer_rows``);
the chart is drawn here, in the Dagster process, so matplotlib never has to be on EMR.

``bars_markdown`` is the same top customers as a Markdown table of text bars, kept under
``INLINE_MD_LIMIT`` characters: Dagster's UI shows Markdown metadata that short on the asset's
page itself, and anything longer (the PNG) behind a "[Show Markdown]" click.

The PNG goes into every materialization's metadata, twice in the event log (the step's output
and the materialization), so its size is a slope of the Dagster instance's growth
(``python -m bench --only soak``): it is written with a palette of ``PNG_COLORS`` colors, about
a quarter of the bytes of matplotlib's full-color output, with no visible change to the chart.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from typing import Any

PNG_COLORS = 64
# Northwind's prices are in US dollars; so are the order items' revenue figures.
CURRENCY_SYMBOL = "$"
# Dagster 1.13's UI renders Markdown metadata inline when it is shorter than this.
INLINE_MD_LIMIT = 1000
_EIGHTHS = " ▏▎▍▌▋▊▉"


def _bar(value: float, most: float, width: int) -> str:
    eighths = round(width * 8 * value / most) if most > 0 else 0
    return "█" * (eighths // 8) + (_EIGHTHS[eighths % 8].strip())


def bars_markdown(stats: Sequence[dict[str, Any]], top: int = 10, width: int = 20) -> str:
    """The top customers by revenue as a Markdown table with a text bar each, the longest that
    fits under ``INLINE_MD_LIMIT`` characters (fewer rows if ids are long)."""
    for rows in range(min(top, len(stats)), 0, -1):
        head = list(stats[:rows])
        most = max(float(s["revenue"]) for s in head)
        lines = [
            f"**Revenue of the top {rows} customers (USD)**",
            "",
            "| customer | revenue | |",
            "|---|--:|---|",
            *(
                f"| {s['customer_id']} | {CURRENCY_SYMBOL}{float(s['revenue']):,.0f} "
                f"| {_bar(float(s['revenue']), most, width)} |"
                for s in head
            ),
        ]
        text = "\n".join(lines)
        if len(text) < INLINE_MD_LIMIT:
            return text
    return "no order items yet"


def chart_png(stats: Sequence[dict[str, Any]], top: int = 10) -> bytes:
    import matplotlib

    matplotlib.use("Agg")  # no display here
    import matplotlib.pyplot as plt

    fig, (bars, scatter) = plt.subplots(1, 2, figsize=(12, 4.5), dpi=80)
    head = list(stats[:top])[::-1]
    bars.barh([s["customer_id"] for s in head], [s["revenue"] for s in head])
    bars.set_title(f"Revenue of the top {len(head)} customers (USD)")
    bars.set_xlabel("revenue (USD)")
    bars.xaxis.set_major_formatter(f"{CURRENCY_SYMBOL}{{x:,.0f}}")
    scatter.scatter(
        [s["avg_quantity"] for s in stats],
        [s["avg_revenue"] for s in stats],
        s=[12 * s["orders"] for s in stats],
        alpha=0.5,
    )
    scatter.set_title("Per customer: average quantity vs average revenue (size: orders)")
    scatter.set_xlabel("average quantity per line")
    scatter.set_ylabel("average revenue per line (USD)")
    scatter.yaxis.set_major_formatter(f"{CURRENCY_SYMBOL}{{x:,.0f}}")
    fig.tight_layout()
    drawn = io.BytesIO()
    fig.savefig(drawn, format="png")
    plt.close(fig)
    from PIL import Image  # matplotlib's own dependency

    image = Image.open(drawn).convert("RGB")
    out = io.BytesIO()
    image.quantize(colors=PNG_COLORS, method=Image.Quantize.MEDIANCUT).save(
        out, format="PNG", optimize=True
    )
    return out.getvalue()


def chart_markdown(png: bytes) -> str:
    return f"![order items](data:image/png;base64,{base64.b64encode(png).decode()})"
