// Headless Chromium: a relay that floods the pool with events that do not
// verify must not hold up an honest relay's events for more than about one
// slice of the pool's work. Counted in work, not time: how many of the
// flood's events the pool refused between an honest event's message
// reaching the page and that event reaching `onevent`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { haveBinary } from './relay-process.mjs';
import { scriptedRelayServer } from './scripted-relay.mjs';
import { KINDS, poolEvents } from './pool-relays.mjs';
import { openPoolPage, haveChromium } from './browser/harness.mjs';

const skip = (!haveChromium && 'no chromium (js/scripts/install-chromium.sh)') || (!haveBinary && 'no nostrwire binary (set NOSTRWIRE_BIN)');

const HONEST = 20;
const FLOOD = 8000;
// One slice (8 ms) of main-thread verification at about 50 µs an event,
// the verifier's speed in Chromium: 160 refusals (a slower machine refuses
// fewer in a slice, so the bound only loosens there).
const ONE_SLICE = 160;
// With workers, an honest batch may wait behind what its worker holds: two
// batches of 64 at most. Before relays took turns for the workers, a
// worker held half the flood's backlog ahead of it (thousands of events),
// and honest events came after most of the flood's refusals.

let flood, honest, chromium, page, filter, honestIds;
before(async () => {
  if (skip) return;
  const { events, since, until } = poolEvents({ count: FLOOD + HONEST, seed: 47, newest: Math.floor(Date.now() / 1000) - 3600 });
  filter = { kinds: KINDS, since, until };
  // Ids that are right, signatures of other events: each costs a full check.
  honestIds = events.slice(0, HONEST).map((e) => e.id);
  const forged = events.slice(HONEST).map((e, i, all) => ({ ...e, sig: all[(i + 1) % all.length].sig }));
  // As a stream, so that the honest relay's messages come in the middle.
  flood = await scriptedRelayServer(forged, { chunk: 50 });
  // It answers once the flood is under way.
  honest = await scriptedRelayServer(events.slice(0, HONEST), { delay: 100 });
  chromium = await openPoolPage();
  page = chromium.page;
});
after(async () => {
  await chromium?.close();
  await flood?.stop();
  await honest?.stop();
});

for (const workers of [0, 2]) {
  test(`Chromium, ${workers ? `${workers} verifier workers` : 'main thread'}: a flood of invalid events holds an honest relay's events up for one slice at most`, { skip }, async () => {
    const r = await page.evaluate((o) => window.floodRun(o), { floodUrl: flood.url, honestUrl: honest.url, filter, honestIds, workers });
    assert.equal(r.delivered.length, HONEST);
    assert.equal(r.invalid, FLOOD, 'every forged event refused');
    // Each honest event's message, in order (then EOSE).
    const waited = r.delivered.map((d, i) => d - r.arrived[i]);
    const worst = Math.max(...waited);
    console.log(`flood refusals while an honest event waited: worst ${worst}, each ${waited.join(' ')}; refused in all ${r.invalid}`);
    assert.ok(r.arrived[0] < FLOOD / 2, `the honest relay answered while the flood was handled (${r.arrived[0]} refused before)`);
    assert.ok(r.delivered.at(-1) < FLOOD / 2, `the honest events were all handed on before half the flood was refused (${r.delivered.at(-1)})`);
    if (workers === 0) assert.ok(worst <= ONE_SLICE, `an honest event waited while ${worst} of the flood's events were refused`);
    else {
      // Refusals are no measure here: handing on a verdict that came back
      // costs about a microsecond. What the honest batches waited behind
      // is what their workers held.
      console.log(`events a worker held ahead of an honest batch: ${r.aheadInWorkers.join(' ')}`);
      assert.ok(r.aheadInWorkers.length > 0);
      assert.ok(Math.max(...r.aheadInWorkers) <= 2 * 64, `a worker held ${Math.max(...r.aheadInWorkers)} events ahead of an honest batch`);
    }
  });
}
