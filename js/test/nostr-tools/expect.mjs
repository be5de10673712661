// The part of bun:test's `expect` that nostr-tools' pool tests use, on
// node:assert, so that their cases read as they were written.
import assert from 'node:assert/strict';

const ANY = Symbol('arrayContaining');

// `toEqual` compares string keys only: a verifier marks events with a
// symbol of its own (nostr-tools' `pure` and `pool` modules each have one).
const plain = (x) => (x !== null && typeof x === 'object' ? JSON.parse(JSON.stringify(x)) : x);

function matches(actual, expected) {
  if (expected && expected[ANY]) return Array.isArray(actual) && expected[ANY].every((e) => actual.some((a) => matches(a, e)));
  try {
    assert.deepStrictEqual(plain(actual), plain(expected));
    return true;
  } catch {
    return false;
  }
}

export function expect(actual) {
  const m = {
    toHaveLength: (n) => assert.equal(actual.length, n, `length ${actual.length}, expected ${n}`),
    toEqual: (e) => assert.ok(matches(actual, e), `${JSON.stringify(actual)} does not equal ${JSON.stringify(e)}`),
    toBe: (e) => assert.equal(actual, e),
    toBeTrue: () => assert.equal(actual, true),
    toBeFalse: () => assert.equal(actual, false),
    toBeDefined: () => assert.notEqual(actual, undefined),
    toBeUndefined: () => assert.equal(actual, undefined),
    toBeGreaterThan: (n) => assert.ok(actual > n, `${actual} is not greater than ${n}`),
    toContain: (s) => assert.ok(actual.includes(s), `${JSON.stringify(actual)} does not contain ${JSON.stringify(s)}`),
    toHaveProperty: (k, v) => {
      assert.ok(actual != null && k in actual, `no property ${k}`);
      if (v !== undefined) assert.deepStrictEqual(actual[k], v);
    },
  };
  m.not = {
    toBeNull: () => assert.notEqual(actual, null),
  };
  return m;
}
expect.arrayContaining = (items) => ({ [ANY]: items });
