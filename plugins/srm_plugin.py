"""The Airflow plugin of this project: SRM's REST API at ``/srm`` on Airflow's API server.

The app reads the replication config when a request comes (``$SRM_CONFIG`` or ``conf/srm.yaml``),
never at import; every route requires an Airflow user (srm/service/app.py).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from srm.service.app import create_app


class SrmPlugin(AirflowPlugin):
    name = "srm"
    fastapi_apps = [  # noqa: RUF012 (Airflow's attribute, declared on AirflowPlugin as a plain list)
        {"app": create_app(), "url_prefix": "/srm", "name": "Streams Replication Manager REST API"}
    ]
