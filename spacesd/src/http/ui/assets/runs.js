// The list page: every Space and its runs (newest first) with their label, prompt, harness and
// status, refreshed every REFRESH_MS; a run's id links to its page.
import { call, runPage } from "./api.js";
import { HARNESS_NAMES } from "./render.js";

const REFRESH_MS = 2000;

function el(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

function age(ms) {
  const s = Math.max(0, Math.floor((Date.now() - ms) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

/** A run's cost for the table: `$0.0123`, `~$0.0123` when estimated, `-` before a turn ended. */
function cost(u) {
  if (!u || !u.turns) return "-";
  return `${u.cost_estimated ? "~" : ""}$${Number(u.cost_usd ?? 0).toFixed(4)}`;
}

function table(space, runs) {
  if (runs.length === 0) return el("p", { className: "meta" }, "No runs yet.");
  const head = el("tr", {}, ...["Run", "Prompt", "Harness", "Status", "Why", "Turns", "Cost", "Started"].map((h) => el("th", { scope: "col" }, h)));
  const rows = runs.map((r) => {
    const link = el("a", { href: runPage(space.name, r.run_id), className: "mono" }, r.run_id);
    const label = r.label ? el("div", { className: "run-label" }, r.label) : "";
    return el(
      "tr",
      { id: `run-${r.run_id}` },
      el("td", {}, label, link),
      el("td", { className: "prompt" }, r.prompt_excerpt ?? ""),
      el("td", {}, HARNESS_NAMES[r.agent] ?? r.agent ?? ""),
      el("td", {}, el("span", { className: `status status-${r.status}` }, r.status)),
      el("td", {}, r.reason ?? ""),
      el("td", {}, String(r.turns ?? "")),
      el("td", { className: "mono" }, cost(r.usage)),
      el("td", {}, r.created_ms ? age(r.created_ms) : ""),
    );
  });
  return el(
    "table",
    {},
    el("caption", { className: "sr-only" }, `Runs of Space ${space.name}, newest first`),
    el("thead", {}, head),
    el("tbody", {}, ...rows),
  );
}

/** Shows the list in `main` and keeps it current until the page is left. */
export async function showRuns(main) {
  document.title = "Spaces: runs";
  const note = el("p", { className: "meta", role: "status" }, "");
  const list = el("div", { id: "spaces" });
  main.replaceChildren(el("h1", {}, "Spaces and their runs"), note, list);
  let shown = "";
  for (;;) {
    try {
      const spaces = await call("GET", "/v1/spaces");
      const all = await Promise.all(spaces.map(async (s) => [s, await call("GET", `/v1/spaces/${encodeURIComponent(s.name)}/agents`)]));
      const key = JSON.stringify(all.map(([s, runs]) => [s, runs.map((r) => [r.run_id, r.status, r.reason, r.turns, r.label, r.prompt_excerpt, r.usage?.cost_usd])]));
      if (key !== shown) {
        shown = key;
        // Focus stays on the link it was on across a redraw.
        const focused = document.activeElement?.closest("tr")?.id;
        const sections = all.map(([s, runs]) =>
          el(
            "section",
            { ariaLabel: `Space ${s.name}` },
            el("h2", {}, `Space ${s.name}`),
            el("p", { className: "meta" }, el("span", { className: "mono" }, s.root), s.read_only ? " · read-only" : "", s.approvals === "confirm" ? " · approvals: confirm" : "", s.network === "none" ? " · network: none" : ""),
            table(s, runs),
          ),
        );
        list.replaceChildren(...(sections.length ? sections : [el("p", {}, "No Spaces registered: add one with `spacesd space add NAME PATH`.")]));
        if (focused) document.getElementById(focused)?.querySelector("a")?.focus();
      }
      note.textContent = `Live: updated every ${REFRESH_MS / 1000} s.`;
      note.classList.remove("error");
    } catch (e) {
      note.textContent = `Cannot list runs: ${e.message}`;
      note.classList.add("error");
    }
    await new Promise((r) => setTimeout(r, REFRESH_MS));
  }
}
