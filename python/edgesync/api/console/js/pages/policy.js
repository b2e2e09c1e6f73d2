// The project's edge policy: every field with its effective value; Save sends the changed
// fields only (PATCH), and the API's 422 names the field, marked here next to its input.

import { ApiError, api, get } from "../api.js";
import { busy, clear, h, link, say } from "../ui.js";

const FIELDS = [
  ["allow_additive_continue", "bool", "Auto-approve a schema that only adds nullable columns"],
  ["max_pending_rows_per_lineage", "int", "Staged rows before backpressure pauses the device"],
  ["max_pending_bytes_per_lineage", "bytes", "Staged bytes before backpressure"],
  ["resume_threshold_percent", "int", "Resume below this share of both caps (1–99)"],
  ["materialization_breaker_threshold", "int", "Permanent materialization errors before the lineage pauses"],
  ["schema_coalescing_mode", ["none", "project", "fleet"], "Who decides a new schema: each device, the project or the fleet"],
  ["allow_auto_create_device_data_points", "bool", "Allow the column action auto_create_and_map"],
  ["verify_interval_seconds", "seconds", "Verify every approved state lineage this often (0: never)"],
];

// A number of bytes or seconds as a person reads it (1073741824 said nothing).
const UNITS = {
  bytes: [[1 << 30, "GiB"], [1 << 20, "MiB"], [1 << 10, "KiB"], [1, "bytes"]],
  seconds: [[86400, "days"], [3600, "hours"], [60, "minutes"], [1, "seconds"]],
};
function inUnits(kind, n) {
  if (!UNITS[kind] || n === null || Number.isNaN(n)) return "";
  if (kind === "seconds" && n === 0) return "= never";
  const [size, unit] = UNITS[kind].find(([size]) => n >= size) || UNITS[kind][UNITS[kind].length - 1];
  const v = n / size;
  return `= ${Number.isInteger(v) ? v : v.toFixed(1)} ${unit}`;
}

export async function render(main) {
  const { data: policy } = await get("/edge/policy");
  const inputs = {};
  const errors = {};
  const rows = FIELDS.map(([name, kind, help]) => {
    const id = `policy-${name}`;
    let input;
    if (kind === "bool") input = h("input", { type: "checkbox", id, checked: policy[name] });
    else if (kind !== "bool" && !Array.isArray(kind)) input = h("input", { type: "number", id, value: String(policy[name]), step: "1" });
    else input = h("select", { id }, kind.map((v) => h("option", { value: v, selected: v === policy[name] }, v)));
    inputs[name] = input;
    errors[name] = h("span", { class: "error-text", id: `${id}-error` });
    const unit = h("span", { class: "muted", id: `${id}-unit` }, inUnits(kind, policy[name]));
    if (UNITS[kind]) input.addEventListener("input", () => { unit.textContent = inUnits(kind, Number(input.value)); });
    input.setAttribute("aria-describedby", `${id}-help ${id}-unit ${id}-error`);
    return h("div", { class: "field" },
      h("label", { class: kind === "bool" ? "inline" : null, for: id }, kind === "bool" ? input : null, h("code", {}, name), kind === "bool" ? null : input),
      unit, h("div", { class: "muted", id: `${id}-help` }, help), errors[name]);
  });
  const read = (name, kind) => {
    const el = inputs[name];
    if (kind === "bool") return el.checked;
    if (Array.isArray(kind)) return el.value;
    return el.value.trim() === "" ? null : Number(el.value);
  };
  const general = h("p", { class: "error-text", role: "alert", id: "policy-error" });
  const form = h("form", { id: "policy-form" }, rows, general,
    h("div", { class: "bar" }, h("button", { type: "submit", id: "policy-save" }, "Save")));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const patch = {};
    for (const [name, kind] of FIELDS) if (read(name, kind) !== policy[name]) patch[name] = read(name, kind);
    for (const [name] of FIELDS) { errors[name].textContent = ""; inputs[name].removeAttribute("aria-invalid"); }
    general.textContent = "";
    if (!Object.keys(patch).length) { say("nothing changed"); return; }
    busy(form.querySelector("button"), async () => {
      try {
        await api("PATCH", "/edge/policy", patch);
        say(`policy saved: ${Object.keys(patch).join(", ")}`);
        window.dispatchEvent(new Event("console:reload"));
      } catch (e) {
        if (!(e instanceof ApiError)) throw e;
        const field = (e.field || "").split(".")[0];
        if (errors[field]) {
          errors[field].textContent = e.message;
          inputs[field].setAttribute("aria-invalid", "true");
          inputs[field].focus();
        } else general.textContent = e.text;
        say(e.text, true);
      }
    });
  });
  clear(main, h("h1", {}, "Project policy"),
    h("p", { class: "muted", id: "policy-about" }, "How the cloud treats what every device of the project sends: "
      + "reviews, backpressure, the breaker. What a device captures and sends is its ", link("#/sync-policies", "sync policy"),
      ". Effective values (defaults filled in); docs/governance.md explains each."), form);
}
