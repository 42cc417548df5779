// Rotating the master key with many nodes (docs/deploy.md "Rotating the master key with
// many nodes"): two nodes on one PostgreSQL database, each publishing its audit heads to
// a file of its own.  `consentd vault rekey` on one node marks that node's file and
// prints the two lines every other node's file needs: a node whose file lacks them stays
// unready (its old heads carry links under the old key); with them, both serve.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startIdp, DEFAULT_CLIENTS } from '../lib/idp.js';
import { startConsentd, sharedPostgres, freshPgDatabase, consentdCommand } from '../lib/consentd.js';
import { getFreePort } from '../lib/ports.js';
import { gateway } from '../lib/gateway.js';
import { consentdLogin } from '../lib/weblogin.js';
import { approveConsent } from '../lib/seed.js';
import { consentConfig } from '../lib/fixtures.js';
import { waitNodesReady } from '../lib/stack.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });

let pg; let idp; let c; let url; let port; let dir; let config;

before(async () => {
  pg = await sharedPostgres();
  port = await getFreePort();
  url = `http://127.0.0.1:${port}`;
  const clients = DEFAULT_CLIENTS.map((x) => (x.client_id === 'consentd'
    ? { ...x, redirect_uris: [`${url}/callback`], post_logout_redirect_uris: [`${url}/`] } : x));
  idp = await startIdp({ clients });
  dir = mkdtempSync(join(tmpdir(), 'consentd-rekey-'));
  // head_file inside dir: tests/lib/consentd.js gives each node its own copy of dir,
  // and so its own head file.
  config = { ...consentConfig(), audit: { head_file: join(dir, 'heads') },
    database: { url: await freshPgDatabase() }, oidc: { issuer: idp.issuer } };
  c = await startConsentd({ port, dir, nodes: 2, keepDir: true, config });
  await waitNodesReady(c);
});

after(async () => {
  await c?.stop({ remove: false });
  await idp?.stop();
  await pg?.stop();
  for (const d of [dir, `${dir}-node0`, `${dir}-node1`]) if (d) rmSync(d, { recursive: true, force: true });
});

async function readyz(n) {
  const r = await fetch(`http://127.0.0.1:${n.port}/readyz`);
  return { status: r.status, body: await r.json() };
}

async function until(what, fn, ms = 20000) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last === true) return;
    await sleep(250);
  }
  assert.fail(`${what}: ${JSON.stringify(last)}`);
}

test('vault rekey on one of two nodes: the other node\'s head file needs the printed mark, then both serve', { timeout: 120000 }, async () => {
  // Audited work, published to both nodes' head files.
  const gw = gateway({ url });
  const { jar } = await consentdLogin({ url, user: 'alice', password: 'alice-password' });
  await approveConsent({ url, issuer: idp.issuer, gw, jar, user: 'alice', agentId: 'coder', audience: 'notes', scope: 'read' });
  const st = await c.stop({ remove: false });
  assert.equal(st.code, 0);
  const files = [0, 1].map((i) => join(`${dir}-node${i}`, 'heads'));
  for (const f of files) assert.match(readFileSync(f, 'utf8'), /^\d+:[0-9a-f]{64}$/m, `${f} holds heads`);

  const newKey = join(dir, 'new.key');
  writeFileSync(newKey, randomBytes(32), { mode: 0o600 });
  const r = await consentdCommand(['vault', 'rekey', '--new-key-file', newKey, '-c', join(`${dir}-node0`, 'config.ini')]);
  assert.equal(r.code, 0, r.stderr);
  const m = /other nodes on this database: append these two lines to each one's \[audit\] head_file before starting it:\n(# master-key-rotated old=\S+ new=\S+)\n(\d+:[0-9a-f]{64})\n/.exec(r.stdout);
  assert.ok(m, `the two lines printed: ${r.stdout}`);
  assert.ok(readFileSync(files[0], 'utf8').includes(`${m[1]}\n${m[2]}\n`), 'node 0\'s own file is marked');
  assert.ok(!readFileSync(files[1], 'utf8').includes(m[1]), 'node 1\'s file is not');
  // The new master key for every node (each node's directory is a copy of dir's).
  writeFileSync(join(dir, 'master.key'), readFileSync(newKey), { mode: 0o600 });

  // Node 1 without the mark: unready, named.
  c = await startConsentd({ port, dir, nodes: 2, keepDir: true, config });
  await until('node 0 ready', async () => (await readyz(c.nodes[0])).status === 200 || (await readyz(c.nodes[0])).body);
  const r1 = await readyz(c.nodes[1]);
  assert.equal(r1.status, 503, JSON.stringify(r1.body));
  assert.equal(r1.body.checks?.audit_head, false, JSON.stringify(r1.body));
  assert.equal(r1.body.checks?.database, true);
  assert.equal((await c.stop({ remove: false })).code, 0);

  // With the two lines appended, as docs/deploy.md says: both nodes serve, and a grant
  // made now is active on each.
  appendFileSync(files[1], `${m[1]}\n${m[2]}\n`);
  c = await startConsentd({ port, dir, nodes: 2, keepDir: true, config });
  for (const n of c.nodes) await until(`node on ${n.port} ready`, async () => (await readyz(n)).status === 200 || (await readyz(n)).body);
  const { jar: jar2 } = await consentdLogin({ url, user: 'bob', password: 'bob-password' });
  const { grant } = await approveConsent({ url, issuer: idp.issuer, gw, jar: jar2, user: 'bob', agentId: 'coder', audience: 'notes', scope: 'read' });
  for (const n of c.nodes) {
    const i = await gateway({ url: `http://127.0.0.1:${n.port}` }).introspect(grant);
    assert.equal(i.body.active, true, JSON.stringify(i.body));
  }
});
