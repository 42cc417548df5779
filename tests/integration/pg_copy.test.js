// Moving up (issue 17): `consentd db copy -c FILE --from consentd.db --to postgresql://...`
// copies a SQLite deployment into PostgreSQL, consistently and verifiably, with real
// processes: a consentd on SQLite makes consents, grants and audit entries the way people
// and the gateway do, stops; the copy counts each table on both sides and verifies the
// audit chain on PostgreSQL; then a consentd on the copy serves the same grants.  A
// destination that is not empty is refused, and nothing is written to it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { startStack } from '../lib/stack.js';
import {
  startConsentd, sharedPostgres, freshPgDatabase, consentdCommand, toIni,
} from '../lib/consentd.js';
import { gateway } from '../lib/gateway.js';
import { consentdLogin, revokeOnMe } from '../lib/weblogin.js';
import { approveConsent } from '../lib/seed.js';
import { consentConfig } from '../lib/fixtures.js';

let pg;
let s;
const made = {};

before(async () => {
  pg = await sharedPostgres();
  // The source: a SQLite deployment (this file runs in the SQLite pass).
  s = await startStack({ config: consentConfig() });
  const gw = gateway({ url: s.url });
  for (const user of ['alice', 'bob']) {
    const { jar } = await consentdLogin({ url: s.url, user, password: `${user}-password` });
    made[user] = { jar, ...(await approveConsent({ url: s.url, issuer: s.idp.issuer, gw, jar, user,
      agentId: 'coder', audience: 'notes', scope: 'read' })) };
  }
  assert.equal((await revokeOnMe({ url: s.url, jar: made.bob.jar, cid: made.bob.cid })).status, 303);
  await s.c.proc.stop(10000);      // the operator stops the server before the copy
});

after(async () => {
  await s?.stop().catch(() => {});
  await pg?.stop();
});

const dbName = (u) => new URL(u).pathname.slice(1);

test('db copy: every table counted on both sides, the audit chain verified on the copy, and a node on it serves the same grants', async () => {
  const to = await freshPgDatabase();
  const r = await consentdCommand(['db', 'copy', '-c', s.c.cfgPath, '--from', join(s.c.dir, 'consentd.db'), '--to', to]);
  assert.equal(r.code, 0, r.stderr + r.stdout);
  assert.match(r.stdout, /^copied consents\s+2 rows \(counted on both sides\)$/m);
  assert.match(r.stdout, /^copied grants\s+\d+ rows/m);
  assert.match(r.stdout, /audit: (\d+) entries intact under master key/);
  const entries = Number(r.stdout.match(/audit: (\d+) entries intact/)[1]);
  assert.ok(entries > 4, `${entries} audit entries`);
  assert.equal(Number((await pg.psql('SELECT count(*) FROM audit', { db: dbName(to) })).trim()), entries);

  // The copy serves: alice's grant is active, bob's (revoked before the copy) is not.
  // The same address (the grants' issuer), directory and master key; the copy's database.
  const { server, ...rest } = s.c.config;
  const c2 = await startConsentd({ config: { ...rest, database: { path: undefined, url: to } },
    port: s.c.port, migrate: false, nodes: 1, dir: s.c.dir, keepDir: true });
  try {
    const gw2 = gateway({ url: c2.url });
    assert.equal((await gw2.introspect(made.alice.grant)).body.active, true);
    assert.equal((await gw2.introspect(made.bob.grant)).body.active, false);
  } finally {
    const st = await c2.stop({ remove: false });
    assert.equal(st.code, 0);
  }
  // A second copy into the same database is refused: it is not empty.  (The node on the
  // copy opened its own audit chain at start: one entry since the copy.)
  const before = Number((await pg.psql('SELECT count(*) FROM audit', { db: dbName(to) })).trim());
  assert.equal(before, entries + 1, 'the node on the copy opened its chain');
  const again = await consentdCommand(['db', 'copy', '-c', s.c.cfgPath, '--from', join(s.c.dir, 'consentd.db'), '--to', to]);
  assert.notEqual(again.code, 0);
  assert.match(again.stderr, /not empty: table \w+ has \d+ rows; nothing was copied/);
  assert.equal(Number((await pg.psql('SELECT count(*) FROM audit', { db: dbName(to) })).trim()), before,
    'nothing written by the refused copy');
});

test('db copy refuses a URL with a password in it, and a destination that is not empty leaves it as it was', async () => {
  const bad = await consentdCommand(['db', 'copy', '-c', s.c.cfgPath, '--from', join(s.c.dir, 'consentd.db'),
    '--to', 'postgresql://u:secret@127.0.0.1:1/x']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /carries a password/);
  assert.doesNotMatch(bad.stderr + bad.stdout, /secret/);
  const to = await freshPgDatabase();
  const m = await consentdCommand(['migrate', '-c', writeCfg(to)]);
  assert.equal(m.code, 0, m.stderr);
  await pg.psql("INSERT INTO users (issuer, subject, created_at, last_login_at) VALUES ('i', 's', 1, 1)",
    { db: dbName(to) });
  const before0 = await pg.psql('SELECT count(*) FROM users', { db: dbName(to) });
  const r = await consentdCommand(['db', 'copy', '-c', s.c.cfgPath, '--from', join(s.c.dir, 'consentd.db'), '--to', to]);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /not empty/);
  assert.equal(await pg.psql('SELECT count(*) FROM users', { db: dbName(to) }), before0);
  assert.equal((await pg.psql('SELECT count(*) FROM consents', { db: dbName(to) })).trim(), '0');
});

// A config file for `consentd migrate` on url, beside the source's.
function writeCfg(url) {
  const p = join(s.c.dir, `migrate-${dbName(url)}.ini`);
  writeFileSync(p, toIni({ ...s.c.config, database: { url } }));
  return p;
}
