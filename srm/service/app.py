"""The REST app (SRM Service's v2 paths), built by a factory so tests and the plugin share it.

Every route needs an Airflow user: the app takes Airflow's own ``get_user`` dependency (the bearer
token from ``POST /auth/token`` or the UI's session cookie). Airflow does not protect plugin apps
by itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse

from srm.airflow.defaults import dag_id
from srm.config import load_config
from srm.config.model import Flow, SrmConfig
from srm.errors import NotConfiguredError, SrmError, UsageError
from srm.health import flow_health
from srm.offsets.api import Direction, translate
from srm.service import metrics
from srm.service.series import MAX_SAMPLES, Window
from srm.service.topic_summary import topic_summary
from srm.warehouse import Warehouse

DEFAULT_MINUTES = 60
UI = FilePath(__file__).with_name("ui")  # the Replications page: static files that read only this API
MAX_HOURS = 24 * 90


def window(
    minutes: Annotated[
        int | None, Query(ge=1, le=MAX_HOURS * 60, description="the last N minutes (default 60)")
    ] = None,
    hours: Annotated[int | None, Query(ge=1, le=MAX_HOURS, description="the last N hours")] = None,
    samples: Annotated[int, Query(ge=1, le=MAX_SAMPLES, description="samples in the window")] = 60,
) -> Window:
    """SRM's query parameters: the window ends now and spans ``minutes`` or ``hours``."""
    if minutes is not None and hours is not None:
        raise HTTPException(400, "give minutes or hours, not both")
    span_ms = minutes * 60_000 if minutes is not None else (hours or 0) * 3_600_000 or DEFAULT_MINUTES * 60_000
    end = int(time.time() * 1000) + 1
    return Window(end - span_ms, end, samples)


WindowDep = Annotated[Window, Depends(window)]
MetricName = Annotated[str, Path(description=f"one of {', '.join(sorted(metrics.CATALOG))}")]


def create_app(
    config: Callable[[], SrmConfig] = load_config,
    user: Callable[..., Any] | None = None,
    groups_reader: Callable[..., Any] | None = None,
    paused: Callable[[list[str]], dict[str, bool]] | None = None,
) -> FastAPI:
    """The app. ``user`` authenticates a request (Airflow's ``get_user``); ``groups_reader`` also
    authorizes reading consumer-group positions (default: read access to the runs of the
    ``srm.failover`` DAG, the DAG that moves groups)."""
    if user is None:
        from airflow.api_fastapi.core_api.security import get_user

        user = get_user
    if groups_reader is None:
        groups_reader = _failover_dag_reader()
    app = FastAPI(
        title="Streams Replication Manager REST API",
        description="SRM Service v2 paths over this project's warehouse. Authenticate as for Airflow's "
        "REST API: a bearer token from POST /auth/token.",
        version="2",
    )
    app.state.config = config
    app.state.paused = paused or airflow_paused
    app.add_exception_handler(RequestValidationError, _bad_request)  # type: ignore[arg-type]
    app.include_router(_routes(), dependencies=[Depends(user)])
    app.include_router(_translation(), dependencies=[Depends(user), Depends(groups_reader)])
    app.include_router(_page(), dependencies=[Depends(user)])
    return app


def airflow_paused(dag_ids: list[str]) -> dict[str, bool]:
    """Which of ``dag_ids`` are paused, from Airflow's database (the API server's own session)."""
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(select(DagModel.dag_id, DagModel.is_paused).where(DagModel.dag_id.in_(dag_ids)))
        return {dag_id: bool(is_paused) for dag_id, is_paused in rows}


def _failover_dag_reader() -> Callable[..., Any]:
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import requires_access_dag

    from srm.airflow.failover_dag import DAG_ID

    return requires_access_dag("GET", DagAccessEntity.RUN, param_dag_id=DAG_ID)


async def _bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
    return JSONResponse({"detail": "; ".join(problems)}, status_code=400)


def _config(request: Request) -> SrmConfig:
    try:
        loaded: SrmConfig = request.app.state.config()
    except SrmError as exc:
        raise HTTPException(503, f"the replication configuration cannot be read: {exc}") from None
    return loaded


ConfigDep = Annotated[SrmConfig, Depends(_config)]


def _known_clusters(config: SrmConfig, *aliases: str) -> None:
    known = [c.alias for c in config.clusters]
    for alias in aliases:
        if alias not in known:
            raise HTTPException(404, f"unknown cluster {alias!r} (known: {', '.join(known)})")


def _flow(config: SrmConfig, source: str, target: str) -> Flow:
    _known_clusters(config, source, target)
    try:
        return config.flow(source, target)
    except NotConfiguredError:
        raise HTTPException(404, f"no flow {source}->{target} in {config.file}") from None


def _series(config: SrmConfig, flow: Flow, name: str, span: Window, **topic: Any) -> dict[str, Any]:
    try:
        metrics.metric(name)
    except metrics.UnknownMetric as exc:
        raise HTTPException(404, str(exc)) from None
    warehouse = Warehouse(config.storage.warehouse)
    found = metrics.series(warehouse, flow, name, span, **topic)
    # An empty window is fine for a topic the flow replicated before; a name it never did is a 404.
    if topic and not found["series"] and not metrics.topic_known(warehouse, flow, topic["topic"], topic["side"]):
        raise HTTPException(404, f"flow {flow.name} has not replicated {topic['side']} topic {topic['topic']!r}")
    return found


def _routes() -> APIRouter:
    router = APIRouter(prefix="/v2")

    @router.get("/cluster-metrics/{source}/{target}/{metric}", summary="A metric of one flow, all its topics")
    def cluster_metrics(source: str, target: str, metric: MetricName, span: WindowDep, config: ConfigDep) -> Any:
        return _series(config, _flow(config, source, target), metric, span)

    @router.get(
        "/topic-metrics/{source}/{target}/{upstreamTopic}/{metric}",
        summary="A metric of one source topic of a flow (works with prefixless replication)",
    )
    def upstream_topic_metrics(
        source: str, target: str, upstreamTopic: str, metric: MetricName, *, span: WindowDep, config: ConfigDep
    ) -> Any:
        flow = _flow(config, source, target)
        return _series(config, flow, metric, span, topic=upstreamTopic, side="upstream")

    @router.get("/topic-metrics/{target}/{downstreamTopic}/{metric}", summary="A metric of one remote topic")
    def downstream_topic_metrics(
        target: str, downstreamTopic: str, metric: MetricName, span: WindowDep, config: ConfigDep
    ) -> Any:
        flow = _flow_of_remote_topic(config, target, downstreamTopic)
        return _series(config, flow, metric, span, topic=downstreamTopic, side="downstream")

    @router.get(
        "/replications", summary="Every flow: state with reason and since when, lag, heartbeat, checkpoint, error"
    )
    def replications(request: Request, config: ConfigDep) -> Any:
        dags = {dag_id(f, "replicate"): f for f in config.enabled_flows()}
        paused = request.app.state.paused(list(dags))
        return {"replications": [flow_health(config, f, paused.get(d)).as_dict() for d, f in dags.items()]}

    @router.get(
        "/replications/{source}/{target}/topics",
        summary="Per topic of a flow, in the window: records, bytes, their rates, latency, record age, last copy",
    )
    def replication_topics(source: str, target: str, span: WindowDep, config: ConfigDep) -> Any:
        flow = _flow(config, source, target)
        topics = topic_summary(Warehouse(config.storage.warehouse), flow, span)
        return {"flow": flow.name, "from": span.start_ms, "to": span.end_ms, "topics": topics}

    return router


def _page() -> APIRouter:
    """The Replications page's files (the Airflow UI shows the page in its navigation)."""
    router = APIRouter(include_in_schema=False)

    @router.get("/ui")
    def page_root() -> RedirectResponse:
        return RedirectResponse("ui/")  # relative: the page's own links are relative to its folder

    @router.get("/ui/{name:path}")
    def page_file(name: str) -> FileResponse:
        root = UI.resolve()
        path = (root / (name or "index.html")).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            raise HTTPException(404, f"no file {name!r} in the Replications page")
        return FileResponse(path, headers={"Cache-Control": "no-cache"})

    return router


def _flow_of_remote_topic(config: SrmConfig, target: str, topic: str) -> Flow:
    """The flow into ``target`` that writes ``topic``: named by the policy's prefix, else the
    only flow into ``target`` whose metrics name it (prefixless flows)."""
    _known_clusters(config, target)
    flows = [f for f in config.enabled_flows() if f.target == target]
    named = [f for f in flows if f.policy.topic_source(topic) == f.source]
    warehouse = Warehouse(config.storage.warehouse)
    candidates = named or [f for f in flows if metrics.topic_known(warehouse, f, topic, "downstream")]
    if not candidates:
        raise HTTPException(404, f"no flow into {target} replicates to topic {topic!r}")
    if len(candidates) > 1:
        names = ", ".join(f.name for f in candidates)
        raise HTTPException(400, f"topic {topic!r} on {target} is written by {names}: use the path with the source")
    return candidates[0]


def _translation() -> APIRouter:
    router = APIRouter(prefix="/v2")

    @router.get("/translate", summary="Translate a consumer group's offsets, or one offset, either direction")
    def translate_offsets(
        source: str,
        target: str,
        *,
        config: ConfigDep,
        group: Annotated[
            str | None, Query(description="a group (or a comma list); else topic/partition/offset")
        ] = None,
        topic: Annotated[str | None, Query(description="the topic on the cluster the consumer leaves")] = None,
        partition: Annotated[int | None, Query(ge=0)] = None,
        offset: Annotated[int | None, Query(ge=0)] = None,
        direction: Annotated[Direction, Query(description="forward: source to target; backward: back")] = "forward",
        live: Annotated[bool, Query(description="the group's committed offsets, not the checkpoints")] = False,
    ) -> Any:
        flow = _flow(config, source, target)
        groups = [g.strip() for g in group.split(",") if g.strip()] if group is not None else None
        try:
            found = translate(
                config, flow, direction, groups=groups, topic=topic, partition=partition, offset=offset, live=live
            )
        except UsageError as exc:
            raise HTTPException(400, str(exc)) from None
        except NotConfiguredError as exc:
            raise HTTPException(404, str(exc)) from None
        except SrmError as exc:
            raise HTTPException(503, str(exc)) from None
        return {"source": source, "target": target, "direction": direction, "offsets": [vars(t) for t in found]}

    return router
