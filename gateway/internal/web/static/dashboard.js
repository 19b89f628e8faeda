// The operator's dashboard: polls GET /admin/dashboard on the gateway's
// admin listener (one JSON document, rates computed server-side) and
// changes limits through the same admin API operators script against.
"use strict";

const $ = (id) => document.getElementById(id);
let token = "";
let timer = 0;
let failDelay = 2000;
let editing = false; // do not overwrite a limits form being edited

const colors = { accepted: "#12b76a", sold_out: "#d92d20", sold_out_flag: "#f97066", already_purchased: "#7a5af8",
  rate_limited_user: "#f79009", rate_limited_ip: "#fdb022", not_admitted: "#2e90fa", gate_closed: "#667085",
  unavailable: "#000000", not_loaded: "#9e165f", unauthorized: "#53b1fd", not_found: "#98a2b3", bad_request: "#d0d5dd" };
const color = (o) => colors[o] || "#475467";

function initToken() {
  const frag = new URLSearchParams(location.hash.slice(1));
  const t = frag.get("token") || sessionStorage.getItem("flashsale.admin") || "";
  if (frag.get("token")) history.replaceState(null, "", location.pathname + location.search);
  setToken(t);
  $("token-save").addEventListener("click", () => setToken($("token-input").value.trim()));
}
function setToken(t) {
  token = t;
  if (t) sessionStorage.setItem("flashsale.admin", t);
  $("login").classList.toggle("hidden", !!t);
  if (t) refresh();
}

async function call(method, path, body) {
  const res = await fetch(path, { method, cache: "no-store",
    headers: Object.assign({ "Authorization": "Bearer " + token }, body === undefined ? {} : { "Content-Type": "application/json" }),
    body: body === undefined ? undefined : JSON.stringify(body) });
  let data = null;
  try { data = await res.json(); } catch (e) { data = null; }
  const retry = parseInt(res.headers.get("Retry-After") || "", 10);
  return { ok: res.ok, status: res.status, data, retryAfterMs: retry > 0 ? retry * 1000 : 0 };
}

async function refresh() {
  clearTimeout(timer);
  let next = 2000;
  try {
    // ?sale=ID[,ID] pins sales; otherwise the server sends the five newest.
    const pinned = new URLSearchParams(location.search).get("sale");
    const r = await call("GET", "/admin/dashboard" + (pinned ? "?sale=" + encodeURIComponent(pinned) : ""));
    if (r.status === 401) {
      sessionStorage.removeItem("flashsale.admin");
      $("login").classList.remove("hidden");
      return;
    }
    if (!r.ok) {
      const e = new Error("status " + r.status);
      e.retryAfterMs = r.retryAfterMs;
      throw e;
    }
    failDelay = 2000;
    render(r.data);
  } catch (e) {
    // Back off, no sooner than the gateway asks, with some jitter so that
    // many dashboards open at once do not come back together.
    failDelay = Math.min(30000, Math.max(failDelay * 2, e.retryAfterMs || 0));
    next = failDelay * (0.8 + 0.4 * Math.random());
    $("server-clock").textContent = "gateway not answering; retrying in " + Math.round(next / 1000) + " s";
  }
  timer = setTimeout(refresh, next);
}

const fmt = (x) => x >= 100 ? Math.round(x).toLocaleString() : (Math.round(x * 10) / 10).toString();

function render(d) {
  $("server-clock").textContent = "server time " + new Date(d.serverTime).toLocaleTimeString();
  renderChart(d.series);
  // Outcomes: accepted first, then refusals by reason.
  const names = Object.keys(d.totals || {}).sort((a, b) => (a === "accepted" ? -1 : b === "accepted" ? 1 : a.localeCompare(b)));
  const tb = $("outcomes").tBodies[0];
  tb.textContent = "";
  let acc = 0, ref = 0;
  for (const o of names) {
    if (o !== "accepted" && !d.totals[o]) continue; // a dozen zero rows hide the ones that matter
    const rate = (d.lastSecond || {})[o] || 0;
    if (o === "accepted") acc += rate; else ref += rate;
    const tr = tb.insertRow();
    tr.dataset.outcome = o;
    tr.insertCell().innerHTML = '<i class="swatch"></i>';
    tr.cells[0].firstChild.style.background = color(o);
    tr.cells[0].append(o === "accepted" ? "accepted" : "refused: " + o.replaceAll("_", " "));
    const c1 = tr.insertCell(); c1.className = "num"; c1.textContent = fmt(rate);
    const c2 = tr.insertCell(); c2.className = "num"; c2.textContent = (d.totals[o] || 0).toLocaleString();
  }
  $("rates-now").textContent = "now: " + fmt(acc) + " accepted/s, " + fmt(ref) + " refused/s";
  const c = d.counters || {};
  $("counters").textContent = ["flashsale_gateway_queue_joins_total", "flashsale_gateway_admissions_total",
    "flashsale_gateway_rate_limited_total", "flashsale_gateway_bad_proof_total"]
    .filter((k) => k in c).map((k) => k.replace("flashsale_gateway_", "").replace("_total", "").replaceAll("_", " ") + ": " + c[k].toLocaleString()).join(" · ");
  renderSales(d.sales || []);
  if (!editing) renderLimits(d.limits || {});
}

function renderChart(se) {
  const svg = $("chart");
  const W = 1000, H = 200, ns = "http://www.w3.org/2000/svg";
  svg.textContent = "";
  const legend = $("legend");
  legend.textContent = "";
  if (!se || se.times.length === 0) return;
  const t1 = se.times[se.times.length - 1], t0 = t1 - 300000;
  let max = 1;
  for (const row of se.rates) for (const v of row) max = Math.max(max, v);
  const x = (t) => ((t - t0) / 300000) * W;
  const y = (v) => H - 4 - (v / max) * (H - 24);
  const axis = document.createElementNS(ns, "text");
  axis.setAttribute("x", 4); axis.setAttribute("y", 14); axis.setAttribute("font-size", "12"); axis.setAttribute("fill", "#667085");
  axis.textContent = "max " + fmt(max) + "/s";
  svg.appendChild(axis);
  se.outcomes.forEach((o, j) => {
    if (!se.rates.some((r) => r[j] > 0)) return; // keep the chart to outcomes seen
    const pts = se.times.map((t, i) => x(t).toFixed(1) + "," + y(se.rates[i][j]).toFixed(1)).join(" ");
    const pl = document.createElementNS(ns, "polyline");
    pl.setAttribute("points", pts);
    pl.setAttribute("fill", "none");
    pl.setAttribute("stroke", color(o));
    pl.setAttribute("stroke-width", "2");
    pl.setAttribute("vector-effect", "non-scaling-stroke");
    pl.dataset.outcome = o;
    svg.appendChild(pl);
    const s = document.createElement("span");
    s.innerHTML = "<i></i>";
    s.firstChild.style.background = color(o);
    s.append(o.replaceAll("_", " "));
    legend.appendChild(s);
  });
}

const statuses = ["PENDING", "PAID", "EXPIRED", "CANCELLED", "REJECTED"];

function renderSales(sales) {
  const box = $("sales");
  const keep = new Set();
  for (const s of sales) {
    const id = "sale-" + s.id;
    keep.add(id);
    let card = $(id);
    if (!card) {
      card = document.createElement("section");
      card.className = "card sale";
      card.id = id;
      card.innerHTML = '<div class="row"><h2 class="grow"></h2><span class="badge state"></span></div>' +
        '<table class="items"><thead><tr><th>item</th><th class="num">price</th><th class="num">quantity</th><th class="num">units left</th><th>stock</th></tr></thead><tbody></tbody></table>' +
        '<div class="orders mt"><table class="by-status"><thead><tr><th>orders (order service)</th>' +
        statuses.map((x) => '<th class="num">' + x.toLowerCase() + "</th>").join("") + '</tr></thead><tbody></tbody></table>' +
        '<div class="row mt"><span class="lag"></span><span class="reconcile grow"></span></div>' +
        '<div class="unavailable hidden"></div></div>' +
        '<div class="row queue mt"><div class="grow qinfo"></div>' +
        '<label>admission rate /s <input class="num rate" type="number" min="0" step="any"></label><button class="set-rate">Set</button><span class="muted msg"></span></div>';
      const input = card.querySelector(".rate");
      input.addEventListener("focus", () => { input.dataset.editing = "1"; });
      card.querySelector(".set-rate").addEventListener("click", async () => {
        const v = parseFloat(input.value);
        const msg = card.querySelector(".msg");
        try {
          const r = await call("PUT", "/admin/sales/" + s.id + "/admission-rate", { rate: v });
          msg.textContent = r.ok && r.data ? "set to " + r.data.admissionRate + "/s" : "refused (" + r.status + ")";
        } catch (e) {
          msg.textContent = "not sent: the gateway did not answer";
        }
        delete input.dataset.editing;
        refresh();
      });
    }
    box.appendChild(card); // (re)appending keeps the server's order, newest first
    card.querySelector("h2").textContent = "#" + s.id + " " + s.name;
    card.querySelector(".state").textContent = s.state.replace("_", " ");
    card.querySelector(".state").className = "badge state " + s.state;
    const tb = card.querySelector("tbody");
    tb.textContent = "";
    for (const it of s.items) {
      const tr = tb.insertRow();
      tr.dataset.item = it.id;
      const left = it.left == null ? "?" : it.left.toLocaleString();
      const pct = it.left == null ? 0 : (100 * it.left) / Math.max(1, it.quantity);
      [it.name, it.price, it.quantity.toLocaleString(), left].forEach((v, i) => {
        const td = tr.insertCell(); td.textContent = v; if (i > 0) td.className = "num";
      });
      tr.cells[3].classList.add("left");
      const bar = tr.insertCell();
      bar.innerHTML = '<div class="bar"><span></span></div>';
      bar.querySelector("span").style.width = pct + "%";
      if (it.soldOut) bar.append("sold out");
    }
    renderOrders(card, s);
    const q = s.queue;
    card.querySelector(".queue").classList.toggle("hidden", !q.enabled);
    if (q.enabled) {
      card.querySelector(".qinfo").textContent = "queue: " + (q.waiting == null ? "?" : q.waiting.toLocaleString()) + " waiting" +
        (q.joined == null ? "" : " of " + q.joined.toLocaleString() + " joined") +
        " · admitted up to " + (q.admittedUpTo == null ? "?" : q.admittedUpTo.toLocaleString()) +
        " at " + fmt(q.admissionRate) + "/s" + (q.draw ? " · draw at the opening" : "") + (q.powDifficulty ? " · proof of work " + q.powDifficulty + " bits" : "");
      const input = card.querySelector(".rate");
      if (!input.dataset.editing) input.value = q.admissionRate;
    }
  }
  for (const el of Array.from(box.children)) if (!keep.has(el.id)) el.remove();
}

// renderOrders shows the order service's figures for a sale: orders by
// status per item and in all, the consumer's lag, the last reconcile; or
// why the order service did not answer (the rest of the page still works).
function renderOrders(card, s) {
  const o = s.orders;
  const box = card.querySelector(".orders");
  box.classList.toggle("hidden", !o);
  if (!o) return;
  const un = card.querySelector(".unavailable");
  un.classList.toggle("hidden", !o.unavailable);
  un.textContent = o.unavailable ? "order service unavailable: " + o.unavailable : "";
  const tb = card.querySelector(".by-status tbody");
  tb.textContent = "";
  card.querySelector(".by-status").classList.toggle("hidden", !!o.unavailable);
  card.querySelector(".lag").textContent = "";
  card.querySelector(".reconcile").textContent = "";
  if (o.unavailable) return;
  const names = new Map(s.items.map((it) => [it.id, it.name]));
  const rows = (o.items || []).map((it) => ["item-" + it.itemId, names.get(it.itemId) || "item " + it.itemId, it.ordersByStatus]);
  rows.push(["all", "all items", o.ordersByStatus]);
  for (const [key, label, by] of rows) {
    const tr = tb.insertRow();
    tr.dataset.orders = key;
    tr.insertCell().textContent = label;
    for (const x of statuses) {
      const td = tr.insertCell();
      td.className = "num";
      td.dataset.status = x;
      td.textContent = ((by || {})[x] || 0).toLocaleString();
    }
  }
  const lag = o.consumerLag || {};
  const lagEl = card.querySelector(".lag");
  lagEl.dataset.total = lag.error ? "" : String(lag.total);
  lagEl.textContent = lag.error ? "consumer lag: unknown (" + lag.error + ")" :
    "consumer lag: " + (lag.total || 0).toLocaleString() + " message" + (lag.total === 1 ? "" : "s") +
    " over " + (lag.partitions || []).length + " partition" + ((lag.partitions || []).length === 1 ? "" : "s");
  lagEl.className = "lag" + (lag.error || lag.total > 0 ? " warn" : "");
  const rc = o.reconcile;
  const rcEl = card.querySelector(".reconcile");
  rcEl.dataset.verdict = rc ? rc.verdict : "";
  rcEl.textContent = rc ? "reconcile " + new Date(rc.at).toLocaleTimeString() + ": " + rc.verdict + (rc.repaired ? " (repaired)" : "") +
    (rc.summary ? " — " + rc.summary : "") : "reconcile: not run yet";
  rcEl.className = "reconcile grow" + (rc && rc.verdict !== "OK" ? " warn" : "");
}

function renderLimits(l) {
  const tb = $("limits").tBodies[0];
  tb.textContent = "";
  // The ticket polls are limited per user only.
  const routes = [["purchase", ["user", "ip"]], ["queue", ["user", "ip"]], ["poll", ["user"]]];
  const names = { purchase: "purchase", queue: "queue", poll: "polls (queue ticket, order)" };
  for (const [route, keys] of routes) {
    for (const key of keys) {
      const r = (l[route] || {})[key] || { rate: 0, burst: 0 };
      const tr = tb.insertRow();
      tr.insertCell().textContent = names[route];
      tr.insertCell().textContent = key;
      for (const p of ["rate", "burst"]) {
        const td = tr.insertCell(); td.className = "num";
        const inp = document.createElement("input");
        inp.className = "num"; inp.type = "number"; inp.min = "0"; inp.step = p === "rate" ? "any" : "1";
        inp.value = r[p];
        inp.dataset.shown = String(r[p]);
        inp.dataset.route = route; inp.dataset.key = key; inp.dataset.param = p;
        inp.addEventListener("focus", () => { editing = true; });
        td.appendChild(inp);
      }
    }
  }
}

// saveLimits sends only the rules the operator edited (rate and burst of
// each): the table stops refreshing while she edits, and sending every
// rule put back the values it showed over a change made meanwhile by
// another operator or a reload.
async function saveLimits() {
  const body = {};
  const inputs = $("limits").querySelectorAll("input");
  const edited = new Set();
  for (const inp of inputs) {
    if (inp.value !== inp.dataset.shown) edited.add(inp.dataset.route + "/" + inp.dataset.key);
  }
  for (const inp of inputs) {
    const { route, key, param } = inp.dataset;
    if (!edited.has(route + "/" + key)) continue;
    const rules = body[route] = body[route] || {};
    const r = rules[key] = rules[key] || {};
    r[param] = param === "rate" ? parseFloat(inp.value) : parseInt(inp.value, 10);
  }
  if (edited.size === 0) {
    $("limits-msg").textContent = "nothing changed";
  } else {
    try {
      const r = await call("PUT", "/admin/limits", body);
      $("limits-msg").textContent = r.ok ? "applied: " + [...edited].join(", ") :
        "refused (" + r.status + "): " + ((r.data && r.data.message) || "");
    } catch (e) {
      $("limits-msg").textContent = "not sent: the gateway did not answer";
    }
  }
  editing = false;
  refresh();
}

$("limits-save").addEventListener("click", saveLimits);
initToken();
