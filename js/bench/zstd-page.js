import { runBench } from './zstd-core.js';

const get = async (name) => new Uint8Array(await (await fetch(name)).arrayBuffer());
window.run = async (rounds) => {
  const wasm = await get('ruzstd.wasm');
  const streams = [];
  for (const name of ['per-kind', 'fallback']) streams.push({ name, set: await get(`${name}.nwbd`), stream: await get(`${name}.nwb`) });
  return runBench({ streams, wasm, rounds });
};
window.ready = true;
