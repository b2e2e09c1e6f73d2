// Sync policies: the project's table_strategies for agents (docs/agent.md, "Remote sync
// policy"), and a new one made from a sample SQLite database: the file is sent to
// POST …/sync-policies/introspect (the server reads it, stores nothing), its tables come
// back with a suggested strategy each, the operator adjusts them, Create saves.

import { ApiError, all, post, postBytes } from "../api.js";
import { strategyEditor, summary } from "../strategies.js";
import { busy, clear, h, link, num, say, table, when } from "../ui.js";

const MAX_SAMPLE = 64 * 1024 * 1024; // the server's limit too (syncpolicy/_introspect.py)

export async function render(main) {
  const policies = await all("/edge/sync-policies");
  clear(main, h("h1", {}, "Sync policies"),
    h("p", { class: "muted" }, "A sync policy is the cloud's table_strategies for the devices it is attached to "
      + "(directly or through their fleet). A running agent applies a change without a restart only where its YAML "
      + "opts in (sqlite-replication.remote_policy: true, as bundles write it); otherwise its local YAML wins. "
      + "How the cloud treats what devices send (reviews, backpressure, the breaker) is the project's ",
      link("#/policy", "Policy"), "."),
    table("Sync policies", [
      { label: "name", value: (p) => link(`#/sync-policies/${p.id}`, p.name) },
      { label: "version", num: true, value: (p) => num(p.version) },
      { label: "tables", value: (p) => summary(p.table_strategies) },
      { label: "description", value: (p) => p.description || "-" },
      { label: "updated", value: (p) => when(p.updated_at) },
    ], policies, { empty: "none yet" }),
    h("h2", { id: "new-policy-title" }, "New sync policy from a sample database"),
    newPolicyForm());
}

function newPolicyForm() {
  const name = h("input", { id: "new-policy-name", name: "name", required: true, maxlength: "200",
    "aria-describedby": "new-policy-error" });
  const description = h("input", { id: "new-policy-description", name: "description", maxlength: "2000" });
  const file = h("input", { id: "sample-file", name: "sample", type: "file",
    accept: ".db,.sqlite,.sqlite3,application/vnd.sqlite3,application/x-sqlite3",
    "aria-describedby": "sample-help sample-error" });
  const fileError = h("p", { id: "sample-error", class: "error-text", role: "alert" });
  const error = h("p", { id: "new-policy-error", class: "error-text", role: "alert" });
  const editorBox = h("div", { id: "new-strategies" });
  const create = h("button", { type: "submit", id: "create-policy", disabled: true }, "Create policy");
  let picked = null; // {editor, sample_tables}

  file.addEventListener("change", () => busy(file, async () => {
    fileError.textContent = "";
    file.removeAttribute("aria-invalid");
    picked = null;
    create.disabled = true;
    clear(editorBox);
    const f = file.files && file.files[0];
    if (!f) return;
    if (f.size > MAX_SAMPLE) {
      bad(`${f.name} is ${num(f.size)} bytes: a sample database may be at most 64 MiB (an empty copy of the schema is enough)`);
      return;
    }
    say(`reading the tables of ${f.name}…`);
    try {
      const { data } = await postBytes("/edge/sync-policies/introspect", await f.arrayBuffer());
      if (!data.tables.length) { bad(`${f.name} has no tables`); return; }
      const editor = strategyEditor(data.tables, data.table_strategies);
      picked = { editor, sample_tables: data.sample_tables };
      clear(editorBox, h("p", { id: "sample-tables", class: "muted" },
        `${data.tables.length} table(s) in ${f.name}: each with the suggested strategy, to change as needed.`),
        editor.element);
      create.disabled = false;
      say(`${f.name}: ${data.tables.length} table(s) read`);
    } catch (e) {
      bad(e instanceof ApiError ? e.message : String(e));
    }
  }));

  function bad(text) {
    fileError.textContent = text;
    file.setAttribute("aria-invalid", "true");
    say(text, true);
  }

  const form = h("form", { id: "new-policy", "aria-labelledby": "new-policy-title" },
    h("div", { class: "bar" },
      h("label", {}, "Name", name), h("label", {}, "Description (optional)", description)),
    h("div", { class: "field" },
      h("label", {}, "Sample SQLite database (.db)", file),
      h("div", { class: "muted", id: "sample-help" },
        "A copy of the application's database (an empty one with the schema is enough, at most 64 MiB): "
        + "the server reads its tables and columns and keeps nothing."),
      fileError),
    editorBox, error,
    h("div", { class: "bar" }, create));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (!picked) return;
    busy(create, async () => {
      error.textContent = "";
      name.removeAttribute("aria-invalid");
      try {
        const { data } = await post("/edge/sync-policies", {
          name: name.value.trim(), description: description.value.trim(),
          table_strategies: picked.editor.read(), sample_tables: picked.sample_tables });
        say(`sync policy ${data.name} created: attach it to devices or fleets`);
        location.hash = `#/sync-policies/${data.id}`;
      } catch (e) {
        if (!(e instanceof ApiError)) throw e;
        error.textContent = e.text;
        if (e.field === "name") { name.setAttribute("aria-invalid", "true"); name.focus(); }
        say(e.text, true);
      }
    });
  });
  return form;
}
