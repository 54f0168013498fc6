"""SRM's management services: the REST API (``app.create_app``) over one query layer (``metrics``).

The Airflow plugin in ``plugins/`` mounts the app at ``/srm`` on Airflow's API server.
"""
