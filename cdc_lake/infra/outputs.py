"""A deployed stack's outputs as the Dagster deployment's environment (``cdc-lake aws env``).

Each output of the stack that names a ``CDC_LAKE_*`` variable carries it as its description
(``OUTPUT_PREFIX`` + name). The MSK brokers are not a CloudFormation attribute: they are asked
of MSK (``GetBootstrapBrokers``, the IAM listener) from the cluster's ARN, also an output. No
secret is an output: the stack names the secrets, and the deployment injects their values.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

OUTPUT_PREFIX = "cdc-lake: "
CLUSTER_ARN = "MSK_CLUSTER_ARN"  # an output, not a variable: where the brokers are asked
BOOTSTRAP_VAR = "CDC_LAKE_KAFKA_BOOTSTRAP"


def named_outputs(outputs: Iterable[dict[str, Any]], value: str = "OutputValue") -> dict[str, Any]:
    """Name -> value of the outputs that carry a name in their description: a deployed stack's
    (``OutputValue``), or a template's (``value="Value"``, its intrinsics as they are)."""
    return {
        o["Description"].removeprefix(OUTPUT_PREFIX): o[value]
        for o in outputs
        if o.get("Description", "").startswith(OUTPUT_PREFIX)
    }


def stack_variables(cloudformation: Any, kafka: Any, stack: str) -> dict[str, str]:
    """``CDC_LAKE_*`` variable -> value, from the deployed ``stack``'s outputs and its MSK
    cluster. Raises ValueError naming the stack when it has no such outputs."""
    found = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    if not found:
        raise ValueError(f"CloudFormation stack {stack!r} not found")
    named = named_outputs(found[0].get("Outputs", []))
    if CLUSTER_ARN not in named:
        raise ValueError(f"stack {stack!r} has no cdc-lake outputs (is it a cdc-lake stack?)")
    brokers = kafka.get_bootstrap_brokers(ClusterArn=named[CLUSTER_ARN])
    iam_brokers = brokers.get("BootstrapBrokerStringSaslIam")
    if not iam_brokers:
        raise ValueError(f"MSK cluster {named[CLUSTER_ARN]} has no IAM listener")
    out = {k: v for k, v in named.items() if k.startswith("CDC_LAKE_")}
    out[BOOTSTRAP_VAR] = iam_brokers
    return dict(sorted(out.items()))


def env_lines(variables: dict[str, str]) -> str:
    """``NAME=value`` lines, for an env file or ``export``."""
    return "".join(f"{name}={value}\n" for name, value in variables.items())
