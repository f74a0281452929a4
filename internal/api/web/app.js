// The vnet dashboard: topology from /status, charts from /series, the
// event list from /events, refreshed every second or two. Everything is
// put in the page as text, never as HTML.
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
const SERIES_WINDOW = "2m";
const NORMAL_SHARES = 50;

const $ = (id) => document.getElementById(id);
let current = new URLSearchParams(location.search).get("infra") || "";
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
function chart(container, key, title, labels, data) {
  let c = charts[key];
  if (!c) {
    const box = el("div", "chart");
    box.dataset.key = key;
    box.append(el("h3", "", title));
    container.append(box);
    const colors = ["#2563eb", "#16a34a", "#9ca3af", "#d97706", "#dc2626"];
    const opts = {
      width: 420, height: 200,
      scales: {x: {time: true}, y: {range: (u, lo, hi) => [0, Math.max(hi, 1) * 1.1]}},
      axes: [{}, {label: "Mbit/s", size: 60}],
      series: [{}].concat(labels.map((l, i) => ({
        label: l.name, stroke: colors[i % colors.length], width: l.dashed ? 1 : 2,
        dash: l.dashed ? [6, 4] : undefined, points: {show: !l.dashed}, value: (u, v) => v == null ? "-" : v.toFixed(1),
      }))),
    };
    const caption = el("p", "latest muted");
    c = charts[key] = {plot: new uPlot(opts, data, box), box, caption};
    box.append(caption);
  } else {
    c.plot.setData(data);
  }
  showLatest(c, labels, data);
  c.seen = true;
}

// showLatest writes each series' newest value under its chart, as text for
// people and as data-latest (JSON, Mbit/s by series name) and data-time
// (the sample's Unix time) for scripts and tests.
function showLatest(c, labels, data) {
  const t = data[0] || [];
  const i = t.length - 1;
  const latest = {};
  const parts = [];
  labels.forEach((l, j) => {
    const v = i >= 0 ? data[j + 1][i] : null;
    latest[l.name] = v;
    if (!l.dashed) parts.push(l.name + " " + mbit(v == null ? null : v * 1e6));
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
  for (const k in charts) {
    if (!charts[k].seen) { charts[k].plot.destroy(); charts[k].box.remove(); delete charts[k]; }
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
    for (const v of [new Date(e.time).toLocaleTimeString(), e.who, e.remote || e.host || "", e.action, e.infra, eventDetail(e), e.ok ? "ok" : (e.error || "failed"), e.changes, e.seconds.toFixed(2)]) {
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
    renderBalancers(st);
    renderEvents(ev);
    $("message").textContent = "";
    try {
      renderCharts(await getJSON("/api/v1/infras/" + q + "/series?window=" + SERIES_WINDOW));
    } catch (err) {
      $("message").textContent = "charts: " + err.message;
    }
    $("updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (err) {
    $("message").textContent = err.message;
  }
}

$("infra").addEventListener("change", (e) => {
  current = e.target.value;
  for (const k in charts) { charts[k].plot.destroy(); charts[k].box.remove(); }
  charts = {};
  history.replaceState(null, "", "?infra=" + encodeURIComponent(current));
  refresh();
});

refresh();
setInterval(refresh, REFRESH_MS);
