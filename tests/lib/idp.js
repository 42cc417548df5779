// Start the development IdP (tests/idp/devidp.js) as a child process.
//
//   const idp = await startIdp({
//     clients,            // oidc-provider client metadata array (default: DEFAULT_CLIENTS)
//     users,              // { name: { password, name, email, groups } } (default: DEFAULT_USERS)
//     ttl,                // e.g. { AccessToken: 30 } (merged over devidp's defaults)
//     rotateRefreshToken, // default true
//     downstream,         // { resource, scopes: [...], accessTokenTTL } -> downstream OAuth provider mode
//     idJag,              // { clientIds, alg, lifetime, testKnobs } -> mints ID-JAGs (devidp.js)
//     port = 0,           // 0: the IdP binds a free port itself (no race)
//     env, timeoutMs = 60000, echo,   // passed to startProcess (tests/lib/proc.js)
//   });
//   idp.issuer          // 'http://127.0.0.1:PORT'
//   idp.port, idp.pid, idp.configFile, idp.proc (the startProcess handle)
//   idp.clients, idp.users   // what it was configured with (secrets included, for the tests)
//   await idp.stop()    // SIGTERM by pid (SIGKILL after 5 s), removes the temp config -> {code, signal}
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startProcess } from './proc.js';
import { DEFAULT_USERS, DEFAULT_CLIENTS } from '../idp/defaults.js';

export { DEFAULT_USERS, DEFAULT_CLIENTS };

export const DEVIDP = join(dirname(fileURLToPath(import.meta.url)), '..', 'idp', 'devidp.js');

export async function startIdp(opts = {}) {
  const {
    clients = DEFAULT_CLIENTS, users = DEFAULT_USERS, ttl, rotateRefreshToken, downstream, idJag,
    port = 0, env, timeoutMs = 60000, echo,
  } = opts;
  const dir = mkdtempSync(join(tmpdir(), 'devidp-'));
  const configFile = join(dir, 'config.json');
  const cfg = { clients, users };
  if (ttl) cfg.ttl = ttl;
  if (rotateRefreshToken !== undefined) cfg.rotateRefreshToken = rotateRefreshToken;
  if (downstream) cfg.downstream = downstream;
  if (idJag) cfg.idJag = idJag;
  writeFileSync(configFile, JSON.stringify(cfg, null, 2), { mode: 0o600 });

  let proc;
  try {
    proc = await startProcess(process.execPath, [DEVIDP, '--port', String(port), '--config', configFile], {
      env, timeoutMs, echo, name: 'devidp', ready: /^READY (http:\/\/\S+)$/,
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
    configFile,
    proc,
    clients,
    users,
    async stop(stopTimeoutMs = 5000) {
      const st = await proc.stop(stopTimeoutMs);
      rmSync(dir, { recursive: true, force: true });
      return st;
    },
  };
}

export default startIdp;
