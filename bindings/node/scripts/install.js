// `npm install` of this package builds its native module with cargo (release profile) when the
// package carries none, so `npm install ./bindings/node` needs Rust and nothing else.
// SPACES_NODE_SKIP_BUILD=1 skips it (contributors run `npm run build`, scripts/test does too).
// `buildModule` is also what scripts/build.js (`npm run build`) compiles with.
'use strict'
const { existsSync, copyFileSync } = require('node:fs')
const { execFileSync } = require('node:child_process')
const path = require('node:path')

const root = path.resolve(__dirname, '..')

/**
 * Runs `cargo build -p spaces-node` (with `--release` when `release`) in this package with
 * `env`, cargo's progress on stderr; returns the path of the libspaces_node.so it built.
 * Throws cargo's failure, or when cargo names no such library.
 */
function buildModule(release, env = process.env) {
  const args = ['build', '-p', 'spaces-node', '--message-format=json-render-diagnostics']
  if (release) args.push('--release')
  const out = execFileSync('cargo', args, { cwd: root, env, stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 28 }).toString()
  let lib = null
  for (const line of out.split('\n')) {
    if (!line.startsWith('{')) continue
    const msg = JSON.parse(line)
    if (msg.reason === 'compiler-artifact' && msg.target.name === 'spaces_node') {
      lib = msg.filenames.find((f) => f.endsWith('.so'))
    }
  }
  if (!lib) throw new Error('cargo built no libspaces_node.so')
  return lib
}

function main() {
  const target = path.join(root, `spaces.${process.platform}-${process.arch}-gnu.node`)
  if (process.env.SPACES_NODE_SKIP_BUILD || existsSync(target)) return
  if (process.platform !== 'linux') {
    console.error('@spaces/sdk: only Linux is supported (spacesd is a Linux daemon)')
    process.exit(1)
  }
  console.error('@spaces/sdk: building the native module with cargo (release); this takes a few minutes once')
  copyFileSync(buildModule(true), target)
}

if (require.main === module) main()

module.exports = { buildModule }
