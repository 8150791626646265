"""The lake's PySpark apps (upsert, order items), their EMR entry point and their packaging."""
