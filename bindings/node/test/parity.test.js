// The two SDKs agree (issue 32): the same methods on `Spaces` and `Space`, the same record and
// option fields, the same error class and client-side codes, each checked against the
// operation table (the native catalogue, and docs/openapi.json's schemas, generated from the
// same table). The Python surface is read from the Python SDK built into the test venv
// (`SPACES_TEST_VENV`, else <repo>/.venv-test: scripts/test builds it there with `maturin
// develop` before this suite runs); a missing venv fails the test with the command that makes it.
'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync } = require('node:child_process')

const sdk = require('..')

const REPO = path.join(__dirname, '..', '..', '..')
const snake = (s) => s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)
const sorted = (xs) => [...new Set(xs)].sort()

// What the Python SDK offers, as JSON.
const PY_SURFACE = `
import dataclasses, inspect, json
import spaces
def methods(cls):
    names = [n for n, v in inspect.getmembers(cls) if not n.startswith('_') and callable(v)]
    return names
out = {
    'spaces': methods(spaces.Spaces) + ['daemon_pid'],
    'space': methods(spaces.Space),
    'records': {c.__name__: [f.name for f in dataclasses.fields(c)] for c in
                (spaces.AgentRunStatus, spaces.AgentStartReport, spaces.AgentActionReport, spaces.SpaceAgentOptions)},
    'error': spaces.SpacesError.__name__,
    'spaces_options': [p for p in inspect.signature(spaces.Spaces.__init__).parameters if p != 'self'],
    'alias': spaces.CuaError is spaces.SpacesError,
}
print(json.dumps(out))
`

function pythonSurface() {
  const venv = process.env.SPACES_TEST_VENV || path.join(REPO, '.venv-test')
  const python = path.join(venv, 'bin', 'python')
  assert.ok(fs.existsSync(python), `no test venv at ${venv}: run scripts/test, which creates it and builds the Python SDK into it (maturin develop)`)
  return JSON.parse(execFileSync(python, ['-c', PY_SURFACE], { encoding: 'utf8' }))
}

// The Node SDK's public methods of a prototype chain, snake_cased.
function nodeMethods(proto) {
  const names = []
  for (let p = proto; p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const n of Object.getOwnPropertyNames(p)) {
      if (n !== 'constructor' && !n.startsWith('_') && typeof p[n] === 'function') names.push(snake(n))
    }
  }
  return sorted(names)
}

// The fields of `interface NAME` in index.d.ts, snake_cased (without `json`).
function nodeRecord(dts, name) {
  const body = dts.match(new RegExp(`export interface ${name} \\{([\\s\\S]*?)\\n\\}`))
  assert.ok(body, `index.d.ts has no interface ${name}`)
  return sorted([...body[1].matchAll(/^ {2}([a-zA-Z0-9]+)\??:/gm)].map((m) => snake(m[1])))
}

// The properties of a schema of the table (docs/openapi.json is generated from it).
function tableRecord(name) {
  const schemas = JSON.parse(fs.readFileSync(path.join(REPO, 'docs', 'openapi.json'), 'utf8')).components.schemas
  assert.ok(schemas[name], `docs/openapi.json has no schema ${name}`)
  return sorted(Object.keys(schemas[name].properties))
}

test('both SDKs offer the same methods, records, options and error class, as the table says', () => {
  const py = pythonSurface()
  const dts = fs.readFileSync(path.join(__dirname, '..', 'index.d.ts'), 'utf8')

  // Methods: every operation on Spaces, the Space's own on Space, plus the same helpers.
  // No call is made: the state dir only names where a daemon would be (removed at once).
  const stateDir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'spaces-parity-'))
  fs.rmSync(stateDir, { recursive: true, force: true })
  const spaces = new sdk.Spaces({ stateDir })
  const nodeSpaces = nodeMethods(Object.getPrototypeOf(spaces))
  const nodeSpace = nodeMethods(Object.getPrototypeOf(spaces.space('x')))
  assert.deepEqual(sorted(py.spaces), nodeSpaces, 'Spaces: Python (left) and Node (right) differ')
  assert.deepEqual(sorted(py.space), nodeSpace, 'Space: Python (left) and Node (right) differ')
  for (const op of sdk.catalogue) {
    assert.ok(nodeSpaces.includes(op.name), `Spaces lacks ${op.name}`)
    assert.equal(nodeSpace.includes(op.name), op.onSpace, `Space and ${op.name}: the table says onSpace=${op.onSpace}`)
  }

  // Records and options: the table's fields (+ `json` on records), in both.
  const records = [
    ['AgentRunStatus', 'RunStatus', true],
    ['AgentStartReport', 'AgentStartReport', true],
    ['AgentActionReport', 'ActionReport', true],
    ['SpaceAgentOptions', 'SpaceAgentOptions', false],
  ]
  for (const [sdkName, tableName, withJson] of records) {
    const want = sorted([...tableRecord(tableName), ...(withJson ? ['json'] : [])])
    assert.deepEqual(sorted(py.records[sdkName]), want, `Python ${sdkName} against the table's ${tableName}`)
    assert.deepEqual(nodeRecord(dts, sdkName), want, `Node ${sdkName} against the table's ${tableName}`)
  }

  // The same constructor options (Python keywords, Node's options object).
  const ctor = dts.match(/export declare class Spaces \{[\s\S]*?constructor\(options\?: \{([^}]*)\}\)/)
  assert.ok(ctor, 'index.d.ts: Spaces has no constructor(options?: {...})')
  const nodeOptions = sorted([...ctor[1].matchAll(/([a-zA-Z]+)\?:/g)].map((m) => snake(m[1])))
  assert.deepEqual(sorted(py.spaces_options), nodeOptions, 'Spaces options: Python (left) and Node (right) differ')

  // One error class name; Python keeps the source documents' CuaError as the same class.
  assert.equal(py.error, 'SpacesError')
  assert.equal(sdk.SpacesError.name, 'SpacesError')
  assert.equal(py.alias, true, 'Python: CuaError is SpacesError')
})

test('a daemon that does not answer has the same code in both SDKs', async () => {
  await assert.rejects(new sdk.Spaces({ url: 'http://127.0.0.1:1', token: 't' }).listSpaces(), { code: 'DAEMON_UNREACHABLE' })
  const venv = process.env.SPACES_TEST_VENV || path.join(REPO, '.venv-test')
  const code = execFileSync(
    path.join(venv, 'bin', 'python'),
    ['-c', `
import asyncio, spaces
async def main():
    try:
        await spaces.Spaces(url="http://127.0.0.1:1", token="t").list_spaces()
    except spaces.SpacesError as e:
        print(e.code)
asyncio.run(main())
`],
    { encoding: 'utf8' },
  ).trim()
  assert.equal(code, 'DAEMON_UNREACHABLE')
})
