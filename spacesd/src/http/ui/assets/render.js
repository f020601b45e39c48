// The transcript of a run, for people: the agent's answers rendered from Markdown (markdown.js:
// DOM nodes only, never HTML), the user's messages, one foldable line per tool call with its
// latest status (its output behind a <details>), turn boundaries and usage, each under a human
// label ("Agent", "You", "Tool", "Interrupt requested", ...): the event kinds of the API
// (`turn_ended`, `cancel_requested`, ...) stay in data-kind attributes, never in the text.
// Hidden control events are left out (a line the harness could not parse, kind `other`, is
// always shown, folded). The answer of the turn in flight streams in: its pieces
// (`message_delta` events) grow one live entry at the end, which the visible `message` with the whole
// text replaces (as does a tool call or the turn's end).
import { markdown } from "./markdown.js";

/** `tokens in 1200 out 34 (cached 1000) · $0.0123 · 4.2 s`, from either CLI's usage object. */
export function usageLine(u) {
  if (!u || typeof u !== "object") return "no figures reported";
  const n = (k) => (Number.isInteger(u[k]) && u[k] >= 0 ? u[k] : null);
  const parts = [];
  const cached = n("cached_input_tokens") ?? n("cache_read_input_tokens");
  const i = n("input_tokens");
  const o = n("output_tokens");
  if (i !== null && o !== null) parts.push(`tokens in ${i} out ${o}${cached ? ` (cached ${cached})` : ""}`);
  else if (i !== null) parts.push(`tokens in ${i}`);
  else if (o !== null) parts.push(`tokens out ${o}`);
  if (typeof u.total_cost_usd === "number") parts.push(`$${u.total_cost_usd.toFixed(4)}`);
  if (n("duration_ms") !== null) parts.push(`${(u.duration_ms / 1000).toFixed(1)} s`);
  return parts.length ? parts.join(" · ") : "no figures reported";
}

/** The label people read for each event kind of the API (sdk-core's EventKind). */
export const KIND_LABELS = {
  install: "Setup",
  session: "Session",
  turn_started: "Turn started",
  message: "Agent",
  thought: "Thinking",
  user_message: "You",
  tool_call: "Tool",
  tool_update: "Tool",
  plan: "Plan",
  usage: "Usage",
  permission: "Permission",
  notice: "Note",
  cancel_requested: "Interrupt",
  turn_diff: "Changes",
  turn_ended: "Turn ended",
  error: "Error",
  exited: "Agent exited",
  other: "Unrecognized output",
};

/** How a turn ended, in words (`turn_ended.stop_reason`). */
export const STOP_WORDS = {
  end_turn: "finished",
  interrupted: "was interrupted",
  error: "ended with an error",
  max_turns: "stopped at the turn limit",
  crashed: "ended: the agent crashed",
  stopped: "ended: the run was stopped",
};

/** A tool call's state in words (`tool_status`). */
export const TOOL_WORDS = { pending: "waiting", in_progress: "running", completed: "done", failed: "failed" };

/** The product names of the harnesses (`agent`). */
export const HARNESS_NAMES = {
  "claude-code": "Claude Code",
  "openai-codex": "Codex CLI",
  "openai-codex-exec": "Codex CLI (exec)",
  // The app-server's id before it became `openai-codex` (runs stored then).
  "openai-codex-app-server": "Codex CLI",
  "opencode": "opencode",
  "gemini-cli": "Gemini CLI",
};

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** A text in a folded <details> whose summary says what it is and how long. */
function folded(what, text, cls = "fold") {
  const lines = text.replace(/\n+$/, "").split("\n").length;
  const details = el("details", cls);
  details.append(el("summary", null, `${what} (${lines} line${lines === 1 ? "" : "s"})`), el("pre", null, text));
  return details;
}

/** `who` (the label) and the entry's body. */
function labelled(li, who, body) {
  li.append(el("span", "who", who), body);
}

/** The list item of one event, or null for an event the view leaves out. */
function entry(e) {
  if (e.category === "hidden" && e.kind !== "other") return null;
  const li = el("li", `e-${e.kind}`);
  li.dataset.seq = String(e.seq);
  li.dataset.kind = e.kind;
  li.dataset.turn = String(e.turn);
  const words = e.summary ?? e.text ?? "";
  switch (e.kind) {
    case "turn_started":
      li.className = "e-turn";
      li.textContent = `Turn ${e.turn}`;
      break;
    case "turn_ended": {
      li.className = "e-turn";
      if (e.stop_reason) li.dataset.stop = e.stop_reason;
      if (e.stop_reason && e.stop_reason !== "end_turn") li.classList.add("e-turn-stopped");
      const why = (e.stop_reason === "error" || e.stop_reason === "crashed") && e.text ? `: ${e.text.split("\n")[0]}` : "";
      li.textContent = `Turn ${e.turn} ${STOP_WORDS[e.stop_reason] ?? "ended"}${why}`;
      break;
    }
    case "message":
      labelled(li, KIND_LABELS.message, markdown(e.text ?? e.summary ?? ""));
      break;
    case "user_message":
      labelled(li, KIND_LABELS.user_message, el("div", "body plain", e.text ?? e.summary ?? ""));
      break;
    case "thought":
      labelled(li, KIND_LABELS.thought, el("div", "body plain", e.text ?? e.summary ?? ""));
      break;
    case "plan":
      labelled(li, KIND_LABELS.plan, el("div", "body plain", e.text ?? e.summary ?? ""));
      break;
    case "usage":
      labelled(li, KIND_LABELS.usage, el("div", "body", e.usage ? usageLine(e.usage) : words));
      break;
    case "turn_diff": {
      // The turn's changed files, folded: the summary line counts them.
      const files = e.files ?? [];
      const letter = { added: "A", changed: "M", removed: "D" };
      const details = el("details", "fold body diff-fold");
      details.append(el("summary", null, words || "no file changed"));
      const list = el("ul", "diff-files");
      for (const f of files) {
        const lines = f.binary ? "binary" : `+${f.added_lines} -${f.removed_lines}`;
        const item = el("li", `diff-${f.change}`, `${letter[f.change] ?? "?"} ${f.path} (${lines})`);
        list.append(item);
      }
      details.append(list);
      labelled(li, KIND_LABELS.turn_diff, files.length ? details : el("div", "body", words || "no file changed"));
      break;
    }
    case "cancel_requested":
      labelled(li, KIND_LABELS.cancel_requested, el("div", "body", "Interrupt requested"));
      break;
    case "tool_call":
    case "tool_update": {
      const state = e.tool_status ?? "pending";
      li.className = `e-tool ${state}`;
      const head = el("span", "tool-head");
      const title = e.tool_title ?? e.summary ?? "a tool";
      head.append(el("span", `tool-status ${state}`, TOOL_WORDS[state] ?? state), document.createTextNode(` ${title}`));
      if (state === "failed" && e.summary && e.summary !== title) head.append(el("span", "tool-why", ` — ${e.summary}`));
      const done = state === "completed" || state === "failed";
      if (done && e.text && e.text.trim()) {
        // The whole line folds: its summary is the tool's title and state, its body the output.
        const lines = e.text.replace(/\n+$/, "").split("\n").length;
        const details = el("details", "fold tool-fold");
        const summary = el("summary");
        head.append(el("span", "tool-lines", ` · output, ${lines} line${lines === 1 ? "" : "s"}`));
        summary.append(el("span", "who", KIND_LABELS.tool_call), head);
        details.append(summary, el("pre", null, e.text));
        li.append(details);
      } else {
        labelled(li, KIND_LABELS.tool_call, head);
      }
      break;
    }
    case "other":
      labelled(li, KIND_LABELS.other, folded("A line the harness could not read", e.text ?? e.summary ?? "", "fold body"));
      break;
    default:
      labelled(li, KIND_LABELS[e.kind] ?? "Event", el("div", "body plain", words));
  }
  return li;
}

/** A transcript in an <ol>: events in order, each once; a tool call's line replaced by its updates. */
export class Transcript {
  constructor(list) {
    this.list = list;
    this.tools = new Map();
    this.cursor = 0;
    /** The live entry of the answer streaming in, or null; its text so far. */
    this.live = null;
    this.liveText = "";
  }

  /** Adds `e` (events at or below the cursor were shown already). */
  add(e) {
    if (e.seq <= this.cursor) return;
    this.cursor = e.seq;
    const stick = this.list.scrollTop + this.list.clientHeight >= this.list.scrollHeight - 8;
    // Pieces: `message_delta`, or a hidden `message` stored by a daemon from before that kind.
    if (e.kind === "message_delta" || (e.kind === "message" && e.category === "hidden")) {
      this.grow(e);
      if (stick) this.list.scrollTop = this.list.scrollHeight;
      return;
    }
    if (this.live && ["message", "tool_call", "turn_started", "turn_ended", "exited"].includes(e.kind)) {
      this.live.remove();
      this.live = null;
    }
    const li = entry(e);
    if (!li) return;
    const tool = (e.kind === "tool_call" || e.kind === "tool_update") && e.tool_id ? e.tool_id : null;
    const old = tool ? this.tools.get(tool) : null;
    if (old) {
      // Keep an opened disclosure open across updates.
      const open = old.querySelector("details")?.open;
      old.replaceWith(li);
      if (open && li.querySelector("details")) li.querySelector("details").open = true;
    } else {
      this.list.append(li);
    }
    if (tool) this.tools.set(tool, li);
    if (this.live) this.list.append(this.live);
    if (stick) this.list.scrollTop = this.list.scrollHeight;
  }

  /** Appends the piece `e.text` to the live entry of turn `e.turn` (a new one for a new turn). */
  grow(e) {
    if (this.live && this.live.dataset.turn !== String(e.turn)) {
      this.live.remove();
      this.live = null;
    }
    if (!this.live) {
      // Busy while it grows: screen readers announce the whole message that replaces it
      // rather than every piece.
      this.live = el("li", "e-message e-live");
      this.live.dataset.live = "streaming";
      this.live.dataset.turn = String(e.turn);
      this.live.setAttribute("aria-busy", "true");
      this.liveText = "";
      this.live.append(el("span", "who", `${KIND_LABELS.message} (writing…)`), el("div", "body"));
      this.list.append(this.live);
    }
    this.liveText += e.text ?? "";
    this.live.lastChild.replaceChildren(markdown(this.liveText));
  }
}
