"""The Airflow side: DAGs generated from the configuration, and their tasks, sensor and trigger.

Modules here import only Airflow's authoring API at module level; Kafka clients, Spark and the
warehouse are imported inside the tasks, so parsing the DAG folder stays cheap and does no I/O
beyond reading the YAML.
"""
