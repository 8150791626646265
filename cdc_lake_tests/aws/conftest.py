"""The production path's tests: moto's server (the root conftest's ``moto_endpoint``) plays EMR,
EMR Serverless and Glue.

S3 stays the real local S3 server of the session stack: the Spark apps' code, their Pipes
messages and the lake all live there, as they would live in one AWS account's S3.
"""

REGION = "us-east-1"
