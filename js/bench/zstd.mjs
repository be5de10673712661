// Dictionary-compressed records in JavaScript: the package's TypeScript zstd
// decoder (src/zstd-frame.ts) against ruzstd compiled to WebAssembly
// (bench/ruzstd-wasm), on the shared corpus, in Node and headless Chromium.
//   cargo build --release --target wasm32-unknown-unknown --manifest-path js/bench/ruzstd-wasm/Cargo.toml
//   NOSTRWIRE_BIN=target/release/nostrwire node js/bench/zstd.mjs [--rounds 15] [--out results.json]
// Prints the sizes (min+gzip) and the median times of each decoder ("prepare
// set" is making the decoder: the TypeScript one checks every dictionary then
// and prepares each on first use, inside the first, untimed, rounds).
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir, cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { bin } from '../test/relay-process.mjs';
import { bundlePage, serveDir, launch, openPage } from '../test/browser/harness.mjs';
import { runBench } from './zstd-core.js';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const rounds = Number(opt('--rounds', '15'));
const js = resolve(new URL('..', import.meta.url).pathname);
const corpus = join(js, '../testdata/real-events.jsonl');
const wasmPath = join(js, 'bench/ruzstd-wasm/target/wasm32-unknown-unknown/release/nwb_ruzstd_wasm.wasm');

const dir = mkdtempSync(join(tmpdir(), 'nostrwire-zstd-bench-'));
const run = (...a) => execFileSync(bin, a, { maxBuffer: 1 << 28 });
run('dict', 'train', '--per-kind', '--corpus', corpus, '-o', join(dir, 'per-kind.nwbd'));
run('dict', 'train', '--corpus', corpus, '-o', join(dir, 'fallback.nwbd'));
for (const name of ['per-kind', 'fallback']) {
  run('convert', '--to', 'nwb', '--dict', join(dir, `${name}.nwbd`), '-o', join(dir, `${name}.nwb`), corpus);
}
copyFileSync(wasmPath, join(dir, 'ruzstd.wasm'));

// Sizes as a page loads them: the nostrwire/zstd entry bundled and minified
// on its own; ruzstd's module plus its glue.
const gz = (b) => gzipSync(b, { level: 9 }).length;
const bundled = async (entry) => {
  const r = await build({ entryPoints: [entry], bundle: true, minify: true, format: 'esm', platform: 'browser', target: 'es2022', write: false, logLevel: 'warning' });
  return r.outputFiles[0].contents;
};
const tsBundle = await bundled(join(js, 'src/zstd.ts'));
const glue = await bundled(join(js, 'bench/ruzstd-wasm/glue.js'));
const wasm = readFileSync(wasmPath);
const sizes = {
  typescript: { min: tsBundle.length, gzip: gz(tsBundle) },
  // The glue bundles parseDictionarySet from nostrwire/zstd: count the wasm
  // module and the glue without it as what ruzstd would add.
  ruzstd: { wasm: wasm.length, wasmGzip: gz(wasm), glueMin: glue.length, glueGzip: gz(glue) },
};

const streams = ['per-kind', 'fallback'].map((name) => ({
  name,
  set: new Uint8Array(readFileSync(join(dir, `${name}.nwbd`))),
  stream: new Uint8Array(readFileSync(join(dir, `${name}.nwb`))),
}));
const node = await runBench({ streams, wasm: new Uint8Array(wasm), rounds });
// The same with the process's CPU time as the clock: less swayed by other
// work on a shared machine than wall time (but it counts V8's helper threads).
const nodeCpu = await runBench({ streams, wasm: new Uint8Array(wasm), rounds, now: () => process.cpuUsage().user / 1000 });

let chromium = null;
if (!args.includes('--no-browser')) {
  await bundlePage(join(js, 'bench/zstd-page.js'), dir);
  const site = await serveDir(dir);
  const browser = await launch();
  try {
    const page = await openPage(browser, site.url);
    chromium = { version: await browser.version(), results: await page.evaluate((r) => window.run(r), rounds) };
  } finally {
    await browser.close();
    await site.close();
  }
}

const report = { date: new Date().toISOString(), nodeVersion: process.version, cpu: cpus()[0]?.model, cores: cpus().length, rounds, sizes, node, nodeCpu, chromium };
if (opt('--out')) writeFileSync(opt('--out'), JSON.stringify(report, null, 2) + '\n');
const kb = (n) => (n / 1000).toFixed(1);
console.log(`sizes: TypeScript nostrwire/zstd ${kb(sizes.typescript.min)} KB min, ${kb(sizes.typescript.gzip)} KB min+gzip; ruzstd wasm ${kb(sizes.ruzstd.wasm)} KB, ${kb(sizes.ruzstd.wasmGzip)} KB gzip (+ glue ${kb(sizes.ruzstd.glueGzip)} KB gzip)`);
for (const [where, results] of [[`Node ${process.version}`, node], [`Node ${process.version} (CPU time)`, nodeCpu], [chromium && chromium.version, chromium?.results]]) {
  if (!results) continue;
  for (const r of results) {
    const mbs = (ms) => ((r.decompressedBytes / 1e6) / (ms / 1e3)).toFixed(1);
    console.log(`${where}, ${r.stream} set: ${r.records} compressed records, ${(r.decompressedBytes / 1e6).toFixed(2)} MB out;` +
      ` zstd only: TypeScript ${r.zstdMs.typescript.toFixed(2)} ms (${mbs(r.zstdMs.typescript)} MB/s), ruzstd ${r.zstdMs.ruzstd.toFixed(2)} ms (${mbs(r.zstdMs.ruzstd)} MB/s);` +
      ` decodeEvents: TypeScript ${r.decodeEventsMs.typescript.toFixed(2)} ms, ruzstd ${r.decodeEventsMs.ruzstd.toFixed(2)} ms;` +
      ` prepare set: TypeScript ${r.prepareMs.typescript.toFixed(2)} ms, ruzstd ${r.prepareMs.ruzstd.toFixed(2)} ms`);
  }
}
