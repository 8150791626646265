"""Secrets on MSK Connect: Secrets Manager references, and the guard that refuses literal
secrets and undeclared config providers."""

from __future__ import annotations

import pytest

from cdc_lake.streaming.msk.secrets import check_no_literal_secrets
from cdc_lake.streaming.msk.settings import MskConnectSettings
from cdc_lake_tests.streaming.msk.helpers import PASSWORD_REF


def test_secret_arn_is_url_encoded_in_the_reference(msk: MskConnectSettings):
    arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:cdc/repl-AbC123"
    ref = MskConnectSettings(**{**msk.__dict__, "db_secret": arn}).password_ref
    # Kafka's ${provider:path:key} cannot hold ':' in the path; the provider URL-decodes it.
    assert ref == (
        "${secretsmanager:arn%3Aaws%3Asecretsmanager%3Aeu-west-1%3A123456789012%3Asecret"
        "%3Acdc/repl-AbC123:password}"
    )


def test_secret_guard_refuses_literals_and_undeclared_providers():
    check_no_literal_secrets("c", {"database.password": PASSWORD_REF, "key.converter": "x"})
    with pytest.raises(ValueError, match="'database.password' must be a config-provider"):
        check_no_literal_secrets("c", {"database.password": "hunter2"})
    with pytest.raises(ValueError, match="'aws.secret.access.key' must be"):
        check_no_literal_secrets("c", {"aws.secret.access.key": "abc${secretsmanager:s:k}"})
    with pytest.raises(ValueError, match="'aws.access.key.id' must be"):
        check_no_literal_secrets("c", {"aws.access.key.id": "AKIAEXAMPLE"})
    # The local stack's env provider is not declared on the MSK workers.
    with pytest.raises(ValueError, match="config provider 'env'"):
        check_no_literal_secrets("c", {"database.password": "${env:CDC_LAKE_REPLICATION_PASSWORD}"})
