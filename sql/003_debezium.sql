-- Debezium's own tables: the heartbeat row and the signal table, both published.
--
-- Semantics:
--   * cdc_heartbeat holds exactly one row. The connector's heartbeat.action.query updates its
--     beat_at every heartbeat.interval.ms. The table must be in the publication: on PostgreSQL
--     15+, pgoutput skips a transaction that changes no published table, so an unpublished
--     heartbeat reaches Debezium as nothing, and the slot's confirmed_flush_lsn stays where the
--     last outbox change left it while other tables keep writing WAL. Published, the update
--     arrives, is filtered out (the table is not in table.include.list, so it has no topic),
--     and its LSN is acknowledged with the next heartbeat record.
--   * debezium_signal is the signal.data.collection. An INSERT of an 'execute-snapshot' row
--     asks for an incremental snapshot (cdc_lake/streaming/signals.py). Debezium reads signals
--     from the replication stream, so the table must be published; it also INSERTs its snapshot
--     window watermarks here, two rows per chunk.
--   * The replication role's grants on both tables are in cdc_lake/source/database.py, because
--     the role's name is a setting.
--   * Rerunning this file is safe: IF NOT EXISTS, ON CONFLICT DO NOTHING, and publication
--     changes only for tables not yet published.
SET search_path TO datalake;

CREATE TABLE IF NOT EXISTS cdc_heartbeat (
    id smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    beat_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO cdc_heartbeat (id) VALUES (1) ON CONFLICT (id) DO NOTHING;

CREATE TABLE IF NOT EXISTS debezium_signal (
    id varchar(42) PRIMARY KEY,
    type varchar(32) NOT NULL,
    data varchar(2048)
);

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['cdc_heartbeat', 'debezium_signal'] LOOP
        IF NOT EXISTS (
            SELECT 1 FROM pg_publication_tables
            WHERE pubname = 'cdc_publication' AND schemaname = 'datalake' AND tablename = t
        ) THEN
            EXECUTE format('ALTER PUBLICATION cdc_publication ADD TABLE datalake.%I', t);
        END IF;
    END LOOP;
END
$$;
