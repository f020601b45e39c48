// The Node SDK end to end: the SDK starts the daemon of a clean state dir, the real Claude Code
// CLI (SPACES_TOOLS_DIR) runs against the scripted model endpoint through `Space`, the
// CodeSpace loop runs through `Space`, bad input rejects with typed errors, the main thread
// stays free while a call waits, and the README's example runs as written.
'use strict'
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { execFile, spawn } = require('node:child_process')
const net = require('node:net')

const { Spaces, Space, SpacesError, catalogue } = require('..')
const { PKG, REPO, tempDir, sleep, scriptedModel, daemonPids, killDaemons, alive } = require('../testing')

const TURN_MS = 90_000
// `s` hosts the agent run, `c` the CodeSpace calls (a Space refuses patches and commands with
// WORKSPACE_BUSY while a process of it runs).
let dir, stateDir, spaceDir, codeDir, model, spaces, space, code, daemonPid

before(async () => {
  dir = tempDir('spaces-node-')
  stateDir = path.join(dir, 'state')
  spaceDir = path.join(dir, 'space')
  codeDir = path.join(dir, 'code')
  fs.mkdirSync(spaceDir)
  fs.mkdirSync(codeDir)
  model = await scriptedModel(
    dir,
    {
      replies: [
        { tool_call: { name: 'Write', input: { file_path: '{{SPACE_DIR}}/hello.txt', content: 'hello from the agent\n' } } },
        { text: 'I created hello.txt.' },
        { text: 'The file is still there.' },
        { slow_text: { text: 'a very long answer that will be cut', chunks: 60, delay_ms: 500 } },
      ],
      fallback: { text: 'done' },
    },
    { SPACE_DIR: spaceDir },
  )
  spaces = new Spaces({ stateDir })
  space = spaces.space('s')
  code = spaces.space('c')
})

after(async () => {
  await model?.stop()
  await killDaemons(stateDir)
  if (daemonPid) assert.ok(!alive(daemonPid), 'the daemon the SDK started is ended')
  fs.rmSync(dir, { recursive: true, force: true })
})

// Follows `runId` from `cursor` until an event matches `pred` (agentFollow ends whenever the run
// is idle and caught up, so it is resumed until the deadline). Resolves to {event, cursor}.
async function followUntil(runId, cursor, pred, what) {
  const deadline = Date.now() + TURN_MS
  const seen = []
  while (Date.now() < deadline) {
    for await (const ev of space.agentFollow(runId, cursor)) {
      cursor = ev.seq
      seen.push(`${ev.turn}:${ev.kind}`)
      if (pred(ev)) return { event: ev, cursor }
    }
    await sleep(100)
  }
  assert.fail(`no ${what} within ${TURN_MS} ms; events: ${seen.join(' ')}`)
}

async function waitStatus(runId, pred, what) {
  const deadline = Date.now() + TURN_MS
  let st
  while (Date.now() < deadline) {
    st = await space.agentStatus(runId)
    if (pred(st)) return st
    await sleep(100)
  }
  assert.fail(`${what}: ${st && st.json}`)
}

function checkRecord(rec, fields) {
  const wire = JSON.parse(rec.json)
  for (const [name, type] of Object.entries(fields)) {
    const snake = name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)
    assert.ok(snake in wire, `${snake} in ${rec.json}`)
    assert.deepEqual(rec[name], wire[snake], `${name} mirrors ${snake}`)
    const v = rec[name]
    const ok = type.endsWith('?') && v === null ? true : type.replace('?', '') === 'array' ? Array.isArray(v) : typeof v === type.replace('?', '')
    assert.ok(ok, `${name} is ${type}: ${JSON.stringify(v)}`)
  }
}

const START_REPORT = { runId: 'string', agent: 'string', space: 'string', processTag: 'string', notes: 'array' }
const RUN_STATUS = {
  runId: 'string', agent: 'string?', status: 'string', reason: 'string', phase: 'string',
  resultText: 'string?', acceptsMessage: 'boolean', outputTail: 'string?',
}
const ACTION_REPORT = { runId: 'string', ok: 'boolean', reason: 'string' }

test('the SDK starts the daemon of a clean state dir, detached, from the package', async () => {
  assert.ok(!fs.existsSync(stateDir))
  const rec = await spaces.addSpace('s', spaceDir)
  assert.equal(rec.name, 's')
  daemonPid = await spaces.daemonPid()
  assert.equal(typeof daemonPid, 'number')
  assert.deepEqual(daemonPids(stateDir), [daemonPid], 'the daemon runs node daemon.js --state-dir DIR')
  assert.ok(fs.existsSync(path.join(stateDir, 'spacesd.sock')))
  // A second client finds it answering and starts nothing.
  const again = new Spaces({ stateDir })
  assert.deepEqual((await again.listSpaces()).map((s) => s.name), ['s'])
  assert.equal(await again.daemonPid(), null)
  const caps = JSON.parse(await spaces.agentCapabilities())
  assert.ok(JSON.stringify(caps).includes('claude-code'))
})

test('every operation of the catalogue is a method; CodeSpace tools and agent runs are on Space', () => {
  const camel = (s) => s.replace(/_([a-z])/g, (_, c) => c.toUpperCase())
  for (const op of catalogue) {
    assert.equal(typeof Spaces.prototype[camel(op.name)], 'function', op.name)
    // The catalogue says which sit on Space (spaces_sdk::methods, the rule Python reads too):
    // an operator operation that names a space (agent_remove) stays on Spaces only.
    if (op.onSpace) {
      assert.equal(typeof Space.prototype[camel(op.name)], 'function', `Space.${camel(op.name)}`)
    } else {
      assert.equal(Space.prototype[camel(op.name)], undefined, `Space.${camel(op.name)} is not a Space operation`)
    }
  }
  for (const m of ['read', 'find', 'applyPatch', 'execCommand', 'readProcess', 'agentStart', 'agentFollow']) {
    assert.equal(typeof Space.prototype[m], 'function', m)
  }
})

test('claude-code through Space: follow to turn_ended, follow-up, interrupt a long turn, stop', async () => {
  const started = await space.agentStart('claude-code', 'Create hello.txt please', null, { baseUrl: model.url, label: 'file maker' })
  checkRecord(started, START_REPORT)
  assert.equal(started.agent, 'claude-code')
  assert.equal(started.space, 's')
  const run = started.runId

  // Turn 1: the Write tool call, then the answer.
  let { event, cursor } = await followUntil(run, 0, (e) => e.kind === 'turn_ended', 'turn_ended (turn 1)')
  assert.equal(event.stop_reason, 'end_turn')
  assert.equal(fs.readFileSync(path.join(spaceDir, 'hello.txt'), 'utf8'), 'hello from the agent\n')
  let st = await waitStatus(run, (s) => s.acceptsMessage, 'idle after turn 1')
  checkRecord(st, RUN_STATUS)
  assert.equal(st.resultText, 'I created hello.txt.')
  assert.equal(st.status, 'idle')
  assert.equal(st.label, 'file maker')
  assert.equal(st.promptExcerpt, 'Create hello.txt please')

  // agentFollow reads the daemon's event stream (SSE): from 0 every event of the settled turn
  // once, in order, ending on its own (the run is idle); from a cursor in the middle, the rest.
  const follow = space.agentFollow(run, 0)
  assert.equal(follow.transport, 'unopened')
  const all = []
  for await (const ev of follow) all.push(ev)
  assert.equal(follow.transport, 'sse')
  assert.deepEqual(all.map((e) => e.seq), all.map((_, i) => i + 1))
  assert.equal(follow.cursor, all[all.length - 1].seq)
  // Each answer once: the streamed pieces are their own kind (`message_delta`), not `message`.
  assert.deepEqual(all.filter((e) => e.kind === 'message').map((e) => e.text), ['I created hello.txt.'])
  assert.ok('I created hello.txt.'.startsWith(all.filter((e) => e.kind === 'message_delta').map((e) => e.text).join('')))
  const middle = all[Math.floor(all.length / 2)].seq
  const rest = []
  for await (const ev of space.agentFollow(run, middle)) rest.push(ev)
  assert.deepEqual(rest, all.slice(middle))
  await assert.rejects(async () => { for await (const _ of space.agentFollow('run-000000000000')) { /* none */ } }, { code: 'RUN_NOT_FOUND' })
  await assert.rejects(async () => { for await (const _ of space.agentFollow(run, 0, { until: 'forever' })) { /* none */ } }, { code: 'INVALID_ARGUMENT' })
  assert.throws(() => space.agentFollow(run, 0, { waitMs: 5 }), { code: 'INVALID_ARGUMENT', field: 'waitMs' })
  // Issue 34: turn 1's diff (the Write tool's file) comes before its end; agentDiff answers it.
  const diffs = all.filter((e) => e.kind === 'turn_diff')
  assert.deepEqual(diffs.map((e) => e.files), [[{ path: 'hello.txt', change: 'added', added_lines: 1, removed_lines: 0, binary: false }]])
  assert.ok(all.indexOf(diffs[0]) < all.findIndex((e) => e.kind === 'turn_ended'))
  const diff = await space.agentDiff({ run_id: run, turn: 1 })
  assert.equal(diff.from_turn, 0)
  assert.ok(diff.diff.includes('+hello from the agent'), diff.diff)
  const page = JSON.parse(await space.agentEvents(run, 0, 2))
  assert.deepEqual(Object.keys(page).sort(), ['caught_up', 'cursor', 'events', 'status'])
  assert.equal(page.events.length, 2)

  // Turn 2: a follow-up in the same session.
  const msg = await space.agentMessage(run, 'Is the file still there?', null, 'node-turn-2')
  checkRecord(msg, ACTION_REPORT)
  assert.ok(msg.ok, msg.json)
  // The same messageId again (a retry): the first report, nothing delivered twice; with another
  // text it is refused naming the key.
  assert.deepEqual(JSON.parse((await space.agentMessage(run, 'Is the file still there?', null, 'node-turn-2')).json), JSON.parse(msg.json))
  await assert.rejects(space.agentMessage(run, 'something else', null, 'node-turn-2'), { code: 'OPERATION_KEY_CONFLICT', field: 'message_id' })
  ;({ event, cursor } = await followUntil(run, cursor, (e) => e.kind === 'turn_ended' && e.turn === 2, 'turn_ended (turn 2)'))
  st = await waitStatus(run, (s) => s.acceptsMessage, 'idle after turn 2')
  assert.equal(st.resultText, 'The file is still there.')

  // The usage ledger through the SDK: a row per ended turn, summing to the status's totals; a
  // budget set through the client's operator method.
  const usage = await space.agentUsage({ run_id: run, turns: true })
  assert.deepEqual(usage.totals, st.usage)
  assert.equal(st.usage.turns, 2)
  assert.ok(st.usage.input_tokens > 0, JSON.stringify(st.usage))
  assert.equal(usage.turns.reduce((n, t) => n + t.input_tokens, 0), st.usage.input_tokens)
  const budget = await spaces.agentBudget({ space: 's', run_id: run, budget: { turns: 10 } })
  assert.deepEqual(budget.budget, { turns: 10 })
  assert.deepEqual(budget.usage, st.usage)
  assert.deepEqual((await space.agentStatus(run)).budget, { turns: 10 })

  // Turn 3: a long streamed answer, interrupted once the model is streaming.
  assert.ok((await space.agentMessage(run, 'talk slowly')).ok)
  const deadline = Date.now() + TURN_MS
  while (model.calls() < 4) {
    assert.ok(Date.now() < deadline, 'the CLI never asked the model for turn 3')
    await sleep(50)
  }
  await sleep(700)
  const intr = await space.agentInterrupt(run)
  checkRecord(intr, ACTION_REPORT)
  assert.ok(intr.ok, intr.json)
  ;({ event } = await followUntil(run, cursor, (e) => e.kind === 'turn_ended' && e.turn === 3, 'turn_ended (turn 3)'))
  assert.equal(event.stop_reason, 'interrupted')

  const list = await space.agentList()
  assert.deepEqual(list.map((r) => r.runId), [run])
  checkRecord(list[0], RUN_STATUS)

  const stop = await space.agentStop(run)
  checkRecord(stop, ACTION_REPORT)
  assert.ok(stop.ok, stop.json)
  st = await space.agentStatus(run)
  assert.equal(st.status, 'stopped', st.json)
})

test('the CodeSpace loop through Space: read, applyPatch, execCommand, readProcess', async () => {
  await spaces.addSpace('c', codeDir)
  fs.writeFileSync(path.join(codeDir, 'notes.md'), 'one\n')
  const file = await code.read({ path: 'notes.md' })
  assert.equal(file.content, 'one\n')
  assert.match(file.version, /^sha256:/)
  const found = await code.find({ glob: '*.md' })
  assert.ok(JSON.stringify(found).includes('notes.md'))
  const patch = '*** Begin Patch\n*** Update File: notes.md\n@@\n-one\n+ONE\n*** End Patch\n'
  const applied = await code.applyPatch({ patch, expected_versions: { 'notes.md': file.version }, operation_key: 'node-1' })
  assert.deepEqual(applied.files, ['notes.md'])
  assert.equal(fs.readFileSync(path.join(codeDir, 'notes.md'), 'utf8'), 'ONE\n')
  const proc = await code.execCommand({ command: ['cat', 'notes.md'] })
  assert.match(proc.process_id, /./)
  let out = ''
  let cursor = 0
  for (let i = 0; i < 50; i++) {
    const r = await code.readProcess({ process_id: proc.process_id, cursor, wait_ms: 2000 })
    out += r.chunk
    cursor = r.cursor
    if (r.eof) break
  }
  assert.equal(out, 'ONE\n')
  // The Space takes patches again once the command has exited (its output can end first).
  let status
  for (let i = 0; i < 100; i++) {
    status = await code.processStatus({ process_id: proc.process_id })
    if (status.state !== 'running') break
    await sleep(50)
  }
  assert.equal(status.exit_code, 0, JSON.stringify(status))
  // A stale version is refused with the typed error.
  await assert.rejects(code.applyPatch({ patch, expected_versions: { 'notes.md': file.version } }), { code: 'VERSION_CONFLICT' })
})

test('bad input rejects with SpacesError and the right code', async () => {
  await assert.rejects(space.agentStatus('run-nope'), (e) => e instanceof SpacesError && e.code === 'RUN_NOT_FOUND')
  await assert.rejects(spaces.space('nope').agentList(), { code: 'WORKSPACE_NOT_FOUND' })
  await assert.rejects(spaces.space('nope').read({ path: 'x' }), { code: 'WORKSPACE_NOT_FOUND' })
  // Raw JSON: the contract's keys are snake_case; `baseUrl` is an unknown key, named.
  await assert.rejects(
    spaces.call('agent_start', { space: 's', agent: 'claude-code', prompt: 'x', options: { baseUrl: model.url } }),
    (e) => e.code === 'INVALID_ARGUMENT' && e.field === 'options.baseUrl' && e.message.includes('baseUrl'),
  )
  // camelCase options are converted; a misspelling still fails, named as written.
  await assert.rejects(
    space.agentStart('claude-code', 'x', null, { baseURL: model.url }),
    (e) => e.code === 'INVALID_ARGUMENT' && e.field === 'options.baseURL' && e.message.includes('baseURL'),
  )
  await assert.rejects(space.agentStart('claude-code', 'x', null, { exitWhenIdel: true }), { code: 'INVALID_ARGUMENT', field: 'options.exitWhenIdel' })
  // Idempotency keys reach the daemon: a malformed one is refused naming its field.
  await assert.rejects(space.agentStart('claude-code', 'x', null, null, 'not a key'), { code: 'INVALID_ARGUMENT', field: 'request_id' })
  // Wrong types.
  await assert.rejects(space.agentStatus('run-x', 'ten'), { code: 'INVALID_ARGUMENT' })
  await assert.rejects(space.agentStart('claude-code', 42), { code: 'INVALID_ARGUMENT' })
  await assert.rejects(space.read({ path: 7 }), { code: 'INVALID_ARGUMENT' })
  await assert.rejects(spaces.call('no_such_op', {}), (e) => e.code === 'INVALID_ARGUMENT' && /unknown operation/.test(e.message))
  assert.throws(() => new Spaces({ stateDri: '/tmp' }), { code: 'INVALID_ARGUMENT' })
  await assert.rejects(new Spaces({ url: 'http://127.0.0.1:1' }).listSpaces(), { code: 'INVALID_ARGUMENT' })
  await assert.rejects(new Spaces({ url: 'http://127.0.0.1:1', token: 't' }).listSpaces(), { code: 'DAEMON_UNREACHABLE' })
})

test('persistent agents and homes are Spaces methods: a home listed, an unknown agent refused', async () => {
  assert.ok(Array.isArray(await spaces.homeList()))
  await assert.rejects(
    spaces.persistentAgentSend({ name: 'nobody-here', text: 'hi' }),
    (e) => e.code === 'INVALID_ARGUMENT' && e.message.includes('nobody-here'),
  )
  await assert.rejects(spaces.homeSnapshots({ name: '../x' }), { code: 'INVALID_ARGUMENT' })
})

test('the Node main thread is not held while a call waits', async () => {
  const proc = await code.execCommand({ command: ['sleep', '2'] })
  let ticks = 0
  const timer = setInterval(() => ticks++, 20)
  const t0 = Date.now()
  const r = await code.readProcess({ process_id: proc.process_id, wait_ms: 1000 })
  const waited = Date.now() - t0
  clearInterval(timer)
  assert.equal(r.chunk, '')
  assert.ok(waited >= 900, `the call long-polled (${waited} ms)`)
  assert.ok(ticks >= waited / 20 / 2, `${ticks} ticks in ${waited} ms`)
})

test('the README example runs exactly as written', async () => {
  const readme = fs.readFileSync(path.join(REPO, 'README.md'), 'utf8')
  const section = readme.slice(readme.indexOf('## Node SDK'))
  const example = section.match(/```js\n([\s\S]*?)```/)[1]
  assert.ok(example.split('\n').filter(Boolean).length <= 10, example)
  const work = tempDir('spaces-node-readme-')
  // The state dir lives outside the folder the example registers: a Space may not contain it.
  const home = tempDir('spaces-node-readme-home-')
  fs.mkdirSync(path.join(work, 'node_modules', '@spaces'), { recursive: true })
  fs.symlinkSync(PKG, path.join(work, 'node_modules', '@spaces', 'sdk'))
  fs.writeFileSync(path.join(work, 'example.js'), example)
  try {
    const stdout = await new Promise((resolve, reject) =>
      execFile(process.execPath, ['example.js'], { cwd: work, env: { ...process.env, SPACES_HOME: home }, timeout: 60_000 }, (err, out, errOut) =>
        err ? reject(new Error(`${err.message}\n${errOut}`)) : resolve(out),
      ),
    )
    assert.equal(stdout.trim(), 'hello from a Space | 0 agent runs')
  } finally {
    const pids = await killDaemons(home)
    assert.equal(pids.length, 1, 'the example started one daemon')
    fs.rmSync(work, { recursive: true, force: true })
    fs.rmSync(home, { recursive: true, force: true })
  }
})

test('the committed types are what the build writes: native.d.ts matches the module, index.d.ts the catalogue', () => {
  const { generate } = require('../gen-types.js')
  assert.equal(fs.readFileSync(path.join(PKG, 'index.d.ts'), 'utf8'), generate(), 'index.d.ts is stale: npm run build')
  const dts = fs.readFileSync(path.join(PKG, 'native.d.ts'), 'utf8')
  const declared = [...dts.matchAll(/export declare (?:function|class|const) (\w+)/g)].map((m) => m[1]).sort()
  const exported = Object.keys(require('../native.js')).sort()
  assert.deepEqual(declared, exported, 'native.d.ts is stale: npm run build')
})

test('url + token reach a daemon over TCP', async () => {
  const port = await new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port: free } = srv.address()
      srv.close(() => resolve(free))
    })
  })
  const tcpState = path.join(dir, 'tcp-state')
  const child = spawn(process.execPath, [path.join(PKG, 'daemon.js'), '--state-dir', tcpState, 'serve', '--tcp', `127.0.0.1:${port}`], {
    stdio: 'ignore',
  })
  try {
    const tokenFile = path.join(tcpState, 'token')
    const url = `http://127.0.0.1:${port}`
    let listed = null
    for (let i = 0; i < 200 && listed === null; i++) {
      await sleep(50)
      if (!fs.existsSync(tokenFile)) continue
      const remote = new Spaces({ url, token: fs.readFileSync(tokenFile, 'utf8').trim() })
      listed = await remote.listSpaces().catch((e) => (e.code === 'DAEMON_UNREACHABLE' ? null : Promise.reject(e)))
    }
    assert.deepEqual(listed, [])
    await assert.rejects(new Spaces({ url, token: 'wrong' }).listSpaces(), { code: 'UNAUTHORIZED' })
  } finally {
    child.kill('SIGTERM')
    await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.on('exit', resolve)))
  }
})
