/**
 * nostrwire for JavaScript: the nwb binary event format (spec/nwb.md), the
 * nostrwire.v1 and v2 transports (spec/transport.md), BIP-340 verification and a
 * Relay client with nostr-tools' names.
 */
export { NwbError, type NwbErrorKind } from './errors.js';
export { DEFAULT_LIMITS, type Limits } from './limits.js';
export type { Event, EventTemplate, Filter } from './types.js';
export { matchFilter, matchFilters } from './filter.js';
export {
  COMPRESSED_V1,
  EVENT_V1,
  decodeEvent,
  decodeEvents,
  decodeRecord,
  decompressRecord,
  encodeEvent,
  encodeEvents,
  useZstd,
  type ZstdDecoder,
} from './record.js';
export {
  getEventHash,
  initVerifier,
  serializeEvent,
  verifiedSymbol,
  verifierName,
  verifyEvent,
  verifyEvents,
  verifyRecord,
  verifyRecords,
} from './verify.js';
export {
  SUBPROTOCOL,
  SUBPROTOCOL_V2,
  decodeRelayFrame,
  decodeRelayFrameV2,
  eventFrame,
  holdFrame,
  jsonFrame,
  type RelayFrame,
} from './transport.js';
export {
  Relay,
  Subscription,
  useWebSocketImplementation,
  type RelayOptions,
  type DropReason,
  type SubscriptionParams,
  type Transport,
} from './relay.js';
