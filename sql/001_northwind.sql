-- Northwind-shaped source schema in `datalake`. Idempotent: tables that already exist (a user's
-- own dump, for instance) are left exactly as they are.
CREATE SCHEMA IF NOT EXISTS datalake;
SET search_path TO datalake;

CREATE TABLE IF NOT EXISTS categories (
    category_id smallint PRIMARY KEY,
    category_name varchar(15) NOT NULL,
    description text,
    picture bytea
);

CREATE TABLE IF NOT EXISTS customers (
    customer_id bpchar PRIMARY KEY,
    company_name varchar(40) NOT NULL,
    contact_name varchar(30),
    contact_title varchar(30),
    address varchar(60),
    city varchar(15),
    region varchar(15),
    postal_code varchar(10),
    country varchar(15),
    phone varchar(24),
    fax varchar(24)
);

CREATE TABLE IF NOT EXISTS employees (
    employee_id smallint PRIMARY KEY,
    last_name varchar(20) NOT NULL,
    first_name varchar(10) NOT NULL,
    title varchar(30),
    title_of_courtesy varchar(25),
    birth_date date,
    hire_date date,
    address varchar(60),
    city varchar(15),
    region varchar(15),
    postal_code varchar(10),
    country varchar(15),
    home_phone varchar(24),
    extension varchar(4),
    photo bytea,
    notes text,
    reports_to smallint REFERENCES employees,
    photo_path varchar(255)
);

CREATE TABLE IF NOT EXISTS suppliers (
    supplier_id smallint PRIMARY KEY,
    company_name varchar(40) NOT NULL,
    contact_name varchar(30),
    contact_title varchar(30),
    address varchar(60),
    city varchar(15),
    region varchar(15),
    postal_code varchar(10),
    country varchar(15),
    phone varchar(24),
    fax varchar(24),
    homepage text
);

CREATE TABLE IF NOT EXISTS products (
    product_id smallint PRIMARY KEY,
    product_name varchar(40) NOT NULL,
    supplier_id smallint REFERENCES suppliers,
    category_id smallint REFERENCES categories,
    quantity_per_unit varchar(20),
    unit_price real,
    units_in_stock smallint,
    units_on_order smallint,
    reorder_level smallint,
    discontinued integer NOT NULL
);

CREATE TABLE IF NOT EXISTS region (
    region_id smallint PRIMARY KEY,
    region_description bpchar NOT NULL
);

CREATE TABLE IF NOT EXISTS shippers (
    shipper_id smallint PRIMARY KEY,
    company_name varchar(40) NOT NULL,
    phone varchar(24)
);

-- order_id is an integer here (smallint in the original dump) so that --scale can reach millions.
CREATE TABLE IF NOT EXISTS orders (
    order_id integer PRIMARY KEY,
    customer_id bpchar REFERENCES customers,
    employee_id smallint REFERENCES employees,
    order_date date,
    required_date date,
    shipped_date date,
    ship_via smallint REFERENCES shippers,
    freight real,
    ship_name varchar(40),
    ship_address varchar(60),
    ship_city varchar(15),
    ship_region varchar(15),
    ship_postal_code varchar(10),
    ship_country varchar(15)
);

CREATE TABLE IF NOT EXISTS territories (
    territory_id varchar(20) PRIMARY KEY,
    territory_description bpchar NOT NULL,
    region_id smallint NOT NULL REFERENCES region
);

CREATE TABLE IF NOT EXISTS employee_territories (
    employee_id smallint NOT NULL REFERENCES employees,
    territory_id varchar(20) NOT NULL REFERENCES territories,
    PRIMARY KEY (employee_id, territory_id)
);

CREATE TABLE IF NOT EXISTS order_details (
    order_id integer NOT NULL REFERENCES orders,
    product_id smallint NOT NULL REFERENCES products,
    unit_price real NOT NULL,
    quantity smallint NOT NULL,
    discount real NOT NULL,
    PRIMARY KEY (order_id, product_id)
);

CREATE TABLE IF NOT EXISTS us_states (
    state_id smallint PRIMARY KEY,
    state_name varchar(100),
    state_abbr varchar(2),
    state_region varchar(50)
);
