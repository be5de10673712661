// NIP-01 filter matching on the client, as nostr-tools' `matchFilter`: a
// relay may only send a subscription the events its filters select, and
// the Relay client holds it to that.

import type { Event, Filter } from './types.js';

/**
 * True when `event` matches `filter`: its id, author and kind are listed
 * (where the filter lists them), `created_at` lies within `since`..`until`,
 * and for every `#x` condition some tag named `x` has one of the values as
 * its first value. `limit` and `search` (NIP-50) select among matching
 * events on the relay and are not checked here.
 */
export function matchFilter(filter: Filter, event: Event): boolean {
  if (filter.ids && !filter.ids.includes(event.id)) return false;
  if (filter.kinds && !filter.kinds.includes(event.kind)) return false;
  if (filter.authors && !filter.authors.includes(event.pubkey)) return false;
  if (filter.since !== undefined && event.created_at < filter.since) return false;
  if (filter.until !== undefined && event.created_at > filter.until) return false;
  // The event is the relay's word until verified: tolerate any shape.
  const tags: unknown = event.tags;
  for (const key in filter) {
    if (key[0] !== '#') continue;
    const values = filter[key as `#${string}`];
    if (!values) continue;
    const name = key.slice(1);
    if (!Array.isArray(tags)) return false;
    if (!tags.some((tag) => Array.isArray(tag) && tag[0] === name && values.includes(tag[1]))) return false;
  }
  return true;
}

/** True when `event` matches at least one of `filters` (NIP-01's "or"). */
export function matchFilters(filters: Filter[], event: Event): boolean {
  return filters.some((filter) => matchFilter(filter, event));
}
