"""Secrets on MSK Connect: connector configs carry references, never values.

The database password is never in a connector config. ``database.password`` holds
``${secretsmanager:<secret>:<key>}``, which the workers resolve at task start through the
worker configuration's ``config.providers=secretsmanager`` (class
``com.amazonaws.kafka.config.providers.SecretsManagerConfigProvider``) with the service
execution role's credentials.

``check_no_literal_secrets`` refuses (``ValueError``, naming the connector and key) a config
whose secret-looking key holds anything but such a whole reference, and any reference to a
provider the workers do not declare (e.g. the local ``${env:...}``). The deploy runs it before
any AWS call and again before each connector request, so a refused config never leaves the
machine.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable, Mapping

SECRETS_PROVIDER = "secretsmanager"
SECRETS_PROVIDER_CLASS = "com.amazonaws.kafka.config.providers.SecretsManagerConfigProvider"

# Keys whose values are credentials; they may only hold a ${provider:...} reference.
SECRET_KEY = re.compile(
    r"password|passwd|passphrase|secret|token|credential|jaas|salt|"
    r"access\.key|key\.id|private\.key|api\.key",
    re.IGNORECASE,
)
REFERENCE = re.compile(r"\$\{([A-Za-z0-9_.-]+):[^{}]*\}")
WHOLE_REFERENCE = re.compile(r"^\$\{[A-Za-z0-9_.-]+:[^{}]+\}$")


def secrets_manager_ref(secret: str, key: str = "password") -> str:
    """``${secretsmanager:<secret>:<key>}``. The provider URL-decodes the secret id, and
    Kafka's ``${...}`` syntax cannot hold ':', so an ARN is URL-encoded; a plain name
    stays readable."""
    quoted = urllib.parse.quote(secret, safe="/-_.@=")
    return "${" + f"{SECRETS_PROVIDER}:{quoted}:{key}" + "}"


def check_no_literal_secrets(
    name: str, config: Mapping[str, str], providers: Iterable[str] = (SECRETS_PROVIDER,)
) -> None:
    """Refuse a config that would carry a secret: a secret-looking key whose value is not a
    whole ``${provider:...}`` reference, or a reference to a provider the workers lack."""
    declared = set(providers)
    for key, value in config.items():
        if SECRET_KEY.search(key) and not WHOLE_REFERENCE.match(value):
            raise ValueError(
                f"connector {name}: {key!r} must be a config-provider reference such as "
                "${secretsmanager:<secret>:<key>}, not a value"
            )
        for provider in REFERENCE.findall(value):
            if provider not in declared:
                raise ValueError(
                    f"connector {name}: {key!r} refers to config provider {provider!r}, which "
                    f"the MSK Connect workers do not declare (they have {sorted(declared)})"
                )
