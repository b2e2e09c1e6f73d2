// The console's shell: login, navigation (hash routes, so every page has an address and
// the browser's back button works), and one page rendered into <main> at a time.

import { ApiError, api, clearSession, findProject, saveSession, session } from "./api.js";
import { clear, h, say, sayNothingOld } from "./ui.js";
import { ApiErrorCode } from "./vocabulary.js";

const PAGES = [
  [/^\/overview$/, () => import("./pages/overview.js"), "overview"],
  [/^\/lineages$/, () => import("./pages/lineages.js"), "lineages"],
  [/^\/lineages\/([0-9a-f-]{36})$/, () => import("./pages/lineage.js"), "lineages"],
  [/^\/reviews$/, () => import("./pages/reviews.js"), "reviews"],
  [/^\/reviews\/(schema|registry)\/([0-9a-f-]{36})$/, () => import("./pages/review.js"), "reviews"],
  [/^\/devices$/, () => import("./pages/devices.js"), "devices"],
  [/^\/devices\/([0-9a-f-]{36})$/, () => import("./pages/device.js"), "devices"],
  [/^\/sync-policies$/, () => import("./pages/sync-policies.js"), "sync-policies"],
  [/^\/sync-policies\/([0-9a-f-]{36})$/, () => import("./pages/sync-policy.js"), "sync-policies"],
  [/^\/policy$/, () => import("./pages/policy.js"), "policy"],
];

const main = document.getElementById("main");
let cleanup = null;
let generation = 0;

function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/overview";
  const [path, query = ""] = raw.split("?");
  return { path, query: new URLSearchParams(query) };
}

function showLogin(message) {
  document.getElementById("nav").hidden = true;
  document.getElementById("logout").hidden = true;
  document.getElementById("who").textContent = "";
  const prefill = new URLSearchParams(location.search);
  const error = h("p", { id: "login-error", class: "error-text", role: "alert" }, message || "");
  const form = h("form", { class: "login", id: "login", "aria-describedby": "login-help" },
    h("h1", {}, "Log in"),
    h("p", { id: "login-help", class: "muted" },
      "An API token (edgesync admin bootstrap or admin token create prints one), the ",
      "organization and project it acts in. The token stays in this browser tab only."),
    h("label", {}, "API token", h("input", { name: "token", id: "login-token", type: "password",
      autocomplete: "off", required: true })),
    h("label", {}, "Organization ID (ORG-ID)", h("input", { name: "org", id: "login-org",
      required: true, value: prefill.get("org") || "" })),
    h("label", {}, "Project (ID, name or topic slug)", h("input", { name: "project",
      id: "login-project", required: true, value: prefill.get("project") || "" })),
    error,
    h("button", { type: "submit", id: "login-submit" }, "Log in"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const data = new FormData(form);
    const s = { token: String(data.get("token")).trim(), org: String(data.get("org")).trim(),
                project: String(data.get("project")).trim() };
    error.textContent = "";
    try {
      const project = await findProject(s.project, s); // checks the token and the org too
      s.project = project.id;
      s.projectName = project.name;
      await api("GET", "/edge/policy", undefined, s); // any read of the project
    } catch (e) {
      error.textContent = e instanceof ApiError ? loginProblem(e) : String(e);
      return;
    }
    saveSession(s);
    say("logged in");
    if (!location.hash || location.hash === "#/login") location.hash = "#/overview";
    route();
  });
  clear(main, form);
  form.querySelector("input").focus();
}

function loginProblem(e) {
  if (e.status === 401) return "The token is unknown, expired or revoked.";
  if (e.code === ApiErrorCode.ORG_MISMATCH) return e.text; // names the token's own organization
  if (e.code === ApiErrorCode.PROJECT_NOT_FOUND || e.code === ApiErrorCode.PROJECT_AMBIGUOUS) return e.message;
  if (e.status === 404) return "No such project in that organization for this token.";
  if (e.code === ApiErrorCode.INVALID_ORG_ID) return "The organization ID must be a UUID.";
  return e.text;
}

async function route(ev) {
  const live = ev && ev.detail && ev.detail.live; // an event's refresh keeps the focus
  if (ev && ev.type === "hashchange") sayNothingOld();
  if (cleanup) { cleanup(); cleanup = null; }
  const mine = ++generation; // a page still loading or polling sees it is stale
  const s = session();
  if (!s) { showLogin(); return; }
  document.getElementById("nav").hidden = false;
  document.getElementById("logout").hidden = false;
  document.getElementById("who").textContent =
    `project ${s.projectName || `${s.project.slice(0, 8)}…`}`;
  const { path, query } = parseHash();
  const found = PAGES.map(([re, load, tab]) => [path.match(re), load, tab]).find(([m]) => m);
  if (!found) { location.hash = "#/overview"; return; }
  const [match, load, tab] = found;
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.getAttribute("href") === `#/${tab}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  clear(main, h("p", { class: "muted" }, "Loading…"));
  try {
    const page = await load();
    if (mine !== generation) return;
    const done = await page.render(main, { args: match.slice(1), query, stale: () => mine !== generation });
    if (mine !== generation) { if (done) done(); return; }
    cleanup = done || null;
    const heading = main.querySelector("h1");
    if (heading && (!live || !main.contains(document.activeElement))) {
      heading.tabIndex = -1;
      heading.focus();
    }
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      clearSession();
      showLogin("The session ended (token expired or revoked): log in again.");
      return;
    }
    clear(main, h("h1", {}, "Could not load this page"), h("p", { class: "alert", role: "alert" },
      e instanceof ApiError ? e.text : String(e)));
    say(e instanceof ApiError ? e.text : String(e), true);
  }
}

document.getElementById("logout").addEventListener("click", () => {
  clearSession();
  location.hash = "";
  say("logged out");
  route();
});
window.addEventListener("hashchange", route);
// A page re-renders itself through this (after a decision, or Reload).
window.addEventListener("console:reload", route);
route();
