"""Kafka Connect and Kafka: connector configs, the Connect REST client, topic inspection."""
