"""A seeded stream of realistic changes to the Northwind tables, at a given rate.

Each change is one transaction, as an application would make it:
  - ``new_order``: an order and its 1-5 lines, inserted together;
  - ``ship``: an order's shipped_date set;
  - ``edit_line``: one line's quantity and discount changed;
  - ``delete``: an order and its lines deleted.
The outbox triggers turn each into one or more outbox row changes. With the same seed, the same
starting data and the same count, the same changes are made.

Failures
    The workload does not reconnect: a lost connection (PostgreSQL restarted or stopped) ends
    the run with psycopg2's error; the change in flight is rolled back by the server.
    ``applied`` holds the changes committed until then, and ``cdc-lake workload`` reports them
    in one line and exits 1. Running it again goes on with new changes.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from psycopg2.extensions import connection as PgConnection

DEFAULT_MIX = {"new_order": 0.3, "ship": 0.3, "edit_line": 0.3, "delete": 0.1}


@dataclass(frozen=True)
class Change:
    kind: str
    order_id: int
    committed_at: float  # time.time() right after COMMIT


class Workload:
    def __init__(self, conn: PgConnection, seed: int = 7, mix: dict[str, float] | None = None):
        self.conn = conn
        self.rng = random.Random(seed)
        self.mix = mix or DEFAULT_MIX
        self.applied: list[Change] = []  # committed so far in the current run

    def _random_order(self, cur, where: str = "TRUE") -> int | None:
        cur.execute("SELECT min(order_id), max(order_id) FROM datalake.orders")
        lo, hi = cur.fetchone()
        if lo is None:
            return None
        pivot = self.rng.randint(lo, hi)
        cur.execute(
            f"SELECT order_id FROM datalake.orders WHERE order_id >= %s AND {where} "
            "ORDER BY order_id LIMIT 1",
            (pivot,),
        )
        row = cur.fetchone()
        if row is None:
            cur.execute(
                f"SELECT order_id FROM datalake.orders WHERE {where} ORDER BY order_id LIMIT 1"
            )
            row = cur.fetchone()
        return row[0] if row else None

    def new_order(self, cur) -> int:
        cur.execute("SELECT coalesce(max(order_id), 10247) + 1 FROM datalake.orders")
        order_id = cur.fetchone()[0]
        cur.execute("SELECT customer_id FROM datalake.customers ORDER BY customer_id")
        customers = [r[0] for r in cur.fetchall()]
        cur.execute("SELECT product_id, unit_price FROM datalake.products ORDER BY product_id")
        products = cur.fetchall()
        order_date = dt.date(1998, 5, 6) + dt.timedelta(days=self.rng.randint(0, 60))
        cur.execute(
            "INSERT INTO datalake.orders (order_id, customer_id, employee_id, order_date,"
            " required_date, ship_via, freight, ship_name, ship_city, ship_country)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                order_id,
                self.rng.choice(customers),
                self.rng.randint(1, 9),
                order_date,
                order_date + dt.timedelta(days=28),
                self.rng.randint(1, 3),
                round(self.rng.uniform(1, 500), 2),
                "Workload Market",
                "Seattle",
                "USA",
            ),
        )
        for product_id, price in self.rng.sample(products, self.rng.randint(1, 5)):
            cur.execute(
                "INSERT INTO datalake.order_details VALUES (%s, %s, %s, %s, %s)",
                (order_id, product_id, price, self.rng.randint(1, 50), self.rng.choice([0, 0.1])),
            )
        return order_id

    def ship(self, cur) -> int | None:
        order_id = self._random_order(cur, "shipped_date IS NULL") or self._random_order(cur)
        if order_id is not None:
            cur.execute(
                "UPDATE datalake.orders SET shipped_date = coalesce(order_date, DATE '1998-05-06')"
                " + %s WHERE order_id = %s",
                (self.rng.randint(1, 30), order_id),
            )
        return order_id

    def edit_line(self, cur) -> int | None:
        order_id = self._random_order(
            cur,
            "EXISTS (SELECT 1 FROM datalake.order_details d WHERE d.order_id = orders.order_id)",
        )
        if order_id is not None:
            cur.execute(
                "UPDATE datalake.order_details SET quantity = %s, discount = %s WHERE ctid = "
                "(SELECT ctid FROM datalake.order_details WHERE order_id = %s LIMIT 1)",
                (self.rng.randint(1, 80), self.rng.choice([0, 0.05, 0.15]), order_id),
            )
        return order_id

    def delete(self, cur) -> int | None:
        order_id = self._random_order(cur)
        if order_id is not None:
            cur.execute("DELETE FROM datalake.order_details WHERE order_id = %s", (order_id,))
            cur.execute("DELETE FROM datalake.orders WHERE order_id = %s", (order_id,))
        return order_id

    def step(self) -> Change | None:
        kinds, weights = zip(*self.mix.items(), strict=True)
        kind = self.rng.choices(kinds, weights=weights)[0]
        with self.conn.cursor() as cur:
            order_id = getattr(self, kind)(cur)
        self.conn.commit()
        if order_id is None:
            return None
        return Change(kind, order_id, time.time())

    def run(
        self,
        changes: int,
        rate_per_s: float = 5.0,
        progress: Callable[[str], None] | None = None,
    ) -> list[Change]:
        """Make ``changes`` changes at ``rate_per_s`` (0: as fast as possible)."""
        done: list[Change] = []
        self.applied = done
        interval = 1.0 / rate_per_s if rate_per_s > 0 else 0.0
        start = time.monotonic()
        for i in range(changes):
            if interval:
                delay = start + i * interval - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            change = self.step()
            if change:
                done.append(change)
            if progress and (i + 1) % max(1, changes // 10) == 0:
                progress(f"workload: {i + 1}/{changes} changes")
        return done
