// The client's CPU time for a REQ over nostrwire.v2 in Node: a live relay
// holding the corpus compressed with a per-kind set (held by the client), a
// REQ of every event (`{"limit":2000}`), handed to `onevent` verified
// (the package's verifier, records as bytes) and unverified (the module's
// batch decoder alone). The relay is another process: only the client's
// work is counted (`process.cpuUsage`), so a machine busy with other work
// sways it less than wall time. `--dist DIR`: another build of the package
// (a checkout's js/dist), for a before/after.
//   NOSTRWIRE_BIN=target/release/nostrwire node js/bench/req-cpu.mjs [--rounds 15] [--dist DIR]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import WebSocket from 'ws';
import { Relay as ToolsRelay, useWebSocketImplementation as useToolsWebSocket } from 'nostr-tools/relay';
import { startRelay, bin } from '../test/relay-process.mjs';
import { checkArgs } from './args.mjs';

checkArgs('usage: node js/bench/req-cpu.mjs [--rounds N] [--dist DIR]', { strings: ['rounds', 'dist'] });
const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const rounds = Number(opt('--rounds', '15'));
const js = resolve(new URL('..', import.meta.url).pathname);
const dist = resolve(opt('--dist', join(js, 'dist')));
const { Relay, useWebSocketImplementation, initVerifier } = await import(pathToFileURL(join(dist, 'index.js')).href);
useWebSocketImplementation(WebSocket);
useToolsWebSocket(WebSocket);

const corpus = join(js, '../testdata/real-events.jsonl');
const events = readFileSync(corpus, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
const dir = mkdtempSync(join(tmpdir(), 'nostrwire-req-cpu-'));
const set = join(dir, 'set.nwbd');
execFileSync(bin, ['dict', 'train', '--per-kind', '--corpus', corpus, '-o', set], { stdio: 'ignore' });
const relay = await startRelay({ config: `[storage]\ndictionaries = "${set}"\n[auth]\nchallenge_on_connect = false\n` });
const tools = await ToolsRelay.connect(relay.url);
for (const e of events) await tools.publish(e).catch(() => undefined);
tools.close();
await initVerifier();

const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
async function req(r) {
  const t0 = cpu();
  const n = await new Promise((resolve) => {
    let got = 0;
    const sub = r.subscribe([{ limit: 2000 }], {
      onevent: () => got++,
      oneose: () => {
        sub.close();
        resolve(got);
      },
    });
  });
  return { ms: cpu() - t0, n };
}

const clients = {};
for (const [name, opts] of [['verified', {}], ['unverified', { verifyEvent: false }]]) {
  const r = await Relay.connect(relay.url, { transport: 'v2', ...opts });
  for (let i = 0; i < 200 && !r.dictionarySet.held; i++) await new Promise((res) => setTimeout(res, 20));
  for (let i = 0; i < 3; i++) await req(r);
  clients[name] = r;
}
const times = { verified: [], unverified: [] };
let count = 0;
for (let round = 0; round < rounds; round++) {
  for (const name of round % 2 ? ['unverified', 'verified'] : ['verified', 'unverified']) {
    const { ms, n } = await req(clients[name]);
    times[name].push(ms);
    count = n;
  }
}
for (const r of Object.values(clients)) r.close();
await relay.stop();
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
console.log(JSON.stringify({ dist, events: count, loadavg: readFileSync('/proc/loadavg', 'utf8').trim(), verifiedMs: median(times.verified), unverifiedMs: median(times.unverified), times }));
