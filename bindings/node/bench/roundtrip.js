// Round trip of `agent_status` and of an empty `agent_events` page: through the SDK
// (`space.agentStatus`, `space.agentEvents`: napi -> Rust client -> Unix socket) beside the
// same GETs made with plain `http.request` over the Unix socket (`socketPath`, a connection
// per request like the SDK's client), interleaved in one run against one daemon the SDK starts
// on a fresh state dir. The run is a real Claude Code run (SPACES_TOOLS_DIR) answered by the
// scripted model, idle after its first turn. Figures go to docs/benchmarks.md.
// Usage: node bench/roundtrip.js [iterations, default 2000]
'use strict'
const http = require('node:http')
const fs = require('node:fs')
const path = require('node:path')
const { Spaces } = require('..')
const { tempDir, sleep, scriptedModel, killDaemons } = require('../testing')

const N = Number(process.argv[2] || 2000)

function get(socketPath, urlPath) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path: urlPath, method: 'GET', agent: false, headers: { host: 'localhost' } }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d) => (body += d))
      res.on('end', () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`${res.statusCode} ${body}`))))
    })
    req.on('error', reject)
    req.end()
  })
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]
}

async function main() {
  const dir = tempDir('spaces-node-bench-')
  const stateDir = path.join(dir, 'state')
  const spaceDir = path.join(dir, 'space')
  fs.mkdirSync(spaceDir)
  const model = await scriptedModel(dir, { replies: [{ text: 'ready' }], fallback: { text: 'done' } })
  try {
    const spaces = new Spaces({ stateDir })
    await spaces.addSpace('s', spaceDir)
    const space = spaces.space('s')
    const { runId } = await space.agentStart('claude-code', 'say ready', null, { baseUrl: model.url })
    for (;;) {
      const st = await space.agentStatus(runId)
      if (st.acceptsMessage) break
      if (!['running', 'idle'].includes(st.status)) throw new Error(st.json)
      await sleep(100)
    }
    const cursor = JSON.parse(await space.agentEvents(runId, 0, 1000)).cursor
    const socket = path.join(stateDir, 'spacesd.sock')
    const base = `/v1/spaces/s/agents/${runId}`
    const cases = {
      'agent_status SDK': () => space.agentStatus(runId),
      'agent_status HTTP': () => get(socket, base),
      'agent_events (empty page) SDK': () => space.agentEvents(runId, cursor),
      'agent_events (empty page) HTTP': () => get(socket, `${base}/events?cursor=${cursor}`),
    }
    const names = Object.keys(cases)
    const times = Object.fromEntries(names.map((n) => [n, []]))
    const page = JSON.parse(await get(socket, `${base}/events?cursor=${cursor}`))
    if (page.events.length !== 0) throw new Error('the page is not empty')
    for (let i = 0; i < N + 100; i++) {
      // Interleaved, the order rotated every iteration.
      for (let k = 0; k < names.length; k++) {
        const name = names[(i + k) % names.length]
        const t0 = process.hrtime.bigint()
        await cases[name]()
        const us = Number(process.hrtime.bigint() - t0) / 1000
        if (i >= 100) times[name].push(us)
      }
    }
    console.log(`| call | p50 µs | p99 µs | n |`)
    console.log(`|---|---:|---:|---:|`)
    for (const n of names) console.log(`| ${n} | ${pct(times[n], 50).toFixed(0)} | ${pct(times[n], 99).toFixed(0)} | ${times[n].length} |`)
    await space.agentStop(runId)
  } finally {
    await model.stop()
    await killDaemons(stateDir)
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
