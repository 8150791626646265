"""The source database's resource: how Dagster reaches PostgreSQL (local, or RDS/Aurora).

``connect()`` opens a new connection each call; the caller closes it. An unreachable server is
a ``ConnectionError`` that names host, port, database and user, never the password.
"""

from __future__ import annotations

import dagster as dg
import psycopg2
from psycopg2.extensions import connection as PgConnection

from cdc_lake.source.database import PG_PORT


class PostgresResource(dg.ConfigurableResource):
    """The source database (local PostgreSQL, or RDS/Aurora in production)."""

    host: str
    port: int = PG_PORT
    database: str
    user: str
    password: str
    replication_user: str
    sslmode: str = "prefer"
    # The salt the source connector hashes declared columns with (CapturedTable.hashed): the
    # digest hashes the source's values the same way to compare them with the lake's. None: no
    # table has hashed columns here.
    column_salt: str | None = None

    def connect(self) -> PgConnection:
        try:
            return psycopg2.connect(
                host=self.host,
                port=self.port,
                dbname=self.database,
                user=self.user,
                password=self.password,
                sslmode=self.sslmode,
                connect_timeout=5,
                application_name="cdc-lake",
            )
        except psycopg2.OperationalError as e:
            # The DSN is not repeated: it would carry the password.
            raise ConnectionError(
                f"PostgreSQL at {self.host}:{self.port}/{self.database} as {self.user} is "
                f"unreachable: {str(e).strip()}. Fix: start it (`cdc-lake stack up` locally) or "
                "correct the connection settings."
            ) from e
