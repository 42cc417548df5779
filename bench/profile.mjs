// profile.mjs -- one consentd under POST /token load (or ROUTE's) (wrk -t2 -c32, D seconds), with a
// profiler attached to it for that time: `node bench/profile.mjs BINARY 'perf record -g -p {pid} -o F'`
// ({pid} is consentd's).  THREADS=n sets [server] threads (0: the default).  ROUTE=jwks
// profiles GET /.well-known/jwks.json instead, ROUTE=introspect POST /introspect over 10,000
// distinct grants (issued before the run), as `make bench` measures them.  Prints wrk's row
// (req/s, CPU per request) and the profiler's own output; stops what it starts.
import { realpathSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { timed, issueMany } from './measure.js';
import { wrkRunner } from './wrk.js';

const here = dirname(fileURLToPath(import.meta.url));
const [binArg, cmd] = process.argv.slice(2);
if (!binArg || !cmd) {
  console.error("usage: node bench/profile.mjs BINARY 'COMMAND {pid}'");
  process.exit(2);
}
process.env.TEST_CONSENTD_BIN = realpathSync(binArg);
const { benchConfig, approvedConsent, DISTINCT } = await import('./bench.js');
const ROUTE = process.env.ROUTE || 'token';
if (!['token', 'jwks', 'introspect'].includes(ROUTE)) {
  console.error('ROUTE: token, jwks or introspect');
  process.exit(2);
}
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
  let name = 'POST /token';
  let url = `${s.url}/token`;
  let f = w.script({ method: 'POST', body: c.tokenBody, headers: form });
  if (ROUTE === 'jwks') {
    [name, url, f] = ['GET /.well-known/jwks.json', `${s.url}/.well-known/jwks.json`, undefined];
  } else if (ROUTE === 'introspect') {
    const file = join(w.dir, 'grants.txt');
    writeFileSync(file, `${(await issueMany(`${s.url}/token`, c.tokenBody, form, DISTINCT)).join('\n')}\n`);
    [name, url] = [`POST /introspect (${DISTINCT} distinct grants)`, `${s.url}/introspect`];
    f = w.script({ method: 'POST', headers: form, bodies: { file, prefix: 'token=' } });
  }
  await timed(w, pid, `warm-up ${name}`, url, f, { duration: 2 });
  prof = spawn('sh', ['-c', 'exec ' + cmd.replaceAll('{pid}', String(pid))], { stdio: 'inherit' });
  await timed(w, pid, name, url, f);
  prof.kill('SIGINT');
  await new Promise((r) => { prof.on('exit', r); setTimeout(r, 20000); });
} finally {
  if (prof && prof.exitCode === null) prof.kill('SIGKILL');
  await s.stop();
  w.cleanup();
}
