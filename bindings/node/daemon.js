#!/usr/bin/env node
// The spacesd daemon the package carries: `node daemon.js --state-dir DIR serve` runs the real
// daemon (the `spacesd` crate, linked into the native module) in this process until SIGINT or
// SIGTERM. Any `spacesd` command line works (`node daemon.js --help`). `new Spaces()` starts it
// detached when no daemon answers.
'use strict'
const native = require('./native.js')
process.exitCode = native.runDaemon(process.argv.slice(2))
