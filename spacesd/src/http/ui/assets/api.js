// Calls of the daemon's /v1 routes from the page. The browser sends the session cookie
// (HttpOnly: this script never sees it); state-changing requests also carry the session's CSRF
// token, which the daemon put in <meta name="csrf-token">.
const csrf = document.querySelector('meta[name="csrf-token"]')?.getAttribute("content") ?? "";

/** A refusal of the daemon: its error code (UNAUTHORIZED, RUN_NOT_FOUND, ...) and message. */
export class ApiError extends Error {
  constructor(code, message, status) {
    super(`${code}: ${message}`);
    this.code = code;
    this.status = status;
  }
}

/** One request; resolves to the JSON answer, rejects with an ApiError. */
export async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") {
    headers["Content-Type"] = "application/json";
    headers["X-CSRF-Token"] = csrf;
  }
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
    cache: "no-store",
  });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    // Not JSON: the status says what happened.
  }
  if (!res.ok) {
    const e = json && json.error;
    throw new ApiError(e?.code ?? `HTTP_${res.status}`, e?.message ?? text, res.status);
  }
  return json;
}

const enc = encodeURIComponent;

/** The /v1 route of a run. */
export function runRoute(space, run) {
  return `/v1/spaces/${enc(space)}/agents/${enc(run)}`;
}

/** The page of a run. */
export function runPage(space, run) {
  return `/ui/spaces/${enc(space)}/runs/${enc(run)}`;
}

/** Ends the session (the cookie is cleared by the answer). */
export function logout() {
  return call("POST", "/ui/logout");
}
