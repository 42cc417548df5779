// Crash safety (issue 16 item 4): consentd under load is killed with SIGKILL at random
// moments and restarted on the same database, port and config; after every restart the
// database must hold everything it acknowledged, and nothing it did not acknowledge may be
// half there.  Against the real binary (TEST_CONSENTD_BIN: the ASan build in make check), the
// real login IdP, the real downstream provider and API, and a recording upstream for /proxy
// (tests/lib/vaultstack.js, proxystack.js).
//
// Load: CRASH_WORKERS (4) concurrent workers, one person each (crash0, crash1, ...), doing
// what people, the gateway and agents do:
//   - logins to consentd through the IdP (a fresh cookie jar each time, plus one kept jar);
//   - consent requests (token exchange -> consent_required) decided in a browser-like HTTP
//     client: the consent form POSTed, then for the vault resources github and ghproxy the
//     provider's login and consentd's callback; for notes (no vault) sometimes a denial;
//   - grants (token exchange -> 200), releases of github's provider token (/token, action
//     list_issues), proxied calls (/proxy/ghproxy list_issues), approvals through the proxy
//     (create_issue: 403 approval_required, the person approves on /approve/ID, the call
//     again -> 201 and the approval is used), grant revocations (/revoke) and consent
//     revocations on /me.
// Grants also come in bursts of BURST at once, and consentd runs 8 worker threads, so that
// writes meet in the group commit (issue 15): the test fails unless some COMMIT carried more
// than one transaction (consentd_db_commit_batch_size, scraped before each kill).
// Every answer a worker received is an acknowledgement, recorded with what it implies in the
// database.  A connection error (consentd is down) acknowledges nothing; any other unexpected
// answer is a "surprise" (counted and shown, and the worker starts its flow again: a kill can
// commit a write whose answer was lost, which the worker then runs into).
//
// Kills: CRASH_KILLS (10) times: load for a random 0.3-2 s, SIGKILL by pid, the load held at
// a gate (no request in flight), consentd restarted; checked; the load resumed.
//
// After each restart (consentd up, the load held):
//   - `PRAGMA integrity_check` is ok and `PRAGMA foreign_key_check` finds nothing;
//   - every acknowledged write is there:
//       login            the person's users row; the session still opens /me (every jar)
//       request          its consent_requests row
//       decision         the request approved, naming its consent, and that consents row
//       denial           the request denied
//       grant            its grants row (jti) for its consent; /introspect calls a sampled
//                        unexpired grant of a live consent active
//       release/proxied  at least as many vault.released entries for the consent as
//                        acknowledged releases, proxied calls and used approvals; at least as
//                        many proxy.forwarded entries as proxied calls and used approvals
//       approval req.    its approvals row
//       approval ok      its approval.approved entry; status approved, used, cancelled or expired
//       approval denied  status denied
//       approval used    status used
//       grant revoked    its grants row revoked; /introspect calls it inactive
//       consent revoked  the consent revoked; /introspect calls each of its grants inactive
//   - nothing is half-visible (whole database, acknowledged or not):
//       a consent has its consent.granted entry; its request is approved and names it;
//       an approved request has its consent (made from it) and its consent.request.approved
//         entry; a denied one its consent.request.denied entry; every request its
//         consent.request.created entry;
//       a revoked consent has its consent.revoked entry and a revocation event
//         (events_outbox), no unrevoked grant or refresh token, no pending or approved
//         approval, and no vault record (unless reserved for its replacement); every
//         revocation event names a revoked consent;
//       a live (unrevoked) consent of a vault resource has exactly one vault record;
//       a grant has its grant.issued entry naming its jti;
//       an approval has its approval.requested entry; approved -> decided_at and
//         approval.approved; denied -> approval.denied; used -> used_at, approval.approved
//         and approval.released; cancelled -> its consent revoked or approval.cancelled;
//         expired -> approval.expired;
//   - no vault record is half-written: every column set (sealed blobs of plausible size, a
//     known master key id, times, scopes, token type) with its vault.connected or
//     vault.record.moved entry; and every live vault consent of ours releases: a fresh
//     grant, then github's /token release (the token is active at the downstream API) or
//     ghproxy's proxied call answers 200.  A consent the provider asked to reconnect
//     (reconnect_required, audited) is counted, not failed: a kill between the provider's
//     refresh answer and consentd's commit loses the rotated refresh token at the provider,
//     which no server can avoid;
//   - the audit chain verifies: every entry linked, `consentd audit verify -c CONFIG` exits 0;
//   - the killed process died of SIGKILL, not before, and its output has no sanitizer report.
// At the end consentd is stopped with SIGTERM and must exit 0 (vaultstack's stop).
// SIGKILL ends the process, not the machine: what the kernel had of a committed transaction
// stays, so this is not a power-loss test (that is what synchronous = FULL is for).
//
// Environment: CRASH_KILLS (default 10: about 25-30 s here with the ASan build) and
// CRASH_WORKERS (default 4) for a longer or heavier run.  Delays are random; a failure names
// the kill after which it was found and what it found.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { startVaultStack, OriginJar, PROVIDER_SECRETS, DOWNSTREAM } from '../lib/vaultstack.js';
import { startRecorder } from '../lib/recorder.js';
import { ghproxyClient, ghproxyConfig } from '../lib/proxystack.js';
import { consentdLogin, req, postForm } from '../lib/weblogin.js';
import { consentdBin } from '../lib/consentd.js';
import { basicAuth } from '../lib/idplogin.js';
import { DEFAULT_USERS } from '../lib/idp.js';

// This file makes load from its own process: its IdPs run as their own processes
// (tests/lib/idp.js), as a fresh CI run's flake of this file suggested they should.
process.env.TEST_IDP_PROCESS = '1';

const KILLS = Number(process.env.CRASH_KILLS || 10);
const WORKERS = Number(process.env.CRASH_WORKERS || 4);
const BURST = 6;                      // grants asked at once in a burst step
const LOAD_MS = [300, 2000];          // load between a restart and the next kill
const GW_AUTH = basicAuth('agent-gateway', 'gateway-dev-secret');
const ALLOW = 'github:issues:read github:issues:write gitlab:issues:read ghproxy:issues:read ghproxy:issues:write';
const VAULT_RESOURCES = new Set(['github', 'gitlab', 'ghproxy']);

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const rand = (a, b) => a + Math.random() * (b - a);
const claims = (jwt) => JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString());

const USERS = { ...DEFAULT_USERS };
for (let i = 0; i < WORKERS; i++) {
  USERS[`crash${i}`] = { password: `crash${i}-password`, name: `Crash ${i}`, email: `crash${i}@example.test`, groups: [] };
}

// The (agent, resource) pairs each person consents to.
const TRIPLES = [
  { name: 'github', agent: 'coder', resource: 'github', scope: 'issues:read', vault: true },
  { name: 'ghproxy', agent: 'coder', resource: 'ghproxy', scope: 'issues:read issues:write', vault: true },
  { name: 'notes', agent: 'butler', resource: 'notes', scope: 'read', vault: false },
];

let v;
let rec;
before(async () => {
  rec = await startRecorder({ record: false });
  v = await startVaultStack({
    accessTokenTTL: 6, refreshMargin: 2, users: USERS,
    extraDsClients: (url) => [ghproxyClient(url)],
    config: ({ providerIssuer }) => ({
      consent: { deny_cooldown: 1, max_pending_per_user: 50 },
      // More workers than cores, so that concurrent writes meet in the group commit.
      server: { threads: 8 },
      ...ghproxyConfig({ providerIssuer, baseUrl: rec.url }),
      'agent.coder': { allow: `notes:read notes:write wiki:read ${ALLOW}` },
      'agent.butler': { allow: `notes:read notes:write ${ALLOW}` },
    }),
  });
  rec.introspectWith({
    introspectionEndpoint: v.dsMeta.introspection_endpoint, clientId: 'resource-server',
    clientSecret: PROVIDER_SECRETS.rs, audience: DOWNSTREAM.resource,
  });
});
after(async () => {
  try { await v?.stop(); } finally { await rec?.stop(); }
});

// --- bookkeeping -------------------------------------------------------------------------

const acks = [];                 // { kind, ... } in the order received
const ackCount = {};
let checkedUpTo = 0;             // acks[0 .. checkedUpTo) had their HTTP checks
function ack(kind, what = {}) {
  acks.push({ kind, ...what });
  ackCount[kind] = (ackCount[kind] || 0) + 1;
}
const stats = { connErrors: 0, surprises: new Map(), kills: 0, reconnects: new Set(), releaseChecks: 0 };
// A surprise's message with its ids left out, so that alike ones count together.
const surpriseKey = (who, e) => `${who}: ${(e.message || String(e)).split('\n')[0].replace(/[A-Za-z0-9_-]{20,}/g, '<id>').slice(0, 160)}`;

class Surprise extends Error {}
const CONN_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'ECONNABORTED']);
function connError(e) {
  for (let x = e, i = 0; x && i < 5; x = x.cause, i++) {
    if (CONN_CODES.has(x.code)) return true;
    if (/fetch failed|socket hang up|other side closed|ECONNREFUSED|ECONNRESET/i.test(x.message || '')) return true;
  }
  return false;
}

// The gate holds the workers between operations while consentd is down and being checked.
const gate = { open: true, wake: null, waitOpen: null };
function closeGate() {
  gate.open = false;
  gate.waitOpen = new Promise((r) => { gate.wake = r; });
}
function openGate() {
  gate.open = true;
  gate.wake?.();
}

// --- consentd calls ------------------------------------------------------------------------

function proxyCall(path, { grant, method = 'GET', json }) {
  const headers = { authorization: GW_AUTH, 'consentd-grant': grant };
  let body;
  if (json !== undefined) {
    body = JSON.stringify(json);
    headers['content-type'] = 'application/json';
  }
  return fetch(`${v.url}/proxy/ghproxy${path}`, { method, headers, body }).then(async (res) => {
    const text = await res.text();
    let parsed = null;
    try { parsed = JSON.parse(text); } catch { /* not JSON */ }
    return { status: res.status, body: parsed, text };
  });
}

// --- a worker ---------------------------------------------------------------------------------

function newWorker(i) {
  return {
    i, user: `crash${i}`, jar: null, idt: null, idtAt: 0, idle: false, loginJars: [],
    t: TRIPLES.map((x) => ({ ...x, cid: null, grants: [], decidedReq: null })),
  };
}

async function idToken(w) {
  if (!w.idt || Date.now() - w.idtAt > 120000) {
    w.idt = await v.idToken(w.user);
    w.idtAt = Date.now();
  }
  return w.idt;
}

async function exchange(w, t) {
  return v.gw.exchange({ subjectToken: await idToken(w), audience: t.resource, scope: t.scope, agentId: t.agent });
}

function gotGrant(t, r) {
  const token = r.body.access_token;
  const c = claims(token);
  ack('grant', { jti: c.jti, cid: c.cid, token, exp: c.exp });
  t.cid = c.cid;
  t.grants.push({ jti: c.jti, token, exp: c.exp });
}

async function login(w, jar = new OriginJar()) {
  const { final } = await consentdLogin({ url: v.url, user: w.user, password: `${w.user}-password`, jar });
  if (final.status !== 303) throw new Surprise(`login: /callback answered ${final.status}`);
  await final.arrayBuffer();
  ack('login', { user: w.user });
  return jar;
}

// The person decides request id: approve (and connect at the provider), or deny.
async function decide(w, t, id, deny) {
  const a = await v.approveHttp({ jar: w.jar, consentUri: `${v.url}/consent/${id}`, user: w.user, decision: deny ? 'deny' : 'approve' });
  if (deny) {
    if (a.status !== 200 || !/Request denied/.test(a.text)) throw new Surprise(`deny: ${a.status} ${a.text.slice(0, 120)}`);
    ack('denial', { id });
    return;
  }
  if (t.vault) {
    if (a.status !== 303 || !a.location.startsWith(v.ds.issuer)) throw new Surprise(`approve: ${a.status} ${a.text.slice(0, 120)}`);
    const callbackUrl = await v.providerLoginHttp({ jar: w.jar, authorizeUrl: a.location, user: w.user });
    const first = await req(w.jar, callbackUrl);
    const loc = first.headers.get('location') || '';
    await first.arrayBuffer();
    if (first.status !== 303 || loc !== `/consent/${id}/done`) throw new Surprise(`callback: ${first.status} ${loc}`);
  } else if (a.status !== 200 || !/Permission given/.test(a.text)) {
    throw new Surprise(`approve: ${a.status} ${a.text.slice(0, 120)}`);
  }
  ack('decision', { id });
  t.decidedReq = id;
}

// Token exchange until a grant (asking the person when consentd says so); false when denied.
async function obtain(w, t) {
  for (let step = 0; step < 5; step++) {
    const r = await exchange(w, t);
    if (r.status === 200) { gotGrant(t, r); return true; }
    const err = r.body?.error;
    const id = r.body?.consent_request_id;
    if (err === 'consent_required' && id) {
      ack('request', { id });
      const deny = !t.vault && Math.random() < 0.25;
      await decide(w, t, id, deny);
      if (deny) return false;
    } else if ((err === 'authorization_pending' || err === 'slow_down') && id) {
      // A request from before a kill: decide it, or wait for our decision to show.
      if (t.decidedReq !== id) await decide(w, t, id, false);
      else await sleep(1100);
    } else if (err === 'access_denied' || err === 'expired_token') {
      await sleep(1100);         // deny_cooldown (1 s), or a request that expired
      return false;
    } else {
      throw new Surprise(`exchange ${t.name}: ${r.status} ${r.text.slice(0, 160)}`);
    }
  }
  throw new Surprise(`exchange ${t.name}: no grant after 5 steps`);
}

async function approvalFlow(w, t, g) {
  const body = { title: `crash ${randomUUID()}` };
  const p1 = await proxyCall('/repos/acme/widgets/issues', { grant: g.token, method: 'POST', json: body });
  if (p1.status !== 403 || p1.body?.error !== 'approval_required') throw new Surprise(`create_issue: ${p1.status} ${p1.text.slice(0, 160)}`);
  const id = p1.body.approval_request_id;
  ack('approvalRequested', { id });
  const page = await req(w.jar, p1.body.approval_uri);
  const html = await page.text();
  const form = postForm(html);
  if (page.status !== 200 || !form?.fields.csrf) throw new Surprise(`approval page: ${page.status}`);
  const deny = Math.random() < 0.15;
  const res = await req(w.jar, p1.body.approval_uri, {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: v.url },
    body: new URLSearchParams({ csrf: form.fields.csrf, decision: deny ? 'deny' : 'approve' }).toString(),
  });
  const done = await res.text();
  if (res.status !== 200 || !(deny ? /Action denied/ : /Action approved/).test(done)) {
    throw new Surprise(`approval decision: ${res.status} ${done.slice(0, 120)}`);
  }
  ack(deny ? 'approvalDenied' : 'approvalApproved', { id });
  if (deny) return;
  const p2 = await proxyCall('/repos/acme/widgets/issues', { grant: g.token, method: 'POST', json: body });
  if (p2.status !== 201) throw new Surprise(`create_issue approved: ${p2.status} ${p2.text.slice(0, 160)}`);
  ack('approvalUsed', { id, cid: t.cid });
}

// One operation on triple t of worker w.
async function step(w, t) {
  const live = t.grants.filter((g) => g.exp - 5 > Date.now() / 1000);
  if (!t.cid || live.length === 0) {
    t.grants = [];
    await obtain(w, t);
    return;
  }
  const g = live[live.length - 1];
  const x = Math.random();
  if (x < 0.45) {
    if (t.resource === 'github') {
      const r = await v.release(g.token, 'list_issues');
      if (r.status !== 200 || !r.body?.access_token) throw new Surprise(`release: ${r.status} ${r.text.slice(0, 160)}`);
      ack('release', { cid: t.cid });
    } else if (t.resource === 'ghproxy') {
      const r = await proxyCall('/repos/acme/widgets/issues', { grant: g.token });
      if (r.status !== 200) throw new Surprise(`proxied list_issues: ${r.status} ${r.text.slice(0, 160)}`);
      ack('proxied', { cid: t.cid });
    } else {
      const r = await v.gw.introspect(g.token);
      if (r.status !== 200 || r.body?.active !== true) throw new Surprise(`introspect: ${r.status} ${r.text.slice(0, 160)}`);
    }
  } else if (x < 0.62 && t.resource === 'ghproxy') {
    await approvalFlow(w, t, g);
  } else if (x < 0.74) {
    // A burst of grants at once: their writes share group commits (issue 15), and each one
    // answered 200 is acknowledged and must survive the next kill.
    const rs = await Promise.allSettled(Array.from({ length: BURST }, () => exchange(w, t)));
    for (const x1 of rs) if (x1.status === 'fulfilled' && x1.value.status === 200) gotGrant(t, x1.value);
    const bad = rs.find((x1) => x1.status === 'rejected');
    if (bad) throw bad.reason;
    const r = rs.map((x1) => x1.value).find((y) => y.status !== 200);
    if (r) throw new Surprise(`another grant: ${r.status} ${r.text.slice(0, 160)}`);
  } else if (x < 0.82) {
    const r = await v.gw.revoke(g.token);
    if (r.status !== 200) throw new Surprise(`revoke grant: ${r.status} ${r.text.slice(0, 160)}`);
    ack('grantRevoked', { jti: g.jti, token: g.token });
    t.grants = t.grants.filter((y) => y !== g);
  } else if (x < 0.92) {
    const r = await v.revokeHttp({ jar: w.jar, cid: t.cid });
    await r.arrayBuffer();
    if (r.status !== 303) throw new Surprise(`revoke consent: ${r.status}`);
    ack('consentRevoked', { cid: t.cid, tokens: t.grants.map((y) => y.token) });
    t.cid = null;
    t.grants = [];
  } else {
    const jar = await login(w);
    w.loginJars.push(jar);
    if (w.loginJars.length > 3) w.loginJars.shift();
  }
}

async function runWorker(w, stop) {
  while (!stop.now) {
    if (!gate.open) {
      w.idle = true;
      await gate.waitOpen;
      w.idle = false;
      continue;
    }
    const t = w.t[Math.floor(Math.random() * w.t.length)];
    try {
      if (!w.jar) w.jar = await login(w);
      await step(w, t);
    } catch (e) {
      if (connError(e)) {
        stats.connErrors += 1;
      } else {
        const key = surpriseKey(t.name, e);
        stats.surprises.set(key, (stats.surprises.get(key) || 0) + 1);
      }
      // Start the flow again from what consentd says (a kill may have committed what we missed).
      t.cid = null;
      t.grants = [];
      await sleep(50);
    }
  }
  w.idle = true;
}

// --- checks -----------------------------------------------------------------------------------

function sqlite(query) {
  const r = spawnSync('sqlite3', ['-cmd', '.timeout 5000', v.dbPath, query], { encoding: 'utf8', maxBuffer: 512 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`sqlite3: ${r.stderr}`);
  return r.stdout;
}

const AUDIT_ACTIONS = ['consent.granted', 'consent.request.created', 'consent.request.approved',
  'consent.request.denied', 'consent.revoked', 'grant.issued', 'vault.connected', 'vault.record.moved',
  'vault.released', 'vault.reconnect_required', 'proxy.forwarded', 'approval.requested', 'approval.approved',
  'approval.denied', 'approval.released', 'approval.cancelled', 'approval.expired'];

// One read transaction: every table the checks need, as JSON.
function snapshot() {
  const q = (cols, from) => `SELECT json_group_array(json_object(${cols})) FROM ${from};`;
  const out = sqlite(`BEGIN;
    ${q("'id',id,'user_id',user_id,'agent',agent,'resource',resource,'granted',granted,'revoked_at',revoked_at,'request_id',request_id,'reconnect',reconnect_required,'expires_at',expires_at", 'consents')}
    ${q("'id',id,'status',status,'consent_id',consent_id,'decided_at',decided_at", 'consent_requests')}
    ${q("'jti',jti,'consent_id',consent_id,'revoked_at',revoked_at", 'grants')}
    ${q("'consent_id',consent_id,'revoked_at',revoked_at", 'refresh_tokens')}
    ${q("'id',id,'consent_id',consent_id,'status',status,'decided_at',decided_at,'used_at',used_at", 'approvals')}
    ${q("'id',id,'consent_id',consent_id,'user_id',user_id,'subject',subject,'agent',agent,'resource',resource,'scopes',provider_scopes,'token_type',token_type,'alen',length(access_sealed),'rlen',length(refresh_sealed),'exp',access_expires_at,'kid',master_kid,'created',created_at,'updated',updated_at,'reserved',reserved_for", 'vault_records')}
    ${q("'consent_id',consent_id", "events_outbox WHERE kind = 'revoked'")}
    ${q("'action',action,'consent_id',consent_id,'request_id',request_id,'detail',detail", `audit WHERE action IN (${AUDIT_ACTIONS.map((a) => `'${a}'`).join(',')})`)}
    ${q("'n',n", '(SELECT count(*) AS n FROM audit WHERE link IS NULL)')}
    ${q("'kid',master_kid", '(SELECT DISTINCT master_kid FROM signing_keys)')}
    ${q("'id',id,'subject',subject", 'users')}
    COMMIT;`).trim().split('\n');
  assert.equal(out.length, 11, `snapshot: ${out.length} lines`);
  const [consents, requests, grants, refresh, approvals, vault, events, audit, unlinked, kids, users] = out.map((l) => JSON.parse(l));
  return { consents, requests, grants, refresh, approvals, vault, events, audit, unlinked: unlinked[0].n, kids, users };
}

function countBy(rows, key) {
  const m = new Map();
  for (const r of rows) if (r[key] != null) m.set(r[key], (m.get(r[key]) || 0) + 1);
  return m;
}

// The database's invariants and the acknowledged writes -> a list of problems (empty: fine).
function dbProblems(s) {
  const bad = [];
  const p = (msg) => { if (bad.length < 40) bad.push(msg); };
  const byAction = {};
  for (const a of AUDIT_ACTIONS) byAction[a] = { c: new Map(), r: new Map() };
  const jtiIssued = new Set();
  for (const a of s.audit) {
    const m = byAction[a.action];
    if (a.consent_id) m.c.set(a.consent_id, (m.c.get(a.consent_id) || 0) + 1);
    if (a.request_id) m.r.set(a.request_id, (m.r.get(a.request_id) || 0) + 1);
    if (a.action === 'grant.issued') { const j = /jti=([A-Za-z0-9_-]+)/.exec(a.detail || ''); if (j) jtiIssued.add(j[1]); }
  }
  const has = (action, key, id) => (byAction[action][key].get(id) || 0) > 0;
  const consents = new Map(s.consents.map((k) => [k.id, k]));
  const requests = new Map(s.requests.map((r) => [r.id, r]));
  const grants = new Map(s.grants.map((g) => [g.jti, g]));
  const approvals = new Map(s.approvals.map((a) => [a.id, a]));
  const vaultBy = countBy(s.vault, 'consent_id');
  const eventsBy = countBy(s.events, 'consent_id');
  const kids = new Set(s.kids.map((k) => k.kid));

  // --- nothing half-visible ---
  for (const k of s.consents) {
    if (!has('consent.granted', 'c', k.id)) p(`consent ${k.id} without its consent.granted entry`);
    if (k.request_id) {
      const r = requests.get(k.request_id);
      if (!r) p(`consent ${k.id}: its request ${k.request_id} is missing`);
      else if (r.status !== 'approved' || r.consent_id !== k.id) p(`consent ${k.id}: its request ${r.id} is ${r.status} naming ${r.consent_id}`);
    }
    if (k.revoked_at > 0) {
      if (!has('consent.revoked', 'c', k.id)) p(`revoked consent ${k.id} without its consent.revoked entry`);
      if (!eventsBy.get(k.id)) p(`revoked consent ${k.id} without a revocation event`);
      if ((vaultBy.get(k.id) || 0) > 0 && !s.vault.some((x) => x.consent_id === k.id && x.reserved)) p(`revoked consent ${k.id} still has a vault record`);
    } else if (VAULT_RESOURCES.has(k.resource) && vaultBy.get(k.id) !== 1) {
      p(`live ${k.resource} consent ${k.id} has ${vaultBy.get(k.id) || 0} vault records`);
    }
  }
  for (const [cid] of eventsBy) if (!(consents.get(cid)?.revoked_at > 0)) p(`revocation event for unrevoked consent ${cid}`);
  for (const r of s.requests) {
    if (!has('consent.request.created', 'r', r.id)) p(`request ${r.id} without its consent.request.created entry`);
    if (r.status === 'approved') {
      const k = consents.get(r.consent_id);
      if (!k || k.request_id !== r.id) p(`approved request ${r.id} without its consent (${r.consent_id})`);
      if (!has('consent.request.approved', 'r', r.id)) p(`approved request ${r.id} without its consent.request.approved entry`);
      if (!(r.decided_at > 0)) p(`approved request ${r.id} without decided_at`);
    } else if (r.status === 'denied') {
      if (!has('consent.request.denied', 'r', r.id)) p(`denied request ${r.id} without its consent.request.denied entry`);
      if (!(r.decided_at > 0)) p(`denied request ${r.id} without decided_at`);
    }
  }
  for (const g of s.grants) {
    const k = consents.get(g.consent_id);
    if (!k) p(`grant ${g.jti} of a missing consent ${g.consent_id}`);
    else if (k.revoked_at > 0 && !(g.revoked_at > 0)) p(`grant ${g.jti} unrevoked under revoked consent ${k.id}`);
    if (!jtiIssued.has(g.jti)) p(`grant ${g.jti} without its grant.issued entry`);
  }
  for (const t of s.refresh) if (consents.get(t.consent_id)?.revoked_at > 0 && !(t.revoked_at > 0)) p(`refresh token unrevoked under revoked consent ${t.consent_id}`);
  for (const a of s.approvals) {
    const k = consents.get(a.consent_id);
    if (!has('approval.requested', 'r', a.id)) p(`approval ${a.id} without its approval.requested entry`);
    if (k?.revoked_at > 0 && (a.status === 'pending' || a.status === 'approved')) p(`approval ${a.id} ${a.status} under revoked consent ${k.id}`);
    if (a.status === 'approved' && (!(a.decided_at > 0) || !has('approval.approved', 'r', a.id))) p(`approval ${a.id} approved without decided_at or approval.approved`);
    if (a.status === 'denied' && !has('approval.denied', 'r', a.id)) p(`approval ${a.id} denied without approval.denied`);
    if (a.status === 'used' && (!(a.used_at > 0) || !has('approval.approved', 'r', a.id) || !has('approval.released', 'r', a.id))) {
      p(`approval ${a.id} used without used_at, approval.approved or approval.released`);
    }
    if (a.status === 'cancelled' && !(k?.revoked_at > 0) && !has('approval.cancelled', 'r', a.id)) p(`approval ${a.id} cancelled without a revoked consent or approval.cancelled`);
    if (a.status === 'expired' && !has('approval.expired', 'r', a.id)) p(`approval ${a.id} expired without approval.expired`);
  }
  for (const x of s.vault) {
    const k = consents.get(x.consent_id);
    if (!k) p(`vault record ${x.id} of a missing consent ${x.consent_id}`);
    else if (k.user_id !== x.user_id || k.agent !== x.agent || k.resource !== x.resource) p(`vault record ${x.id} disagrees with its consent ${k.id}`);
    if (!(x.alen >= 32) || (x.rlen !== null && !(x.rlen >= 32))) p(`vault record ${x.id}: sealed sizes ${x.alen}/${x.rlen}`);
    if (!kids.has(x.kid)) p(`vault record ${x.id}: unknown master key ${x.kid}`);
    if (!x.scopes || x.token_type !== 'Bearer' || !(x.exp > 0) || !(x.created > 0) || !(x.updated >= x.created) || !x.subject) {
      p(`vault record ${x.id} not fully written: ${JSON.stringify({ ...x })}`);
    }
    if (!has('vault.connected', 'c', x.consent_id) && !has('vault.record.moved', 'c', x.consent_id)) p(`vault record ${x.id} without vault.connected / vault.record.moved`);
  }
  if (s.unlinked !== 0) p(`${s.unlinked} audit entries without a link`);

  // --- everything acknowledged is there ---
  const users = new Set(s.users.map((u) => u.subject));
  const released = new Map();     // cid -> acknowledged vault.released
  const forwarded = new Map();    // cid -> acknowledged proxy.forwarded
  const bump = (m, k) => m.set(k, (m.get(k) || 0) + 1);
  for (const a of acks) {
    switch (a.kind) {
      case 'login': if (!users.has(a.user)) p(`acknowledged login of ${a.user}: no users row`); break;
      case 'request': if (!requests.has(a.id)) p(`acknowledged request ${a.id} is missing`); break;
      case 'decision': {
        const r = requests.get(a.id);
        if (!r || r.status !== 'approved' || !consents.has(r.consent_id)) p(`acknowledged decision on ${a.id}: request ${r?.status}, consent ${r?.consent_id}`);
        break;
      }
      case 'denial': if (requests.get(a.id)?.status !== 'denied') p(`acknowledged denial of ${a.id}: ${requests.get(a.id)?.status}`); break;
      case 'grant': if (grants.get(a.jti)?.consent_id !== a.cid) p(`acknowledged grant ${a.jti} (${a.cid}) is missing`); break;
      case 'release': bump(released, a.cid); break;
      case 'proxied': bump(released, a.cid); bump(forwarded, a.cid); break;
      case 'approvalUsed':
        bump(released, a.cid); bump(forwarded, a.cid);
        if (approvals.get(a.id)?.status !== 'used') p(`acknowledged use of approval ${a.id}: ${approvals.get(a.id)?.status}`);
        break;
      case 'approvalRequested': if (!approvals.has(a.id)) p(`acknowledged approval request ${a.id} is missing`); break;
      case 'approvalApproved':
        if (!['approved', 'used', 'cancelled', 'expired'].includes(approvals.get(a.id)?.status) || !has('approval.approved', 'r', a.id)) {
          p(`acknowledged approval of ${a.id}: ${approvals.get(a.id)?.status}`);
        }
        break;
      case 'approvalDenied': if (approvals.get(a.id)?.status !== 'denied') p(`acknowledged denial of approval ${a.id}: ${approvals.get(a.id)?.status}`); break;
      case 'grantRevoked': if (!(grants.get(a.jti)?.revoked_at > 0)) p(`acknowledged revocation of grant ${a.jti}: not revoked`); break;
      case 'consentRevoked': if (!(consents.get(a.cid)?.revoked_at > 0)) p(`acknowledged revocation of consent ${a.cid}: not revoked`); break;
      default: p(`unknown ack ${a.kind}`);
    }
  }
  for (const [cid, n] of released) {
    const got = byAction['vault.released'].c.get(cid) || 0;
    if (got < n) p(`consent ${cid}: ${n} acknowledged releases, ${got} vault.released entries`);
  }
  for (const [cid, n] of forwarded) {
    const got = byAction['proxy.forwarded'].c.get(cid) || 0;
    if (got < n) p(`consent ${cid}: ${n} acknowledged proxied calls, ${got} proxy.forwarded entries`);
  }
  return bad;
}

// A request during the checks; a connection left over from before the kill may fail once.
async function retry(fn) {
  for (let i = 0; ; i++) {
    try { return await fn(); } catch (e) { if (!connError(e) || i >= 2) throw e; await sleep(100); }
  }
}

// HTTP checks of what was acknowledged since the last check, and of every live vault consent.
async function httpProblems(s, workers) {
  const bad = [];
  const p = (msg) => { if (bad.length < 40) bad.push(msg); };
  const consents = new Map(s.consents.map((k) => [k.id, k]));
  const fresh = acks.slice(checkedUpTo);
  checkedUpTo = acks.length;
  const inactive = [];
  for (const a of fresh) {
    if (a.kind === 'grantRevoked') inactive.push([a.token, `revoked grant ${a.jti}`]);
    if (a.kind === 'consentRevoked') for (const t of a.tokens) inactive.push([t, `a grant of revoked consent ${a.cid}`]);
  }
  for (const [token, what] of inactive) {
    const r = await retry(() => v.gw.introspect(token));
    if (r.status !== 200 || r.body?.active !== false) p(`/introspect of ${what}: ${r.status} ${r.text}`);
  }
  const now = Date.now() / 1000;
  // (An unacknowledged /revoke may have revoked one: only grants whose row is unrevoked.)
  const grantRows = new Map(s.grants.map((g) => [g.jti, g]));
  const live = fresh.filter((a) => a.kind === 'grant' && a.exp - 5 > now && consents.get(a.cid)?.revoked_at === 0
    && grantRows.get(a.jti)?.revoked_at === 0);
  for (const a of live.slice(-8)) {
    const r = await retry(() => v.gw.introspect(a.token));
    if (r.body?.active !== true) p(`/introspect of acknowledged live grant ${a.jti}: ${r.status} ${r.text}`);
  }
  // Sessions: the kept jar and the recent login jars still open /me.
  for (const w of workers) {
    for (const jar of [w.jar, ...w.loginJars].filter(Boolean)) {
      const res = await retry(() => req(jar, `${v.url}/me`));
      await res.arrayBuffer();
      if (res.status !== 200) p(`${w.user}: an acknowledged session no longer opens /me (${res.status})`);
    }
  }
  // Every live vault consent of ours releases (its record unseals and the token works).
  const subjects = new Map(s.users.map((u) => [u.id, u.subject]));
  for (const k of s.consents) {
    if (k.revoked_at !== 0 || !VAULT_RESOURCES.has(k.resource) || k.expires_at <= now) continue;
    const w = workers.find((x) => x.user === subjects.get(k.user_id));
    if (!w) continue;
    if (k.reconnect) { stats.reconnects.add(k.id); continue; }
    stats.releaseChecks += 1;
    const g = await retry(async () => v.gw.exchange({ subjectToken: await idToken(w), audience: k.resource, scope: k.granted, agentId: k.agent }));
    let ok = false;
    let why = `grant: ${g.status} ${g.text.slice(0, 200)}`;
    if (g.status === 200 && k.resource === 'ghproxy') {
      const r = await retry(() => proxyCall('/repos/acme/widgets/issues', { grant: g.body.access_token }));
      ok = r.status === 200;
      why = `proxied call: ${r.status} ${r.text.slice(0, 200)}`;
    } else if (g.status === 200) {
      const r = await retry(() => v.release(g.body.access_token, 'list_issues'));
      why = `release: ${r.status} ${r.text.slice(0, 200)}`;
      if (r.status === 200) {
        const api = await v.callApi(r.body.access_token);
        ok = api.status === 200;
        why = `downstream API: ${api.status}`;
      }
    }
    if (!ok) {
      // The provider refused a refresh token whose rotation a kill lost: consentd asks to reconnect.
      const rc = v.sql(`SELECT reconnect_required FROM consents WHERE id = '${k.id}'`);
      const audited = Number(v.sql(`SELECT count(*) FROM audit WHERE action = 'vault.reconnect_required' AND consent_id = '${k.id}'`));
      if (rc === '1' && audited > 0) stats.reconnects.add(k.id);
      else p(`live ${k.resource} consent ${k.id} does not release: ${why}`);
    }
  }
  return bad;
}

function auditVerify() {
  const r = spawnSync(consentdBin, ['audit', 'verify', '-c', v.c.cfgPath], {
    encoding: 'utf8', timeout: 60000, env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1' },
  });
  return { code: r.status, out: `${r.error ? `${r.error.message} ` : ''}${r.signal ? `signal ${r.signal} ` : ''}${r.stdout}${r.stderr}` };
}

async function check(label, workers) {
  const problems = [];
  const integrity = sqlite('PRAGMA integrity_check;').trim();
  if (integrity !== 'ok') problems.push(`integrity_check: ${integrity.slice(0, 500)}`);
  const fk = sqlite('PRAGMA foreign_key_check;').trim();
  if (fk !== '') problems.push(`foreign_key_check: ${fk.slice(0, 500)}`);
  const s = snapshot();
  problems.push(...dbProblems(s));
  problems.push(...await httpProblems(s, workers));
  const av = auditVerify();
  if (av.code !== 0) problems.push(`audit verify exited ${av.code}: ${av.out.slice(-800)}`);
  assert.deepEqual(problems, [], `${label}: ${problems.length} problem(s)\n${problems.join('\n')}`);
  return s;
}

// --- the test ---------------------------------------------------------------------------------

// The group commit at work: transactions and COMMITs counted by consentd_db_commit_batch_size
// (sum = transactions, count = COMMITs), added up over the lives of the process.
const batches = { tx: 0, commits: 0 };
async function scrapeBatches() {
  const r = await fetch(`${v.url}/metrics`, { headers: { authorization: GW_AUTH } }).catch(() => null);
  if (!r || r.status !== 200) return;
  const text = await r.text();
  const num = (name) => Number((new RegExp(`\\n${name} ([0-9.e+]+)\\n`).exec(text) || [])[1] || 0);
  batches.tx += num('consentd_db_commit_batch_size_sum');
  batches.commits += num('consentd_db_commit_batch_size_count');
}

test(`${KILLS} SIGKILLs under load lose nothing acknowledged and leave nothing half-written`, async (t) => {
  const t0 = Date.now();
  const workers = Array.from({ length: WORKERS }, (_, i) => newWorker(i));
  const stop = { now: false };
  const running = workers.map((w) => runWorker(w, stop));
  const downMs = [];
  try {
    await sleep(1500);              // warm-up: logins and first consents
    for (let k = 1; k <= KILLS; k++) {
      await sleep(rand(...LOAD_MS));
      await scrapeBatches();
      const pid = v.c.proc.pid;
      const wasAlive = !v.c.proc.exitStatus;
      closeGate();
      const st = await v.kill('SIGKILL');
      stats.kills += 1;
      const tk = Date.now();
      const out = v.c.proc.output();
      assert.ok(wasAlive && st.signal === 'SIGKILL', `kill ${k}: consentd (pid ${pid}) died of ${JSON.stringify(st)} before the kill\n${out.slice(-3000)}`);
      assert.ok(!/AddressSanitizer|UndefinedBehaviorSanitizer|runtime error:|LeakSanitizer/.test(out), `kill ${k}: a sanitizer report\n${out.slice(-3000)}`);
      // No request in flight: every worker waits at the gate.
      for (const t1 = Date.now(); workers.some((w) => !w.idle);) {
        assert.ok(Date.now() - t1 < 30000, `kill ${k}: workers still busy after 30 s`);
        await sleep(20);
      }
      await v.restart();
      downMs.push(Date.now() - tk);
      await check(`after kill ${k}`, workers);
      openGate();
    }
  } finally {
    stop.now = true;
    openGate();
    await Promise.all(running);
  }
  await check('at the end', workers);
  const kinds = Object.entries(ackCount).map(([k, n]) => `${k}=${n}`).join(' ');
  t.diagnostic(`kills: ${stats.kills} (workers ${WORKERS}); ${((Date.now() - t0) / 1000).toFixed(1)} s; restart+check ${Math.min(...downMs)}-${Math.max(...downMs)} ms`);
  t.diagnostic(`acknowledged: ${acks.length} (${kinds})`);
  const refreshed = v.sql("SELECT count(*) FROM audit WHERE action = 'vault.refreshed'");
  t.diagnostic(`provider token refreshes (vault.refreshed): ${refreshed}`);
  const nSurprises = [...stats.surprises.values()].reduce((a, b) => a + b, 0);
  t.diagnostic(`connection errors (unacknowledged): ${stats.connErrors}; surprises: ${nSurprises}; live vault consents released after restarts: ${stats.releaseChecks}; consents asked to reconnect: ${stats.reconnects.size}`);
  for (const [x, n] of [...stats.surprises].sort((a, b) => b[1] - a[1]).slice(0, 10)) t.diagnostic(`surprise x${n}: ${x}`);
  t.diagnostic(`group commit: ${batches.tx} transactions in ${batches.commits} COMMITs before the kills`);
  assert.ok(batches.tx > batches.commits, `no COMMIT carried more than one transaction (${batches.tx} in ${batches.commits}): the load did not exercise the group commit`);
  for (const kind of ['login', 'decision', 'grant', 'consentRevoked', 'approvalUsed']) {
    assert.ok((ackCount[kind] || 0) > 0, `no acknowledged ${kind}: the load did not exercise it`);
  }
});
