// Dictionary-compressed records in JavaScript: the package's TypeScript zstd
// decoder (src/zstd-frame.ts) against ruzstd compiled to WebAssembly
// (bench/ruzstd-wasm) and against zstd in the package's WebAssembly module
// (crates/verify-wasm, src/zstd.rs), on the shared corpus, in Node and
// headless Chromium.
//   cargo build --release --target wasm32-unknown-unknown --manifest-path js/bench/ruzstd-wasm/Cargo.toml
//   VERIFIER_OUT=/tmp/verifier.wasm js/scripts/build-verifier.sh
//   NOSTRWIRE_BIN=target/release/nostrwire flock /tmp/nostrwire-bench.lock node js/bench/zstd.mjs \
//     --verifier /tmp/verifier.wasm [--verifier-base main.wasm] [--rounds 15] [--cold 7] [--out results.json]
// Prints the sizes (min+gzip) and the median times of each decoder ("prepare
// set" is making the decoder: the TypeScript one checks every dictionary then
// and prepares each on first use, inside the first, untimed, rounds), then
// the cold figures: the first decompression of the per-kind stream in a
// fresh Node process or Chromium page, median of --cold runs of each
// decoder, alternating.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir, cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { bin } from '../test/relay-process.mjs';
import { bundlePage, serveDir, launch, openPage } from '../test/browser/harness.mjs';
import { runBench, runCold } from './zstd-core.js';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const rounds = Number(opt('--rounds', '15'));
const coldRuns = Number(opt('--cold', '7'));
const js = resolve(new URL('..', import.meta.url).pathname);
const corpus = join(js, '../testdata/real-events.jsonl');
const wasmPath = join(js, 'bench/ruzstd-wasm/target/wasm32-unknown-unknown/release/nwb_ruzstd_wasm.wasm');

// A child doing one cold measurement (see runCold): `--cold-child which dir`.
if (opt('--cold-child')) {
  const which = opt('--cold-child');
  const d = args[args.indexOf('--cold-child') + 2];
  const set = new Uint8Array(readFileSync(join(d, 'per-kind.nwbd')));
  const stream = new Uint8Array(readFileSync(join(d, 'per-kind.nwb')));
  const verifier = new Uint8Array(readFileSync(join(d, 'verifier.wasm')));
  process.stdout.write(JSON.stringify(await runCold({ which, set, stream, verifier })));
  process.exit(0);
}
if (!opt('--verifier')) throw new Error('--verifier FILE: the module built by VERIFIER_OUT=FILE scripts/build-verifier.sh');

const dir = mkdtempSync(join(tmpdir(), 'nostrwire-zstd-bench-'));
const run = (...a) => execFileSync(bin, a, { maxBuffer: 1 << 28 });
run('dict', 'train', '--per-kind', '--corpus', corpus, '-o', join(dir, 'per-kind.nwbd'));
run('dict', 'train', '--corpus', corpus, '-o', join(dir, 'fallback.nwbd'));
for (const name of ['per-kind', 'fallback']) {
  run('convert', '--to', 'nwb', '--dict', join(dir, `${name}.nwbd`), '-o', join(dir, `${name}.nwb`), corpus);
}
copyFileSync(wasmPath, join(dir, 'ruzstd.wasm'));
copyFileSync(opt('--verifier'), join(dir, 'verifier.wasm'));
const verifier = new Uint8Array(readFileSync(opt('--verifier')));

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
  // The whole module (verifier and zstd), and without zstd if given.
  nostrwire: { wasm: verifier.length, wasmGzip: gz(verifier) },
};
if (opt('--verifier-base')) {
  const base = readFileSync(opt('--verifier-base'));
  sizes.nostrwireBase = { wasm: base.length, wasmGzip: gz(base) };
}

const streams = ['per-kind', 'fallback'].map((name) => ({
  name,
  set: new Uint8Array(readFileSync(join(dir, `${name}.nwbd`))),
  stream: new Uint8Array(readFileSync(join(dir, `${name}.nwb`))),
}));
const node = await runBench({ streams, wasm: new Uint8Array(wasm), verifier, rounds });
// The same with the process's CPU time as the clock: less swayed by other
// work on a shared machine than wall time (but it counts V8's helper threads).
const nodeCpu = await runBench({ streams, wasm: new Uint8Array(wasm), verifier, rounds, now: () => process.cpuUsage().user / 1000 });

const cold = { node: { typescript: [], nostrwire: [] }, chromium: { typescript: [], nostrwire: [] } };
for (let i = 0; i < coldRuns; i++) {
  for (const which of ['typescript', 'nostrwire']) {
    const out = execFileSync(process.execPath, [new URL(import.meta.url).pathname, '--cold-child', which, dir]);
    cold.node[which].push(JSON.parse(out));
  }
}

let chromium = null;
if (!args.includes('--no-browser')) {
  await bundlePage(join(js, 'bench/zstd-page.js'), dir);
  const site = await serveDir(dir);
  const browser = await launch();
  try {
    const page = await openPage(browser, site.url);
    chromium = { version: await browser.version(), results: await page.evaluate((r) => window.run(r), rounds) };
    await page.close();
    for (let i = 0; i < coldRuns; i++) {
      for (const which of ['typescript', 'nostrwire']) {
        const p = await openPage(browser, site.url);
        cold.chromium[which].push(await p.evaluate((w) => window.cold(w, 'per-kind'), which));
        await p.close();
      }
    }
  } finally {
    await browser.close();
    await site.close();
  }
}

const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const coldMedians = {};
for (const [where, byImpl] of Object.entries(cold)) {
  for (const [which, runs] of Object.entries(byImpl)) {
    if (!runs.length) continue;
    coldMedians[where] ??= {};
    coldMedians[where][which] = {
      runs: runs.length,
      prepareMs: med(runs.map((r) => r.prepareMs)),
      firstMs: med(runs.map((r) => r.firstMs)),
      ...(which === 'nostrwire' ? { instantiateMs: med(runs.map((r) => r.instantiateMs)) } : {}),
      bytes: runs[0].bytes,
    };
  }
}
const report = { date: new Date().toISOString(), loadavg: readFileSync('/proc/loadavg', 'utf8').trim(), nodeVersion: process.version, cpu: cpus()[0]?.model, cores: cpus().length, rounds, sizes, node, nodeCpu, chromium, cold: coldMedians, coldRuns: cold };
if (opt('--out')) writeFileSync(opt('--out'), JSON.stringify(report, null, 2) + '\n');
const kb = (n) => (n / 1000).toFixed(1);
console.log(`sizes: TypeScript nostrwire/zstd ${kb(sizes.typescript.min)} KB min, ${kb(sizes.typescript.gzip)} KB min+gzip; ruzstd wasm ${kb(sizes.ruzstd.wasm)} KB, ${kb(sizes.ruzstd.wasmGzip)} KB gzip (+ glue ${kb(sizes.ruzstd.glueGzip)} KB gzip)`);
console.log(`sizes: the package's module ${kb(sizes.nostrwire.wasm)} KB, ${kb(sizes.nostrwire.wasmGzip)} KB gzip` +
  (sizes.nostrwireBase ? ` (without zstd: ${kb(sizes.nostrwireBase.wasm)} KB, ${kb(sizes.nostrwireBase.wasmGzip)} KB gzip)` : ''));
for (const [where, results] of [[`Node ${process.version}`, node], [`Node ${process.version} (CPU time)`, nodeCpu], [chromium && chromium.version, chromium?.results]]) {
  if (!results) continue;
  for (const r of results) {
    const mbs = (ms) => ((r.decompressedBytes / 1e6) / (ms / 1e3)).toFixed(1);
    console.log(`${where}, ${r.stream} set: ${r.records} compressed records, ${(r.decompressedBytes / 1e6).toFixed(2)} MB out;` +
      ` zstd only: TypeScript ${r.zstdMs.typescript.toFixed(2)} ms (${mbs(r.zstdMs.typescript)} MB/s), ruzstd ${r.zstdMs.ruzstd.toFixed(2)} ms (${mbs(r.zstdMs.ruzstd)} MB/s),` +
      ` module per record ${r.zstdMs.nostrwire.toFixed(2)} ms (${mbs(r.zstdMs.nostrwire)} MB/s), module batch ${r.zstdMs.batch.toFixed(2)} ms (${mbs(r.zstdMs.batch)} MB/s);` +
      ` decodeEvents: TypeScript ${r.decodeEventsMs.typescript.toFixed(2)} ms, ruzstd ${r.decodeEventsMs.ruzstd.toFixed(2)} ms, module ${r.decodeEventsMs.nostrwire.toFixed(2)} ms;` +
      ` prepare set: TypeScript ${r.prepareMs.typescript.toFixed(2)} ms, ruzstd ${r.prepareMs.ruzstd.toFixed(2)} ms, module ${r.prepareMs.nostrwire.toFixed(2)} ms`);
  }
}
for (const [where, byImpl] of Object.entries(coldMedians)) {
  const t = byImpl.typescript, n = byImpl.nostrwire;
  console.log(`cold, ${where} (median of ${t.runs}), per-kind set: TypeScript prepare ${t.prepareMs.toFixed(2)} ms + first pass ${t.firstMs.toFixed(2)} ms;` +
    ` module instantiate ${n.instantiateMs.toFixed(2)} ms, load set ${n.prepareMs.toFixed(2)} ms, first batch ${n.firstMs.toFixed(2)} ms`);
}
