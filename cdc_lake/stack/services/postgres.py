"""PostgreSQL with logical replication: an initialised cluster, run as the ``postgres`` user
when we are root, and its roles and database once healthy.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

from cdc_lake.stack.process import StackError, open_private_log
from cdc_lake.stack.services.base import Service
from cdc_lake.stack.settings import StackSettings


def postgres_bindir() -> Path | None:
    """The newest installed PostgreSQL (15 or later) server binaries."""
    candidates = []
    for p in Path("/usr/lib/postgresql").glob("*/bin/postgres"):
        try:
            candidates.append((int(p.parent.parent.name), p.parent))
        except ValueError:
            continue
    candidates = [c for c in candidates if c[0] >= 15]
    if candidates:
        return max(candidates)[1]
    found = shutil.which("pg_config")
    if found:
        bindir = subprocess.run([found, "--bindir"], capture_output=True, text=True).stdout.strip()
        if (Path(bindir) / "postgres").is_file():
            return Path(bindir)
    return None




class Postgres(Service):
    """PostgreSQL with wal_level=logical, an application user and a replication user.

    When run as root the server runs as the ``postgres`` system user (PostgreSQL refuses root).

    ``pg_hba.conf`` is written on every start: every login needs a password (scram-sha-256) over
    loopback; the replication user may connect, from loopback only, to the project's database
    (and the ones ``create_database`` adds, listed in ``replication_databases``), which covers
    both the logical-replication (walsender) and the plain connection Debezium opens, and to
    nothing else: not ``postgres``, not another database, not a physical replication connection
    (which would stream the whole cluster's WAL).
    """

    name = "postgres"
    ports = ("postgres",)
    stop_signal = signal.SIGINT  # "fast" shutdown: roll back sessions, checkpoint, exit

    def __init__(self, settings: StackSettings):
        super().__init__(settings)
        self.run_as = "postgres" if os.geteuid() == 0 else None

    @property
    def data(self) -> Path:
        return self.s.data_dir("postgres")

    @property
    def socket_dir(self) -> Path:
        return self.s.run_dir / "postgres-socket"

    def bindir(self) -> Path:
        found = postgres_bindir()
        if found is None:
            raise StackError(
                "postgres: no PostgreSQL 15+ server found under /usr/lib/postgresql. "
                "Fix: run `cdc-lake stack install` (it runs apt-get install postgresql)."
            )
        return found

    def _chown(self, path: Path) -> None:
        if self.run_as:
            shutil.chown(path, self.run_as, self.run_as)

    def prepare(self) -> None:
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        self._chown(self.socket_dir)
        if not (self.data / "PG_VERSION").is_file():
            self.data.mkdir(parents=True, exist_ok=True)
            self.data.chmod(0o700)
            self._chown(self.data)
            pwfile = self.s.run_dir / "pg-init-pw"
            pwfile.write_text(self.s.credentials.pg_superuser_password + "\n")
            pwfile.chmod(0o600)
            self._chown(pwfile)
            try:
                result = subprocess.run(
                    [
                        str(self.bindir() / "initdb"),
                        "-D",
                        str(self.data),
                        "-U",
                        "postgres",
                        f"--pwfile={pwfile}",
                        "--auth-local=scram-sha-256",
                        "--auth-host=scram-sha-256",
                        "--encoding=UTF8",
                        "--locale=C",
                    ],
                    capture_output=True,
                    text=True,
                    user=self.run_as,
                    group=self.run_as,
                    extra_groups=[] if self.run_as else None,
                )
            finally:
                pwfile.unlink(missing_ok=True)
            with open_private_log(self.log) as f:
                f.write((result.stdout + result.stderr).encode())
            if result.returncode != 0:
                raise StackError(
                    f"postgres: initdb failed (see {self.log}): {result.stderr.strip()[-500:]}"
                )
        self.write_hba()
        conf = self.data / "cdc_lake.conf"
        conf.write_text(
            "# Written by cdc-lake on every start; override with ALTER SYSTEM.\n"
            f"port = {self.s.port('postgres')}\n"
            f"listen_addresses = '{self.s.host}'\n"
            f"unix_socket_directories = '{self.socket_dir}'\n"
            "wal_level = logical\n"
            "max_wal_senders = 10\n"
            "max_replication_slots = 10\n"
            f"max_slot_wal_keep_size = {self.s.slot_wal_keep_mb}MB\n"
            "shared_buffers = 128MB\n"
            "logging_collector = off\n"
        )
        self._chown(conf)
        main_conf = self.data / "postgresql.conf"
        if "include_if_exists = 'cdc_lake.conf'" not in main_conf.read_text():
            with main_conf.open("a") as f:
                f.write("\ninclude_if_exists = 'cdc_lake.conf'\n")

    @property
    def replication_databases(self) -> Path:
        return self.data / "replication_databases"

    def write_hba(self, add_database: str | None = None) -> None:
        """pg_hba.conf (see the class docstring); ``add_database`` joins the replication user's
        databases. The server reads it on start or ``pg_reload_conf()``."""
        names = [self.s.pg_database]
        if self.replication_databases.is_file():
            names += self.replication_databases.read_text().split()
        if add_database:
            names.append(add_database)
        self.replication_databases.write_text("\n".join(dict.fromkeys(names)) + "\n")
        repl = self.s.replication_user
        hba = self.data / "pg_hba.conf"
        hba.write_text(
            "# Written by cdc-lake on every start. First match wins.\n"
            "# TYPE  DATABASE                 USER  ADDRESS       METHOD\n"
            f"host    @replication_databases   {repl}  127.0.0.1/32  scram-sha-256\n"
            f"host    all                      {repl}  all           reject\n"
            f"host    replication              {repl}  all           reject\n"
            f"local   all                      {repl}                reject\n"
            "local   all                      all                 scram-sha-256\n"
            "host    all                      all   127.0.0.1/32  scram-sha-256\n"
            "host    all                      all   ::1/128       scram-sha-256\n"
        )
        for path in (self.replication_databases, hba):
            path.chmod(0o600)
            self._chown(path)

    def argv(self) -> list[str]:
        return [str(self.bindir() / "postgres"), "-D", str(self.data)]

    def _connect(self, user: str = "postgres", password: str | None = None, db: str = "postgres"):
        import psycopg2

        return psycopg2.connect(
            host=self.s.host,
            port=self.s.port("postgres"),
            user=user,
            password=password or self.s.credentials.pg_superuser_password,
            dbname=db,
            connect_timeout=3,
        )

    def healthy(self) -> bool:
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT 1")
                return cur.fetchone() == (1,)
        finally:
            conn.close()

    def after_healthy(self) -> None:
        from psycopg2 import sql

        c = self.s.credentials
        conn = self._connect()
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                for role, password, attrs in (
                    (self.s.pg_user, c.pg_password, "LOGIN"),
                    (self.s.replication_user, c.replication_password, "LOGIN REPLICATION"),
                ):
                    cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,))
                    verb = "ALTER" if cur.fetchone() else "CREATE"
                    cur.execute(
                        sql.SQL(verb + " ROLE {} WITH " + attrs + " PASSWORD %s").format(
                            sql.Identifier(role)
                        ),
                        (password,),
                    )
                cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.s.pg_database,))
                if not cur.fetchone():
                    cur.execute(
                        sql.SQL("CREATE DATABASE {} OWNER {}").format(
                            sql.Identifier(self.s.pg_database), sql.Identifier(self.s.pg_user)
                        )
                    )
                cur.execute(
                    sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                        sql.Identifier(self.s.pg_database), sql.Identifier(self.s.replication_user)
                    )
                )
        finally:
            conn.close()

    def create_database(self, name: str, replace: bool = False) -> None:
        """Another database owned by the app user, which the replication user may connect to
        (it joins ``replication_databases``; the server reloads pg_hba.conf)."""
        from psycopg2 import sql

        self.write_hba(add_database=name)
        admin = self._connect()
        admin.autocommit = True
        try:
            with admin.cursor() as cur:
                cur.execute("SELECT pg_reload_conf()")
                ident = sql.Identifier(name)
                if replace:
                    cur.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
                cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
                if cur.fetchone() is None:
                    cur.execute(
                        sql.SQL("CREATE DATABASE {} OWNER {}").format(
                            ident, sql.Identifier(self.s.pg_user)
                        )
                    )
                cur.execute(
                    sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                        ident, sql.Identifier(self.s.replication_user)
                    )
                )
        finally:
            admin.close()

    def details(self) -> dict[str, object]:
        return {
            "endpoint": self.endpoint,
            "dsn": self.s.pg_dsn(),
            "database": self.s.pg_database,
            "user": self.s.pg_user,
            "password": self.s.credentials.pg_password,
            "replication_user": self.s.replication_user,
            "replication_password": self.s.credentials.replication_password,
            "replication_dsn": self.s.pg_dsn(self.s.replication_user),
            # What the source connector hashes columns with (docs/column-policies.md).
            "column_salt": self.s.credentials.column_salt,
            "data_dir": str(self.data),
        }

    def fix_hint(self) -> str:
        return f"read {self.log}; a broken data directory can be removed: {self.data}"
