// The database's size under a constant flow (issue #16.3, `make retention-steady`): a
// real consentd (build/consentd) with short [retention] values and a real IdP; workers,
// one per person, each repeat: the gateway asks, the person approves on the consent page,
// the gateway takes GRANTS grants by token exchange, the person revokes on /me.  Every
// SAMPLE seconds the SQLite file's size (main file + WAL) and the row counts are printed.
//
// revoked_consent_days counts days, and a measurement lasts minutes: right after each
// revocation the script sets that consent's revoked_at back by one day with sqlite3,
// standing in for the day the real setting waits (revoked_at is not in the audit chain).
// Everything else -- grant expiry, decided requests, the audit prefix (audit_keep) -- is
// real time.  Environment: RETENTION_SECONDS (180), SAMPLE (10), WORKERS (4), GRANTS (5),
// RETENTION=off (the janitor disabled, for comparison).
import { spawnSync } from 'node:child_process';
import { statSync, existsSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const lib = (f) => import(join(here, '..', 'tests', 'lib', f));
const { startStack } = await lib('stack.js');
const { gateway } = await lib('gateway.js');
const { consentdLogin, revokeOnMe } = await lib('weblogin.js');
const { approveConsent } = await lib('seed.js');
const { consentConfig } = await lib('fixtures.js');
const { DEFAULT_USERS } = await lib('idp.js');

const SECONDS = Number(process.env.RETENTION_SECONDS || 180);
const SAMPLE = Number(process.env.SAMPLE || 10);
const WORKERS = Number(process.env.WORKERS || 4);
const GRANTS = Number(process.env.GRANTS || 5);
const users = {};
for (let i = 0; i < WORKERS; i += 1) {
  users[`p${i}`] = { password: `p${i}-password`, name: `Person ${i}`, email: `p${i}@example.test`, groups: [] };
}
const retention = { interval: 2, batch_size: 500, grace: 5, revoked_consent_days: 1, audit_keep: 2000 };
// RETENTION=off: the same flow with the janitor disabled, for comparison.
if (process.env.RETENTION === 'off') retention.enabled = 'false';
const s = await startStack({
  idpOptions: { users: { ...DEFAULT_USERS, ...users } },
  config: consentConfig({
    keys: { grant_ttl: 10 },
    consent: { interval: 1, request_ttl: 5, deny_cooldown: 0, max_pending_per_user: 5 },
    retention,
  }),
});
const db = join(s.c.dir, 'consentd.db');
const sql = (q) => {
  const r = spawnSync('sqlite3', ['-cmd', '.timeout 5000', db, q], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`sqlite3: ${r.stderr}`);
  return r.stdout.trim();
};
const size = (p) => (existsSync(p) ? statSync(p).size : 0);
const TABLES = ['grants', 'consent_requests', 'consents', 'events_outbox', 'audit'];

let stop = false;
const done = { cycles: 0, grants: 0, errors: 0 };
async function worker(user) {
  const gw = gateway({ url: s.url });
  const { jar } = await consentdLogin({ url: s.url, user, password: `${user}-password` });
  while (!stop) {
    try {
      const { cid } = await approveConsent({
        url: s.url, issuer: s.idp.issuer, gw, jar, user, agentId: 'coder', audience: 'notes', scope: 'read',
      });
      done.grants += 1;
      // approveConsent took one ID token; the gateway takes more grants with fresh asks.
      for (let i = 1; i < GRANTS; i += 1) {
        const { grant } = await approveAgain(gw, user);
        if (grant) done.grants += 1;
      }
      const r = await revokeOnMe({ url: s.url, jar, cid });
      if (r.status !== 303) throw new Error(`revoke answered ${r.status}`);
      sql(`UPDATE consents SET revoked_at = revoked_at - 86400 WHERE id = '${cid}'`);
      done.cycles += 1;
    } catch (e) {
      done.errors += 1;
      if (done.errors < 5) console.error(`worker ${user}: ${e.message}`);
    }
  }
}
const idTokens = new Map();
const { getIdToken } = await lib('idplogin.js');
const { GATEWAY_APP } = await lib('fixtures.js');
async function approveAgain(gw, user) {
  if (!idTokens.has(user)) {
    idTokens.set(user, (await getIdToken({ issuer: s.idp.issuer, ...GATEWAY_APP, user, password: `${user}-password` })).id_token);
  }
  const g = await gw.exchange({ subjectToken: idTokens.get(user), agentId: 'coder', audience: 'notes', scope: 'read' });
  if (g.status === 401 || g.body?.error === 'invalid_grant') idTokens.delete(user);
  return { grant: g.status === 200 ? g.body.access_token : null };
}

console.log(`retention-steady: ${WORKERS} workers for ${SECONDS} s, sample every ${SAMPLE} s; `
  + `[retention] ${JSON.stringify(retention)}, grant_ttl 10, request_ttl 5`);
console.log(['t_s', 'db_bytes', 'wal_bytes', ...TABLES, 'cycles', 'grants_issued'].join('\t'));
const workers = Object.keys(users).map(worker);
const t0 = Date.now();
const rows = [];
while ((Date.now() - t0) / 1000 < SECONDS) {
  await new Promise((r) => { setTimeout(r, SAMPLE * 1000); });
  const counts = TABLES.map((t) => Number(sql(`SELECT count(*) FROM ${t}`)));
  const row = [Math.round((Date.now() - t0) / 1000), size(db), size(`${db}-wal`), ...counts,
    done.cycles, done.grants];
  rows.push(row);
  console.log(row.join('\t'));
}
stop = true;
await Promise.all(workers);
const pages = sql('PRAGMA page_count') + ' pages, ' + sql('PRAGMA freelist_count') + ' free';
await s.stop();
console.log(`done: ${done.cycles} cycles, ${done.grants} grants, ${done.errors} errors; file ${pages}`);
const half = rows.slice(Math.floor(rows.length / 2));
const maxDb = Math.max(...half.map((r) => r[1]));
const minDb = Math.min(...half.map((r) => r[1]));
console.log(`second half: db file ${minDb}..${maxDb} bytes`);
