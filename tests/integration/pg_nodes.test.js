// Many consentd nodes on one PostgreSQL (issue 17), with real processes: Debian's
// PostgreSQL 15 in a temporary directory (tests/lib/pg.js), the development IdP, and
// two consentd nodes on one database behind a round-robin balancer (tests/lib/lb.js),
// so that every step of a flow lands on the other node than the step before.
//
// What must hold is that N nodes behave like one consentd: flows that cross nodes,
// revocation seen at once by the other node, one audit chain that verifies after both
// wrote to it at once, an exporter tailing the audit listing held below a transaction
// still open (migration 0030), a node killed under load losing nothing it acknowledged, a
// database restart answered with 503 and readiness, never a crash; and the schema
// rules: a node waits for `consentd migrate`, and refuses a schema newer than it knows.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startIdp, DEFAULT_CLIENTS } from '../lib/idp.js';
import {
  startConsentd, sharedPostgres, freshPgDatabase, consentdCommand, consentdBin, toIni, baseConfig,
} from '../lib/consentd.js';
import { getFreePort } from '../lib/ports.js';
import { psqlBin } from '../lib/pg.js';
import { gateway } from '../lib/gateway.js';
import { consentdLogin, revokeOnMe } from '../lib/weblogin.js';
import { approveConsent } from '../lib/seed.js';
import { consentConfig } from '../lib/fixtures.js';
import { waitNodesReady } from '../lib/stack.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const ALICE = { user: 'alice', password: 'alice-password' };
const ASK = { agentId: 'coder', audience: 'notes', scope: 'read' };

let pg;
let idp;
let c;            // two nodes and the balancer
let url;
let gw;           // the gateway, through the balancer
let gwNode;       // [gateway of node 0, of node 1], each straight at its node
let rcv;          // the revocation-event receiver: every SET's jti, how often it came

// A webhook receiver that answers 202 after delay ms (slow on purpose: a slow
// receiver keeps one node's delivery pass open while the other node's runs).
async function startReceiver(port) {
  const got = new Map();
  const byCid = new Map();
  const r = { got, byCid, delay: 0, hang: false, held: [] };
  const server = createServer((rq, rs) => {
    const chunks = [];
    rq.on('data', (ch) => chunks.push(ch));
    rq.on('end', () => {
      const set = Buffer.concat(chunks).toString('utf8');
      const p = JSON.parse(Buffer.from(set.split('.')[1], 'base64url').toString('utf8'));
      got.set(p.jti, (got.get(p.jti) || 0) + 1);
      const cid = p.events?.[Object.keys(p.events)[0]]?.cid;
      if (cid) byCid.set(cid, (byCid.get(cid) || 0) + 1);
      if (r.hang) r.held.push(rs);                 // no answer: the pushing node waits
      else setTimeout(() => rs.writeHead(202).end(), r.delay);
    });
  });
  await new Promise((resolve) => { server.listen(port, '127.0.0.1', resolve); });
  r.stop = () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(() => resolve()); });
  return r;
}

before(async () => {
  pg = await sharedPostgres();
  const port = await getFreePort();
  url = `http://127.0.0.1:${port}`;
  const clients = DEFAULT_CLIENTS.map((x) => (x.client_id === 'consentd'
    ? { ...x, redirect_uris: [`${url}/callback`], post_logout_redirect_uris: [`${url}/`] } : x));
  idp = await startIdp({ clients });
  const rport = await getFreePort();
  rcv = await startReceiver(rport);
  c = await startConsentd({
    port, nodes: 2,
    config: { ...consentConfig(), database: { url: await freshPgDatabase() }, oidc: { issuer: idp.issuer },
      gateway: { events_uri: `http://127.0.0.1:${rport}/events` },
      // Each node's chain vouches for the other's newest entry every second when it moved.
      audit: { crossref_interval: 1 } },
  });
  await waitNodesReady(c);
  gw = gateway({ url });
  gwNode = c.nodes.map((n) => gateway({ url: `http://127.0.0.1:${n.port}` }));
});

after(async () => {
  const st = await c?.stop();
  await rcv?.stop();
  await idp?.stop();
  await pg?.stop();
  assert.equal(st?.code, 0, 'every node exited 0 (sanitizers clean)');
});

const cli = (...args) => consentdCommand([...args, '-c', c.cfgPath]);

// A fresh consent (each user and scope once per file) and its grant.
async function grantFor(user = 'alice', scope = 'read') {
  const { jar } = await consentdLogin({ url, user, password: `${user}-password` });
  return { jar, ...(await approveConsent({ url, issuer: idp.issuer, gw, jar, user, ...ASK, scope })) };
}

// How many of pid's sockets are TCP connections to 127.0.0.1:port (/proc: its fds'
// socket inodes, matched against /proc/net/tcp's remote addresses).
function socketsTo(pid, port) {
  const inodes = new Set();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = readlinkSync(`/proc/${pid}/fd/${fd}`).match(/^socket:\[(\d+)\]$/);
      if (m) inodes.add(m[1]);
    } catch { /* closed meanwhile */ }
  }
  const want = `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  return readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f[2] === want && inodes.has(f[9])).length;
}

async function waitStatus(u, want, ms = 15000) {
  for (let t = 0; t < ms; t += 100) {
    const st = await fetch(u).then((r) => r.status, () => 0);
    if (st === want) return;
    await sleep(100);
  }
  throw new Error(`${u} never answered ${want}`);
}

async function waitListening(u, ms = 15000) {
  for (let t = 0; t < ms; t += 100) {
    const st = await fetch(`${u}/readyz`).then((r) => r.status, () => 0);
    if (st === 200) return;
    await sleep(100);
  }
  throw new Error(`${u} never became ready`);
}

test('a flow crosses nodes at every step: login, callback, consent page, decision, exchange', async () => {
  const before0 = [...c.lb.counts];
  const { grant, cid } = await grantFor();
  assert.ok(grant && cid);
  // Round robin: both nodes served steps of this one flow.
  assert.ok(c.lb.counts[0] > before0[0] && c.lb.counts[1] > before0[1], `${c.lb.counts}`);
  // A grant signed on one node verifies, and introspects active, on each.
  for (const g of gwNode) {
    const r = await g.introspect(grant);
    assert.equal(r.status, 200);
    assert.equal(r.body.active, true, JSON.stringify(r.body));
  }
});

test('a revocation on one node is refused at once by introspection on the other', async () => {
  const { jar, grant, cid } = await grantFor('bob');
  // Both nodes have answered "active" (any per-node cache is warm).
  for (const g of gwNode) assert.equal((await g.introspect(grant)).body.active, true);
  c.lb.pin(0);
  try {
    const r = await revokeOnMe({ url, jar, cid });
    assert.equal(r.status, 303);
  } finally {
    c.lb.pin(null);
  }
  // No wait: the very next question to the other node.
  const other = await gwNode[1].introspect(grant);
  assert.equal(other.status, 200);
  assert.equal(other.body.active, false, 'node 1 still answered active after node 0 revoked');
  assert.equal((await gwNode[0].introspect(grant)).body.active, false);
});

test('both nodes write the audit at once, each to a chain of its own, and audit verify passes', async () => {
  const { jar } = await consentdLogin({ url, ...ALICE });
  await approveConsent({ url, issuer: idp.issuer, gw, jar, user: 'alice', agentId: 'coder',
    audience: 'notes', scope: 'write' });
  const subjectToken = (await import('../lib/idplogin.js')).getIdToken;
  const { id_token: st } = await subjectToken({ issuer: idp.issuer, clientId: 'gateway-app',
    clientSecret: 'gateway-app-dev-secret', redirectUri: 'http://127.0.0.1:43999/gateway-callback',
    user: 'alice', password: 'alice-password' });
  // 40 exchanges at once, 20 on each node, each one audited.
  const rs = await Promise.all(Array.from({ length: 40 }, (_, i) => gwNode[i % 2].exchange({
    subjectToken: st, agentId: 'coder', audience: 'notes', scope: 'write' })));
  for (const r of rs) assert.equal(r.status, 200, r.text);
  // Migration 0028: each node appends to its own chain (no node waits for the other's
  // audit), numbers unique across chains; every grant's entry is there.
  const db = { db: new URL(c.config.database.url).pathname.slice(1) };
  const chains = (await pg.psql("SELECT count(DISTINCT chain) FROM audit WHERE action = 'grant.issued'",
    db)).trim();
  assert.equal(chains, '2', 'both nodes issued grants, each into its own chain');
  const per = (await pg.psql('SELECT count(*), count(DISTINCT seq) FROM audit', db)).trim().split('|');
  assert.equal(per[0], per[1], 'every entry number once');
  // [audit] crossref_interval: within a few seconds each node's chain has vouched for
  // the other's newest entry (an audit.chain.crossref entry in its own chain).
  let xrefs = [];
  for (let i = 0; i < 50; i++) {
    xrefs = (await pg.psql("SELECT DISTINCT chain FROM audit WHERE action = 'audit.chain.crossref' "
      + "AND detail LIKE 'heads=%' AND resource = chain::text", db)).trim().split('\n').filter(Boolean);
    if (xrefs.length === 2) break;
    await sleep(200);
  }
  assert.equal(xrefs.length, 2, `each node's chain vouched for the other's: ${xrefs}`);
  const v = await cli('audit', 'verify');
  assert.equal(v.code, 0, v.stderr + v.stdout);
  assert.match(v.stdout, /entries intact/);
  const m = v.stdout.match(/audit: \d+ chains \(one per writer\), (\d+) cross-references/);
  assert.ok(m && Number(m[1]) >= 3, `the second chain's opening entry and both nodes' cross-references: ${v.stdout}`);
  // The heads each node published (its log's "audit head N:LINK" lines) are all in the
  // log: both nodes published, and neither chain forked.
  for (const n of c.nodes) {
    const log = join(n.dir, 'access.log');
    const heads = readFileSync(log, 'utf8').match(/audit head \d+:[0-9a-f]{64}/g) || [];
    assert.ok(heads.length > 5, `${n.proc.name} published ${heads.length} heads`);
    const h = await cli('audit', 'verify', '--heads', log);
    assert.equal(h.code, 0, h.stderr + h.stdout);
    assert.match(h.stdout, /all \d+ heads listed in .* are present/);
  }
});

// Migration 0030: entry numbers are taken before a transaction commits, so a smaller one
// can commit after a larger one; an exporter tailing GET /admin/api/audit must still get
// it.  A psql session stands for a node between taking its number and committing: it
// takes a number and a transaction id and stays open.  Entries committed meanwhile (a
// token made with the command line, a third writer) are not listed until it ends, and
// then come from the cursor the exporter already had.
test('an exporter tailing the admin API audit is held below a transaction still open, then gets what came after it', async () => {
  const made = await cli('admin', 'token', 'create', '--name', 'exporter');
  assert.equal(made.code, 0, made.stderr);
  const token = made.stdout.trim();
  const page = async (node, cursor) => {
    const q = `limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const r = await fetch(`http://127.0.0.1:${c.nodes[node].port}/admin/api/audit?${q}`,
      { headers: { authorization: `Bearer ${token}` } });
    assert.equal(r.status, 200, await r.clone().text());
    return r.json();
  };
  // Caught up: every page read, the last one short.
  let cursor = null;
  for (let i = 0; i < 50; i++) {
    const p = await page(i % 2, cursor);
    cursor = p.next_cursor ?? cursor;
    if (p.entries.length < 500) break;
  }
  assert.match(cursor, /^\d+\.\d+$/, 'PostgreSQL\'s cursor names the transaction and the number');
  const held = spawn(psqlBin, ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', c.config.database.url],
    { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  held.stdout.on('data', (d) => { out += d; });
  try {
    held.stdin.write("BEGIN; SELECT nextval(pg_get_serial_sequence('audit', 'seq')), pg_current_xact_id();\n");
    for (let i = 0; i < 200 && !out.includes('|'); i++) await sleep(25);
    const heldSeq = Number(out.split('|')[0]);
    assert.ok(heldSeq > 0, `the open transaction took a number: ${out}`);
    const late = await cli('admin', 'token', 'create', '--name', 'late');
    assert.equal(late.code, 0, late.stderr);
    const lateSeq = Number((await pg.psql("SELECT max(seq) FROM audit WHERE action = 'admin.token.created'",
      { db: new URL(c.config.database.url).pathname.slice(1) })).trim());
    assert.ok(lateSeq > heldSeq, `${lateSeq} > ${heldSeq}`);
    for (const node of [0, 1]) {
      const p = await page(node, cursor);
      assert.ok(!p.entries.some((e) => e.seq === lateSeq),
        `node ${node} listed entry ${lateSeq} while a transaction holding number ${heldSeq} was open`);
      cursor = p.next_cursor ?? cursor;
    }
  } finally {
    held.stdin.end('ROLLBACK;\n');
    await new Promise((r) => { if (held.exitCode !== null) r(); else held.on('exit', r); });
  }
  const seen = [];
  for (let i = 0; i < 50; i++) {
    const p = await page(i % 2, cursor);
    seen.push(...p.entries.map((e) => e.action));
    cursor = p.next_cursor ?? cursor;
    if (p.entries.length < 500) break;
  }
  assert.ok(seen.includes('admin.token.created'), `after it ended: ${seen.join(' ')}`);
});

test('the events outbox: both nodes deliver, each event exactly once, with a slow receiver', async () => {
  // Seven consents, revoked at once: seven events due together.
  const made = [];
  for (const user of ['alice', 'bob', 'carol']) {
    const { jar } = await consentdLogin({ url, user, password: `${user}-password` });
    for (const ask of [{ agentId: 'coder', audience: 'wiki', scope: 'read' },
      { agentId: 'butler', audience: 'notes', scope: 'read' }]) {
      made.push({ jar, ...(await approveConsent({ url, issuer: idp.issuer, gw, jar, user, ...ask })) });
    }
  }
  const { jar: aj } = await consentdLogin({ url, user: 'admin', password: 'admin-password' });
  made.push({ jar: aj, ...(await approveConsent({ url, issuer: idp.issuer, gw, jar: aj, user: 'admin',
    agentId: 'coder', audience: 'wiki', scope: 'read' })) });
  rcv.delay = 1500;    // each push holds its node's pass 1.5 s; passes run every 2 s on each node
  try {
    await Promise.all(made.map((m) => revokeOnMe({ url, jar: m.jar, cid: m.cid })));
    for (let i = 0; i < 300 && made.some((m) => !rcv.byCid.has(m.cid)); i++) await sleep(100);
    await sleep(6000);   // every node had passes enough to send any event twice
  } finally {
    rcv.delay = 0;
  }
  for (const m of made) assert.equal(rcv.byCid.get(m.cid), 1, `the event of ${m.cid} arrived once`);
  for (const [jti, n] of rcv.got) assert.equal(n, 1, `event ${jti} was delivered ${n} times`);
});

test('the events outbox: a node killed while delivering, its claimed events are delivered by the other node', async () => {
  const db = new URL(c.config.database.url).pathname.slice(1);
  const { jar } = await consentdLogin({ url, user: 'admin', password: 'admin-password' });
  const k = await approveConsent({ url, issuer: idp.issuer, gw, jar, user: 'admin',
    agentId: 'butler', audience: 'notes', scope: 'read' });
  rcv.hang = true;                    // the receiver takes the SET and never answers
  let victim;
  try {
    assert.equal((await revokeOnMe({ url, jar, cid: k.cid })).status, 303);
    for (let i = 0; i < 100 && !rcv.byCid.has(k.cid); i++) await sleep(100);
    assert.equal(rcv.byCid.get(k.cid), 1, 'the SET reached the receiver');
    // The node holding the push open is the one with a socket to the receiver.
    const rport = Number(new URL(c.nodes[0].config.gateway.events_uri).port);
    victim = c.nodes.findIndex((n) => socketsTo(n.proc.pid, rport) > 0);
    assert.ok(victim >= 0, 'a node is pushing');
    const pid = c.nodes[victim].proc.pid;
    process.kill(pid, 'SIGKILL');
    c.lb.markDown(victim);
    await c.nodes[victim].proc.exited;
  } finally {
    rcv.hang = false;
    for (const rs of rcv.held.splice(0)) rs.destroy();
  }
  // The entry stays claimed by the dead node until its lease ends: the lease's end
  // brought forward here (what 300 s would do), the survivor delivers it.
  const row = (await pg.psql(`SELECT delivered_at, next_attempt_at FROM events_outbox WHERE consent_id = '${k.cid}'`, { db })).trim();
  assert.equal(row.split('|')[0], '0', 'not delivered yet');
  assert.ok(Number(row.split('|')[1]) > Date.now() / 1000 + 200, `claimed for the lease: ${row}`);
  await pg.psql(`UPDATE events_outbox SET next_attempt_at = 0 WHERE consent_id = '${k.cid}'`, { db });
  for (let i = 0; i < 100 && rcv.byCid.get(k.cid) < 2; i++) await sleep(100);
  assert.equal(rcv.byCid.get(k.cid), 2, 'delivered again by the surviving node (at least once)');
  for (let i = 0; i < 50; i++) {
    if (Number((await pg.psql(`SELECT delivered_at FROM events_outbox WHERE consent_id = '${k.cid}'`, { db })).trim()) > 0) break;
    await sleep(100);
  }
  assert.ok(Number((await pg.psql(`SELECT delivered_at FROM events_outbox WHERE consent_id = '${k.cid}'`, { db })).trim()) > 0,
    'the survivor recorded the delivery');
  // The dead node comes back (the later tests use both).
  const n = c.nodes[victim];
  const { startProcess } = await import('../lib/proc.js');
  n.proc = await startProcess(consentdBin, ['-c', join(n.dir, 'config.ini')], {
    env: { ASAN_OPTIONS: 'detect_leaks=1' },
    ready: { url: `http://127.0.0.1:${n.port}/healthz`, status: 200 }, timeoutMs: 20000,
    name: `consentd#${victim}`,
  });
  c.lb.markUp(victim);
});

test('a rotated signing key is seen by both nodes at their reload, and signs for both', async () => {
  const rot = await cli('keys', 'rotate');
  assert.equal(rot.code, 0, rot.stderr);
  for (const n of c.nodes) process.kill(n.proc.pid, 'SIGHUP');   // the reload (every 60 s anyway)
  let kids;
  for (let i = 0; i < 50; i++) {
    kids = await Promise.all(c.nodes.map(async (n) => (await (await fetch(
      `http://127.0.0.1:${n.port}/.well-known/jwks.json`)).json()).keys.map((k) => k.kid).sort().join()));
    if (kids[0] === kids[1] && kids[0].split(',').length === 2) break;
    await sleep(100);
  }
  assert.equal(kids[0], kids[1], 'both nodes publish the same keys');
  assert.equal(kids[0].split(',').length, 2);
});

test('the database restarts: nodes answer 503 and unready meanwhile, never crash, and come back', async () => {
  const { grant } = await grantFor('carol');
  const halted = pg.restart();     // stop, then start again on the same socket
  await sleep(150);
  await halted;
  // Right after the restart the nodes' connections are gone: each answer is a
  // clean one (200 once reconnected, or 503 with RFC 6749 JSON), never a dropped connection.
  for (const g of gwNode) {
    const r = await g.introspect(grant);
    assert.ok(r.status === 200 || r.status === 503, `${r.status} ${r.text}`);
    if (r.status === 503) assert.equal(r.body.error, 'temporarily_unavailable');
  }
  for (const n of c.nodes) await waitListening(`http://127.0.0.1:${n.port}`);
  for (const g of gwNode) assert.equal((await g.introspect(grant)).body.active, true);
  for (const n of c.nodes) assert.equal(n.proc.exitStatus, null, `${n.proc.name} is still running`);
});

test('while the database is down /readyz says 503 and OAuth endpoints answer 503 JSON', async () => {
  let grant;
  try {
    ({ grant } = await grantFor('carol', 'write'));
  } catch (e) {
    for (const n of c.nodes) console.error(readFileSync(join(n.dir, 'access.log'), 'utf8').split('\n').slice(-25).join('\n'));
    throw e;
  }
  const db = new URL(c.config.database.url).pathname.slice(1);
  // Cut the nodes' connections and keep them out: no new connection to this database.
  await pg.psql(`ALTER DATABASE ${db} ALLOW_CONNECTIONS false`, { db: 'postgres' });
  await pg.psql(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${db}'`,
    { db: 'postgres' });
  try {
    for (const n of c.nodes) {
      const r = await fetch(`http://127.0.0.1:${n.port}/readyz`);
      assert.equal(r.status, 503, `${n.proc.name} /readyz`);
    }
    for (const g of gwNode) {
      const r = await g.introspect(grant);
      assert.equal(r.status, 503, r.text);
      assert.equal(r.body.error, 'temporarily_unavailable');
    }
  } finally {
    await pg.psql(`ALTER DATABASE ${db} ALLOW_CONNECTIONS true`, { db: 'postgres' });
  }
  for (const n of c.nodes) await waitListening(`http://127.0.0.1:${n.port}`);
  for (const g of gwNode) assert.equal((await g.introspect(grant)).body.active, true);
});

test('connections cut mid-transaction under load: each transaction is all or nothing, the chain verifies', async (t) => {
  const { id_token: st } = await (await import('../lib/idplogin.js')).getIdToken({
    issuer: idp.issuer, clientId: 'gateway-app', clientSecret: 'gateway-app-dev-secret',
    redirectUri: 'http://127.0.0.1:43999/gateway-callback', user: 'alice', password: 'alice-password' });
  const ask = { subjectToken: st, agentId: 'coder', audience: 'notes', scope: 'read' };
  const db = new URL(c.config.database.url).pathname.slice(1);
  const count = async (q) => Number((await pg.psql(q, { db })).trim());
  const acked = [];
  const statuses = {};
  let stop = false;
  const load = Promise.all([0, 1, 2, 3].map(async (w) => {
    while (!stop) {
      const r = await gwNode[w % 2].exchange(ask).catch(() => null);
      const k = r ? r.status : 'dropped';
      statuses[k] = (statuses[k] || 0) + 1;
      if (r?.status === 200) acked.push(r.body.access_token);
      else if (r && r.body?.error !== 'temporarily_unavailable') {
        const logs = c.nodes.map((n) => readFileSync(join(n.dir, 'access.log'), 'utf8').split('\n')
          .filter((l) => /"level":"(error|warn)"/.test(l)).slice(-15).join('\n')).join('\n');
        assert.fail(`${r.status} ${r.text}\n${logs}`);
      }
    }
  }));
  // Every 50 ms for 2 s, every backend of the nodes is cut, whatever it is doing.
  let cuts = 0;
  for (let i = 0; i < 40; i++) {
    cuts += await count(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '${db}' AND pid <> pg_backend_pid()`);
    await sleep(50);
  }
  stop = true;
  await load;
  t.diagnostic(`cuts ${cuts}, answers ${JSON.stringify(statuses)}`);
  assert.ok(cuts > 20, `${cuts} connections cut`);
  assert.ok(statuses[503] > 0, `some requests met a cut connection: ${JSON.stringify(statuses)}`);
  assert.equal(statuses.dropped, undefined, 'no connection to consentd dropped');
  for (const n of c.nodes) await waitListening(`http://127.0.0.1:${n.port}`);
  // All or nothing: a grant row exactly when its audit entry is there.
  assert.equal(await count('SELECT count(*) FROM grants'),
    await count("SELECT count(*) FROM audit WHERE action = 'grant.issued'"));
  for (const tk of acked) assert.equal((await gwNode[0].introspect(tk)).body.active, true, 'an acknowledged grant was lost');
  const v = await cli('audit', 'verify');
  assert.equal(v.code, 0, v.stderr + v.stdout);
});

test('a node killed with SIGKILL under load: the other serves on, nothing acknowledged is lost, the chain verifies', async () => {
  const { id_token: st } = await (await import('../lib/idplogin.js')).getIdToken({
    issuer: idp.issuer, clientId: 'gateway-app', clientSecret: 'gateway-app-dev-secret',
    redirectUri: 'http://127.0.0.1:43999/gateway-callback', user: 'alice', password: 'alice-password' });
  const ask = { subjectToken: st, agentId: 'coder', audience: 'notes', scope: 'read' };
  const acked = [];
  let stop = false;
  const load = Promise.all([0, 1, 2, 3].map(async (w) => {
    while (!stop) {
      const r = await gwNode[w % 2].exchange(ask).catch(() => null);
      if (r?.status === 200) acked.push(r.body.access_token);
    }
  }));
  await sleep(700);
  const victim = c.nodes[1];
  process.kill(victim.proc.pid, 'SIGKILL');
  c.lb.markDown(1);
  await victim.proc.exited;
  await sleep(500);
  stop = true;
  await load;
  assert.ok(acked.length > 10, `${acked.length} grants acknowledged`);
  // Every acknowledged grant is in the database: the survivor introspects each active.
  for (const t of acked) {
    const r = await gwNode[0].introspect(t);
    assert.equal(r.body.active, true, 'an acknowledged grant was lost');
  }
  const v = await cli('audit', 'verify');
  assert.equal(v.code, 0, v.stderr + v.stdout);
  // The dead node comes back on the same database.
  const cfg = join(victim.dir, 'config.ini');
  const { startProcess } = await import('../lib/proc.js');
  victim.proc = await startProcess(consentdBin, ['-c', cfg], {
    env: { ASAN_OPTIONS: 'detect_leaks=1' },
    ready: { url: `http://127.0.0.1:${victim.port}/healthz`, status: 200 }, timeoutMs: 20000,
    name: 'consentd#1',
  });
});

test('schema: a node waits for `consentd migrate`, then serves; a newer schema is refused', async () => {
  const dbUrl = await freshPgDatabase();
  const dir = c.nodes[0].dir;
  const port = await getFreePort();
  const cfg = { ...baseConfig({ port, dir, issuer: idp.issuer }), database: { url: dbUrl },
    keys: { master_key_file: join(dir, 'master.key') }, server: { listen: `127.0.0.1:${port}`,
      public_url: `http://127.0.0.1:${port}`, threads: 2, log: 'stderr' } };
  const cfgPath = join(dir, 'schema.ini');
  writeFileSync(cfgPath, toIni(cfg));
  const p = spawn(consentdBin, ['-c', cfgPath], { stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1' } });
  let err = '';
  p.stderr.on('data', (d) => { err += d; });
  const exited = new Promise((r) => { p.once('exit', (code, sig) => r({ code, sig })); });
  try {
    const base = `http://127.0.0.1:${port}`;
    let ready;
    for (let i = 0; i < 100 && !ready; i++) {
      ready = await fetch(`${base}/readyz`).catch(() => null);
      if (!ready) await sleep(100);
    }
    assert.equal(p.exitCode, null, `waits, does not exit: ${err}`);
    assert.match(err, /consentd migrate/);
    // Meanwhile: alive, unready, and every other answer a clean 503.
    assert.equal(ready.status, 503, 'unready before the migration');
    assert.match((await ready.json()).checks.database_schema, /waiting for consentd migrate/);
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    const tok = await fetch(`${base}/token`, { method: 'POST', body: 'grant_type=client_credentials',
      headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    assert.equal(tok.status, 503);
    assert.equal(tok.headers.get('retry-after'), '5');
    assert.equal((await tok.json()).error, 'temporarily_unavailable');
    const m = await consentdCommand(['migrate', '-c', cfgPath]);
    assert.equal(m.code, 0, m.stderr);
    assert.match(m.stdout, /schema (\d+) \(this consentd knows \1\)/);
    await waitListening(`http://127.0.0.1:${port}`);
  } finally {
    p.kill('SIGTERM');
  }
  assert.equal((await exited).code, 0, err.slice(-2000));
  // A node waiting for the migration stops on SIGTERM.
  const dbUrl2 = await freshPgDatabase();
  const cfgPath2 = join(dir, 'schema2.ini');
  writeFileSync(cfgPath2, toIni({ ...cfg, database: { url: dbUrl2 } }));
  const p2 = spawn(consentdBin, ['-c', cfgPath2], { stdio: 'ignore',
    env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1' } });
  const exited2 = new Promise((r) => { p2.once('exit', (code, sig) => r({ code, sig })); });
  await waitStatus(`http://127.0.0.1:${port}/readyz`, 503);
  p2.kill('SIGTERM');
  const e2 = await exited2;
  assert.deepEqual(e2, { code: 0, sig: null }, 'it exits by itself on SIGTERM, cleanly');
  // A schema from the future: refused at start, and by consentd migrate.
  await pg.psql('INSERT INTO schema_version (version, applied_at) VALUES (9999, 0)',
    { db: new URL(dbUrl).pathname.slice(1) });
  const n = await consentdCommand(['-n', '-c', cfgPath]);
  assert.notEqual(n.code, 0);
  assert.match(n.stderr, /newer than this consentd/);
  const again = await consentdCommand(['migrate', '-c', cfgPath]);
  assert.notEqual(again.code, 0);
});
