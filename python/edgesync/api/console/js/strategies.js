// The table_strategies editor of a sync policy: one fieldset per table of the sample
// database, its strategy (rows / telemetry / ignore) and, for telemetry, the timestamp
// column and the columns sent. The API checks the result by the agent's own rules
// (docs/agent.md); this only offers what the sample holds.

import { h, num } from "./ui.js";
import { StrategyKind } from "./vocabulary.js";

export const STRATEGIES = [
  [StrategyKind.ROWS, "rows: replicate every change (needs a primary key)"],
  [StrategyKind.TELEMETRY, "telemetry: append-only readings with a timestamp"],
  [StrategyKind.IGNORE, "ignore: not synced"],
];

// tables: [{name, columns: [{name, type?}], row_count?, reason?, complete?}] (the
// introspection, or the policy's sample_tables; complete false: the columns are only those
// the strategies name); current: the table_strategies to start from.
export function strategyEditor(tables, current) {
  const readers = [];
  const element = h("div", { class: "strategies", id: "strategies" },
    tables.map((t, i) => {
      const { box, read } = tableEditor(t, current[t.name] || { strategy: StrategyKind.ROWS }, i);
      readers.push([t.name, read]);
      return box;
    }));
  return {
    element,
    // The table_strategies document to send.
    read: () => Object.fromEntries(readers.map(([name, read]) => [name, read()])),
  };
}

function tableEditor(t, start, i) {
  const id = `st-${i}`;
  const columns = t.columns.map((c) => c.name);
  const strategy = h("select", { id: `${id}-strategy`, "data-table": t.name, class: "strategy" },
    STRATEGIES.map(([v, text]) => h("option", { value: v, selected: v === start.strategy }, text)));
  const ts = h("select", { id: `${id}-ts`, "data-table": t.name, class: "ts-column" },
    columns.map((c) => h("option", { value: c, selected: c === start.ts_column }, c)));
  const included = new Set(start.include_columns || columns);
  const boxes = columns.map((c) => h("input", { type: "checkbox", value: c, id: `${id}-col-${columns.indexOf(c)}`,
    "data-table": t.name, "data-column": c, checked: included.has(c) }));
  const telemetry = h("div", { class: "telemetry", id: `${id}-telemetry` },
    h("label", {}, "Timestamp column (ts_column)", ts),
    h("fieldset", { class: "columns" },
      h("legend", {}, "Columns sent (include_columns; all ticked: every column, also ones added later)"),
      boxes.map((b) => h("label", { class: "inline", "data-for": b.value }, b, h("code", {}, b.value)))));
  const sync = () => {
    telemetry.hidden = strategy.value !== StrategyKind.TELEMETRY;
    // The timestamp column always travels: its box is ticked and fixed.
    for (const b of boxes) {
      const isTs = b.value === ts.value;
      b.disabled = isTs;
      if (isTs) b.checked = true;
    }
  };
  strategy.addEventListener("change", sync);
  ts.addEventListener("change", sync);
  sync();
  const about = [t.row_count !== undefined ? `${num(t.row_count)} row(s) in the sample` : null,
    t.reason ? `suggested: ${t.reason}` : null,
    t.columns.length ? `columns: ${t.columns.map((c) => c.type ? `${c.name} ${c.type}` : c.name).join(", ")}` : null]
    .filter(Boolean).join("; ");
  const box = h("fieldset", { class: "table-strategy", id, "data-table": t.name },
    h("legend", {}, h("code", {}, t.name)),
    about ? h("p", { class: "muted", id: `${id}-about` }, about) : null,
    h("label", {}, "Strategy", strategy),
    telemetry);
  const read = () => {
    if (strategy.value !== StrategyKind.TELEMETRY) return { strategy: strategy.value };
    const doc = { strategy: StrategyKind.TELEMETRY, ts_column: ts.value };
    const picked = boxes.filter((b) => b.checked && b.value !== ts.value).map((b) => b.value);
    const others = columns.filter((c) => c !== ts.value).length;
    // Every column ticked means "all, also ones added later" only when the sample lists
    // them all; a policy without a sample keeps its explicit list.
    if (picked.length < others || (t.complete === false && start.include_columns)) doc.include_columns = picked;
    return doc;
  };
  return { box, read };
}

// The tables of a stored policy: its sample (table → column names), with the tables its
// strategies name that the sample does not (a policy made with the API, no sample).
export function policyTables(policy) {
  const sample = policy.sample_tables || {};
  const names = [...new Set([...Object.keys(sample), ...Object.keys(policy.table_strategies)])].sort();
  return names.map((name) => {
    const s = policy.table_strategies[name] || {};
    const cols = sample[name] || [...new Set([s.ts_column, ...(s.include_columns || [])].filter(Boolean))];
    return { name, columns: cols.map((c) => ({ name: c })), complete: name in sample };
  });
}

// "2 rows, 1 telemetry, 1 ignore"
export function summary(strategies) {
  const count = {};
  for (const s of Object.values(strategies)) count[s.strategy] = (count[s.strategy] || 0) + 1;
  const parts = STRATEGIES.map(([v]) => v).filter((v) => count[v]).map((v) => `${count[v]} ${v}`);
  return parts.length ? parts.join(", ") : "no tables listed (every table as rows)";
}
