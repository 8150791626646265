"""What the production path's tests share (``aws/``, ``resources/test_spark.py``,
``resources/test_lake.py``): moto's server (the root conftest's ``moto_endpoint``) plays EMR,
EMR Serverless and Glue, in ``REGION``.

S3 stays the real local S3 server of the session stack: the Spark apps' code, their Pipes
messages and the lake all live there, as they would live in one AWS account's S3.
"""

REGION = "us-east-1"
