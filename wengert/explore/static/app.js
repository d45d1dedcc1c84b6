// wengert explorer: the expression graph, stepped through the forward then the backward pass,
// and checkpoint schedules. Plain JavaScript + SVG; all text goes in through textContent.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);

const state = {
  data: null,     // payload of POST /api/expression
  step: 0,        // 0 .. forward.length + backward.length
  timer: null,
  layout: null,
};

// -- helpers ------------------------------------------------------------------------------
function fmt(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "string") return v;           // "inf", "-inf", "nan"
  if (Number.isInteger(v) && Math.abs(v) < 1e9) return String(v);
  const s = v.toPrecision(6);
  return s.includes("e") ? s : String(parseFloat(s));
}
function full(v) {
  if (v === null || v === undefined) return "";
  return typeof v === "string" ? v : String(v);
}
function el(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
function h(tag, text, attrs) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  return e;
}
function showError(box, msg) {
  const b = $(box);
  if (msg) { b.textContent = msg; b.hidden = false; } else { b.textContent = ""; b.hidden = true; }
}
async function api(method, url, body) {
  const opts = { method, headers: {} };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(url, opts);
  let data;
  try { data = await r.json(); } catch (e) { data = { error: `HTTP ${r.status}` }; }
  if (!r.ok) throw new Error(data.error || `HTTP ${r.status}`);
  return data;
}

// -- expression -----------------------------------------------------------------------------
function currentInputs() {
  const out = {};
  for (const inp of document.querySelectorAll("#inputs input")) {
    if (inp.value.trim() !== "") out[inp.dataset.var] = inp.value.trim();
  }
  return out;
}

// Answers can arrive out of order (an Enter and a change event, a quick second edit): only
// the latest request's answer is drawn, and body.dataset.pending counts requests in flight.
let latestLoad = 0;
// body.dataset counters (loads, errors, pending) that tests and tools wait on
function bumpCounter(name, delta = 1) {
  document.body.dataset[name] = String((+document.body.dataset[name] || 0) + delta);
}

async function load(expr, inputs, keepStep) {
  stop();
  showError("error", "");
  const ticket = ++latestLoad;
  let data;
  bumpCounter("pending", +1);
  try {
    data = await api("POST", "/api/expression", { expr, inputs });
  } catch (e) {
    if (ticket !== latestLoad) return;
    showError("error", e.message);
    // what is still drawn belongs to the previous expression: say so
    document.querySelector("#view-expr .layout").classList.add("stale");
    bumpCounter("errors");
    return;
  } finally {
    bumpCounter("pending", -1);
  }
  if (ticket !== latestLoad) return;  // superseded while in flight
  document.querySelector("#view-expr .layout").classList.remove("stale");
  const sameShape = state.data && state.data.expr === data.expr;
  state.data = data;
  if (!keepStep || !sameShape) state.step = 0;
  state.step = Math.min(state.step, totalSteps());
  buildInputs(data);
  state.layout = layoutGraph(data.graph);
  drawGraph();
  buildTape(data);
  buildPrograms(data);
  updateUrl();
  render();
  bumpCounter("loads");
  document.body.dataset.inputs = JSON.stringify(data.inputs);
}

function totalSteps() {
  const d = state.data;
  return d ? d.forward.length + d.backward.length : 0;
}

// The boxes are kept while the variables stay the same, so focus survives a reload, and a
// box the user is typing in (edited, not yet committed by change) keeps what was typed.
function buildInputs(d) {
  const box = $("inputs");
  const have = [...box.querySelectorAll("input")].map((inp) => inp.dataset.var);
  if (have.join("\n") !== d.variables.join("\n")) {
    box.replaceChildren();
    for (const name of d.variables) {
      const lab = h("label");
      lab.append(document.createTextNode(name + " ="));
      const inp = h("input", undefined, { type: "text", inputmode: "decimal", "data-var": name,
                                           "aria-label": "value of " + name,
                                           id: "input-" + name });
      inp.addEventListener("input", () => { inp.dataset.editing = "1"; });
      inp.addEventListener("blur", () => { delete inp.dataset.editing; });
      inp.addEventListener("change", () => {
        delete inp.dataset.editing;
        load($("expr").value, currentInputs(), true);
      });
      lab.append(inp);
      box.append(lab);
    }
  }
  for (const inp of box.querySelectorAll("input")) {
    if (!inp.dataset.editing) inp.value = full(d.inputs[inp.dataset.var]);
  }
  $("reroll").disabled = d.variables.length === 0;
}

function buildTape(d) {
  const body = $("tape").tBodies[0];
  body.replaceChildren();
  for (const row of d.tape) {
    const tr = h("tr", undefined, { "data-index": String(row.index) });
    tr.append(h("td", String(row.index)), h("td", row.name || ""), h("td", row.op),
              h("td", row.args.join(", ")), h("td", "", { class: "tape-value" }));
    body.append(tr);
  }
  const gb = $("gradient").tBodies[0];
  gb.replaceChildren();
  for (const name of d.variables) {
    const tr = h("tr");
    tr.append(h("td", name), h("td", full(d.inputs[name])),
              h("td", "", { class: "adjoint", "data-var": name }),
              h("td", "", { class: "grad", "data-var": name }));
    gb.append(tr);
  }
}

function buildPrograms(d) {
  const p = d.programs;
  $("prog-forward").textContent = p ? p.forward : "(unavailable" + (d.programs_error ? ": " + d.programs_error : "") + ")";
  $("prog-reverse").textContent = p ? p.reverse : "(unavailable)";
}

// layered DAG: inputs (layer 0) on top, the result at the bottom. Edges spanning several
// layers get a bend point on each layer between (Sugiyama), ordered with the nodes.
function layoutGraph(g) {
  const layerOf = {}, up = {}, down = {}, layers = [];
  const add = (id, l) => {
    layerOf[id] = l; up[id] = []; down[id] = [];
    (layers[l] = layers[l] || []).push(id);
  };
  for (const n of g.nodes) add(n.id, n.layer);
  const routes = {};
  for (const e of g.edges) {
    const chain = [e.source];
    for (let l = layerOf[e.source] + 1; l < layerOf[e.target]; l++) {
      const d = `d${e.id}_${l}`;
      add(d, l);
      chain.push(d);
    }
    chain.push(e.target);
    for (let i = 0; i + 1 < chain.length; i++) { down[chain[i]].push(chain[i + 1]); up[chain[i + 1]].push(chain[i]); }
    routes[e.id] = chain.slice(1, -1);
  }
  const pos = {};
  const order = (L) => L.forEach((id, i) => { pos[id] = i; });
  layers.forEach((L) => order(L || []));
  const bary = (ids, nb) => {
    const m = (id) => {
      const ns = nb[id];
      if (!ns.length) return pos[id];
      return ns.reduce((s, x) => s + pos[x], 0) / ns.length;
    };
    const keyed = ids.map((id) => [m(id), pos[id], id]);
    keyed.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    return keyed.map((k) => k[2]);
  };
  for (let it = 0; it < 8; it++) {
    for (let l = 1; l < layers.length; l++) if (layers[l]) { layers[l] = bary(layers[l], up); order(layers[l]); }
    for (let l = layers.length - 2; l >= 0; l--) if (layers[l]) { layers[l] = bary(layers[l], down); order(layers[l]); }
  }
  const W = 96, H = 44, GX = 40, GY = 92, DW = 14;
  const slot = (id) => (typeof id === "string" ? DW : W) + GX;
  const spans = layers.map((L) => (L || []).reduce((s, id) => s + slot(id), 0) - GX);
  const width = Math.max(360, Math.max(0, ...spans) + 2 * GX);
  const xy = {};
  layers.forEach((L, l) => {
    if (!L) return;
    let x = (width - spans[l]) / 2;
    for (const id of L) {
      const w = slot(id) - GX;
      xy[id] = { x: x + w / 2, y: 34 + l * (H + GY) + H / 2 };
      x += slot(id);
    }
  });
  const height = layers.length * (H + GY) - GY + 90;
  return { xy, width, height, W, H, routes };
}

function drawGraph() {
  const d = state.data, L = state.layout, svg = $("graph");
  svg.replaceChildren();
  svg.setAttribute("viewBox", `0 0 ${L.width} ${L.height}`);
  svg.setAttribute("width", L.width);
  svg.style.maxWidth = L.width + "px";
  const edgesG = el("g", { class: "edges" });
  const nodesG = el("g", { class: "nodes" });
  svg.append(edgesG, nodesG);
  // parallel edges (x * x) bend apart
  const count = {};
  for (const e of d.graph.edges) {
    const k = e.source + ">" + e.target;
    count[k] = (count[k] || 0) + 1;
  }
  const seen = {};
  for (const e of d.graph.edges) {
    const a = L.xy[e.source], b = L.xy[e.target];
    const k = e.source + ">" + e.target;
    const i = (seen[k] = (seen[k] || 0) + 1) - 1;
    const bend = count[k] > 1 ? (i - (count[k] - 1) / 2) * 50 : 0;
    // arguments attach side by side on the user's top edge, in argument order
    const nargs = d.graph.nodes[e.target].args.length;
    const spread = nargs > 1 ? (e.index - (nargs - 1) / 2) * 28 : 0;
    const pts = [[a.x, a.y + L.H / 2]];
    for (const dId of L.routes[e.id]) pts.push([L.xy[dId].x, L.xy[dId].y]);
    pts.push([b.x + spread, b.y - L.H / 2]);
    const g = el("g", { class: "edge", "data-edge": String(e.id) });
    // the label sits ~60% down the last segment, clear of the adjoint badge under the argument
    const t2 = 0.55, u2 = 1 - t2;
    let dpath, lx, ly;
    if (pts.length === 2) {
      const [x1, y1] = pts[0], [x2, y2] = pts[1];
      const mx = (x1 + x2) / 2 + bend, my = (y1 + y2) / 2;
      dpath = `M${x1},${y1} Q${mx},${my} ${x2},${y2}`;
      lx = u2 * u2 * x1 + 2 * u2 * t2 * mx + t2 * t2 * x2;
      ly = u2 * u2 * y1 + 2 * u2 * t2 * my + t2 * t2 * y2;
    } else {
      dpath = "M" + pts.map((p) => p.join(",")).join(" L");
      const [x1, y1] = pts[pts.length - 2], [x2, y2] = pts[pts.length - 1];
      lx = u2 * x1 + t2 * x2; ly = u2 * y1 + t2 * y2;
    }
    g.append(el("path", { d: dpath }));
    const bg = el("rect", { class: "lbg", x: lx - 32, y: ly - 9, width: 64, height: 16, rx: 3, visibility: "hidden" });
    const t = el("text", { x: lx, y: ly + 4, class: "local" }, "");
    g.append(bg, t);
    edgesG.append(g);
  }
  for (const n of d.graph.nodes) {
    const p = L.xy[n.id];
    const g = el("g", { class: "node " + n.kind, "data-node": String(n.id), transform: `translate(${p.x},${p.y})` });
    const title = el("title", {}, n.kind === "op" ? `${n.name} = ${opText(n, d)}` : n.name);
    g.append(title);
    g.append(el("rect", { x: -L.W / 2, y: -L.H / 2, width: L.W, height: L.H, rx: n.kind === "op" ? 20 : 6 }));
    const label = n.kind === "op" ? `${n.name}: ${n.label}` : n.label;
    g.append(el("text", { y: -4 }, label.length > 12 ? label.slice(0, 11) + "\u2026" : label));
    g.append(el("text", { y: 13, class: "val" }, ""));
    if (n.kind !== "const") {
      const ab = el("g", { class: "adjg", transform: `translate(0,${L.H / 2 + 14})`, visibility: "hidden" });
      ab.append(el("rect", { class: "adjbox", x: -44, y: -11, width: 88, height: 18, rx: 9 }));
      ab.append(el("text", { y: 3, class: "adj" }, ""));
      g.append(ab);
    }
    nodesG.append(g);
  }
}

function opText(n, d) {
  const names = n.args.map((a) => d.graph.nodes[a].name);
  if (n.args.length === 1 && (n.op === "neg" || n.op === "pos")) return n.label + names[0];
  if (n.args.length === 2 && n.label.length <= 2) return `${names[0]} ${n.label} ${names[1]}`;
  return `${n.op}(${names.join(", ")})`;
}

function render() {
  const d = state.data;
  if (!d) return;
  const F = d.forward.length, B = d.backward.length, s = state.step;
  const fwdDone = Math.min(s, F), bwdDone = Math.max(0, s - F);
  // node values
  const evaluated = new Set();
  for (let i = 0; i < fwdDone; i++) evaluated.add(d.forward[i].node);
  const adj = {};
  const pushedEdges = new Set();
  if (bwdDone > 0) for (const n of d.graph.nodes) if (n.kind !== "const") adj[n.id] = 0;
  let curEdge = null, curNode = null, curTape = null, text = "";
  for (let i = 0; i < bwdDone; i++) {
    const st = d.backward[i];
    if (st.kind === "seed") adj[st.node] = st.adjoint;
    else { adj[st.source] = st.adjoint; pushedEdges.add(st.edge); }
  }
  if (s === 0) {
    text = "Press Step (or \u2192) to start the forward pass.";
  } else if (s <= F) {
    const st = d.forward[s - 1];
    curNode = st.node; curTape = st.tape; text = "forward: " + st.text;
  } else {
    const st = d.backward[s - F - 1];
    curTape = st.tape;
    if (st.kind === "seed") { curNode = st.node; text = "backward: " + st.text; }
    else { curEdge = st.edge; curNode = st.source; text = "backward: " + st.text; }
  }
  $("step-text").textContent = text;
  $("phase").textContent = s === 0 ? `0 / ${F + B}` :
    s <= F ? `forward pass ${s} / ${F}` : `backward pass ${s - F} / ${B}` + (s === F + B ? " \u2014 done" : "");
  for (const g of document.querySelectorAll("#graph .node")) {
    const id = +g.dataset.node;
    const n = d.graph.nodes[id];
    g.classList.toggle("evaluated", evaluated.has(id));
    g.classList.toggle("current", id === curNode);
    g.querySelector(".val").textContent = evaluated.has(id) ? "= " + fmt(n.value) : "";
    const ab = g.querySelector(".adjg");
    if (ab) {
      const on = id in adj;
      ab.setAttribute("visibility", on ? "visible" : "hidden");
      const label = on ? "g = " + fmt(adj[id]) : "";
      ab.querySelector("text").textContent = label;
      const w = Math.max(60, 7.4 * label.length + 14);
      const box = ab.querySelector("rect");
      box.setAttribute("width", w);
      box.setAttribute("x", -w / 2);
    }
  }
  for (const g of document.querySelectorAll("#graph .edge")) {
    const id = +g.dataset.edge;
    const e = d.graph.edges[id];
    const shown = pushedEdges.has(id);
    g.classList.toggle("pushed", shown);
    g.classList.toggle("current", id === curEdge);
    g.classList.toggle("forward-current", s > 0 && s <= F && e.target === curNode);
    const label = shown ? "\u2202 " + fmt(e.local) : "";
    g.querySelector("text").textContent = label;
    const bg = g.querySelector(".lbg");
    bg.setAttribute("visibility", shown ? "visible" : "hidden");
    const w = 6.8 * label.length + 6;
    bg.setAttribute("width", w);
    bg.setAttribute("x", +g.querySelector("text").getAttribute("x") - w / 2);
  }
  // tape table
  for (const tr of $("tape").tBodies[0].rows) {
    const i = +tr.dataset.index;
    const row = d.tape[i];
    const on = row.node !== null && evaluated.has(row.node);
    tr.cells[4].textContent = on ? fmt(row.value) : "";
    tr.classList.toggle("done-f", on);
    tr.classList.toggle("current", i === curTape);
    if (i === curTape && typeof tr.scrollIntoView === "function") tr.scrollIntoView({ block: "nearest" });
  }
  // gradient: adjoints as they accumulate, wg.grad once the sweep is complete
  const complete = s === F + B && B > 0;
  const inputIds = {};
  for (const n of d.graph.nodes) if (n.kind === "input") inputIds[n.name] = n.id;
  for (const td of document.querySelectorAll("#gradient td.adjoint")) {
    const id = inputIds[td.dataset.var];
    td.textContent = id in adj ? full(adj[id]) : "";
  }
  for (const td of document.querySelectorAll("#gradient td.grad")) {
    td.textContent = complete ? full(d.gradient[td.dataset.var]) : "";
  }
  $("value-line").textContent = fwdDone === F ? `f = ${full(d.value)}` : "";
  $("back").disabled = s === 0;
  $("reset").disabled = s === 0;
  $("step").disabled = s === F + B;
  $("end").disabled = s === F + B;
  document.body.dataset.step = String(s);
  document.body.dataset.complete = complete ? "1" : "0";
}

function setStep(s) {
  state.step = Math.max(0, Math.min(totalSteps(), s));
  render();
}
function stop() {
  if (state.timer) clearInterval(state.timer);
  state.timer = null;
  $("play").setAttribute("aria-pressed", "false");
  $("play").textContent = "Play";
}
function play() {
  if (state.timer) return stop();
  if (state.step >= totalSteps()) setStep(0);
  $("play").setAttribute("aria-pressed", "true");
  $("play").textContent = "Pause";
  state.timer = setInterval(() => {
    if (state.step >= totalSteps()) return stop();
    setStep(state.step + 1);
  }, 700);
}

function updateUrl() {
  const d = state.data;
  const q = new URLSearchParams();
  if (!$("view-sched").hidden) {
    q.set("view", "schedule");
    q.set("n", $("sched-n").value);
    q.set("strategy", $("sched-strategy").value);
    q.set("snapshots", $("sched-snapshots").value);
  }
  if (d) {
    q.set("expr", d.expr);
    for (const name of d.variables) if (name !== "expr" && name !== "view") q.set(name, full(d.inputs[name]));
  }
  const url = location.pathname + "?" + q.toString();
  history.replaceState(null, "", url);
  $("share").href = url;
}

// -- checkpoint schedules -----------------------------------------------------------------------
async function loadSchedule() {
  showError("sched-error", "");
  const n = $("sched-n").value, strategy = $("sched-strategy").value, snaps = $("sched-snapshots").value;
  const q = new URLSearchParams({ n, strategy });
  if (snaps !== "" && (strategy === "binomial" || strategy === "online")) q.set("snapshots", snaps);
  let data;
  try { data = await api("GET", "/api/schedule?" + q.toString()); }
  catch (e) { showError("sched-error", e.message); $("schedule").replaceChildren(); return; }
  updateUrl();
  drawSchedule(data);
}

function drawSchedule(data) {
  const n = data.n, svg = $("schedule"), rows = data.rows;
  const list = $("sched-actions");
  list.replaceChildren();
  for (const a of data.actions.slice(0, 5000)) {
    list.append(h("li", a.kind === "advance" ? `advance ${a.start} \u2192 ${a.stop}` : `${a.kind} ${a.index}`));
  }
  const st = data.stats || {};
  $("sched-summary").textContent = `${data.strategy}, N = ${n}` +
    (data.strategy === "binomial" || data.strategy === "online" ? `, ${data.snapshots} snapshots` : "") +
    `: ${data.actions.length} actions; ${st.advanced} steps advanced (the forward sweep included); ` +
    `at most ${st.max_stored} states stored at once` + (st.inverted ? `; ${st.inverted} inverse steps` : "") + ".";
  const cw = 20, rh = 19, left = 8, top = 24, labelW = 110;
  const width = left * 2 + n * cw + labelW, height = top + rows.length * rh + 8;
  svg.replaceChildren();
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  for (let i = 0; i < n; i++) {
    svg.append(el("text", { x: left + i * cw + cw / 2, y: 15, class: "head" }, i.toString(16)));
  }
  const cls = { "X": "stored", "+": "recomputed", "<": "recomputed", "^": "caret", ".": "head" };
  rows.forEach((r, j) => {
    const y = top + j * rh + 13;
    const g = el("g", { class: "sched-row", "data-label": r.label });
    for (let i = 0; i < n; i++) {
      const ch = r.cells[i];
      g.append(el("text", { x: left + i * cw + cw / 2, y, class: cls[ch] || "" }, ch === "." ? "\u00b7" : ch));
    }
    g.append(el("text", { x: left + n * cw + 10, y, class: "head lab" }, r.label));
    svg.append(g);
  });
}

// -- views and events ----------------------------------------------------------------------
function showView(which) {
  const sched = which === "schedule";
  $("view-expr").hidden = sched;
  $("view-sched").hidden = !sched;
  $("tab-expr").setAttribute("aria-pressed", String(!sched));
  $("tab-sched").setAttribute("aria-pressed", String(sched));
  if (sched) loadSchedule(); else updateUrl();
}

function init() {
  const q = new URLSearchParams(location.search);
  if (q.get("expr")) $("expr").value = q.get("expr");
  for (const [k, id] of [["n", "sched-n"], ["strategy", "sched-strategy"], ["snapshots", "sched-snapshots"]]) {
    if (q.get(k)) $(id).value = q.get(k);
  }
  const inputs = {};
  for (const [k, v] of q.entries()) if (!["expr", "view", "n", "strategy", "snapshots", "step"].includes(k)) inputs[k] = v;
  $("expr-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    load($("expr").value, currentInputs(), false);
  });
  $("reroll").addEventListener("click", () => load($("expr").value, {}, false));
  $("step").addEventListener("click", () => { stop(); setStep(state.step + 1); });
  $("back").addEventListener("click", () => { stop(); setStep(state.step - 1); });
  $("reset").addEventListener("click", () => { stop(); setStep(0); });
  $("end").addEventListener("click", () => { stop(); setStep(totalSteps()); });
  $("play").addEventListener("click", play);
  $("share").addEventListener("click", (ev) => {
    ev.preventDefault();
    updateUrl();
    if (navigator.clipboard) navigator.clipboard.writeText(location.href).catch(() => {});
  });
  $("tab-expr").addEventListener("click", () => showView("expr"));
  $("tab-sched").addEventListener("click", () => showView("schedule"));
  $("sched-form").addEventListener("submit", (ev) => { ev.preventDefault(); loadSchedule(); });
  $("sched-strategy").addEventListener("change", loadSchedule);
  document.addEventListener("keydown", (ev) => {
    const t = ev.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "SELECT" || t.tagName === "TEXTAREA")) return;
    if ($("view-expr").hidden || !state.data) return;
    if (ev.key === "ArrowRight") { stop(); setStep(state.step + 1); ev.preventDefault(); }
    else if (ev.key === "ArrowLeft") { stop(); setStep(state.step - 1); ev.preventDefault(); }
    else if (ev.key === "Home") { stop(); setStep(0); ev.preventDefault(); }
    else if (ev.key === "End") { stop(); setStep(totalSteps()); ev.preventDefault(); }
  });
  load($("expr").value, inputs, false).then(() => {
    const st = parseInt(q.get("step") || "", 10);
    if (!Number.isNaN(st)) setStep(st);
  });
  if (q.get("view") === "schedule") showView("schedule");
}

document.addEventListener("DOMContentLoaded", init);
