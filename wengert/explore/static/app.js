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
  state.layout = layoutGraph(data);
  drawGraph();
  fitGraph();
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
  fillProgram("prog-forward", p ? p.forward : "(unavailable" + (d.programs_error ? ": " + d.programs_error : "") + ")", !!p);
  fillProgram("prog-reverse", p ? p.reverse : "(unavailable)", !!p);
}

// one element per line, so the lines a step executes can be highlighted
function fillProgram(id, text, lines) {
  const pre = $(id);
  pre.replaceChildren();
  if (!lines) { pre.textContent = text; return; }
  text.split("\n").forEach((ln, i) => pre.append(h("span", ln, { class: "pl", "data-line": String(i) })));
}

// -- layout --------------------------------------------------------------------------------
// A layered (Sugiyama) layout by dagre (static/dagre.min.js): ranks by network simplex,
// crossings reduced by sweeps, coordinates by Brandes-Koepf. Every box dagre places is the
// box drawn: a node with room for its adjoint badge under it, an edge label sized for the
// longest text it will show. So no two boxes can overlap, whatever the step.
const NODE_H = 44, BADGE_H = 26, MIN_W = 96;

function measure(svg) {
  // text widths as the page's CSS draws them (hidden elements in the same classes)
  const ng = el("g", { class: "node", visibility: "hidden" });
  const eg = el("g", { class: "edge", visibility: "hidden" });
  const probe = { label: el("text"), val: el("text", { class: "val" }),
                  adj: el("text", { class: "adj" }), local: el("text", { class: "local" }) };
  ng.append(probe.label, probe.val, probe.adj);
  eg.append(probe.local);
  svg.append(ng, eg);
  const em = { label: 8.5, val: 7.3, adj: 7.3, local: 6.7 };  // monospace, if not rendered
  const width = (kind, text) => {
    probe[kind].textContent = text;
    return probe[kind].getComputedTextLength() || em[kind] * text.length;
  };
  return { width, done: () => { ng.remove(); eg.remove(); } };
}

function nodeLabel(n) {
  const label = n.kind === "op" ? `${n.name}: ${n.label}` : n.label;
  return label.length > 12 ? label.slice(0, 11) + "\u2026" : label;
}

// every text a node's badge will show during the backward pass
function badgeTexts(d) {
  const texts = {};
  for (const n of d.graph.nodes) if (n.kind !== "const") texts[n.id] = ["g = 0"];
  for (const st of d.backward) {
    const id = st.kind === "seed" ? st.node : st.source;
    texts[id].push("g = " + fmt(st.adjoint));
  }
  return texts;
}

// dagre's ranking step: every node as low as its users allow (just above the first of them,
// so constants and intermediates sit next to their use), then every input on the top rank.
// Ranks stay feasible (each edge spans at least its minlen), so dagre goes on as usual.
function inputsOnTop(inputs) {
  return (g) => {
    const order = dagre.graphlib.alg.topsort(g).reverse();
    const rank = {};
    const low = (v) => {
      const out = g.outEdges(v);
      return out.length ? Math.min(...out.map((e) => rank[e.w] - g.edge(e).minlen)) : 0;
    };
    for (const v of order) rank[v] = low(v);
    const top = Math.min(...order.filter((v) => !g.node(v).dummy).map((v) => rank[v]));
    for (const v of inputs) rank[v] = top;
    for (const v of order) if (g.node(v).dummy) rank[v] = low(v);  // dagre's own helpers
    for (const v of order) g.node(v).rank = rank[v];
  };
}

// dagre's ordering step (crossings reduced by its sweeps, told to keep the inputs in order),
// then the inputs' places on the top rank handed out in the variables' order, in case a
// sweep did not keep to that
function inputsInOrder(inputs) {
  const constraints = [];
  for (let i = 0; i + 1 < inputs.length; i++) constraints.push({ left: inputs[i], right: inputs[i + 1] });
  return (g, order) => {
    order(g, { constraints });
    const places = inputs.map((v) => g.node(v).order).sort((a, b) => a - b);
    inputs.forEach((v, i) => { g.node(v).order = places[i]; });
  };
}

function layoutGraph(d) {
  const svg = $("graph");
  const m = measure(svg);
  const badges = badgeTexts(d);
  // inputs in one order everywhere: all on the top rank, in the order of d.variables (the
  // input bar's and the tape's order)
  const inputs = d.variables.map((name) => String(d.graph.nodes.find((n) => n.kind === "input" && n.name === name).id));
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: "TB", nodesep: 26, edgesep: 14, ranksep: 60, marginx: 0, marginy: 0,
               ranker: inputsOnTop(inputs) });
  g.setDefaultEdgeLabel(() => ({}));
  const boxes = {};
  for (const n of d.graph.nodes) {
    let w = Math.max(m.width("label", nodeLabel(n)), m.width("val", "= " + fmt(n.value))) + 20;
    let badge = 0;
    if (n.kind !== "const") {
      badge = Math.max(60, ...badges[n.id].map((t) => m.width("adj", t) + 16));
      w = Math.max(w, badge);
    }
    w = Math.ceil(n.kind === "const" ? Math.max(w, 48) : Math.max(w, MIN_W));
    boxes[n.id] = { w, h: NODE_H + (n.kind === "const" ? 0 : BADGE_H), badge: Math.ceil(badge) };
    g.setNode(String(n.id), { width: boxes[n.id].w, height: boxes[n.id].h });
  }
  const labels = {};
  for (const e of d.graph.edges) {
    const text = e.local === null || e.local === undefined ? "" : "\u2202 " + fmt(e.local);
    labels[e.id] = { text, w: text ? Math.ceil(m.width("local", text) + 8) : 0, h: text ? 16 : 0 };
    g.setEdge(String(e.source), String(e.target),
              { width: labels[e.id].w, height: labels[e.id].h, labelpos: "c", minlen: 1, weight: 1 },
              "e" + e.id);
  }
  m.done();
  dagre.layout(g, { customOrder: inputsInOrder(inputs) });

  // the drawing's extent
  let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
  const grow = (x, y, w = 0, hh = 0) => {
    x0 = Math.min(x0, x - w / 2); x1 = Math.max(x1, x + w / 2);
    y0 = Math.min(y0, y - hh / 2); y1 = Math.max(y1, y + hh / 2);
  };
  const xy = {};
  for (const n of d.graph.nodes) {
    const v = g.node(String(n.id));
    xy[n.id] = { x: v.x, y: v.y };
    grow(v.x, v.y, boxes[n.id].w, boxes[n.id].h);
  }
  const routes = {};
  for (const e of d.graph.edges) {
    const lab = g.edge({ v: String(e.source), w: String(e.target), name: "e" + e.id });
    routes[e.id] = { points: lab.points.map((p) => ({ x: p.x, y: p.y })),
                     lx: lab.x, ly: lab.y };
    for (const p of lab.points) grow(p.x, p.y);
    if (labels[e.id].w) grow(lab.x, lab.y, labels[e.id].w, labels[e.id].h);
  }
  const pad = 14;
  return { xy, boxes, labels, routes, x0: x0 - pad, y0: y0 - pad,
           width: Math.max(200, x1 - x0 + 2 * pad), height: y1 - y0 + 2 * pad };
}

// a smooth path through dagre's points: straight to the first midpoint, then quadratic
// pieces that turn at each point
function smoothPath(pts) {
  const f = (p) => `${p.x.toFixed(1)},${p.y.toFixed(1)}`;
  if (pts.length === 2) return `M${f(pts[0])} L${f(pts[1])}`;
  const mid = (a, b) => ({ x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 });
  let dpath = `M${f(pts[0])} L${f(mid(pts[0], pts[1]))}`;
  for (let i = 1; i + 1 < pts.length; i++) dpath += ` Q${f(pts[i])} ${f(mid(pts[i], pts[i + 1]))}`;
  return dpath + ` L${f(pts[pts.length - 1])}`;
}

function drawGraph() {
  const d = state.data, L = state.layout, svg = $("graph");
  svg.replaceChildren();
  svg.setAttribute("viewBox", `${L.x0.toFixed(1)} ${L.y0.toFixed(1)} ${L.width.toFixed(1)} ${L.height.toFixed(1)}`);
  svg.setAttribute("width", Math.ceil(L.width));
  svg.setAttribute("height", Math.ceil(L.height));
  const defs = el("defs");
  for (const [id, cls] of [["arrow", "arrow"], ["arrow-fwd", "arrow fwd"], ["arrow-bwd", "arrow bwd"]]) {
    const mk = el("marker", { id, viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "9",
                              markerHeight: "9", markerUnits: "userSpaceOnUse", orient: "auto",
                              class: cls });
    mk.append(el("path", { d: "M0,0 L10,5 L0,10 z" }));
    defs.append(mk);
  }
  const edgesG = el("g", { class: "edges" });
  const labelsG = el("g", { class: "labels" });
  const nodesG = el("g", { class: "nodes" });
  svg.append(defs, edgesG, nodesG, labelsG);
  for (const e of d.graph.edges) {
    const r = L.routes[e.id];
    // leave from under the source's box, straight down past its adjoint badge, and arrive
    // straight down into the target: the bends stay between the ranks, clear of boxes
    const src = L.boxes[e.source], a = L.xy[e.source], dst = L.boxes[e.target], b = L.xy[e.target];
    const inner = r.points.slice(1, -1), first = r.points[0], last = r.points[r.points.length - 1];
    const clamp = (x, c, w) => Math.max(c - w / 2 + 10, Math.min(c + w / 2 - 10, x));
    const sx = clamp(first.x, a.x, src.w), ex = clamp(last.x, b.x, dst.w);
    const srcBottom = a.y + src.h / 2, dstTop = b.y - dst.h / 2;
    const pts = [{ x: sx, y: a.y - src.h / 2 + NODE_H }, { x: sx, y: srcBottom + 4 }, ...inner,
                 { x: ex, y: dstTop - 8 }, { x: ex, y: dstTop }];
    const g = el("g", { class: "edge", "data-edge": String(e.id), "data-source": String(e.source),
                        "data-target": String(e.target) });
    g.append(el("path", { d: smoothPath(pts) }));
    edgesG.append(g);
    const lab = L.labels[e.id];
    if (lab.w) {
      const lg = el("g", { class: "elabel", "data-edge": String(e.id), visibility: "hidden" });
      lg.append(el("rect", { class: "lbg", x: r.lx - lab.w / 2, y: r.ly - lab.h / 2, width: lab.w, height: lab.h, rx: 3 }));
      lg.append(el("text", { x: r.lx, y: r.ly + 4, class: "local" }, ""));
      labelsG.append(lg);
    }
  }
  for (const n of d.graph.nodes) {
    const p = L.xy[n.id], box = L.boxes[n.id];
    const top = p.y - box.h / 2;
    const g = el("g", { class: "node " + n.kind, "data-node": String(n.id), "data-name": n.name,
                        transform: `translate(${p.x.toFixed(1)},${(top + NODE_H / 2).toFixed(1)})` });
    g.append(el("title", {}, n.kind === "op" ? `${n.name} = ${opText(n, d)}` : n.name));
    g.append(el("rect", { class: "box", x: -box.w / 2, y: -NODE_H / 2, width: box.w, height: NODE_H,
                          rx: n.kind === "op" ? 20 : 6 }));
    g.append(el("text", { y: -4 }, nodeLabel(n)));
    g.append(el("text", { y: 13, class: "val" }, ""));
    if (n.kind !== "const") {
      const ab = el("g", { class: "adjg", transform: `translate(0,${NODE_H / 2 + BADGE_H / 2})`, visibility: "hidden" });
      ab.append(el("rect", { class: "adjbox", x: -box.badge / 2, y: -9, width: box.badge, height: 18, rx: 9 }));
      ab.append(el("text", { y: 4, class: "adj" }, ""));
      g.append(ab);
    }
    nodesG.append(g);
  }
}

// the drawing at its own size where there is room; a wide one takes the page's width (the
// panels move below it) and is scaled down to at most 70%, then scrolls sideways
const MIN_SCALE = 0.7;
function fitGraph() {
  const L = state.layout, svg = $("graph");
  if (!L) return;
  const layout = document.querySelector("#view-expr .layout"), box = svg.parentElement;
  const avail = () => box.clientWidth - 16;
  layout.classList.remove("wide");
  if (L.width > avail()) layout.classList.add("wide");
  const w = Math.max(Math.min(L.width, avail()), MIN_SCALE * L.width);
  svg.style.width = w.toFixed(1) + "px";
  svg.style.height = (w * L.height / L.width).toFixed(1) + "px";
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
  let curEdge = null, curNode = null, curTape = null, text = "", cur = null;
  for (let i = 0; i < bwdDone; i++) {
    const st = d.backward[i];
    if (st.kind === "seed") adj[st.node] = st.adjoint;
    else { adj[st.source] = st.adjoint; pushedEdges.add(st.edge); }
  }
  if (s === 0) {
    text = "Press Step (or \u2192) to start the forward pass.";
  } else if (s <= F) {
    cur = d.forward[s - 1];
    curNode = cur.node; curTape = cur.tape; text = "forward: " + cur.text;
  } else {
    cur = d.backward[s - F - 1];
    curTape = cur.tape;
    if (cur.kind === "seed") { curNode = cur.node; text = "backward: " + cur.text; }
    else { curEdge = cur.edge; curNode = cur.source; text = "backward: " + cur.text; }
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
      ab.querySelector("text").textContent = on ? "g = " + fmt(adj[id]) : "";
    }
  }
  for (const g of document.querySelectorAll("#graph .edge")) {
    const id = +g.dataset.edge;
    const e = d.graph.edges[id];
    g.classList.toggle("pushed", pushedEdges.has(id));
    g.classList.toggle("current", id === curEdge);
    g.classList.toggle("forward-current", s > 0 && s <= F && e.target === curNode);
  }
  for (const g of document.querySelectorAll("#graph .elabel")) {
    const id = +g.dataset.edge;
    const shown = pushedEdges.has(id);
    g.setAttribute("visibility", shown ? "visible" : "hidden");
    g.classList.toggle("current", id === curEdge);
    g.querySelector("text").textContent = shown ? "\u2202 " + fmt(d.graph.edges[id].local) : "";
  }
  // tape table
  for (const tr of $("tape").tBodies[0].rows) {
    const i = +tr.dataset.index;
    const row = d.tape[i];
    const on = row.node !== null && evaluated.has(row.node);
    tr.cells[4].textContent = on ? fmt(row.value) : "";
    tr.classList.toggle("done-f", on);
    tr.classList.toggle("current", i === curTape);
    if (i === curTape) reveal(tr.closest(".table-wrap"), tr);
  }
  // the program lines this step runs, and those run before it
  const lines = { "prog-forward": [new Set(), new Set()], "prog-reverse": [new Set(), new Set()] };
  const mark = (st, k) => {
    for (const i of st.fwd_lines || []) lines["prog-forward"][k].add(i);
    for (const i of st.rev_lines || []) lines["prog-reverse"][k].add(i);
  };
  for (let i = 0; i < fwdDone; i++) mark(d.forward[i], 0);
  for (let i = 0; i < bwdDone; i++) mark(d.backward[i], 0);
  if (cur) mark(cur, 1);
  for (const id in lines) {
    const [done, now] = lines[id];
    let first = null;
    for (const span of $(id).querySelectorAll(".pl")) {
      const i = +span.dataset.line;
      span.classList.toggle("done", done.has(i) && !now.has(i));
      span.classList.toggle("current", now.has(i));
      if (now.has(i) && first === null) first = span;
    }
    if (first) reveal($(id), first);
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

// scroll a box (not the page) so that one of its children is in view
function reveal(box, child) {
  if (!box || box.scrollHeight <= box.clientHeight) return;
  const top = child.getBoundingClientRect().top - box.getBoundingClientRect().top + box.scrollTop;
  const bottom = top + child.getBoundingClientRect().height;
  if (top < box.scrollTop) box.scrollTop = Math.max(0, top - 24);
  else if (bottom > box.scrollTop + box.clientHeight) box.scrollTop = bottom - box.clientHeight + 8;
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
  if (sched) return loadSchedule();
  updateUrl();
  if (state.data) {  // laid out while hidden (no text to measure): lay out again, drawn
    state.layout = layoutGraph(state.data);
    drawGraph();
    fitGraph();
    render();
  }
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
  window.addEventListener("resize", fitGraph);
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
