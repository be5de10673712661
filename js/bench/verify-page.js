// The verifier benchmark in Chromium: bench/verify-core.js in a page.
import { measure } from './verify-core.js';

window.measure = async (variantNames, rounds) => {
  const lines = (await (await fetch('events.jsonl')).text()).split('\n').filter((l) => l.trim());
  const variants = {};
  for (const name of variantNames) variants[name] = new Uint8Array(await (await fetch(`variants/${name}.wasm`)).arrayBuffer());
  return measure(lines, variants, rounds);
};
window.ready = true;
