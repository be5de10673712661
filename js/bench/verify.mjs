// Verifier benchmark (scripts/bench-verify.sh): µs per event on one thread
// for the corpus's 1,001 real events in memory, in Node and in headless
// Chromium, for noble (nostr-tools' verifyEvent), nostr-wasm (nostr-tools/wasm)
// and this package (verifyEvents, verifyRecords), plus builds of the
// WebAssembly verifier over field, ecmult window and wasm-opt; and the host's
// floor, native libsecp256k1 (`nostrwire bench codec`, bare verify), before
// and after. Writes results.json and report.md to --out.
//   node bench/verify.mjs [--out DIR] [--rounds N] [--variants 10x26:4,5x52:4,...]
//     [--module NAME=FILE.wasm,...]  (other builds of the verifier, timed as
//     the variants are: an earlier commit's module, for example)
//     [--variant-dir DIR [--build-only]]  (builds the variants into DIR and
//     stops, or takes those already there: scripts/bench-verify.sh builds
//     them before it takes the benchmark lock)
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir, cpus, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { bin } from '../test/relay-process.mjs';
import { bundlePage, serveDir, launch, openPage } from '../test/browser/harness.mjs';
import { measure } from './verify-core.js';
import { checkArgs } from './args.mjs';

checkArgs(
  'usage: scripts/bench-verify.sh [--out DIR] [--rounds N] [--variants 10x26:10,10x26:8:opt,...] [--module NAME=FILE.wasm,...]',
  { strings: ['out', 'rounds', 'variants', 'module', 'variant-dir'], booleans: ['build-only'] },
);
const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const root = resolve(new URL('../..', import.meta.url).pathname);
const out = resolve(opt('--out', join(root, 'bench-runs', `${new Date().toISOString().slice(0, 10)}-verify`)));
const rounds = Number(opt('--rounds', '11'));
// A variant is field:window[:flag...]; flags: opt or noopt (only that
// binaryen setting; both by default), nosimd (the four-lane id hash built
// without SIMD128, and the C without -msimd128), nocsimd (libsecp256k1
// compiled without -msimd128, the Rust side with SIMD128).
const variantSpecs = opt('--variants', '10x26:4,10x26:8,10x26:10,10x26:12,10x26:15,5x52:4,5x52:8')
  .split(',')
  .filter(Boolean)
  .flatMap((s) => {
    const [field, window, ...flags] = s.split(':');
    const opts = flags.includes('opt') ? [true] : flags.includes('noopt') ? [false] : [true, false];
    const simd = !flags.includes('nosimd');
    const csimd = simd && !flags.includes('nocsimd');
    const tag = `${simd ? '' : '-nosimd'}${simd && !csimd ? '-nocsimd' : ''}`;
    return opts.map((o) => ({ name: `${field}-w${window}${tag}-${o ? 'opt' : 'noopt'}`, field, window, opt: o, simd, csimd }));
  });
const log = (...m) => console.error(`[${new Date().toISOString().slice(11, 19)}]`, ...m);
mkdirSync(out, { recursive: true });
const work = mkdtempSync(join(tmpdir(), 'nostrwire-bench-verify-'));
const corpus = join(root, 'testdata/real-events.jsonl');
const lines = readFileSync(corpus, 'utf8').split('\n').filter((l) => l.trim());

// ------------------------------------------------------------- variants
const variantDir = join(work, 'page', 'variants');
mkdirSync(variantDir, { recursive: true });
const builtDir = opt('--variant-dir', variantDir);
mkdirSync(builtDir, { recursive: true });
const variants = {};
const variantBytes = {};
for (const v of variantSpecs) {
  const file = join(variantDir, `${v.name}.wasm`);
  const built = join(builtDir, `${v.name}.wasm`);
  if (builtDir !== variantDir && existsSync(built) && !args.includes('--build-only')) {
    copyFileSync(built, file);
  } else {
    log(`building ${v.name}`);
    buildVariant(v, built);
    if (built !== file) copyFileSync(built, file);
  }
  const bytes = readFileSync(file);
  variants[v.name] = new Uint8Array(bytes);
  variantBytes[v.name] = { bytes: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length };
}
if (args.includes('--build-only')) process.exit(0);

function buildVariant(v, file) {
  execFileSync(join(root, 'js/scripts/build-verifier.sh'), {
    stdio: 'inherit',
    env: {
      ...process.env,
      CARGO_TARGET_DIR: process.env.CARGO_TARGET_DIR ?? join(root, 'target'),
      NOSTRWIRE_VERIFY_FIELD: v.field,
      NOSTRWIRE_VERIFY_WINDOW: v.window,
      NOSTRWIRE_VERIFY_SIMD: v.simd ? '1' : '0',
      NOSTRWIRE_VERIFY_CSIMD: v.csimd ? '1' : '0',
      WASM_OPT: v.opt ? '1' : '0',
      VERIFIER_OUT: file,
    },
  });
}

for (const spec of opt('--module', '').split(',').filter(Boolean)) {
  const [name, file] = spec.split('=');
  const bytes = readFileSync(file);
  copyFileSync(file, join(variantDir, `${name}.wasm`));
  variants[name] = new Uint8Array(bytes);
  variantBytes[name] = { bytes: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length };
}

// ------------------------------------------------------------- floor
function nativeFloor() {
  const r = JSON.parse(execFileSync(bin, ['bench', 'codec', '--json', '--samples', '15', '--corpus', corpus], { cwd: root, maxBuffer: 1 << 26 }));
  const cell = (impl, stage) => r.cells.find((c) => c.implementation === impl && c.stage === stage).summary.median_ns / 1000;
  return { bareVerifyUs: cell('libsecp256k1', 'bare_verify'), parseIdSigUs: cell('nostrwire', 'parse_id_sig'), host: r.host };
}
const loadavg = () => {
  try {
    return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number);
  } catch {
    return null;
  }
};
const loadBefore = loadavg();
log('native floor (before)');
const floorBefore = nativeFloor();

// ------------------------------------------------------------- Node
log(`Node ${process.version}: ${rounds} rounds`);
const node = await measure(lines, variants, rounds);

// ------------------------------------------------------------- Chromium
const pageDir = join(work, 'page');
await bundlePage(resolve(root, 'js/bench/verify-page.js'), pageDir, { minify: true });
copyFileSync(corpus, join(pageDir, 'events.jsonl'));
const site = await serveDir(pageDir);
const browser = await launch(['--js-flags=--expose-gc']);
const chromium = await browser.version();
log(`${chromium}: ${rounds} rounds`);
const page = await openPage(browser, site.url);
const inChromium = await page.evaluate((names, n) => window.measure(names, n), Object.keys(variants), rounds);
await browser.close();
await site.close();

log('native floor (after)');
const floorAfter = nativeFloor();
const loadAfter = loadavg();

// ------------------------------------------------------------- report
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const sizes = JSON.parse(readFileSync(join(root, 'js/dist/browser/sizes.json'), 'utf8'));
const results = {
  schema: 1,
  date: new Date().toISOString(),
  machine: { cpus: cpus().length, cpu: cpus()[0]?.model, memGiB: Math.round(totalmem() / 2 ** 30), node: process.version, chromium },
  corpus: { path: 'testdata/real-events.jsonl', events: lines.length },
  rounds,
  loadAverage: { before: loadBefore, after: loadAfter },
  floor: { before: floorBefore, after: floorAfter },
  packageSizes: sizes,
  variantBytes,
  node,
  chromium: inChromium,
};
writeFileSync(join(out, 'results.json'), JSON.stringify(results, null, 1) + '\n');

const f = (x) => x.toFixed(x < 10 ? 1 : 0);
const floorUs = median([floorBefore.bareVerifyUs, floorAfter.bareVerifyUs]);
let md = `# Verifier benchmark: µs per event, one thread\n\n`;
md += `${results.date.slice(0, 10)}; ${results.machine.cpus} cores (${results.machine.cpu}), shared with other work; Node ${process.version}, ${chromium} headless. `;
md += `The corpus's ${lines.length} real events (testdata/real-events.jsonl), in memory; medians of ${rounds} interleaved rounds (min–max), each pass after a full garbage collection. `;
if (loadBefore) md += `Load average (1, 5, 15 min) ${loadBefore.join(', ')} before, ${loadAfter.join(', ')} after. `;
md += `Every row checks the id (canonical serialization + SHA-256) and the signature, except the floor and the signatures-only row.\n\n`;
md += `Host floor, native libsecp256k1 (\`nostrwire bench codec\`, bare verify, signature only): ${f(floorBefore.bareVerifyUs)} µs before, ${f(floorAfter.bareVerifyUs)} µs after; `;
md += `native nostrwire parse + id + signature: ${f(floorBefore.parseIdSigUs)} / ${f(floorAfter.parseIdSigUs)} µs.\n\n`;
md += `| verifier | Node µs | Chromium µs | Node vs nostr-wasm | Chromium vs nostr-wasm | Chromium / native floor | valid |\n|---|---|---|---|---|---|---|\n`;
const label = {
  noble: 'noble (nostr-tools `verifyEvent`)',
  'nostr-wasm': 'nostr-wasm (nostr-tools/wasm `verifyEvent`)',
  nostrwire: 'nostrwire `verifyEvents` (default build, slices)',
  'nostrwire-records': 'nostrwire `verifyRecords` (nwb records)',
  'nostrwire-signatures': 'nostrwire, signature checks only (key, id, signature as bytes; no id hash)',
  'nostrwire-signatures-warm': 'the same with every key already parsed (cached)',
};
const rowsFor = (keys) => {
  for (const k of keys) {
    const n = node.times[k];
    const c = inChromium.times[k];
    md += `| ${label[k] ?? k.replace('variant:', 'build ')} | ${f(median(n))} (${f(Math.min(...n))}–${f(Math.max(...n))}) | ${f(median(c))} (${f(Math.min(...c))}–${f(Math.max(...c))}) | `;
    md += `${(median(node.times['nostr-wasm']) / median(n)).toFixed(2)}× | ${(median(inChromium.times['nostr-wasm']) / median(c)).toFixed(2)}× | ${(median(c) / floorUs).toFixed(2)}× | ${node.valid[k]}/${inChromium.valid[k]} |\n`;
  }
};
rowsFor(['noble', 'nostr-wasm', 'nostrwire', 'nostrwire-records', 'nostrwire-signatures', 'nostrwire-signatures-warm']);
md += `\n## Builds of the WebAssembly verifier\n\nField, \`ecmult\` window for G, \`nosimd\`: built without SIMD128 (ids hashed one at a time, no \`-msimd128\` for the C), \`nocsimd\`: libsecp256k1 compiled without \`-msimd128\`, binaryen \`wasm-opt -O3\` or not; bytes of the module and gzip -9 of it; timed through the same packer as \`verifyEvents\`, in chunks of 32.\n\n`;
md += `| build | bytes | gzip | Node µs | Chromium µs | Node vs nostr-wasm | Chromium vs nostr-wasm |\n|---|---|---|---|---|---|---|\n`;
for (const name of Object.keys(variants)) {
  const n = node.times[`variant:${name}`];
  const c = inChromium.times[`variant:${name}`];
  md += `| ${name} | ${variantBytes[name].bytes.toLocaleString('en-US')} | ${variantBytes[name].gzip.toLocaleString('en-US')} | ${f(median(n))} | ${f(median(c))} | `;
  md += `${(median(node.times['nostr-wasm']) / median(n)).toFixed(2)}× | ${(median(inChromium.times['nostr-wasm']) / median(c)).toFixed(2)}× |\n`;
}
md += `\nPackage (browser bundle, with the verifier): ${sizes.total.min.toLocaleString('en-US')} B min, ${sizes.total.gzip.toLocaleString('en-US')} B min+gzip.\n\nRaw: \`results.json\`. Reproduce: \`scripts/bench-verify.sh --out DIR\`.\n`;
writeFileSync(join(out, 'report.md'), md);
log(`wrote ${out}/results.json, report.md`);
