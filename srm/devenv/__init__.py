"""The development environment: local Kafka clusters (plain and secured), the JVM jars, local Airflow,
the demo, the compose stack and the project image's entry points."""
