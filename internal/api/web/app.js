// The vnet dashboard: topology from /status and its picture from /graph,
// charts from /series over the time range chosen, the history from
// /history with a picked generation's /diff against the one in force, the
// event list from /events, refreshed every second or two. It only reads.
// Everything is put in the page as text, never as HTML.
"use strict";

// Script errors are shown on the page rather than only in a console nobody
// has open.
function showError(text) {
  const box = document.getElementById("errors");
  if (!box) return;
  const li = document.createElement("li");
  li.textContent = text;
  box.append(li);
  box.hidden = false;
}
window.addEventListener("error", (e) => showError("script error: " + e.message + (e.filename ? " (" + e.filename + ":" + e.lineno + ")" : "")));
window.addEventListener("unhandledrejection", (e) => showError("script error: " + (e.reason && e.reason.message || e.reason)));

const REFRESH_MS = 1500;
const NORMAL_SHARES = 50;
// BUSIEST is how many vNICs get a chart when no VM is picked.
const BUSIEST = 12;
// CHART_POINTS is about as many steps as a chart is pixels wide: a longer
// range comes as averages over several samples a step.
const CHART_POINTS = 400;

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
let current = params.get("infra") || "";
let range = params.get("range") || "2m";
let vmPicked = params.get("vm") || "";
let genPicked = Number(params.get("gen")) || 0;
let historyKey = "";     // what the history table shows
let historyFetched = ""; // the status the history was fetched at
let historyShown = null;
let diffKey = "";
let pictureKey = "";
let charts = {}; // key -> {plot, kind}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function state(s) {
  return el("span", "state " + String(s).replace(/\s+/g, "-"), s);
}

async function getJSON(path) {
  const r = await fetch(path, {headers: {Accept: "application/json"}});
  const body = await r.json().catch(() => ({error: r.statusText}));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function mbit(bps) {
  return bps == null ? "-" : (bps / 1e6).toFixed(1) + " Mbit/s";
}

async function loadInfras() {
  const list = await getJSON("/api/v1/infras");
  const sel = $("infra");
  const names = list.map((i) => i.name);
  if (!names.includes(current)) current = names[0] || "";
  if (sel.options.length !== names.length || [...sel.options].some((o, i) => o.value !== names[i])) {
    sel.replaceChildren(...names.map((n) => { const o = el("option", "", n); o.value = n; return o; }));
  }
  sel.value = current;
  return names;
}

function renderTopology(st) {
  const top = $("topology");
  const hosts = [];
  for (const h of st.hosts || []) {
    const card = el("div", "host");
    card.id = "host-" + h.name;
    card.append(el("h3", "", h.name + (h.native ? " (native)" : "")));
    // Over etcd: the host's agent's standing, from its report.
    const view = st.cluster && (st.cluster.hosts || []).find((v) => v.host === h.name);
    if (view) {
      card.dataset.agent = view.state;
      const d = el("div", "item agent", "agent ");
      d.append(state(view.state));
      if (view.report) d.append(el("span", "muted", " generation " + view.report.generation + " of " + st.generation));
      card.append(d);
    }
    if ((h.nics || []).length) {
      card.append(el("h4", "", "physical NICs"));
      for (const n of h.nics) {
        const d = el("div", "item nic", n.name + " " + n.speed + (n.uplink_of ? " → " + n.uplink_of : "") + (n.ip ? " " + n.ip : "") + " ");
        d.append(state(n.state));
        card.append(d);
      }
    }
    const sws = (st.switches || []).filter((s) => (s.hosts || []).includes(h.name));
    if (sws.length) {
      card.append(el("h4", "", "switches"));
      for (const s of sws) {
        card.append(el("div", "item switch", s.name + " (" + s.type + ")" +
          ((s.uplinks || []).length ? " uplinks " + s.uplinks.join(", ") : "") +
          ((s.portgroups || []).length ? "; port groups " + s.portgroups.join(", ") : "")));
      }
    }
    const vms = (st.vms || []).filter((v) => v.host === h.name);
    if (vms.length) card.append(el("h4", "", "VMs"));
    for (const v of vms) {
      const d = el("div", "vm");
      d.id = "vm-" + v.name;
      d.dataset.vm = v.name;
      d.append(el("span", "name", v.name), el("span", "muted", v.cpus ? " " + v.cpus + " CPU" : ""));
      for (const n of v.nics || []) {
        const line = el("div", "vnic", n.name + " on " + n.portgroup + " " + (n.ip || "") + " " + n.mac + " ");
        line.append(state(n.state));
        if (n.uplink) line.append(el("span", "muted", " via " + n.uplink + " (" + n.why + ")"));
        d.append(line);
      }
      card.append(d);
    }
    const hps = (st.hostports || []).filter((p) => p.host === h.name);
    if (hps.length) card.append(el("h4", "", "host ports"));
    for (const p of hps) {
      const d = el("div", "item hostport", p.name + " on " + p.portgroup + " " + (p.ip || "") + " ");
      d.append(state(p.state));
      card.append(d);
    }
    hosts.push(card);
  }
  top.replaceChildren(...hosts);
  const drift = $("drift");
  drift.replaceChildren();
  if ((st.drift || []).length) {
    drift.append(el("p", "fail", "The host differs from the spec; an apply would:"), el("pre", "", st.drift.join("\n")));
  }
}

// renderBalancers lists each load balancer's backends, a row each.
function renderBalancers(st) {
  const lbs = st.load_balancers || [];
  $("lb-section").hidden = lbs.length === 0;
  const rows = [];
  for (const lb of lbs) {
    (lb.backends || []).forEach((b, i) => {
      const tr = el("tr", b.health === "down" ? "fail" : "");
      tr.dataset.lb = lb.site + "/" + lb.name;
      const first = i === 0;
      for (const v of [first ? lb.site + "/" + lb.name : "", first ? lb.vips.join(", ") : "", first ? lb.listeners.join(", ") : "",
        b.vm + " eth" + b.nic, b.host, (b.addrs || []).join(", ")]) {
        tr.append(el("td", "", v));
      }
      const h = el("td", "", "");
      h.append(state(b.health));
      if (b.error) h.append(el("span", "muted", " " + b.error));
      tr.append(h, el("td", "", String(b.connections)), el("td", "", String(b.active)));
      rows.push(tr);
    });
  }
  $("balancers").tBodies[0].replaceChildren(...rows);
}

// chart draws one series set in its own box, made once and updated after.
// A plot's lines are fixed when it is made, so a chart that gains or loses
// one (a port given a firewall) is made again in its place.
function chart(container, key, title, labels, data, unit) {
  unit = unit || "Mbit/s";
  const lines = labels.map((l) => l.name).join("\n");
  let c = charts[key];
  let old = null;
  if (c && c.lines !== lines) {
    old = c.box;
    c.plot.destroy();
    delete charts[key];
    c = undefined;
  }
  if (!c) {
    const box = el("div", "chart");
    box.dataset.key = key;
    box.append(el("h3", "", title));
    if (old) old.replaceWith(box); else container.append(box);
    const colors = ["#2563eb", "#16a34a", "#9ca3af", "#d97706", "#dc2626"];
    const opts = {
      width: 420, height: 200,
      scales: {x: {time: true}, y: {range: (u, lo, hi) => [0, Math.max(hi, 1) * 1.1]}},
      axes: [{}, {label: unit, size: 60}],
      series: [{}].concat(labels.map((l, i) => ({
        label: l.name, stroke: l.color || colors[i % colors.length], width: l.dashed ? 1 : 2,
        dash: l.dashed ? [6, 4] : undefined, points: {show: !l.dashed}, value: (u, v) => v == null ? "-" : v.toFixed(1),
      }))),
    };
    const caption = el("p", "latest muted");
    c = charts[key] = {plot: new uPlot(opts, data, box), box, caption, lines};
    box.append(caption);
  } else {
    c.plot.setData(data);
  }
  showLatest(c, labels, data, unit);
  c.seen = true;
}

// showLatest writes each series' newest value under its chart, as text for
// people and as data-latest (JSON, Mbit/s by series name) and data-time
// (the sample's Unix time) for scripts and tests.
function showLatest(c, labels, data, unit) {
  const t = data[0] || [];
  const i = t.length - 1;
  const latest = {};
  const parts = [];
  labels.forEach((l, j) => {
    const v = i >= 0 ? data[j + 1][i] : null;
    latest[l.name] = v;
    if (!l.dashed) parts.push(l.name + " " + (unit === "Mbit/s" ? mbit(v == null ? null : v * 1e6) : (v == null ? "-" : v.toFixed(1) + " " + unit)));
  });
  c.box.dataset.latest = JSON.stringify(latest);
  c.box.dataset.time = i >= 0 ? String(t[i]) : "";
  c.caption.textContent = i >= 0 ? "now: " + parts.join(", ") + " (at " + new Date(t[i] * 1000).toLocaleTimeString() + ")" : "no samples yet";
}

function mb(list) { return list.map((v) => (v == null ? null : v / 1e6)); }
function flat(n, bps) { return new Array(n).fill(bps / 1e6); }

function renderCharts(series) {
  for (const k in charts) charts[k].seen = false;
  const t = series.time || [];
  for (const u of series.uplinks || []) {
    const key = "uplink " + u.host + "/" + u.switch + "/" + u.uplink;
    chart($("uplink-charts"), key, u.host + " " + u.uplink + " (" + u.nic + " on " + u.switch + (u.up ? "" : ", DOWN") + ")",
      [{name: "transmit"}, {name: "receive"}, {name: "line", dashed: true}],
      [t, mb(u.tx_bps), mb(u.rx_bps), flat(t.length, u.line_bps)]);
  }
  for (const p of series.pools || []) {
    const busy = (p.tx_bps || []).some((v) => v > 0);
    const configured = p.limit_bps || p.reservation_bps || p.shares !== NORMAL_SHARES;
    if (!busy && !configured) continue;
    const key = "pool " + p.host + "/" + p.switch + "/" + p.uplink + "/" + p.pool;
    const labels = [{name: "sent"}, {name: "assured (" + p.shares + " shares)", dashed: true}];
    const data = [t, mb(p.tx_bps), flat(t.length, p.assured_bps)];
    if (p.limit_bps) {
      labels.push({name: "limit", dashed: true});
      data.push(flat(t.length, p.ceil_bps));
    }
    chart($("pool-charts"), key, "pool " + p.pool + " on " + p.host + " " + p.uplink, labels, data);
  }
  renderVNICCharts(series, t);
  for (const k in charts) {
    if (!charts[k].seen) { charts[k].plot.destroy(); charts[k].box.remove(); delete charts[k]; }
  }
}

// portName names a vNIC (VM/ethN) or a host port (host/name).
function portName(p) { return (p.vm || p.host) + "/" + p.vnic; }

function newest(list) {
  for (let i = (list || []).length - 1; i >= 0; i--) if (list[i] != null) return list[i];
  return 0;
}

// renderVNICCharts draws the picked VM's vNICs, or the busiest vNICs, a
// chart of rates each and one of drops: the vNIC's own, sending and
// receiving, and for a port with a firewall what the firewall dropped.
function renderVNICCharts(series, t) {
  const ports = series.ports || [];
  const vms = [...new Set(ports.filter((p) => p.vm).map((p) => p.vm))].sort();
  const sel = $("vm");
  if (sel.options.length !== vms.length + 1 || vms.some((v, i) => sel.options[i + 1].value !== v)) {
    sel.replaceChildren(sel.options[0], ...vms.map((v) => { const o = el("option", "", v); o.value = v; return o; }));
  }
  if (vmPicked && !vms.includes(vmPicked)) vmPicked = "";
  sel.value = vmPicked;
  let shown = vmPicked ? ports.filter((p) => p.vm === vmPicked)
    : [...ports].sort((a, b) => (newest(b.tx_bps) + newest(b.rx_bps)) - (newest(a.tx_bps) + newest(a.rx_bps)) || portName(a).localeCompare(portName(b))).slice(0, BUSIEST);
  shown.sort((a, b) => portName(a).localeCompare(portName(b)));
  for (const p of shown) {
    const name = portName(p);
    chart($("vnic-charts"), "vnic " + name, name + " on " + p.portgroup + " (" + p.host + ")",
      [{name: "transmit"}, {name: "receive"}], [t, mb(p.tx_bps), mb(p.rx_bps)]);
    const labels = [{name: "dropped sending"}, {name: "dropped receiving"}];
    const gap = t.map(() => null);
    const data = [t, p.tx_drops_pps || gap, p.rx_drops_pps || gap];
    if (p.security_drops_pps) {
      labels.push({name: "port security", color: "#dc2626"});
      data.push(p.security_drops_pps);
    }
    chart($("vnic-charts"), "drops " + name, name + " drops", labels, data, "packets/s");
  }
}

// renderPicture shows the topology as vnet graph draws it, fetched again
// only when what it shows may have changed (generation, paused, states).
function renderPicture(st) {
  const states = [];
  for (const v of st.vms || []) for (const n of v.nics || []) states.push(n.state);
  for (const p of st.hostports || []) states.push(p.state);
  for (const h of st.hosts || []) for (const n of h.nics || []) states.push(n.state);
  const key = current + " " + st.generation + " " + (st.paused || []).join(",") + " " + states.join(",");
  const img = $("topology-picture");
  if (key !== pictureKey) {
    pictureKey = key;
    img.onload = () => { img.hidden = false; img.dataset.loaded = img.naturalWidth > 0 ? "yes" : "no"; };
    img.onerror = () => { img.hidden = true; img.dataset.loaded = "no"; };
    img.src = "/api/v1/infras/" + encodeURIComponent(current) + "/graph?format=svg&v=" + encodeURIComponent(String(st.generation) + "-" + hash(key));
  }
  const paused = $("paused");
  paused.hidden = !(st.paused || []).length;
  paused.textContent = paused.hidden ? "" : "Paused: " + st.paused.map(pausedText).join(", ") + " (vnet resume starts it again)";
}

// pausedText says a pause's target as people do.
function pausedText(sel) {
  if (sel === "*") return "everything";
  const i = sel.indexOf("/");
  const kind = {vm: "VM", network: "network", portgroup: "port group"}[sel.slice(0, i)] || sel.slice(0, i);
  return kind + " " + sel.slice(i + 1);
}

function hash(s) {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0;
  return (h >>> 0).toString(36);
}

// SPEC_VERBS are the verbs whose entry stores a generation of its own, the
// ones a diff or a rollback can go back to: a pause or resume keeps the
// generation it found, and a destroy leaves none.
const SPEC_VERBS = ["apply", "link", "unlink", "rollback", "restore"];

// renderHistory lists the entries oldest first, as the API gives them,
// drawn again only when they or the pick change; the newest entry that
// stored the generation in force is marked.
function renderHistory(h) {
  const key = current + " " + genPicked + " " + JSON.stringify(h);
  if (key === historyKey) return;
  historyKey = key;
  const entries = h.entries || [];
  let inForce = -1;
  entries.forEach((e, i) => { if (e.generation === h.current && SPEC_VERBS.includes(e.verb)) inForce = i; });
  const rows = entries.map((e, i) => {
    const tr = el("tr", e.generation === genPicked && SPEC_VERBS.includes(e.verb) ? "selected" : "");
    tr.dataset.seq = e.seq;
    tr.dataset.generation = e.generation;
    tr.dataset.verb = e.verb;
    const gen = el("td", "");
    if (SPEC_VERBS.includes(e.verb)) {
      const b = el("button", "", String(e.generation));
      b.type = "button";
      b.title = "what changed from generation " + e.generation + " to the one in force (again: hide it)";
      b.addEventListener("click", () => pickGeneration(e.generation));
      gen.append(b);
    } else {
      gen.textContent = e.generation ? String(e.generation) : "-";
    }
    if (i === inForce) {
      tr.dataset.inForce = "yes";
      gen.append(" ", state("in force"));
    }
    const verb = e.verb + (e.from ? (e.verb === "rollback" ? " to " : " of generation ") + e.from : "");
    tr.append(gen);
    for (const v of [verb, e.who, new Date(e.at).toLocaleString(), [e.via, e.remote].filter(Boolean).join(" "), e.summary]) {
      tr.append(el("td", "", v || ""));
    }
    return tr;
  });
  $("history").tBodies[0].replaceChildren(...rows);
  $("history-message").textContent = entries.length ? "" : "No history is kept of this infrastructure.";
}

// refreshHistory fetches the history again only when the status says it
// may have grown: every verb it records changes the generation or what is
// paused.
async function refreshHistory(st) {
  const key = current + " " + st.generation + " " + (st.paused || []).join(",");
  if (key !== historyFetched) {
    try {
      historyShown = await getJSON("/api/v1/infras/" + encodeURIComponent(current) + "/history");
      historyFetched = key;
    } catch (err) {
      historyKey = historyFetched = "";
      $("history").tBodies[0].replaceChildren();
      $("history-message").textContent = "history: " + err.message;
      return;
    }
  }
  renderHistory(historyShown);
  await renderDiff(historyShown.current);
}

// pickGeneration shows a generation's diff, or hides it when it is the
// one shown.
function pickGeneration(g) {
  genPicked = genPicked === g ? 0 : g;
  diffKey = "";
  remember();
  refresh();
}

// renderDiff shows what changed from the picked generation to the one in
// force, fetched again only when either changes.
async function renderDiff(inForce) {
  const box = $("diff");
  if (!genPicked) {
    diffKey = "";
    box.replaceChildren();
    return;
  }
  const key = current + " " + genPicked + " " + inForce;
  if (key === diffKey) return;
  diffKey = key;
  let res;
  try {
    const r = await fetch("/api/v1/infras/" + encodeURIComponent(current) + "/diff?from=" + genPicked, {method: "POST", headers: {Accept: "application/json"}});
    res = await r.json().catch(() => ({error: r.statusText}));
    if (!r.ok) throw new Error(res.error || r.statusText);
  } catch (err) {
    if (key === diffKey) box.replaceChildren(el("p", "fail", "diff of generation " + genPicked + ": " + err.message));
    return;
  }
  if (key !== diffKey) return; // another pick came meanwhile
  box.replaceChildren(...diffElements(res));
  box.dataset.from = genPicked;
}

// diffElements draws a diff: what its sides are, a box per object added,
// removed or changed with its fields before and after, and the pauses and
// resumes between the sides (kept beside the spec, not in it).
function diffElements(res) {
  const out = [el("h3", "", "From " + res.from + " to " + res.to)];
  const changes = (res.diff && res.diff.changes) || [];
  if (!changes.length) out.push(el("p", "muted", "The specs say the same."));
  else out.push(el("p", "", res.summary));
  const verbs = {add: "added", remove: "removed", change: "changed"};
  for (const c of changes) {
    const box = el("div", "change op-" + c.op);
    box.dataset.op = c.op;
    box.dataset.ref = refText(c);
    box.append(el("h3", "", (verbs[c.op] || c.op) + " " + refText(c) + (c.implied ? " (with what it belongs to)" : "")));
    if ((c.fields || []).length) {
      const t = el("table");
      const head = el("tr");
      for (const h of ["field", "was", "now"]) head.append(el("th", "", h));
      t.append(head);
      for (const f of c.fields) {
        const tr = el("tr");
        tr.append(el("td", "", f.path), el("td", "was", f.from || ""), el("td", "now", f.to || ""));
        t.append(tr);
      }
      box.append(t);
    }
    out.push(box);
  }
  if ((res.pauses || []).length) {
    out.push(el("p", "muted", "Paused and resumed between them (kept beside the spec, not in it): " +
      res.pauses.map((p) => p.summary || p.verb).join("; ")));
  }
  return out;
}

// refText names a changed object as vnet diff does: "vnic eth0 of vm web1".
function refText(r) {
  return r.kind + " " + r.name + (r.of ? " of " + refText(r.of) : "");
}

// limitRanges disables the time ranges longer than the server keeps.
function limitRanges(historySeconds) {
  if (!historySeconds) return;
  const secs = {s: 1, m: 60, h: 3600};
  for (const o of $("range").options) {
    const n = parseFloat(o.value) * secs[o.value.slice(-1)];
    o.disabled = n > historySeconds;
  }
}

// eventDetail says what an agent's event moved: a port between uplinks, or
// a team-wide limit's split.
function eventDetail(e) {
  if (!e.port && !e.from && !e.to) return "";
  let s = (e.port || "") + " " + (e.from || "") + " \u2192 " + (e.to || "");
  if (e.message) s += " (" + e.message + ")";
  return s.trim();
}

function renderEvents(events) {
  const rows = events.map((e) => {
    const tr = el("tr", e.ok ? "" : "fail");
    tr.dataset.action = e.action;
    for (const v of [new Date(e.time).toLocaleTimeString(), e.who, [e.via, e.remote || e.host].filter(Boolean).join(" "), e.action, e.infra, eventDetail(e), e.ok ? "ok" : (e.error || "failed"), e.changes, e.seconds.toFixed(2)]) {
      tr.append(el("td", "", String(v)));
    }
    return tr;
  });
  $("events").tBodies[0].replaceChildren(...rows);
}

async function refresh() {
  try {
    const names = await loadInfras();
    if (!current) {
      $("message").textContent = names.length ? "" : "No infrastructure is applied. PUT a spec to /api/v1/infras/NAME, or run vnet apply.";
      renderEvents(await getJSON("/api/v1/events"));
      return;
    }
    const q = encodeURIComponent(current);
    const [st, ev] = await Promise.all([getJSON("/api/v1/infras/" + q + "/status"), getJSON("/api/v1/events")]);
    renderTopology(st);
    renderPicture(st);
    renderBalancers(st);
    renderEvents(ev);
    $("message").textContent = "";
    await refreshHistory(st);
    try {
      const series = await getJSON("/api/v1/infras/" + q + "/series?window=" + encodeURIComponent(range) + "&points=" + CHART_POINTS);
      limitRanges(series.history_seconds);
      renderCharts(series);
    } catch (err) {
      $("message").textContent = "charts: " + err.message;
    }
    $("updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (err) {
    $("message").textContent = err.message;
  }
}

// remember keeps the choices in the address, so a reload or a link shows
// the same.
function remember() {
  const q = new URLSearchParams({infra: current, range});
  if (vmPicked) q.set("vm", vmPicked);
  if (genPicked) q.set("gen", String(genPicked));
  history.replaceState(null, "", "?" + q.toString());
}

function clearCharts() {
  for (const k in charts) { charts[k].plot.destroy(); charts[k].box.remove(); }
  charts = {};
}

$("infra").addEventListener("change", (e) => {
  current = e.target.value;
  vmPicked = "";
  genPicked = 0;
  pictureKey = "";
  historyKey = historyFetched = "";
  diffKey = "";
  clearCharts();
  remember();
  refresh();
});
$("range").addEventListener("change", (e) => { range = e.target.value; clearCharts(); remember(); refresh(); });
$("vm").addEventListener("change", (e) => { vmPicked = e.target.value; remember(); refresh(); });
$("range").value = range;

refresh();
setInterval(refresh, REFRESH_MS);
