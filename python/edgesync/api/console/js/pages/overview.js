// Overview: devices, lineages by status, staged backlog, open reviews, ingest rate.
// The charts are sampled by this page since it was opened (every 5 s) from the project's
// API aggregates: the lineages' staged and written row counters. /metrics is not per
// project, and nothing keeps a server-side history (docs/console.md).

import { all, get } from "../api.js";
import { barChart, lineChart } from "../charts.js";
import { ago, clear, h, link, num, pill, say, table, words } from "../ui.js";
import { LineageStatus, ReviewStatus } from "../vocabulary.js";

const EVERY_MS = 5000;
const KEEP = 120; // 10 minutes of samples
const samples = []; // [ms, staged rows, written rows], kept while the tab lives

export async function render(main, { stale }) {
  const box = h("div", { id: "overview-body" });
  clear(main, h("h1", {}, "Overview"),
    h("p", { class: "muted" }, `Sampled every ${EVERY_MS / 1000} s since this page was opened.`), box);
  let timer = null;
  const tick = async () => {
    try {
      await draw(box);
    } catch (e) {
      say(e.text || String(e), true);
    }
    if (!stale()) timer = setTimeout(tick, EVERY_MS);
  };
  await draw(box);
  timer = setTimeout(tick, EVERY_MS);
  return () => clearTimeout(timer);
}

async function draw(box) {
  // What waits for an operator: queued reviews and those claimed but not decided yet.
  const [lineages, devices, ...open] = await Promise.all([
    all("/edge/lineages"), all("/devices"),
    ...[ReviewStatus.QUEUED, ReviewStatus.IN_REVIEW].flatMap((st) => [get(`/edge/schema-reviews?status=${st}&limit=1`),
      get(`/edge/registry-reviews?status=${st}&limit=1`)])]);
  const waiting = open.reduce((n, doc) => n + doc.meta.total, 0);
  const staged = lineages.reduce((n, l) => n + l.staged_rows, 0);
  const written = lineages.reduce((n, l) => n + l.materialized_rows, 0);
  samples.push([Date.now(), staged, written]);
  if (samples.length > KEEP) samples.shift();
  const rate = [];
  for (let i = 1; i < samples.length; i++) {
    const [t0, , w0] = samples[i - 1];
    const [t1, , w1] = samples[i];
    rate.push([t1, Math.max(0, (w1 - w0) / ((t1 - t0) / 1000))]);
  }
  const byStatus = {};
  for (const l of lineages) {
    const key = l.status === LineageStatus.PAUSED ? `paused: ${words(l.pause_reason)}` : l.status;
    byStatus[key] = (byStatus[key] || 0) + 1;
  }
  const lastBatch = {};
  for (const l of lineages) {
    if (l.last_batch_at && (!lastBatch[l.device_id] || l.last_batch_at > lastBatch[l.device_id])) lastBatch[l.device_id] = l.last_batch_at;
  }
  const hasSeen = devices.some((d) => "last_seen" in d || "last_seen_at" in d);
  const hasOnline = devices.some((d) => "connected" in d || "online" in d);
  const paused = lineages.filter((l) => l.status === LineageStatus.PAUSED).length;
  clear(box,
    h("div", { class: "cards" },
      card("devices", num(devices.length),
        link("#/devices", `${num(devices.filter((d) => d.connected).length)} connected`)),
      card("lineages", num(lineages.length), link("#/lineages", `${num(paused)} paused`)),
      card("staged backlog", num(staged), "rows waiting"),
      card("row writes", num(written), "an updated row counts again"),
      card("queued reviews", num(waiting), link("#/reviews", "queued or in review"))),
    h("h2", {}, "Ingest"),
    h("div", { class: "cards" },
      lineChart("chart-rate", "Ingest rate", rate, "rows/s"),
      lineChart("chart-backlog", "Staged backlog", samples.map(([t, s]) => [t, s]), "rows"),
      barChart("chart-status", "Lineages by status", Object.entries(byStatus).sort())),
    h("h2", {}, "Devices"),
    table("Devices", [
      { label: "device", value: (d) => d.name },
      { label: "fleet", value: (d) => d.fleet || "-" },
      hasOnline ? { label: "connected", value: (d) => pill((d.connected ?? d.online) ? "online" : "offline") } : null,
      hasSeen ? { label: "last seen", value: (d) => ago(d.last_seen ?? d.last_seen_at) } : null,
      { label: "last batch", value: (d) => ago(lastBatch[d.id]) },
      { label: "lineages", num: true, value: (d) => num(lineages.filter((l) => l.device_id === d.id).length) },
    ].filter(Boolean), devices.slice(0, 50)));
}

function card(title, big, sub) {
  return h("div", { class: "card" }, h("div", { class: "muted" }, title), h("div", { class: "big" }, big), h("div", {}, sub));
}
