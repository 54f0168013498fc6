"""Authorization per flow with a real auth manager: Airflow's FAB auth manager (as the compose stack
runs it) with a role that may read one flow's replicate DAG only. Its user gets that flow's status
and metrics; the other flow is a 403 and is not listed."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from srm.config import SrmConfig
from srm.devenv.airflow import LocalAirflow
from tests.airflow_api import ApiServer
from tests.replication import Env, make_env

pytestmark = pytest.mark.integration
FAB = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
USER, PASSWORD = "alice", "alice-reads-one-flow"
GRANT = """
import sys
from airflow.providers.fab.auth_manager.cli_commands.utils import get_application_builder

resource, user, password = sys.argv[1:]
with get_application_builder() as builder:
    security = builder.sm
    role = security.add_role("one-flow")
    security.add_permission_to_role(role, security.create_permission("can_read", resource))
    security.add_user(user, "A", "B", f"{user}@localhost", role, password=password)
"""


@pytest.fixture
def fab(kafka: SrmConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Env, ApiServer]]:
    """Two flows, an Airflow home with the FAB auth manager, and a user allowed the first flow's DAG."""
    monkeypatch.setenv("AIRFLOW__CORE__AUTH_MANAGER", FAB)
    env = make_env(
        kafka,
        tmp_path,
        [
            {"source": "west", "target": "east", "topics": ["fab-.*"]},
            {"source": "east", "target": "west", "topics": []},
        ],
        aliases=("fab-west", "fab-east"),
    )
    airflow = LocalAirflow(tmp_path / "airflow", env.path)
    airflow.migrate()
    allowed = f"DAG:{env.flow().source}_to_{env.flow().target}.replicate"
    # As `airflow roles create`, `roles add-perms` (after `sync-perm --include-dags`) and `users create`
    # would, in one process: FAB's security manager creates the DAG's resource with its permission.
    grant = subprocess.run(
        [sys.executable, "-c", GRANT, allowed, USER, PASSWORD],
        env=airflow.env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert grant.returncode == 0, grant.stderr[-3000:]
    api = ApiServer(airflow, tmp_path)
    try:
        api.wait()
        yield env, api
    finally:
        api.stop()


def test_a_user_allowed_one_flows_dag_reads_that_flow_only(fab: tuple[Env, ApiServer]) -> None:
    env, api = fab
    mine, other = env.flow(), env.flow(env.east.alias, env.west.alias)
    token = api.token(USER, PASSWORD)
    status, body = api.get(f"/srm/v2/cluster-metrics/{mine.source}/{mine.target}/record-rate", token)
    assert status == 200, body
    status, body = api.get(f"/srm/v2/cluster-metrics/{other.source}/{other.target}/record-rate", token)
    assert status == 403, body
    assert body["detail"] == (
        f"not allowed to read flow {other.name}: it needs read access to DAG {other.source}_to_{other.target}.replicate"
    )
    for path in (
        f"/replications/{other.source}/{other.target}/topics",
        f"/translate?source={other.source}&target={other.target}&group=g",
    ):
        assert api.get(f"/srm/v2{path}", token)[0] == 403, path
    status, body = api.get("/srm/v2/replications", token)
    assert status == 200 and [f["flow"] for f in body["replications"]] == [mine.name], body
    assert {c["cluster"] for c in body["clusters"]} == {mine.source, mine.target}
