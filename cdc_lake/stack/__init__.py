"""The local stack: real PostgreSQL, Kafka, Kafka Connect, S3Proxy and Spark, without Docker."""

from cdc_lake.stack.process import StackError
from cdc_lake.stack.settings import StackSettings
from cdc_lake.stack.stack import LocalStack

__all__ = ["LocalStack", "StackError", "StackSettings"]
