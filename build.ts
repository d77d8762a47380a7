/**
 * `bun run build`: compiles the gateway into one self-contained executable, dist/svc
 * (STACK-NOTES §7). Host target only: cross-compiling needs a Bun runtime for the other
 * target, which Bun would otherwise download.
 */
import type { BunPlugin } from 'bun'
import { parseArgs } from 'node:util'

// `--outfile PATH` lets a caller (test/e2e/binary.test.ts) build a private copy elsewhere.
const { values: flags } = parseArgs({ options: { outfile: { type: 'string', default: 'dist/svc' } } })
const OUTFILE = flags.outfile!

// Every file that runs as its own module in the binary. A Worker script must be listed here:
// `new Worker(new URL('./x.worker.ts', import.meta.url))` then resolves to the embedded copy.
const ENTRYPOINTS = [
  'src/cli.ts', // first entry = what the binary runs
  'src/documents/extract.worker.ts', // the extraction pool's Worker script (src/documents/pool.ts)
]

// libsql (index.js, and promise.js used by the background WAL checkpointer) picks its native addon with `require(`@libsql/${target}`)`, which the bundler cannot
// follow, so the .node file is not embedded and the binary only works with a node_modules
// above it. Rewrite that call to a static require of the host's addon. Bun reports a musl
// target on glibc Linux (libsql works around it at run time); the binary is glibc-linked.
const nativeTarget = `${process.platform}-${process.arch}${process.platform === 'linux' ? '-gnu' : ''}`
const DYNAMIC_REQUIRE = 'require(`@libsql/${target}`)'

const libsqlStaticNative: BunPlugin = {
  name: 'libsql-static-native',
  setup(build) {
    build.onLoad({ filter: /[\\/]node_modules[\\/]libsql[\\/](index|promise)\.js$/ }, async args => {
      const source = await Bun.file(args.path).text()
      // Fail loudly if a libsql upgrade changes the line: a silent miss builds a broken binary.
      if (!source.includes(DYNAMIC_REQUIRE)) throw new Error(`libsql-static-native: ${DYNAMIC_REQUIRE} not found in ${args.path}`)
      return { contents: source.replace(DYNAMIC_REQUIRE, `require(${JSON.stringify(`@libsql/${nativeTarget}`)})`), loader: 'js' }
    })
  },
}

const started = performance.now()
const result = await Bun.build({
  entrypoints: ENTRYPOINTS,
  compile: {
    outfile: OUTFILE,
    // Embedded at `import.meta.dir + '/drizzle'`; src/db/client.ts migrationsFolder() looks there first.
    assets: ['drizzle'],
    // Same behaviour in every working directory: never pick up a stray .env or bunfig.toml.
    autoloadDotenv: false,
    autoloadBunfig: false,
  },
  minify: true,
  plugins: [libsqlStaticNative],
  throw: false,
})

if (!result.success) {
  for (const log of result.logs) console.error(log)
  process.exit(1)
}
for (const log of result.logs) console.warn(log)
const size = Bun.file(OUTFILE).size
console.log(`built ${OUTFILE} (${(size / 1e6).toFixed(1)} MB, ${nativeTarget}) in ${Math.round(performance.now() - started)} ms`)
