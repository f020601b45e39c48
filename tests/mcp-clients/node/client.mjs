// spacesd driven by the official MCP TypeScript SDK (npm `@modelcontextprotocol/sdk`, pinned in
// package.json and package-lock.json; scripts/test runs `npm ci` here).
//
// Run by tests/tests/suite/mcp_sdk_clients.rs against a test daemon, over stdio
// (`--stdio SPACESD --state-dir DIR`: the SDK spawns `SPACESD --state-dir DIR mcp`) or Streamable
// HTTP (`--http URL --token TOKEN`: the daemon's `/mcp` on its TCP listener with the bearer
// token). It lists the tools, runs the seed's loop and, given `--model-url`, starts an agent run
// over MCP and follows its events to `turn_ended`. Every step prints one line; a failed check
// throws, so the exit code is non-zero and the stack says which.

import fs from "node:fs";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const started = Date.now();
const log = (msg) => console.log(`[typescript-sdk +${((Date.now() - started) / 1000).toFixed(2)}s] ${msg}`);

function check(cond, what) {
    if (!cond) throw new Error(`check failed: ${what}`);
}

const show = (v) => JSON.stringify(v);

/** The structured result of a successful call; its one text content is the same JSON. */
function ok(result, name) {
    check(result.isError !== true, `${name} was refused: ${show(result)}`);
    const sc = result.structuredContent;
    check(sc !== null && typeof sc === "object" && !Array.isArray(sc), `${name}: structuredContent must be an object: ${show(result)}`);
    check(result.content.length === 1 && result.content[0].type === "text", `${name}: one text content: ${show(result)}`);
    check(show(JSON.parse(result.content[0].text)) === show(sc), `${name}: the text content is the structured JSON`);
    return sc;
}

/** The wire error of a refusal: isError, no structuredContent, the error JSON as text. */
function refused(result, name) {
    check(result.isError === true, `${name} should be refused: ${show(result)}`);
    check(result.structuredContent === undefined, `${name}: no structuredContent on an error: ${show(result)}`);
    check(result.content.length === 1 && result.content[0].type === "text", `${name}: one text content: ${show(result)}`);
    const err = JSON.parse(result.content[0].text);
    check(typeof err.code === "string" && typeof err.message === "string", `${name}: {code, message}: ${show(err)}`);
    return err;
}

async function call(c, name, args) {
    return ok(await c.callTool({ name, arguments: args }), name);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function listTools(c, expected) {
    const { tools } = await c.listTools();
    const names = tools.map((t) => t.name).sort();
    check(show(names) === show([...expected].sort()), `tool names: got ${show(names)}, want ${show([...expected].sort())}`);
    for (const t of tools) {
        check(t.inputSchema?.type === "object", `${t.name}: inputSchema of type object: ${show(t.inputSchema)}`);
        check(t.outputSchema?.type === "object", `${t.name}: outputSchema of type object`);
        check(!!t.description, `${t.name}: a description`);
    }
    const by = Object.fromEntries(tools.map((t) => [t.name, t]));
    check("path" in by.read.inputSchema.properties, "read takes a path");
    check(by.read.annotations?.readOnlyHint === true, "read is read-only");
    check(by.terminate_process.annotations?.destructiveHint === true, "terminate_process is destructive");
    log(`tools/list: ${tools.length} tools, each with an object inputSchema and outputSchema`);
}

async function drain(c, processId) {
    let out = "";
    let cursor = 0;
    const deadline = Date.now() + 30_000;
    for (;;) {
        const r = await call(c, "read_process", { process_id: processId, cursor, wait_ms: 2000 });
        out += r.chunk;
        cursor = r.cursor;
        if (r.eof) return out;
        check(Date.now() < deadline, `no eof within 30 s; output so far: ${show(out)}`);
    }
}

async function waitExited(c, processId) {
    const deadline = Date.now() + 30_000;
    for (;;) {
        const st = await call(c, "process_status", { process_id: processId });
        if (st.state === "exited") return st;
        check(Date.now() < deadline, `process did not exit: ${show(st)}`);
        await sleep(50);
    }
}

/** Read, preview, apply, read back, run, collect output, cancel a wait on a long command and end
 * it, recover the patch by its key; and a refusal. */
async function seedLoop(c, space, root, tag) {
    const file = `ts-${tag}.txt`;
    fs.writeFileSync(path.join(root, file), "hi\n");
    const first = await call(c, "read", { workspace_id: space, path: file });
    check(first.content === "hi\n", `read: ${show(first)}`);
    const v1 = first.version;
    log(`read ${file}: version ${v1.slice(0, 19)}...`);

    const patch = `*** Begin Patch\n*** Update File: ${file}\n@@\n-hi\n+hello\n*** End Patch\n`;
    const preview = await call(c, "apply_patch", { workspace_id: space, patch, expected_versions: { [file]: v1 }, check_only: true });
    check(preview.status === "checked", `preview: ${show(preview)}`);
    check(fs.readFileSync(path.join(root, file), "utf8") === "hi\n", "a preview writes nothing");
    log("apply_patch check_only: checked, nothing written");

    const key = `ts-${tag}-${randomUUID()}`;
    const applied = await call(c, "apply_patch", { workspace_id: space, patch, expected_versions: { [file]: v1 }, operation_key: key });
    check(applied.status === "applied", `apply: ${show(applied)}`);
    log(`apply_patch with operation_key: applied as ${applied.operation_id}`);

    const back = await call(c, "read", { workspace_id: space, path: file });
    check(back.content === "hello\n", `read back: ${show(back)}`);
    check(back.version !== v1 && back.version === applied.changes[0].after_version, `a new version: ${show(back)} vs ${show(applied)}`);
    log("read back: the new content and its new version");

    const run = await call(c, "exec_command", { workspace_id: space, command: ["sh", "-c", "echo hello"] });
    check(run.dispatch_status === "confirmed", `exec_command: ${show(run)}`);
    const out = await drain(c, run.process_id);
    check(out === "hello\n", `output: ${show(out)}`);
    const done = await waitExited(c, run.process_id);
    check(done.exit_code === 0, `exit: ${show(done)}`);
    log("exec_command + read_process until eof: 'hello\\n', exit 0");

    const long = await call(c, "exec_command", { workspace_id: space, command: ["sleep", "30"] });
    const pid = long.process_id;
    // A read_process wait blocked on it, with onprogress, aborted by the client (the SDK sends
    // notifications/cancelled) once the first progress notification arrived.
    const ticks = [];
    const abort = new AbortController();
    const t0 = Date.now();
    const blocked = c.callTool({ name: "read_process", arguments: { process_id: pid, cursor: 0, wait_ms: 30000 } }, undefined, {
        signal: abort.signal,
        onprogress: (p) => {
            ticks.push(p.progress);
            abort.abort("the client moved on");
        },
        timeout: 10_000,
    });
    const outcome = await blocked.then((r) => `answered: ${show(r)}`, (e) => e);
    check(outcome instanceof Error && ticks.length > 0, `the wait is aborted after a progress notification: ${outcome}, progress ${show(ticks)}`);
    check(Date.now() - t0 < 10_000, "cancelled within 10 s");
    const t1 = Date.now();
    const st0 = await call(c, "process_status", { process_id: pid });
    check(Date.now() - t1 < 2000, "the next call is served at once after the cancel");
    check(st0.state === "running", `sleep 30 outlives the cancelled wait: ${show(st0)}`);
    log(`read_process wait on sleep 30: progress ${show(ticks)}, cancelled by the client; the command still runs`);
    check((await call(c, "terminate_process", { process_id: pid })).ok === true, "terminate_process ok");
    const st = await waitExited(c, pid);
    check(st.termination === "terminated", `process_status after terminate_process: ${show(st)}`);
    log("sleep 30 ended by terminate_process: termination 'terminated'");

    const status = await call(c, "operation_status", { operation_key: key });
    check(status.status === "applied" && status.operation_id === applied.operation_id, `operation_status: ${show(status)}`);
    log("operation_status by operation_key: the applied patch");

    let err = refused(await c.callTool({ name: "read", arguments: { workspace_id: space, path: "missing.txt" } }), "read");
    check(err.code === "FILE_NOT_FOUND", `refusal code: ${show(err)}`);
    err = refused(await c.callTool({ name: "read", arguments: { workspace_id: space, paht: "x.txt" } }), "read");
    check(err.code === "INVALID_ARGUMENT" && err.message.includes("path"), `a misspelt key: ${show(err)}`);
    log("refusals: isError results carrying FILE_NOT_FOUND and INVALID_ARGUMENT");

    const spaces = await call(c, "space_list", {});
    check(spaces.items.some((s) => s.name === space), `space_list wraps its array under items: ${show(spaces)}`);
}

/** agent_start against the scripted model, then agent_events long-polls to turn_ended. */
async function agentRun(c, space, agent, modelUrl, expectText) {
    const started = await call(c, "agent_start", { space, agent, prompt: "Say hello, please.", options: { base_url: modelUrl } });
    const runId = started.run_id;
    log(`agent_start: ${runId}`);
    let cursor = 0;
    const kinds = [];
    let ended = null;
    const deadline = Date.now() + 120_000;
    while (!ended) {
        check(Date.now() < deadline, `no turn_ended within 120 s; events: ${show(kinds)}`);
        const page = await call(c, "agent_events", { space, run_id: runId, cursor, wait_ms: 10000 });
        for (const e of page.events) {
            kinds.push(e.kind);
            if (e.kind === "turn_ended") {
                ended = e;
                break;
            }
        }
        cursor = page.cursor;
    }
    check(ended.stop_reason === "end_turn", `turn_ended: ${show(ended)}`);
    check(kinds.includes("turn_started"), `events: ${show(kinds)}`);
    log(`agent_events to turn_ended (end_turn): ${show(kinds)}`);
    let st;
    const until = Date.now() + 30_000;
    for (;;) {
        st = await call(c, "agent_status", { space, run_id: runId });
        if (st.status !== "running") break;
        check(Date.now() < until, `run still running: ${show(st)}`);
        await sleep(100);
    }
    check(st.result_text === expectText, `agent_status result_text: ${show(st)}`);
    const runs = await call(c, "agent_list", { space });
    check(runs.items.some((r) => r.run_id === runId), `agent_list: ${show(runs)}`);
    const stop = await call(c, "agent_stop", { space, run_id: runId });
    check(stop.ok === true, `agent_stop: ${show(stop)}`);
    log(`agent_status: ${st.status}, result_text ${show(st.result_text)}; agent_stop ok`);
}

const { values: args } = parseArgs({
    options: {
        stdio: { type: "string" },
        "state-dir": { type: "string" },
        http: { type: "string" },
        token: { type: "string" },
        space: { type: "string" },
        root: { type: "string" },
        "expect-tools": { type: "string" },
        "model-url": { type: "string" },
        agent: { type: "string", default: "claude-code" },
        "expect-text": { type: "string" },
    },
});
check(!!args.stdio !== !!args.http, "one of --stdio SPACESD or --http URL");
check(args.space && args.root && args["expect-tools"], "--space, --root and --expect-tools");
const expected = args["expect-tools"].split(",");
const sdkPackage = path.join(path.dirname(fileURLToPath(import.meta.url)), "node_modules/@modelcontextprotocol/sdk/package.json");
log(`sdk @modelcontextprotocol/sdk@${JSON.parse(fs.readFileSync(sdkPackage, "utf8")).version} on Node ${process.version}`);

let transport;
let name;
if (args.stdio) {
    check(!!args["state-dir"], "--stdio needs --state-dir");
    transport = new StdioClientTransport({ command: args.stdio, args: ["--state-dir", args["state-dir"], "mcp"], stderr: "inherit" });
    name = "stdio";
} else {
    transport = new StreamableHTTPClientTransport(new URL(args.http), {
        requestInit: { headers: { Authorization: `Bearer ${args.token}` } },
    });
    name = "http";
}
const c = new Client({ name: "spaces-e2e-typescript", version: "0" });
await c.connect(transport);
const negotiated = args.http ? transport.protocolVersion : "(stdio)";
log(`${name}: connected, protocol ${negotiated}, server ${c.getServerVersion()?.name}`);
check(c.getServerCapabilities()?.tools !== undefined, "the server offers tools");
await listTools(c, expected);
await seedLoop(c, args.space, args.root, name);
if (args["model-url"]) {
    await agentRun(c, args.space, args.agent, args["model-url"], args["expect-text"]);
}
if (args.http) {
    // End the session with DELETE /mcp; the session id is then unknown to the server (404).
    const session = transport.sessionId;
    check(!!session, "a Streamable HTTP session id");
    await transport.terminateSession();
    const again = await fetch(args.http, {
        method: "POST",
        headers: {
            Authorization: `Bearer ${args.token}`,
            "Content-Type": "application/json",
            Accept: "application/json, text/event-stream",
            "Mcp-Session-Id": session,
            "MCP-Protocol-Version": negotiated,
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 99, method: "tools/list" }),
    });
    check(again.status === 404, `a request on the terminated session: HTTP ${again.status}`);
    log("terminateSession (DELETE /mcp): the old session id now gets 404");
}
await c.close();
log("PASS");
// Node's fetch keeps an idle keep-alive connection to the daemon for a few seconds; do not wait
// for it to time out.
process.exit(0);
