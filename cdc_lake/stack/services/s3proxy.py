"""S3Proxy: the local S3 server, on a filesystem, with the stack's buckets.
"""

from __future__ import annotations

from pathlib import Path

from cdc_lake.stack.process import write_private
from cdc_lake.stack.services.base import JavaService


class S3Proxy(JavaService):
    """S3Proxy on a filesystem backend: objects are files under the state directory, so the
    lake survives ``down``/``up``."""

    name = "s3"
    ports = ("s3",)
    main_class = "org.gaul.s3proxy.Main"
    classpath = "s3proxy"
    heap = "512m"

    @property
    def conf(self) -> Path:
        return self.s.conf_dir / "s3proxy.conf"

    def prepare(self) -> None:
        super().prepare()
        data = self.s.data_dir("s3")
        data.mkdir(parents=True, exist_ok=True)
        c = self.s.credentials
        write_private(
            self.conf,
            f"s3proxy.endpoint={self.s.s3_endpoint}\n"
            "s3proxy.authorization=aws-v2-or-v4\n"
            f"s3proxy.identity={c.s3_access_key}\n"
            f"s3proxy.credential={c.s3_secret_key}\n"
            "jclouds.provider=filesystem-nio2\n"
            f"jclouds.filesystem.basedir={data}\n",
        )

    def argv(self) -> list[str]:
        return self.java_argv("--properties", str(self.conf))

    def client(self):
        import boto3
        from botocore.config import Config

        c = self.s.credentials
        return boto3.client(
            "s3",
            endpoint_url=self.s.s3_endpoint,
            aws_access_key_id=c.s3_access_key,
            aws_secret_access_key=c.s3_secret_key,
            region_name=self.s.region,
            config=Config(
                s3={"addressing_style": "path"},
                retries={"max_attempts": 2},
                connect_timeout=3,
                read_timeout=30,
            ),
        )

    def healthy(self) -> bool:
        self.client().list_buckets()
        return True

    def after_healthy(self) -> None:
        client = self.client()
        existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
        for bucket in self.s.buckets:
            if bucket not in existing:
                client.create_bucket(Bucket=bucket)

    def details(self) -> dict[str, object]:
        c = self.s.credentials
        return {
            "endpoint": self.s.s3_endpoint,
            "access_key": c.s3_access_key,
            "secret_key": c.s3_secret_key,
            "region": self.s.region,
            "buckets": {
                "raw": self.s.raw_bucket,
                "lake": self.s.lake_bucket,
                "warm_up_raw": self.s.warm_up_buckets[0],
                "warm_up_lake": self.s.warm_up_buckets[1],
            },
            "path_style": True,
            "data_dir": str(self.s.data_dir("s3")),
        }
