// Issue 32, "a newcomer's first hour": the run page reads as an agent console. Started by
// tests/tests/suite/web.rs once a real Claude Code run (against the scripted model) has answered
// its first turn with a tool call and a Markdown answer; it hands over:
//   --link URL       the one-time login link `spacesd ui` printed
//   --run URL        the run's page
//   --label TEXT     the run's label
//   --prompt TEXT    the start of the run's prompt
//   --usage TEXT     what the run spent as the page must say it (the ledger's totals)
//   --shots DIR      where screenshots go (web-run.png, web-markdown.png)
//   --chromium PATH  the browser (default /usr/bin/chromium)
//   --wait-ms N      the longest wait for any one thing on the page (default 120000)
// Prints one line per step and PASS at the end; any failure throws (exit 1).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { chromium } from "playwright-core";

const { values: a } = parseArgs({
  options: {
    link: { type: "string" },
    run: { type: "string" },
    label: { type: "string" },
    prompt: { type: "string" },
    usage: { type: "string" },
    shots: { type: "string" },
    chromium: { type: "string", default: "/usr/bin/chromium" },
    "wait-ms": { type: "string", default: "120000" },
  },
});
for (const k of ["link", "run", "label", "prompt", "usage", "shots"]) {
  if (!a[k]) throw new Error(`--${k} is required`);
}
const origin = new URL(a.link).origin;
const WAIT = Number(a["wait-ms"]);

function step(what) {
  console.log(`step: ${what}`);
}

function check(ok, what) {
  if (!ok) throw new Error(`check failed: ${what}`);
}

/** The API's event kinds (sdk-core's EventKind) and stop reasons: never in the page's text. */
const RAW = /\b(turn_started|turn_ended|user_message|tool_call|tool_update|cancel_requested|end_turn|max_turns|in_progress)\b|\b(install|session|message|thought|plan|usage|permission|notice|error|exited|other):/;

step("the icon answers without any credential, as an image");
const icon = await fetch(`${origin}/favicon.ico`);
const iconType = icon.headers.get("content-type") ?? "";
const iconBytes = new Uint8Array(await icon.arrayBuffer());
check(icon.status === 200 && iconType.startsWith("image/"), `GET /favicon.ico: ${icon.status} ${iconType}`);
check(iconBytes.length > 100 && iconBytes[0] === 0 && iconBytes[2] === 1, `an ICO file: ${iconBytes.length} bytes`);

const profile = mkdtempSync(join(tmpdir(), "spaces-web-profile-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: a.chromium,
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  viewport: { width: 1000, height: 900 },
});
context.setDefaultTimeout(WAIT);
try {
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin });
  const page = context.pages()[0] ?? (await context.newPage());
  const problems = [];
  const dialogs = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console error: ${m.text()}`);
  });
  page.on("dialog", (d) => {
    dialogs.push(d.message());
    d.dismiss().catch(() => {});
  });

  step("log in and open the run's page");
  const landed = await page.goto(a.link);
  check(landed.ok(), `logged in: ${landed.status()}`);
  await page.goto(a.run);
  const transcript = page.locator("#transcript");
  await transcript.locator('[data-kind="turn_ended"][data-turn="1"][data-stop="end_turn"]').waitFor();
  await page.locator("#run-status", { hasText: /^idle$/ }).waitFor();

  step("the header: label, prompt, harness, model, usage, duration");
  const text = async (sel) => ((await page.locator(sel).textContent()) ?? "").trim();
  await page.locator("#run-title", { hasText: a.label }).waitFor();
  check((await text("#run-title")) === a.label, `the label is the heading: ${await text("#run-title")}`);
  check((await page.title()).includes(a.label), `the label is the tab's title: ${await page.title()}`);
  await page.locator("#run-prompt", { hasText: a.prompt }).waitFor();
  check((await text("#run-harness")) === "Claude Code", `the harness by name: ${await text("#run-harness")}`);
  check(!/not reported/.test(await text("#run-model")), `the model from the session event: ${await text("#run-model")}`);
  await page.locator("#run-usage", { hasText: "tokens in" }).waitFor();
  check((await text("#run-usage")) === a.usage, `the ledger's totals, as the API gives them: ${await text("#run-usage")} vs ${a.usage}`);
  check(/^\d+ (s|min)/.test(await text("#run-duration")), `a duration: ${await text("#run-duration")}`);

  step("the answer is rendered Markdown");
  const answer = transcript.locator('[data-kind="message"]').last();
  const md = answer.locator(".md");
  check((await md.locator("strong", { hasText: "bold words" }).count()) === 1, "**bold words** is <strong>");
  check((await md.locator("em", { hasText: "emphasis" }).count()) === 1, "*emphasis* is <em>");
  check((await md.locator("h3", { hasText: "Summary" }).count()) === 1, "# Summary is a heading");
  check((await md.locator("ul > li").count()) === 3, `a list of three items: ${await md.locator("ul > li").allTextContents()}`);
  check((await md.locator("ol > li").count()) === 2, "a numbered list of two");
  check((await md.locator("p code", { hasText: "cargo test" }).count()) === 1, "`cargo test` is inline code");
  const code = md.locator(".code-block pre > code.language-rust");
  check((await code.count()) === 1, "the fenced block is <pre><code class=language-rust>");
  check((await code.textContent()).includes('println!("hello <world>");'), `the code verbatim: ${await code.textContent()}`);
  const link = md.locator('a[href="https://example.com/docs"]');
  check((await link.count()) === 1 && (await link.getAttribute("rel")).includes("noopener"), "an https link, rel=noopener");
  check((await md.locator('a[href^="javascript"]').count()) === 0, "a javascript: link stays text");

  step("HTML in the agent's text stays text");
  check((await transcript.locator("script, img, iframe").count()) === 0, "no <script>, <img> or <iframe> from the agent's text");
  check((await answer.textContent()).includes("<script>"), "the <script> tag is shown as text");
  check((await answer.textContent()).includes("<img src=x onerror="), "the <img onerror> is shown as text");
  check(dialogs.length === 0 && (await page.evaluate(() => window.pwned)) === undefined, `nothing ran: ${dialogs}`);

  step("a code block's Copy button copies its code");
  const copyButton = md.locator(".code-block button", { hasText: "Copy" });
  await copyButton.click();
  await md.locator(".code-block button", { hasText: "Copied" }).waitFor();
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  check(copied === (await code.textContent()), `the clipboard holds the code: ${JSON.stringify(copied)}`);

  step("the tool call is one line whose output is folded");
  const tool = transcript.locator(".e-tool");
  check((await tool.count()) === 1, `one line for the tool call: ${await tool.allTextContents()}`);
  const fold = tool.locator("details");
  check((await fold.count()) === 1 && !(await fold.evaluate((d) => d.open)), "its output is behind a closed <details>");
  check((await tool.locator("summary .tool-status.completed").textContent()) === "done", "its state in words: done");
  await fold.locator("summary").click();
  check(await fold.evaluate((d) => d.open), "the output opens");

  step("no raw event kinds in the page's text");
  const body = await page.evaluate(() => document.body.innerText);
  const raw = body.match(RAW);
  check(!raw, `a raw kind name on the page: ${raw && raw[0]}`);
  check(body.includes("Turn 1 finished"), "the turn's end in words");

  step("the page names its icon");
  const linked = await page.evaluate(async () => {
    const l = document.querySelector('link[rel="icon"]');
    const r = await fetch(l.href);
    return { href: l.getAttribute("href"), status: r.status, type: r.headers.get("content-type") };
  });
  check(linked.href === "/favicon.ico" && linked.status === 200 && linked.type.startsWith("image/"), `<link rel=icon>: ${JSON.stringify(linked)}`);

  await page.locator("#run-facts").scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(a.shots, "web-run.png") });
  await answer.scrollIntoViewIfNeeded();
  await answer.screenshot({ path: join(a.shots, "web-markdown.png") });

  check(problems.length === 0, `no script errors on the page: ${problems.join("; ")}`);
  console.log("PASS");
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
