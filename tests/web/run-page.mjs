// The web page of runs in headless Chromium (Debian's chromium package, driven by
// playwright-core; nothing is downloaded). Started by tests/tests/suite/web.rs, which runs the
// daemon, the scripted model and a real Claude Code run, and hands over:
//   --link URL            the one-time login link `spacesd ui` printed
//   --space NAME          the Space the run is started in
//   --shots DIR           where screenshots go
//   --list-open FILE      created here once the list of runs is open (the test then starts the run)
//   --interrupt-now FILE  created by the test once the third turn's slow answer is streaming
//   --chromium PATH       the browser (default /usr/bin/chromium)
//   --wait-ms N           the longest wait for any one thing on the page (default 120000)
// Prints one line per step and PASS at the end; any failure throws (exit 1).
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { chromium } from "playwright-core";

const { values: a } = parseArgs({
  options: {
    link: { type: "string" },
    space: { type: "string" },
    shots: { type: "string" },
    "list-open": { type: "string" },
    "interrupt-now": { type: "string" },
    chromium: { type: "string", default: "/usr/bin/chromium" },
    "wait-ms": { type: "string", default: "120000" },
  },
});
for (const k of ["link", "space", "shots", "list-open", "interrupt-now"]) {
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

/** A request from outside the browser: status and error code of the answer. */
async function raw(path, init = {}) {
  const res = await fetch(origin + path, { redirect: "manual", ...init });
  const text = await res.text();
  let code = null;
  try {
    code = JSON.parse(text).error?.code ?? null;
  } catch {
    // not JSON
  }
  return { status: res.status, code, text };
}

async function waitFile(path) {
  const deadline = Date.now() + WAIT;
  while (!existsSync(path)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${path}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

step("no cookie: the page and the API are refused");
for (const path of ["/ui/", "/v1/spaces"]) {
  const r = await raw(path);
  check(r.status === 403 && r.code === "UNAUTHORIZED", `GET ${path} without a cookie: ${r.status} ${r.text}`);
}

const profile = mkdtempSync(join(tmpdir(), "spaces-web-profile-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: a.chromium,
  headless: true,
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
  viewport: { width: 1100, height: 1200 },
});
context.setDefaultTimeout(WAIT);
try {
  const page = context.pages()[0] ?? (await context.newPage());
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error" && !m.text().includes("403")) problems.push(`console error: ${m.text()}`);
  });

  step("the one-time link logs in and lands on the list of runs");
  const landed = await page.goto(a.link);
  check(landed.ok() && new URL(page.url()).pathname === "/ui/", `landed on ${page.url()} (${landed.status()})`);
  const cookies = await context.cookies(origin);
  check(cookies.length === 1, `one cookie: ${JSON.stringify(cookies.map((c) => c.name))}`);
  const [cookie] = cookies;
  check(cookie.httpOnly && cookie.sameSite === "Strict", `HttpOnly, SameSite=Strict: ${JSON.stringify(cookie)}`);
  const cookieHeader = `${cookie.name}=${cookie.value}`;

  step("a second use of the link is refused");
  const again = await raw(new URL(a.link).pathname + new URL(a.link).search);
  check(again.status === 403 && again.code === "UNAUTHORIZED", `the link used twice: ${again.status} ${again.text}`);

  await page.getByRole("heading", { name: `Space ${a.space}` }).waitFor();
  await page.screenshot({ path: join(a.shots, "ui-runs-empty.png") });
  writeFileSync(a["list-open"], "open\n");

  step("the run appears in the list, live, and its page opens from there");
  const row = page.locator("tbody tr").first();
  await row.locator(".status", { hasText: "running" }).waitFor();
  const runId = (await row.locator("a").first().textContent()).trim();
  check(/^run-[0-9a-f]+$/.test(runId), `a run id: ${runId}`);
  await page.screenshot({ path: join(a.shots, "ui-runs.png") });
  // Keyboard: focus the run's link and follow it with Enter.
  await row.locator("a").first().focus();
  await page.keyboard.press("Enter");
  await page.waitForURL(`**/ui/spaces/${a.space}/runs/${runId}`);

  step("the first turn completes live on the run's page: a tool call on one line, then the answer");
  const status = page.locator("#run-status");
  const transcript = page.locator("#transcript");
  await status.filter({ hasText: /^[a-z]+$/ }).waitFor();
  const first = (await status.textContent()).trim();
  check(first === "running", `the first turn was still running when its page opened (status ${first}): the scripted answer streams for about 12 s`);
  const tool = transcript.locator(".e-tool");
  await tool.locator(".tool-status.completed").waitFor();
  check((await tool.count()) === 1, `one line for the tool call, replaced by its updates: ${await tool.allTextContents()}`);
  check((await tool.locator(".tool-status").textContent()) === "done", `the tool line shows its status in words: ${await tool.textContent()}`);

  step("the answer streams in: a live line grows before the turn ends, then the whole message replaces it");
  const answer = "First answer, streamed slowly.";
  const live = transcript.locator('[data-live="streaming"]');
  const liveText = transcript.locator('[data-live="streaming"] .body');
  await liveText.filter({ hasText: /.{3}/ }).waitFor();
  const partial = await liveText.textContent();
  const ended1 = await transcript.locator('[data-kind="turn_ended"][data-turn="1"]').count();
  check(ended1 === 0, "the turn had not ended while the partial answer was on the page");
  check(partial.length < answer.length && answer.startsWith(partial), `a prefix of the answer streamed in: ${JSON.stringify(partial)}`);
  check((await live.getAttribute("aria-busy")) === "true", "the growing line is busy for screen readers");
  await liveText.filter({ hasText: new RegExp(`.{${partial.length + 1}}`) }).waitFor();
  const grown = await liveText.textContent();
  check(grown.startsWith(partial) && grown.length > partial.length && answer.startsWith(grown), `the live line grew: ${JSON.stringify(grown)}`);
  await transcript.locator('[data-kind="turn_ended"][data-turn="1"][data-stop="end_turn"]', { hasText: "Turn 1 finished" }).waitFor();
  await transcript.locator('[data-kind="message"]', { hasText: answer }).waitFor();
  check((await live.count()) === 0, "the whole message replaced the live line");
  check((await transcript.locator('[data-kind="message"]').count()) === 1, "the answer shows once");
  await status.filter({ hasText: /^idle$/ }).waitFor();
  check((await transcript.getAttribute("aria-live")) === "polite", "the transcript is an aria-live region");

  step("a follow-up (typed, Enter) is answered");
  const box = page.getByLabel("Follow-up message");
  await box.fill("What comes next?");
  await box.press("Enter");
  await transcript.locator('[data-kind="user_message"]', { hasText: "What comes next?" }).waitFor();
  await transcript.locator('[data-kind="message"]', { hasText: "Answer to the follow-up." }).waitFor();
  await transcript.locator('[data-kind="turn_ended"][data-turn="2"][data-stop="end_turn"]').waitFor();

  step("a slow turn is interrupted");
  await box.fill("Now answer very slowly.");
  await page.getByRole("button", { name: "Send follow-up" }).click();
  await transcript.locator('[data-kind="user_message"]', { hasText: "Now answer very slowly." }).waitFor();
  await waitFile(a["interrupt-now"]);
  const interrupt = page.getByRole("button", { name: "Interrupt turn" });
  await status.filter({ hasText: /^running$/ }).waitFor();
  await interrupt.click();
  await transcript.locator('[data-kind="turn_ended"][data-turn="3"][data-stop="interrupted"]', { hasText: "Turn 3 was interrupted" }).waitFor();
  await transcript.locator('[data-kind="cancel_requested"]', { hasText: "Interrupt requested" }).first().waitFor();
  const shown = await page.evaluate(() => document.body.innerText);
  const rawKind = shown.match(/\b(turn_started|turn_ended|user_message|tool_call|tool_update|cancel_requested|end_turn)\b|\b(notice|usage|error|exited|other):/);
  check(!rawKind, `no raw event kind on the page: ${rawKind && rawKind[0]}`);
  await status.filter({ hasText: /^idle$/ }).waitFor();
  await page.locator("#action-note", { hasText: "Interrupt:" }).waitFor();
  await page.screenshot({ path: join(a.shots, "ui-run-live.png"), fullPage: true });

  step("without the CSRF token, or from a foreign Origin, the cookie is refused");
  const path = `/v1/spaces/${a.space}/agents/${runId}`;
  const ok = await raw(path, { headers: { Cookie: cookieHeader } });
  check(ok.status === 200, `the cookie reads the run: ${ok.status} ${ok.text}`);
  const foreign = await raw(path, { headers: { Cookie: cookieHeader, Origin: "http://attacker.example" } });
  check(foreign.status === 403 && foreign.code === "UNAUTHORIZED", `a foreign Origin: ${foreign.status} ${foreign.text}`);
  const otherPort = await raw(path, { headers: { Cookie: cookieHeader, Origin: "http://127.0.0.1:1" } });
  check(otherPort.status === 403 && otherPort.code === "UNAUTHORIZED", `another port's Origin: ${otherPort.status} ${otherPort.text}`);
  const noCsrf = await page.evaluate(async (p) => {
    const r = await fetch(`${p}/message`, { method: "POST", headers: { "Content-Type": "application/json" }, body: '{"text":"forged"}' });
    return { status: r.status, body: await r.text() };
  }, path);
  check(noCsrf.status === 403 && noCsrf.body.includes("UNAUTHORIZED"), `a POST without the CSRF token: ${JSON.stringify(noCsrf)}`);

  step("stop");
  await page.getByRole("button", { name: "Stop run" }).click();
  await status.filter({ hasText: /^stopped$/ }).waitFor();
  await page.locator("#stream-state", { hasText: "The run has ended (stopped)" }).waitFor();
  check(await page.getByRole("button", { name: "Send follow-up" }).isDisabled(), "a stopped run takes no follow-up");
  await page.screenshot({ path: join(a.shots, "ui-run.png"), fullPage: true });

  step("logging out ends the session");
  await page.getByRole("button", { name: "Log out" }).click();
  await page.getByText("Logged out.").waitFor();
  const after = await raw(path, { headers: { Cookie: cookieHeader } });
  check(after.status === 403 && after.code === "UNAUTHORIZED", `the cookie after logout: ${after.status} ${after.text}`);

  check(problems.length === 0, `no script errors on the page: ${problems.join("; ")}`);
  console.log(`run ${runId}`);
  console.log("PASS");
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
