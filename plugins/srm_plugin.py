"""The Airflow plugin of this project: SRM's REST API at ``/srm`` on Airflow's API server, and the
Replications page (served by the same app at ``/srm/ui/``) in the Airflow UI's navigation.

The app reads the replication config when a request comes (``$SRM_CONFIG`` or ``conf/srm.yaml``),
never at import; every route requires an Airflow user (srm/service/app.py).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from srm.service.app import create_app


class SrmPlugin(AirflowPlugin):
    name = "srm"
    # Airflow's attributes, declared on AirflowPlugin as plain lists.
    fastapi_apps = [  # noqa: RUF012
        {"app": create_app(), "url_prefix": "/srm", "name": "Streams Replication Manager REST API"}
    ]
    external_views = [  # noqa: RUF012
        {
            "name": "Replications",
            "href": "/srm/ui/",
            "icon": "/srm/ui/icon.svg",
            "url_route": "replications",
            "destination": "nav",
            "nav_top_level": True,
        }
    ]
