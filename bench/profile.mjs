// profile.mjs -- one consentd under POST /token load (wrk -t2 -c32, D seconds), with a
// profiler attached to it for that time: `node bench/profile.mjs BINARY 'perf record -g -p {pid} -o F'`
// ({pid} is consentd's).  THREADS=n sets [server] threads (0: the default).  Prints wrk's
// row (req/s, CPU per grant) and the profiler's own output; stops what it starts.
import { realpathSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { timed } from './measure.js';
import { wrkRunner } from './wrk.js';

const here = dirname(fileURLToPath(import.meta.url));
const [binArg, cmd] = process.argv.slice(2);
if (!binArg || !cmd) {
  console.error("usage: node bench/profile.mjs BINARY 'COMMAND {pid}'");
  process.exit(2);
}
process.env.TEST_CONSENTD_BIN = realpathSync(binArg);
const { benchConfig, approvedConsent } = await import('./bench.js');
const { startStack } = await import(join(here, '..', 'tests', 'lib', 'stack.js'));
const D = Math.max(1, Number(process.env.D || 10));
const config = await benchConfig();
config.server.threads = Number(process.env.THREADS || 0);
const s = await startStack({ config });
const w = wrkRunner({ threads: 2, connections: 32, duration: D });
let prof;
try {
  const c = await approvedConsent(s);
  const pid = s.c.proc.pid;
  const form = { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: c.auth };
  const f = w.script({ method: 'POST', body: c.tokenBody, headers: form });
  await timed(w, pid, 'warm-up POST /token', `${s.url}/token`, f, { duration: 2 });
  prof = spawn('sh', ['-c', 'exec ' + cmd.replaceAll('{pid}', String(pid))], { stdio: 'inherit' });
  await timed(w, pid, 'POST /token', `${s.url}/token`, f);
  prof.kill('SIGINT');
  await new Promise((r) => { prof.on('exit', r); setTimeout(r, 20000); });
} finally {
  if (prof && prof.exitCode === null) prof.kill('SIGKILL');
  await s.stop();
  w.cleanup();
}
