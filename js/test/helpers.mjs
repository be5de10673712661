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

/**
 * The records of a stream (spec/nwb.md §10: a varint length, then the
 * record) as batch lists of at most `maxBytes` of records each (what a
 * relay sends: 64 KiB), as `{ list, count }`.
 */
export function streamBatches(stream, maxBytes = 64 << 10) {
  const out = [];
  let start = 0;
  let count = 0;
  let p = 0;
  while (p < stream.length) {
    let len = 0;
    let q = p;
    for (let shift = 0; ; shift += 7) {
      const b = stream[q++];
      len += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) break;
    }
    if (count > 0 && q + len - start > maxBytes) {
      out.push({ list: stream.subarray(start, p), count });
      start = p;
      count = 0;
    }
    count++;
    p = q + len;
  }
  if (count > 0) out.push({ list: stream.subarray(start, p), count });
  return out;
}
