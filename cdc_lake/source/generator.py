"""A deterministic generator of Northwind-shaped sample data.

At ``scale=1`` it has Northwind's size: 8 categories, 29 suppliers, 77 products, 91 customers,
9 employees, 4 regions, 53 territories, 3 shippers, 829 orders and about 2,150 order lines.
``scale`` multiplies the orders (and customers, so each keeps a realistic order count), up to
millions for benchmarks. The same seed and scale always give the same rows.

The values look like Northwind's without being Northwind's: every word list (``vocabulary.py``)
is this project's own and nothing is taken from the original dump.
  - Companies are named from those words ("Copper Kettle Provisions", "Brandt & Varga"); a
    customer's id is five upper-case letters derived from its company name, as in Northwind
    (first letters of the first words), made unique by trying other letters of the name and
    then a counter.
  - Products are named per category ("Linden Valley Mustard", "Hugo's Smoked Trout"), with a
    Northwind-style ``quantity_per_unit``.
  - List prices follow a log-normal spread (median about 19, a few above 100), taken at evenly
    spaced quantiles so the price level does not depend on the seed, and the dearer prices go
    mostly to the dearer categories. Quantities are log-normal too (median about 18, rounded
    to fives above 10) and about 60% of lines have no discount; the rest have 5-25%.
  - Together they give total revenue, ``sum(unit_price * quantity * (1 - discount))`` over
    the order lines, of the same order as Northwind's (about 1.27M at scale 1), growing with
    ``scale``.
  - An order ships to its customer's address; its freight is a few percent of its value.

Rows are streamed to PostgreSQL with COPY (``copy_rows.py``). The outbox triggers are switched
off during the bulk load and the outbox is then filled in one set-based statement
(``datalake.load_cdc_events()``), which is much faster than firing a trigger per line and gives
the same rows.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import statistics
from collections.abc import Iterator
from functools import cached_property

from cdc_lake.source.copy_rows import Table
from cdc_lake.source.vocabulary import (
    ADJECTIVES,
    CATEGORIES,
    CONTACT_TITLES,
    COUNTRIES,
    FIRST_NAMES,
    NOUNS,
    PRODUCT_STYLES,
    REGION_NAMES,
    SHIPPER_NAMES,
    STREETS,
    SUPPLIER_TITLES,
    SUPPLIER_TRADES,
    SURNAMES,
    TOWN_PREFIXES,
    TOWN_SUFFIXES,
    TRADES,
    id_candidates,
)

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

# Price and quantity spreads (log-normal: median, sigma of the log). Calibrated so that scale 1
# has Northwind's order of revenue; see the module docstring.
PRICE_MEDIAN, PRICE_SIGMA = 19.0, 0.8
QUANTITY_MEDIAN, QUANTITY_SIGMA = 18.0, 0.75
DISCOUNTS = [0.0, 0.05, 0.10, 0.15, 0.20, 0.25]
DISCOUNT_WEIGHTS = [61, 8, 8, 7, 8, 8]


def _price(value: float) -> float:
    """A shelf price: to the nearest 0.05."""
    return max(0.5, round(round(value * 20) / 20, 2))


class NorthwindGenerator:
    def __init__(self, scale: float = 1.0, seed: int = 42):
        if scale <= 0:
            raise ValueError(f"scale must be positive, got {scale}")
        self.scale = scale
        self.seed = seed
        self.n_orders = max(1, round(N_ORDERS * scale))
        self.n_customers = max(N_CUSTOMERS, round(N_CUSTOMERS * scale))

    def _rng(self, name: str) -> random.Random:
        return random.Random(f"{self.seed}:{name}")

    @staticmethod
    def _place(rng: random.Random) -> tuple[str, str | None, str]:
        """(city, region, country), countries weighted."""
        country, _, cities = rng.choices(COUNTRIES, weights=[c[1] for c in COUNTRIES])[0]
        city, region = rng.choice(cities)
        return city, region, country

    @staticmethod
    def _person(rng: random.Random) -> str:
        return f"{rng.choice(FIRST_NAMES)} {rng.choice(SURNAMES)}"

    @staticmethod
    def _address(rng: random.Random) -> str:
        return f"{rng.randint(1, 240)} {rng.choice(STREETS)}"

    @staticmethod
    def _phone(rng: random.Random) -> str:
        return f"({rng.randint(100, 999)}) {rng.randint(200, 989)}-{rng.randint(0, 9999):04d}"

    @staticmethod
    def _company_name(rng: random.Random, city: str) -> str:
        pattern = rng.randrange(6)
        if pattern == 0:
            return f"{rng.choice(SURNAMES)} {rng.choice(TRADES)}"
        if pattern == 1:
            return f"{rng.choice(SURNAMES)} & {rng.choice(SURNAMES)}"
        if pattern == 2:
            return f"The {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}"
        if pattern == 3:
            return f"{city} {rng.choice(TRADES)}"
        return f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} {rng.choice(TRADES)}"

    # -- customers --------------------------------------------------------------------------

    def customers(self) -> Iterator[tuple]:
        """Company names are drawn again when taken (so repeats are rare until large scales); ids
        are always unique."""
        rng = self._rng("customers")
        used_ids: set[str] = set()
        used_names: set[str] = set()
        fallback = 0
        for _ in range(self.n_customers):
            city, region, country = self._place(rng)
            name = self._company_name(rng, city)[:40]
            for _ in range(20):
                if name not in used_names:
                    break
                name = self._company_name(rng, city)[:40]
            used_names.add(name)
            customer_id = next((c for c in id_candidates(name) if c not in used_ids), None)
            while customer_id is None:  # every variant of this name is taken: count on
                code = "".join(chr(65 + (fallback // 26**k) % 26) for k in range(4, -1, -1))
                fallback += 1
                customer_id = code if code not in used_ids else None
            used_ids.add(customer_id)
            phone = self._phone(rng)
            yield (
                customer_id, name, self._person(rng), rng.choice(CONTACT_TITLES),
                self._address(rng), city, region, f"{rng.randint(1000, 99999)}", country,
                phone, phone[:-1] + str((int(phone[-1]) + 1) % 10) if rng.random() < 0.6 else None,
            )  # fmt: skip

    @cached_property
    def _ship_to(self) -> list[tuple]:
        """Per customer index: (id, company, address, city, region, postal code, country)."""
        return [(c[0], c[1], c[4], c[5], c[6], c[7], c[8]) for c in self.customers()]

    def customer_id(self, i: int) -> str:
        """The ``i``-th customer's id."""
        return self._ship_to[i][0]

    # -- catalogue --------------------------------------------------------------------------

    def categories(self) -> Iterator[tuple]:
        for i, (name, description, *_) in enumerate(CATEGORIES, start=1):
            yield (i, name, description, None)

    def suppliers(self) -> Iterator[tuple]:
        rng = self._rng("suppliers")
        names: set[str] = set()
        for i in range(1, N_SUPPLIERS + 1):
            city, region, country = self._place(rng)
            while True:
                trade = rng.choice(SUPPLIER_TRADES)
                if rng.random() < 0.5:
                    name = f"{rng.choice(SURNAMES)} {trade}"
                else:
                    name = f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} {trade}"
                if name not in names:
                    break
            names.add(name)
            yield (
                i, name[:40], self._person(rng), rng.choice(SUPPLIER_TITLES), self._address(rng),
                city, region, f"{rng.randint(1000, 99999)}", country, self._phone(rng), None, None,
            )  # fmt: skip

    def _list_prices(self, rng: random.Random, levels: list[float]) -> list[float]:
        """Log-normal prices at evenly spaced quantiles, the dearer ones to the products whose
        category level (times some noise) is higher."""
        normal = statistics.NormalDist()
        n = len(levels)
        prices = sorted(
            math.exp(math.log(PRICE_MEDIAN) + PRICE_SIGMA * normal.inv_cdf((k + 0.5) / n))
            for k in range(n)
        )
        order = sorted(range(n), key=lambda i: levels[i] * rng.lognormvariate(0, 0.5))
        out = [0.0] * n
        for price, i in zip(prices, order, strict=True):
            out[i] = _price(price)
        return out

    def products(self) -> Iterator[tuple]:
        rng = self._rng("products")
        category_ids = [1 + i % N_CATEGORIES for i in range(N_PRODUCTS)]
        rng.shuffle(category_ids)
        prices = self._list_prices(rng, [CATEGORIES[c - 1][2] for c in category_ids])
        names: set[str] = set()
        for i, category_id in enumerate(category_ids, start=1):
            _, _, _, items, packs = CATEGORIES[category_id - 1]
            while True:
                item, pattern = rng.choice(items), rng.randrange(4)
                if pattern == 0:
                    name = f"{rng.choice(FIRST_NAMES)}'s {item}"
                elif pattern == 1:
                    name = f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} {item}"
                elif pattern == 2:
                    name = f"{rng.choice(self._cities)} {item}"
                else:
                    name = f"{rng.choice(PRODUCT_STYLES)} {item}"
                if name not in names and len(name) <= 40:
                    break
            names.add(name)
            pack = rng.choice(packs).format(
                n=rng.choice([6, 10, 12, 20, 24, 36]), g=rng.choice([100, 200, 250, 400, 500]),
                ml=rng.choice([250, 330, 500, 750]), k=rng.choice([1, 2, 5]),
            )  # fmt: skip
            yield (
                i, name, rng.randint(1, N_SUPPLIERS), category_id, pack, prices[i - 1],
                rng.randint(0, 125), rng.choice([0, 0, 0, 10, 20, 40, 60]),
                rng.choice([0, 5, 10, 15, 20, 25, 30]), int(rng.random() < 0.1),
            )  # fmt: skip

    @property
    def _cities(self) -> list[str]:
        return [city for _, _, cities in COUNTRIES for city, _ in cities]

    def product_prices(self) -> dict[int, float]:
        return {p[0]: p[5] for p in self.products()}

    # -- staff and territories --------------------------------------------------------------

    def regions(self) -> Iterator[tuple]:
        yield from enumerate(REGION_NAMES, start=1)

    def territories(self) -> Iterator[tuple]:
        rng = self._rng("territories")
        names = [p + s for p in TOWN_PREFIXES for s in TOWN_SUFFIXES]
        for i, name in enumerate(rng.sample(names, N_TERRITORIES), start=1):
            yield (f"{1000 + i * 37:05d}", name, (i % N_REGIONS) + 1)

    def employees(self) -> Iterator[tuple]:
        rng = self._rng("employees")
        firsts = rng.sample(FIRST_NAMES, N_EMPLOYEES)
        lasts = rng.sample(SURNAMES, N_EMPLOYEES)
        offices = [("Denver", "CO", "80202"), ("Edinburgh", None, "EH1 1YZ")]
        for i in range(1, N_EMPLOYEES + 1):
            city, region, postal = offices[0] if i <= 6 else offices[1]
            country = "USA" if i <= 6 else "UK"
            title = {2: "Head of Sales", 5: "Sales Team Lead"}.get(i, "Account Manager")
            yield (
                i, lasts[i - 1], firsts[i - 1], title, None,
                dt.date(1950 + i * 3, 1 + i % 12, 1 + i), dt.date(1992 + i % 3, 1 + i, 1),
                self._address(rng), city, region, postal, country, self._phone(rng),
                f"{rng.randint(100, 9999)}", None, None, None if i == 2 else (2 if i <= 5 else 5),
                None,
            )  # fmt: skip

    def employee_territories(self) -> Iterator[tuple]:
        territory_ids = [t[0] for t in self.territories()]
        for i, territory_id in enumerate(territory_ids):
            yield ((i % N_EMPLOYEES) + 1, territory_id)

    def shippers(self) -> Iterator[tuple]:
        rng = self._rng("shippers")
        for i, name in enumerate(SHIPPER_NAMES, start=1):
            yield (i, name, self._phone(rng))

    # -- orders -----------------------------------------------------------------------------

    def orders_and_details(self) -> tuple[Iterator[tuple], Iterator[tuple]]:
        """Two streams from one seeded walk: orders, and their lines."""
        return self._orders(), self._details()

    @staticmethod
    def _quantity(rng: random.Random) -> int:
        q = rng.lognormvariate(math.log(QUANTITY_MEDIAN), QUANTITY_SIGMA)
        return max(1, min(130, round(q) if q < 10 else 5 * round(q / 5)))

    def _order_rows(self) -> Iterator[tuple[tuple, list[tuple]]]:
        rng = self._rng("orders")
        prices = self.product_prices()
        ship_to = self._ship_to
        span_days = 670
        for n in range(self.n_orders):
            # Northwind's ids: 10248 onwards, with 11075 absent as in the original dump.
            order_id = FIRST_ORDER_ID + n + (1 if FIRST_ORDER_ID + n >= MISSING_ORDER_ID else 0)
            order_date = FIRST_ORDER_DATE + dt.timedelta(days=n * span_days // self.n_orders)
            shipped = (
                order_date + dt.timedelta(days=rng.randint(1, 30)) if rng.random() < 0.97 else None
            )
            customer_id, company, address, city, region, postal, country = ship_to[
                rng.randrange(len(ship_to))
            ]
            n_lines = rng.choices([1, 2, 3, 4, 5, 6], weights=[22, 31, 25, 12, 7, 3])[0]
            lines = []
            for product_id in sorted(rng.sample(range(1, N_PRODUCTS + 1), n_lines)):
                quantity = self._quantity(rng)
                discount = rng.choices(DISCOUNTS, weights=DISCOUNT_WEIGHTS)[0]
                lines.append((order_id, product_id, prices[product_id], quantity, discount))
            value = sum(p * q * (1 - d) for _, _, p, q, d in lines)
            freight = round(value * rng.uniform(0.01, 0.09) + rng.uniform(0.5, 8.0), 2)
            order = (
                order_id, customer_id, rng.randint(1, N_EMPLOYEES), order_date,
                order_date + dt.timedelta(days=28), shipped, rng.randint(1, N_SHIPPERS), freight,
                company, address, city, region, postal, country,
            )  # fmt: skip
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
