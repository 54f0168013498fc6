"""The DAGs of every replication flow in conf/srm.yaml (or $SRM_CONFIG): see srm.airflow.factory."""

from srm.airflow.factory import build_dags

globals().update(build_dags())
