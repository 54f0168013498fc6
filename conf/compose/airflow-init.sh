#!/usr/bin/env bash
# The compose stack's one-shot init (service airflow-init): the metadata database, the admin user
# (FAB's auth manager: a real login), the spark_default connection to the stack's Spark master, and
# a check of the flows' YAML. Idempotent: every `docker compose up` runs it again.
set -euo pipefail
: "${AIRFLOW_ADMIN_USER:?}" "${AIRFLOW_ADMIN_PASSWORD:?set AIRFLOW_ADMIN_PASSWORD in .env}" "${SPARK_MASTER_URL:?}"
echo "airflow-init: migrating the metadata database"
airflow db migrate
if airflow users list --output plain 2>/dev/null | awk '{print $2}' | grep -qx "$AIRFLOW_ADMIN_USER"; then
    echo "airflow-init: user $AIRFLOW_ADMIN_USER exists"
else
    airflow users create --role Admin --username "$AIRFLOW_ADMIN_USER" --password "$AIRFLOW_ADMIN_PASSWORD" \
        --firstname SRM --lastname Admin --email "$AIRFLOW_ADMIN_USER@localhost" >/dev/null
    echo "airflow-init: user $AIRFLOW_ADMIN_USER created (role Admin)"
fi
airflow connections delete spark_default >/dev/null 2>&1 || true
airflow connections add spark_default --conn-type spark --conn-host "$SPARK_MASTER_URL" >/dev/null
echo "airflow-init: connection spark_default -> $SPARK_MASTER_URL"
srm-control validate
