// Issue 17: "a rotation is seen by every node within the reload interval" -- without a
// signal.  Two nodes on one PostgreSQL database; `consentd keys rotate` on the database;
// then nothing but the nodes' own 60 s reload: both publish the new key within it, and a
// grant signed with the new key on one node introspects active on the other.
// (pg_nodes.test.js tests the same reload at once, by SIGHUP.)  Here, not in
// tests/integration/, because it waits a minute: make check runs it in its PostgreSQL
// pass (scripts/pg-pass.list), beside the other steps.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startIdp, DEFAULT_CLIENTS } from '../lib/idp.js';
import { startConsentd, sharedPostgres, freshPgDatabase, consentdCommand } from '../lib/consentd.js';
import { getFreePort } from '../lib/ports.js';
import { gateway } from '../lib/gateway.js';
import { consentdLogin } from '../lib/weblogin.js';
import { approveConsent } from '../lib/seed.js';
import { consentConfig } from '../lib/fixtures.js';
import { waitNodesReady } from '../lib/stack.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const RELOAD_SECONDS = 60;     // server/main.c KEY_RELOAD_SECONDS

let pg; let idp; let c; let url;

before(async () => {
  pg = await sharedPostgres();
  const port = await getFreePort();
  url = `http://127.0.0.1:${port}`;
  const clients = DEFAULT_CLIENTS.map((x) => (x.client_id === 'consentd'
    ? { ...x, redirect_uris: [`${url}/callback`], post_logout_redirect_uris: [`${url}/`] } : x));
  idp = await startIdp({ clients });
  // publish_lead 0: a rotated key signs as soon as a node has it.
  const cc = consentConfig();
  c = await startConsentd({
    port, nodes: 2,
    config: { ...cc, keys: { ...(cc.keys || {}), publish_lead: 0 }, database: { url: await freshPgDatabase() },
      oidc: { issuer: idp.issuer } },
  });
  await waitNodesReady(c);
});

after(async () => {
  const st = await c?.stop();
  await idp?.stop();
  await pg?.stop();
  assert.equal(st?.code, 0, 'every node exited 0 (sanitizers clean)');
});

const kidsOf = async (n) => (await (await fetch(`http://127.0.0.1:${n.port}/.well-known/jwks.json`))
  .json()).keys.map((k) => k.kid).sort();

test('a key rotated in the database is published by every node within the reload interval, no signal sent', { timeout: 150000 }, async () => {
  const before0 = await Promise.all(c.nodes.map(kidsOf));
  assert.deepEqual(before0[0], before0[1]);
  assert.equal(before0[0].length, 1);
  const rot = await consentdCommand(['keys', 'rotate', '-c', c.cfgPath]);
  assert.equal(rot.code, 0, rot.stderr);
  const t0 = Date.now();
  let kids;
  for (;;) {
    kids = await Promise.all(c.nodes.map(kidsOf));
    if (kids.every((k) => k.length === 2)) break;
    assert.ok(Date.now() - t0 < (RELOAD_SECONDS + 10) * 1000,
      `every node publishes the new key within ${RELOAD_SECONDS} s: ${JSON.stringify(kids)}`);
    await sleep(1000);
  }
  assert.deepEqual(kids[0], kids[1], 'both nodes publish the same keys');
  const fresh = kids[0].find((k) => !before0[0].includes(k));
  assert.ok(fresh, 'the new key is among them');

  // A grant made now is signed with the new key on whichever node made it, and is
  // active on each node.
  const gw = gateway({ url });
  const { jar } = await consentdLogin({ url, user: 'alice', password: 'alice-password' });
  const { grant } = await approveConsent({ url, issuer: idp.issuer, gw, jar, user: 'alice',
    agentId: 'coder', audience: 'notes', scope: 'read' });
  const header = JSON.parse(Buffer.from(grant.split('.')[0], 'base64url').toString());
  assert.equal(header.kid, fresh, 'signed with the rotated key');
  for (const n of c.nodes) {
    const r = await gateway({ url: `http://127.0.0.1:${n.port}` }).introspect(grant);
    assert.equal(r.status, 200);
    assert.equal(r.body.active, true, JSON.stringify(r.body));
  }
});
