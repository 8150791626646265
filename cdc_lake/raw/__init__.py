"""The raw CDC files the S3 sink writes: key layout and incremental listing."""
