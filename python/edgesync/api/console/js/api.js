// The HTTP API as the console uses it: the session (token, organization, project) kept in
// this tab's sessionStorage, one request helper adding the headers docs/api.md asks for,
// and errors as ApiError carrying the envelope's stable code and field.

import { ApiErrorCode } from "./vocabulary.js";
const KEY = "edgesync.console.session";

export function session() {
  try {
    const s = JSON.parse(sessionStorage.getItem(KEY) || "null");
    return s && s.token && s.org && s.project ? s : null;
  } catch {
    return null;
  }
}

export function saveSession(s) { sessionStorage.setItem(KEY, JSON.stringify(s)); }
export function clearSession() { sessionStorage.removeItem(KEY); }

export class ApiError extends Error {
  constructor(status, code, message, field, refusals) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field || null;
    this.refusals = refusals || []; // a refused approval's columns (docs/api.md, Refusals)
  }
  get text() {
    return `${this.code}: ${this.message}${this.field ? ` (field ${this.field})` : ""}`;
  }
}

// An Idempotency-Key per mutation; getRandomValues also works outside secure contexts.
function newKey() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return "console-" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

export function projectPath(path, s = session()) {
  return `/core/api/v1/projects/${encodeURIComponent(s.project)}${path}`;
}

// method, a path relative to the project, an optional JSON body. Resolves to the envelope.
export function api(method, path, body, s = session()) {
  return send(method, path, body === undefined ? undefined : JSON.stringify(body),
    "application/json", s);
}

// The bytes of a file as the request body (the sample database of a sync policy).
export function postBytes(path, bytes, s = session()) {
  return send("POST", path, bytes, "application/octet-stream", s);
}

// Read-only POSTs: they change nothing and take no Idempotency-Key.
const READ_ONLY = ["/preview", "/introspect"];

async function send(method, path, body, type, s) {
  if (!s) throw new ApiError(401, ApiErrorCode.UNAUTHENTICATED, "not logged in");
  const headers = { Authorization: `Bearer ${s.token}`, "ORG-ID": s.org, Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = type;
  if (method !== "GET" && !READ_ONLY.some((end) => path.endsWith(end))) headers["Idempotency-Key"] = newKey();
  let res;
  try {
    // "/core/…" is a path of its own (the project list); the rest is the project's.
    const url = path.startsWith("/core/") ? path : projectPath(path, s);
    res = await fetch(url, { method, headers, body });
  } catch (e) {
    // The console's own code (the CLI's is CONNECTION_FAILED), shown in the message.
    throw new ApiError(0, "NETWORK", `the server did not answer (${e.message})`);
  }
  let doc = null;
  try { doc = await res.json(); } catch { doc = null; }
  if (!res.ok) {
    const e = (doc && doc.error) || {};
    throw new ApiError(res.status, e.code || `HTTP_${res.status}`, e.message || res.statusText, e.field, e.refusals);
  }
  return doc;
}

export const get = (path) => api("GET", path);
export const post = (path, body = {}) => api("POST", path, body);

// Every item of a paginated list, up to `max` (pages of 500).
export async function all(path, max = 5000) {
  const sep = path.includes("?") ? "&" : "?";
  const out = [];
  for (let page = 1; out.length < max; page++) {
    const doc = await get(`${path}${sep}page=${page}&limit=500`);
    out.push(...doc.data);
    if (!doc.data.length || out.length >= doc.meta.total) break;
  }
  return out;
}

// The project a login names by its id, name or topic slug, as the CLI and the TUI take it:
// { id, name }, or an ApiError saying there is none, or several (with their ids).
export async function findProject(ref, s) {
  const doc = await send("GET", "/core/api/v1/projects?limit=200", undefined, undefined,
    { ...s, project: "-" });
  const found = doc.data.filter((p) => [p.id, p.name, p.topic_slug].includes(ref));
  if (found.length === 1) return found[0];
  if (found.length > 1) {
    throw new ApiError(409, ApiErrorCode.PROJECT_AMBIGUOUS, `"${ref}" names several projects: `
      + found.map((p) => `${p.id} (${p.name})`).join(", ") + "; give the project's ID");
  }
  const known = doc.data.map((p) => p.name).join(", ");
  throw new ApiError(404, ApiErrorCode.PROJECT_NOT_FOUND, `no project "${ref}" (by ID, name or topic `
    + `slug) for this token${known ? `; there are: ${known}` : ""}`);
}
