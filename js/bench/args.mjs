// The benchmarks' command-line flags: an unknown flag is refused before
// anything runs (a misspelt one would otherwise start a full run), and
// `--help` prints the usage.
import { parseArgs } from 'node:util';

export function checkArgs(usage, { strings = [], booleans = [] }) {
  const options = { help: { type: 'boolean', short: 'h' } };
  for (const name of strings) options[name] = { type: 'string' };
  for (const name of booleans) options[name] = { type: 'boolean' };
  let values;
  try {
    ({ values } = parseArgs({ args: process.argv.slice(2), options, strict: true, allowPositionals: false }));
  } catch (e) {
    console.error(`${e.message}\n\n${usage}`);
    process.exit(2);
  }
  if (values.help) {
    console.log(usage);
    process.exit(0);
  }
}
