/**
 * `nostrwire/verify`: the package's verifier with nostr-tools' shape, for
 * any client. `verifyEvent(event)` checks the id and the BIP-340 signature
 * and caches the verdict on the event (`verifiedSymbol`), as nostr-tools'
 * does; importing this module loads the WebAssembly verifier first (top-level
 * await), falling back to @noble/curves where WebAssembly cannot run.
 *
 * ```js
 * import { verifyEvent } from 'nostrwire/verify'; // instead of 'nostr-tools/pure'
 * ```
 */
import { initVerifier } from './verify.js';

await initVerifier();

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
