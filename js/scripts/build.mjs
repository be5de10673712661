// Builds dist/ from src/: one ES module per source file (what the package
// exports), its .d.ts files (tsc), and a minified browser bundle
// (dist/browser/) whose min+gzip size is the package size we report.
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { readdirSync, rmSync, readFileSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
rmSync(join(root, 'dist'), { recursive: true, force: true });

// The WebAssembly verifier, embedded in src/verifier-wasm-bytes.ts (a no-op
// when that is newer than its sources).
execFileSync(join(root, 'scripts/build-verifier.sh'), { stdio: 'inherit' });

const entries = readdirSync(join(root, 'src'))
  .filter((f) => f.endsWith('.ts'))
  .map((f) => join(root, 'src', f));
await build({
  entryPoints: entries,
  outdir: join(root, 'dist'),
  format: 'esm',
  platform: 'neutral',
  target: 'es2022',
  logLevel: 'warning',
});
execFileSync(join(root, 'node_modules/.bin/tsc'), ['-p', root], { stdio: 'inherit' });

// The browser bundle: the WebAssembly verifier is a chunk of its own,
// loaded on first use.
await build({
  entryPoints: [join(root, 'src/index.ts')],
  outdir: join(root, 'dist/browser'),
  bundle: true,
  splitting: true,
  minify: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  entryNames: 'nostrwire',
  chunkNames: 'chunk-[hash]',
  metafile: true,
  logLevel: 'warning',
});

// The verifier worker: one self-contained file beside the bundle, which
// `Relay` starts with `new URL('./verify-worker.js', import.meta.url)`.
await build({
  entryPoints: [join(root, 'src/verify-worker.ts')],
  outfile: join(root, 'dist/browser/verify-worker.js'),
  bundle: true,
  minify: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  logLevel: 'warning',
});

const dir = join(root, 'dist/browser');
const sizes = {};
// The package size counts what a page loads: the entry and the WebAssembly
// verifier chunk (a page that uses workers loads verify-worker.js too).
for (const f of readdirSync(dir).filter((f) => f.endsWith('.js') && f !== 'verify-worker.js')) {
  const bytes = readFileSync(join(dir, f));
  sizes[f] = { min: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length };
}
const main = sizes['nostrwire.js'];
const total = Object.values(sizes).reduce((a, s) => ({ min: a.min + s.min, gzip: a.gzip + s.gzip }), { min: 0, gzip: 0 });
// A module bundled and minified, as a bundler adds it to a page: its size
// minified and gzipped.
const minGzip = async (contents) => {
  const out = await build({
    stdin: { contents, resolveDir: join(root, 'src'), loader: 'ts' },
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    external: ['./verifier-wasm-bytes.js'],
    logLevel: 'warning',
  });
  const bytes = out.outputFiles[0].contents;
  return { min: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length };
};
// The opt-in zstd decoder (`nostrwire/zstd`) on its own: measured, not
// shipped as a bundle (it shares NwbError with the entry).
const zstd = await minGzip("export * from './zstd.ts';");
// `nostrwire/pool` on top of the entry, as a bundler adds it to a page that
// uses the package: the entry and the pool bundled together, less the entry
// alone (both without the WebAssembly chunk, which is the same).
const withPool = await minGzip("export * from './index.ts'; export * from './simple-pool.ts';");
const alone = await minGzip("export * from './index.ts';");
const pool = { min: withPool.min - alone.min, gzip: withPool.gzip - alone.gzip };
const report = { entry: main, total, files: sizes, zstd, pool };
writeFileSync(join(dir, 'sizes.json'), JSON.stringify(report, null, 2) + '\n');
console.log(`browser bundle: entry ${main.min} B min, ${main.gzip} B gzip; with the WebAssembly verifier ${total.min} B min, ${total.gzip} B gzip; nostrwire/zstd adds ${zstd.min} B min, ${zstd.gzip} B gzip; nostrwire/pool adds ${pool.min} B min, ${pool.gzip} B gzip`);
