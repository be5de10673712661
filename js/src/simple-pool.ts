// `SimplePool` and `AbstractSimplePool` with nostr-tools' names and
// meanings (nostr-tools 2.x `nostr-tools/pool`), over the package's Relay
// client: each relay speaks nostrwire.v2, v1 or NIP-01 JSON as it offers,
// one verifier (main thread, or one set of workers) serves them all, and an
// event that several relays send is verified once.

import { Relay, useWebSocketImplementation, type Transport, type DropReason } from './relay.js';
import { VerifierPool } from './pool.js';
import { verifyEvent as packageVerify } from './verify.js';
import type { Limits } from './limits.js';
import { toHex } from './bytes.js';
import type { Event, EventTemplate, Filter } from './types.js';

export { Relay as AbstractRelay, useWebSocketImplementation };

type Signer = (template: EventTemplate) => Promise<Event>;

export type SubCloser = { close: (reason?: string) => void };

export interface AbstractPoolConstructorOptions {
  /** Called with each event and the relay's URL; the package's `verifyEvent` keeps its fast paths. */
  verifyEvent: (event: Event, url: string) => boolean;
  websocketImplementation?: unknown;
  /**
   * Pings each relay (a REQ nothing matches) every 29 s; one that answers
   * nothing within 20 s counts as dropped (see `Relay`'s `enablePing`).
   */
  enablePing?: boolean;
  /** Reconnects a dropped relay with backoff and asks again from `since` (see `Relay`). */
  enableReconnect?: boolean;
  /** A relay the pool no longer uses closes after this many milliseconds. Default 20,000. */
  idleTimeout?: number;
  automaticallyAuth?: (relayURL: string) => null | Signer;
  onRelayConnectionFailure?: (url: string) => void;
  onRelayConnectionSuccess?: (url: string) => void;
  allowConnectingToRelay?: (url: string, operation: ['read', Filter[]] | ['write', Event]) => boolean;
  /** Milliseconds to wait for a relay's WebSocket to open. Default 3,000. */
  maxWaitForConnection?: number;
  /** What each relay is offered (`Relay`'s `transport`), one for all or per URL. Default `auto`. */
  transport?: Transport | ((url: string) => Transport);
  /** Web Workers that verify for every relay of the pool (browsers; `Relay`'s `workers`). */
  workers?: number;
  workerUrl?: URL | string;
  limits?: Limits;
}

export interface SubscribeManyParams {
  onevent?: (event: Event) => void;
  /** Events dropped because they do not verify or do not match; `reason` is the package's. */
  oninvalidevent?: (event: Event, reason: DropReason) => void;
  /** Once, when every relay sent EOSE, timed out (`maxWait`) or closed. */
  oneose?: () => void;
  /** Once, when every relay's subscription closed, with each relay's reason. */
  onclose?: (reasons: { url: string; reason: string }[]) => void;
  alreadyHaveEvent?: (id: string) => boolean;
  /**
   * Milliseconds each relay has to send EOSE before it counts as sent
   * (one that sent it in time is waited for while its events are
   * verified). Default 4,400.
   */
  maxWait?: number;
  abort?: AbortSignal;
  /** Signs NIP-42 AUTH when a relay closes the REQ with `auth-required: `; the REQ is sent once more. */
  onauth?: Signer;
  id?: string;
  label?: string;
}

/** What `countMany` counts of its target (NIP-45), as nostr-tools names it. */
export type CountManyDirective = 'reactions' | 'reposts' | 'quotes' | 'replies' | 'comments' | 'followers';

// nostr-tools' filter for each directive (nip45 `getCountManyFilter`).
function countManyFilter(target: string, directive: CountManyDirective): Filter {
  switch (directive) {
    case 'reactions':
      return { '#e': [target], kinds: [7] };
    case 'reposts':
      return { '#e': [target], kinds: [6] };
    case 'quotes':
      return { '#q': [target], kinds: [1, 1111] };
    case 'replies':
      return { '#e': [target], kinds: [1] };
    case 'comments':
      return { '#E': [target], kinds: [1111] };
    case 'followers':
      return { '#p': [target], kinds: [3] };
  }
}

type QueryParams = Pick<SubscribeManyParams, 'label' | 'id' | 'maxWait'>;
type EoseParams = Pick<SubscribeManyParams, 'label' | 'id' | 'onevent' | 'oninvalidevent' | 'onclose' | 'maxWait' | 'onauth'>;

/** nostr-tools' URL normalization: what makes two spellings of a relay one relay. */
export function normalizeURL(url: string): string {
  try {
    if (url.indexOf('://') === -1) url = 'wss://' + url;
    const p = new URL(url);
    if (p.protocol === 'http:') p.protocol = 'ws:';
    else if (p.protocol === 'https:') p.protocol = 'wss:';
    p.pathname = p.pathname.replace(/\/+/g, '/');
    if (p.pathname.endsWith('/')) p.pathname = p.pathname.slice(0, -1);
    if ((p.port === '80' && p.protocol === 'ws:') || (p.port === '443' && p.protocol === 'wss:')) p.port = '';
    p.searchParams.sort();
    p.hash = '';
    return p.toString();
  } catch {
    throw new Error(`Invalid URL: ${url}`);
  }
}

// NIP-42 after an `auth-required: ` answer: the relay's challenge may come
// just after the refusal.
async function authenticate(relay: Relay, sign: Signer): Promise<string> {
  for (let waited = 0; !relay.authChallenge && waited < relay.publishTimeout; waited += 50) {
    await new Promise((r) => setTimeout(r, 50));
  }
  return relay.auth(sign);
}

function aborted(signal: AbortSignal | undefined): Promise<never> | null {
  if (!signal) return null;
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

export class AbstractSimplePool {
  protected relays = new Map<string, Relay>();
  /** With `trackRelays`: the relays each event id came from or was published to. */
  seenOn = new Map<string, Set<Relay>>();
  trackRelays = false;
  verifyEvent: (event: Event, url: string) => boolean;
  enablePing: boolean | undefined;
  enableReconnect: boolean;
  idleTimeout = 20_000;
  automaticallyAuth?: (relayURL: string) => null | Signer;
  onRelayConnectionFailure?: (url: string) => void;
  onRelayConnectionSuccess?: (url: string) => void;
  allowConnectingToRelay?: (url: string, operation: ['read', Filter[]] | ['write', Event]) => boolean;
  maxWaitForConnection: number;

  private readonly opts: AbstractPoolConstructorOptions;
  private verifiers: VerifierPool | null = null;
  // Per relay: operations under way, and since when none is.
  private readonly use = new Map<Relay, { ops: number; since?: number; timer?: ReturnType<typeof setTimeout> }>();

  constructor(opts: AbstractPoolConstructorOptions) {
    this.opts = opts;
    this.verifyEvent = opts.verifyEvent;
    this.enablePing = opts.enablePing;
    this.enableReconnect = opts.enableReconnect ?? false;
    if (opts.idleTimeout) this.idleTimeout = opts.idleTimeout;
    this.automaticallyAuth = opts.automaticallyAuth;
    this.onRelayConnectionFailure = opts.onRelayConnectionFailure;
    this.onRelayConnectionSuccess = opts.onRelayConnectionSuccess;
    this.allowConnectingToRelay = opts.allowConnectingToRelay;
    this.maxWaitForConnection = opts.maxWaitForConnection || 3000;
  }

  private newRelay(url: string): Relay {
    const o = this.opts;
    const verify = this.verifyEvent;
    const own = verify === packageVerify;
    if (own && !this.verifiers && (o.workers ?? 0) > 0 && typeof Worker !== 'undefined') {
      this.verifiers = new VerifierPool(o.workers!, o.workerUrl ?? new URL('./verify-worker.js', import.meta.url));
    }
    return new Relay(url, {
      transport: typeof o.transport === 'function' ? o.transport(url) : o.transport,
      verifyEvent: own ? packageVerify : (event) => verify(event, url),
      verifierPool: this.verifiers ?? undefined,
      limits: o.limits,
      websocketImplementation: o.websocketImplementation,
      enableReconnect: this.enableReconnect,
      enablePing: this.enablePing,
    });
  }

  async ensureRelay(url: string, params?: { connectionTimeout?: number; abort?: AbortSignal }): Promise<Relay> {
    url = normalizeURL(url);
    let relay = this.relays.get(url);
    if (!relay) {
      const r = (relay = this.newRelay(url));
      r.onclose = () => {
        if (this.relays.get(url) === r) this.relays.delete(url);
        clearTimeout(this.use.get(r)?.timer);
        this.use.delete(r);
      };
      this.relays.set(url, r);
    }
    const signer = this.automaticallyAuth?.(url);
    if (signer) relay.onauth = signer;
    relay.connectionTimeout = params?.connectionTimeout ?? this.maxWaitForConnection;
    try {
      const abort = aborted(params?.abort);
      await (abort ? Promise.race([relay.connect(), abort]) : relay.connect());
    } catch (err) {
      if (this.relays.get(url) === relay) this.relays.delete(url);
      throw err;
    }
    return relay;
  }

  private connectionTimeout(maxWait?: number): number {
    return this.maxWaitForConnection < (maxWait || 0) ? Math.max(maxWait! * 0.8, maxWait! - 1000) : this.maxWaitForConnection;
  }

  // Idle relays close after `idleTimeout` (none of the pool's operations
  // and no subscription of the caller's open on them).
  private busy(relay: Relay): void {
    const u = this.use.get(relay) ?? { ops: 0 };
    u.ops++;
    u.since = undefined;
    clearTimeout(u.timer);
    this.use.set(relay, u);
  }

  private done(relay: Relay): void {
    const u = this.use.get(relay);
    if (!u || --u.ops > 0) return;
    u.since = Date.now();
    u.timer = setTimeout(() => {
      if (u.ops === 0 && relay.openSubs.size === 0) relay.close();
    }, this.idleTimeout);
  }

  private seen(id: string, relay: Relay): void {
    let set = this.seenOn.get(id);
    if (!set) this.seenOn.set(id, (set = new Set()));
    set.add(relay);
  }

  close(relays: string[]): void {
    for (const url of relays.map(normalizeURL)) {
      this.relays.get(url)?.close();
      this.relays.delete(url);
    }
  }

  subscribe(relays: string[], filter: Filter, params: SubscribeManyParams): SubCloser {
    const urls = [...new Set(relays.map(normalizeURL))];
    return this.subscribeMap(
      urls.map((url) => ({ url, filter })),
      params,
    );
  }

  subscribeMany(relays: string[], filter: Filter, params: SubscribeManyParams): SubCloser {
    return this.subscribe(relays, filter, params);
  }

  /** One REQ per URL with the filters given for it; `oneose` and `onclose` once for all. */
  subscribeMap(requests: { url: string; filter: Filter }[], params: SubscribeManyParams): SubCloser {
    const grouped = new Map<string, Filter[]>();
    for (const { url, filter } of requests) {
      const u = normalizeURL(url);
      grouped.set(u, [...(grouped.get(u) ?? []), filter]);
    }
    const groups = [...grouped];
    const n = groups.length;
    // Ids handed on or being verified: a copy from another relay is dropped
    // before it is matched or verified. A copy that fails frees its id, so
    // a later copy from another relay is still taken.
    const known = new Set<string>();
    const subs: { close(reason?: string): void }[] = [];
    const timers: ReturnType<typeof setTimeout>[] = [];
    const eosed: boolean[] = [];
    const closes: ({ url: string; reason: string } | undefined)[] = [];
    let eoseCount = 0;
    let closeCount = 0;
    let closing: string | null = null;
    const handleEose = (i: number) => {
      if (eosed[i]) return;
      eosed[i] = true;
      clearTimeout(timers[i]);
      if (++eoseCount === n) params.oneose?.();
    };
    const handleClose = (i: number, url: string, reason: string) => {
      if (closes[i]) return;
      handleEose(i);
      closes[i] = { url, reason };
      if (++closeCount === n) params.onclose?.(closes as { url: string; reason: string }[]);
    };
    const open = (i: number, url: string, relay: Relay, filters: Filter[], retry: boolean) => {
      let sub;
      try {
        sub = relay.subscribe(filters, {
          id: params.id,
          label: params.label,
          onevent: params.onevent,
          oninvalidevent: (event, reason) => {
            known.delete(event.id);
            params.oninvalidevent?.(event, reason);
          },
          oneose: () => handleEose(i),
          knownEvent: (id) => known.has(id),
          alreadyHaveEvent: (id) => {
            if (this.trackRelays) this.seen(id, relay);
            if (params.alreadyHaveEvent?.(id) || known.has(id)) return true;
            known.add(id);
            return false;
          },
          onclose: (reason) => {
            this.done(relay);
            if (!retry && closing === null && params.onauth && reason.startsWith('auth-required: ')) {
              authenticate(relay, params.onauth).then(
                () => open(i, url, relay, filters, true),
                (err) => handleClose(i, url, `auth was required and attempted, but failed with: ${err}`),
              );
            } else handleClose(i, url, reason);
          },
        });
      } catch (err) {
        return handleClose(i, url, err instanceof Error ? err.message : String(err));
      }
      this.busy(relay);
      subs.push(sub);
      if (closing !== null) return sub.close(closing);
      // A relay that sent EOSE in time is waited for while the events
      // before it are verified.
      clearTimeout(timers[i]);
      if (!eosed[i]) timers[i] = setTimeout(() => sub.eoseArrived || handleEose(i), params.maxWait || relay.publishTimeout);
    };
    groups.forEach(async ([url, filters], i) => {
      if (this.allowConnectingToRelay?.(url, ['read', filters]) === false) {
        return handleClose(i, url, 'connection skipped by allowConnectingToRelay');
      }
      let relay: Relay;
      try {
        relay = await this.ensureRelay(url, { connectionTimeout: this.connectionTimeout(params.maxWait), abort: params.abort });
      } catch (err) {
        this.onRelayConnectionFailure?.(url);
        return handleClose(i, url, err instanceof Error ? err.message : String(err));
      }
      this.onRelayConnectionSuccess?.(url);
      if (closing !== null) return handleClose(i, url, closing);
      open(i, url, relay, filters, false);
    });
    const closer = {
      close(reason = 'closed by caller') {
        if (closing !== null) return;
        closing = reason;
        for (const t of timers) clearTimeout(t);
        for (const sub of subs) sub.close(reason);
      },
    };
    params.abort?.addEventListener('abort', () => closer.close(String(params.abort!.reason || '<aborted>')), { once: true });
    return closer;
  }

  /** `subscribe`, closed by itself once every relay sent EOSE. */
  subscribeEose(relays: string[], filter: Filter, params: EoseParams): SubCloser {
    let closer: SubCloser | undefined;
    closer = this.subscribe(relays, filter, {
      ...params,
      oneose() {
        const reason = 'closed automatically on eose';
        if (closer) closer.close(reason);
        else params.onclose?.(relays.map((url) => ({ url, reason })));
      },
    });
    return closer;
  }

  subscribeManyEose(relays: string[], filter: Filter, params: EoseParams): SubCloser {
    return this.subscribeEose(relays, filter, params);
  }

  /** Every distinct event the relays hold for `filter`, once all sent EOSE. */
  querySync(relays: string[], filter: Filter, params?: QueryParams): Promise<Event[]> {
    return new Promise((resolve) => {
      const events: Event[] = [];
      this.subscribeEose(relays, filter, {
        ...params,
        onevent: (event) => events.push(event),
        onclose: () => resolve(events),
      });
    });
  }

  /** The newest event for `filter` (whose `limit` is set to 1), or null. */
  async get(relays: string[], filter: Filter, params?: QueryParams): Promise<Event | null> {
    filter.limit = 1;
    const events = await this.querySync(relays, filter, params);
    events.sort((a, b) => b.created_at - a.created_at);
    return events[0] || null;
  }

  /**
   * NIP-45 COUNT of what refers to `target` (`directive`: its reactions,
   * reposts, quotes, replies, comments or followers) on every relay: the
   * largest count, and the relays' HyperLogLog registers merged where
   * they sent them. A relay that fails or refuses counts for nothing.
   */
  async countMany(
    relays: string[],
    target: string,
    directive: CountManyDirective,
    params?: { id?: string | null; maxWait?: number; abort?: AbortSignal },
  ): Promise<{ count: number; hll?: string }> {
    const filter = countManyFilter(target, directive);
    const urls = [...new Set(relays.map(normalizeURL))];
    const answers = await Promise.all(
      urls.map(async (url) => {
        if (this.allowConnectingToRelay?.(url, ['read', [filter]]) === false) return null;
        let relay: Relay;
        try {
          relay = await this.ensureRelay(url, { connectionTimeout: this.connectionTimeout(params?.maxWait), abort: params?.abort });
        } catch {
          this.onRelayConnectionFailure?.(url);
          return null;
        }
        this.onRelayConnectionSuccess?.(url);
        return relay.countWithHLL([filter], { id: params?.id }).catch(() => null);
      }),
    );
    let count = 0;
    let hll: Uint8Array | undefined;
    for (const a of answers) {
      if (!a) continue;
      if (a.count > count) count = a.count;
      if (typeof a.hll !== 'string' || !/^[0-9a-f]{512}$/.test(a.hll)) continue;
      hll ??= new Uint8Array(256);
      for (let i = 0; i < 256; i++) hll[i] = Math.max(hll[i]!, parseInt(a.hll.slice(2 * i, 2 * i + 2), 16));
    }
    return hll ? { count, hll: toHex(hll) } : { count };
  }

  /**
   * One promise per relay: the OK message, or a rejection (a duplicate
   * URL, no connection, a refusal, no answer in time). After an
   * `auth-required: ` refusal with `onauth`, the event is sent once more.
   */
  publish(relays: string[], event: Event, params?: { onauth?: Signer; maxWait?: number; abort?: AbortSignal }): Promise<string>[] {
    return relays.map(normalizeURL).map(async (url, i, arr) => {
      if (arr.indexOf(url) !== i) return Promise.reject('duplicate url');
      if (this.allowConnectingToRelay?.(url, ['write', event]) === false) {
        return Promise.reject('connection skipped by allowConnectingToRelay');
      }
      let r: Relay;
      try {
        r = await this.ensureRelay(url, { connectionTimeout: this.connectionTimeout(params?.maxWait), abort: params?.abort });
      } catch (err) {
        this.onRelayConnectionFailure?.(url);
        return Promise.reject('connection failure: ' + String(err));
      }
      this.busy(r);
      try {
        let reason: string;
        try {
          reason = await r.publish(event);
        } catch (err) {
          if (!(err instanceof Error && err.message.startsWith('auth-required: ') && params?.onauth)) throw err;
          await authenticate(r, params.onauth);
          reason = await r.publish(event);
        }
        if (this.trackRelays) this.seen(event.id, r);
        return reason;
      } finally {
        this.done(r);
      }
    });
  }

  /** Each relay's URL and whether it is connected. */
  listConnectionStatus(): Map<string, boolean> {
    const map = new Map<string, boolean>();
    this.relays.forEach((relay, url) => map.set(url, relay.connected));
    return map;
  }

  /** Closes every relay (and the pool's verifier workers). */
  destroy(): void {
    this.relays.forEach((relay) => relay.close());
    this.relays = new Map();
    this.verifiers?.close();
    this.verifiers = null;
  }

  /** Closes the relays idle for at least `idleThresholdMs`; returns their URLs. */
  pruneIdleRelays(idleThresholdMs = 10_000): string[] {
    const pruned: string[] = [];
    for (const [url, relay] of this.relays) {
      const since = this.use.get(relay)?.since;
      if (since !== undefined && Date.now() - since >= idleThresholdMs && relay.openSubs.size === 0) {
        this.relays.delete(url);
        pruned.push(url);
        relay.close();
      }
    }
    return pruned;
  }
}

/** The pool with the package's verifier (WebAssembly libsecp256k1, noble where it cannot run). */
export class SimplePool extends AbstractSimplePool {
  constructor(options?: Omit<AbstractPoolConstructorOptions, 'verifyEvent'>) {
    super({ verifyEvent: packageVerify, maxWaitForConnection: 3000, ...options });
  }
}
