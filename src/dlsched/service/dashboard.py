"""The live dashboard: one server-rendered HTML page that a small script refreshes from JSON.

``GET /dashboard`` renders the page from :func:`dashboard_data` (so it is complete without any
script); the inline script fetches ``GET /api/v1/dashboard`` (the same data) every few seconds
and redraws the same elements. No build step, no external files: the page works offline.
Sections: nodes x GPUs (each GPU's pods, shared GPUs marked, utilisation and memory: observed
when an agent reported it, else predicted), the queue per VC in policy order with predicted
values and why each pod waits, the decision log with its reasons, predicted vs observed.
"""

from __future__ import annotations

import html
import math

from dlsched.service.metrics_data import predicted_vs_observed


def _num(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 4)


def dashboard_data(service, decisions: int = 50) -> dict:
    """Everything the page shows, as plain JSON."""
    core = service.core
    rows = core.queue()  # outside the lock: a stale ETA is refreshed by a forward run that holds none
    with core.lock:
        st = core.state
        nodes = []
        for idx, name in enumerate(st.node_ids):
            if st.node_removed[idx]:
                continue
            gpus = []
            for g in range(st.node_gpus[idx]):
                jobs = []
                util = mem = 0.0
                for job in st.gpu_holders(idx, g):
                    seen = core.observed.get(job.job_id)
                    j_util = seen[0] if seen and seen[0] == seen[0] else job.pred_gpu_util
                    j_mem = seen[1] if seen and seen[1] == seen[1] else job.pred_gpu_mem_mib
                    util += j_util if j_util == j_util else 0.0
                    mem += j_mem if j_mem == j_mem else 0.0
                    jobs.append({"pod": core.pods[job.job_id].key, "state": job.state.name.lower(),
                                 "util": _num(j_util), "mem_mib": _num(j_mem), "observed": seen is not None})
                gpus.append({"index": g, "jobs": jobs, "shared": len(jobs) > 1, "util": round(min(util, 100.0), 2),
                             "mem_mib": round(mem, 1)})
            nodes.append({"name": name, "vc": st.vcs[st.node_vc[idx]].name, "cordoned": st.node_cordoned[idx],
                          "gpu_mem_mib": st.node_mem[idx], "gpus": gpus})
        queue = []
        for row in rows:
            job = core.jobs.get(row["uid"])
            reason = row["reason"] or (core.why_waiting(row["uid"]) if job is not None else "")
            queue.append({**row, "reason": reason,
                          "pred_util": _num(job.pred_gpu_util) if job else None,
                          "pred_mem_mib": _num(job.pred_gpu_mem_mib) if job else None})
        pvo = [{k: (_num(v) if isinstance(v, float) else v) for k, v in r.items()} for r in predicted_vs_observed(core)]
        policy = core.policy.name
        filters = list(reversed(core.recent_filters))
        gangs = core.gangs.rows()   # gangs: one row each, with its pods (service/gangs.py)
    log = core.store.recent_decisions(decisions)
    return {"policy": policy, "nodes": nodes, "queue": queue,
            "decisions": [{"id": d["id"], "at": d["at"], "kind": d["kind"], "pod": d["pod"], "node": d["node"],
                           "gpus": d["gpus"], "detail": d["detail"]} for d in log],
            "predicted_vs_observed": pvo, "filters": filters, "gangs": gangs,
            # --gpu-binding envvar-configmap: the pods whose GPU choice did not reach the container (else None)
            "gpu_binding": binding.state()["not_bound"] if (binding := getattr(service, "gpu_binding", None)) else None}


def _e(x: object) -> str:
    return html.escape("" if x is None else str(x))


def _fmt(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "–"
    return f"{x:.0f}%" if pct else f"{x:.0f}"   # utilisation is in percent already


def _when(seconds: float | None) -> str:
    """An ETA column cell: "in 12 min" / "in 2.5 h" / "–" (no estimate); the script's ``w``."""
    if seconds is None:
        return "–"
    if seconds < 7200:   # rounded half up, as the script's Math.round
        return f"in {math.floor(seconds / 60 + 0.5)} min"
    return f"in {math.floor(seconds / 360 + 0.5) / 10:.1f} h"


def render_body(data: dict) -> str:
    """The page's content; the script's ``render`` draws the same markup from the same data."""
    out = [f'<h1>dlsched <span id="policy">{_e(data["policy"])}</span></h1>', '<h2>Nodes</h2><div id="nodes">']
    for n in data["nodes"]:
        out.append(f'<div class="node" data-node="{_e(n["name"])}"><h3>{_e(n["name"])} '
                   f'<small>{_e(n["vc"])}{" cordoned" if n["cordoned"] else ""}</small></h3><div class="gpus">')
        for g in n["gpus"]:
            cls = "gpu shared" if g["shared"] else ("gpu busy" if g["jobs"] else "gpu free")
            jobs = "".join(f'<li class="job" data-pod="{_e(j["pod"])}">{_e(j["pod"])} '
                           f'{_fmt(j["util"], True)} {_fmt(j["mem_mib"])} MiB{" (obs)" if j["observed"] else ""}</li>'
                           for j in g["jobs"])
            out.append(f'<div class="{cls}" data-gpu="{g["index"]}"><b>GPU {g["index"]}</b> '
                       f'<span class="util">{_fmt(g["util"], True)}</span> '
                       f'<span class="mem">{_fmt(g["mem_mib"])}/{_fmt(n["gpu_mem_mib"])} MiB</span>'
                       f'<ul>{jobs}</ul></div>')
        out.append("</div></div>")
    out.append('</div><h2>Queue</h2><table id="queue"><tr><th>VC</th><th>#</th><th>pod</th><th>GPUs</th>'
               '<th>pred. util</th><th>pred. MiB</th><th>why it waits</th><th>ETA</th></tr>')
    for q in data["queue"]:
        out.append(f'<tr data-pod="{_e(q["pod"])}"><td>{_e(q["vc"])}</td><td>{q["rank"]}</td><td>{_e(q["pod"])}</td>'
                   f'<td>{q["gpus"]}</td><td>{_fmt(q["pred_util"], True)}</td><td>{_fmt(q["pred_mem_mib"])}</td>'
                   f'<td>{_e(q["reason"])}</td><td>{_when(q.get("eta_in_s"))}</td></tr>')
    out.append('</table><h2>Gangs</h2><table id="gangs"><tr><th>gang</th><th>state</th><th>pods</th><th>GPUs</th>'
               '<th>its pods (node: GPUs)</th></tr>')
    for g in data.get("gangs", ()):
        pods = "".join(f'<li>{_e(p["pod"])} {_e(p["node"])}{": " if p["node"] else ""}'
                       f'{_e(",".join(map(str, p["gpu_indices"])))}</li>' for p in g["pods"])
        out.append(f'<tr data-gang="{_e(g["gang"])}"><td>{_e(g["gang"])}</td><td>{_e(g["state"])}</td>'
                   f'<td>{len(g["pods"])} of {g["size"]}</td><td>{g["gpus"]}</td><td><ul>{pods}</ul></td></tr>')
    out.append('</table><h2>Predicted vs observed</h2><table id="pvo"><tr><th>pod</th><th>util pred.</th>'
               '<th>util obs.</th><th>MiB pred.</th><th>MiB obs.</th></tr>')
    for r in data["predicted_vs_observed"]:
        out.append(f'<tr data-pod="{_e(r["pod"])}"><td>{_e(r["pod"])}</td><td>{_fmt(r["predicted_util"], True)}</td>'
                   f'<td>{_fmt(r["observed_util"], True)}</td><td>{_fmt(r["predicted_mem_mib"])}</td>'
                   f'<td>{_fmt(r["observed_mem_mib"])}</td></tr>')
    out.append('</table><h2>Decisions</h2><table id="decisions"><tr><th>id</th><th>kind</th><th>pod</th>'
               '<th>node</th><th>GPUs</th><th>reason</th></tr>')
    for d in data["decisions"]:
        out.append(f'<tr data-id="{d["id"]}"><td>{d["id"]}</td><td>{_e(d["kind"])}</td><td>{_e(d["pod"])}</td>'
                   f'<td>{_e(d["node"])}</td><td>{_e(d["gpus"])}</td><td>{_e(d["detail"])}</td></tr>')
    out.append('</table><h2>Extender answers</h2><table id="filters"><tr><th>pod</th><th>outcome</th>'
               '<th>passed</th><th>nodes rejected</th><th>why</th></tr>')
    for x in data["filters"]:
        out.append(f'<tr><td>{_e(x["pod"])}</td><td>{_e(x["outcome"])}</td><td>{_e(",".join(x["passed"]))}</td>'
                   f'<td>{x["rejected"]}</td><td>{_e(x["reason"])}</td></tr>')
    out.append("</table>")
    if data.get("gpu_binding") is not None:
        out.append('<h2>GPU choices not bound</h2><table id="gpu-binding"><tr><th>pod</th><th>node</th><th>GPUs</th>'
                   '<th>why</th></tr>')
        for r in data["gpu_binding"]:
            out.append(f'<tr data-pod="{_e(r["pod"])}"><td>{_e(r["pod"])}</td><td>{_e(r["node"])}</td>'
                       f'<td>{_e(r["gpus"])}</td><td>{_e(r["reason"])}</td></tr>')
        out.append("</table>")
    return "".join(out)


STYLE = """body{font-family:sans-serif;margin:1em}.gpus{display:flex;flex-wrap:wrap;gap:4px}
.gpu{border:1px solid #999;padding:4px;min-width:11em;font-size:90%}.free{background:#eef}
.busy{background:#cfc}.shared{background:#fc9}table{border-collapse:collapse;font-size:90%}
td,th{border:1px solid #ccc;padding:2px 6px}ul{margin:0;padding-left:1.2em}"""

# The same markup as render_body, drawn in the browser from /api/v1/dashboard.
SCRIPT = r"""
const e = s => String(s ?? "").replace(/[&<>"']/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;","'":"&#x27;"}[c]));
const f = (x, pct) => x === null || x === undefined ? "–" : (pct ? Math.round(x) + "%" : Math.round(x).toString());
const w = s => s === null || s === undefined ? "–" : (s < 7200 ? "in " + Math.round(s / 60) + " min" : "in " + (Math.round(s / 360) / 10).toFixed(1) + " h");
function render(d) {
  let o = [`<h1>dlsched <span id="policy">${e(d.policy)}</span></h1>`, '<h2>Nodes</h2><div id="nodes">'];
  for (const n of d.nodes) {
    o.push(`<div class="node" data-node="${e(n.name)}"><h3>${e(n.name)} <small>${e(n.vc)}${n.cordoned ? " cordoned" : ""}</small></h3><div class="gpus">`);
    for (const g of n.gpus) {
      const cls = g.shared ? "gpu shared" : (g.jobs.length ? "gpu busy" : "gpu free");
      const jobs = g.jobs.map(j => `<li class="job" data-pod="${e(j.pod)}">${e(j.pod)} ${f(j.util, true)} ${f(j.mem_mib)} MiB${j.observed ? " (obs)" : ""}</li>`).join("");
      o.push(`<div class="${cls}" data-gpu="${g.index}"><b>GPU ${g.index}</b> <span class="util">${f(g.util, true)}</span> <span class="mem">${f(g.mem_mib)}/${f(n.gpu_mem_mib)} MiB</span><ul>${jobs}</ul></div>`);
    }
    o.push("</div></div>");
  }
  o.push('</div><h2>Queue</h2><table id="queue"><tr><th>VC</th><th>#</th><th>pod</th><th>GPUs</th><th>pred. util</th><th>pred. MiB</th><th>why it waits</th><th>ETA</th></tr>');
  for (const q of d.queue) o.push(`<tr data-pod="${e(q.pod)}"><td>${e(q.vc)}</td><td>${q.rank}</td><td>${e(q.pod)}</td><td>${q.gpus}</td><td>${f(q.pred_util, true)}</td><td>${f(q.pred_mem_mib)}</td><td>${e(q.reason)}</td><td>${w(q.eta_in_s)}</td></tr>`);
  o.push('</table><h2>Gangs</h2><table id="gangs"><tr><th>gang</th><th>state</th><th>pods</th><th>GPUs</th><th>its pods (node: GPUs)</th></tr>');
  for (const g of (d.gangs || [])) o.push(`<tr data-gang="${e(g.gang)}"><td>${e(g.gang)}</td><td>${e(g.state)}</td><td>${g.pods.length} of ${g.size}</td><td>${g.gpus}</td><td><ul>${g.pods.map(p => `<li>${e(p.pod)} ${e(p.node)}${p.node ? ": " : ""}${e(p.gpu_indices.join(","))}</li>`).join("")}</ul></td></tr>`);
  o.push('</table><h2>Predicted vs observed</h2><table id="pvo"><tr><th>pod</th><th>util pred.</th><th>util obs.</th><th>MiB pred.</th><th>MiB obs.</th></tr>');
  for (const r of d.predicted_vs_observed) o.push(`<tr data-pod="${e(r.pod)}"><td>${e(r.pod)}</td><td>${f(r.predicted_util, true)}</td><td>${f(r.observed_util, true)}</td><td>${f(r.predicted_mem_mib)}</td><td>${f(r.observed_mem_mib)}</td></tr>`);
  o.push('</table><h2>Decisions</h2><table id="decisions"><tr><th>id</th><th>kind</th><th>pod</th><th>node</th><th>GPUs</th><th>reason</th></tr>');
  for (const x of d.decisions) o.push(`<tr data-id="${x.id}"><td>${x.id}</td><td>${e(x.kind)}</td><td>${e(x.pod)}</td><td>${e(x.node)}</td><td>${e(x.gpus)}</td><td>${e(x.detail)}</td></tr>`);
  o.push('</table><h2>Extender answers</h2><table id="filters"><tr><th>pod</th><th>outcome</th><th>passed</th><th>nodes rejected</th><th>why</th></tr>');
  for (const x of d.filters) o.push(`<tr><td>${e(x.pod)}</td><td>${e(x.outcome)}</td><td>${e(x.passed.join(","))}</td><td>${x.rejected}</td><td>${e(x.reason)}</td></tr>`);
  o.push("</table>");
  if (d.gpu_binding !== null && d.gpu_binding !== undefined) {
    o.push('<h2>GPU choices not bound</h2><table id="gpu-binding"><tr><th>pod</th><th>node</th><th>GPUs</th><th>why</th></tr>');
    for (const r of d.gpu_binding) o.push(`<tr data-pod="${e(r.pod)}"><td>${e(r.pod)}</td><td>${e(r.node)}</td><td>${e(r.gpus)}</td><td>${e(r.reason)}</td></tr>`);
    o.push("</table>");
  }
  document.getElementById("main").innerHTML = o.join("");
}
async function refresh() {
  try {
    const r = await fetch("/api/v1/dashboard", {cache: "no-store"});
    if (r.ok) { render(await r.json()); document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1); }
  } catch (err) { /* the service restarts: keep the last page */ }
}
setInterval(refresh, REFRESH_MS);
refresh();
"""


def render_page(data: dict, refresh_s: float = 3.0) -> str:
    script = SCRIPT.replace("REFRESH_MS", str(int(refresh_s * 1000)))
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>dlsched dashboard</title>'
            f"<style>{STYLE}</style></head><body data-refreshed=\"0\"><div id=\"main\">{render_body(data)}</div>"
            f"<script>{script}</script></body></html>")
