// Builds the native module and writes the generated files (native.js, native.d.ts, index.d.ts),
// as `napi build --platform --js native.js --dts native.d.ts` does, but with cargo's default
// target: napi always passes `--target <host triple>`, which makes cargo compile every
// dependency a second time into target/<triple>/ (minutes cold, gigabytes), while this builds
// in target/debug or target/release beside the workspace's own builds (scripts/test runs the
// debug one and checks the generated files; scripts/dist builds the release module through
// install.js, which writes no generated file).
//
// The type definitions come from napi-derive's macros, which write them while the crate
// compiles when NAPI_TYPE_DEF_TMP_FOLDER is set (a folder under the target dir, one per
// profile, kept between builds so that a build cargo finds up to date still has them); the
// .d.ts and the loader are rendered by @napi-rs/cli's own functions (generateTypeDef,
// writeJsBinding) with the options `napi build` passes them, so the output is the same.
//
// Usage: node scripts/build.js [--release]
//   npm run build           # debug: the module and the generated files
//   npm run build:release   # the same, release profile
// Needs Rust (cargo) and `npm ci` in this folder (for @napi-rs/cli). Exits non-zero with
// cargo's or napi's error.
'use strict'
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { buildModule } = require('./install.js')

const root = path.resolve(__dirname, '..')
const release = process.argv.includes('--release')
const profile = release ? 'release' : 'debug'

function cargoTargetDir() {
  const meta = JSON.parse(
    execFileSync('cargo', ['metadata', '--format-version', '1', '--no-deps'], { cwd: root, maxBuffer: 1 << 28 }).toString(),
  )
  return meta.target_directory
}

async function main() {
  const { generateTypeDef, writeJsBinding, readNapiConfig } = await import('@napi-rs/cli')
  const config = await readNapiConfig(path.join(root, 'package.json'))
  const typeDefDir = path.join(cargoTargetDir(), 'napi-type-defs', profile)
  fs.mkdirSync(typeDefDir, { recursive: true })
  const env = { ...process.env, NAPI_TYPE_DEF_TMP_FOLDER: typeDefDir }
  // The crate's build script reruns (and the crate compiles again, so its macros write the
  // definitions) when this variable changes: only when the definitions are missing.
  const crate = 'spaces-node'
  if (!fs.existsSync(path.join(typeDefDir, crate))) env.NAPI_FORCE_BUILD_SPACES_NODE = String(Date.now())
  console.error(`@spaces/sdk: cargo build -p ${crate}${release ? ' --release' : ''}`)
  const lib = buildModule(release, env)
  if (!fs.existsSync(path.join(typeDefDir, crate))) throw new Error(`napi-derive wrote no type definitions into ${typeDefDir}`)
  // Written beside the final names, then renamed: no half-written file is ever loaded.
  const put = (name, write) => {
    const tmp = path.join(root, `.${name}.tmp-${process.pid}`)
    write(tmp)
    fs.renameSync(tmp, path.join(root, name))
  }
  put(`${config.binaryName}.linux-x64-gnu.node`, (tmp) => fs.copyFileSync(lib, tmp))
  // What `napi build --platform --js native.js --dts native.d.ts` passes (its Builder's
  // generateTypeDef and writeJsBinding): a root loader is written, so the .d.ts declares the
  // binding target.
  const { exports, dts } = await generateTypeDef({
    typeDefDir,
    configDtsHeader: config.dtsHeader,
    configDtsHeaderFile: config.dtsHeaderFile,
    constEnum: config.constEnum,
    runtimeStringEnum: config.runtimeStringEnum,
    cwd: root,
    declareBindingTarget: (names) => names.length > 0,
  })
  put('native.d.ts', (tmp) => fs.writeFileSync(tmp, dts))
  const staging = fs.mkdtempSync(path.join(root, '.napi-stage-'))
  try {
    const written = await writeJsBinding({
      platform: true,
      idents: exports,
      jsBinding: 'native.js',
      binaryName: config.binaryName,
      packageName: config.packageName,
      version: process.env.npm_new_version ?? config.packageJson.version,
      outputDir: staging,
    })
    if (!written) throw new Error('napi wrote no JS binding (no exports?)')
    put('native.js', (tmp) => fs.copyFileSync(written.path, tmp))
  } finally {
    fs.rmSync(staging, { recursive: true, force: true })
  }
  // index.d.ts: the seed's types and one method per operation of the native catalogue.
  execFileSync(process.execPath, [path.join(root, 'gen-types.js')], { cwd: root, stdio: 'inherit' })
}

main().catch((e) => {
  console.error(`@spaces/sdk: build failed: ${e.message ?? e}`)
  process.exit(1)
})
