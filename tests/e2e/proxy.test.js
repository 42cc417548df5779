// End to end for proxy mode (docs/architecture.md flow H) with a person in Chromium: the real login
// IdP, the downstream IdP as the provider ("GitHub"), a recording upstream API
// (tests/lib/recorder.js) that accepts only tokens the provider's introspection calls active,
// and the real binary. Resource `ghproxy` (token_release = never, base_url = the recorder) with
// list_issues (GET /repos/{owner}/{repo}/issues, approval none) and create_issue
// (POST /repos/{owner}/{repo}/issues, approval required).
//
// - alice signs in, consents and connects the provider in the browser; the gateway gets a grant;
// - the gateway's create_issue through /proxy/ghproxy/... without an approval -> 403
//   approval_required, then (polled at the interval) authorization_pending; nothing upstream;
// - in the browser the approval page shows the method and route, then exactly the request's
//   path values, query and body, as text (`<b>x</b>` in the body is text, not an element);
//   alice approves;
// - the gateway's identical retry goes upstream exactly once, with exactly those values and the
//   provider's token; the next identical call needs a new approval; alice denies that one in
//   the browser -> access_denied; nothing more upstream;
// - the provider token the upstream received is in nothing the gateway received (status lines,
//   headers, bodies of every answer it got) and in nothing the browser received.
//
// The gateway's calls use node:http (no browser); every step of the person uses Chromium.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import canonicalize from 'canonicalize';
import { startProxyStack } from '../lib/proxystack.js';
import { launchBrowser, idpSignIn, openConsent } from '../lib/browser.js';
import { pollExchange } from '../lib/gateway.js';
import { basicAuth } from '../lib/idplogin.js';

const shots = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'build', 'e2e');
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const words = (s) => (s || '').split(' ').filter(Boolean).sort();
const GW_AUTH = basicAuth('agent-gateway', 'gateway-dev-secret');

// The request under test: a path value that needs encoding, a repeated query parameter, markup
// in a query value and in the body, non-ASCII text, a body text of two lines, and a body sent
// with its members out of canonical order and with extra whitespace.
const OWNER = 'acme';
const REPO = 'widgets v2';
const TARGET = `/repos/${OWNER}/widgets%20v2/issues?label=bug&label=needs%20triage&note=%3Ci%3Ey%3C%2Fi%3E`;
const BODY = {
  title: 'Crash on start — ünïcødé ✓',
  body: 'Steps: <b>x</b> & "quoted" \\ done\nsecond line',
  labels: ['bug', 'p1'],
  milestone: 3,
  draft: false,
};
const BODY_TEXT = `{ "title": ${JSON.stringify(BODY.title)},\n  "body": ${JSON.stringify(BODY.body)}, "labels": ["bug", "p1"], "milestone": 3, "draft": false }`;
// What consentd makes of it (flow H): {"path": {capture: value}, "query": {name: [values]}, "body"}.
const PARAMS = {
  path: { owner: OWNER, repo: REPO },
  query: { label: ['bug', 'needs triage'], note: ['<i>y</i>'] },
  body: BODY,
};

let stack; let v; let b; let rec;
before(async () => {
  stack = await startProxyStack({
    config: () => ({
      'agent.coder': { allow: 'notes:read notes:write wiki:read github:issues:read github:issues:write '
        + 'ghproxy:issues:read ghproxy:issues:write' },
    }),
  });
  ({ v, rec } = stack);
  b = await launchBrowser();
  mkdirSync(shots, { recursive: true });
});
after(async () => {
  try { await b?.close(); } finally { await stack?.stop(); }
});

// --- the gateway's side (node:http) ------------------------------------------------------

// Everything the gateway received from consentd: one string per answer (status, every header,
// the body), so that the provider token can be looked for in all of it at the end.
const gatewayReceived = [];

// One proxied call with the target sent byte for byte -> { status, headers, rawHeaders, text, body }.
function proxy(target, { method = 'GET', json, bodyText } = {}) {
  const u = new URL(v.url);
  const headers = { authorization: GW_AUTH, 'consentd-grant': grant };
  let payload;
  if (json !== undefined || bodyText !== undefined) {
    payload = bodyText !== undefined ? bodyText : JSON.stringify(json);
    headers['content-type'] = 'application/json';
  }
  return new Promise((resolve, reject) => {
    const r = httpRequest({
      host: u.hostname, port: u.port, method, path: `/proxy/ghproxy${target}`, headers, agent: false,
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body = null;
        try { body = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
        gatewayReceived.push(`${res.statusCode} ${res.statusMessage}\n${res.rawHeaders.join('\n')}\n${text}`);
        resolve({ status: res.statusCode, headers: res.headers, rawHeaders: res.rawHeaders, text, body });
      });
      res.on('error', reject);
    });
    r.setTimeout(60000, () => r.destroy(new Error('no answer within 60 s')));
    r.on('error', reject);
    if (payload !== undefined) r.write(payload);
    r.end();
  });
}
const createIssue = () => proxy(TARGET, { method: 'POST', bodyText: BODY_TEXT });

// Keeps what the gateway got from /token (fetch-based tests/lib/gateway.js) as well.
function keep(r) {
  const hs = [];
  r.headers.forEach((val, name) => hs.push(`${name}: ${val}`));
  gatewayReceived.push(`${r.status}\n${hs.join('\n')}\n${r.text}`);
  return r;
}

function assertRefused(r, status, error, label) {
  assert.equal(r.status, status, `${label}: ${r.status} ${r.text.slice(0, 300)}`);
  assert.equal(r.body?.error, error, `${label}: ${r.text.slice(0, 300)}`);
  assert.equal(r.headers['cache-control'], 'no-store', `${label}: Cache-Control`);
  assert.match(r.headers['content-type'] || '', /^application\/json/, `${label}: Content-Type`);
}

function assertApprovalRequired(r, label) {
  assertRefused(r, 403, 'approval_required', label);
  assert.match(r.body.approval_request_id || '', /^[A-Za-z0-9_-]{16,}$/, `${label}: an approval id`);
  assert.equal(r.body.approval_uri, `${v.url}/approve/${r.body.approval_request_id}`, label);
  assert.ok(r.body.expires_in > 0, `${label}: expires_in ${r.body.expires_in}`);
  assert.ok(r.body.interval >= 1, `${label}: interval ${r.body.interval}`);
  return r.body;
}

const approvalStatus = (id) => v.sql(`SELECT status FROM approvals WHERE id = '${id}'`);
const forwardedAudits = (id) => Number(v.sql(
  `SELECT count(*) FROM audit WHERE action = 'proxy.forwarded' AND request_id = '${id}'`,
));

// --- the person's side (Chromium) --------------------------------------------------------

let page;
const browserUrls = [];
const browserBodies = [];

// The approval page as the person sees it, then the decision with its button.
async function decideInBrowser(approvalUri, decision, shot) {
  const resp = await page.goto(approvalUri);
  assert.equal(resp.status(), 200, `approval page: ${resp.status()}`);
  await page.waitForSelector('text=Coding assistant asks to act now');
  const seen = {
    html: await resp.text(),
    section: await page.textContent('section'),
    requestLine: await page.textContent('#request-line'),
    parameters: await page.textContent('#parameters'),
    elementsInParameters: await page.$$eval('#parameters *', (els) => els.map((e) => e.tagName)),
    // The readable list: each part's heading, then its rows as [label, text, first element].
    list: await page.$$eval('#parameter-list h2, #parameter-list dt', (els) => els.map((e) => (e.tagName === 'H2'
      ? `# ${e.textContent}` : [e.textContent, e.nextElementSibling.textContent, e.nextElementSibling.firstElementChild?.tagName ?? null]))),
    listText: await page.textContent('#parameter-list'),
    elementsInList: [...new Set(await page.$$eval('#parameter-list *', (els) => els.map((e) => e.tagName)))].sort(),
    // How the body's text is laid out: its lines as the person sees them.
    bodyText: await page.$$eval('#params-body + dl dt', (dts) => {
      const dd = dts.find((dt) => dt.textContent === 'body')?.nextElementSibling;
      return dd && { inner: dd.innerText, lines: Math.round(dd.getBoundingClientRect().height / parseFloat(getComputedStyle(dd).lineHeight)) };
    }),
    boldOrItalic: await page.$$eval('b, i', (els) => els.length),
  };
  if (shot) await page.screenshot({ path: join(shots, shot), fullPage: true });
  await Promise.all([page.waitForLoadState('load'), page.click(`button[value=${decision}]`)]);
  await page.waitForSelector(decision === 'approve' ? 'text=Action approved' : 'text=Action denied');
  return seen;
}

let grant; let cid;
let first;       // the first approval_required answer
let used;        // the upstream entry of the approved call
let providerToken;

test('browser: alice signs in, consents to ghproxy and connects the provider; the gateway gets a grant', async () => {
  page = await b.newPage();
  page.on('request', (r) => browserUrls.push(r.url()));
  page.on('response', async (r) => {
    if (r.status() >= 300 && r.status() < 400) return;
    try { browserBodies.push({ url: r.url(), text: await r.text() }); } catch { /* navigated away */ }
  });

  const ask = { subjectToken: await v.idToken('alice'), audience: 'ghproxy', scope: 'issues:read issues:write', agentId: 'coder' };
  const q = keep(await v.gw.exchange(ask));
  assert.equal(q.body?.error, 'consent_required', q.text);
  await openConsent(page, { v, uri: q.body.consent_uri });
  assert.match(await page.textContent('section'), /GitHub via proxy/);
  await Promise.all([page.waitForURL((u) => u.href.startsWith(v.ds.issuer)), page.click('button[value=approve]')]);
  const authz = browserUrls.find((u) => u.startsWith(v.dsMeta.authorization_endpoint));
  assert.ok(authz, 'the browser went to the provider\'s authorization endpoint');
  assert.equal(new URL(authz).searchParams.get('client_id'), 'consentd-ghproxy');
  assert.equal(new URL(authz).searchParams.get('redirect_uri'), `${v.url}/oauth/callback/ghproxy`);
  await idpSignIn(page, { user: 'alice', backTo: v.url });
  await page.waitForSelector('text=Permission given');

  const g = keep(await pollExchange(v.gw, ask));
  assert.equal(g.status, 200, g.text);
  assert.deepEqual(words(g.body.scope), ['issues:read', 'issues:write']);
  grant = g.body.access_token;
  ({ cid } = (await v.gw.verify(grant)).payload);
  assert.equal(v.sql(`SELECT count(*) FROM vault_records WHERE consent_id = '${cid}'`), '1', 'connected: one vault record');
});

test('without an approval: 403 approval_required, then authorization_pending; nothing reaches the upstream', async () => {
  assert.ok(grant, 'the previous test gave a grant');
  const n0 = rec.seen.length;
  first = assertApprovalRequired(await createIssue(), 'first call');
  assert.equal(approvalStatus(first.approval_request_id), 'pending');
  // The approval is for exactly this request's values, stored as their canonical JSON.
  assert.equal(v.sql(`SELECT parameters FROM approvals WHERE id = '${first.approval_request_id}'`), canonicalize(PARAMS));
  assert.equal(v.sql(`SELECT action || ' ' || resource || ' ' || consent_id FROM approvals WHERE id = '${first.approval_request_id}'`),
    `create_issue ghproxy ${cid}`);

  // The gateway polls no faster than the interval (pacing, not an assertion).
  await sleep(first.interval * 1000 + 200);
  const p = await createIssue();
  assertRefused(p, 403, 'authorization_pending', 'polled while the person has not decided');
  assert.equal(p.body.approval_request_id, first.approval_request_id, 'the same approval');
  assert.equal(rec.seen.length, n0, `nothing upstream: ${JSON.stringify(rec.since(n0).map((e) => e.url))}`);
  assert.equal(forwardedAudits(first.approval_request_id), 0);
});

test('browser: the approval page shows the method and route and exactly the path values, query and body, as text; alice approves', async () => {
  assert.ok(first, 'the previous test asked');
  const seen = await decideInBrowser(first.approval_uri, 'approve', 'proxy-approval.png');
  // Who, what, where.
  assert.match(seen.section, /Coding assistant/);
  assert.match(seen.section, /GitHub via proxy/);
  assert.match(seen.section, /Open an issue/);
  assert.match(seen.section, /create_issue/);
  // The HTTP method and the route, then exactly the request's values.
  assert.equal(seen.requestLine, 'POST /repos/{owner}/{repo}/issues');
  assert.deepEqual(JSON.parse(seen.parameters), PARAMS, `the page shows exactly the values:\n${seen.parameters}`);
  for (const s of ['widgets v2', 'needs triage', 'Crash on start — ünïcødé ✓']) {
    assert.ok(seen.parameters.includes(s), `shown verbatim: ${s}`);
  }
  // The readable list (issue 31): the address's values, the query (a repeated name once per
  // value) and the body's members under their own names; text as text, never JSON.
  assert.deepEqual(seen.list, [
    '# In the address', ['owner', 'acme', null], ['repo', 'widgets v2', null],
    '# In the query', ['label', 'bug', null], ['label', 'needs triage', null], ['note', '<i>y</i>', null],
    '# In the body', ['body', BODY.body, null], ['draft', 'false', 'CODE'], ['labels[0]', 'bug', null],
    ['labels[1]', 'p1', null], ['milestone', '3', 'CODE'], ['title', BODY.title, null],
  ], JSON.stringify(seen.list));
  assert.deepEqual(seen.bodyText, { inner: 'Steps: <b>x</b> & "quoted" \\ done\nsecond line', lines: 2 },
    'the body\'s two lines show as two lines');
  for (const json of ['{', '}', '\\n', '":', '["']) {
    assert.ok(!seen.listText.includes(json), `no JSON text (${json}) in the list: ${seen.listText}`);
  }
  assert.deepEqual(seen.elementsInList, ['CODE', 'DD', 'DL', 'DT', 'H2'], 'only the list\'s own elements');
  // Markup from the agent is text: no element inside the values, no <b> or <i> on the page,
  // and the page's HTML holds it escaped.
  assert.ok(seen.parameters.includes('<b>x</b>'), 'the body\'s <b>x</b> shown as text');
  assert.ok(seen.parameters.includes('<i>y</i>'), 'the query\'s <i>y</i> shown as text');
  assert.deepEqual(seen.elementsInParameters, [], 'no element inside the shown values');
  assert.equal(seen.boldOrItalic, 0, 'no <b> or <i> element on the page');
  assert.ok(seen.html.includes('&lt;b&gt;x&lt;/b&gt;'), 'the body escaped in the HTML');
  assert.ok(!seen.html.includes('<b>x</b>'), 'never raw <b>x</b> in the HTML');
  assert.ok(!seen.html.includes('<i>y</i>'), 'never raw <i>y</i> in the HTML');
  assert.equal(approvalStatus(first.approval_request_id), 'approved');
  // Opened again: closed.
  const again = await page.goto(first.approval_uri);
  assert.equal(again.status(), 410);
  assert.match(await page.textContent('body'), /already approved/);
});

test('the identical retry goes upstream exactly once, as approved, with the provider\'s token', async () => {
  assert.equal(approvalStatus(first?.approval_request_id), 'approved', 'the previous test approved');
  const n0 = rec.seen.length;
  const r = await createIssue();
  assert.equal(r.status, 201, `retry after approval: ${r.status} ${r.text.slice(0, 300)}`);
  assert.equal(r.body?.ok, true, r.text);
  assert.equal(r.body.sub, 'alice', 'the upstream acted as alice');
  assert.deepEqual(r.body.body, BODY);
  const ups = rec.since(n0);
  assert.equal(ups.length, 1, `exactly one upstream request: ${JSON.stringify(ups.map((e) => e.url))}`);
  [used] = ups;
  assert.equal(used.method, 'POST');
  assert.equal(used.path, '/repos/acme/widgets%20v2/issues', 'the route with each value percent-encoded');
  const q = new URLSearchParams(used.query || '');
  assert.deepEqual([...new Set(q.keys())].sort(), ['label', 'note'], used.url);
  assert.deepEqual(q.getAll('label'), ['bug', 'needs triage'], used.url);
  assert.deepEqual(q.getAll('note'), ['<i>y</i>'], used.url);
  assert.deepEqual(JSON.parse(used.body), BODY, 'the approved body');
  assert.equal(used.body, canonicalize(BODY), 'forwarded as the canonical form of the approved body');
  assert.match(used.headers['content-type'] || '', /^application\/json/);
  // The provider's token, active at the provider for consentd's ghproxy client, and nothing
  // of the gateway's.
  const m = /^Bearer ([\x21-\x7e]+)$/.exec(used.headers.authorization || '');
  assert.ok(m, `a bearer token upstream: ${used.headers.authorization}`);
  [, providerToken] = m;
  assert.notEqual(providerToken, grant);
  assert.equal(used.introspection?.active, true, 'the provider calls the token active');
  assert.equal(used.introspection.sub, 'alice');
  assert.equal(used.introspection.client_id, 'consentd-ghproxy');
  assert.equal(used.headers['consentd-grant'], undefined, 'no Consentd-Grant upstream');
  const allUp = used.rawHeaders.join('\n');
  assert.ok(!allUp.includes(GW_AUTH.slice('Basic '.length)), 'no gateway credentials upstream');
  assert.ok(!allUp.includes(grant), 'no grant upstream');
  assert.ok(!r.text.includes(providerToken) && !r.rawHeaders.join('\n').includes(providerToken),
    'the provider token is not in the answer');
  assert.equal(approvalStatus(first.approval_request_id), 'used');
  assert.equal(forwardedAudits(first.approval_request_id), 1, 'one forwarded call under this approval');
});

test('the next identical call needs a new approval; alice denies it in the browser -> access_denied; nothing more upstream', async () => {
  assert.ok(used, 'the previous test went upstream');
  const n0 = rec.seen.length;
  const second = assertApprovalRequired(await createIssue(), 'the same call after the approval was used');
  assert.notEqual(second.approval_request_id, first.approval_request_id, 'a new approval');
  assert.equal(approvalStatus(second.approval_request_id), 'pending');
  assert.equal(approvalStatus(first.approval_request_id), 'used');
  assert.equal(rec.seen.length, n0, 'nothing upstream without the new approval');

  const seen = await decideInBrowser(second.approval_uri, 'deny', 'proxy-approval-denied.png');
  assert.deepEqual(JSON.parse(seen.parameters), PARAMS);
  assert.equal(approvalStatus(second.approval_request_id), 'denied');
  assertRefused(await createIssue(), 403, 'access_denied', 'after the denial');
  assert.equal(rec.seen.length, n0, `nothing upstream: ${JSON.stringify(rec.since(n0).map((e) => e.url))}`);
  assert.equal(forwardedAudits(second.approval_request_id), 0);

  // list_issues (approval none) still passes through, with the same provider token.
  const l = await proxy('/repos/acme/widgets%20v2/issues?state=open');
  assert.equal(l.status, 200, l.text);
  assert.equal(rec.seen.length, n0 + 1);
  assert.equal(rec.seen[n0].method, 'GET');
  assert.equal(rec.seen[n0].url, '/repos/acme/widgets%20v2/issues?state=open');
  assert.equal(rec.seen[n0].headers.authorization, `Bearer ${providerToken}`);
});

test('the provider token is in nothing the gateway received and in nothing the browser received', async () => {
  assert.ok(providerToken, 'the previous tests saw the provider token upstream');
  // Every token the upstream ever received (there is one: the stored token, not refreshed).
  const tokens = [...new Set(rec.seen.map((e) => (/^Bearer (\S+)$/.exec(e.headers.authorization || '') || [])[1]).filter(Boolean))];
  assert.deepEqual(tokens, [providerToken]);
  assert.ok(gatewayReceived.length >= 8, `the gateway's answers were kept: ${gatewayReceived.length}`);
  for (const [i, got] of gatewayReceived.entries()) {
    assert.ok(!got.includes(providerToken), `the provider token in answer ${i} to the gateway:\n${got.slice(0, 300)}`);
  }
  const cookies = await b.context.cookies();
  const storage = await page.evaluate(() => JSON.stringify({ l: { ...localStorage }, s: { ...sessionStorage } }));
  const everything = [
    ...browserUrls.map((u) => ({ where: `url ${u}`, text: u })),
    ...browserBodies.map((x) => ({ where: `body of ${x.url}`, text: x.text })),
    ...cookies.map((c) => ({ where: `cookie ${c.name}`, text: `${c.name}=${c.value}` })),
    { where: 'storage', text: storage },
  ];
  assert.ok(browserBodies.some((x) => x.url === first.approval_uri), 'the approval page\'s body was kept');
  for (const { where, text } of everything) {
    assert.ok(!text.includes(providerToken), `the provider token in ${where}`);
    assert.ok(!text.includes(grant), `the grant in ${where}`);
  }
  await page.close();
});
