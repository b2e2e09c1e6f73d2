// Small DOM helpers: elements built from text only (never HTML strings), tables with an
// accessible caption, the status line, a confirmation dialog, formatting.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "value") el.value = v;
    else if (k === "checked") el.checked = !!v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el, ...children) { el.replaceChildren(); append(el, children); return el; }

let saidAt = 0;

export function say(text, error = false) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.classList.toggle("error", error);
  saidAt = Date.now();
}

// Moving to another page clears the status line, unless what it says came with the move
// (an action that ends on another page: "lineage deleted").
export function sayNothingOld() {
  if (Date.now() - saidAt > 2000) say("");
}

// columns: [{label, value: row => cell, num?}]; rows: items. `caption` names the table.
export function table(caption, columns, rows, { rowClass, empty = "none" } = {}) {
  if (!rows.length) return h("p", { class: "muted" }, `${caption}: ${empty}`);
  return h("div", { class: "scroll" }, h("table", {},
    h("caption", { class: "muted" }, caption),
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.num ? "num" : null }, c.label)))),
    h("tbody", {}, rows.map((r) => h("tr", { class: rowClass ? rowClass(r) : null },
      columns.map((c) => h("td", { class: c.num ? "num" : null }, c.value(r))))))));
}

export function facts(pairs) {
  return h("dl", { class: "facts" }, pairs.filter(Boolean).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

export function pill(text) {
  return h("span", { class: `pill ${String(text).replace(/[^a-z_]/gi, "")}` }, words(text));
}

export function words(v) { return v === null || v === undefined || v === "" ? "-" : String(v).replaceAll("_", " "); }

export function when(ts) {
  if (!ts) return "-";
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? String(ts) : d.toISOString().replace("T", " ").slice(0, 19) + "Z";
}

export function ago(ts) {
  if (!ts) return "never";
  const s = Math.round((Date.now() - new Date(ts).getTime()) / 1000);
  if (s < 60) return `${Math.max(s, 0)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

export function num(n) { return n === null || n === undefined ? "-" : Number(n).toLocaleString("en"); }

export function value(v) {
  if (v === null || v === undefined) return h("span", { class: "muted" }, "null");
  if (typeof v === "object") return h("pre", { class: "cell" }, JSON.stringify(v));
  return String(v);
}

export function link(href, text) { return h("a", { href }, text); }

// A modal question (Escape or Cancel says no). Resolves to true when confirmed.
export function confirmDialog(title, text, yes = "Confirm", { danger = true, input = null } = {}) {
  return new Promise((resolve) => {
    const field = input ? h("input", { id: "dialog-input", type: "text", value: input.value || "" }) : null;
    const dlg = h("dialog", { "aria-labelledby": "dialog-title" },
      h("h2", { id: "dialog-title" }, title), h("p", {}, text),
      field ? h("label", {}, input.label, field) : null,
      h("div", { class: "bar" },
        h("button", { type: "button", class: "secondary", id: "dialog-no", onclick: () => dlg.close("no") }, "Cancel"),
        h("button", { type: "button", class: danger ? "danger" : null, id: "dialog-yes",
          onclick: () => dlg.close("yes") }, yes)));
    dlg.addEventListener("close", () => {
      const ok = dlg.returnValue === "yes";
      const text = field ? field.value : null;
      dlg.remove();
      resolve(input ? (ok ? text : null) : ok);
    });
    document.body.append(dlg);
    dlg.showModal();
    (field || dlg.querySelector("#dialog-no")).focus();
  });
}

// Run an API call for a button: disable it meanwhile, report errors on the status line.
export async function busy(button, fn) {
  if (button) button.disabled = true;
  try {
    return await fn();
  } finally {
    if (button && button.isConnected) button.disabled = false;
  }
}
