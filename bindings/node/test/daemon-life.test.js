// A daemon the SDK started ends when its last client is gone (`close()` or the process
// exiting), and `keepDaemon: true` keeps it (issue 32; the Python suite's test_daemon_life.py
// covers a turn in flight). Each test has a state dir (and so a daemon) of its own.
'use strict'
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync } = require('node:child_process')

const { Spaces } = require('..')
const { PKG, tempDir, sleep, killDaemons, alive } = require('../testing')

// spacesd's unused::GRACE, and how long a test waits for a daemon to end (well past it).
const GRACE_MS = 3000
const END_TIMEOUT_MS = 30_000

async function ends(pid) {
  const deadline = Date.now() + END_TIMEOUT_MS
  while (alive(pid)) {
    if (Date.now() > deadline) return false
    await sleep(100)
  }
  return true
}

async function withState(fn) {
  const dir = tempDir('spaces-life-')
  const stateDir = path.join(dir, 'state')
  try {
    await fn(stateDir)
  } finally {
    await killDaemons(stateDir)
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

// A script that makes one call and exits without closing; returns the daemon's pid.
function script(stateDir, keepDaemon) {
  const code = `
const { Spaces } = require(${JSON.stringify(PKG)})
const s = new Spaces({ stateDir: process.argv[1], keepDaemon: ${keepDaemon} })
s.listSpaces().then(async () => console.log(await s.daemonPid()))
`
  return Number(execFileSync(process.execPath, ['-e', code, stateDir], { encoding: 'utf8', timeout: 60_000 }).trim())
}

test('close() lets the daemon go once no client holds it', () =>
  withState(async (stateDir) => {
    const first = new Spaces({ stateDir })
    await first.listSpaces()
    const pid = await first.daemonPid()
    assert.equal(typeof pid, 'number')
    const second = new Spaces({ stateDir })
    await second.listSpaces()
    await first.close()
    await sleep(GRACE_MS + 1500)
    assert.ok(alive(pid), 'the second client still holds the daemon')
    await second.close()
    assert.ok(await ends(pid), 'the daemon outlived its last client')
    assert.ok(!fs.existsSync(path.join(stateDir, 'spacesd.hold')), 'the hold socket is removed at exit')
  }))

test('a script that exits lets the daemon it started go', () =>
  withState(async (stateDir) => {
    const pid = script(stateDir, false)
    assert.ok(await ends(pid), 'the daemon outlived the script that started it')
  }))

test('keepDaemon: true keeps the daemon running after the script', () =>
  withState(async (stateDir) => {
    const pid = script(stateDir, true)
    await sleep(GRACE_MS + 2000)
    assert.ok(alive(pid), 'keepDaemon: the daemon runs on after the script')
  }))

test('a daemon that went away is started (and held) again by the next call', () =>
  withState(async (stateDir) => {
    const spaces = new Spaces({ stateDir })
    await spaces.listSpaces()
    const first = await spaces.daemonPid()
    process.kill(first, 'SIGKILL')
    assert.ok(await ends(first))
    assert.deepEqual(await spaces.listSpaces(), [], 'the call after it answers, from a new daemon')
    const second = await spaces.daemonPid()
    assert.ok(second && second !== first, 'a new daemon was started')
    await sleep(GRACE_MS + 1500)
    assert.ok(alive(second), 'and this client holds it')
    await spaces.close()
    assert.ok(await ends(second))
  }))
