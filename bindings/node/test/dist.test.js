// The npm package scripts/dist builds installs and runs without Rust (issue 32): `npm install
// <tgz>` into an empty project with cargo off PATH builds nothing (the native module is
// prebuilt for linux-x64), and the installed SDK starts its daemon and answers. The package is
// read from $SPACES_DIST_DIR (scripts/test sets it), else <repo>/dist.
'use strict'
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync } = require('node:child_process')

const { REPO, tempDir, killDaemons } = require('../testing')

function packageTgz() {
  const dist = process.env.SPACES_DIST_DIR || path.join(REPO, 'dist')
  const tgz = fs.existsSync(dist) ? fs.readdirSync(dist).filter((f) => /^spaces-sdk-.*\.tgz$/.test(f)) : []
  assert.equal(tgz.length, 1, `want one spaces-sdk-*.tgz in ${dist}: run scripts/dist (scripts/test does)`)
  return path.join(dist, tgz[0])
}

test('the packed SDK installs with no Rust and starts its daemon', async () => {
  const tgz = packageTgz()
  const dir = tempDir('spaces-dist-')
  const stateDir = path.join(dir, 'state')
  // A `cargo` first on PATH that fails the install if anything calls it (a system cargo in
  // /usr/bin stays behind it, never reached), then node's own directory and the system's.
  const noRust = path.join(dir, 'no-rust')
  fs.mkdirSync(noRust)
  for (const tool of ['cargo', 'rustc']) {
    fs.writeFileSync(path.join(noRust, tool), `#!/bin/sh\necho "${tool} was called: the package must need no Rust" >&2\nexit 99\n`, { mode: 0o755 })
  }
  const env = { ...process.env, PATH: `${noRust}:${path.dirname(process.execPath)}:/usr/bin:/bin` }
  delete env.SPACES_NODE_SKIP_BUILD
  try {
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'user-project', private: true }))
    execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', tgz], { cwd: dir, env, stdio: 'pipe', timeout: 120_000 })
    const installed = path.join(dir, 'node_modules', '@spaces', 'sdk')
    assert.ok(fs.existsSync(path.join(installed, 'spaces.linux-x64-gnu.node')), 'the prebuilt native module is installed')
    // A command in a Space: the project (and the package in it) lives under /tmp, which every
    // sandbox hides; the daemon shows the package to the sandbox's helper (SPACES_SELF_PATHS).
    const spaceDir = path.join(dir, 'space')
    fs.mkdirSync(spaceDir)
    const script = `
const { Spaces } = require('@spaces/sdk')
async function main() {
  const spaces = new Spaces({ stateDir: process.argv[1] })
  console.log(JSON.stringify(await spaces.listSpaces()))
  await spaces.addSpace('t', process.argv[2])
  const space = spaces.space('t')
  const { process_id } = await space.execCommand({ command: ['sh', '-c', 'echo hello from $PWD'] })
  let out = ''
  let cursor = 0
  for (;;) {
    const page = await space.readProcess({ process_id, cursor, wait_ms: 2000 })
    out += page.chunk
    cursor = page.cursor
    if (page.eof) break
  }
  console.log(out.trim())
  await spaces.close()
}
main()
`
    const out = execFileSync(process.execPath, ['-e', script, stateDir, spaceDir], { cwd: dir, env, encoding: 'utf8', timeout: 60_000 })
    const [spaces, said] = out.trim().split('\n')
    assert.equal(spaces, '[]', 'a fresh daemon of the installed package answers with no Spaces')
    assert.equal(said, `hello from ${spaceDir}`, 'a command runs in its sandbox')
  } finally {
    await killDaemons(stateDir)
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
