// The browser test page: the Relay client in Chromium against a live relay.
import { generateSecretKey, getPublicKey, finalizeEvent } from 'nostr-tools/pure';
import { Relay, verifierName, verifiedSymbol } from '../../src/index.ts';

const now = () => Math.floor(Date.now() / 1000);

function collect(r, filters) {
  return new Promise((resolve, reject) => {
    const got = [];
    const timer = setTimeout(() => reject(new Error('no EOSE')), 5000);
    const sub = r.subscribe(filters, {
      onevent: (e) => got.push(e),
      oneose: () => {
        clearTimeout(timer);
        sub.close();
        resolve(got);
      },
    });
  });
}

async function scenario(url, transport, options = {}) {
  const out = {};
  const sk = generateSecretKey();
  const pk = getPublicKey(sk);
  const r = await Relay.connect(url, { transport, ...options });
  out.transport = r.transport;
  const tag = `browser-${transport}-${Math.random().toString(36).slice(2)}`;
  const note = finalizeEvent({ kind: 1, created_at: now() - 5, tags: [['t', tag]], content: `from Chromium ✓ ${transport}` }, sk);
  out.published = await r.publish(note);
  const stored = await collect(r, [{ authors: [pk] }]);
  out.stored = stored.map((e) => e.id === note.id && e.content === note.content && e[verifiedSymbol] === true);
  out.eose = true;

  const live = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no live event')), 5000);
    let eose = false;
    const sub = r.subscribe([{ '#t': [tag], since: now() - 1 }], {
      oneose: () => { eose = true; },
      onevent: (e) => {
        if (!eose) return;
        clearTimeout(timer);
        sub.close();
        resolve(e);
      },
    });
  });
  await new Promise((res) => setTimeout(res, 100));
  const second = finalizeEvent({ kind: 1, created_at: now(), tags: [['t', tag]], content: 'live' }, sk);
  await r.publish(second);
  out.live = (await live).id === second.id;
  out.count = await r.count([{ authors: [pk] }]);
  const forged = { ...finalizeEvent({ kind: 1, created_at: now(), tags: [], content: 'x' }, sk), content: 'y' };
  out.forgedRefused = await r.publish(forged).then(() => false, (e) => /invalid/.test(e.message));
  for (let i = 0; i < 100 && !r.authChallenge; i++) await new Promise((res) => setTimeout(res, 20));
  out.auth = await r.auth(async (t) => finalizeEvent(t, sk)).then((m) => `ok ${m}`, (e) => `refused ${e.message}`);
  out.verifier = verifierName();
  out.workerFailure = r.workerFailure?.message ?? null;
  r.close();
  return out;
}

window.scenario = scenario;
window.binaryRefused = (url) => Relay.connect(url, { transport: 'binary' }).then(() => false, () => true);
// Subscribes through verifier workers to a relay that sends `ids`' events,
// the app having `have` already: which events arrive, and how many events
// were handed to the workers (counted on the real Worker's postMessage).
window.withWorkers = async (url, have) => {
  let posted = 0;
  const post = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function (message, ...rest) {
    posted += message?.events?.length ?? 0;
    return post.call(this, message, ...rest);
  };
  try {
    const r = await Relay.connect(url, { transport: 'binary', workers: 2 });
    const got = await new Promise((resolve) => {
      const seen = [];
      r.subscribe([{}], {
        alreadyHaveEvent: (id) => have.includes(id),
        onevent: (e) => seen.push({ id: e.id, verified: e[verifiedSymbol] }),
        oneose: () => resolve(seen),
      });
    });
    const workerFailure = r.workerFailure?.message ?? null;
    r.close();
    return { got, posted, workerFailure };
  } finally {
    Worker.prototype.postMessage = post;
  }
};
// Subscribes through verifier workers (nostrwire.v2) until EOSE: the events
// that arrive, with their verdicts, and what was dropped.
window.throughWorkers = async (url) => {
  const r = await Relay.connect(url, { transport: 'v2', workers: 2 });
  const out = await new Promise((resolve) => {
    const got = [];
    const timer = setTimeout(() => resolve({ got, eose: false }), 10000);
    const sub = r.subscribe([{}], {
      onevent: (e) => got.push({ id: e.id, verified: e[verifiedSymbol] }),
      oneose: () => {
        clearTimeout(timer);
        resolve({ got, eose: true, dropped: { ...sub.dropped } });
      },
    });
  });
  out.workerFailure = r.workerFailure?.message ?? null;
  r.close();
  return out;
};
window.ready = true;
