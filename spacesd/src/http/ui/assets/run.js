// A run's page: a header of what people ask first (the run's label, its prompt, the harness and
// model, tokens and cost, how long it has run), its transcript streamed over server-sent events
// (EventSource on the agent_events route; the browser reconnects with Last-Event-ID by itself),
// and its controls: a follow-up, interrupt, stop.
import { call, runRoute } from "./api.js";
import { HARNESS_NAMES, Transcript } from "./render.js";

function el(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

/** `1 min 5 s` for `ms` milliseconds. */
export function duration(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/** What a run spent, in words, from the daemon's usage ledger (`usage` of its status: the
 * same totals as `agent usage`, the HTTP API, MCP and the SDKs): tokens in (cached), out,
 * cost (`~` when estimated from the price table), tool calls; `null` before a turn ended. */
export function usageText(u) {
  if (!u || !u.turns) return null;
  const n = (v) => Number(v ?? 0).toLocaleString("en");
  const cached = u.cached_input_tokens ? ` (${n(u.cached_input_tokens)} cached)` : "";
  const parts = [`${n(u.input_tokens)} tokens in${cached}`, `${n(u.output_tokens)} out`];
  const unknown = u.cost_unknown_turns ? ` + ${u.cost_unknown_turns} turn(s) of unknown cost` : "";
  parts.push(`${u.cost_estimated ? "~" : ""}$${Number(u.cost_usd ?? 0).toFixed(4)}${unknown}`);
  if (u.tool_calls) parts.push(`${n(u.tool_calls)} tool call${u.tool_calls === 1 ? "" : "s"}`);
  return parts.join(" · ");
}

/** A budget in words: `$0.5 · 100,000 tokens · 10 turns`, or `none`. */
export function budgetText(b) {
  if (!b) return "none";
  const parts = [];
  if (b.usd != null) parts.push(`$${b.usd}`);
  if (b.tokens != null) parts.push(`${Number(b.tokens).toLocaleString("en")} tokens`);
  if (b.turns != null) parts.push(`${b.turns} turns`);
  return parts.join(" · ") || "none";
}

/** Shows run `runId` of `space` in `main`. */
export function showRun(main, space, runId) {
  document.title = `Spaces: ${runId}`;
  const route = runRoute(space, runId);
  const title = el("h1", { id: "run-title" }, "Run ", el("span", { className: "mono" }, runId));
  const status = el("span", { className: "status", id: "run-status" }, "…");
  const reason = el("span", { className: "meta", id: "run-reason" }, "");
  const fact = (name, id, ...value) => [el("dt", {}, name), el("dd", { id }, ...value)];
  const harness = el("span", {}, "…");
  const facts = el(
    "dl",
    { className: "run-facts", id: "run-facts" },
    ...fact("Status", "run-state", status, " ", reason),
    ...fact("Prompt", "run-prompt", "…"),
    ...fact("Harness", "run-harness", harness),
    ...fact("Model", "run-model", "not reported"),
    ...fact("Usage", "run-usage", "no turn has ended yet"),
    ...fact("Budget", "run-budget", "none"),
    ...fact("Duration", "run-duration", "…"),
    ...fact("Space", "run-space", space),
    ...fact("Run", "run-id", el("span", { className: "mono" }, runId)),
  );
  const list = el("ol", { className: "transcript", id: "transcript", role: "log", ariaLive: "polite", ariaLabel: "Transcript", tabIndex: 0 });
  const stream = el("p", { className: "meta", id: "stream-state", role: "status" }, "Connecting…");
  const text = el("textarea", { id: "follow-up", name: "text", rows: 3, required: true });
  const force = el("input", { type: "checkbox", id: "force", name: "force" });
  const send = el("button", { type: "submit", id: "send" }, "Send follow-up");
  const interrupt = el("button", { type: "button", id: "interrupt", className: "quiet" }, "Interrupt turn");
  const stop = el("button", { type: "button", id: "stop", className: "danger" }, "Stop run");
  const note = el("p", { className: "note", id: "action-note", role: "status", ariaLive: "polite" }, "");
  const form = el(
    "form",
    { className: "controls", id: "controls" },
    el("label", { htmlFor: "follow-up" }, "Follow-up message"),
    text,
    el("p", { className: "hint", id: "follow-up-hint" }, "Enter sends; Shift+Enter starts a new line. Mid-turn, a message waits for the turn to end unless forced."),
    el("div", { className: "row" }, send, el("label", { htmlFor: "force" }, force, " don't wait for the running turn (steer it, or interrupt it first)"), interrupt, stop),
    note,
  );
  text.setAttribute("aria-describedby", "follow-up-hint");
  main.replaceChildren(
    title,
    facts,
    stream,
    el("h2", { id: "transcript-title" }, "Transcript"),
    list,
    form,
  );
  const transcript = new Transcript(list);
  // What the header knows beyond the status: the model (from the harness's session event),
  // the usage reports, the time of the last event.
  const seen = { created: null, running: false, last: null, usage: null, agent: null };

  function showUsage() {
    facts.querySelector("#run-usage").textContent = usageText(seen.usage) ?? "no turn has ended yet";
  }

  // The header's facts are this page's own nodes (not looked up in the document): after a
  // logout or another page replaced this one, a late event or tick changes nothing visible.
  function showDuration() {
    if (!facts.isConnected) {
      clearInterval(ticking);
      return;
    }
    if (seen.created === null) return;
    const end = seen.running ? Date.now() : Math.max(seen.last ?? seen.created, seen.created);
    facts.querySelector("#run-duration").textContent = `${duration(end - seen.created)}${seen.running ? " so far" : ""}`;
  }
  const ticking = setInterval(showDuration, 1000);

  /** The header's share of event `e`. */
  function noteEvent(e) {
    seen.last = Math.max(seen.last ?? 0, e.ts_ms ?? 0);
    if (e.kind === "session") {
      const model = (e.text ?? e.summary ?? "").match(/\bmodel ([^\s,]+)/);
      if (model && model[1] !== "?") facts.querySelector("#run-model").textContent = model[1];
    } else if (e.kind === "turn_ended") {
      // The ledger counts the turn at its end: read the totals again.
      refresh();
    } else if (e.kind === "user_message" && e.turn === 1 && e.text) {
      facts.querySelector("#run-prompt").title = e.text;
    }
  }

  async function refresh() {
    try {
      const st = await call("GET", `${route}?tail=0`);
      status.textContent = st.status;
      status.className = `status status-${st.status}`;
      reason.textContent = st.reason ?? "";
      if (st.label) {
        title.replaceChildren(st.label);
        document.title = `Spaces: ${st.label}`;
      }
      facts.querySelector("#run-prompt").textContent = st.prompt_excerpt ?? "(not recorded)";
      harness.textContent = st.agent ? `${HARNESS_NAMES[st.agent] ?? st.agent}` : "unknown";
      harness.title = st.agent ?? "";
      seen.agent = st.agent ?? null;
      seen.created = st.created_ms ?? null;
      seen.running = st.status === "running";
      seen.usage = st.usage ?? null;
      facts.querySelector("#run-budget").textContent = budgetText(st.budget);
      showUsage();
      showDuration();
      const ended = st.status === "stopped" || st.status === "done";
      send.disabled = ended;
      stop.disabled = st.status === "stopped";
      interrupt.disabled = st.status !== "running";
    } catch (e) {
      reason.textContent = `Cannot read the status: ${e.message}`;
    }
  }

  async function act(what, path, body) {
    note.textContent = `${what}…`;
    try {
      const r = await call("POST", `${route}/${path}`, body ?? {});
      note.textContent = `${what}: ${r.reason}`;
      return r;
    } catch (e) {
      note.textContent = `${what} refused: ${e.message}`;
      return null;
    } finally {
      refresh();
    }
  }

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const message = text.value.trim();
    if (!message) return;
    const r = await act("Follow-up", "message", force.checked ? { text: message, force: true } : { text: message });
    if (r) text.value = "";
    text.focus();
  });
  text.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
  interrupt.addEventListener("click", () => act("Interrupt", "interrupt"));
  stop.addEventListener("click", () => act("Stop", "stop"));

  refresh();
  const source = new EventSource(`${route}/events?until=stopped`);
  source.onopen = () => {
    stream.textContent = "Live: following the run's events.";
  };
  source.onmessage = (m) => {
    const e = JSON.parse(m.data);
    noteEvent(e);
    transcript.add(e);
    if (e.kind === "turn_started" || e.kind === "turn_ended" || e.kind === "exited") refresh();
  };
  source.addEventListener("end", (m) => {
    source.close();
    const end = JSON.parse(m.data);
    stream.textContent = `The run has ended (${end.status}); the transcript is complete.`;
    refresh();
  });
  source.addEventListener("error", (m) => {
    if (m.data) {
      source.close();
      stream.textContent = `The event stream failed: ${m.data}`;
    } else if (source.readyState === EventSource.CLOSED) {
      stream.textContent = "The event stream was refused: the run is unknown (see its status above) or the session ended (`spacesd ui` prints a new login link).";
      refresh();
    } else {
      stream.textContent = "Reconnecting…";
    }
  });
  window.addEventListener("pagehide", () => {
    source.close();
    clearInterval(ticking);
  });
}
