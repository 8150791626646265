"""Fixtures of the lake tests."""

from __future__ import annotations

import pytest

from bench.synthetic import SyntheticLake
from cdc_lake.stack import LocalStack


@pytest.fixture
def lake(local_stack: LocalStack) -> SyntheticLake:
    """A raw prefix and a Hudi table of the test's own, on the session's real S3 server."""
    s = local_stack.settings
    client = local_stack.service("s3").client()  # type: ignore[attr-defined]
    return SyntheticLake(client, s.raw_bucket, s.lake_bucket)
