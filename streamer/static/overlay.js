// The overlay: one game's snapshot from /overlay/{id}/events (Server-Sent Events), drawn with textContent only.
"use strict";
const gameId = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1]);
const params = new URLSearchParams(location.search);
document.body.classList.add("theme-" + (params.get("theme") === "light" ? "light" : "dark"));
const shown = new Set((params.get("show") || "names,clocks,eval,ratings,sparkline,lastmove").split(","));
for (const el of document.querySelectorAll("[data-el]")) {
  if (!shown.has(el.dataset.el)) el.hidden = true;
}

function clock(s) {
  if (s === null || s === undefined) return "";
  s = Math.max(0, Math.floor(s));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  const mm = String(m).padStart(h ? 2 : 1, "0"), ss = String(sec).padStart(2, "0");
  return (h ? h + ":" : "") + mm + ":" + ss;
}

function evalText(cp) {
  if (cp === null || cp === undefined) return "";
  if (Math.abs(cp) >= 10000) return cp > 0 ? "+M" : "-M";
  return (cp > 0 ? "+" : "") + (cp / 100).toFixed(1);
}

function side(color, p) {
  const root = document.getElementById(color);
  root.querySelector(".name").textContent = p.name + (p.declared ? " (" + p.declared + ")" : "");
  root.querySelector(".clock").textContent = clock(p.clock);
  const r = p.rating;
  root.querySelector(".rating .value").textContent = r ? String(r.rating) : "";
  root.querySelector(".rating .band").textContent = r ? "[" + r.low + ", " + r.high + "]" : "";
  // a rating whose calibrations do not hold as fitted (another engine, other limits) says so on screen too
  root.querySelector(".rating .label").textContent = r ? r.label + " \u00b7 " + r.moves + " moves" +
    (r.provisional ? " \u00b7 provisional" : "") : "";
  const h = p.history || [];
  const pts = h.length ? h : [];
  const lo = Math.min(...pts, 3000), hi = Math.max(...pts, 1000);
  root.querySelector(".spark polyline").setAttribute("points", pts.map((v, i) =>
    (pts.length > 1 ? (i * 300) / (pts.length - 1) : 0).toFixed(1) + "," + (60 - ((v - lo) * 60) / Math.max(1, hi - lo)).toFixed(1)).join(" "));
}

function draw(g) {
  side("white", g.white);
  side("black", g.black);
  // the eval bar: White's share from the engine's evaluation (the logistic curve of the rating model)
  const share = g.eval_cp === null ? 0.5 : 1 / (1 + Math.exp(-g.eval_cp * 0.00368208));
  document.getElementById("bar-white").style.height = (share * 100).toFixed(1) + "%";
  document.getElementById("eval-text").textContent = evalText(g.eval_cp);
  const lm = g.last_move;
  document.getElementById("lastmove").textContent = lm
    ? (lm.number ?? Math.floor(lm.ply / 2) + 1) + (lm.color === "white" ? ". " : "... ") + lm.san + (g.result ? "  " + g.result : "")
    : (g.result || "");
  if (shown.has("board")) {
    document.getElementById("board").src = "/overlay/" + encodeURIComponent(gameId) + "/board.svg?ply=" + g.moves;
  }
  document.body.dataset.ply = String(g.moves);
  document.body.dataset.evalPly = String(g.eval_ply);
}

// the clock of the side to move runs between snapshots: from the time it had run when the snapshot was made, at the
// snapshot's rate (game seconds per second), counted on this page's own clock (the server's may differ from it)
let current = null, receivedAt = 0;

function tick() {
  const g = current;
  document.body.dataset.clockRuns = g && g.clock_runs ? g.clock_runs : "";
  if (!g || !g.clock_runs) return;
  const ran = g.clock_elapsed + ((performance.now() - receivedAt) / 1000) * g.clock_rate;
  document.querySelector("#" + g.clock_runs + " .clock").textContent = clock(g[g.clock_runs].clock - ran);
}

// The browser reconnects by itself after a network error, but not after an answer without a stream: a kibitz
// restarted (or one that has not seen the game yet) answers 404 until its feed shows the game again. So the page
// tries again itself, every 1 s doubling to 10 s, and the overlay in a streaming program recovers unattended.
let retry = 1000;

function connect() {
  const source = new EventSource("/overlay/" + encodeURIComponent(gameId) + "/events");
  source.onopen = () => { retry = 1000; };
  source.onmessage = (e) => {
    current = JSON.parse(e.data);
    receivedAt = performance.now();
    document.body.dataset.state = "live";
    draw(current);
    tick();
  };
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) {
      document.body.dataset.state = "waiting";
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    }
  };
}

connect();
setInterval(tick, 200);
