// Small helpers the Node tests share.

/** A minimal LEB128 varint (spec/nwb.md §4) as bytes. */
export function varint(n) {
  const out = [];
  while (n >= 0x80) {
    out.push((n % 128) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Uint8Array.from(out);
}

/** A small seeded generator (xorshift32): numbers in [0, 1), the same on every run. */
export function seeded(seed) {
  return () => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 2 ** 32;
  };
}
