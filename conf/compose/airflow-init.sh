#!/usr/bin/env bash
# The compose stack's one-shot init (service airflow-init), run at every `up`: the secrets checked, the
# metadata database, the admin user (FAB's auth manager: a real login; its password set from .env each
# time), the spark_default connection to the stack's Spark master, the Prometheus scrape token, and a
# check of the flows' YAML.
set -euo pipefail
: "${SRM_PROMETHEUS_TOKEN:?set SRM_PROMETHEUS_TOKEN in .env}" "${AIRFLOW_ADMIN_USER:?}" "${AIRFLOW_ADMIN_PASSWORD:?set AIRFLOW_ADMIN_PASSWORD in .env}" "${SPARK_MASTER_URL:?}"
python -m srm.devenv.compose check
# A PostgreSQL volume made with another POSTGRES_PASSWORD refuses this one: say so, not a stack trace.
python - <<'PY'
import os
import sys

from sqlalchemy import create_engine
from sqlalchemy.exc import OperationalError

try:
    create_engine(os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]).connect().close()
except OperationalError as exc:
    reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
    hint = ""
    if "password authentication failed" in reason:
        hint = (
            ": the postgres-data volume was made with another POSTGRES_PASSWORD; put that one back in .env, "
            "or remove the volume to start over (Airflow's metadata is lost)"
        )
    sys.exit(f"airflow-init: PostgreSQL at postgres:5432 refused the connection ({reason}){hint}")
PY
# Quiet commands; their output is shown when they fail.
quiet() { local out; out=$("$@" 2>&1) || { printf '%s\n' "$out" | tail -25 >&2; echo "airflow-init: $1 $2 failed" >&2; return 1; }; }
echo "airflow-init: migrating the metadata database"
quiet airflow db migrate
# The password goes through stdin (FAB's prompt), never on a command line.
password() { printf '%s\n%s\n' "$AIRFLOW_ADMIN_PASSWORD" "$AIRFLOW_ADMIN_PASSWORD"; }
if airflow users list --output plain 2>/dev/null | awk '{print $2}' | grep -qx "$AIRFLOW_ADMIN_USER"; then
    password | quiet airflow users reset-password --username "$AIRFLOW_ADMIN_USER"
    echo "airflow-init: user $AIRFLOW_ADMIN_USER exists; its password set from .env"
else
    password | quiet airflow users create --role Admin --username "$AIRFLOW_ADMIN_USER" \
        --firstname SRM --lastname Admin --email "$AIRFLOW_ADMIN_USER@localhost"
    echo "airflow-init: user $AIRFLOW_ADMIN_USER created (role Admin)"
fi
airflow connections delete spark_default >/dev/null 2>&1 || true
airflow connections add spark_default --conn-type spark --conn-host "$SPARK_MASTER_URL" >/dev/null
echo "airflow-init: connection spark_default -> $SPARK_MASTER_URL"
# The scrape token: read by the API server (monitoring.prometheus.token.file of the flows' YAML) and by
# Prometheus (credentials_file), both in group 0; nobody else.
(umask 037 && printf '%s\n' "$SRM_PROMETHEUS_TOKEN" >/opt/srm/secrets/prometheus-token.new \
    && mv -f /opt/srm/secrets/prometheus-token.new /opt/srm/secrets/prometheus-token)
echo "airflow-init: Prometheus scrape token written (/opt/srm/secrets/prometheus-token)"
srm-control validate
