// Shared by the browser tests and the browser benchmark: bundle a page
// script with esbuild, serve it on loopback, drive Debian's Chromium with
// puppeteer-core.
import { build } from 'esbuild';
import { createServer } from 'node:http';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';

export const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
export const haveChromium = existsSync(chromiumPath);

/** Bundles `entry` to `dir/page.js` and writes `dir/index.html` loading it. */
export async function bundlePage(entry, dir, { minify = false } = {}) {
  mkdirSync(dir, { recursive: true });
  await build({
    entryPoints: { page: entry },
    outdir: dir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify,
    logLevel: 'warning',
  });
  writeFileSync(
    join(dir, 'index.html'),
    '<!doctype html><meta charset="utf-8"><title>nostrwire</title><script type="module" src="page.js"></script>\n',
  );
}

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.json': 'application/json', '.wasm': 'application/wasm' };

/** A static file server for `dir` on a free loopback port. */
export async function serveDir(dir) {
  const server = createServer((req, res) => {
    const path = normalize(new URL(req.url, 'http://x').pathname).replace(/^\/+/, '') || 'index.html';
    const file = join(dir, path);
    if (!file.startsWith(dir) || !existsSync(file)) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
    res.end(readFileSync(file));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}/`, close: () => new Promise((r) => server.close(r)) };
}

/**
 * Bundles page script `entry` into a temporary directory, with the
 * package's `verify-worker.js` beside it (the page's bundle starts workers
 * from beside itself, as the package's does), and serves it.
 */
export async function servePage(entry, opts) {
  const dir = mkdtempSync(join(tmpdir(), 'nostrwire-js-page-'));
  await bundlePage(entry, dir, opts);
  copyFileSync(new URL('../../dist/browser/verify-worker.js', import.meta.url).pathname, join(dir, 'verify-worker.js'));
  return serveDir(dir);
}

export async function launch(extraArgs = []) {
  const { default: puppeteer } = await import('puppeteer-core');
  return puppeteer.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ['--no-sandbox', '--headless=new', '--disable-gpu', '--disable-dev-shm-usage', ...extraArgs],
  });
}

/** Opens `url` and waits until the page script has set `window.ready`. */
export async function openPage(browser, url) {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(url);
  await page.waitForFunction('window.ready === true', { timeout: 20000 });
  page.errors = errors;
  return page;
}

/**
 * Chromium with `pool-page.js` (the pool tests' page) open: `{ page, close }`.
 */
export async function openPoolPage() {
  const site = await servePage(new URL('./pool-page.js', import.meta.url).pathname);
  const browser = await launch();
  const page = await openPage(browser, site.url);
  return {
    page,
    close: async () => {
      await browser.close();
      await site.close();
    },
  };
}
