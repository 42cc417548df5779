// GET /metrics (issue 16 item 2) against the real binary, the real IdPs, the downstream
// provider and a recording upstream: one flow of logins, consent decisions (on the consent
// page and through a provider connection), grants, an introspection, proxied calls with an
// approval, a revocation on /me and its security event; then the scrape, with the gateway's
// credentials, with the [metrics] token and on [metrics] listen, is
//   - refused without credentials, with a wrong token and a wrong gateway secret;
//   - accepted by Prometheus's own parser (`promtool check metrics`: exit 0, no complaint);
//   - counting exactly what the flow did (grants issued, requests by route and status,
//     decisions and approvals by outcome, releases and refreshes by resource, deliveries,
//     consents by state against the database), with label values that are consentd's words
//     only (an unknown path counts as route "other", never its text).
// Last, the provider is stopped and one more proxied call counts a provider error and a
// failed refresh.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { startVaultStack, signedInJars } from '../lib/vaultstack.js';
import { startRecorder } from '../lib/recorder.js';
import { ghproxyClient, ghproxyConfig } from '../lib/proxystack.js';
import { req, postForm, revokeOnMe } from '../lib/weblogin.js';
import { pollExchange } from '../lib/gateway.js';
import { basicAuth } from '../lib/idplogin.js';
import { getFreePort } from '../lib/ports.js';

const GW_AUTH = basicAuth('agent-gateway', 'gateway-dev-secret');
const TOKEN = 'metrics-scrape-token-7f3a9c2e51';
const ALLOW = 'ghproxy:issues:read ghproxy:issues:write deadprov:read';

let v;
let rec;
let events;
let metricsUrl;

// A webhook receiver that takes every security event (202); their content is events.test.js's.
async function startReceiver(port) {
  let n = 0;
  const server = createServer((rq, rs) => {
    rq.resume();
    rq.on('end', () => { n += 1; rs.writeHead(202).end(); });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host: '127.0.0.1' }, resolve);
  });
  return { count: () => n, stop: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }) };
}

before(async () => {
  const rport = await getFreePort();
  const mport = await getFreePort();
  const deadPort = await getFreePort();   // nothing listens there: a provider that is down
  metricsUrl = `http://127.0.0.1:${mport}`;
  events = await startReceiver(rport);
  rec = await startRecorder();
  // accessTokenTTL 2 with refresh_margin 2: every release of a ghproxy token refreshes it first.
  v = await startVaultStack({
    accessTokenTTL: 2,
    extraDsClients: (url) => [ghproxyClient(url)],
    config: ({ providerIssuer }) => ({
      consent: { max_pending_per_user: 50 },
      gateway: { events_uri: `http://127.0.0.1:${rport}/events` },
      metrics: { token: TOKEN, listen: `127.0.0.1:${mport}` },
      ...ghproxyConfig({ providerIssuer, baseUrl: rec.url }),
      'resource.deadprov': { name: 'Down provider', provider_issuer: `http://127.0.0.1:${deadPort}`,
        provider_client_id: 'consentd-dead', provider_client_secret: 'consentd-dead-secret',
        token_release: 'gateway' },
      'scope.deadprov.read': { description: 'Read', provider: 'read' },
      'agent.coder': { allow: `notes:read notes:write wiki:read ${ALLOW}` },
    }),
  });
});
after(async () => {
  try { await v?.stop(); } finally { await rec?.stop(); await events?.stop(); }
});

// --- the text format ---------------------------------------------------------------------

async function scrape(headers = { authorization: GW_AUTH }, base = v.url) {
  const res = await fetch(`${base}/metrics`, { headers });
  const text = await res.text();
  return { status: res.status, text, headers: res.headers };
}

// name{k="v",...} exactly as consentd writes a series (labels in declaration order).
function series(name, labels = {}) {
  const l = Object.entries(labels).map(([k, x]) => `${k}="${x}"`).join(',');
  return l ? `${name}{${l}}` : name;
}

// The value of one series; 0 when the family exists and the series does not (yet).
function value(text, name, labels = {}) {
  const family = text.includes(`# TYPE ${name} `) ? name : name.replace(/_(count|sum|bucket)$/, '');
  assert.ok(text.includes(`# TYPE ${family} `), `family ${family} missing`);
  const want = `${series(name, labels)} `;
  const line = text.split('\n').find((x) => x.startsWith(want));
  return line === undefined ? 0 : Number(line.slice(want.length));
}

// scripts/deps.sh unpacks promtool alone from Debian's prometheus package into build/tools/
// (installing Prometheus would enable and start its server on :9090); one on PATH also does.
const PROMTOOL = [new URL('../../build/tools/promtool', import.meta.url).pathname]
  .find((p) => existsSync(p)) || 'promtool';
function promtool(text) {
  const r = spawnSync(PROMTOOL, ['check', 'metrics'], { input: text, encoding: 'utf8' });
  if (r.error) throw new Error(`promtool (${PROMTOOL}): ${r.error.message}; make deps unpacks it`);
  return r;
}

// --- the flow ------------------------------------------------------------------------------

const signedIn = signedInJars();

async function decideApproval(user, uri) {
  const jar = await signedIn(v.url, user);
  const page = await req(jar, uri);
  const html = await page.text();
  assert.equal(page.status, 200, `approval page: ${html.slice(0, 300)}`);
  const form = postForm(html);
  const res = await req(jar, uri, {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: v.url },
    body: new URLSearchParams({ csrf: form.fields.csrf, decision: 'approve' }).toString(),
  });
  assert.equal(res.status, 200, await res.text());
}

function proxy(path, grant, { method = 'GET', json } = {}) {
  const headers = { authorization: GW_AUTH, 'consentd-grant': grant };
  let body;
  if (json !== undefined) { body = JSON.stringify(json); headers['content-type'] = 'application/json'; }
  return fetch(`${v.url}/proxy/ghproxy${path}`, { method, headers, body });
}

const FAMILIES = [
  'consentd_http_requests_total', 'consentd_http_request_duration_seconds',
  'consentd_grants_issued_total', 'consentd_consents', 'consentd_consent_requests_total',
  'consentd_approvals_total', 'consentd_vault_releases_total', 'consentd_vault_refreshes_total',
  'consentd_provider_errors_total', 'consentd_fetch_errors_total',
  'consentd_event_deliveries_total', 'consentd_event_backlog', 'consentd_db_commit_seconds',
  'consentd_db_commit_batch_size', 'consentd_db_busy_waits_total',
  'consentd_audit_head_lag_entries', 'consentd_audit_head_behind', 'consentd_audit_head_seq',
  'consentd_proxy_requests_total', 'consentd_proxy_refused_total',
  'consentd_db_write_queue_full_total', 'consentd_cache_lookups_total',
  'consentd_db_commit_lingers_total', 'consentd_db_requests_under_way',
  'consentd_db_wal_restarts_total',
];

test('who may scrape: the gateway, the metrics token, [metrics] listen; nobody else', async () => {
  const none = await scrape({});
  assert.equal(none.status, 401, none.text);
  assert.equal(JSON.parse(none.text).error, 'invalid_client');
  const wrongSecret = await scrape({ authorization: basicAuth('agent-gateway', 'wrong-secret') });
  assert.equal(wrongSecret.status, 401);
  const wrongToken = await scrape({ authorization: `Bearer ${TOKEN}x` });
  assert.equal(wrongToken.status, 401, wrongToken.text);
  assert.equal(JSON.parse(wrongToken.text).error, 'invalid_token');
  assert.match(wrongToken.headers.get('www-authenticate'), /^Bearer realm="consentd-metrics", error="invalid_token"$/);
  assert.ok(!wrongToken.text.includes('consentd_'), 'no metrics with a wrong token');
  const shortToken = await scrape({ authorization: `Bearer ${TOKEN.slice(0, -1)}` });
  assert.equal(shortToken.status, 401);

  for (const [what, r] of [
    ['gateway', await scrape()],
    ['token', await scrape({ authorization: `Bearer ${TOKEN}` })],
    ['listen', await scrape({}, metricsUrl)],
  ]) {
    assert.equal(r.status, 200, `${what}: ${r.text.slice(0, 200)}`);
    assert.equal(r.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8', what);
    for (const f of FAMILIES) assert.ok(r.text.includes(`# TYPE ${f} `), `${what}: ${f}`);
  }
  // The separate listener serves /metrics alone.
  for (const path of ['/healthz', '/token', '/', '/metrics/x']) {
    const r = await fetch(`${metricsUrl}${path}`);
    await r.arrayBuffer();
    assert.equal(r.status, 404, `${path} on [metrics] listen`);
  }
  const post = await fetch(`${metricsUrl}/metrics`, { method: 'POST' });
  await post.arrayBuffer();
  assert.equal(post.status, 405);
});

test('after a real flow, promtool accepts the text and every family counts what happened', async () => {
  const m0 = (await scrape()).text;

  // alice connects ghproxy (decided with the provider connection), the gateway gets a grant.
  const alice = await signedIn(v.url, 'alice');
  const aliceToken = await v.idToken('alice');
  const first = await v.gw.exchange({ subjectToken: aliceToken, audience: 'ghproxy', scope: 'issues:read issues:write', agentId: 'coder' });
  assert.equal(first.body?.error, 'consent_required', first.text);
  const a = await v.approveHttp({ jar: alice, consentUri: first.body.consent_uri, user: 'alice' });
  assert.equal(a.status, 303, a.text);
  const callbackUrl = await v.providerLoginHttp({ jar: alice, authorizeUrl: a.location, user: 'alice' });
  const d = await v.deliverCallback({ jar: alice, callbackUrl });
  assert.equal(d.first.status, 303);
  const g1 = await pollExchange(v.gw, { subjectToken: aliceToken, audience: 'ghproxy', scope: 'issues:read issues:write', agentId: 'coder' });
  assert.equal(g1.status, 200, g1.text);

  // alice denies a wiki request on the consent page.
  const w = await v.gw.exchange({ subjectToken: aliceToken, audience: 'wiki', scope: 'read', agentId: 'coder' });
  assert.equal(w.body?.error, 'consent_required', w.text);
  const wd = await v.approveHttp({ jar: alice, consentUri: w.body.consent_uri, user: 'alice', decision: 'deny' });
  assert.ok(wd.status === 200 || wd.status === 303, `deny: ${wd.status}`);

  // bob approves notes on the consent page, gets a grant, then revokes it on /me (an event).
  const bob = await signedIn(v.url, 'bob');
  const bobToken = await v.idToken('bob');
  const n = await v.gw.exchange({ subjectToken: bobToken, audience: 'notes', scope: 'read', agentId: 'coder' });
  assert.equal(n.body?.error, 'consent_required', n.text);
  const nd = await v.approveHttp({ jar: bob, consentUri: n.body.consent_uri, user: 'bob' });
  assert.ok(nd.status === 200 || nd.status === 303, `approve: ${nd.status}`);
  const g2 = await pollExchange(v.gw, { subjectToken: bobToken, audience: 'notes', scope: 'read', agentId: 'coder' });
  assert.equal(g2.status, 200, g2.text);
  const { payload } = await v.gw.verify(g2.body.access_token);
  const rv = await revokeOnMe({ url: v.url, jar: bob, cid: payload.cid });
  await rv.arrayBuffer();
  assert.ok(rv.status === 200 || rv.status === 303, `revoke: ${rv.status}`);

  // The gateway introspects alice's grant and calls through the proxy: a plain read, then
  // an action that needs an approval, approved once and used.
  const intro = await v.gw.introspect(g1.body.access_token);
  assert.equal(intro.body?.active, true, intro.text);
  const list = await proxy('/repos/o/r/issues', g1.body.access_token);
  await list.arrayBuffer();
  assert.equal(list.status, 200);
  const issue = { title: 'from metrics.test.js' };
  const ask = await proxy('/repos/o/r/issues', g1.body.access_token, { method: 'POST', json: issue });
  const askBody = await ask.json();
  assert.equal(askBody.error, 'approval_required', JSON.stringify(askBody));
  await decideApproval('alice', askBody.approval_uri);
  const made = await proxy('/repos/o/r/issues', g1.body.access_token, { method: 'POST', json: issue });
  await made.arrayBuffer();
  assert.equal(made.status, 201);

  // alice approves a resource whose provider is down: its discovery fails.
  const dp = await v.gw.exchange({ subjectToken: aliceToken, audience: 'deadprov', scope: 'read', agentId: 'coder' });
  assert.equal(dp.body?.error, 'consent_required', dp.text);
  const dpd = await v.approveHttp({ jar: alice, consentUri: dp.body.consent_uri, user: 'alice' });
  assert.ok(!(dpd.location || '').startsWith('http://127.0.0.1:'), `no redirect to a provider: ${dpd.status} ${dpd.location}`);

  // An unknown path whose text must never become a label.
  const unknown = await fetch(`${v.url}/no-such-page-SECRETPATH?x=1`);
  await unknown.arrayBuffer();
  assert.equal(unknown.status, 404);

  // The revocation's event reaches the receiver (the outbox is worked every few seconds).
  assert.ok(await v.waitFor(() => events.count() >= 1 && v.sql('SELECT count(*) FROM events_outbox WHERE delivered_at = 0') === '0'),
    'the event was delivered');

  const m1 = (await scrape({ authorization: `Bearer ${TOKEN}` })).text;
  const delta = (name, labels) => value(m1, name, labels) - value(m0, name, labels);

  // Prometheus's own parser and linter: exit 0, nothing to say.
  const p = promtool(m1);
  assert.equal(p.status, 0, `promtool: ${p.stdout}${p.stderr}`);
  assert.equal(`${p.stdout}${p.stderr}`.trim(), '', 'promtool lint complaints');

  // Requests by route pattern, method and status; the unknown path as "other".
  assert.equal(delta('consentd_http_requests_total', { route: '/token', method: 'POST', status: '200' }), 2, 'two grants from /token');
  assert.equal(delta('consentd_http_requests_total', { route: '/introspect', method: 'POST', status: '200' }), 1);
  assert.equal(delta('consentd_http_requests_total', { route: '/proxy/{resource}/{rest*}', method: 'GET', status: '200' }), 1);
  assert.equal(delta('consentd_http_requests_total', { route: '/proxy/{resource}/{rest*}', method: 'POST', status: '403' }), 1);
  assert.equal(delta('consentd_http_requests_total', { route: '/proxy/{resource}/{rest*}', method: 'POST', status: '201' }), 1);
  assert.equal(delta('consentd_http_requests_total', { route: 'other', method: 'GET', status: '404' }), 1);
  assert.ok(!m1.includes('SECRETPATH') && !m1.includes('no-such-page'), 'no request text in a label');
  assert.ok(!m1.includes('/repos/o/r'), 'no proxied path in a label');
  // The histogram: one observation a request, buckets cumulative up to +Inf = _count.
  const c = value(m1, 'consentd_http_request_duration_seconds_count', { route: '/token' });
  assert.equal(c - value(m0, 'consentd_http_request_duration_seconds_count', { route: '/token' }),
    delta('consentd_http_requests_total', { route: '/token', method: 'POST', status: '200' })
    + delta('consentd_http_requests_total', { route: '/token', method: 'POST', status: '400' }));
  assert.equal(value(m1, 'consentd_http_request_duration_seconds_bucket', { route: '/token', le: '+Inf' }), c);

  // Grants: exactly the two this test obtained.
  assert.equal(delta('consentd_grants_issued_total', { kind: 'token_exchange' }), 2);
  // Decisions: alice's connection and bob's approval, alice's denial.
  assert.equal(delta('consentd_consent_requests_total', { outcome: 'approved' }), 2);
  assert.equal(delta('consentd_consent_requests_total', { outcome: 'denied' }), 1);
  // The approval: decided once, used once.
  assert.equal(delta('consentd_approvals_total', { outcome: 'approved' }), 1);
  assert.equal(delta('consentd_approvals_total', { outcome: 'used' }), 1);
  // The vault: two releases to the proxy, each after a refresh (TTL 2 s, margin 2 s).
  assert.equal(delta('consentd_vault_releases_total', { resource: 'ghproxy' }), 2);
  assert.equal(delta('consentd_vault_refreshes_total', { resource: 'ghproxy', outcome: 'ok' }), 2);
  assert.equal(delta('consentd_provider_errors_total', { resource: 'ghproxy' }), 0);
  // The down provider's discovery, tried once (retried at most every 5 s); the IdP's never failed.
  assert.equal(delta('consentd_fetch_errors_total', { what: 'provider_discovery' }), 1);
  assert.equal(value(m1, 'consentd_fetch_errors_total', { what: 'idp_discovery' }), 0);
  assert.equal(value(m1, 'consentd_fetch_errors_total', { what: 'idp_jwks' }), 0);
  // The proxy's own counters, unchanged in name and labels.
  assert.equal(delta('consentd_proxy_requests_total', { resource: 'ghproxy', action: 'list_issues', status: '200' }), 1);
  assert.equal(delta('consentd_proxy_requests_total', { resource: 'ghproxy', action: 'create_issue', status: '201' }), 1);
  // The event: delivered once, nothing waiting.
  assert.equal(delta('consentd_event_deliveries_total', { outcome: 'delivered' }), 1);
  assert.equal(value(m1, 'consentd_event_backlog'), 0);
  // Consents by state, as the database says at the scrape.
  const live = Number(v.sql('SELECT count(*) FROM consents WHERE revoked_at = 0 AND expires_at > unixepoch() AND reconnect_required = 0'));
  const revoked = Number(v.sql('SELECT count(*) FROM consents WHERE revoked_at != 0'));
  assert.equal(value(m1, 'consentd_consents', { state: 'live' }), live);
  assert.equal(value(m1, 'consentd_consents', { state: 'revoked' }), revoked);
  assert.ok(live >= 1 && revoked >= 1, `live ${live}, revoked ${revoked}`);
  // The database: every commit observed once in both histograms.  A batch holds
  // at least one write; this test's requests come one at a time, but a background
  // write (an event delivery, the audit head) may share a commit with one of them
  // (CI saw a batch of 2 once), so the sizes are bounded, not fixed at 1.
  const commits = delta('consentd_db_commit_seconds_count');
  assert.ok(commits > 0, 'commits observed');
  assert.equal(delta('consentd_db_commit_batch_size_count'), commits);
  const batched = delta('consentd_db_commit_batch_size_sum');
  assert.ok(batched >= commits && batched <= 2 * commits, `${batched} writes in ${commits} commits`);
  assert.equal(value(m1, 'consentd_db_commit_batch_size_bucket', { le: '+Inf' }), value(m1, 'consentd_db_commit_batch_size_count'));
  assert.ok(value(m1, 'consentd_db_commit_batch_size_bucket', { le: '1' }) >= value(m0, 'consentd_db_commit_batch_size_bucket', { le: '1' }));
  // The requests the group commit waits for (its linger): every request of the flow --
  // answered, refused, deferred to the proxy's threads -- stopped
  // counting when its handler was done; only this scrape's own is under way.
  assert.equal(value(m1, 'consentd_db_requests_under_way'), 1);
  // The verification caches: alice's and bob's subject tokens were verified in full once
  // each and alice's again from the cache; alice's grant was verified in full once, then
  // introspected and proxied from the cache.
  assert.ok(delta('consentd_cache_lookups_total', { cache: 'subject_token', outcome: 'miss' }) >= 2);
  assert.ok(delta('consentd_cache_lookups_total', { cache: 'subject_token', outcome: 'hit' }) >= 1);
  assert.ok(delta('consentd_cache_lookups_total', { cache: 'grant', outcome: 'miss' }) >= 1);
  assert.ok(delta('consentd_cache_lookups_total', { cache: 'grant', outcome: 'hit' }) >= 1);
  // The token exchanges' live consents: read from the database at least once (a worker
  // thread remembers one only after it read it); each exchange counted once.
  assert.ok(delta('consentd_cache_lookups_total', { cache: 'consent', outcome: 'miss' }) >= 1);
  assert.match(m1, /\nconsentd_cache_lookups_total\{cache="consent",outcome="stale"\} \d+\n/);
  assert.equal(delta('consentd_db_write_queue_full_total'), 0);
  // Busy waits depend on which writes overlap: the series is there (a count, not asserted).
  assert.match(m1, /\nconsentd_db_busy_waits_total \d+\n/);
  // The audit head: published up to the database's last entry.
  assert.equal(value(m1, 'consentd_audit_head_lag_entries'), 0);
  assert.equal(value(m1, 'consentd_audit_head_behind'), 0);
  assert.equal(value(m1, 'consentd_audit_head_seq'), Number(v.sql('SELECT max(seq) FROM audit')));

  // The provider goes away: the next proxied call's refresh fails, once.
  await v.ds.stop();
  const down = await proxy('/repos/o/r/issues', g1.body.access_token);
  await down.arrayBuffer();
  const m2 = (await scrape({}, metricsUrl)).text;
  assert.equal(value(m2, 'consentd_provider_errors_total', { resource: 'ghproxy' })
    - value(m1, 'consentd_provider_errors_total', { resource: 'ghproxy' }), 1);
  assert.equal(value(m2, 'consentd_vault_refreshes_total', { resource: 'ghproxy', outcome: 'error' })
    - value(m1, 'consentd_vault_refreshes_total', { resource: 'ghproxy', outcome: 'error' }), 1);
  const p2 = promtool(m2);
  assert.equal(p2.status, 0, `promtool: ${p2.stdout}${p2.stderr}`);
  assert.equal(`${p2.stdout}${p2.stderr}`.trim(), '');
});
