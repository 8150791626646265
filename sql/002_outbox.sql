-- The transactional outbox: one row per order in datalake.cdc_events, kept current by triggers
-- on orders and order_details, in the same transaction as the change itself.
--
-- Semantics:
--   * Any INSERT/UPDATE/DELETE on orders or order_details rebuilds that order's row (an upsert).
--     A new order with n lines written in one transaction therefore yields n+1 row versions; the
--     last one holds every line.
--   * Deleting an order deletes its row, which Debezium turns into a delete event.
--   * REPLICA IDENTITY FULL: updates and deletes carry whole old rows, TOASTed JSONB included.
--   * Rerunning this file is safe: everything is CREATE OR REPLACE / IF NOT EXISTS.
SET search_path TO datalake;

CREATE TABLE IF NOT EXISTS cdc_events (
    order_id integer PRIMARY KEY,
    customer_id bpchar,
    order_date date,
    required_date date,
    shipped_date date,
    order_items jsonb,
    products jsonb,
    customer jsonb,
    employee jsonb,
    shipper jsonb,
    shipment jsonb,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
ALTER TABLE cdc_events REPLICA IDENTITY FULL;

-- The outbox rows for a set of orders (NULL: all orders), built from the Northwind tables.
-- It returns the columns it fills, not the table's row type, so a column added to the table
-- (docs/schema-changes.md) does not break order writes before this function
-- fills it: refresh_cdc_events names the columns it writes and leaves the others alone.
-- (Dropped first: an earlier release returned SETOF cdc_events, and a function's result type
-- cannot be replaced.)
DROP FUNCTION IF EXISTS cdc_event_rows(integer[]);
CREATE FUNCTION cdc_event_rows(p_order_ids integer[])
RETURNS TABLE (
    order_id integer,
    customer_id bpchar,
    order_date date,
    required_date date,
    shipped_date date,
    order_items jsonb,
    products jsonb,
    customer jsonb,
    employee jsonb,
    shipper jsonb,
    shipment jsonb,
    updated_at timestamptz
)
LANGUAGE sql STABLE AS $$
    SELECT
        o.order_id::integer,
        o.customer_id,
        o.order_date,
        o.required_date,
        o.shipped_date,
        items.order_items,
        items.products,
        to_jsonb(c),
        emp.employee,
        to_jsonb(sh),
        jsonb_build_object(
            'freight', o.freight,
            'ship_via', o.ship_via,
            'ship_name', o.ship_name,
            'ship_address', o.ship_address,
            'ship_city', o.ship_city,
            'ship_region', o.ship_region,
            'ship_postal_code', o.ship_postal_code,
            'ship_country', o.ship_country
        ),
        clock_timestamp()
    FROM datalake.orders o
    LEFT JOIN datalake.customers c ON c.customer_id = o.customer_id
    LEFT JOIN datalake.shippers sh ON sh.shipper_id = o.ship_via
    LEFT JOIN LATERAL (
        SELECT
            jsonb_agg(
                jsonb_build_object(
                    'product_id', d.product_id,
                    'unit_price', d.unit_price,
                    'quantity', d.quantity,
                    'discount', d.discount
                ) ORDER BY d.product_id
            ) AS order_items,
            jsonb_agg(
                (to_jsonb(p) - 'supplier_id' - 'category_id')
                || jsonb_build_object(
                    'supplier', to_jsonb(s),
                    'category', to_jsonb(cat) - 'picture'
                ) ORDER BY d.product_id
            ) AS products
        FROM datalake.order_details d
        JOIN datalake.products p ON p.product_id = d.product_id
        LEFT JOIN datalake.suppliers s ON s.supplier_id = p.supplier_id
        LEFT JOIN datalake.categories cat ON cat.category_id = p.category_id
        WHERE d.order_id = o.order_id
    ) items ON true
    LEFT JOIN LATERAL (
        SELECT
            (to_jsonb(e) - 'photo' - 'notes' - 'photo_path')
            || jsonb_build_object(
                'territories',
                COALESCE(
                    (SELECT jsonb_agg(
                                jsonb_build_object(
                                    'territory_id', t.territory_id,
                                    'territory_description', trim(t.territory_description),
                                    'region_id', r.region_id,
                                    'region_description', trim(r.region_description)
                                ) ORDER BY t.territory_id
                            )
                     FROM datalake.employee_territories et
                     JOIN datalake.territories t ON t.territory_id = et.territory_id
                     JOIN datalake.region r ON r.region_id = t.region_id
                     WHERE et.employee_id = e.employee_id),
                    '[]'::jsonb
                )
            ) AS employee
        FROM datalake.employees e
        WHERE e.employee_id = o.employee_id
    ) emp ON true
    WHERE p_order_ids IS NULL OR o.order_id = ANY (p_order_ids)
$$;

-- Bring the outbox rows of these orders (NULL: all) up to date: upsert the ones that exist,
-- delete the rest.
-- A row whose content did not change is not rewritten, so it emits no event.
CREATE OR REPLACE FUNCTION refresh_cdc_events(p_order_ids integer[])
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM datalake.cdc_events ev
    WHERE (p_order_ids IS NULL OR ev.order_id = ANY (p_order_ids))
      AND NOT EXISTS (SELECT 1 FROM datalake.orders o WHERE o.order_id = ev.order_id);

    INSERT INTO datalake.cdc_events AS ev (order_id, customer_id, order_date, required_date,
        shipped_date, order_items, products, customer, employee, shipper, shipment, updated_at)
    SELECT * FROM datalake.cdc_event_rows(p_order_ids)
    ON CONFLICT (order_id) DO UPDATE SET
        customer_id = EXCLUDED.customer_id,
        order_date = EXCLUDED.order_date,
        required_date = EXCLUDED.required_date,
        shipped_date = EXCLUDED.shipped_date,
        order_items = EXCLUDED.order_items,
        products = EXCLUDED.products,
        customer = EXCLUDED.customer,
        employee = EXCLUDED.employee,
        shipper = EXCLUDED.shipper,
        shipment = EXCLUDED.shipment,
        updated_at = EXCLUDED.updated_at
    WHERE (ev.customer_id, ev.order_date, ev.required_date, ev.shipped_date, ev.order_items,
           ev.products, ev.customer, ev.employee, ev.shipper, ev.shipment)
          IS DISTINCT FROM
          (EXCLUDED.customer_id, EXCLUDED.order_date, EXCLUDED.required_date,
           EXCLUDED.shipped_date, EXCLUDED.order_items, EXCLUDED.products, EXCLUDED.customer,
           EXCLUDED.employee, EXCLUDED.shipper, EXCLUDED.shipment);
END
$$;

-- The initial load: every existing order. Returns the number of outbox rows afterwards.
CREATE OR REPLACE FUNCTION load_cdc_events()
RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM datalake.refresh_cdc_events(NULL);
    RETURN (SELECT count(*) FROM datalake.cdc_events);
END
$$;

CREATE OR REPLACE FUNCTION cdc_events_from_orders()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM datalake.refresh_cdc_events(ARRAY[OLD.order_id::integer]);
        RETURN OLD;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.order_id IS DISTINCT FROM OLD.order_id THEN
        PERFORM datalake.refresh_cdc_events(ARRAY[OLD.order_id::integer]);
    END IF;
    PERFORM datalake.refresh_cdc_events(ARRAY[NEW.order_id::integer]);
    RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS cdc_events_orders ON orders;
CREATE TRIGGER cdc_events_orders
    AFTER INSERT OR UPDATE OR DELETE ON orders
    FOR EACH ROW EXECUTE FUNCTION cdc_events_from_orders();

DROP TRIGGER IF EXISTS cdc_events_order_details ON order_details;
CREATE TRIGGER cdc_events_order_details
    AFTER INSERT OR UPDATE OR DELETE ON order_details
    FOR EACH ROW EXECUTE FUNCTION cdc_events_from_orders();

-- Publish the outbox table (pgoutput); 003_debezium.sql adds Debezium's heartbeat and signal
-- tables, and no other table is published.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'cdc_publication') THEN
        CREATE PUBLICATION cdc_publication FOR TABLE datalake.cdc_events;
    END IF;
END
$$;
