"""Talking to Kafka clusters: clients and their settings, topics and offsets through the admin API,
retries of what clears by itself, internal topics, the control lists stored on the target."""
