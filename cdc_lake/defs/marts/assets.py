"""The flattened order items: one row per order line of the Hudi table's live orders (the lake
table of the captured table whose declaration lists ``order_items`` in its ``marts``).

A Hudi table keyed by (order_id, product_id), kept in step by the same Spark app locally and on
EMR (``cdc_lake/spark_apps/order_items.py``): each build applies the change feed of the
``cdc_events`` commits since the one it was built from, rebuilding only the orders that changed
and removing the lines of deleted ones; a full rebuild from the snapshot happens on the first
build, when the change feed cannot cover the range, or on run config ``rebuild``. The app also
evaluates the two checks (revenue never negative, every line's order live in the lake) and
reports the per-customer figures, all from what the build changed. In production Hudi syncs the
table into the Glue database for Athena.

Unchanged table, no build: each build records the Hudi commit it read
(``hudi_commit_instant``). When the table's newest commit (one listing of its timeline on S3,
no Spark) is still that one and the items table is there, the run builds nothing: it
materializes again with the last build's figures and check results and ``unchanged: true``
(``cdc_lake/defs/unchanged.py``). The data version is the Hudi commit the items were built from.
"""

import dagster as dg
from dagster_aws.s3 import S3Resource
from pydantic import Field

from cdc_lake.defs import stage_attrs
from cdc_lake.defs.keys import ORDER_ITEMS_KEY, table_keys
from cdc_lake.defs.unchanged import carried_check_results, carried_metadata, latest_materialization
from cdc_lake.lake.timeline import instant_time, newest_commit_instant
from cdc_lake.marts.chart import CURRENCY_SYMBOL, bars_markdown, chart_markdown, chart_png
from cdc_lake.marts.items_table import ItemsTableConfig
from cdc_lake.resources.lake import LakeResource
from cdc_lake.resources.spark import SparkLauncher
from cdc_lake.source.captured import mart_table
from cdc_lake.spark_apps.params import OrderItemsReport


class OrderItemsConfig(dg.Config):
    rebuild: bool = Field(
        default=False,
        description="Rebuild in full from the Hudi snapshot, even if the table has not changed "
        "since the last build, instead of applying its change feed.",
    )


# The captured table whose lake table the items are built from: its declaration lists them.
ORDERS = mart_table(ItemsTableConfig.table_name)


@dg.asset(
    key=ORDER_ITEMS_KEY,
    deps=[table_keys(ORDERS).hudi],
    kinds={"spark", "hudi", "s3"},
    **stage_attrs(__name__, owners=["team:analytics"], fresh=True),
    check_specs=[
        dg.AssetCheckSpec(
            OrderItemsReport.REVENUE_CHECK,
            asset=ORDER_ITEMS_KEY,
            description="revenue >= 0 on every row",
        ),
        dg.AssetCheckSpec(
            OrderItemsReport.ORDERS_EXIST_CHECK,
            asset=ORDER_ITEMS_KEY,
            description="every row's order exists in the Hudi table",
        ),
    ],  # fmt: skip
)
def order_items(
    context: dg.AssetExecutionContext,
    config: OrderItemsConfig,
    spark_jobs: SparkLauncher,
    lake: LakeResource,
    s3: S3Resource,
) -> dg.MaterializeResult:
    """One row per order item: customer_id, order_id, order_date, product_id, product_name,
    unit_price, quantity, discount and revenue = unit_price × quantity × (1 − discount)."""
    if not config.rebuild and (same := _unchanged(context, lake, s3)) is not None:
        return same
    params = lake.order_items_params(rebuild=config.rebuild)
    outcome = spark_jobs.run(context, params)
    stats = outcome.metadata[OrderItemsReport.CUSTOMER_STATS].value
    # The charts first: the UI lists metadata in this order, and shows the short one inline.
    outcome.metadata = {
        "chart": dg.MetadataValue.md(bars_markdown(stats)),
        "chart_png": dg.MetadataValue.md(chart_markdown(chart_png(stats))),
        "top_customers": top_customers_table(stats[:5]),
        **outcome.metadata,
    }
    extra = {}
    if (glue_table := lake.order_items_glue_table) is not None:
        extra["glue_table"] = dg.MetadataValue.text(glue_table)  # synced by Hudi as it commits
    m = outcome.metadata
    context.log.info(
        f"{m['dagster/row_count'].value} order items, "
        f"revenue {CURRENCY_SYMBOL}{m['total_revenue_usd'].value:,.2f}; "
        f"{m['build'].value} build, {m['orders_rebuilt'].value} orders rebuilt"
    )
    built_from = str(outcome.metadata[OrderItemsReport.HUDI_COMMIT_INSTANT].value)
    if (when := instant_time(built_from)) is not None:
        extra["hudi_commit_time"] = dg.MetadataValue.timestamp(when)
    extra["unchanged"] = dg.MetadataValue.bool(False)
    version = dg.DataVersion(built_from) if built_from != "none" else None
    return outcome.materialize_result(context, data_version=version, **extra)


def _unchanged(
    context: dg.AssetExecutionContext, lake: LakeResource, s3: S3Resource
) -> dg.MaterializeResult | None:
    """The carried-forward result when the items were built from the table's newest commit."""
    previous = latest_materialization(context.instance, ORDER_ITEMS_KEY)
    built_from = previous[1].get(OrderItemsReport.HUDI_COMMIT_INSTANT) if previous else None
    if previous is None or built_from is None or built_from.value == "none":
        return None
    client = s3.get_client()
    newest = newest_commit_instant(client, lake.lake_bucket, lake.table_prefix_of(ORDERS))
    if newest != built_from.value:
        return None
    table_file = lake.order_items_prefix.strip("/") + "/.hoodie/hoodie.properties"
    items = client.list_objects_v2(Bucket=lake.lake_bucket, Prefix=table_file, MaxKeys=1)
    if not items.get("KeyCount"):
        return None  # the items table is gone, or is an earlier release's Parquet: build it
    checks = carried_check_results(context, ORDER_ITEMS_KEY)
    if checks is None:
        return None
    context.log.info(f"the Hudi table is still at commit {built_from.value}: nothing to rebuild")
    return dg.MaterializeResult(
        metadata=carried_metadata(previous, unchanged=dg.MetadataValue.bool(True)),
        check_results=checks,
        data_version=dg.DataVersion(str(built_from.value)),
    )


def top_customers_table(stats: list[dict]) -> dg.TableMetadataValue:
    return dg.MetadataValue.table(
        records=[
            dg.TableRecord(
                {"customer": s["customer_id"], "revenue_usd": s["revenue"], "orders": s["orders"]}
            )
            for s in stats
        ],
        schema=dg.TableSchema(
            columns=[
                dg.TableColumn("customer", "string"),
                dg.TableColumn("revenue_usd", "float"),
                dg.TableColumn("orders", "int"),
            ]
        ),
    )
