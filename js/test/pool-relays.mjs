// Relays for the pool's tests and benchmark: generated events that every
// relay keeps (notes, reposts, reactions, none expiring), spread over a
// nostrwire relay with nostrwire.v2, a nostrwire relay with the binary
// transport off and khatru so that each event is on two of the three.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { Relay } from '../dist/index.js';
import { startRelay, bin } from './relay-process.mjs';
import { startKhatru } from './khatru-process.mjs';

const repo = new URL('../..', import.meta.url).pathname;
export const KINDS = [1, 6, 7];

/**
 * The newest `count` such events of a generated stream (seed `seed`), the
 * newest at `newest`, one second apart or more; `since` and `until` bound
 * exactly them.
 */
export function poolEvents({ count, seed, newest }) {
  const file = join(mkdtempSync(join(tmpdir(), 'nostrwire-pool-')), 'events.jsonl');
  execFileSync(bin, ['generate', '--count', String(Math.ceil(count * 2.2)), '--seed', String(seed), '--newest', String(newest), '--out', file], { cwd: repo });
  const events = readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l))
    .filter((e) => KINDS.includes(e.kind) && !e.tags.some((t) => t[0] === 'expiration'))
    .sort((a, b) => b.created_at - a.created_at)
    .slice(0, count);
  if (events.length < count) throw new Error(`only ${events.length} events of kinds ${KINDS}`);
  return { events, since: events.at(-1).created_at, until: events[0].created_at };
}

/** What relay `i` (0, 1, 2) holds: every event whose index modulo 3 is not i. */
export const share = (events, i) => events.filter((_, k) => k % 3 !== i);

async function publishAll(url, events) {
  const r = await Relay.connect(url, { transport: 'json', websocketImplementation: WebSocket });
  for (let k = 0; k < events.length; k += 500) await Promise.all(events.slice(k, k + 500).map((e) => r.publish(e)));
  r.close();
}

/**
 * The three relays, filled: events published to them, or with `bulk` the
 * nostrwire relays' databases filled by `nostrwire import` first
 * (`config`: TOML both nostrwire relays get, for import and serving).
 */
export async function threeRelays(events, { bulk = false, config = '' } = {}) {
  const data = [0, 1].map(() => (bulk ? join(mkdtempSync(join(tmpdir(), 'nostrwire-pool-data-')), 'data') : undefined));
  if (bulk) {
    for (const i of [0, 1]) {
      const dir = mkdtempSync(join(tmpdir(), 'nostrwire-pool-import-'));
      writeFileSync(join(dir, 'in.jsonl'), share(events, i).map((e) => JSON.stringify(e)).join('\n') + '\n');
      writeFileSync(join(dir, 'import.toml'), config);
      execFileSync(bin, ['import', '--config', join(dir, 'import.toml'), '--data', data[i], join(dir, 'in.jsonl')], { cwd: repo, stdio: ['ignore', 'ignore', 'inherit'] });
    }
  }
  const relays = [
    await startRelay({ config, data: data[0] }),
    await startRelay({ config: `${config}[websocket]\nbinary = false\n`, data: data[1] }),
    await startKhatru(),
  ];
  await Promise.all(relays.map((r, i) => (bulk && i < 2 ? null : publishAll(r.url, share(events, i)))));
  return { urls: relays.map((r) => r.url), stop: () => Promise.all(relays.map((r) => r.stop())) };
}
