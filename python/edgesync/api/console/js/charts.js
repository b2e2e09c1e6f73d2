// Hand-written SVG charts: a line over time and horizontal bars. Each has a text
// alternative (its <title> and a caption) for screen readers.

import { h } from "./ui.js";

const NS = "http://www.w3.org/2000/svg";

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

// points: [[ms, value]]. Values are drawn from 0 up to the largest seen.
export function lineChart(id, title, points, unit, { width = 420, height = 140 } = {}) {
  const pad = { l: 44, r: 10, t: 10, b: 22 };
  const w = width - pad.l - pad.r;
  const ht = height - pad.t - pad.b;
  const max = Math.max(1, ...points.map((p) => p[1]));
  const t0 = points.length ? points[0][0] : 0;
  const span = points.length > 1 ? points[points.length - 1][0] - t0 : 1;
  const x = (t) => pad.l + ((t - t0) / span) * w;
  const y = (v) => pad.t + ht - (v / max) * ht;
  const last = points.length ? points[points.length - 1][1] : null;
  const svg = s("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-labelledby": `${id}-t` },
    s("title", { id: `${id}-t` }, `${title}: ${last === null ? "no sample yet" : `${fmt(last)} ${unit} now`}`),
    s("line", { class: "axis", x1: pad.l, y1: pad.t + ht, x2: pad.l + w, y2: pad.t + ht }),
    s("line", { class: "axis", x1: pad.l, y1: pad.t, x2: pad.l, y2: pad.t + ht }),
    s("text", { x: pad.l - 4, y: pad.t + 8, "text-anchor": "end" }, fmt(max)),
    s("text", { x: pad.l - 4, y: pad.t + ht, "text-anchor": "end" }, "0"),
    s("text", { x: pad.l, y: height - 6 }, points.length ? `${Math.round(span / 1000)} s` : "waiting for samples"));
  for (const [t, v] of points.slice(-1)) { // the latest sample, also when it is the only one
    svg.append(s("circle", { class: "dot", cx: (points.length > 1 ? x(t) : pad.l + w).toFixed(1), cy: y(v).toFixed(1), r: 3 }));
  }
  if (points.length > 1) {
    svg.append(s("polyline", { class: "line", points: points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ") }));
  }
  return h("figure", { class: "chart", id }, svg,
    h("figcaption", {}, `${title}: `, h("strong", {}, last === null ? "-" : `${fmt(last)} ${unit}`)));
}

// bars: [[label, value]].
export function barChart(id, title, bars, { width = 420 } = {}) {
  const row = 22;
  const height = Math.max(1, bars.length) * row + 8;
  const max = Math.max(1, ...bars.map((b) => b[1]));
  const lw = 140;
  const svg = s("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-labelledby": `${id}-t` },
    s("title", { id: `${id}-t` }, `${title}: ${bars.map(([l, v]) => `${l} ${v}`).join(", ") || "none"}`));
  bars.forEach(([label, v], i) => {
    const y = 4 + i * row;
    const bw = ((width - lw - 50) * v) / max;
    svg.append(s("text", { x: lw - 6, y: y + 14, "text-anchor": "end" }, label),
      s("rect", { class: "bar", x: lw, y: y + 3, width: Math.max(1, bw), height: row - 8 }),
      s("text", { x: lw + bw + 6, y: y + 14 }, String(v)));
  });
  return h("figure", { class: "chart", id }, svg, h("figcaption", {}, title));
}

function fmt(v) {
  if (Math.abs(v) >= 1e6) return `${(v / 1e6).toFixed(1)}M`;
  if (Math.abs(v) >= 1e4) return `${(v / 1e3).toFixed(1)}k`;
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}
