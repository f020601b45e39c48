// A small, safe Markdown renderer for the agents' answers (they write Markdown). It builds DOM
// nodes with createElement and textContent only: no HTML is ever parsed, so `<script>` or
// `<img onerror=...>` in an answer stays text. The subset: ATX headings, paragraphs (a line
// break stays a line break), **strong**, *emphasis*, ~~strikethrough~~, `inline code`, fenced
// code blocks (with a Copy button), bulleted and numbered lists (nested by indentation), block
// quotes, rules, simple pipe tables, and links whose target is http(s) only (opened in a new
// tab, rel="noopener noreferrer"; any other target shows as text). Anything else is text.

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** The URL `raw` as a link target if it is http(s), else null. */
export function safeHref(raw) {
  try {
    const url = new URL(raw);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch {
    return null;
  }
}

// Inline syntax, earliest match first: code span, link, autolink <url>, strong, emphasis,
// strikethrough, a bare http(s) URL, a backslash escape.
const INLINE = new RegExp(
  [
    "(`+)([^`]|[^`][\\s\\S]*?[^`])\\1(?!`)",
    "\\[([^\\]\\n]+)\\]\\(\\s*<?([^\\s<>()]+)>?(?:\\s+\"[^\"\\n]*\")?\\s*\\)",
    "<(https?://[^\\s<>]+)>",
    "\\*\\*(?=\\S)([\\s\\S]*?\\S)\\*\\*",
    "(?<![\\w])__(?=\\S)([\\s\\S]*?\\S)__(?![\\w])",
    "\\*(?=[^\\s*])([\\s\\S]*?[^\\s*])\\*",
    "(?<![\\w])_(?=[^\\s_])([\\s\\S]*?[^\\s_])_(?![\\w])",
    "~~(?=\\S)([\\s\\S]*?\\S)~~",
    "(https?://[^\\s<>()\\[\\]]*[^\\s<>()\\[\\].,;:!?'\"*_~])",
    "\\\\([\\\\`*_{}\\[\\]()#+\\-.!~|<>])",
  ].join("|"),
  "g",
);

function link(text, href, children) {
  const target = safeHref(href);
  if (!target) return null;
  const a = el("a");
  a.href = target;
  a.rel = "noopener noreferrer";
  a.target = "_blank";
  if (children) a.append(...children);
  else a.textContent = text;
  return a;
}

/** The nodes of one run of inline Markdown `text`. */
export function inline(text) {
  const out = [];
  let last = 0;
  const re = new RegExp(INLINE.source, "g");
  let m;
  while ((m = re.exec(text)) !== null) {
    if (m.index > last) out.push(document.createTextNode(text.slice(last, m.index)));
    last = re.lastIndex;
    let node = null;
    if (m[1] !== undefined) {
      node = el("code", null, m[2].length > 2 && m[2].startsWith(" ") && m[2].endsWith(" ") ? m[2].slice(1, -1) : m[2]);
    } else if (m[3] !== undefined) {
      node = link(m[3], m[4], inline(m[3]));
    } else if (m[5] !== undefined) {
      node = link(m[5], m[5]);
    } else if (m[6] !== undefined || m[7] !== undefined) {
      node = el("strong");
      node.append(...inline(m[6] ?? m[7]));
    } else if (m[8] !== undefined || m[9] !== undefined) {
      node = el("em");
      node.append(...inline(m[8] ?? m[9]));
    } else if (m[10] !== undefined) {
      node = el("del");
      node.append(...inline(m[10]));
    } else if (m[11] !== undefined) {
      node = link(m[11], m[11]);
    } else if (m[12] !== undefined) {
      node = document.createTextNode(m[12]);
    }
    out.push(node ?? document.createTextNode(m[0]));
  }
  if (last < text.length) out.push(document.createTextNode(text.slice(last)));
  return out;
}

/** Inline text whose line breaks stay line breaks. */
function lines(text) {
  const out = [];
  text.split("\n").forEach((line, i) => {
    if (i > 0) out.push(el("br"));
    out.push(...inline(line));
  });
  return out;
}

/** Copies `text`: the async clipboard where the page may use it, else a selection. */
async function copy(text, pre) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const range = document.createRange();
    range.selectNodeContents(pre);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    return document.execCommand("copy");
  }
}

/** A fenced code block with its language and a Copy button. */
export function codeBlock(text, lang) {
  const box = el("div", "code-block");
  const bar = el("div", "code-bar");
  const name = el("span", "code-lang", lang || "code");
  const button = el("button", "copy quiet", "Copy");
  button.type = "button";
  button.setAttribute("aria-label", lang ? `Copy the ${lang} code` : "Copy the code");
  const pre = el("pre");
  const code = el("code", lang ? `language-${lang.replace(/[^\w-]/g, "")}` : null, text);
  pre.append(code);
  button.addEventListener("click", async () => {
    const ok = await copy(text, pre);
    button.textContent = ok ? "Copied" : "Copy failed";
    setTimeout(() => {
      button.textContent = "Copy";
    }, 2000);
  });
  bar.append(name, button);
  box.append(bar, pre);
  return box;
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;

function cells(row) {
  let r = row.trim();
  if (r.startsWith("|")) r = r.slice(1);
  if (r.endsWith("|") && !r.endsWith("\\|")) r = r.slice(0, -1);
  return r.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || ITEM.test(line) || QUOTE.test(line);
}

/** A list from `items` ({indent, marker, text} lines), nested by indentation. */
function list(items, start) {
  const first = items[start];
  const ordered = /\d/.test(first.marker);
  const node = el(ordered ? "ol" : "ul");
  if (ordered) {
    const n = parseInt(first.marker, 10);
    if (n !== 1) node.start = n;
  }
  let i = start;
  while (i < items.length && items[i].indent >= first.indent) {
    const it = items[i];
    if (it.indent > first.indent) {
      // A deeper item: a list nested in the previous item.
      const [sub, next] = list(items, i);
      (node.lastElementChild ?? node.appendChild(el("li"))).append(sub);
      i = next;
      continue;
    }
    if (/\d/.test(it.marker) !== ordered) break;
    const li = el("li");
    const task = it.text.match(/^\[([ xX])\]\s+(.*)$/s);
    if (task) {
      const box = el("input");
      box.type = "checkbox";
      box.disabled = true;
      box.checked = task[1] !== " ";
      li.append(box, " ", ...lines(task[2]));
    } else {
      li.append(...lines(it.text));
    }
    node.append(li);
    i += 1;
  }
  return [node, i];
}

/** The block nodes of Markdown `src`, appended to a new `<div class="md">`. */
export function markdown(src) {
  const root = el("div", "md");
  root.append(...blocks(String(src ?? "").replace(/\r\n?/g, "\n").split("\n")));
  return root;
}

function blocks(ls) {
  const out = [];
  let i = 0;
  while (i < ls.length) {
    const line = ls[i];
    if (!line.trim()) {
      i += 1;
      continue;
    }
    const fence = line.match(FENCE);
    if (fence) {
      const body = [];
      const close = new RegExp(`^ {0,3}${fence[1][0] === "`" ? "`" : "~"}{${fence[1].length},}\\s*$`);
      i += 1;
      while (i < ls.length && !close.test(ls[i])) body.push(ls[i++]);
      i += 1;
      out.push(codeBlock(body.join("\n"), fence[2]));
      continue;
    }
    const heading = line.match(HEADING);
    if (heading) {
      // Agents' headings sit under the page's own: # is shown as h3, ## as h4, ...
      const h = el(`h${Math.min(6, heading[1].length + 2)}`, "md-h");
      h.append(...inline(heading[2]));
      out.push(h);
      i += 1;
      continue;
    }
    if (RULE.test(line)) {
      out.push(el("hr"));
      i += 1;
      continue;
    }
    if (QUOTE.test(line)) {
      const body = [];
      while (i < ls.length && ls[i].trim() && QUOTE.test(ls[i])) body.push(ls[i++].match(QUOTE)[1]);
      const q = el("blockquote");
      q.append(...blocks(body));
      out.push(q);
      continue;
    }
    if (ITEM.test(line)) {
      const items = [];
      while (i < ls.length) {
        const m = ls[i].match(ITEM);
        if (m) {
          items.push({ indent: m[1].replace(/\t/g, "    ").length, marker: m[2], text: m[3] });
        } else if (ls[i].trim() && /^\s+/.test(ls[i]) && items.length) {
          // A continuation line of the item above.
          items[items.length - 1].text += `\n${ls[i].trim()}`;
        } else if (!ls[i].trim() && i + 1 < ls.length && ITEM.test(ls[i + 1])) {
          // A blank line between items.
        } else {
          break;
        }
        i += 1;
      }
      let k = 0;
      while (k < items.length) {
        const [node, next] = list(items, k);
        out.push(node);
        k = next > k ? next : k + 1;
      }
      continue;
    }
    if (line.includes("|") && i + 1 < ls.length && TABLE_SEP.test(ls[i + 1]) && ls[i + 1].includes("-")) {
      const table = el("table", "md-table");
      const head = el("tr");
      for (const c of cells(line)) {
        const th = el("th");
        th.scope = "col";
        th.append(...inline(c));
        head.append(th);
      }
      const thead = el("thead");
      thead.append(head);
      const tbody = el("tbody");
      i += 2;
      while (i < ls.length && ls[i].trim() && ls[i].includes("|")) {
        const tr = el("tr");
        for (const c of cells(ls[i])) {
          const td = el("td");
          td.append(...inline(c));
          tr.append(td);
        }
        tbody.append(tr);
        i += 1;
      }
      table.append(thead, tbody);
      const wrap = el("div", "md-table-wrap");
      wrap.append(table);
      out.push(wrap);
      continue;
    }
    const para = [];
    while (i < ls.length && ls[i].trim() && (para.length === 0 || !startsBlock(ls[i]))) para.push(ls[i++].trim());
    const p = el("p");
    p.append(...lines(para.join("\n")));
    out.push(p);
  }
  return out;
}
