"""Deploy the Debezium source and our S3 sink to Amazon MSK Connect through boto3's
``kafkaconnect`` API (``cdc-lake msk deploy``), and keep them current from Dagster.

One idea per module; callers import from the submodule:

- ``settings``: ``MskConnectSettings`` and the ``CDC_LAKE_MSK_*`` variables it is read from;
- ``secrets``: Secrets Manager references and the guard against literal secrets in configs;
- ``api``: the small helpers every ``kafkaconnect`` call shares (look-up by name, polling);
- ``plugins``: the deterministic plugin ZIPs and their custom plugins;
- ``deploy``: the worker configuration, the connectors, and the whole idempotent deploy;
- ``client``: the Dagster side, with the Connect REST client's interface.

The connector configs are the ones the local path renders from ``connectors/``
(``CdcConnectorSettings.debezium()`` and ``.s3_sink_msk()``), plus a few MSK-only keys that
never override a rendered one. Nothing here reads the local stack: the caller passes the
folders of jars in.
"""
