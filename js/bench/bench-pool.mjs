// The pool rows of the browser benchmark (scripts/bench-browser.sh --pool):
// one filter read from three relays at once in headless Chromium, a
// nostrwire relay with nostrwire.v2 (dictionary set held), a nostrwire
// relay with the binary transport off and khatru, each holding two thirds
// of the events (every event on two relays), interleaved over rounds:
//   (p1) nostr-tools' AbstractSimplePool with nostr-wasm's verifyEvent
//   (p2) this package's SimplePool, verifying on the main thread
//   (p3) the same with two verifier workers shared by the three relays
//   (p4) as (p2) with two more relays: one that stalls after the handshake
//        and one that sends a tenth of the events and drops the connection
//   (p5) as (p1) with the same two
// Time runs from `subscribeMany` (the pool connected before) to the last
// event handed to `onevent`, verified; the subscription closes once all N
// came (`maxWait` 60 s, so that no relay is cut off). Writes results.json
// and README.md to --out.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir, cpus, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { gzipSync } from 'node:zlib';
import { bin } from '../test/relay-process.mjs';
import { scriptedRelayServer } from '../test/scripted-relay.mjs';
import { KINDS, poolEvents, threeRelays } from '../test/pool-relays.mjs';
import { servePage, launch, openPage } from '../test/browser/harness.mjs';
import { checkArgs } from './args.mjs';

const USAGE = `usage: scripts/bench-browser.sh --pool [--out DIR] [--rounds N] [--sizes 1000,10000] [--rows p2,f0] [--profile]
  --rows     only these rows (default: all)
  --profile  instead of timed rounds: one run of each row at the largest size under
             Chromium's CPU profiler (unminified page); writes profile-<row>.md to DIR`;
checkArgs(USAGE, {
  strings: ['out', 'rounds', 'sizes', 'rows'],
  booleans: ['pool', 'profile'],
});
const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const root = resolve(new URL('../..', import.meta.url).pathname);
const out = resolve(opt('--out', join(root, 'bench-runs', `${new Date().toISOString().slice(0, 10)}-pool`)));
const rounds = Number(opt('--rounds', '3'));
const sizes = opt('--sizes', '1000,10000').split(',').map(Number);
const log = (m) => console.error(`[bench-pool] ${m}`);

// The floor rows: raw WebSockets that only count each relay's messages up
// to its EOSE (no parse, no verification), every relay at once (f0) and
// each alone (f1-f3); a relay's time to EOSE is the time it takes to send
// its share.
const FLOOR = [
  { key: 'f0', floor: [0, 1, 2], label: 'floor: raw WebSockets, the three relays at once' },
  { key: 'f1', floor: [0], label: 'floor: the nostrwire.v2 relay alone' },
  { key: 'f2', floor: [1], label: 'floor: the nostrwire JSON relay alone' },
  { key: 'f3', floor: [2], label: 'floor: khatru alone' },
];
const ALL_ROWS = [
  ...FLOOR,
  { key: 'p1', client: 'tools-wasm', hostile: false, label: "nostr-tools AbstractSimplePool + nostr-wasm" },
  { key: 'p2', client: 'ours', hostile: false, label: 'nostrwire SimplePool' },
  { key: 'p3', client: 'ours-workers-2', hostile: false, label: 'nostrwire SimplePool, 2 verifier workers' },
  { key: 'p4', client: 'ours', hostile: true, label: 'as (p2), + a stalled relay and one dropping mid-REQ' },
  { key: 'p5', client: 'tools-wasm', hostile: true, label: 'as (p1), + the same two' },
];
const only = opt('--rows', null)?.split(',');
const ROWS = only ? ALL_ROWS.filter((r) => only.includes(r.key)) : ALL_ROWS;
const profile = args.includes('--profile');

// ---------------------------------------------------------------- relays
const max = Math.max(...sizes);
log(`generating ${max} events and filling three relays`);
const { events } = poolEvents({ count: max, seed: 7, newest: Math.floor(Date.now() / 1000) - 3600 });
const work = mkdtempSync(join(tmpdir(), 'nostrwire-bench-pool-'));
const trainOn = join(work, 'train.jsonl');
execFileSync(bin, ['generate', '--count', '10000', '--seed', '8', '--out', trainOn], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
const setFile = join(work, 'set.nwbd');
execFileSync(bin, ['dict', 'train', '--per-kind', '--corpus', trainOn, '-o', setFile], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
const relays = await threeRelays(events, {
  bulk: true,
  config: `[storage]\ndictionaries = "${setFile}"\n[limits]\nmax_limit = ${max}\n`,
});

// ---------------------------------------------------------------- sizes
async function bundleSize(contents) {
  const r = await build({
    stdin: { contents, resolveDir: resolve(root, 'js'), loader: 'ts' },
    bundle: true, minify: true, format: 'esm', platform: 'browser', target: 'es2022', write: false, logLevel: 'silent',
    external: ['./verifier-wasm-bytes.js'],
  });
  const bytes = Buffer.concat(r.outputFiles.map((f) => Buffer.from(f.contents)));
  return { min: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length };
}
const sizesJson = JSON.parse(readFileSync(resolve(root, 'js/dist/browser/sizes.json'), 'utf8'));
const packageSizes = {
  tools: await bundleSize("export { AbstractSimplePool } from 'nostr-tools/abstract-pool'; export { setNostrWasm, verifyEvent } from 'nostr-tools/wasm'; export { initNostrWasm } from 'nostr-wasm';"),
  ours: { min: sizesJson.total.min + sizesJson.pool.min, gzip: sizesJson.total.gzip + sizesJson.pool.gzip },
  pool: sizesJson.pool,
};

// ---------------------------------------------------------------- runs
// Profiles name the package's functions: the page is not minified then.
const site = await servePage(resolve(root, 'js/test/browser/pool-page.js'), { minify: !profile });
const browser = await launch();
const chromium = await browser.version();

let profiler = null;

// A CPU profile summed up: self time by function (name, file:line), most
// first, and the page's total busy time.
function profileSummary(row, limit, p) {
  const byNode = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map();
  let total = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const dt = (p.timeDeltas[i + 1] ?? 0) / 1000;
    const f = byNode.get(p.samples[i]).callFrame;
    const file = f.url ? f.url.replace(/^.*\//, '') : '';
    const key = `${f.functionName || '(anonymous)'} ${file}${file ? `:${f.lineNumber + 1}` : ''}`;
    self.set(key, (self.get(key) ?? 0) + dt);
    if (f.functionName !== '(idle)') total += dt;
  }
  const top = [...self].sort((a, b) => b[1] - a[1]).slice(0, 30);
  let md = `# CPU profile: (${row.key}) ${row.label}, ${limit.toLocaleString('en-US')} events\n\n`;
  md += `Busy (not idle) ${total.toFixed(0)} ms of ${((p.endTime - p.startTime) / 1000).toFixed(0)} ms profiled (page set-up, connections and the run). Self time, most first:\n\n| ms | % of busy | function |\n|---|---|---|\n`;
  for (const [k, ms] of top) md += `| ${ms.toFixed(1)} | ${((100 * ms) / total).toFixed(1)} | \`${k}\` |\n`;
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, `profile-${row.key}.md`), md);
  log(`wrote ${out}/profile-${row.key}.md`);
}

async function once(row, limit) {
  const slice = events.slice(0, limit);
  const filter = { kinds: KINDS, since: slice.at(-1).created_at, until: slice[0].created_at, limit };
  const extra = [];
  if (row.hostile) {
    extra.push(await scriptedRelayServer(slice, { stall: true }));
    extra.push(await scriptedRelayServer(slice, { closeAfter: Math.floor(limit / 10) }));
  }
  const page = await openPage(browser, site.url);
  try {
    if (row.floor) {
      // The nostrwire.v2 relay is relays.urls[0].
      const per = await page.evaluate((o) => window.floorRun(o), {
        urls: row.floor.map((i) => relays.urls[i]),
        protocols: row.floor.map((i) => (i === 0 ? 'nostrwire.v2' : null)),
        filter,
      });
      const relay = {};
      row.floor.forEach((i, k) => (relay[i] = per[k]));
      return {
        lastEventMs: Math.max(...per.map((p) => p.eoseMs)), relay,
        messageBytes: per.reduce((a, p) => a + p.bytes, 0), messages: per.reduce((a, p) => a + p.messages, 0),
        sameSet: true, errors: page.errors.length,
      };
    }
    const urls = [...relays.urls, ...extra.map((r) => r.url)];
    // Every pool waits for every relay's events (a relay that sent EOSE in
    // time is waited for by this package's pool, not by nostr-tools'), and
    // the run ends at the last of the events the relays hold.
    const cdp = profiler ? await page.target().createCDPSession() : null;
    if (cdp) {
      await cdp.send('Profiler.enable');
      await cdp.send('Profiler.setSamplingInterval', { interval: 100 });
      await cdp.send('Profiler.start');
    }
    const r = await page.evaluate((o) => window.poolRun(o), { client: row.client, urls, filter, maxWait: 60_000, expect: limit });
    if (cdp) profiler(row, limit, (await cdp.send('Profiler.stop')).profile);
    const expected = slice.map((e) => e.id).sort();
    const got = [...r.ids].sort();
    const sameSet = got.length === expected.length && got.every((id, k) => id === expected[k]);
    return { ...r, ids: undefined, events: r.ids.length, sameSet, errors: page.errors.length };
  } finally {
    await page.close();
    for (const x of extra) await x.stop();
  }
}

if (profile) {
  for (const row of ROWS) await once(row, sizes[0]);
  profiler = profileSummary;
  for (const row of ROWS.filter((r) => !r.floor)) await once(row, max);
  await browser.close();
  await site.close();
  await relays.stop();
  process.exit(0);
}

const runs = [];
log('warm-up');
for (const row of ROWS) await once(row, sizes[0]);
for (let round = 1; round <= rounds; round++) {
  for (const limit of sizes) {
    for (const row of ROWS) {
      const r = await once(row, limit);
      runs.push({ round, limit, key: row.key, ...r });
      if (row.floor) log(`round ${round} ${row.key} ${limit}: last EOSE ${r.lastEventMs.toFixed(0)} ms (${Object.entries(r.relay).map(([i, p]) => `relay ${i} ${p.eoseMs.toFixed(0)} ms`).join(', ')})`);
      else log(`round ${round} ${row.key} ${limit}: ${r.events} events, last ${r.lastEventMs.toFixed(0)} ms, verified ${r.verified} of ${r.delivered} delivered, long tasks ${r.longTasks}, same set ${r.sameSet}`);
    }
  }
}
await browser.close();
await site.close();
await relays.stop();

// ---------------------------------------------------------------- report
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const summary = [];
for (const limit of sizes) {
  for (const row of ROWS) {
    const rs = runs.filter((r) => r.limit === limit && r.key === row.key);
    const ms = rs.map((r) => r.lastEventMs);
    if (row.floor) {
      summary.push({
        limit, key: row.key, label: row.label,
        lastEventMs: median(ms), minMs: Math.min(...ms), maxMs: Math.max(...ms),
        relayMs: Object.fromEntries(row.floor.map((i) => [i, median(rs.map((r) => r.relay[i].eoseMs))])),
        messages: median(rs.map((r) => r.messages)), messageBytes: median(rs.map((r) => r.messageBytes)),
        errors: rs.reduce((a, r) => a + r.errors, 0),
      });
      continue;
    }
    summary.push({
      limit, key: row.key, label: row.label,
      lastEventMs: median(ms), minMs: Math.min(...ms), maxMs: Math.max(...ms),
      connectMs: median(rs.map((r) => r.connectMs)),
      events: median(rs.map((r) => r.events)), delivered: median(rs.map((r) => r.delivered)), verified: median(rs.map((r) => r.verified)),
      messageBytes: median(rs.map((r) => r.messageBytes)),
      longTasks: Math.max(...rs.map((r) => r.longTasks)), longestTaskMs: Math.max(...rs.map((r) => r.longestTaskMs)),
      sameSet: rs.every((r) => r.sameSet), errors: rs.reduce((a, r) => a + r.errors, 0),
      transports: rs[0].transports,
    });
  }
}
const find = (limit, key) => summary.find((s) => s.limit === limit && s.key === key);
const machine = {
  cpu: cpus()[0]?.model, cores: cpus().length, memoryGiB: Math.round(totalmem() / 2 ** 30), chromium, node: process.version,
  loadAverage: readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' '),
};
mkdirSync(out, { recursive: true });
writeFileSync(join(out, 'results.json'), JSON.stringify({ date: new Date().toISOString(), machine, rounds, sizes, packageSizes, summary, runs }, null, 1) + '\n');

const f0 = (x) => x.toLocaleString('en-US', { maximumFractionDigits: 0 });
let md = `# Pool benchmark: three relays at once, Chromium\n\n`;
md += `\`scripts/bench-browser.sh --pool --rounds ${rounds}\` on ${machine.cpu} (${machine.cores} cores, ${machine.memoryGiB} GiB; load average at the end ${machine.loadAverage}), ${chromium}, Node ${machine.node}; relays on loopback.\n\n`;
md += `Three relays hold the newest ${f0(max)} of generated notes, reposts and reactions (kinds 1, 6, 7; \`nostrwire generate --seed 7\`), each two thirds of them, so every event is on two relays: a nostrwire relay with \`nostrwire.v2\` (a per-kind dictionary set, held by the page), a nostrwire relay with \`[websocket] binary = false\` (JSON), and khatru v0.19.0 (in-memory store, JSON). One \`subscribeMany\` of \`{"kinds":[1,6,7],"since":…,"until":…}\` bounding the newest N, \`maxWait\` 60 s, closed once the N events came. Medians of ${rounds} interleaved rounds (min–max), a fresh page each.\n\n`;
md += `- last event: \`subscribeMany\` called (every relay connected before) → the last event handed to \`onevent\`, verified\n- verified / delivered: events verified (nostr-tools: calls of its verifier; ours: events handed on or refused as invalid) over the copies the relays sent (\`alreadyHaveEvent\` calls)\n- KB: WebSocket message bytes into the page (after permessage-deflate)\n- long tasks: most main-thread tasks over 50 ms in a round, and the longest task seen\n- same set: the ids handed on are exactly the N events, every round\n\n`;
md += `- floor (f0–f3): one raw WebSocket per relay (the same transport the package's pool gets: nostrwire.v2 with the set held, JSON, JSON) that only counts messages until the relay's EOSE, no parse, no verification: what the fastest client would see. A relay's EOSE time is the time it takes to send its share; f0 reads all three at once, as the pools do, f1–f3 each alone\n- vs floor: last event ms over (f0)'s; a pool at 1.00× floor would cost nothing on top of receiving\n\n`;
const ms = (x) => (x === undefined ? '–' : f0(x));
for (const limit of sizes) {
  const base = find(limit, 'p1');
  const floor = find(limit, 'f0');
  md += `## ${f0(limit)} events\n\n`;
  if (ROWS.some((r) => r.floor)) {
    md += `| | floor | last EOSE ms | v2 relay ms | JSON relay ms | khatru ms | messages | KB |\n|---|---|---|---|---|---|---|---|\n`;
    for (const row of ROWS.filter((r) => r.floor)) {
      const s = find(limit, row.key);
      md += `| (${s.key}) | ${s.label} | ${f0(s.lastEventMs)} (${f0(s.minMs)}–${f0(s.maxMs)}) | ${ms(s.relayMs[0])} | ${ms(s.relayMs[1])} | ${ms(s.relayMs[2])} | ${f0(s.messages)} | ${f0(s.messageBytes / 1024)} |\n`;
    }
    md += '\n';
  }
  const pools = ROWS.filter((r) => !r.floor);
  if (pools.length === 0) continue;
  md += `| | pool | last event ms | vs (p1) | vs floor | connect ms | verified / delivered | KB | long tasks (longest ms) | same set |\n|---|---|---|---|---|---|---|---|---|---|\n`;
  for (const row of pools) {
    const s = find(limit, row.key);
    const vs = row.hostile ? find(limit, 'p5') : base;
    const ratio = vs ? `${(vs.lastEventMs / s.lastEventMs).toFixed(2)}×` : '–';
    const overFloor = floor ? `${(s.lastEventMs / floor.lastEventMs).toFixed(2)}×` : '–';
    md += `| (${s.key}) | ${s.label} | ${f0(s.lastEventMs)} (${f0(s.minMs)}–${f0(s.maxMs)}) | ${ratio} | ${overFloor} | ${f0(s.connectMs)} | ${f0(s.verified)} / ${f0(s.delivered)} | ${f0(s.messageBytes / 1024)} | ${s.longTasks} (${f0(s.longestTaskMs)}) | ${s.sameSet ? 'yes' : 'NO'} |\n`;
  }
  if (floor && base) {
    md += `\nRead against the floor: (p1) is ${(base.lastEventMs / floor.lastEventMs).toFixed(2)}× (f0), so no client on these relays can be more than ${(base.lastEventMs / floor.lastEventMs).toFixed(2)}× sooner than (p1); (p2) takes ${f0(find(limit, 'p2')?.lastEventMs - floor.lastEventMs)} ms over the floor, (p1) ${f0(base.lastEventMs - floor.lastEventMs)} ms.\n`;
  }
  const p4 = find(limit, 'p4');
  const p2 = find(limit, 'p2');
  if (p4 && p2) {
    // What the extra copies cost to read at (p2)'s pace: the dropping
    // relay's messages take the page's time whatever the pool does.
    const extra = p4.delivered - p2.delivered;
    const cost = (extra * p2.lastEventMs) / p2.delivered;
    md += `\n(p4) − (p2): ${(p4.lastEventMs - p2.lastEventMs).toFixed(1)} ms (the stalled and the dropping relay; a slice is 8 ms). (p4) reads ${f0(extra)} more copies than (p2); at (p2)'s ${((1000 * p2.lastEventMs) / p2.delivered).toFixed(0)} µs of run per copy, reading them costs ${f0(cost)} ms. (p4) and (p5) are compared with each other.\n`;
  }
  md += '\n';
}
md += `Sizes (min+gzip): nostr-tools' pool with nostr-wasm ${f0(packageSizes.tools.gzip / 1024)} KB (its WebAssembly inlined); this package with \`nostrwire/pool\` ${f0(packageSizes.ours.gzip / 1024)} KB with its WebAssembly chunk, of which the pool ${(packageSizes.pool.gzip / 1024).toFixed(1)} KB.\n`;
writeFileSync(join(out, 'README.md'), md);
log(`wrote ${out}/README.md`);
