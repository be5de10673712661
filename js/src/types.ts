/** A signed NIP-01 event, in nostr-tools' `Event` shape. */
export interface Event {
  id: string;
  pubkey: string;
  created_at: number;
  kind: number;
  tags: string[][];
  content: string;
  sig: string;
}

/** An event before signing (nostr-tools' `EventTemplate`). */
export interface EventTemplate {
  created_at: number;
  kind: number;
  tags: string[][];
  content: string;
}

/** A NIP-01 filter. */
export interface Filter {
  ids?: string[];
  kinds?: number[];
  authors?: string[];
  since?: number;
  until?: number;
  limit?: number;
  search?: string;
  [tag: `#${string}`]: string[] | undefined;
}
