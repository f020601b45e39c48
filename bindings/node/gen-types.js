// Writes index.d.ts, the types of index.js: the seed's methods and records (below, by hand) and
// one method per operation of the native catalogue (generated, so a new operation gets its
// types without code written by hand). `npm run build` runs it; the test suite checks that the
// committed file is what this script writes, so it cannot drift.
// Usage: node gen-types.js [--check]
'use strict'
const fs = require('node:fs')
const path = require('node:path')
const { catalogue } = require('./native.js')

const camel = (s) => s.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase())
const SEED_SPACES = new Set(['agentCapabilities'])
const SEED_SPACE = new Set(['agentStart', 'agentStatus', 'agentEvents', 'agentMessage', 'agentInterrupt', 'agentStop', 'agentList'])

function method(op, filled) {
  const fields = op.fields.filter((f) => !filled.includes(f))
  const props = fields.map((f) => `${f}${op.required.includes(f) ? '' : '?'}: any`).join('; ')
  const optional = fields.every((f) => !op.required.includes(f)) ? '?' : ''
  return [
    `  /** ${op.doc} (\`${op.name}\`: ${op.method} ${op.path}) */`,
    `  ${camel(op.name)}(args${optional}: { ${props} }): Promise<any>`,
  ].join('\n')
}

function generate() {
  const onSpaces = catalogue().filter((op) => !SEED_SPACES.has(camel(op.name)))
  const onSpace = catalogue().filter(
    (op) => op.onSpace && !SEED_SPACE.has(camel(op.name)),
  )
  const head = fs.readFileSync(path.join(__dirname, 'index.d.ts.in'), 'utf8')
  return head
    .replace('  // @generated Spaces operations', onSpaces.map((op) => method(op, [])).join('\n'))
    .replace('  // @generated Space operations', onSpace.map((op) => method(op, op.spaceField ? [op.spaceField] : [])).join('\n'))
}

module.exports = { generate }

if (require.main === module) {
  const out = path.join(__dirname, 'index.d.ts')
  const text = generate()
  if (process.argv.includes('--check')) {
    if (fs.readFileSync(out, 'utf8') !== text) {
      console.error('index.d.ts is stale: run `npm run build` in bindings/node')
      process.exit(1)
    }
  } else {
    fs.writeFileSync(out, text)
  }
}
