// The development IdP (tests/idp/devidp.js): oidc-provider, served from this test's own
// process by default, or as a child process (process: true) as `make run` starts it.
//
//   const idp = await startIdp({
//     clients,            // oidc-provider client metadata array (default: DEFAULT_CLIENTS)
//     users,              // { name: { password, name, email, groups } } (default: DEFAULT_USERS)
//     ttl,                // e.g. { AccessToken: 30 } (merged over devidp's defaults)
//     rotateRefreshToken, // default true
//     downstream,         // { resource, scopes: [...], accessTokenTTL } -> downstream OAuth provider mode
//     idJag,              // { clientIds, alg, lifetime, testKnobs } -> mints ID-JAGs (devidp.js)
//     port = 0,           // 0: the IdP binds a free port itself (no race)
//     echo,               // copy its log lines to stderr (default: env TEST_VERBOSE set)
//     process: false,     // true: `node devidp.js` as a child (tests/lib/proc.js); env and
//                         //   timeoutMs then go to startProcess
//   });
//   idp.issuer          // 'http://127.0.0.1:PORT'
//   idp.port, idp.clients, idp.users   // what it was configured with (secrets included, for the tests)
//   idp.log()           // its log lines so far ("[devidp] TOKEN ..." with logTokenRequests)
//   idp.proc            // with process: true, the startProcess handle (idp.pid its pid)
//   await idp.stop()    // in this process: stops listening and ends its connections;
//                       // a child: SIGTERM by pid (SIGKILL after 5 s) -> {code, signal}
//
// In this process, because an IdP start is most of a test file's CPU otherwise: a child
// node loads oidc-provider afresh each time (~0.7 s of CPU), here it is loaded once a file.
// Each IdP keeps its own store (devidp.js ownMemoryAdapter), as a process of its own did.
// Its log lines go to idp.log(), not to this process's stderr.
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { format } from 'node:util';
import { fileURLToPath } from 'node:url';
import { startProcess } from './proc.js';
import { DEFAULT_USERS, DEFAULT_CLIENTS } from '../idp/defaults.js';

export { DEFAULT_USERS, DEFAULT_CLIENTS };

export const DEVIDP = join(dirname(fileURLToPath(import.meta.url)), '..', 'idp', 'devidp.js');

const MAX_LOG = 4 * 1024 * 1024;

// Starts devidp with config cfg (devidp.js's config file, as an object):
// { issuer, port, log(), stop(), proc?, pid? }.
export async function startDevIdp(cfg, {
  port = 0, echo = !!process.env.TEST_VERBOSE, name = 'devidp',
  // TEST_IDP_PROCESS=1: a test whose own process makes load keeps its IdP out of it.
  process: asProcess = process.env.TEST_IDP_PROCESS === '1',
  env, timeoutMs = 60000,
} = {}) {
  if (!asProcess) {
    const { serveDevIdp, ownMemoryAdapter } = await import('../idp/devidp.js');
    let text = '';
    const log = (...a) => {
      const line = `${format('[devidp]', ...a)}\n`;
      if (text.length < MAX_LOG) text += line;
      if (echo) process.stderr.write(`[${name}] ${line}`);
    };
    const srv = await serveDevIdp(cfg, { port, log, adapter: ownMemoryAdapter() });
    // Never what keeps a test file's process alive (a child would have been killed at exit).
    srv.server.unref();
    let stopped = false;
    return {
      issuer: srv.issuer,
      port: srv.port,
      log: () => text,
      async stop() {
        if (stopped) return;
        stopped = true;
        await srv.close();
      },
    };
  }
  const dir = mkdtempSync(join(tmpdir(), 'devidp-'));
  const configFile = join(dir, 'config.json');
  writeFileSync(configFile, JSON.stringify(cfg, null, 2), { mode: 0o600 });
  let proc;
  try {
    proc = await startProcess(process.execPath, [DEVIDP, '--port', String(port), '--config', configFile], {
      env, timeoutMs, echo, name, ready: /^READY (http:\/\/\S+)$/,
    });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const issuer = proc.readyMatch[1];
  return {
    issuer,
    port: Number(new URL(issuer).port),
    pid: proc.pid,
    proc,
    configFile,
    log: () => proc.stderr,
    async stop(stopTimeoutMs = 5000) {
      const st = await proc.stop(stopTimeoutMs);
      rmSync(dir, { recursive: true, force: true });
      return st;
    },
  };
}

export async function startIdp(opts = {}) {
  const {
    clients = DEFAULT_CLIENTS, users = DEFAULT_USERS, ttl, rotateRefreshToken, downstream, idJag,
    ...how
  } = opts;
  const cfg = { clients, users };
  if (ttl) cfg.ttl = ttl;
  if (rotateRefreshToken !== undefined) cfg.rotateRefreshToken = rotateRefreshToken;
  if (downstream) cfg.downstream = downstream;
  if (idJag) cfg.idJag = idJag;
  const idp = await startDevIdp(cfg, how);
  return { ...idp, clients, users };
}

export default startIdp;
