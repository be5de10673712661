import { runBench, runCold } from './zstd-core.js';

const get = async (name) => new Uint8Array(await (await fetch(name)).arrayBuffer());
window.run = async (rounds) => {
  const wasm = await get('ruzstd.wasm');
  const verifier = await get('verifier.wasm');
  const streams = [];
  for (const name of ['per-kind', 'fallback']) streams.push({ name, set: await get(`${name}.nwbd`), stream: await get(`${name}.nwb`) });
  return runBench({ streams, wasm, verifier, rounds });
};
// The files are fetched first: only the zstd work is timed.
window.cold = async (which, name) => {
  const verifier = await get('verifier.wasm');
  const set = await get(`${name}.nwbd`);
  const stream = await get(`${name}.nwb`);
  return runCold({ which, set, stream, verifier });
};
window.ready = true;
