// The tamper-evident audit trail and master-key rotation with the real binary
// (docs/reference.md "Audit trail and master-key rotation"): a consent flow over HTTP writes entries; the server
// logs its chain head at start and stop; `consentd audit verify` passes on the
// untouched log and names the first broken entry after each kind of tampering
// with sqlite3 (edit, delete a middle row, cut off the tail with --head, swap
// two rows); `consentd vault rekey` refuses a broken chain, re-seals under a
// new key, after which the chain verifies under it, the server starts with the
// new key, its JWKS is unchanged and the vault record still opens.
// Published heads ([audit] head_file): each audited request's head is on the file
// before its answer arrives; after the tail is cut off and the numbers rewound with
// sqlite3, `audit verify --heads` names the first head missing, and a restarted
// server is unready (/readyz 503, consentd_audit_head_behind 1, an error logged).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startVaultStack, OriginJar } from '../lib/vaultstack.js';
import { startConsentd, consentdBin, testDb } from '../lib/consentd.js';
import { pollExchange } from '../lib/gateway.js';

let v;
let c2 = null;                       // consentd restarted after the rotation
// [audit] head_file, outside consentd's directory as an operator would keep it.
const headDir = mkdtempSync(join(tmpdir(), 'consentd-heads-'));
const headFile = join(headDir, 'audit-heads');
before(async () => {
  v = await startVaultStack({ accessTokenTTL: 60, config: { audit: { head_file: headFile } } });
});
after(async () => {
  if (c2) {
    const st = await c2.stop({ remove: false });
    assert.equal(st.code, 0, c2.proc.stderr.slice(-3000));
  }
  await v?.stop();
  rmSync(headDir, { recursive: true, force: true });
});

// Runs `consentd GROUP ARGS -c <config>`.
function cli(group, ...args) {
  const r = spawnSync(consentdBin, [group, ...args, '-c', v.c.cfgPath], {
    encoding: 'utf8', timeout: 30000, env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1' },
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}
const heads = (log) => [...log.matchAll(/audit head (\d+):([0-9a-f]{64})/g)].map((m) => `${m[1]}:${m[2]}`);
// head_file's heads, in file order (the rotation's mark and blank lines left out).
const fileHeads = () => readFileSync(headFile, 'utf8').split('\n').filter((l) => /^\d+:/.test(l));
// The log streams of a server's nodes (one node on SQLite; each node its own [server] log).
const logStreams = (c) => c.nodes.map((n) => readFileSync(join(n.dir, 'access.log'), 'utf8')).join('');
const GW_AUTH = `Basic ${Buffer.from('agent-gateway:gateway-dev-secret').toString('base64')}`;

async function jwksKids(url) {
  const res = await fetch(`${url}/.well-known/jwks.json`);
  assert.equal(res.status, 200);
  return (await res.json()).keys.map((k) => k.kid).sort();
}

test('audit chain: verify, tampering named, cut-off tail, vault rekey', async () => {
  // A consent flow over HTTP: ask, approve, connect at the provider, grant, release.
  const user = 'alice';
  const ask = { subjectToken: await v.idToken(user), audience: 'github', scope: 'issues:read', agentId: 'coder' };
  const first = await v.gw.exchange(ask);
  assert.equal(first.body?.error, 'consent_required', JSON.stringify(first.body));
  const cn = await v.connectHttp({ jar: new OriginJar(), consentUri: first.body.consent_uri, user });
  assert.equal(cn.first?.status, 303, `callback: ${cn.first?.status}`);
  const g = await pollExchange(v.gw, ask);
  assert.equal(g.status, 200, JSON.stringify(g.body));
  const grant = g.body.access_token;
  const r1 = await v.release(grant, 'list_issues');
  assert.equal(r1.status, 200, r1.text);
  const providerToken = r1.body.access_token;
  const kidsBefore = await jwksKids(v.url);
  assert.ok(heads(v.log()).length >= 1, 'the head logged at start');

  // Stop: the head is logged at stop.
  const st = await v.c.stop({ remove: false });
  assert.equal(st.code, 0, v.c.proc.stderr.slice(-3000));
  const logged = heads(v.log()).at(-1);
  const n = Number(logged.split(':')[0]);
  assert.ok(n >= 5, `entries written: ${logged}`);
  assert.equal(Number(v.sql('SELECT count(*) FROM audit')), n);

  let r = cli('audit', 'verify', '--head', logged);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, new RegExp(`${n} entries intact .*head ${logged}`));

  const exp = cli('audit', 'export', '--since', '0');
  assert.equal(exp.code, 0, exp.err);
  const lines = exp.out.trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(lines.length, n);
  assert.deepEqual(lines.map((e) => e.seq), [...Array(n).keys()].map((i) => i + 1));
  assert.equal(`${lines.at(-1).seq}:${lines.at(-1).link}`, logged);
  for (const s of [grant, providerToken]) assert.ok(!exp.out.includes(s), 'no token in the audit log');
  assert.equal(cli('audit', 'export', '--since', '4102444800').out, '', 'nothing after 2100');

  // The tampering below touches the audit table alone: a copy of it undoes each (on either
  // backend; SQLite's sqlite_sequence only grows, PostgreSQL's high-water mark is max(seq)).
  v.sql('CREATE TABLE audit_saved AS SELECT * FROM audit');
  const restore = () => v.sql('DELETE FROM audit; INSERT INTO audit SELECT * FROM audit_saved');
  const broken = (args, re) => {
    const b = cli('audit', 'verify', ...args);
    assert.equal(b.code, 1, `verify must fail: ${b.out}`);
    assert.match(b.err, re);
  };

  // Edit one row's content; a rekey refuses such a chain.
  v.sql("UPDATE audit SET subject = 'mallory' WHERE seq = 2");
  broken([], /audit: entry 2 is broken/);
  const newKey = join(v.c.dir, 'new.key');
  writeFileSync(newKey, randomBytes(32), { mode: 0o600 });
  r = cli('vault', 'rekey', '--new-key-file', newKey);
  assert.equal(r.code, 1, r.out);
  assert.match(r.err, /entry 2 is broken[\s\S]*refused/);
  restore();

  // Delete a middle row: the next one of its chain is broken (SQLite: entry 4, the one
  // chain; PostgreSQL: the next entry the same node wrote, migration 0028).
  const next3 = v.sql('SELECT min(seq) FROM audit WHERE seq > 3 AND chain = '
    + '(SELECT chain FROM audit WHERE seq = 3)');
  v.sql('DELETE FROM audit WHERE seq = 3');
  broken([], new RegExp(`audit: entry ${next3} is broken \\(entry 3 before it is missing\\)`));
  restore();

  // Delete the last row: only the logged head tells.
  v.sql(`DELETE FROM audit WHERE seq = ${n}`);
  assert.equal(cli('audit', 'verify').code, 0);
  broken(['--head', logged], new RegExp(`audit: head ${n} missing`));
  restore();

  // Swap two rows' contents (links included).
  v.sql('CREATE TEMP TABLE t AS SELECT * FROM audit WHERE seq IN (2, 3); '
    + 'UPDATE audit SET (ts, actor, action, subject, agent, resource, scopes, consent_id, request_id, '
    + 'outcome, detail, link) = (SELECT ts, actor, action, subject, agent, resource, scopes, consent_id, '
    + 'request_id, outcome, detail, link FROM t WHERE t.seq = 5 - audit.seq) WHERE seq IN (2, 3);');
  broken([], /audit: entry 2 is broken/);
  restore();
  v.sql('DROP TABLE audit_saved');
  assert.equal(cli('audit', 'verify', '--head', logged).code, 0, 'restored');

  // Rotate the master key.
  r = cli('vault', 'rekey', '--new-key-file', newKey);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /re-sealed 1 signing keys, 1 vault records, 0 outbox entries; re-linked \d+ audit entries/);
  assert.equal(v.sql("SELECT action FROM audit ORDER BY seq DESC LIMIT 1"), 'master-key-rotated');
  // Under the old key the chain no longer verifies...
  broken([], /audit: entry 1 is broken/);
  // ...under the new one it does, including the rotation's entry and the old head (on
  // PostgreSQL the rekey's process opened a chain of its own: one more entry).
  writeFileSync(join(v.c.dir, 'master.key'), readFileSync(newKey), { mode: 0o600 });
  r = cli('audit', 'verify');
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, new RegExp(`${n + (testDb === 'pg' ? 2 : 1)} entries intact`));

  // The server starts with the new key: same JWKS, and the sealed record still opens.
  c2 = await startConsentd({ port: v.c.port, dir: v.c.dir, config: v.c.config });
  assert.deepEqual(await jwksKids(c2.url), kidsBefore);
  const r2 = await v.release(grant, 'list_issues');
  assert.equal(r2.status, 200, r2.text);
  assert.equal(typeof r2.body.access_token, 'string');
});

// Runs after the test above, on its database (re-keyed) and c2 (the server under the new key).
test('audit heads: published per commit before the answer; a cut-off tail is named and makes the server unready', async () => {
  assert.ok(c2, 'the rotation test left a running server');
  // An audited request (a new consent request): its head is on head_file when the answer arrives.
  const ask = { subjectToken: await v.idToken('bob'), audience: 'github', scope: 'issues:read', agentId: 'coder' };
  const r = await v.gw.exchange(ask);
  assert.equal(r.body?.error, 'consent_required', JSON.stringify(r.body));
  const onFile = fileHeads();
  const linkHex = testDb === 'pg' ? "encode(link, 'hex')" : 'lower(hex(link))';
  const entry = v.sql(`SELECT seq || ':' || ${linkHex} FROM audit `
    + "WHERE action = 'consent.request.created' ORDER BY seq DESC LIMIT 1");
  assert.ok(onFile.includes(entry), `head ${entry} on head_file before the answer: ${onFile.slice(-3)}`);
  assert.ok(heads(logStreams(c2)).includes(entry), 'and on the log stream');
  // Heads on the file only grow, one per commit, and the history verifies (the heads from
  // before the rotation by their number: the mark says they were re-linked).
  const seqs = onFile.map((h) => Number(h.split(':')[0]));
  for (let i = 1; i < seqs.length; i++) assert.ok(seqs[i] > seqs[i - 1], `in order: ${seqs[i - 1]}, ${seqs[i]}`);
  assert.match(readFileSync(headFile, 'utf8'), /^# master-key-rotated old=\S+ new=\S+$/m);
  let vr = cli('audit', 'verify', '--heads', headFile);
  assert.equal(vr.code, 0, vr.err);
  assert.match(vr.out, /all \d+ heads listed in .* are present/);

  // Stop; cut off the last entries and rewind the numbers, as a database writer without the master key can.
  const st = await c2.stop({ remove: false });
  c2 = null;
  assert.equal(st.code, 0);
  const published = fileHeads().at(-1);
  const top = Number(published.split(':')[0]);
  const keep = top - 2;
  // SQLite's high-water mark is sqlite_sequence; PostgreSQL's is audit's sequence.
  v.sql(`DELETE FROM audit WHERE seq > ${keep}`);
  if (testDb !== 'pg') v.sql(`UPDATE sqlite_sequence SET seq = ${keep} WHERE name = 'audit'`);
  else v.sql(`SELECT setval(pg_get_serial_sequence('audit', 'seq'), ${keep})`);
  assert.equal(cli('audit', 'verify').code, 0, 'the chain alone does not tell');
  const firstGone = fileHeads().find((h) => Number(h.split(':')[0]) > keep);
  vr = cli('audit', 'verify', '--heads', headFile);
  assert.equal(vr.code, 1, vr.out);
  assert.match(vr.err, new RegExp(`audit: head ${firstGone} missing`));

  // A restart: the database is behind head_file; consentd serves, unready, and says why.
  // Readiness is per process: every node is asked directly, each its own /readyz, metrics and log.
  const c3 = await startConsentd({ port: v.c.port, dir: v.c.dir, config: v.c.config });
  try {
    for (const node of c3.nodes) {
      const url = `http://127.0.0.1:${node.port}`;
      // Unready for the audit head alone: wait until it has reached the IdP (under load the
      // first discovery can come after the first answers), then every other check is true.
      let ready; let body;
      for (let i = 0; i < 100; i++) {
        ready = await fetch(`${url}/readyz`);
        body = await ready.json();
        if (body.checks.identity_provider) break;
        await new Promise((r) => { setTimeout(r, 100); });
      }
      assert.equal(body.checks.identity_provider, true, JSON.stringify(body));
      assert.equal(ready.status, 503);
      assert.equal(body.checks.audit_head, false);
      assert.equal(body.checks.database, true);
      const m = await fetch(`${url}/metrics`, { headers: { authorization: GW_AUTH } });
      assert.equal(m.status, 200);
      const text = await m.text();
      assert.match(text, /^consentd_audit_head_behind 1$/m);
      assert.match(text, new RegExp(`^consentd_audit_head_seq ${top}$`, 'm'));
      // An error while starting is a line of the log stream and is shown on stderr too.
      // (On PostgreSQL a node found behind still opens its chain at start: a node that
      // starts after it finds that entry too, and the database head one higher.)
      const dbHead = testDb === 'pg' ? '\\d+' : `${keep}`;
      const behind = new RegExp(`"level":"error","msg":"audit head behind: database head ${dbHead} < published ${top}`);
      assert.match(node.proc.stderr, behind);
      assert.match(readFileSync(join(node.dir, 'access.log'), 'utf8'), behind);
    }
    // New entries go on the log but no longer on head_file: its last line stays the last good head.
    const again = await v.gw.exchange({ ...ask, scope: 'issues:write' });
    assert.equal(again.body?.error, 'consent_required', JSON.stringify(again.body));
    assert.equal(fileHeads().at(-1), published);
  } finally {
    const st3 = await c3.stop({ remove: false });
    assert.equal(st3.code, 0, c3.proc.stderr.slice(-3000));
  }
});
