"""The sample data's vocabulary: the word lists its categories, companies, people, places and
products are named from (this project's own; nothing is taken from the original Northwind dump),
and the Northwind-style five-letter customer ids made from a company's name."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

# (name, description, relative price level, product items, packaging). Names fit varchar(15).
CATEGORIES: list[tuple[str, str, float, list[str], list[str]]] = [
    ("Drinks", "Teas, coffees, juices, beers, ciders and wines", 1.0,
     ["Pale Ale", "Dark Lager", "Green Tea", "Breakfast Tea", "Espresso Beans", "Apple Cider",
      "Ginger Beer", "Elderflower Cordial", "Red Table Wine", "Plum Brandy", "Lemonade",
      "Spring Water", "Hot Cocoa", "Rooibos"],
     ["{n} - {ml} ml bottles", "{n} - {ml} ml cans", "{n} tins x {g} g"]),
    ("Sauces & Spices", "Mustards, relishes, sauces, pastes and spice blends", 0.8,
     ["Mustard", "Chili Relish", "Barbecue Sauce", "Soy Sauce", "Curry Paste", "Pepper Blend",
      "Herb Salt", "Tomato Ketchup", "Horseradish", "Basil Pesto", "Maple Glaze", "Chutney",
      "Hot Sauce", "Vinaigrette"],
     ["{n} - {g} g jars", "{n} - {ml} ml flasks", "{n} shakers x {g} g"]),
    ("Sweets & Snacks", "Chocolates, toffees, biscuits and cakes", 0.9,
     ["Toffee", "Marzipan", "Fudge", "Liquorice", "Almond Brittle", "Pralines", "Shortbread",
      "Gingerbread", "Honey Cake", "Fruit Jellies", "Dark Chocolate", "Nougat", "Wafers",
      "Caramels"],
     ["{n} bags x {g} g", "{n} - {g} g boxes", "{n} gift tins"]),
    ("Cheese & Dairy", "Hard and soft cheeses, butter and cream", 1.2,
     ["Goat Cheese", "Blue Cheese", "Churned Butter", "Cream Cheese", "Aged Gouda",
      "Smoked Cheddar", "Sheep Yogurt", "Feta", "Brie", "Ricotta", "Gruyère", "Clotted Cream"],
     ["{n} - {g} g wheels", "{n} - {g} g tubs", "{k} kg wheel"]),
    ("Bakery & Grains", "Breads, crackers, flours, pasta and cereals", 0.7,
     ["Rye Crispbread", "Oat Flakes", "Egg Noodles", "Sourdough Crackers", "Polenta",
      "Spelt Flour", "Muesli", "Wild Rice", "Fusilli", "Bagels", "Pretzels", "Couscous"],
     ["{n} - {g} g boxes", "{n} bags x {g} g", "{k} kg sack"]),
    ("Meat & Game", "Cured, smoked and prepared meats", 1.6,
     ["Smoked Ham", "Venison Sausage", "Duck Confit", "Beef Jerky", "Lamb Shanks",
      "Chicken Terrine", "Fennel Salami", "Streaky Bacon", "Game Pie", "Pork Rillettes",
      "Corned Beef"],
     ["{n} - {g} g packs", "{k} kg pack", "{n} - {g} g tins"]),
    ("Fruit & Veg", "Dried fruit, preserved vegetables, beans and mushrooms", 0.9,
     ["Dried Apricots", "Sun-Dried Tomatoes", "Pickled Beets", "Marinated Artichokes",
      "Dried Figs", "Green Olives", "Chickpeas", "Mushroom Mix", "Sweet Corn", "Red Lentils",
      "Candied Peel"],
     ["{n} - {g} g tins", "{n} - {g} g jars", "{n} bags x {g} g"]),
    ("Fish & Seafood", "Smoked, tinned and marinated fish and shellfish", 1.3,
     ["Smoked Trout", "Anchovies", "Sardines", "Mussels", "Smoked Mackerel", "Tuna in Oil",
      "Shrimp", "Crab Cakes", "Lobster Bisque", "Kelp Flakes", "Cod Roe", "Salted Cod"],
     ["{n} - {g} g cans", "{n} - {g} g jars", "{k} kg tray"]),
]  # fmt: skip
CATEGORY_NAMES = [c[0] for c in CATEGORIES]
REGION_NAMES = ["Atlantic", "Pacific", "Midland", "Gulf"]
SHIPPER_NAMES = ["Bluewater Freight", "Overland Carriers", "Skyline Couriers"]

# (country, weight, [(city, region)]). Weights roughly follow where a wholesaler's customers
# would be; names fit varchar(15).
COUNTRIES: list[tuple[str, int, list[tuple[str, str | None]]]] = [
    ("USA", 14, [("Denver", "CO"), ("Chicago", "IL"), ("Baltimore", "MD"),
                 ("Sacramento", "CA"), ("Milwaukee", "WI"), ("Savannah", "GA"), ("Omaha", "NE")]),
    ("Germany", 11, [("Hamburg", None), ("Dresden", None), ("Bremen", None), ("Hannover", None),
                     ("Nürnberg", None), ("Freiburg", None)]),
    ("France", 10, [("Bordeaux", None), ("Dijon", None), ("Rennes", None), ("Grenoble", None),
                    ("Montpellier", None)]),
    ("Brazil", 8, [("Curitiba", "PR"), ("Recife", "PE"), ("Salvador", "BA"),
                   ("Fortaleza", "CE")]),
    ("UK", 7, [("Leeds", None), ("Bristol", None), ("Edinburgh", None), ("York", None),
               ("Norwich", None)]),
    ("Spain", 5, [("Valencia", None), ("Bilbao", None), ("Zaragoza", None), ("Málaga", None)]),
    ("Mexico", 5, [("Puebla", None), ("Monterrey", None), ("Guadalajara", None)]),
    ("Italy", 4, [("Bologna", None), ("Verona", None), ("Parma", None), ("Genova", None)]),
    ("Canada", 3, [("Toronto", "ON"), ("Calgary", "AB"), ("Halifax", "NS"),
                   ("Winnipeg", "MB")]),
    ("Sweden", 3, [("Malmö", None), ("Uppsala", None), ("Umeå", None)]),
    ("Netherlands", 2, [("Utrecht", None), ("Rotterdam", None), ("Groningen", None)]),
    ("Belgium", 2, [("Gent", None), ("Antwerpen", None), ("Liège", None)]),
    ("Austria", 2, [("Linz", None), ("Innsbruck", None)]),
    ("Switzerland", 2, [("Basel", None), ("Lausanne", None)]),
    ("Denmark", 2, [("Odense", None), ("Aalborg", None)]),
    ("Portugal", 2, [("Porto", None), ("Coimbra", None)]),
    ("Norway", 1, [("Bergen", None), ("Trondheim", None)]),
    ("Finland", 1, [("Tampere", None), ("Turku", None)]),
    ("Poland", 1, [("Kraków", None), ("Gdańsk", None)]),
    ("Ireland", 1, [("Galway", None), ("Limerick", None)]),
    ("Argentina", 1, [("Rosario", None), ("Mendoza", None)]),
    ("Australia", 1, [("Adelaide", None), ("Brisbane", None)]),
]  # fmt: skip
STREETS = [
    "Mill Lane", "Harbour Road", "Station Street", "Orchard Way", "Church Row", "Kingsway",
    "Riverside", "Market Square", "Linden Avenue", "Quay Street", "Bakers Row", "Hill Road",
]  # fmt: skip
ADJECTIVES = [
    "Amber", "Bright", "Cedar", "Copper", "Golden", "Hidden", "Juniper", "Linden", "Meadow",
    "Orchard", "Saffron", "Stone", "Sunny", "Thistle", "Velvet", "Willow", "Harvest", "Heather",
    "Morning", "Silver", "Little", "Corner", "Rustic", "Tidewater", "Upland", "Evergreen",
    "Bramble", "Crimson", "Fernhill", "Kestrel",
]  # fmt: skip
NOUNS = [
    "Acorn", "Anchor", "Basket", "Bell", "Bridge", "Cellar", "Fox", "Garden", "Gate", "Hearth",
    "Kettle", "Lantern", "Mill", "Oak", "Pepper", "Pier", "Rooster", "Spoon", "Table", "Valley",
    "Wagon", "Wheel", "Barrel", "Crock", "Ladle", "Sparrow", "Thimble", "Yard",
]  # fmt: skip
TRADES = [
    "Provisions", "Grocers", "Delicatessen", "Fine Foods", "Trading", "Market", "Wholesale",
    "Imports", "Larder", "Food Hall", "Emporium", "Pantry", "Victuallers", "Foodstore",
]  # fmt: skip
SUPPLIER_TRADES = [
    "Farms", "Dairy", "Bakeries", "Fisheries", "Brewing", "Conserves", "Mills", "Smokehouse",
    "Orchards", "Creamery", "Growers", "Preserves",
]  # fmt: skip
FIRST_NAMES = [
    "Agnes", "Bruno", "Clara", "Dmitri", "Elena", "Felix", "Greta", "Hugo", "Ingrid", "Jonas",
    "Katja", "Lars", "Marta", "Nils", "Olga", "Pablo", "Rosa", "Sven", "Tomas", "Ursula",
    "Viktor", "Wanda", "Yusuf", "Zofia", "Amelie", "Benoît", "Chiara", "Dario", "Emil", "Fiona",
    "Gustavo", "Hélène", "Ivo", "Joana", "Kenji", "Leona", "Matteo", "Noor", "Oskar", "Paula",
    "Rafael", "Sofia", "Teodor", "Vera", "Walter", "Ximena",
]  # fmt: skip
SURNAMES = [
    "Albrecht", "Bianchi", "Castell", "Dahlberg", "Eriksen", "Ferreira", "Grunewald",
    "Halvorsen", "Ibarra", "Jansen", "Kowalczyk", "Lindqvist", "Marchetti", "Novak",
    "Oyelaran", "Pereira", "Quintero", "Rasmussen", "Schreiber", "Tavares", "Ueda", "Vasquez",
    "Wexley", "Yilmaz", "Zanetti", "Brandt", "Corwin", "Delacroix", "Engström", "Fontaine",
    "Gallo", "Holm", "Kessler", "Lambert", "Moreau", "Nakamura", "Ostrowski", "Petrov",
    "Rinaldi", "Sandoval", "Thorsen", "Varga", "Achterberg", "Okafor", "Haddad", "Mbeki",
]  # fmt: skip
CONTACT_TITLES = [
    "Proprietor", "Head Buyer", "Purchasing Lead", "Store Manager", "Buyer", "Category Manager",
    "Finance Officer", "Procurement Officer", "Managing Director", "Head Chef",
]  # fmt: skip
SUPPLIER_TITLES = ["Account Executive", "Export Manager", "Key Account Lead", "Sales Director"]
PRODUCT_STYLES = ["Organic", "Traditional", "Farmhouse", "Old-Style", "Premium", "Homestyle"]
TOWN_PREFIXES = [
    "Amber", "Cedar", "Linden", "Willow", "Juniper", "Clover", "Heather", "Bramble", "Fern",
]  # fmt: skip
TOWN_SUFFIXES = ["brook", "field", "ridge", "haven", "wood", "ton", "dale", "port"]
# Little words that do not go into a customer id.
_FILLER = {"the", "and", "of", "co", "inc"}


def _ascii_letters(text: str) -> list[str]:
    """The words of ``text`` as upper-case ASCII letters (accents dropped), fillers left out."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return [w.upper() for w in re.findall(r"[A-Za-z]+", folded) if w.lower() not in _FILLER]


def id_candidates(company_name: str) -> Iterator[str]:
    """Five-letter ids for a company, most telling first: the start of the first word and of
    the next ones (``Copper Kettle Provisions`` gives COPKE, COPPK, ...), then variants with a
    final letter, then with two."""
    words = _ascii_letters(company_name) or ["X"]
    first, rest = words[0], "".join(words[1:])
    for a in (3, 4, 2, 5, 1):
        code = first[:a] + rest[: 5 - a]
        if len(code) == 5:
            yield code
    stem = (first + rest)[:3].ljust(3, "X")
    for i in range(26 * 26):
        yield stem + chr(65 + i // 26) + chr(65 + i % 26)
