// Shared by the node:test suite (test/)  and the benchmark: temp dirs, the scripted model endpoint
// (testkit's `scripted-model`), and finding and ending the detached daemons the SDK starts.
'use strict'
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')

const PKG = __dirname
const REPO = path.resolve(PKG, '..', '..')
const TARGET = process.env.CARGO_TARGET_DIR || path.join(REPO, 'target')

function tempDir(prefix) {
  return fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)))
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Starts `scripted-model` with `script` (JSON form of the testkit's Script); resolves to {url, calls(), stop()}. */
async function scriptedModel(dir, script, vars = {}) {
  const file = path.join(dir, 'model.json')
  fs.writeFileSync(file, JSON.stringify(script))
  const bin = path.join(TARGET, 'debug', 'scripted-model')
  if (!fs.existsSync(bin)) throw new Error(`${bin} is missing: run \`cargo build -p spaces-testkit --bins\``)
  const args = ['--wire', 'anthropic', '--script', file]
  for (const [k, v] of Object.entries(vars)) args.push('--var', `${k}=${v}`)
  const log = path.join(dir, 'model.log')
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', fs.openSync(log, 'a')] })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  const url = await new Promise((resolve, reject) => {
    let out = ''
    let listening = false
    child.stdout.on('data', (d) => {
      out += d
      const m = out.match(/listening on (\S+)/)
      if (m) {
        listening = true
        resolve(m[1])
      }
    })
    // Only before it listened: once it did, its exit (stop() below) is expected, and its log
    // may be gone with the test's temp dir by then.
    exited.then((code) => {
      if (!listening) reject(new Error(`scripted-model exited ${code}: ${fs.readFileSync(log, 'utf8')}`))
    })
  })
  return {
    url,
    calls: () => (fs.readFileSync(log, 'utf8').match(/model_call=true/g) || []).length,
    /** SIGTERMs it (SIGKILL after 5 s); resolves once it has exited (await it before removing `dir`). */
    stop: () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM')
        const kill = setTimeout(() => child.kill('SIGKILL'), 5000)
        exited.then(() => clearTimeout(kill))
      }
      return exited
    },
  }
}

/** Pids of daemons running this package's daemon.js for `stateDir` (found in /proc). */
function daemonPids(stateDir) {
  const pids = []
  for (const ent of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(ent)) continue
    let argv
    try {
      argv = fs.readFileSync(`/proc/${ent}/cmdline`, 'utf8').split('\0')
    } catch {
      continue
    }
    // `serve`: not the sandboxes of its runs and commands, whose command lines name both.
    if (argv.some((a) => a.endsWith('daemon.js')) && argv.includes(stateDir) && argv.includes('serve')) pids.push(Number(ent))
  }
  return pids
}

const alive = (pid) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** SIGTERMs the daemons of `stateDir` (they are detached by design) and waits until they are gone. */
async function killDaemons(stateDir) {
  const pids = daemonPids(stateDir)
  for (const pid of pids) process.kill(pid, 'SIGTERM')
  for (let i = 0; i < 100 && pids.some(alive); i++) await sleep(50)
  for (const pid of pids.filter(alive)) process.kill(pid, 'SIGKILL')
  return pids
}

module.exports = { PKG, REPO, TARGET, tempDir, sleep, scriptedModel, daemonPids, killDaemons, alive }
