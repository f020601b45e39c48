// The transcript of a run, as `spacesd agent attach` shows it: assistant text, the user's
// messages, one line per tool call with its latest status (finished: its output behind a
// disclosure), turn boundaries and usage. Hidden control events are left out (a line the
// harness could not parse, kind `other`, is always shown). The answer of the turn in flight
// streams in: its pieces (hidden `message` events) grow one live line at the end, which the
// visible `message` with the whole text replaces (as does a tool call or the turn's end). Text
// goes in as text, never HTML.

/** `tokens in 1200 out 34 (cached 1000) · $0.0123 · 4.2 s`, from either CLI's usage object. */
export function usageLine(u) {
  if (!u || typeof u !== "object") return "usage";
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
  return parts.length ? parts.join(" · ") : "usage";
}

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** The list item of one event, or null for an event the view leaves out. */
function entry(e) {
  if (e.category === "hidden" && e.kind !== "other") return null;
  const li = el("li", `e-${e.kind}`);
  li.dataset.seq = String(e.seq);
  li.dataset.kind = e.kind;
  li.dataset.turn = String(e.turn);
  switch (e.kind) {
    case "turn_started":
      li.className = "e-turn";
      li.textContent = `— turn ${e.turn} started —`;
      break;
    case "turn_ended":
      li.className = "e-turn";
      li.textContent = `— turn ${e.turn} ended (${e.stop_reason ?? "ended"}) —`;
      break;
    case "message":
    case "user_message":
    case "thought":
      li.textContent = e.text ?? e.summary ?? "";
      break;
    case "usage":
      li.textContent = `usage: ${usageLine(e.usage)}`;
      break;
    case "tool_call":
    case "tool_update": {
      li.className = `e-tool ${e.tool_status ?? ""}`;
      const status = el("span", `tool-status ${e.tool_status ?? ""}`, `[${e.tool_status ?? "pending"}]`);
      li.append(status, document.createTextNode(` ${e.summary ?? e.tool_title ?? e.text ?? "tool"}`));
      const done = e.tool_status === "completed" || e.tool_status === "failed";
      if (done && e.text && e.text.trim()) {
        const lines = e.text.split("\n").length;
        const details = el("details");
        details.append(el("summary", null, `output (${lines} line${lines === 1 ? "" : "s"})`), el("pre", null, e.text));
        li.append(details);
      }
      break;
    }
    default:
      li.textContent = `${e.kind}: ${e.summary ?? e.text ?? ""}`;
  }
  return li;
}

/** A transcript in an <ol>: events in order, each once; a tool call's line replaced by its updates. */
export class Transcript {
  constructor(list) {
    this.list = list;
    this.tools = new Map();
    this.cursor = 0;
    /** The live line of the answer streaming in, or null. */
    this.live = null;
  }

  /** Adds `e` (events at or below the cursor were shown already). */
  add(e) {
    if (e.seq <= this.cursor) return;
    this.cursor = e.seq;
    const stick = this.list.scrollTop + this.list.clientHeight >= this.list.scrollHeight - 8;
    if (e.kind === "message" && e.category === "hidden") {
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

  /** Appends the piece `e.text` to the live line of turn `e.turn` (a new line for a new turn). */
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
      this.list.append(this.live);
    }
    this.live.textContent += e.text ?? "";
  }
}
