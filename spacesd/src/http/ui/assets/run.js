// A run's page: its status, its transcript streamed over server-sent events (EventSource on the
// agent_events route; the browser reconnects with Last-Event-ID by itself), and its controls:
// a follow-up, interrupt, stop.
import { call, runRoute } from "./api.js";
import { Transcript } from "./render.js";

function el(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

/** Shows run `runId` of `space` in `main`. */
export function showRun(main, space, runId) {
  document.title = `Spaces: ${runId}`;
  const route = runRoute(space, runId);
  const status = el("span", { className: "status", id: "run-status" }, "…");
  const reason = el("span", { className: "meta", id: "run-reason" }, "");
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
    el("div", { className: "row" }, send, el("label", { htmlFor: "force" }, force, " interrupt the running turn first"), interrupt, stop),
    note,
  );
  text.setAttribute("aria-describedby", "follow-up-hint");
  main.replaceChildren(
    el("h1", {}, "Run ", el("span", { className: "mono" }, runId)),
    el("div", { className: "run-head" }, el("span", {}, "Space ", el("strong", {}, space)), el("span", { id: "run-agent" }, ""), el("span", {}, "Status: ", status), reason),
    stream,
    el("h2", { id: "transcript-title" }, "Transcript"),
    list,
    form,
  );
  const transcript = new Transcript(list);

  async function refresh() {
    try {
      const st = await call("GET", `${route}?tail=0`);
      status.textContent = st.status;
      status.className = `status status-${st.status}`;
      reason.textContent = st.reason ?? "";
      document.getElementById("run-agent").textContent = st.agent ? `Agent ${st.agent}` : "";
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
  window.addEventListener("pagehide", () => source.close());
}
