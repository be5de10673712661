// Starts a `nostrwire relay` on a free loopback port with a temporary data
// directory; NOSTRWIRE_BIN names the binary (default target/release/nostrwire).
import { spawn } from 'node:child_process';
import { mkdtempSync, openSync, writeFileSync, existsSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { once } from 'node:events';

const repo = resolve(new URL('../..', import.meta.url).pathname);

export const bin = resolve(repo, process.env.NOSTRWIRE_BIN ?? 'target/release/nostrwire');
export const haveBinary = existsSync(bin);

export function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

async function waitForPort(port, child) {
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null) throw new Error(`relay exited with ${child.exitCode}`);
    const up = await new Promise((res) => {
      const c = connect(port, '127.0.0.1', () => { c.destroy(); res(true); });
      c.once('error', () => res(false));
    });
    if (up) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('relay did not start listening');
}

/** `config` is TOML text for the relay's config file; `data` an existing data directory. */
export async function startRelay({ config = '', data } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'nostrwire-js-'));
  const file = join(dir, 'relay.toml');
  writeFileSync(file, config);
  const port = await freePort();
  const log = openSync(join(dir, 'relay.log'), 'w');
  const child = spawn(bin, ['relay', '--config', file, '--listen', `127.0.0.1:${port}`, '--data', data ?? join(dir, 'data')], {
    stdio: ['ignore', log, log],
  });
  await waitForPort(port, child);
  return {
    url: `ws://127.0.0.1:${port}`,
    http: `http://127.0.0.1:${port}`,
    dir,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}
