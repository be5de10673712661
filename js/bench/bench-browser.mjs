// The browser benchmark (scripts/bench-browser.sh): a REQ returning 1,000
// and 10,000 events, timed in headless Chromium, interleaved over rounds:
//   (a) nostr-tools Relay + its verifyEvent over JSON
//   (b) nostr-tools with nostr-wasm verification, over JSON
//   (c) this package over JSON
//   (d) this package over nostrwire.v1
//   (e)–(h) the same without verification, and with verifier workers
//   (i)–(k) this package over nostrwire.v2: verified, not verified, with
//       two verifier workers (records as the relay stores them, compressed
//       with a dictionary set the page holds in its Cache API)
//   (raw) the floor of (i)–(k) on this host: a plain WebSocket speaking
//       nostrwire.v2 as the package does on the wire, REQ sent → EOSE frame
//       received, each message counted and nothing decoded (page.js rawV2)
// each against a relay with permessage-deflate on and one with it off, and
// in the same rounds the verification floor: the same events verified in
// memory, no network, by each client's verifier (page.js `window.floor`).
// Writes results.json, report.md and chart.svg to --out; `--from
// results.json` writes them again from a run's raw rounds, running nothing.
// `--only j,raw`: those rows alone (`--no-floor`: no verification floors;
// `--sizes 1000`: that REQ alone), reported with the time `Relay.connect()`
// takes and without the comparisons the missing rows would give.
// `--profile`: instead of timing, records the main thread of each row's
// page with the DevTools CPU profiler (unminified bundle) and writes
// profile.md (self time by function over the rounds) and the profiles.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, writeFileSync, readFileSync, createWriteStream } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir, cpus, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { bin, startRelay } from '../test/relay-process.mjs';
import { bundlePage, serveDir, launch, openPage } from '../test/browser/harness.mjs';
import { checkArgs } from './args.mjs';

checkArgs(
  'usage: scripts/bench-browser.sh [--out DIR] [--rounds N] [--sizes 1000,10000] [--only a,b,...] [--no-floor]\n' +
    '       [--floors N] [--generate N] [--from results.json] [--profile]',
  { strings: ['out', 'rounds', 'sizes', 'only', 'floors', 'generate', 'from'], booleans: ['no-floor', 'profile'] },
);
const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const root = resolve(new URL('../..', import.meta.url).pathname);
const out = resolve(opt('--out', join(root, 'bench-runs', `${new Date().toISOString().slice(0, 10)}-browser`)));
let rounds = Number(opt('--rounds', '5'));
let sizes = opt('--sizes', '1000,10000').split(',').map(Number);
let generated = Number(opt('--generate', '24000'));
const FILTER = { kinds: [1, 6, 7] };

const CLIENTS = [
  { key: 'a', client: 'tools', transport: 'json', label: 'nostr-tools + noble verify, JSON' },
  { key: 'b', client: 'tools-wasm', transport: 'json', label: 'nostr-tools + nostr-wasm verify, JSON' },
  { key: 'c', client: 'ours', transport: 'json', label: 'nostrwire, JSON' },
  { key: 'd', client: 'ours', transport: 'v1', label: 'nostrwire, nostrwire.v1' },
  // What the transport costs without signature checks (a client that
  // trusts its relay, or has the events verified already).
  { key: 'e', client: 'ours-unverified', transport: 'json', label: 'nostrwire, JSON, no verification' },
  { key: 'f', client: 'ours-unverified', transport: 'v1', label: 'nostrwire, nostrwire.v1, no verification' },
  // Verification in Web Workers instead of main-thread slices.
  { key: 'g', client: 'ours-workers-1', transport: 'v1', label: 'nostrwire, nostrwire.v1, 1 verifier worker' },
  { key: 'h', client: 'ours-workers-2', transport: 'v1', label: 'nostrwire, nostrwire.v1, 2 verifier workers' },
  // nostrwire.v2: batches of records as stored, dictionary set held.
  { key: 'i', client: 'ours', transport: 'v2', label: 'nostrwire, nostrwire.v2' },
  { key: 'j', client: 'ours-unverified', transport: 'v2', label: 'nostrwire, nostrwire.v2, no verification' },
  { key: 'k', client: 'ours-workers-2', transport: 'v2', label: 'nostrwire, nostrwire.v2, 2 verifier workers' },
  // The host's floor for (i)–(k): the same REQ's v2 messages into the page,
  // nothing decoded; its "last event" is the EOSE frame.
  { key: 'raw', client: 'raw-v2', transport: 'v2', label: 'floor: plain WebSocket, nostrwire.v2 frames counted, not decoded' },
].filter((c) => !opt('--only') || opt('--only').split(',').includes(c.key));
// The verification floor: each verifier over the REQ's events in memory.
const FLOORS = [
  { key: 'noble', label: 'noble (nostr-tools verifyEvent), main thread', clients: ['a'] },
  { key: 'tools-wasm', label: 'nostr-wasm (nostr-tools/wasm verifyEvent), main thread', clients: ['b'] },
  { key: 'ours', label: 'nostrwire verifyEvents (its WebAssembly verifier), main thread', clients: ['c', 'd', 'i'] },
  { key: 'id-hash', label: 'id hash only: nostr-wasm, every id altered so the check ends before the signature', clients: [] },
  { key: 'pool-1', label: 'nostrwire, 1 verifier worker', clients: ['g'] },
  { key: 'pool-2', label: 'nostrwire, 2 verifier workers', clients: ['h', 'k'] },
].filter(() => !args.includes('--no-floor'));
// --floors pool-2,pool-2-256,...: other verifiers to time (pool-N-B: batches of B).
if (opt('--floors')) {
  FLOORS.length = 0;
  for (const key of opt('--floors').split(',')) FLOORS.push({ key, label: key, clients: [] });
}

const profiling = args.includes('--profile');
mkdirSync(out, { recursive: true });
const work = mkdtempSync(join(tmpdir(), 'nostrwire-bench-browser-'));
const log = (...m) => console.error(`[${new Date().toISOString().slice(11, 19)}]`, ...m);

const variants = [];
for (const c of CLIENTS) for (const deflate of [true, false]) variants.push({ ...c, deflate });
if (!profiling) for (const f of FLOORS) variants.push({ key: f.key, floor: f.key, label: f.label, deflate: false });

let runs = [];
let floorRuns = [];
const profiles = [];
let packageSizes;
let dictionaryBytes;
let chromiumVersion;
let machine;
let date = new Date().toISOString();
if (opt('--from')) {
  const old = JSON.parse(readFileSync(opt('--from'), 'utf8'));
  ({ runs, floorRuns = [], packageSizes, machine, date, rounds, dictionaryBytes } = old);
  ({ generated } = old.data);
  sizes = [...new Set(runs.map((r) => r.limit))].sort((a, b) => a - b);
  chromiumVersion = machine.chromium;
} else {
// ---------------------------------------------------------------- data
log(`filling a relay: the corpus plus ${generated} generated events`);
const gen = join(work, 'generated.jsonl');
execFileSync(bin, ['generate', '--count', String(generated), '--seed', '7', '--out', gen], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
const all = join(work, 'all.jsonl');
writeFileSync(all, readFileSync(join(root, 'testdata/real-events.jsonl')));
writeFileSync(all, readFileSync(gen), { flag: 'a' });
// The relay's dictionary set, as an operator trains one: on events of the
// same mix that are not in the benchmark's data (another seed).
const trainOn = join(work, 'train.jsonl');
execFileSync(bin, ['generate', '--count', '10000', '--seed', '8', '--out', trainOn], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
const setFile = join(work, 'set.nwbd');
execFileSync(bin, ['dict', 'train', '--per-kind', '--corpus', trainOn, '-o', setFile], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
dictionaryBytes = readFileSync(setFile).length;
const importConfig = join(work, 'import.toml');
writeFileSync(importConfig, `[storage]\ndictionaries = "${setFile}"\n`);
const dataOn = join(work, 'data-deflate');
execFileSync(bin, ['import', '--config', importConfig, '--data', dataOn, all], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
const dataOff = join(work, 'data-plain');
cpSync(dataOn, dataOff, { recursive: true });

const base = '[limits]\nmax_limit = 10000\n';
const relays = {
  on: await startRelay({ data: dataOn, config: base }),
  off: await startRelay({ data: dataOff, config: `${base}[websocket]\ndeflate = false\n` }),
};

// A TCP proxy in front of each relay counts the bytes on the socket.
async function proxy(target) {
  const port = Number(new URL(target).port);
  const counter = { down: 0, up: 0 };
  const server = createServer({ noDelay: true }, (client) => {
    // No Nagle delay on either side, as a browser and the relay set for
    // their own sockets: a small write (a REQ right after nostrwire.v2's
    // hold frame) would otherwise wait up to 40 ms for the relay's delayed
    // ACK of the one before.
    const upstream = connect({ port, host: '127.0.0.1', noDelay: true });
    client.on('data', (d) => { counter.up += d.length; upstream.write(d); });
    upstream.on('data', (d) => { counter.down += d.length; client.write(d); });
    const end = () => { client.destroy(); upstream.destroy(); };
    client.on('close', end);
    upstream.on('close', end);
    client.on('error', end);
    upstream.on('error', end);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `ws://127.0.0.1:${server.address().port}`, counter, close: () => server.close() };
}
const proxies = { on: await proxy(relays.on.url), off: await proxy(relays.off.url) };

// ---------------------------------------------------------------- sizes
async function bundleSize(contents) {
  const r = await build({
    stdin: { contents, resolveDir: resolve(root, 'js'), loader: 'ts' },
    bundle: true, minify: true, format: 'esm', platform: 'browser', target: 'es2022', write: false, logLevel: 'silent',
  });
  const bytes = Buffer.concat(r.outputFiles.map((f) => Buffer.from(f.contents)));
  return { min: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length };
}
packageSizes = {
  a: await bundleSize("export { Relay } from 'nostr-tools/relay'; export { verifyEvent } from 'nostr-tools/pure';"),
  b: await bundleSize("export { AbstractRelay } from 'nostr-tools/abstract-relay'; export { setNostrWasm, verifyEvent } from 'nostr-tools/wasm'; export { initNostrWasm } from 'nostr-wasm';"),
  c: JSON.parse(readFileSync(resolve(root, 'js/dist/browser/sizes.json'), 'utf8')).total,
};
packageSizes.d = packageSizes.e = packageSizes.f = packageSizes.g = packageSizes.h = packageSizes.c;
packageSizes.i = packageSizes.j = packageSizes.k = packageSizes.c;
// The floor runs no client code but the two frame encoders.
packageSizes.raw = { min: 0, gzip: 0 };

// ---------------------------------------------------------------- runs
const pageDir = join(work, 'page');
await bundlePage(resolve(root, 'js/bench/page.js'), pageDir, { minify: !profiling });
cpSync(resolve(root, 'js/dist/browser/verify-worker.js'), join(pageDir, 'verify-worker.js'));
const site = await serveDir(pageDir);
const browser = await launch(['--enable-precise-memory-info', '--js-flags=--expose-gc']);
chromiumVersion = await browser.version();

async function once(config, deflate, limit) {
  const page = await openPage(browser, site.url);
  const p = proxies[deflate ? 'on' : 'off'];
  p.counter.down = p.counter.up = 0;
  try {
    if (config.floor) {
      return await page.evaluate((o) => window.floor(o), { method: config.floor, url: p.url, limit, filter: FILTER });
    }
    const cdp = profiling ? await page.createCDPSession() : null;
    // Rows whose page code never calls profileStart (the raw floor) get no profile.
    let started = false;
    if (cdp) {
      await cdp.send('Profiler.enable');
      await cdp.send('Profiler.setSamplingInterval', { interval: 100 });
      await page.exposeFunction('profileStart', () => {
        started = true;
        return cdp.send('Profiler.start');
      });
    }
    const r = await page.evaluate((o) => window.run(o), {
      client: config.client, transport: config.transport, url: p.url, limit, filter: FILTER,
    });
    const profile = started ? (await cdp.send('Profiler.stop')).profile : undefined;
    await new Promise((res) => setTimeout(res, 50));
    return { ...r, socketBytesDown: p.counter.down, socketBytesUp: p.counter.up, profile };
  } finally {
    await page.close();
  }
}

log('warm-up');
for (const v of variants) await once(v, v.deflate, sizes[0]);

for (let round = 1; round <= rounds; round++) {
  // Interleaved: every variant once per round and size, the order rotated.
  const order = variants.map((_, i) => variants[(i + round) % variants.length]);
  for (const limit of sizes) {
    for (const v of order) {
      const r = await once(v, v.deflate, limit);
      if (v.floor) {
        floorRuns.push({ round, limit, key: v.key, ...r });
        log(`round ${round} floor ${v.key} ${limit}: ${r.valid}/${r.events} valid, ${r.verifyMs.toFixed(0)} ms`);
        continue;
      }
      if (r.profile) {
        profiles.push({ round, limit, key: v.key, deflate: v.deflate, lastVerifiedMs: r.lastVerifiedMs, profile: r.profile });
        delete r.profile;
      }
      runs.push({ round, limit, key: v.key, deflate: v.deflate, ...r });
      const got = r.events === null ? `${r.messages} messages (${r.batches} batches), nothing decoded` : `${r.events} events`;
      log(`round ${round} ${v.key}${v.deflate ? '+deflate' : ''} ${limit}: ${got}, EOSE ${r.eoseMs.toFixed(0)} ms, last verified ${r.lastVerifiedMs.toFixed(0)} ms, ${r.socketBytesDown} B, long tasks ${r.longTasks}`);
    }
  }
}
await browser.close();
await site.close();
proxies.on.close();
proxies.off.close();
await relays.on.stop();
await relays.off.stop();
}

if (profiling) {
  writeProfiles(profiles);
  process.exit(0);
}

// ---------------------------------------------------------------- report
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const summary = [];
const floorSummary = [];
for (const limit of sizes) {
  for (const f of FLOORS) {
    const rs = floorRuns.filter((r) => r.limit === limit && r.key === f.key);
    floorSummary.push({
      limit, key: f.key, label: f.label, clients: f.clients,
      events: median(rs.map((r) => r.events)), valid: median(rs.map((r) => r.valid)),
      verifyMs: median(rs.map((r) => r.verifyMs)),
      minMs: Math.min(...rs.map((r) => r.verifyMs)), maxMs: Math.max(...rs.map((r) => r.verifyMs)),
      longTasks: median(rs.map((r) => r.longTasks)),
      workerStartMs: median(rs.map((r) => r.workerStartMs ?? 0)),
    });
  }
  for (const v of variants.filter((v) => !v.floor)) {
    const rs = runs.filter((r) => r.limit === limit && r.key === v.key && r.deflate === v.deflate);
    summary.push({
      limit, key: v.key, label: v.label, deflate: v.deflate, transport: rs[0].transport, events: median(rs.map((r) => r.events)),
      socketBytesDown: median(rs.map((r) => r.socketBytesDown)),
      messageBytes: median(rs.map((r) => r.messageBytes)),
      eoseMs: median(rs.map((r) => r.eoseMs)),
      firstMessageMs: median(rs.map((r) => r.firstMessageMs ?? NaN)),
      lastVerifiedMs: median(rs.map((r) => r.lastVerifiedMs)),
      longTasks: median(rs.map((r) => r.longTasks)),
      longTaskMs: median(rs.map((r) => r.longTaskMs)),
      peakHeapBytes: median(rs.map((r) => r.peakHeapBytes)),
      connectMs: median(rs.map((r) => r.connectMs ?? NaN)),
      // (raw): WebSocket messages after the REQ and their bytes.
      messages: median(rs.map((r) => r.messages ?? NaN)),
      batches: median(rs.map((r) => r.batches ?? NaN)),
      frameBytes: median(rs.map((r) => r.frameBytes ?? NaN)),
      packageGzip: packageSizes[v.key].gzip,
      packageMin: packageSizes[v.key].min,
    });
  }
}
const find = (limit, key, deflate) => summary.find((s) => s.limit === limit && s.key === key && s.deflate === deflate);
const findFloor = (limit, key) => floorSummary.find((f) => f.limit === limit && f.key === key);
// Each client's floor on this host: its transfer and decode without
// verification ((e) over JSON, (f) over nostrwire.v1, same deflate) plus
// its verifier's in-memory time, measured with the parallelism it uses
// (main thread: 1; workers: what the pool achieved here). `overlapMs` is
// the bound if verification overlapped the transfer entirely.
function clientFloors() {
  const out = [];
  if (FLOORS.length === 0) return out;
  for (const limit of sizes) {
    for (const f of FLOORS) {
      for (const key of f.clients) {
        for (const deflate of [true, false]) {
          const s = find(limit, key, deflate);
          const t = find(limit, s?.transport === 'v2' ? 'j' : s?.transport === 'v1' ? 'f' : 'e', deflate);
          const v = findFloor(limit, f.key);
          if (!s || !t || !v) continue;
          out.push({
            limit, key, deflate, verifier: f.key,
            transferMs: t.lastVerifiedMs, verifyMs: v.verifyMs,
            floorMs: t.lastVerifiedMs + v.verifyMs,
            overlapMs: Math.max(t.lastVerifiedMs, v.verifyMs),
            // Both cores verifying, nothing else running: main-thread
            // verification time halved, overlapped with the transfer.
            twoCoreMs: Math.max(t.lastVerifiedMs, findFloor(limit, f.key === 'noble' ? 'noble' : f.key === 'tools-wasm' ? 'tools-wasm' : 'ours').verifyMs / 2),
            lastVerifiedMs: s.lastVerifiedMs,
          });
        }
      }
    }
  }
  return out.sort((x, y) => x.limit - y.limit || x.key.localeCompare(y.key) || Number(y.deflate) - Number(x.deflate));
}
machine ??= { cpus: cpus().length, cpu: cpus()[0]?.model, memGiB: Math.round(totalmem() / 2 ** 30), chromium: chromiumVersion, node: process.version };
const results = {
  schema: 1,
  date,
  machine,
  rounds,
  filter: FILTER,
  data: { corpus: 'testdata/real-events.jsonl', generated, seed: 7 },
  packageSizes,
  summary,
  floorSummary,
  clientFloors: clientFloors(),
  dictionaryBytes,
  runs,
  floorRuns,
};
writeFileSync(join(out, 'results.json'), JSON.stringify(results, null, 1) + '\n');

const kb = (n) => (n / 1000).toFixed(n < 10000 ? 1 : 0);
const RAW_NOTE =
  'the floor of (i)–(k): in the same page, a plain `WebSocket` offering `nostrwire.v2` that does on the wire what the package does before its REQ ' +
  '(waits for the relay\'s dictionary set, holds it with the package\'s `holdFrame`), sends the same REQ (`jsonFrame`), and counts each message ' +
  'and its bytes, reading only its type byte; its EOSE and "last event" are the EOSE frame received';
// (raw)'s messages per REQ, under a table of the rows.
function rawLine(limit) {
  const r = summary.filter((s) => s.limit === limit && s.key === 'raw');
  if (!r.length) return '';
  return `\n(raw) messages after the REQ (median): ${r.map((s) => `deflate ${s.deflate ? 'on' : 'off'}: ${s.messages} (${s.batches} batches), ${kb(s.frameBytes)} KB of message bytes`).join('; ')}.\n`;
}
const ms = (n) => n.toFixed(n < 100 ? 1 : 0);
// --only: the rows named, with the time to connect (a subset lacks the
// competitors the full report compares with).
if (opt('--only')) {
  let md = `# Browser benchmark: a REQ in headless Chromium, rows ${opt('--only')}\n\n`;
  md += `${date.slice(0, 10)}, Chromium ${chromiumVersion}, ${machine.cpus} cores (${machine.cpu}), shared with other work; `;
  md += `relay and browser on the same machine, loopback. Medians of ${rounds} interleaved rounds per row. `;
  md += `Filter \`${JSON.stringify(FILTER)}\` with \`limit\` ${sizes.join(' and ')}, on the corpus plus ${generated} generated events (seed 7).\n\n`;
  md += `- connect: \`Relay.connect()\` called → resolved (socket open, dictionary set taken up from the Cache API)\n`;
  md += `- last event: REQ sent → last event handed to \`onevent\`; first message: REQ sent → first message from the relay\n`;
  md += `- (raw): ${RAW_NOTE}\n\n`;
  for (const limit of sizes) {
    md += `## ${limit.toLocaleString('en-US')} events\n\n| | client | deflate | connect ms | first message ms | EOSE ms | last event ms | long tasks |\n|---|---|---|---|---|---|---|---|\n`;
    for (const s of summary.filter((s) => s.limit === limit)) {
      md += `| (${s.key}) | ${s.label} | ${s.deflate ? 'on' : 'off'} | ${ms(s.connectMs)} | ${ms(s.firstMessageMs)} | ${ms(s.eoseMs)} | ${ms(s.lastVerifiedMs)} | ${s.longTasks} / ${ms(s.longTaskMs)} |\n`;
    }
    md += rawLine(limit) + '\n';
  }
  md += `Raw runs: \`results.json\`. Reproduce: \`scripts/bench-browser.sh --only ${opt('--only')} --no-floor --sizes ${sizes.join(',')} --rounds ${rounds} --out DIR\`.\n`;
  writeFileSync(join(out, 'report.md'), md);
  process.exit(0);
}
let md = `# Browser benchmark: a REQ in headless Chromium\n\n`;
md += `${date.slice(0, 10)}, Chromium ${chromiumVersion}, ${machine.cpus} cores (${machine.cpu}), shared with other work; `;
md += `relay and browser on the same machine, loopback. Medians of ${rounds} interleaved rounds per row. `;
md += `Filter \`${JSON.stringify(FILTER)}\` with \`limit\` ${sizes.join(' and ')}, on the corpus plus ${generated} generated events (seed 7).\n\n`;
md += `- socket KB: bytes from the relay on the TCP socket (counted by a proxy, with Nagle's algorithm off on both its sockets as browsers and the relay have it on theirs), WebSocket framing and permessage-deflate included\n`;
md += `- EOSE: REQ sent → EOSE message dispatched in the page; last verified: REQ sent → last event handed to \`onevent\` after its signature check\n`;
md += `- (e), (f), (j): the same client with \`verifyEvent: false\`, \"last verified\" is then the last event handed to \`onevent\`\n`;
md += `- (raw): ${RAW_NOTE}\n`;
md += `- (i)–(k): \`nostrwire.v2\`; the relay's dictionary set (${kb(results.dictionaryBytes ?? 0)} KB, fetched once per browser in the warm-up and kept in the Cache API) was trained on 10,000 other generated events (seed 8)\n`;
md += `- long tasks: main-thread tasks over 50 ms (count / total ms); heap: peak \`usedJSHeapSize\` (read at connect, every 1,024 events and at EOSE)\n`;
md += `- package: the client's code, minified + gzip, WebAssembly included\n\n`;
// (raw) delivers no events: no speed-up to give.
const speedUp = (other, s) => (s.key === 'raw' ? '—' : `${(other.lastVerifiedMs / s.lastVerifiedMs).toFixed(2)}×`);
for (const limit of sizes) {
  md += `## ${limit.toLocaleString('en-US')} events\n\n`;
  md += `| | client | deflate | socket KB | vs (a) without deflate | EOSE ms | last verified ms | speed-up vs (a) | speed-up vs (b) | long tasks | heap MB | package KB gz |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n`;
  for (const s of summary.filter((s) => s.limit === limit)) {
    const a = find(limit, 'a', s.deflate);
    const b = find(limit, 'b', s.deflate);
    const plainJson = find(limit, 'a', false);
    md += `| (${s.key}) | ${s.label} | ${s.deflate ? 'on' : 'off'} | ${kb(s.socketBytesDown)} | ${(s.socketBytesDown / plainJson.socketBytesDown).toFixed(2)}× | ${ms(s.eoseMs)} | ${ms(s.lastVerifiedMs)} | ${speedUp(a, s)} | ${speedUp(b, s)} | ${s.longTasks} / ${ms(s.longTaskMs)} | ${(s.peakHeapBytes / 1e6).toFixed(1)} | ${s.key === 'raw' ? '—' : kb(s.packageGzip)} |\n`;
  }
  md += rawLine(limit) + '\n';
}
// The issue's targets, on the largest REQ, for (d) against (a) and (b) over
// the same deflate setting, bytes against plain JSON without deflate.
{
  const limit = sizes[sizes.length - 1];
  md += `## Targets (${limit.toLocaleString('en-US')} events)\n\n| target | deflate on | deflate off |\n|---|---|---|\n`;
  const row = (name, f) => { md += `| ${name} | ${f(true)} | ${f(false)} |\n`; };
  const d = (on) => find(limit, 'd', on);
  const mark = (ok) => (ok ? 'met' : 'not met');
  row('(d) verified ≥ 5× sooner than (a)', (on) => `${(find(limit, 'a', on).lastVerifiedMs / d(on).lastVerifiedMs).toFixed(2)}×: ${mark(find(limit, 'a', on).lastVerifiedMs / d(on).lastVerifiedMs >= 5)}`);
  row('(d) verified ≥ 1.5× sooner than (b)', (on) => `${(find(limit, 'b', on).lastVerifiedMs / d(on).lastVerifiedMs).toFixed(2)}×: ${mark(find(limit, 'b', on).lastVerifiedMs / d(on).lastVerifiedMs >= 1.5)}`);
  row('(d) socket bytes ≤ 0.55× plain JSON', (on) => `${(d(on).socketBytesDown / find(limit, 'a', false).socketBytesDown).toFixed(2)}×: ${mark(d(on).socketBytesDown / find(limit, 'a', false).socketBytesDown <= 0.55)}`);
  row('(d) no main-thread long task', (on) => `${d(on).longTasks} (median): ${mark(d(on).longTasks === 0)}`);
  row('package ≤ 120 KB min+gzip', () => `${kb(packageSizes.d.gzip)} KB: ${mark(packageSizes.d.gzip <= 120000)}`);
  md += '\n';
}
// nostrwire.v2's targets (issue 38), on both REQs, beside the floors they
// are measured against: bytes against plain JSON without deflate; delivery
// without verification ((j)) against the same page's JSON client without
// verification ((e)).
if (summary.some((s) => s.key === 'j')) {
  const mark = (ok) => (ok ? 'met' : 'not met');
  // The host's floor: (raw), the same REQ's messages in with nothing decoded.
  const floorRaw = (limit) => {
    const on = find(limit, 'raw', true);
    const off = find(limit, 'raw', false);
    return on && off ? `; **floor** (raw), REQ → EOSE frame, nothing decoded: ${ms(on.eoseMs)} / ${ms(off.eoseMs)} ms` : '';
  };
  md += `## nostrwire.v2 targets\n\n| target | REQ | deflate on | deflate off | floor / competitor, same run |\n|---|---|---|---|---|\n`;
  for (const limit of sizes) {
    const plain = find(limit, 'a', false).socketBytesDown;
    const bytes = (on) => find(limit, 'i', on).socketBytesDown / plain;
    const jsonDeflate = find(limit, 'a', true).socketBytesDown / plain;
    md += `| socket bytes ≤ 0.30× plain JSON | ${limit} | ${bytes(true).toFixed(2)}×: ${mark(bytes(true) <= 0.3)} | ${bytes(false).toFixed(2)}×: ${mark(bytes(false) <= 0.3)} | JSON + deflate (a): ${jsonDeflate.toFixed(2)}×; v1 + deflate (d): ${(find(limit, 'd', true).socketBytesDown / plain).toFixed(2)}× |\n`;
    const bound = limit <= 1000 ? 30 : 250;
    const t = (on) => find(limit, 'j', on).lastVerifiedMs;
    md += `| delivered to \`onevent\`, no verification, ≤ ${bound} ms | ${limit} | ${ms(t(true))} ms: ${mark(t(true) <= bound)} | ${ms(t(false))} ms: ${mark(t(false) <= bound)} | JSON (e): ${ms(find(limit, 'e', true).lastVerifiedMs)} / ${ms(find(limit, 'e', false).lastVerifiedMs)} ms; v1 (f): ${ms(find(limit, 'f', true).lastVerifiedMs)} / ${ms(find(limit, 'f', false).lastVerifiedMs)} ms; EOSE (j): ${ms(find(limit, 'j', true).eoseMs)} / ${ms(find(limit, 'j', false).eoseMs)} ms; first message after the REQ (j): ${ms(find(limit, 'j', true).firstMessageMs)} / ${ms(find(limit, 'j', false).firstMessageMs)} ms${floorRaw(limit)} |\n`;
    const lt = (key, on) => find(limit, key, on).longTasks;
    md += `| no main-thread task over 50 ms | ${limit} | (i) ${lt('i', true)}, (j) ${lt('j', true)}, (k) ${lt('k', true)} | (i) ${lt('i', false)}, (j) ${lt('j', false)}, (k) ${lt('k', false)} | (d) ${lt('d', true)} / ${lt('d', false)} |\n`;
  }
  md += `\n`;
}
if (FLOORS.length > 0) {
  const floors = results.clientFloors;
  const cf = (limit, key, deflate) => floors.find((f) => f.limit === limit && f.key === key && f.deflate === deflate);
  md += `## Verification floor\n\n`;
  md += `In the same page and the same rounds: the REQ's events fetched without verification, then verified in memory with no network, `;
  md += `each verifier on fresh copies of them (parsed before the clock starts). The workers are started and their verifier loaded before the clock starts; `;
  md += `the events go to them in batches of 64, as the Relay sends them, and the time ends when the last verdict is back on the main thread.\n\n`;
  for (const limit of sizes) {
    md += `### ${limit.toLocaleString('en-US')} events in memory\n\n| verifier | used by | valid | ms (median) | min–max ms | µs per event | long tasks |\n|---|---|---|---|---|---|---|\n`;
    for (const f of floorSummary.filter((f) => f.limit === limit)) {
      md += `| ${f.label} | ${f.clients.map((c) => `(${c})`).join(', ') || '—'} | ${f.valid}/${f.events} | ${ms(f.verifyMs)} | ${ms(f.minMs)}–${ms(f.maxMs)} | ${((f.verifyMs * 1000) / f.events).toFixed(0)} | ${f.longTasks} |\n`;
    }
    const starts = floorSummary.filter((f) => f.limit === limit && f.workerStartMs > 0);
    if (starts.length) md += `\nStarting the workers and loading their verifier, before the clock: ${starts.map((f) => `${f.key} ${ms(f.workerStartMs)} ms`).join(', ')} (median); (g) and (h) pay it when their Relay is created.\n`;
    md += `\n`;
  }
  md += `A client's floor here: its transfer and decode without verification ((e) for JSON, (f) for nostrwire.v1, same deflate setting) `;
  md += `plus its verifier's time above, which already holds the parallelism it gets on this host (main thread: 1; workers: what the pool reached). `;
  md += `"overlapped" is the lower bound if verification ran entirely alongside the transfer: the larger of the two.\n\n`;
  for (const limit of sizes) {
    md += `### Clients against their floor, ${limit.toLocaleString('en-US')} events\n\n| | client | deflate | transfer + decode ms | verification ms | floor ms | overlapped ms | last verified ms | last verified / floor | last verified / overlapped |\n|---|---|---|---|---|---|---|---|---|---|\n`;
    for (const f of floors.filter((f) => f.limit === limit)) {
      md += `| (${f.key}) | ${CLIENTS.find((c) => c.key === f.key).label} | ${f.deflate ? 'on' : 'off'} | ${ms(f.transferMs)} | ${ms(f.verifyMs)} | ${ms(f.floorMs)} | ${ms(f.overlapMs)} | ${ms(f.lastVerifiedMs)} | ${(f.lastVerifiedMs / f.floorMs).toFixed(2)}× | ${(f.lastVerifiedMs / f.overlapMs).toFixed(2)}× |\n`;
    }
    md += `\n`;
  }
  const limit = sizes[sizes.length - 1];
  md += `### What the floors allow (${limit.toLocaleString('en-US')} events)\n\n`;
  md += `Speed-up of (d) measured, next to the ratio of the floors: (d) as it runs (verification on the main thread), and the package at its best on this host `;
  md += `(the lowest floor of (d), (g), (h)); the same with overlapped floors; a bound for the package with both cores to itself `;
  md += `(the other client's overlapped floor against the larger of (f) and half the package's main-thread verification time: `;
  md += `verification split perfectly over two cores alongside the transfer, as if the relay and the rest of the machine took no CPU); `;
  md += `then the best measured of (d), (g), (h).\n\n`;
  md += `| | deflate | (d) measured | floors: (d) | floors: package at best | overlapped: (d) | overlapped: package at best | both cores, bound | best measured of (d), (g), (h) |\n|---|---|---|---|---|---|---|---|---|\n`;
  for (const vs of ['a', 'b']) {
    for (const deflate of [true, false]) {
      const other = cf(limit, vs, deflate);
      const d = cf(limit, 'd', deflate);
      const ours = ['d', 'g', 'h'].map((k) => cf(limit, k, deflate)).filter(Boolean);
      if (!other || !d) continue;
      const bestFloor = Math.min(...ours.map((o) => o.floorMs));
      const bestOverlap = Math.min(...ours.map((o) => o.overlapMs));
      const bestRun = ours.reduce((a, b) => (b.lastVerifiedMs < a.lastVerifiedMs ? b : a));
      const x = (n) => `${n.toFixed(2)}×`;
      md += `| vs (${vs}) | ${deflate ? 'on' : 'off'} | ${x(other.lastVerifiedMs / d.lastVerifiedMs)} | ${x(other.floorMs / d.floorMs)} | ${x(other.floorMs / bestFloor)} | ${x(other.overlapMs / d.overlapMs)} | ${x(other.overlapMs / bestOverlap)} | ${x(other.overlapMs / d.twoCoreMs)} | ${x(other.lastVerifiedMs / bestRun.lastVerifiedMs)} (${bestRun.key}) |\n`;
    }
  }
  md += `\n`;
}
md += `Events received per run: ${[...new Set(summary.filter((s) => s.key !== 'raw').map((s) => `${s.limit}→${s.events}`))].join(', ')}.\n\n`;
md += `![time until the last event is verified](chart.svg)\n\nRaw runs: \`results.json\`. Reproduce: \`scripts/bench-browser.sh --out DIR\`.\n`;
writeFileSync(join(out, 'report.md'), md);
writeFileSync(join(out, 'chart.svg'), chart(summary, sizes));
log(`wrote ${out}/results.json, report.md, chart.svg`);

function chart(summary, sizes) {
  const rowH = 18, gap = 26, left = 360, width = 960, barW = width - left - 90;
  const colors = { a: '#8c8c8c', b: '#4f81bd', c: '#9bbb59', d: '#6b3fd4', e: '#c8d9a6', f: '#b9a4ea', g: '#d4893f', h: '#a0522d', i: '#c0392b', j: '#e6a19a', k: '#7b241c', raw: '#333333' };
  let y = 40;
  let body = '';
  for (const limit of sizes) {
    const rows = summary.filter((s) => s.limit === limit);
    const max = Math.max(...rows.map((r) => r.lastVerifiedMs));
    body += `<text x="10" y="${y}" font-weight="bold">${limit.toLocaleString('en-US')} events: ms until the last event is verified (shorter is better)</text>\n`;
    y += 10;
    for (const r of rows) {
      const w = Math.max(1, (r.lastVerifiedMs / max) * barW);
      body += `<text x="${left - 8}" y="${y + 13}" text-anchor="end">(${r.key}) ${r.label}${r.deflate ? ', deflate' : ''}</text>`;
      body += `<rect x="${left}" y="${y}" width="${w.toFixed(1)}" height="${rowH - 4}" fill="${colors[r.key]}" opacity="${r.deflate ? 1 : 0.6}"/>`;
      body += `<text x="${left + w + 6}" y="${y + 13}">${ms(r.lastVerifiedMs)} ms</text>\n`;
      y += rowH;
    }
    y += gap;
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${y}" font-family="sans-serif" font-size="12">\n<rect width="100%" height="100%" fill="white"/>\n${body}</svg>\n`;
}

// Self time per function over each row's profiles (from just before the
// REQ to the run's end), and the profiles themselves.
function writeProfiles(profiles) {
  let md = `# Main-thread profiles of the browser benchmark's rows\n\n`;
  md += `${date.slice(0, 10)}, Chromium ${chromiumVersion}, DevTools CPU profiler sampling every 100 µs, unminified bundle, ${rounds} round(s); `;
  md += `times are the profiler's (it slows the page down), self time summed over the rounds and divided by them.\n\n`;
  const rows = new Map();
  for (const p of profiles) {
    const k = `${p.key}${p.deflate ? '+deflate' : ''} ${p.limit}`;
    if (!rows.has(k)) rows.set(k, []);
    rows.get(k).push(p);
    writeFileSync(join(out, `${p.key}${p.deflate ? '-deflate' : ''}-${p.limit}-r${p.round}.cpuprofile`), JSON.stringify(p.profile));
  }
  for (const [k, ps] of rows) {
    const self = new Map();
    let total = 0;
    for (const { profile } of ps) {
      const byId = new Map(profile.nodes.map((n) => [n.id, n]));
      const deltas = profile.timeDeltas;
      for (let i = 0; i < profile.samples.length; i++) {
        const n = byId.get(profile.samples[i]);
        const dt = (deltas[i + 1] ?? 0) / 1000;
        const f = n.callFrame;
        if (f.functionName === '(idle)') continue;
        const name = `${f.functionName || '(anonymous)'} ${f.url ? `${f.url.split('/').pop()}:${f.lineNumber + 1}` : ''}`.trim();
        self.set(name, (self.get(name) ?? 0) + dt);
        total += dt;
      }
    }
    const last = ps.map((p) => p.lastVerifiedMs.toFixed(0)).join(', ');
    md += `## ${k}\n\nlast event to \`onevent\` (profiled): ${last} ms; busy samples ${(total / ps.length).toFixed(1)} ms per run\n\n| function | self ms per run | share |\n|---|---|---|\n`;
    for (const [name, t] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 25)) {
      md += `| \`${name}\` | ${(t / ps.length).toFixed(1)} | ${((100 * t) / total).toFixed(1)}% |\n`;
    }
    md += `\n`;
  }
  writeFileSync(join(out, 'profile.md'), md);
  log(`wrote ${out}/profile.md and ${profiles.length} profiles`);
}
