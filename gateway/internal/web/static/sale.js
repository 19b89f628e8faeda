// The shopper's sale page. It talks only to the public JSON API of its own
// origin. Times come from the server (serverTime), never the browser clock
// alone: the page keeps the offset between the two. No request loop is
// tighter than the server asks (pollAfterMs, Retry-After), and failures
// back off.
"use strict";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const saleId = params.get("sale") || "1";
const api = "/api/flash-sales/";

const st = {
  token: "",
  sale: null,
  offsetMs: 0,          // server clock minus browser clock
  ticket: null,
  queue: null,          // last queue answer
  admission: "",        // X-Admission-Token
  purchasePath: "",
  order: null,          // {id, status, expiresAt}
  blockedUntil: 0,      // server ms before which Buy stays disabled (429/503)
  final: "",            // SOLD_OUT, ALREADY_PURCHASED...: the Buy buttons stay off
  busy: false,
  // What this page itself learned of an item's stock (its own reservation,
  // a SOLD_OUT answer): {left, at}, by item id. The sale's stockLeft is
  // the gateway's copy, refreshed once a second and polled here every few,
  // so without this the bar still showed the unit the shopper just took.
  local: {},
  saleTimer: 0, queueTimer: 0, orderTimer: 0, openingTimer: 0,
};

const serverNow = () => Date.now() + st.offsetMs;

// ---- token: from the URL fragment (kept out of server logs) or the box.
function initToken() {
  const frag = new URLSearchParams(location.hash.slice(1));
  const t = frag.get("token") || sessionStorage.getItem("flashsale.token") || "";
  if (frag.get("token")) {
    history.replaceState(null, "", location.pathname + location.search);
  }
  setToken(t);
  $("token-save").addEventListener("click", () => setToken($("token-input").value.trim()));
}
function setToken(t) {
  st.token = t;
  if (t) sessionStorage.setItem("flashsale.token", t);
  $("login").classList.toggle("hidden", !!t);
  render();
}

// ---- HTTP: JSON in and out; errors carry code, status and Retry-After.
// timeoutMs > 0 gives up waiting after that long (code TIMEOUT): the
// request may still have been carried out, which the caller must find out.
async function call(method, path, { body, admission, timeoutMs } = {}) {
  const headers = { "Accept": "application/json" };
  if (st.token) headers["Authorization"] = "Bearer " + st.token;
  if (admission) headers["X-Admission-Token"] = admission;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const sent = Date.now();
  const ctl = new AbortController();
  const timer = timeoutMs > 0 ? setTimeout(() => ctl.abort(), timeoutMs) : 0;
  let res, data = null;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store", signal: ctl.signal });
    try { data = await res.json(); } catch (e) { data = null; }
  } catch (e) {
    const timedOut = ctl.signal.aborted;
    return { ok: false, status: 0, code: timedOut ? "TIMEOUT" : "NETWORK", message: timedOut ? "no answer in time" : "network error", retryAfterMs: 0 };
  } finally {
    clearTimeout(timer);
  }
  const ra = parseInt(res.headers.get("Retry-After") || "", 10);
  return {
    ok: res.ok, status: res.status, data, rtt: Date.now() - sent, sent,
    code: data && data.error ? data.error : "", message: data && data.message ? data.message : "",
    retryAfterMs: Number.isFinite(ra) ? ra * 1000 : 0,
  };
}

// backoff doubles a delay up to a cap, with jitter so a crowd spreads out.
const backoff = (ms, cap) => Math.min(cap, ms * 2) * (0.8 + Math.random() * 0.4);

// ---- the sale: refreshed slowly, and exactly at the opening.
let saleFailDelay = 1000;
const localTrustMs = 5000; // after this the gateway's number wins (a returned unit raises it)

// stockOf is the units left the page shows: the gateway's number, or what
// the page learned since if that is lower and recent (stock only goes up
// when a unit comes back, which the gateway's number shows soon enough).
function stockOf(it) {
  if (it.soldOut) return 0;
  const l = st.local[it.id];
  const server = it.stockLeft == null ? null : it.stockLeft;
  if (!l || serverNow() - l.at > localTrustMs) return server;
  return server == null ? l.left : Math.min(server, l.left);
}
function learned(itemId, left) {
  st.local[itemId] = { left: Math.max(0, left), at: serverNow() };
  // The gateway reads Redis once a second: ask again just after that, once.
  clearTimeout(st.saleTimer);
  st.saleTimer = setTimeout(loadSale, 1200);
}

async function loadSale() {
  clearTimeout(st.saleTimer);
  const r = await call("GET", api + encodeURIComponent(saleId));
  let next;
  if (r.ok) {
    saleFailDelay = 1000;
    st.sale = r.data;
    // The server time is taken as the middle of the round trip.
    st.offsetMs = Date.parse(r.data.serverTime) - (r.sent + r.rtt / 2);
    if (r.data.purchasePath && !st.purchasePath) st.purchasePath = r.data.purchasePath;
    if (r.data.state === "SOLD_OUT" && !st.order && !st.final) {
      st.final = "SOLD_OUT";
      showStatus("SOLD OUT — every unit has been reserved.", "error");
    }
    const opensIn = r.data.opensInMs;
    // Before the opening: poll at a quarter of the time left (max 10 s),
    // and once right at the opening. Open: every 3 s for the stock bar.
    next = opensIn > 0 ? Math.max(250, Math.min(opensIn / 4, 10000, opensIn + 50)) : 3000;
    if (r.data.state === "ENDED") next = 30000;
    findOrder();
  } else {
    next = r.retryAfterMs || (saleFailDelay = backoff(saleFailDelay, 30000));
    if (!st.sale) showStatus(r.status === 404 ? "No such sale." : "The sale cannot be loaded; retrying.", "error");
  }
  render();
  st.saleTimer = setTimeout(loadSale, next);
}

// ---- proof of work: sha256(challenge + ":" + nonce) with `difficulty`
// leading zero bits, solved with SubtleCrypto in batches so the page stays
// responsive.
function leadingZeroBits(bytes) {
  let n = 0;
  for (const b of bytes) {
    if (b === 0) { n += 8; continue; }
    return n + Math.clz32(b) - 24;
  }
  return n;
}
async function solve(challenge, difficulty) {
  const enc = new TextEncoder();
  for (let nonce = 0; ; nonce++) {
    const d = new Uint8Array(await crypto.subtle.digest("SHA-256", enc.encode(challenge + ":" + nonce)));
    if (leadingZeroBits(d) >= difficulty) return String(nonce);
    if (nonce % 2000 === 1999) {
      $("queue-info").textContent = "Checking your browser… (" + (nonce + 1) + " tries)";
      await new Promise((r) => setTimeout(r, 0));
    }
  }
}

// ---- the waiting room.
async function joinQueue() {
  if (!st.token || st.busy) return;
  st.busy = true; render();
  try {
    let body;
    if (st.sale && st.sale.powDifficulty > 0) {
      const c = await call("GET", api + saleId + "/queue/challenge");
      if (!c.ok) return refused(c, "join");
      const nonce = await solve(c.data.challenge, c.data.difficulty);
      body = { challenge: c.data.challenge, nonce };
    }
    const r = await call("POST", api + saleId + "/queue", { body });
    if (!r.ok) return refused(r, "join");
    onQueue(r.data);
  } finally {
    st.busy = false; render();
  }
}

let queueFailDelay = 1000;
async function pollQueue() {
  clearTimeout(st.queueTimer);
  if (!st.ticket) return;
  const r = await call("GET", api + saleId + "/queue/" + encodeURIComponent(st.ticket));
  if (r.ok) {
    queueFailDelay = 1000;
    onQueue(r.data);
    return;
  }
  if (r.status === 404 || r.code === "TICKET_EXPIRED") { // the place is gone: join again
    st.ticket = null; st.queue = null;
    showStatus("Your place in the queue was lost; join again.", "error");
    render();
    return;
  }
  st.queueTimer = setTimeout(pollQueue, r.retryAfterMs || (queueFailDelay = backoff(queueFailDelay, 30000)));
}

function onQueue(q) {
  st.queue = q;
  st.ticket = q.ticket || st.ticket;
  if (q.state === "ADMITTED" && q.admissionToken) {
    if (st.final === "ADMISSION_USED") st.final = null; // her purchase failed: the admission came back
    st.admission = q.admissionToken;
    st.purchasePath = q.purchasePath;
    showStatus("You are in! Buy now.", "good");
  } else if (q.state === "USED") { // her admission bought a unit
    admissionUsed();
    // Until her order is placed (the purchase may still fail and give the
    // admission back) the server asks for another poll; after that, none.
    if (q.pollAfterMs > 0) st.queueTimer = setTimeout(pollQueue, q.pollAfterMs);
  } else {
    st.queueTimer = setTimeout(pollQueue, Math.max(500, q.pollAfterMs || 2000));
  }
  render();
}

// ---- buying.
// buyTimeoutMs bounds the wait for a purchase answer: the gateway answers
// within its publish timeout (3 s by default) unless something is wrong.
const buyTimeoutMs = 10000;

async function buy(itemId) {
  if (st.busy || !canBuy()) return;
  st.busy = true; render();
  sessionStorage.setItem(triedKey, "1");
  showStatus("Processing…");
  try {
    const r = await call("POST", st.purchasePath + "/items/" + itemId + "/purchase", { admission: st.admission, timeoutMs: buyTimeoutMs });
    if (r.status === 202) {
      const it = st.sale.items.find((x) => x.id === itemId);
      const before = it ? stockOf(it) : null;
      if (before != null) learned(itemId, before - 1);
      adopt({ orderId: r.data.orderId, status: r.data.status === "PENDING" ? "PROCESSING" : r.data.status });
      return;
    }
    if (r.status === 0) {
      // The answer was lost (network error, timeout): the purchase may
      // have gone through. Ask the shop which order this shopper holds.
      showStatus("No answer from the shop — checking whether your purchase went through…");
      recoverOrder(1000, 0);
      return;
    }
    if (r.code === "ALREADY_PURCHASED" && r.data && r.data.orderId) {
      // She holds an order of another item in this sale: show it.
      adopt({ orderId: r.data.orderId, status: "PROCESSING" });
      return;
    }
    if (r.status === 503 && r.data && r.data.orderId) {
      // The order's fate is not settled yet: ask again shortly.
      showStatus("Your purchase is being confirmed…");
      recoverOrder(r.retryAfterMs || 1000, 0);
      return;
    }
    if (r.code === "SOLD_OUT" || r.status === 410) learned(itemId, 0);
    refused(r, "buy");
  } finally {
    st.busy = false; render();
  }
}

// adopt shows an order the shopper holds and follows it until it settles.
function adopt(o) {
  st.order = { id: o.orderId, status: o.status || "PROCESSING", expiresAt: o.expiresAt };
  st.final = "BOUGHT";
  showStatus(st.order.status === "PROCESSING" ? "Processing your order…" : "");
  renderOrder();
  pollOrder(500);
}

// recoverOrder asks GET /api/flash-sales/{sale}/order which order the
// shopper holds, after a purchase whose answer was lost: she may have won
// the unit. It retries (with back-off, a few times) while the shop cannot
// tell yet; a 404 means the purchase did not go through.
const recoverAttempts = 8;
async function recoverOrder(delay, attempt) {
  await new Promise((res) => setTimeout(res, attempt === 0 ? 0 : delay));
  const r = await call("GET", api + encodeURIComponent(saleId) + "/order", { timeoutMs: buyTimeoutMs });
  if (r.ok && r.data && r.data.orderId) {
    adopt(r.data);
    return;
  }
  if (r.status === 404) {
    showStatus("Your purchase did not go through; you can try again.", "error");
    render();
    return;
  }
  if (r.status === 401) { refused(r, "order"); return; }
  if (attempt + 1 >= recoverAttempts) {
    showStatus("The shop cannot tell yet whether your purchase went through; reload the page in a moment.", "error");
    render();
    return;
  }
  recoverOrder(r.retryAfterMs || backoff(delay, 10000), attempt + 1);
}

// admissionUsed ends the queue for a shopper whose admission already
// bought a unit: an admission buys once, even when that order was later
// cancelled or expired (its unit went back to the shoppers still queued).
function admissionUsed() {
  st.final = "ADMISSION_USED"; st.admission = ""; st.purchasePath = "";
  if (!st.order) {
    showStatus("Your admission was used for a purchase; an admission buys once.", "error");
    orderLooked = false; sessionStorage.setItem(triedKey, "1"); findOrder();
  }
}

// findOrder asks once, when the page opens again on a sale this tab
// already tried to buy in, whether the shopper holds an order (a reload
// after a lost answer). Only then: at the opening the whole crowd's pages
// refresh at once, and none of them has an order to find.
let orderLooked = false;
const triedKey = "flashsale.tried." + saleId;
async function findOrder() {
  if (orderLooked || !st.token || st.order || !st.sale || !sessionStorage.getItem(triedKey)) return;
  orderLooked = true;
  const r = await call("GET", api + encodeURIComponent(saleId) + "/order");
  if (r.ok && r.data && r.data.orderId && !st.order) adopt(r.data);
}

// refused renders an error answer and decides what may happen next.
function refused(r, what) {
  switch (r.code || r.status) {
  case "SOLD_OUT": case 410:
    st.final = "SOLD_OUT"; showStatus("SOLD OUT — every unit has been reserved.", "error"); break;
  case "ALREADY_PURCHASED": case 409:
    st.final = "ALREADY_PURCHASED"; showStatus("You already hold an order in this sale (one per shopper).", "error"); break;
  case "RATE_LIMITED": case 429: {
    const wait = r.retryAfterMs || 1000;
    st.blockedUntil = serverNow() + wait;
    showStatus("Too many requests — try again in " + Math.ceil(wait / 1000) + " s.", "error");
    setTimeout(render, wait + 50);
    break;
  }
  case "ADMISSION_USED":
    admissionUsed(); break;
  case "NOT_ADMITTED": case 403:
    st.admission = ""; st.ticket = null; st.queue = null; st.purchasePath = "";
    showStatus("Your admission is no longer valid; join the queue again.", "error"); break;
  case "UNAUTHORIZED": case 401:
    showStatus("Your token was refused; paste a valid one.", "error");
    sessionStorage.removeItem("flashsale.token"); st.token = ""; $("login").classList.remove("hidden"); break;
  case "UNAVAILABLE": case 503: {
    const wait = r.retryAfterMs || 2000;
    st.blockedUntil = serverNow() + wait;
    showStatus("The shop is busy — try again in " + Math.ceil(wait / 1000) + " s.", "error");
    setTimeout(render, wait + 50);
    break;
  }
  case "NOT_FOUND": case 404:
    if (what === "buy") { st.purchasePath = ""; showStatus("The sale is not open.", "error"); loadSale(); break; }
    // falls through
  default:
    showStatus((r.message || "Something went wrong") + (r.status ? " (" + r.status + ")" : "") + ".", "error");
  }
  render();
}

// ---- the order: polled with back-off until it settles.
// orderMissingMs: how long an order may answer 404 (accepted, not
// recorded yet) before the page takes it for one that never came to
// exist: the order service's in-flight window, past which it gives such a
// reservation's unit back.
const orderMissingMs = 30000;
async function pollOrder(delay) {
  clearTimeout(st.orderTimer);
  const r = await call("GET", api + "orders/" + encodeURIComponent(st.order.id));
  if (!st.order) return;
  if (r.ok) {
    st.order.status = r.data.status;
    st.order.expiresAt = r.data.expiresAt;
    st.order.missingSince = 0;
  } else if (r.status === 404) {
    st.order.missingSince = st.order.missingSince || Date.now();
    if (Date.now() - st.order.missingSince > orderMissingMs) {
      st.order = null; st.final = null;
      showStatus("Your order could not be found: it did not go through; you can try again.", "error");
      renderOrder(); render();
      return;
    }
  } else {
    delay = r.retryAfterMs || delay;
  }
  renderOrder();
  const s = st.order.status;
  // An order that ended holds nothing: the shopper may buy again, while
  // units and her admission allow.
  if ((s === "EXPIRED" || s === "CANCELLED" || s === "REJECTED") && st.final === "BOUGHT") {
    st.final = null; render();
  }
  if (s === "PROCESSING" || s === "PENDING") {
    // PENDING only changes when the shopper pays or the window ends:
    // poll slowly; PROCESSING settles within a second or two.
    const next = s === "PENDING" ? 10000 : Math.min(5000, delay * 1.5);
    st.orderTimer = setTimeout(() => pollOrder(next), delay);
  }
}

async function pay() {
  if (!st.order || st.order.status !== "PENDING" || st.busy) return;
  st.busy = true; renderOrder();
  // One reference per order, not per click: a Pay whose answer was lost,
  // clicked again, is then the same payment (the order service answers a
  // repeat with the order, PAID), never a second one.
  const ref = "page-" + st.order.id;
  const r = await call("POST", api + "orders/" + encodeURIComponent(st.order.id) + "/pay", { body: { paymentRef: ref } });
  st.busy = false;
  if (r.ok) {
    st.order.status = (r.data && r.data.status) || "PAID";
    showStatus(st.order.status === "PAID" ? "Paid — thank you! Your unit is yours." : "Payment: " + st.order.status, st.order.status === "PAID" ? "good" : "error");
  } else {
    showStatus((r.message || "Payment failed") + " (" + r.status + ")", "error");
    pollOrder(1000);
  }
  renderOrder();
}

// ---- rendering.
// The status line is a live region: it is written only when its text
// changes, so a screen reader announces changes, not the clock's ticks.
function showStatus(text, kind) {
  const el = $("status");
  if (el.textContent !== text) el.textContent = text;
  el.className = "status" + (kind ? " " + kind : "");
}

function isOpen() {
  const s = st.sale;
  return !!s && Date.parse(s.startsAt) <= serverNow() && serverNow() < Date.parse(s.endsAt) && s.state !== "ENDED";
}

function canBuy() {
  const s = st.sale;
  if (!s || !st.token || st.final || !isOpen() || serverNow() < st.blockedUntil) return false;
  if (s.queueEnabled) return !!st.admission && !!st.purchasePath;
  return !!st.purchasePath;
}

const pad = (n) => String(n).padStart(2, "0");
function hms(ms) {
  const t = Math.max(0, Math.ceil(ms / 1000));
  const h = Math.floor(t / 3600), m = Math.floor((t % 3600) / 60), s = t % 60;
  return (h ? pad(h) + ":" : "") + pad(m) + ":" + pad(s);
}

function render() {
  const s = st.sale;
  if (!s) return;
  document.title = s.name + " — flash sale";
  $("sale-name").textContent = s.name;
  const state = st.final === "SOLD_OUT" && s.state === "OPEN" ? "SOLD_OUT" : s.state;
  $("sale-state").textContent = state.replace("_", " ");
  $("sale-state").className = "badge " + state;

  // The countdown.
  const toOpen = Date.parse(s.startsAt) - serverNow();
  if (toOpen > 0) {
    $("opens-label").textContent = "Opens in";
    $("countdown").textContent = hms(toOpen);
  } else if (serverNow() < Date.parse(s.endsAt)) {
    $("opens-label").textContent = "Open — ends in";
    $("countdown").textContent = hms(Date.parse(s.endsAt) - serverNow());
  } else {
    $("opens-label").textContent = "Ended";
    $("countdown").textContent = "00:00";
  }
  $("opens-at").textContent = "Opening " + new Date(s.startsAt).toLocaleString();
  if (toOpen > 0 && toOpen < 1000 && !st.openingTimer) { // the purchase path appears at the opening
    st.openingTimer = setTimeout(loadSale, toOpen + 20);
  }

  // The waiting room.
  $("queue-card").classList.toggle("hidden", !s.queueEnabled);
  if (s.queueEnabled) {
    const q = st.queue;
    $("join").disabled = !st.token || st.busy || !!st.ticket || !!st.final || s.state === "ENDED";
    $("join").textContent = st.ticket ? "In the queue" : "Join the queue";
    $("queue-state").textContent = q ? q.state : "";
    $("queue-state").className = "badge " + (q ? q.state : "hidden");
    if (q) {
      let info;
      if (q.state === "DRAWING") info = "You are in the draw: your place is decided at the opening (" + q.queueSize + " in the queue).";
      else if (q.state === "ADMITTED") info = "Admitted — place " + q.position + ". Buy before your admission expires.";
      else if (q.state === "USED") info = "Admitted — place " + q.position + ". Your admission was used for a purchase.";
      else info = "Place " + q.position + " of " + q.queueSize + ", admitted up to " + q.admittedUpTo +
        (q.etaSeconds != null ? " — about " + hms(q.etaSeconds * 1000) + " to wait" : "");
      $("queue-info").textContent = info;
    }
  }

  // Items.
  const box = $("items");
  if (box.childElementCount !== s.items.length) {
    box.textContent = "";
    for (const it of s.items) {
      const card = document.createElement("section");
      card.className = "card";
      card.innerHTML = '<div class="row"><div class="grow"><h2></h2><div class="muted"></div>' +
        '<div class="bar"><span></span></div><div class="muted stock"></div></div>' +
        '<div class="price"></div><button class="primary buy" disabled>Buy</button></div>';
      card.querySelector("h2").textContent = it.name;
      card.querySelector(".muted").textContent = it.productId;
      card.querySelector(".price").textContent = it.price;
      card.querySelector("button").dataset.item = it.id;
      card.querySelector("button").addEventListener("click", () => buy(it.id));
      card.id = "item-" + it.id;
      box.appendChild(card);
    }
  }
  for (const it of s.items) {
    const card = $("item-" + it.id);
    const left = stockOf(it);
    const pct = left == null ? 100 : Math.max(0, Math.min(100, (100 * left) / Math.max(1, it.quantity)));
    card.querySelector(".bar > span").style.width = pct + "%";
    card.querySelector(".stock").textContent = left === 0 ? "Sold out" :
      (left == null ? "" : left + " of " + it.quantity + " left");
    const b = card.querySelector("button");
    b.disabled = st.busy || !canBuy() || it.soldOut;
    b.textContent = st.final === "SOLD_OUT" || it.soldOut ? "Sold out" : "Buy";
  }
}

function renderOrder() {
  const o = st.order;
  $("order-box").classList.toggle("hidden", !o);
  if (!o) return;
  $("order-id").textContent = o.id;
  $("order-status").textContent = o.status;
  $("order-status").className = "badge " + o.status;
  $("pay").disabled = o.status !== "PENDING" || st.busy;
  $("pay").classList.toggle("hidden", o.status !== "PENDING" && o.status !== "PROCESSING");
  let line = "";
  if (o.status === "PROCESSING") line = "Processing — your unit is held while the order is recorded.";
  else if (o.status === "PENDING" && o.expiresAt) line = "Held for you until " + new Date(o.expiresAt).toLocaleTimeString() +
    " (" + hms(Date.parse(o.expiresAt) - serverNow()) + " left); unpaid, it goes back on sale.";
  else if (o.status === "PAID") line = "Paid.";
  else if (o.status === "EXPIRED") line = "The payment window ended; the unit went back on sale.";
  $("order-deadline").textContent = line;
  // The countdown runs in the order box; the live status line says it once.
  if (o.status === "PENDING") showStatus("Reserved — pay before " + new Date(o.expiresAt).toLocaleTimeString(), "good");
}

// A one-second tick redraws the clocks; it sends nothing.
function tick() {
  $("server-clock").textContent = st.sale ? "server time " + new Date(serverNow()).toLocaleTimeString() : "";
  render();
  if (st.order && st.order.status === "PENDING") renderOrder();
}

initToken();
$("join").addEventListener("click", joinQueue);
$("pay").addEventListener("click", pay);
loadSale();
setInterval(tick, 250);
