// The Replications page. Everything it shows comes from the REST API next to it (../v2/...):
// GET /v2/replications (the same facts as `srm-control status`), the flow's metric series and its
// per-topic table. Text from the API is set with textContent only, never parsed as HTML.
"use strict";

const API = "../v2";
const REFRESH_MS = 30000;
const SAMPLES = 60;
const STATES = ["running", "waiting", "stalled", "failed", "paused", "unreachable", "unknown"];
const SVG = "http://www.w3.org/2000/svg";
const CHARTS = [
  {
    id: "chart-throughput",
    title: "Throughput",
    series: [
      { metric: "record-rate", label: "records/s", color: "#1c7ed6", scale: "records" },
      { metric: "byte-rate", label: "bytes/s", color: "#ae3ec9", scale: "bytes" },
    ],
  },
  {
    id: "chart-latency",
    title: "Latency",
    series: [
      { metric: "replication-latency-ms", label: "replication latency ms", color: "#f76707", scale: "ms" },
      { metric: "record-age-ms", label: "record age ms", color: "#0ca678", scale: "ms" },
    ],
  },
  {
    id: "chart-lag",
    title: "Lag",
    series: [{ metric: "replication-records-lag", label: "records behind", color: "#e03131", scale: "records" }],
  },
  {
    id: "chart-checkpoint",
    title: "Checkpoints",
    series: [{ metric: "checkpoint-latency-ms", label: "checkpoint latency ms", color: "#5f3dc4", scale: "ms" }],
  },
];

const COMPACT = new Intl.NumberFormat(undefined, { notation: "compact", maximumFractionDigits: 1 });
const state = { flows: [], selected: null, charts: [], refreshes: 0, timer: null };

function $(id) {
  return document.getElementById(id);
}

async function getJson(path) {
  const response = await fetch(API + path, { credentials: "same-origin", headers: { Accept: "application/json" } });
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const why = body && body.detail ? body.detail : response.statusText;
    throw new Error(`${path}: ${response.status} ${typeof why === "string" ? why : JSON.stringify(why)}`);
  }
  return body;
}

function windowQuery() {
  return `minutes=${Number($("window").value)}&samples=${SAMPLES}`;
}

function stateOf(flow) {
  return STATES.includes(flow.state) ? flow.state : "unknown";
}

function element(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return "never";
  if (seconds < 90) return `${Math.round(seconds)} s ago`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min ago`;
  return `${(seconds / 3600).toFixed(1)} h ago`;
}

// Records behind, summed over the flow's topics; unknown (null) while its clusters could not be asked.
function totalLag(flow) {
  const values = Object.values(flow.lag || {});
  if (!values.length && ["unreachable", "unknown"].includes(stateOf(flow))) return null;
  return values.reduce((sum, behind) => sum + behind, 0);
}

function number(value, digits = 0) {
  if (value === null || value === undefined) return "–";
  return Number(value).toLocaleString(undefined, { maximumFractionDigits: digits });
}

function badge(flow) {
  const s = stateOf(flow);
  const node = element("span", s, `state state-${s}`);
  node.dataset.state = s;
  return node;
}

// --- the picture of clusters and flows ---------------------------------------------------------

function svgNode(tag, attributes) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, value);
  return node;
}

function drawTopology(flows) {
  const width = 420;
  const height = 300;
  const radius = 36;
  const clusters = [...new Set(flows.flatMap((f) => [f.source, f.target]))].sort();
  const ring = clusters.length > 1 ? 110 : 0;
  const at = {};
  clusters.forEach((cluster, i) => {
    const angle = -Math.PI / 2 + (2 * Math.PI * i) / clusters.length;
    at[cluster] = { x: width / 2 + ring * Math.cos(angle), y: height / 2 + ring * Math.sin(angle) };
  });
  const svg = svgNode("svg", { viewBox: `0 0 ${width} ${height}`, role: "img" });
  const defs = svgNode("defs");
  for (const s of STATES) {
    const marker = svgNode("marker", {
      id: `arrow-${s}`,
      viewBox: "0 0 10 10",
      refX: "9",
      refY: "5",
      markerWidth: "5",
      markerHeight: "5",
      orient: "auto",
    });
    marker.appendChild(svgNode("path", { d: "M0,0 L10,5 L0,10 z", class: `stroke-${s}` }));
    defs.appendChild(marker);
  }
  svg.appendChild(defs);
  for (const flow of flows) {
    const s = stateOf(flow);
    const from = at[flow.source];
    const to = at[flow.target];
    const dx = to.x - from.x;
    const dy = to.y - from.y;
    const length = Math.hypot(dx, dy) || 1;
    const [ux, uy] = [dx / length, dy / length];
    // Bend to the right of the direction of travel: A->B and B->A never overlap.
    const bend = 28;
    const mid = { x: (from.x + to.x) / 2 - uy * bend, y: (from.y + to.y) / 2 + ux * bend };
    const start = { x: from.x + ux * radius, y: from.y + uy * radius };
    const end = { x: to.x - ux * (radius + 4), y: to.y - uy * (radius + 4) };
    const group = svgNode("g", { "data-flow": flow.flow, "data-state": s });
    const path = svgNode("path", {
      d: `M${start.x},${start.y} Q${mid.x},${mid.y} ${end.x},${end.y}`,
      class: `flow stroke-${s}${flow.flow === state.selected ? " selected" : ""}`,
      "marker-end": `url(#arrow-${s})`,
    });
    const title = svgNode("title");
    title.textContent = `${flow.flow}: ${s} (${flow.reason})`;
    path.appendChild(title);
    const label = svgNode("text", { x: mid.x - uy * 10, y: mid.y + ux * 10, class: `flow-label stroke-${s}` });
    label.textContent = s;
    group.append(path, label);
    group.addEventListener("click", () => select(flow.flow));
    svg.appendChild(group);
  }
  for (const cluster of clusters) {
    const group = svgNode("g", { class: "cluster", "data-cluster": cluster });
    group.appendChild(svgNode("circle", { cx: at[cluster].x, cy: at[cluster].y, r: radius }));
    const name = svgNode("text", { x: at[cluster].x, y: at[cluster].y });
    name.textContent = cluster;
    group.appendChild(name);
    svg.appendChild(group);
  }
  $("topology").replaceChildren(svg);
}

// --- the table of flows and the selected flow --------------------------------------------------

function drawFlows(flows) {
  const rows = flows.map((flow) => {
    const row = element("tr");
    row.dataset.flow = flow.flow;
    if (flow.flow === state.selected) row.className = "selected";
    const stateCell = element("td");
    stateCell.appendChild(badge(flow));
    row.append(
      element("td", flow.flow),
      stateCell,
      element("td", flow.since || ""),
      element("td", number(totalLag(flow)), "number"),
      element("td", age(flow.heartbeat_age_s)),
      element("td", age(flow.checkpoint_age_s)),
      element("td", flow.reason),
    );
    row.addEventListener("click", () => select(flow.flow));
    return row;
  });
  $("flows").tBodies[0].replaceChildren(...rows);
}

function safeLink(url) {
  // Only links into a web server: Airflow's task log page.
  return /^(https?:\/\/|\/)/.test(url || "") ? url : null;
}

function drawError(error) {
  const cell = $("detail-error");
  cell.replaceChildren();
  if (!error) {
    cell.textContent = "none";
    return;
  }
  cell.append(element("span", `${error.message} (at ${error.at}) `, "error-message"));
  const url = safeLink(error.log_url);
  if (url) {
    const link = element("a", "task log", "error-log");
    link.href = url;
    link.addEventListener("click", (event) => {
      if (openInAirflow(url)) event.preventDefault();
    });
    cell.appendChild(link);
  }
}

function openInAirflow(url) {
  // Airflow shows this page in a sandboxed frame that may not navigate the top window. The frame
  // has the UI's origin, so it moves Airflow's own router to the log's path instead (the path
  // only: the log URL's host is Airflow's configured base_url, which may not be the one in use).
  try {
    const target = new URL(url, window.location.href);
    const top = window.top;
    if (top === window) return false;
    top.history.pushState(null, "", target.pathname + target.search + target.hash);
    top.dispatchEvent(new PopStateEvent("popstate", { state: null }));
    return true;
  } catch (error) {
    return false; // then the link opens in this frame
  }
}

function drawDetail(flow) {
  $("detail").hidden = false;
  $("detail-flow").textContent = flow.flow;
  $("detail-state").replaceWith(Object.assign(badge(flow), { id: "detail-state" }));
  $("detail-reason").textContent = flow.reason;
  $("detail-heartbeat").textContent = age(flow.heartbeat_age_s);
  $("detail-checkpoint").textContent = age(flow.checkpoint_age_s);
  $("detail-lag").textContent = number(totalLag(flow));
  drawError(flow.last_error);
}

// --- charts -------------------------------------------------------------------------------------

function aligned(responses) {
  // uPlot wants one x array: the union of the samples' times, null where a series has none.
  const times = [...new Set(responses.flatMap((r) => r.series.map((p) => p.timestamp)))].sort((a, b) => a - b);
  const index = new Map(times.map((t, i) => [t, i]));
  const columns = responses.map((r) => {
    const values = new Array(times.length).fill(null);
    for (const point of r.series) values[index.get(point.timestamp)] = point.value;
    return values;
  });
  return [times.map((t) => t / 1000), ...columns];
}

function chartOptions(spec, width, span) {
  const scales = [...new Set(spec.series.map((s) => s.scale))];
  return {
    title: spec.title,
    width,
    height: 220,
    // The whole window on the time axis, however few samples hold data.
    scales: { x: { time: true, range: () => [span.from / 1000, span.to / 1000] } },
    series: [
      {},
      ...spec.series.map((s) => ({
        label: s.label,
        stroke: s.color,
        width: 2,
        scale: s.scale,
        spanGaps: false,
        // Sparse series (a flow that just started) as dots, dense ones as lines.
        points: { show: (u, seriesIdx, first, last) => last - first < 40, size: 6, fill: s.color },
      })),
    ],
    axes: [
      {},
      ...scales.map((scale, i) => ({
        scale,
        side: i === 0 ? 3 : 1,
        size: 70,
        grid: { show: i === 0 },
        values: (u, values) => values.map((v) => COMPACT.format(v)),
      })),
    ],
  };
}

async function drawCharts(flow) {
  for (const chart of state.charts) chart.destroy();
  state.charts = [];
  const base = `/cluster-metrics/${encodeURIComponent(flow.source)}/${encodeURIComponent(flow.target)}`;
  await Promise.all(
    CHARTS.map(async (spec) => {
      const box = $(spec.id);
      const responses = await Promise.all(spec.series.map((s) => getJson(`${base}/${s.metric}?${windowQuery()}`)));
      const points = responses.reduce((n, r) => n + r.series.length, 0);
      box.dataset.points = String(points);
      box.replaceChildren();
      if (points === 0) {
        box.append(element("h4", spec.title), element("p", "no data in this window", "empty"));
        return;
      }
      const width = Math.max(360, box.clientWidth || 460);
      const span = { from: responses[0].from, to: responses[0].to };
      state.charts.push(new uPlot(chartOptions(spec, width, span), aligned(responses), box));
    }),
  );
}

// --- topics -------------------------------------------------------------------------------------

async function drawTopics(flow) {
  const path = `/replications/${encodeURIComponent(flow.source)}/${encodeURIComponent(flow.target)}/topics`;
  const found = await getJson(`${path}?${windowQuery()}`);
  const byTopic = new Map(found.topics.map((t) => [t.topic, t]));
  for (const topic of Object.keys(flow.lag || {})) {
    if (!byTopic.has(topic)) byTopic.set(topic, { topic, remote_topic: null, records: 0 });
  }
  const rows = [...byTopic.values()]
    .sort((a, b) => a.topic.localeCompare(b.topic))
    .map((t) => {
      const row = element("tr");
      row.dataset.topic = t.topic;
      const lag = flow.lag && t.topic in flow.lag ? flow.lag[t.topic] : null;
      row.append(
        element("td", t.topic),
        element("td", t.remote_topic || "–"),
        element("td", number(lag), "number lag"),
        element("td", number(t.records), "number records"),
        element("td", number(t.record_rate, 1), "number"),
        element("td", number(t.byte_rate, 0), "number"),
        element("td", number(t.latency_avg_ms, 1), "number"),
        element("td", number(t.record_age_avg_ms, 1), "number"),
        element("td", t.last_copied_at || "–"),
      );
      return row;
    });
  $("topics").tBodies[0].replaceChildren(...rows);
}

// --- refresh ------------------------------------------------------------------------------------

function mostUrgent(flows) {
  // What an on-call engineer looks at first: a failed flow, then a stalled one, ...
  const order = ["failed", "unreachable", "waiting", "stalled", "unknown", "paused", "running"];
  const ranked = [...flows].sort((a, b) => order.indexOf(stateOf(a)) - order.indexOf(stateOf(b)));
  return ranked.length ? ranked[0].flow : null;
}

function select(name) {
  state.selected = name;
  render().catch(showProblem);
}

function showProblem(error) {
  const node = $("problem");
  node.hidden = false;
  node.textContent = String(error.message || error);
}

async function render() {
  drawTopology(state.flows);
  drawFlows(state.flows);
  const flow = state.flows.find((f) => f.flow === state.selected);
  if (!flow) {
    $("detail").hidden = true;
    return;
  }
  drawDetail(flow);
  await Promise.all([drawCharts(flow), drawTopics(flow)]);
}

// The clusters that do not answer the monitoring service, and the flows the YAML cannot parse: what
// an on-call engineer must see before any chart.
function drawUnanswered(clusters, invalid) {
  const box = $("clusters");
  box.replaceChildren();
  for (const c of clusters.filter((c) => !c.reachable)) {
    const line = element("p", "", "problem");
    line.dataset.cluster = c.cluster;
    line.append(element("span", "unreachable", "state state-unreachable"), ` ${c.reason}`);
    box.appendChild(line);
  }
  for (const f of invalid) {
    const line = element("p", "", "problem");
    line.append(element("span", "invalid", "state state-invalid"), ` flow ${f.flow}: ${f.reason}`);
    box.appendChild(line);
  }
  box.hidden = !box.childElementCount;
}

async function refresh() {
  try {
    const found = await getJson("/replications");
    state.flows = found.replications;
    drawUnanswered(found.clusters || [], found.invalid || []);
    if (!state.flows.some((f) => f.flow === state.selected)) state.selected = mostUrgent(state.flows);
    await render();
    $("problem").hidden = true;
    $("updated").textContent = `updated ${new Date().toLocaleTimeString()}, every ${REFRESH_MS / 1000} s`;
  } catch (error) {
    showProblem(error);
  } finally {
    state.refreshes += 1;
    document.body.dataset.refreshes = String(state.refreshes);
    clearTimeout(state.timer);
    state.timer = setTimeout(refresh, REFRESH_MS);
  }
}

$("window").addEventListener("change", refresh);
$("refresh").addEventListener("click", refresh);
refresh();
