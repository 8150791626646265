"""The source database: Northwind-shaped schema, the outbox table, sample data and workload."""
