#!/usr/bin/env node
// The spacesd daemon the package carries: `node daemon.js --state-dir DIR serve` runs the real
// daemon (the `spacesd` crate, linked into the native module) in this process until SIGINT or
// SIGTERM. Any `spacesd` command line works (`node daemon.js --help`). `new Spaces()` starts it
// detached when no daemon answers.
'use strict'
const native = require('./native.js')
// The daemon gives agent runs its own tools as an MCP server started with its own command line;
// hosted here, that command is this Node and this file, not a `spacesd` binary.
process.env.SPACES_SELF_COMMAND = JSON.stringify([process.execPath, __filename])
// ...which needs this package's folder (native.js, the native module): a sandbox that hides
// where it lives (a project under /tmp) shows it read-only to that command.
process.env.SPACES_SELF_PATHS = JSON.stringify([__dirname])
process.exitCode = native.runDaemon(process.argv.slice(2))
