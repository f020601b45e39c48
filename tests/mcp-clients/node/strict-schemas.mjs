// Every tool schema spacesd offers over MCP, compiled by Ajv in strict mode (issue 32: Ajv-based
// MCP clients such as Claude Code and the MCP Inspector printed `unknown format "uint64"
// ignored in schema` 158 times). Ajv's draft 2020-12 build with the standard formats
// (ajv-formats) and union types (`["string", "null"]`, which JSON Schema allows); anything else
// Ajv would warn about or refuse fails the run: unknown formats, unknown keywords, `required`
// names that are not properties.
//
// Usage: node strict-schemas.mjs SPACESD --state-dir DIR   (run by
// tests/tests/suite/mcp_sdk_clients.rs). Prints one line per tool checked and `PASS` at the end;
// exits 1 when Ajv refused or warned about any schema (naming the tool and the message), or the
// SDK itself printed a warning.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

// What the SDK's own Ajv prints when `listTools` compiles the tools' output schemas, as a user
// of Claude Code or the MCP Inspector sees it.
const printed = [];
const consoleWarn = console.warn;
console.warn = (...m) => {
    printed.push(m.join(" "));
    consoleWarn(...m);
};

const [spacesd, ...args] = process.argv.slice(2);
const warnings = [];
const logger = { log: () => {}, warn: (...m) => warnings.push(m.join(" ")), error: (...m) => warnings.push(m.join(" ")) };
const ajv = new Ajv2020({ strict: true, allowUnionTypes: true, logger });
addFormats(ajv);

const client = new Client({ name: "strict-schemas", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command: spacesd, args: [...args, "mcp"], stderr: "inherit" }));
const { tools } = await client.listTools();
let failed = 0;
for (const tool of tools) {
    for (const [which, schema] of [["inputSchema", tool.inputSchema], ["outputSchema", tool.outputSchema]]) {
        if (!schema) continue;
        warnings.length = 0;
        try {
            ajv.compile(schema);
        } catch (e) {
            warnings.push(e.message);
        }
        if (warnings.length) {
            failed++;
            console.log(`FAIL ${tool.name} ${which}: ${warnings.join("; ")}`);
        }
    }
    console.log(`checked ${tool.name}`);
}
await client.close();
console.log(`${tools.length} tools, ${failed} schemas refused or warned about, ${printed.length} warnings printed by the SDK`);
if (failed || printed.length) process.exit(1);
console.log("PASS");
