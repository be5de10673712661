// Three relays, three dictionary sets, one WebAssembly module: what holding
// one set at a time costs a page that reads the three at once (Node and
// headless Chromium). The sets are the corpus's per-kind set trained at
// three levels: the same dictionaries (what a switch prepares), three names.
//   NOSTRWIRE_BIN=target/release/nostrwire node js/bench/sets.mjs [--rounds 15] [--out results.json] [--no-browser]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir, cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { bin } from '../test/relay-process.mjs';
import { bundlePage, serveDir, launch, openPage } from '../test/browser/harness.mjs';
import { checkArgs } from './args.mjs';
import { runSets } from './sets-core.js';

checkArgs('usage: node js/bench/sets.mjs [--rounds N] [--out FILE] [--no-browser]', { strings: ['rounds', 'out'], booleans: ['no-browser'] });
const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const rounds = Number(opt('--rounds', '15'));
const js = resolve(new URL('..', import.meta.url).pathname);
const corpus = join(js, '../testdata/real-events.jsonl');
const dir = mkdtempSync(join(tmpdir(), 'nostrwire-sets-bench-'));
const names = ['level19', 'level18', 'level17'];
for (const name of names) {
  const set = join(dir, `${name}.nwbd`);
  execFileSync(bin, ['dict', 'train', '--per-kind', '--level', name.slice(5), '--corpus', corpus, '-o', set]);
  execFileSync(bin, ['convert', '--to', 'nwb', '--dict', set, '-o', join(dir, `${name}.nwb`), corpus]);
}
const relays = names.map((name) => ({
  set: new Uint8Array(readFileSync(join(dir, `${name}.nwbd`))),
  stream: new Uint8Array(readFileSync(join(dir, `${name}.nwb`))),
}));
const node = await runSets({ relays, rounds });
// The same with the process's CPU time as the clock: less swayed by other
// work on a shared machine than wall time.
const nodeCpu = await runSets({ relays, rounds, now: () => process.cpuUsage().user / 1000 });
let chromium = null;
if (!args.includes('--no-browser')) {
  await bundlePage(join(js, 'bench/sets-page.js'), dir);
  const site = await serveDir(dir);
  const browser = await launch();
  try {
    const page = await openPage(browser, site.url);
    chromium = { version: await browser.version(), results: await page.evaluate((r, n) => window.run(r, n), rounds, names) };
  } finally {
    await browser.close();
    await site.close();
  }
}
const report = {
  date: new Date().toISOString(),
  loadavg: readFileSync('/proc/loadavg', 'utf8').trim(),
  nodeVersion: process.version,
  cpu: cpus()[0]?.model,
  cores: cpus().length,
  rounds,
  setBytes: relays.map((r) => r.set.length),
  node,
  nodeCpu,
  chromium,
};
if (opt('--out')) writeFileSync(opt('--out'), JSON.stringify(report, null, 2) + '\n');
for (const [where, r] of [[`Node ${process.version}`, node], [`Node ${process.version} (CPU time)`, nodeCpu], [chromium?.version, chromium?.results]]) {
  if (!r) continue;
  console.log(
    `${where}: ${r.events} events in ${r.batches.join('+')} batches; grouped (${r.switches.grouped} switches) ${r.groupedMs.toFixed(2)} ms,` +
      ` interleaved (${r.switches.interleaved} switches) ${r.interleavedMs.toFixed(2)} ms (${(r.interleavedMs / r.groupedMs).toFixed(2)}×);` +
      ` one switch ${(r.switchMs * 1000).toFixed(1)} µs`,
  );
}
