// The transcript of a run, as `spacesd agent attach` shows it: assistant text, the user's
// messages, one line per tool call with its latest status (finished: its output behind a
// disclosure), turn boundaries and usage. Hidden control events are left out (a line the
// harness could not parse, kind `other`, is always shown). Text goes in as text, never HTML.

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
  }

  /** Adds `e` (events at or below the cursor were shown already). */
  add(e) {
    if (e.seq <= this.cursor) return;
    this.cursor = e.seq;
    const li = entry(e);
    if (!li) return;
    const stick = this.list.scrollTop + this.list.clientHeight >= this.list.scrollHeight - 8;
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
    if (stick) this.list.scrollTop = this.list.scrollHeight;
  }
}
