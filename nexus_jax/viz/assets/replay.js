"use strict";
// The replay page of nexus_jax.viz.write_html: draws the frames in #replay-data as SVG and HTML, no libraries.
(function () {
  const DATA = JSON.parse(document.getElementById("replay-data").textContent);
  const SVG_NS = "http://www.w3.org/2000/svg";
  const app = { ep: 0, t: 0, timer: null, cache: null };
  const $ = (id) => document.getElementById(id);

  // ---- small helpers -------------------------------------------------------------------------
  function make(ns, tag, attrs, parent, text) {
    const node = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }
  const svg = (tag, attrs, parent, text) => make(SVG_NS, tag, attrs, parent, text);
  const el = (tag, attrs, parent, text) => make(null, tag, attrs, parent, text);
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
  function num(x, digits) {
    const v = Number(x);
    if (digits === undefined) return Math.abs(v - Math.round(v)) < 0.05 ? String(Math.round(v)) : v.toFixed(1);
    return v.toFixed(digits);
  }
  function hex(c) { return [1, 3, 5].map((i) => parseInt(c.slice(i, i + 2), 16)); }
  function mix(a, b, w) {
    const x = hex(a), y = hex(b);
    return "#" + x.map((v, i) => Math.round(v + (y[i] - v) * w).toString(16).padStart(2, "0")).join("");
  }
  function trustColour(t) {
    const [lo, mid, hi] = DATA.palette.trust || ["#dc2626", "#d1d5db", "#16a34a"];
    return t < 0.5 ? mix(lo, mid, Math.max(t, 0) / 0.5) : mix(mid, hi, Math.min(t - 0.5, 0.5) / 0.5);
  }
  function section(id, title, wide) {
    const s = el("section", { id: id + "-panel", class: wide ? "wide" : "" }, $("main"));
    el("h2", {}, s, title);
    return s;
  }
  function legend(parent, items) {
    const div = el("div", { class: "legend" }, parent);
    for (const [colour, text, style] of items) {
      el("span", { class: "sw", style: "background:" + colour + ";" + (style || "") }, div);
      div.appendChild(document.createTextNode(text));
    }
    return div;
  }

  // ---- the trust graph (both envs) ----------------------------------------------------------------
  // nodes: [{label, sub, colour, r, ring}]; trust: N x N, T[i][j] = how much i trusts j.
  function drawGraph(root, nodes, trust) {
    clear(root);
    const n = nodes.length, W = 460, H = 420, cx = W / 2, cy = H / 2, R = n > 2 ? 132 : 110;
    root.setAttribute("viewBox", `0 0 ${W} ${H}`);
    const pos = nodes.map((_, i) => {
      const a = Math.PI / 2 - (2 * Math.PI * i) / n;
      return [cx + R * Math.cos(a), cy - R * Math.sin(a)];
    });
    const edges = svg("g", { class: "edges" }, root);
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < n; j++) {
        if (i === j) continue;
        const t = trust[i][j];
        const [x0, y0] = pos[i], [x1, y1] = pos[j];
        const dx = x1 - x0, dy = y1 - y0, d = Math.hypot(dx, dy), ux = dx / d, uy = dy / d;
        const bend = 0.2 * d, mx = (x0 + x1) / 2 + uy * bend, my = (y0 + y1) / 2 - ux * bend;
        const s0 = towards(x0, y0, mx, my, nodes[i].r + 2), s1 = towards(x1, y1, mx, my, nodes[j].r + 8);
        const width = 0.8 + 11 * Math.abs(t - 0.5), colour = trustColour(t);
        const g = svg("g", { class: "edge", "data-from": i, "data-to": j, "data-trust": t.toFixed(3) }, edges);
        svg("path", { d: `M${s0[0]},${s0[1]} Q${mx},${my} ${s1[0]},${s1[1]}`, fill: "none", stroke: colour,
                      "stroke-width": width.toFixed(2), "stroke-linecap": "round" }, g);
        arrowHead(g, s1, [s1[0] - mx, s1[1] - my], 7 + width, colour);
        svg("title", {}, g, `trust of ${i} in ${j}: ${t.toFixed(2)}`);
      }
    }
    const shock = (DATA.palette.event || {}).SHOCK || "#991b1b";
    nodes.forEach((node, i) => {
      const [x, y] = pos[i];
      const g = svg("g", { class: "node", "data-seat": i }, root);
      if (node.ring) svg("circle", { cx: x, cy: y, r: node.r + 6, fill: "none", stroke: shock, "stroke-width": 5,
                                     class: "shock-ring" }, g);
      svg("circle", { cx: x, cy: y, r: node.r, fill: node.colour, stroke: "#fff", "stroke-width": 2 }, g);
      svg("text", { x: x, y: y + 5, "text-anchor": "middle", fill: "#fff", "font-size": 15, "font-weight": 700 }, g, i);
      const above = y < cy - R * 0.3, lines = node.ring ? 3 : 2;  // labels above the top seats, below the others
      const ly = above ? y - node.r - (node.ring ? 12 : 8) - 14 * (lines - 1) : y + node.r + (node.ring ? 24 : 18);
      svg("text", { x, y: ly, "text-anchor": "middle", "font-size": 12.5, "font-weight": 600 }, g, node.label);
      svg("text", { x, y: ly + 14, "text-anchor": "middle", "font-size": 11.5, fill: "#374151" }, g, node.sub);
      if (node.ring) svg("text", { x, y: ly + 28, "text-anchor": "middle", "font-size": 11.5, fill: shock,
                                   "font-weight": 700 }, g, node.ring);
      svg("title", {}, g, node.label + " " + node.sub);
    });
  }
  function towards(x, y, tx, ty, dist) {
    const d = Math.hypot(tx - x, ty - y) || 1;
    return [x + ((tx - x) / d) * dist, y + ((ty - y) / d) * dist];
  }
  function arrowHead(parent, tip, dir, size, colour) {
    const d = Math.hypot(dir[0], dir[1]) || 1, ux = dir[0] / d, uy = dir[1] / d;
    const bx = tip[0] - ux * size, by = tip[1] - uy * size, w = size * 0.45;
    svg("polygon", { points: `${tip[0] + ux * 2},${tip[1] + uy * 2} ${bx - uy * w},${by + ux * w} ${bx + uy * w},${by - ux * w}`,
                     fill: colour }, parent);
  }

  // ---- a line chart over the episode (both envs) --------------------------------------------------
  // series: [{values, colour, width, name}]; marks: [{t, colour, shape}]
  function drawLines(g, box, series, steps, t, title, marks) {
    const [x0, y0, w, h] = box;
    const top = Math.max(1, ...series.map((s) => Math.max(...s.values)));
    const X = (k) => x0 + (w * k) / Math.max(steps, 1), Y = (v) => y0 + h - (h * v) / top;
    svg("text", { x: x0, y: y0 - 8, "font-size": 12.5, "font-weight": 600 }, g, title);
    svg("line", { x1: x0, y1: y0 + h, x2: x0 + w, y2: y0 + h, stroke: "#9ca3af" }, g);
    svg("line", { x1: x0, y1: y0, x2: x0, y2: y0 + h, stroke: "#9ca3af" }, g);
    svg("text", { x: x0 - 4, y: y0 + 4, "text-anchor": "end", "font-size": 10.5, fill: "#6b7280" }, g, num(top));
    svg("text", { x: x0 - 4, y: y0 + h, "text-anchor": "end", "font-size": 10.5, fill: "#6b7280" }, g, "0");
    svg("text", { x: x0 + w, y: y0 + h + 14, "text-anchor": "end", "font-size": 10.5, fill: "#6b7280" }, g, "step " + steps);
    for (const s of series) {
      const pts = s.values.map((v, k) => `${X(k).toFixed(1)},${Y(v).toFixed(1)}`).join(" ");
      svg("polyline", { points: pts, fill: "none", stroke: s.colour, "stroke-width": s.width, class: "series" }, g);
    }
    for (const m of marks || []) {
      if (m.shape === "tick") svg("line", { x1: X(m.t), x2: X(m.t), y1: y0 + h, y2: y0 + h - 9, stroke: m.colour, "stroke-width": 2 }, g);
      else svg("circle", { cx: X(m.t), cy: y0 + h + 6, r: 3, fill: m.colour }, g);
    }
    svg("line", { x1: X(t), x2: X(t), y1: y0 - 2, y2: y0 + h + 2, stroke: "#111827", "stroke-dasharray": "4 3", class: "cursor" }, g);
  }

  // ---- nexus-v0 ------------------------------------------------------------------------------------
  const RES = ["E", "C"];
  const nexus = {
    build() {
      const g = section("graph", "Trust graph: arrow i \u2192 j is how much i trusts j");
      svg("svg", { id: "trust-graph", role: "img" }, g);
      legend(g, [[DATA.palette.trust[0], "0 (distrust)"], [DATA.palette.trust[1], "0.5 (neutral)"],
                 [DATA.palette.trust[2], "1 (trust)"], ["#fff", "node size: liquid wealth; red ring: hit by a shock",
                 "border:3px solid " + DATA.palette.event.SHOCK + ";border-radius:50%"]]);
      const h = section("holdings", "Holdings per seat");
      svg("svg", { id: "holdings", role: "img" }, h);
      legend(h, [[DATA.palette.resource[0], "Energy"], [DATA.palette.resource[1], "Compute"],
                 ["repeating-linear-gradient(45deg,#fff 0 2px,#6b7280 2px 4px)", "escrow"],
                 [DATA.palette.vault, "vault"], ["#fff", "withdrawing", "border:1px dashed #1f2937"]]);
      const e = section("events", "");
      e.querySelector("h2").id = "events-title";
      el("ul", { id: "events", class: "events" }, e);
      const l = section("ledger", "Public ledger (newest first; this step's events highlighted)");
      el("ol", { id: "ledger", class: "ledger" }, l);
      const c = section("chart", "Over the episode", true);
      svg("svg", { id: "chart", role: "img" }, c);
      legend(c, [[DATA.palette.event.SHOCK, "shock started"], [DATA.palette.event.TRADE, "trade by an acting seat (dot)"]]);
    },
    prepare(ep) {
      const f = ep.frames, seats = f[0].seats.length, acting = new Set(ep.seats);
      const total = (s, r) => s.available[r] + s.escrow[r] + s.vault[r] + s.pending[r];
      const series = (fn) => Array.from({ length: seats }, (_, i) => f.map((fr) => fn(fr.seats[i])));
      const marks = [];
      f.forEach((fr, t) => {
        for (const id of newEvents(ep, t)) {
          const ev = ep.events[id];
          if (!ev) continue;
          if (ev.kind === "SHOCK") marks.push({ t, colour: DATA.palette.event.SHOCK, shape: "tick" });
          if (ev.kind === "TRADE" && (acting.has(ev.actor) || acting.has(ev.target)))
            marks.push({ t, colour: DATA.palette.event.TRADE, shape: "dot" });
        }
      });
      return {
        maxWealth: Math.max(1, ...f.flatMap((fr) => fr.seats.map((s) => s.wealth))),
        maxHold: Math.max(1, ...f.flatMap((fr) => fr.seats.flatMap((s) => [total(s, 0), total(s, 1)]))),
        vault: series((s) => s.vault[0] + s.vault[1]),
        utility: series((s) => s.utility),
        marks,
      };
    },
    status(f) {
      return f.shock ? [`SHOCK ${f.shock.kind} (hits ${f.shock.resource})`, "shock"] : ["no shock", "calm"];
    },
    draw(ep, t, cache) {
      const f = ep.frames[t], colours = DATA.palette.archetype;
      drawGraph($("trust-graph"), f.seats.map((s) => ({
        label: `${s.archetype}${ep.seats.includes(s.seat) ? " (acting)" : ""}`,
        sub: `liquid ${num(s.wealth)} \u00b7 U ${num(s.utility)}` + (s.vault[0] + s.vault[1] >= 0.5 ? ` \u00b7 vault ${num(s.vault[0] + s.vault[1])}` : ""),
        colour: colours[s.archetype] || "#555555",
        r: 12 + 22 * Math.sqrt(Math.max(s.wealth, 0) / cache.maxWealth),
        ring: s.shock_loss > 0 ? `shock \u2212${num(s.shock_loss)}` : "",
      })), f.trust);
      this.holdings(f, cache);
      this.events(ep, t);
      this.ledger(ep, t);
      const chart = clear($("chart"));
      chart.setAttribute("viewBox", "0 0 1000 190");
      const steps = ep.frames.length - 1;
      const lines = (values) => values.map((v, i) => ({ values: v, colour: colours[f.seats[i].archetype] || "#555",
                                                       width: ep.seats.includes(i) ? 3 : 1.5 }));
      drawLines(svg("g", {}, chart), [50, 26, 420, 130], lines(cache.vault), steps, t, "vault (E + C) per seat", cache.marks);
      drawLines(svg("g", {}, chart), [560, 26, 420, 130], lines(cache.utility), steps, t,
                "utility min(liquid E, liquid C) per seat", cache.marks);
    },
    holdings(f, cache) {
      const root = clear($("holdings")), row = 58, left = 150, width = 330, pal = DATA.palette;
      root.setAttribute("viewBox", `0 0 600 ${f.seats.length * row + 8}`);
      const defs = svg("defs", {}, root);
      RES.forEach((r, k) => {
        const p = svg("pattern", { id: "hatch" + k, width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" }, defs);
        svg("rect", { width: 6, height: 6, fill: "#fff" }, p);
        svg("line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: pal.resource[k], "stroke-width": 3 }, p);
      });
      const scale = width / cache.maxHold;
      f.seats.forEach((s, i) => {
        const y = 6 + i * row;
        svg("text", { x: 4, y: y + 22, "font-size": 13, "font-weight": 600, fill: pal.archetype[s.archetype] || "#111" }, root,
            `${s.seat} ${s.archetype}`);
        svg("text", { x: 4, y: y + 38, "font-size": 11, fill: "#6b7280" }, root, `collateral ${num(s.collateral)} \u00b7 rep ${num(s.reputation, 2)}`);
        RES.forEach((r, k) => {
          const yy = y + 4 + k * 24;
          let x = left;
          const seg = (amount, attrs, cls) => {
            if (amount <= 0) return;
            svg("rect", Object.assign({ x, y: yy, width: Math.max(amount * scale, 1), height: 20, class: cls,
                                        "data-amount": amount }, attrs), root);
            x += amount * scale;
          };
          seg(s.available[k], { fill: pal.resource[k] }, "available");
          seg(s.escrow[k], { fill: `url(#hatch${k})`, stroke: pal.resource[k] }, "escrow");
          seg(s.vault[k], { fill: pal.vault, stroke: pal.resource[k], "stroke-width": 2 }, "vault");
          seg(s.pending[k], { fill: "#fff", stroke: pal.vault, "stroke-dasharray": "3 2" }, "pending");
          const liquid = s.available[k] + s.escrow[k];
          svg("text", { x: x + 6, y: yy + 15, "font-size": 12 }, root,
              `${r} ${num(liquid)}` + (s.vault[k] >= 0.5 ? ` \u00b7 vault ${num(s.vault[k])}` : "") +
              (s.pending[k] >= 0.5 ? ` \u00b7 withdrawing ${num(s.pending[k])}` : ""));
        });
      });
    },
    events(ep, t) {
      const list = clear($("events")), f = ep.frames[t], pal = DATA.palette.event;
      $("events-title").textContent = t === 0 ? "Start of the episode" : `Step ${t - 1} (the ledger's numbering): actions and events`;
      const item = (kind, colour, text, cls) => {
        const li = el("li", { style: `border-left-color:${colour}`, class: cls || "" }, list);
        el("span", { class: "kind", style: `color:${colour}` }, li, kind);
        li.appendChild(document.createTextNode(text));
        return li;
      };
      if (t === 0) { item("START", "#6b7280", "the episode's first state (before any action)"); }
      for (const a of f.actions || []) {
        const seat = f.seats[a.seat];
        item("ACTION", DATA.palette.archetype[seat.archetype] || "#111",
             `agent ${a.seat} (${seat.archetype}): ${a.text}` + (seat.error !== "OK" ? ` \u2014 invalid (${seat.error}), counted as WAIT` : ""), "action");
      }
      if (t > 0) for (const s of f.seats) {
        if (s.error !== "OK" && !ep.seats.includes(s.seat)) item("INVALID", "#b45309", `agent ${s.seat} (${s.archetype}): ${s.error}`);
      }
      const hit = f.seats.filter((s) => s.shock_loss > 0);
      if (hit.length) item("SHOCK", pal.SHOCK, "took " + hit.map((s) => `${num(s.shock_loss)} from agent ${s.seat}`).join(", "));
      const ids = newEvents(ep, t);
      for (const id of ids) {
        const ev = ep.events[id];
        if (ev) item(ev.kind, pal[ev.kind] || "#111", ev.text.replace(/^step \d+: /, ""), "event");
      }
      const lost = ids.filter((id) => !ep.events[id]).length;
      if (lost) item("\u2026", "#9ca3af", `${lost} more event(s) this step, overwritten in the ledger ring before the step ended`);
      if (t > 0 && !ids.length && !hit.length) item("QUIET", "#9ca3af", "no public event this step", "muted");
      for (const [i, j, give, want, res, age] of f.proposals) item("OPEN", "#9ca3af",
        `proposal ${i} \u2192 ${j}: ${num(give)}${RES[res]} for ${num(want)}${RES[1 - res]} (age ${age})`, "muted");
      for (const [i, j, give, want, res, age] of f.signals) item("SIGNALLED", "#9ca3af",
        `${i} \u2192 ${j}: at least ${num(give)}${RES[res]} for at most ${num(want)}${RES[1 - res]} (age ${age})`, "muted");
    },
    ledger(ep, t) {
      const list = clear($("ledger")), f = ep.frames[t], since = t > 0 ? ep.frames[t - 1].ledger_count : f.ledger_count;
      if (!f.ledger.length) el("li", { class: "muted" }, list, "(empty)");
      for (const id of f.ledger) {
        const ev = ep.events[id];
        el("li", { class: id >= since ? "new" : "", style: `border-left-color:${DATA.palette.event[ev.kind] || "#111"}` }, list, ev.text);
      }
    },
  };
  function newEvents(ep, t) {
    if (t === 0) return [];
    const ids = [];
    for (let id = ep.frames[t - 1].ledger_count; id < ep.frames[t].ledger_count; id++) ids.push(id);
    return ids;
  }

  // ---- crisis-v0 -----------------------------------------------------------------------------------
  const crisis = {
    build() {
      const tl = section("timeline", "Tasks by seat against their deadlines", true);
      svg("svg", { id: "timeline", role: "img" }, tl);
      legend(tl, [["#9ca3af", "ran (seat colour)"], ["#111827", "deadline"], [DATA.palette.late, "deadline missed / late"],
                  [DATA.palette.crisis, "crisis"], [DATA.palette.done, "\u2713 finished"]]);
      const e = section("events", "This step: actions, requests, yields, outcomes, contracts", true);
      el("ul", { id: "events", class: "events" }, e);
      const c = section("cluster", "Cluster in use / capacity");
      svg("svg", { id: "cluster", role: "img" }, c);
      const g = section("graph", "Trust: arrow i \u2192 j is how much i trusts j");
      svg("svg", { id: "trust-graph", role: "img" }, g);
    },
    prepare(ep) { return {}; },
    status(f) { return f.crises.length ? ["CRISIS " + f.crises.join(", "), "shock"] : ["no crisis", "calm"]; },
    draw(ep, t) {
      const f = ep.frames[t], pal = DATA.palette;
      this.timeline(ep, t);
      const cl = clear($("cluster"));
      cl.setAttribute("viewBox", "0 0 420 130");
      ["cpu", "memory GB", "gpu"].forEach((name, r) => {
        const cap = f.capacity[r], used = f.used[r], y = 8 + r * 40;
        svg("rect", { x: 0, y, width: 400, height: 28, fill: "#f3f4f6" }, cl);
        svg("rect", { x: 0, y, width: cap > 0 ? Math.min(used / cap, 1) * 400 : 0, height: 28, fill: "#0284c7", class: "used" }, cl);
        svg("text", { x: 8, y: y + 19, "font-size": 13, fill: "#111827" }, cl, `${name}: ${num(used)} of ${num(cap)}`);
      });
      drawGraph($("trust-graph"), f.seats.map((s) => ({ label: s.role, sub: s.running >= 0 ? "running" : "idle",
        colour: pal.seat[s.seat % pal.seat.length], r: 22, ring: "" })), f.trust);
      const list = clear($("events"));
      const item = (kind, text, colour) => {
        const li = el("li", { style: `border-left-color:${colour || "#9ca3af"}` }, list);
        el("span", { class: "kind", style: `color:${colour || "#6b7280"}` }, li, kind);
        li.appendChild(document.createTextNode(text));
      };
      if (t === 0) item("START", "the episode's first state (before any action)");
      for (const a of f.actions || []) item("ACTION", `agent ${a.seat} (${f.seats[a.seat].role}): ${a.text}`, pal.seat[a.seat % pal.seat.length]);
      if (t > 0) for (const m of f.messages) item("NEGOTIATION", m, "#374151");
      for (const c of f.crises) item("CRISIS", c, pal.late);
    },
    timeline(ep, t) {
      const root = clear($("timeline")), f = ep.frames[t], f0 = ep.frames[0], pal = DATA.palette;
      const spans = {};
      for (const [kind, a, b] of f0.schedule) if (kind !== "URGENT_TASK") (spans[a + "-" + b] = spans[a + "-" + b] || [a, b, []])[2].push(kind);
      const windows = Object.values(spans);
      const left = 210, right = 300, W = 1100, row = 24, top = 12 + 14 * windows.length, H = top + f0.tasks.length * row + 26;
      const hours = f0.episode_hours, X = (h) => left + ((W - left - right) * h) / hours;
      root.setAttribute("viewBox", `0 0 ${W} ${H}`);
      windows.forEach(([a, b, kinds], w) => {
        svg("rect", { x: X(a), y: top - 4, width: X(b) - X(a), height: H - top - 18, fill: pal.crisis, opacity: 0.7, class: "crisis" }, root);
        svg("text", { x: X(a) + 2, y: 12 + 14 * w, "font-size": 11, fill: pal.late },
            root, `${kinds.join(" + ")} ${num(a, 1)}h\u2013${num(b, 1)}h`);
      });
      for (let h = 0; h <= hours; h++) {
        svg("text", { x: X(h), y: H - 6, "text-anchor": "middle", "font-size": 11, fill: "#6b7280" }, root, h + "h");
      }
      f.tasks.forEach((task, r) => {
        const y = top + r * row, colour = pal.seat[task.seat % pal.seat.length];
        svg("text", { x: left - 8, y: y + 15, "text-anchor": "end", "font-size": 12.5, fill: colour }, root, `${task.seat} ${task.name}`);
        svg("rect", { x: X(0), y: y + 3, width: X(hours) - X(0), height: row - 6, fill: "#f3f4f6", opacity: 0.6 }, root);
        for (let k = 1, from = -1; k <= t + 1; k++) {  // one bar per run of steps in which the task made progress
          const ran = k <= t && ep.frames[k].tasks[r].progress_min > ep.frames[k - 1].tasks[r].progress_min;
          if (ran && from < 0) from = k - 1;
          if (!ran && from >= 0) {
            svg("rect", { x: X(ep.frames[from].hour), y: y + 3, width: X(ep.frames[k - 1].hour) - X(ep.frames[from].hour),
                          height: row - 6, fill: colour, class: "run" }, root);
            from = -1;
          }
        }
        if (task.released) {
          const late = task.missed || (task.completed_h !== null && task.completed_h > task.deadline_h + 1e-6);
          svg("line", { x1: X(task.deadline_h), x2: X(task.deadline_h), y1: y + 1, y2: y + row - 1,
                        stroke: late ? pal.late : "#111827", "stroke-width": 3, class: "deadline" }, root);
        }
        if (task.completed_h !== null) svg("text", { x: X(task.completed_h) + 3, y: y + 16, "font-size": 14, "font-weight": 700, fill: pal.done }, root, "\u2713");
        svg("text", { x: W - right + 8, y: y + 15, "font-size": 11.5, fill: task.missed ? pal.late : "#374151", class: "task-status" }, root,
            task.status + (task.missed && !task.status.startsWith("done") ? " \u2014 missed" : ""));
      });
      svg("line", { x1: X(f.hour), x2: X(f.hour), y1: top - 4, y2: H - 18, stroke: "#111827", "stroke-dasharray": "4 3", class: "cursor" }, root);
    },
  };

  // ---- the page --------------------------------------------------------------------------------
  const view = DATA.kind === "crisis" ? crisis : nexus;
  function show(t) {
    const ep = DATA.episodes[app.ep], last = ep.frames.length - 1;
    app.t = Math.max(0, Math.min(t, last));
    const f = ep.frames[app.t];
    $("step").value = app.t;
    $("step-label").textContent = `step ${app.t} / ${last}` + (DATA.kind === "crisis" ? ` \u00b7 hour ${num(f.hour, 2)}` : "");
    const [text, cls] = view.status(f);
    $("status").textContent = text;
    $("status").className = "badge " + cls;
    view.draw(ep, app.t, app.cache);
  }
  function selectEpisode(e) {
    stop();
    app.ep = e;
    const ep = DATA.episodes[e];
    app.cache = view.prepare(ep);
    $("step").max = ep.frames.length - 1;
    show(0);
  }
  function stop() {
    if (app.timer !== null) clearInterval(app.timer);
    app.timer = null;
    $("play").innerHTML = "&#9654; play";
  }
  function play() {
    if (app.timer !== null) return stop();
    const last = DATA.episodes[app.ep].frames.length - 1;
    if (app.t >= last) show(0);
    $("play").innerHTML = "&#10074;&#10074; pause";
    app.timer = setInterval(() => {
      if (app.t >= DATA.episodes[app.ep].frames.length - 1) return stop();
      show(app.t + 1);
    }, Number($("speed").value));
  }

  view.build();
  DATA.episodes.forEach((ep, e) => el("option", { value: e }, $("episode"), ep.label));
  $("episode").addEventListener("change", (ev) => selectEpisode(Number(ev.target.value)));
  $("step").addEventListener("input", (ev) => { stop(); show(Number(ev.target.value)); });
  $("play").addEventListener("click", play);
  $("speed").addEventListener("change", () => { if (app.timer !== null) { stop(); play(); } });
  document.addEventListener("keydown", (ev) => {
    if (ev.target.tagName === "SELECT" || ev.target === $("step")) return;
    if (ev.key === "ArrowRight") { stop(); show(app.t + 1); ev.preventDefault(); }
    else if (ev.key === "ArrowLeft") { stop(); show(app.t - 1); ev.preventDefault(); }
    else if (ev.key === " ") { play(); ev.preventDefault(); }
  });
  selectEpisode(0);
})();
