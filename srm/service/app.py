"""The REST app (SRM Service's v2 paths), built by a factory so tests and the plugin share it.

Every route needs an Airflow user: the app takes Airflow's own ``get_user`` dependency (the bearer
token from ``POST /auth/token`` or the UI's session cookie), and so do ``/openapi.json`` and
``/docs``. Airflow does not protect plugin apps by itself. A flow's status, metrics and offset
translation need read access to the flow's replicate DAG through Airflow's auth manager; a flow the
user may not read is answered 403 and left out of lists.

Nothing on the request path waits for a Kafka cluster: flow states, lag and the Prometheus
exposition (``/metrics``, for a bearer token of its own: ``monitoring.prometheus.token.file``) come
from the monitor's snapshot (srm.service.monitor), refreshed in the background; metric series come
from the warehouse. The configuration is read leniently and again only when its file changes: a
broken flow is listed with its line and the others are served. Error bodies name the configuration
file, never its path, and never a cluster's bootstrap servers.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response

from srm.config.dag_ids import dag_id
from srm.config.model import Flow, SrmConfig
from srm.errors import NotConfiguredError, SrmError, UsageError
from srm.offsets.api import Direction, translate
from srm.service import exposition, metrics
from srm.service.airflow_auth import airflow_flow_access, airflow_paused, failover_dag_reader
from srm.service.monitor import ConfigSource, Monitor
from srm.service.series import MAX_SAMPLES, Window
from srm.service.snapshot import Snapshot, iso, issue_text, redact
from srm.service.topic_summary import topic_summary
from srm.storage.warehouse import Warehouse

DEFAULT_MINUTES = 60
UI = FilePath(__file__).with_name("ui")  # the Replications page: static files that read only this API
MAX_HOURS = 24 * 90
FIRST_ROUND_WAIT_S = 15.0  # the first request after a start waits this long for the monitor's first round
FlowAccess = Callable[[Any, Flow], bool]  # (the user, a flow) -> may the user read the flow?


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
    config_path: str | FilePath | None = None,
    *,
    user: Callable[..., Any] | None = None,
    groups_reader: Callable[..., Any] | None = None,
    paused: Callable[[list[str]], dict[str, bool]] | None = None,
    flow_access: FlowAccess | None = None,
    refresh_s: float | None = None,
) -> FastAPI:
    """The app, reading ``config_path`` (default ``$SRM_CONFIG`` or ``conf/srm.yaml``). ``user``
    authenticates a request (Airflow's ``get_user``); ``groups_reader`` also authorizes reading
    consumer-group positions (default: read access to the runs of the ``srm.failover`` DAG, the DAG
    that moves groups); ``flow_access`` says whether a user may read a flow (default: Airflow's
    auth manager, read access to the flow's replicate DAG). Nothing is read or started here: the
    monitor starts with the first request that needs it."""
    if user is None:
        from airflow.api_fastapi.core_api.security import get_user

        user = get_user
    if groups_reader is None:
        groups_reader = failover_dag_reader()
    app = FastAPI(
        title="Streams Replication Manager REST API",
        description="SRM Service v2 paths over this project's warehouse. Authenticate as for Airflow's "
        "REST API: a bearer token from POST /auth/token.",
        version="2",
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    source = ConfigSource(config_path)
    app.state.source = source
    app.state.monitor = Monitor(source, paused or airflow_paused, refresh_s=refresh_s, render=exposition.render)
    app.state.flow_access = flow_access or airflow_flow_access
    app.add_exception_handler(RequestValidationError, _bad_request)  # type: ignore[arg-type]

    def authenticated(request: Request, who: Any = Depends(user)) -> None:  # noqa: B008 - FastAPI's idiom
        request.state.srm_user = who

    app.include_router(_routes(), dependencies=[Depends(authenticated)])
    app.include_router(_translation(), dependencies=[Depends(authenticated), Depends(groups_reader)])
    app.include_router(_page(), dependencies=[Depends(authenticated)])
    app.include_router(_described(app), dependencies=[Depends(authenticated)])
    app.include_router(_scrape())
    return app


async def _bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
    return JSONResponse({"detail": "; ".join(problems)}, status_code=400)


def _config(request: Request) -> SrmConfig:
    """The configuration without its broken flows; 503 when the file as a whole cannot be used."""
    config, issues = request.app.state.source.current()
    whole = [i for i in issues if i.flow is None]
    if config is None or whole:
        problems = "; ".join(issue_text(i) for i in (whole or issues)) or "no configuration"
        raise HTTPException(503, f"the replication configuration cannot be used: {problems}")
    loaded: SrmConfig = config
    return loaded


def _snapshot(request: Request) -> Snapshot:
    """The monitor's newest snapshot (the monitor starts with the first request that needs it)."""
    monitor: Monitor = request.app.state.monitor
    monitor.start()
    found = monitor.snapshot()
    if not found.taken_ms:
        found = monitor.wait_round(1, FIRST_ROUND_WAIT_S)
    return found


def _readable(request: Request) -> Callable[[Flow], bool]:
    """Whether the request's user may read a flow (the user the router's dependency authenticated)."""
    access: FlowAccess = request.app.state.flow_access
    who = request.state.srm_user
    return lambda flow: access(who, flow)


Readable = Annotated[Callable[[Flow], bool], Depends(_readable)]


ConfigDep = Annotated[SrmConfig, Depends(_config)]


def _known_clusters(config: SrmConfig, *aliases: str) -> None:
    known = [c.alias for c in config.clusters]
    for alias in aliases:
        if alias not in known:
            raise HTTPException(404, f"unknown cluster {alias!r} (known: {', '.join(known)})")


def _flow(config: SrmConfig, source: str, target: str, readable: Callable[[Flow], bool]) -> Flow:
    _known_clusters(config, source, target)
    try:
        flow = config.flow(source, target)
    except NotConfiguredError:
        raise HTTPException(404, f"no flow {source}->{target} in {FilePath(config.file).name}") from None
    if not readable(flow):
        raise HTTPException(
            403, f"not allowed to read flow {flow.name}: it needs read access to DAG {dag_id(flow, 'replicate')}"
        )
    return flow


def _public(text: str, config: SrmConfig) -> str:
    return redact(text, config.clusters, config.file)


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
    def cluster_metrics(
        source: str, target: str, metric: MetricName, *, span: WindowDep, config: ConfigDep, may: Readable
    ) -> Any:
        return _series(config, _flow(config, source, target, may), metric, span)

    @router.get(
        "/topic-metrics/{source}/{target}/{upstreamTopic}/{metric}",
        summary="A metric of one source topic of a flow (works with prefixless replication)",
    )
    def upstream_topic_metrics(
        source: str,
        target: str,
        upstreamTopic: str,
        metric: MetricName,
        *,
        span: WindowDep,
        config: ConfigDep,
        may: Readable,
    ) -> Any:
        flow = _flow(config, source, target, may)
        return _series(config, flow, metric, span, topic=upstreamTopic, side="upstream")

    @router.get("/topic-metrics/{target}/{downstreamTopic}/{metric}", summary="A metric of one remote topic")
    def downstream_topic_metrics(
        target: str, downstreamTopic: str, metric: MetricName, *, span: WindowDep, config: ConfigDep, may: Readable
    ) -> Any:
        flow = _flow_of_remote_topic(config, target, downstreamTopic, may)
        return _series(config, flow, metric, span, topic=downstreamTopic, side="downstream")

    @router.get(
        "/replications",
        summary="Every flow: state with reason and since when, lag, heartbeat, checkpoint, error; the clusters "
        "that do not answer; the flows the configuration cannot parse",
    )
    def replications(request: Request, may: Readable) -> Any:
        found = _snapshot(request)
        if found.problem or found.config is None:
            raise HTTPException(503, found.problem or "no configuration")
        config = found.config
        views = [v for v in found.flows.values() if may(v.flow)]
        used = {alias for v in views for alias in (v.flow.source, v.flow.target)}
        flows = []
        for view in views:
            entry = view.as_dict(found.taken_ms)
            entry["reason"] = _public(entry["reason"], config)
            if entry["last_error"]:
                entry["last_error"]["message"] = _public(entry["last_error"]["message"], config)
            flows.append(entry)
        clusters = [
            {
                "cluster": c.alias,
                "reachable": c.reachable,
                "since": iso(c.since_ms),
                "checked_at": iso(c.checked_ms),
                "reason": _public(c.unreachable_reason() or "", config),
            }
            for alias, c in sorted(found.clusters.items())
            if alias in used
        ]
        return {
            "replications": flows,
            "invalid": [b.as_dict() for b in found.broken],
            "clusters": clusters,
            "taken_at": iso(found.taken_ms),
        }

    @router.get(
        "/replications/{source}/{target}/topics",
        summary="Per topic of a flow, in the window: records, bytes, their rates, latency, record age, last copy",
    )
    def replication_topics(source: str, target: str, span: WindowDep, config: ConfigDep, may: Readable) -> Any:
        flow = _flow(config, source, target, may)
        topics = topic_summary(Warehouse(config.storage.warehouse), flow, span)
        return {"flow": flow.name, "from": span.start_ms, "to": span.end_ms, "topics": topics}

    return router


def _described(app: FastAPI) -> APIRouter:
    """``/openapi.json`` and ``/docs``, for a logged-in user only (FastAPI's own are switched off)."""
    router = APIRouter(include_in_schema=False)

    @router.get("/openapi.json")
    def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @router.get("/docs")
    def docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(openapi_url=f"{root}/openapi.json", title=f"{app.title} - docs")

    return router


def _scrape() -> APIRouter:
    """``/metrics``: the Prometheus exposition, for the bearer token in ``monitoring.prometheus.token.file``
    (Prometheus' ``authorization: {credentials_file: ...}``); off when that is not set."""
    router = APIRouter(include_in_schema=False)

    @router.get("/metrics")
    def scrape(request: Request, config: ConfigDep) -> Response:
        token_file = config.monitoring.prometheus_token_file
        if not token_file:
            raise HTTPException(404, "the Prometheus endpoint is off: set monitoring.prometheus.token.file")
        try:
            expected = FilePath(token_file).read_text(encoding="utf-8").strip()
        except OSError:
            raise HTTPException(
                503, "the Prometheus token file (monitoring.prometheus.token.file) cannot be read"
            ) from None
        given = request.headers.get("Authorization", "")
        if not expected or not hmac.compare_digest(given.encode(), f"Bearer {expected}".encode()):
            raise HTTPException(401, "a bearer token is needed", headers={"WWW-Authenticate": "Bearer"})
        found = _snapshot(request)
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(found.exposition, media_type=CONTENT_TYPE_LATEST)

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


def _flow_of_remote_topic(config: SrmConfig, target: str, topic: str, readable: Callable[[Flow], bool]) -> Flow:
    """The flow into ``target`` that writes ``topic``: named by the policy's prefix, else the
    only flow into ``target`` whose metrics name it (prefixless flows); among those the user may read."""
    _known_clusters(config, target)
    flows = [f for f in config.enabled_flows() if f.target == target and readable(f)]
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
        may: Readable,
    ) -> Any:
        flow = _flow(config, source, target, may)
        groups = [g.strip() for g in group.split(",") if g.strip()] if group is not None else None
        try:
            found = translate(
                config, flow, direction, groups=groups, topic=topic, partition=partition, offset=offset, live=live
            )
        except UsageError as exc:
            raise HTTPException(400, _public(str(exc), config)) from None
        except NotConfiguredError as exc:
            raise HTTPException(404, _public(str(exc), config)) from None
        except SrmError as exc:
            raise HTTPException(503, _public(str(exc), config)) from None
        return {"source": source, "target": target, "direction": direction, "offsets": [vars(t) for t in found]}

    return router
