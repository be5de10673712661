// The measurement behind js/bench/sets.mjs, shared by Node and the page: a
// page reading three relays, each with its own dictionary set, decodes
// their nostrwire.v2 batches in the package's WebAssembly module. Batches
// of up to 64 KiB of records (what a relay sends) from three streams are
// decoded relay after relay ("grouped": three set switches a pass) and
// taking turns ("interleaved": a switch before every batch, as when three
// REQs answer at once), interleaved over rounds; and the switch alone
// (`holdDictionarySet` of the next set).
import { loadVerifier } from '../dist/verify-wasm.js';
import { streamBatches } from '../test/helpers.mjs';

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** `relays`: [{ set, stream }] (set file bytes, §10 stream compressed with it). */
export async function runSets({ relays, rounds, now = () => performance.now() }) {
  const v = await loadVerifier();
  const perRelay = relays.map((r) => streamBatches(r.stream));
  const grouped = [];
  perRelay.forEach((bs, k) => bs.forEach((b) => grouped.push([k, b])));
  const interleaved = [];
  for (let i = 0; i < Math.max(...perRelay.map((bs) => bs.length)); i++) {
    perRelay.forEach((bs, k) => i < bs.length && interleaved.push([k, bs[i]]));
  }
  let events = 0;
  let left = 0;
  const pass = (order) => {
    const t0 = now();
    for (const [k, b] of order) {
      const { events: got } = v.renderRecords(b.list, b.count, relays[k].set, true);
      for (const e of got) e === null ? left++ : events++;
    }
    return now() - t0;
  };
  // Untimed first passes: the engine compiles the hot code.
  for (let i = 0; i < 3; i++) pass(interleaved), pass(grouped);
  const times = { grouped: [], interleaved: [], switch: [] };
  events = left = 0;
  for (let round = 0; round < rounds; round++) {
    const first = round % 2 ? 'grouped' : 'interleaved';
    for (const mode of first === 'grouped' ? ['grouped', 'interleaved'] : ['interleaved', 'grouped']) {
      times[mode].push(pass(mode === 'grouped' ? grouped : interleaved));
    }
    const t0 = now();
    for (let i = 0; i < 30; i++) v.holdDictionarySet(relays[i % relays.length].set);
    times.switch.push((now() - t0) / 30);
  }
  const switches = { grouped: relays.length, interleaved: interleaved.length };
  return {
    batches: perRelay.map((bs) => bs.length),
    events: events / rounds / 2,
    leftToJs: left,
    switches,
    groupedMs: median(times.grouped),
    interleavedMs: median(times.interleaved),
    switchMs: median(times.switch),
    raw: times,
  };
}
