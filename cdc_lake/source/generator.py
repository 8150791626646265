"""A deterministic generator of Northwind-shaped sample data.

At ``scale=1`` it has Northwind's size: 8 categories, 29 suppliers, 77 products, 91 customers,
9 employees, 4 regions, 53 territories, 3 shippers, 829 orders and about 2,150 order lines.
``scale`` multiplies the orders (and customers, so each keeps a realistic order count), up to
millions for benchmarks. The same seed and scale always give the same rows.

Rows are streamed to PostgreSQL with COPY. The outbox triggers are switched off during the bulk
load and the outbox is then filled in one set-based statement (``datalake.load_cdc_events()``),
which is much faster than firing a trigger per line and gives the same rows.
"""

from __future__ import annotations

import datetime as dt
import io
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

N_CATEGORIES = 8
N_SUPPLIERS = 29
N_PRODUCTS = 77
N_CUSTOMERS = 91
N_EMPLOYEES = 9
N_REGIONS = 4
N_TERRITORIES = 53
N_SHIPPERS = 3
N_ORDERS = 829
FIRST_ORDER_ID = 10248
FIRST_ORDER_DATE = dt.date(1996, 7, 4)
MISSING_ORDER_ID = 11075

CATEGORY_NAMES = [
    "Beverages",
    "Condiments",
    "Confections",
    "Dairy Products",
    "Grains/Cereals",
    "Meat/Poultry",
    "Produce",
    "Seafood",
]
REGION_NAMES = ["Eastern", "Westerly", "Northern", "Southern"]
COUNTRIES = [
    ("Germany", ["Berlin", "München", "Aachen", "Köln"]),
    ("USA", ["Seattle", "Boise", "Portland", "Albuquerque"]),
    ("France", ["Paris", "Lyon", "Marseille", "Nantes"]),
    ("Brazil", ["São Paulo", "Rio de Janeiro", "Campinas"]),
    ("UK", ["London", "Cowes", "Manchester"]),
    ("Spain", ["Madrid", "Barcelona", "Sevilla"]),
    ("Mexico", ["México D.F."]),
    ("Canada", ["Montréal", "Vancouver", "Tsawassen"]),
    ("Sweden", ["Luleå", "Bräcke"]),
    ("Italy", ["Torino", "Bergamo", "Reggio Emilia"]),
]
WORDS = [
    "Alpine", "Blue", "Crown", "Delta", "Eagle", "Forest", "Golden", "Harbor", "Island", "Jade",
    "King", "Lake", "Maple", "North", "Ocean", "Prairie", "Queen", "River", "Silver", "Tiger",
    "Union", "Valley", "West", "Zenith",
]  # fmt: skip
GOODS = [
    "Tea", "Coffee", "Ale", "Syrup", "Seasoning", "Sauce", "Jam", "Chocolate", "Biscuits",
    "Cheese", "Bread", "Pasta", "Sausage", "Pâté", "Tofu", "Dried Pears", "Crab Meat", "Caviar",
    "Salmon", "Herring",
]  # fmt: skip
FIRST_NAMES = ["Nancy", "Andrew", "Janet", "Margaret", "Steven", "Michael", "Robert", "Laura"]
LAST_NAMES = ["Davolio", "Fuller", "Leverling", "Peacock", "Buchanan", "Suyama", "King"]


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[str, ...]
    rows: Callable[[], Iterable[tuple]]


def _copy_text(value: object) -> str:
    if value is None:
        return r"\N"
    text = str(value)
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


class RowStream(io.RawIOBase):
    """Rows as a readable COPY text stream, so millions of rows never sit in memory at once."""

    def __init__(self, rows: Iterable[tuple]):
        self._lines: Iterator[bytes] = (
            ("\t".join(_copy_text(v) for v in row) + "\n").encode() for row in rows
        )
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        while len(self._buf) < len(b):
            try:
                self._buf += next(self._lines)
            except StopIteration:
                break
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


class NorthwindGenerator:
    def __init__(self, scale: float = 1.0, seed: int = 42):
        if scale <= 0:
            raise ValueError(f"scale must be positive, got {scale}")
        self.scale = scale
        self.seed = seed
        self.n_orders = max(1, round(N_ORDERS * scale))
        self.n_customers = max(N_CUSTOMERS, round(N_CUSTOMERS * scale))

    def customer_id(self, i: int) -> str:
        # Five upper-case letters, like ALFKI; unique for any index.
        letters, n = [], i
        for _ in range(5):
            letters.append(chr(ord("A") + n % 26))
            n //= 26
        return "".join(reversed(letters))

    def _rng(self, name: str) -> random.Random:
        return random.Random(f"{self.seed}:{name}")

    def categories(self) -> Iterator[tuple]:
        for i, name in enumerate(CATEGORY_NAMES, start=1):
            yield (i, name, f"{name} of every kind", None)

    def suppliers(self) -> Iterator[tuple]:
        rng = self._rng("suppliers")
        for i in range(1, N_SUPPLIERS + 1):
            country, cities = COUNTRIES[i % len(COUNTRIES)]
            name = f"{rng.choice(WORDS)} {rng.choice(GOODS)} Co."
            yield (
                i, name[:40], f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}",
                "Sales Manager", f"{rng.randint(1, 999)} Main St.", rng.choice(cities), None,
                f"{rng.randint(10000, 99999)}", country, f"({rng.randint(100, 999)}) 555-0{i:03d}",
                None, None,
            )  # fmt: skip

    def products(self) -> Iterator[tuple]:
        rng = self._rng("products")
        for i in range(1, N_PRODUCTS + 1):
            name = f"{WORDS[i % len(WORDS)]} {GOODS[(i * 7) % len(GOODS)]}"
            yield (
                i, name[:40], rng.randint(1, N_SUPPLIERS), rng.randint(1, N_CATEGORIES),
                f"{rng.randint(1, 48)} boxes", round(rng.uniform(2.5, 120.0), 2),
                rng.randint(0, 120), rng.randint(0, 70), rng.choice([0, 5, 10, 15, 25]),
                int(rng.random() < 0.1),
            )  # fmt: skip

    def customers(self) -> Iterator[tuple]:
        rng = self._rng("customers")
        for i in range(self.n_customers):
            country, cities = COUNTRIES[rng.randrange(len(COUNTRIES))]
            yield (
                self.customer_id(i), f"{rng.choice(WORDS)} {rng.choice(WORDS)} Market",
                f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}", "Owner",
                f"{rng.randint(1, 999)} Market Rd.", rng.choice(cities), None,
                f"{rng.randint(10000, 99999)}", country, f"0{rng.randint(100, 999)}-{i:07d}",
                None,
            )  # fmt: skip

    def regions(self) -> Iterator[tuple]:
        yield from enumerate(REGION_NAMES, start=1)

    def territories(self) -> Iterator[tuple]:
        rng = self._rng("territories")
        for i in range(1, N_TERRITORIES + 1):
            yield (f"{1000 + i * 37:05d}", f"{rng.choice(WORDS)}ville", (i % N_REGIONS) + 1)

    def employees(self) -> Iterator[tuple]:
        rng = self._rng("employees")
        for i in range(1, N_EMPLOYEES + 1):
            yield (
                i, LAST_NAMES[i % len(LAST_NAMES)], FIRST_NAMES[i % len(FIRST_NAMES)],
                "Sales Representative" if i != 2 else "Vice President, Sales", "Ms.",
                dt.date(1950 + i * 3, 1 + i % 12, 1 + i), dt.date(1992 + i % 3, 1 + i, 1),
                f"{rng.randint(1, 999)} Elm St.", "Seattle", "WA", "98122", "USA",
                "(206) 555-9857", f"{rng.randint(1000, 9999)}", None, None,
                None if i == 2 else 2, None,
            )  # fmt: skip

    def employee_territories(self) -> Iterator[tuple]:
        territory_ids = [t[0] for t in self.territories()]
        for i, territory_id in enumerate(territory_ids):
            yield ((i % N_EMPLOYEES) + 1, territory_id)

    def shippers(self) -> Iterator[tuple]:
        names = ["Speedy Express", "United Package", "Federal Shipping"]
        for i, name in enumerate(names, start=1):
            yield (i, name, f"(503) 555-98{i:02d}")

    def product_prices(self) -> dict[int, float]:
        return {p[0]: p[5] for p in self.products()}

    def orders_and_details(self) -> tuple[Iterator[tuple], Iterator[tuple]]:
        """Two streams from one seeded walk: orders, and their lines."""
        return self._orders(), self._details()

    def _order_rows(self) -> Iterator[tuple[tuple, list[tuple]]]:
        rng = self._rng("orders")
        prices = self.product_prices()
        span_days = 670
        for n in range(self.n_orders):
            # Northwind's ids: 10248 onwards, with 11075 absent as in the original dump.
            order_id = FIRST_ORDER_ID + n + (1 if FIRST_ORDER_ID + n >= MISSING_ORDER_ID else 0)
            order_date = FIRST_ORDER_DATE + dt.timedelta(days=n * span_days // self.n_orders)
            shipped = (
                order_date + dt.timedelta(days=rng.randint(1, 30)) if rng.random() < 0.97 else None
            )
            country, cities = COUNTRIES[rng.randrange(len(COUNTRIES))]
            order = (
                order_id, self.customer_id(rng.randrange(self.n_customers)),
                rng.randint(1, N_EMPLOYEES), order_date, order_date + dt.timedelta(days=28),
                shipped, rng.randint(1, N_SHIPPERS), round(rng.uniform(0.02, 1000.0), 2),
                f"{rng.choice(WORDS)} Market", f"{rng.randint(1, 999)} Harbour St.",
                rng.choice(cities), None, f"{rng.randint(10000, 99999)}", country,
            )  # fmt: skip
            n_lines = rng.choices([1, 2, 3, 4, 5, 6], weights=[22, 31, 25, 12, 7, 3])[0]
            lines = []
            for product_id in sorted(rng.sample(range(1, N_PRODUCTS + 1), n_lines)):
                discount = rng.choice([0.0, 0.0, 0.0, 0.05, 0.1, 0.15, 0.2, 0.25])
                lines.append(
                    (order_id, product_id, prices[product_id], rng.randint(1, 120), discount)
                )
            yield order, lines

    def _orders(self) -> Iterator[tuple]:
        for order, _ in self._order_rows():
            yield order

    def _details(self) -> Iterator[tuple]:
        for _, lines in self._order_rows():
            yield from lines

    def tables(self) -> list[Table]:
        """In foreign-key order."""
        orders, details = self.orders_and_details()
        return [
            Table("categories", ("category_id", "category_name", "description", "picture"),
                  self.categories),
            Table("suppliers", ("supplier_id", "company_name", "contact_name", "contact_title",
                                "address", "city", "region", "postal_code", "country", "phone",
                                "fax", "homepage"), self.suppliers),
            Table("products", ("product_id", "product_name", "supplier_id", "category_id",
                               "quantity_per_unit", "unit_price", "units_in_stock",
                               "units_on_order", "reorder_level", "discontinued"), self.products),
            Table("customers", ("customer_id", "company_name", "contact_name", "contact_title",
                                "address", "city", "region", "postal_code", "country", "phone",
                                "fax"), self.customers),
            Table("region", ("region_id", "region_description"), self.regions),
            Table("territories", ("territory_id", "territory_description", "region_id"),
                  self.territories),
            Table("employees", ("employee_id", "last_name", "first_name", "title",
                                "title_of_courtesy", "birth_date", "hire_date", "address", "city",
                                "region", "postal_code", "country", "home_phone", "extension",
                                "photo", "notes", "reports_to", "photo_path"), self.employees),
            Table("employee_territories", ("employee_id", "territory_id"),
                  self.employee_territories),
            Table("shippers", ("shipper_id", "company_name", "phone"), self.shippers),
            Table("orders", ("order_id", "customer_id", "employee_id", "order_date",
                             "required_date", "shipped_date", "ship_via", "freight", "ship_name",
                             "ship_address", "ship_city", "ship_region", "ship_postal_code",
                             "ship_country"), lambda: orders),
            Table("order_details", ("order_id", "product_id", "unit_price", "quantity",
                                    "discount"), lambda: details),
        ]  # fmt: skip
