"""cdc-lake: PostgreSQL changes to an Apache Hudi lake through Debezium and Kafka, on Dagster."""
