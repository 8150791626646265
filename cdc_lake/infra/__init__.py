"""The production stack as code: one AWS CDK app (``app.py``) that declares what
``CDC_LAKE_ENV=prod`` expects (``stack.py``, assembling the parts its sibling modules build; the
Dagster role's permissions come from the calls the Dagster side makes, ``dagster_calls.py``), and
the command that turns a deployed stack's outputs into the Dagster deployment's environment
(``outputs.py``, ``cdc-lake aws env``).

Synthesis runs offline: ``aws-cdk-lib`` from PyPI drives its bundled jsii runtime on the
machine's Node.js, and no lookup reaches AWS (an existing VPC is given by its ids, not looked
up). ``cdc_lake_tests/infra`` synthesises it, runs cdk-nag's AwsSolutions pack and cfn-lint on
the template, and checks it against ``docs/deploy.md`` and the variables the prod resources read.
"""

import os

# jsii warns in a banner on every start when Node.js is older than its newest releases (Debian's
# 18, the machine's 20); the synthesis works on them, and the tests check it.
for _quiet in ("DEPRECATED", "END_OF_LIFE", "UNTESTED"):
    os.environ.setdefault(f"JSII_SILENCE_WARNING_{_quiet}_NODE_VERSION", "18,20")

