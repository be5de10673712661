// Starts the plain khatru relay of test/khatru-relay (NIP-01 JSON only,
// events in memory) on a free loopback port. KHATRU_BIN names the binary
// (js/scripts/build-khatru.sh builds it; default js/test-output/khatru-relay).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { once } from 'node:events';
import { connect } from 'node:net';
import { resolve } from 'node:path';
import { freePort } from './relay-process.mjs';

const js = resolve(new URL('..', import.meta.url).pathname);
export const khatruBin = resolve(js, process.env.KHATRU_BIN ?? 'test-output/khatru-relay');
export const haveKhatru = existsSync(khatruBin);

export async function startKhatru() {
  const port = await freePort();
  const child = spawn(khatruBin, [`127.0.0.1:${port}`], { stdio: 'ignore' });
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`khatru exited with ${child.exitCode}`);
    const up = await new Promise((res) => {
      const c = connect(port, '127.0.0.1', () => {
        c.destroy();
        res(true);
      });
      c.once('error', () => res(false));
    });
    if (up) break;
    if (i > 200) throw new Error('khatru did not start listening');
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `ws://127.0.0.1:${port}`,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}
