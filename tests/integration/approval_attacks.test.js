// The attacker's side of flow F (per-action approval) against the real IdPs and the real
// binary: actions outside the grant or the consent (escalation, audited), another
// resource's action, approvals of a revoked or replaced consent or of another agent's
// consent, redemption after request_ttl, authorization_details that disagree with the
// action, approval-required actions without details, another account at the approval link,
// CSRF and Origin, hostile parameter text, numbers shown as sent, the readable list of the
// values (paths, folding, bounds; never JSON text), non-I-JSON parameters
// (duplicate keys, unsafe integers, lone surrogates, non-finite numbers), polling too fast,
// flooding past the pending cap, and single use under concurrency.
//
// The main stack serves most tests; each test uses its own person (the pending cap counts
// per person), so that approvals never meet.  Tests needing request_ttl = 3 s and
// max_pending_per_user = 2 start a second stack.
//
//   main stack persons:  dave (escalation, other resource)  erin (details, I-JSON, polling)
//                        frank (hostile text, numbers)  kim (the readable list)
//                        grace + heidi (binding, CSRF)
//                        ivan (revocation)  judy (replacement)  bob (other agent)
//                        alice (concurrency)
//   short stack persons: alice (request_ttl)  bob (flood)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { startVaultStack, signedInJars } from '../lib/vaultstack.js';
import { DEFAULT_USERS } from '../lib/idp.js';
import { req, postForm } from '../lib/weblogin.js';
import { TOKEN_EXCHANGE, TT_ACCESS_TOKEN } from '../lib/gateway.js';
import { basicAuth } from '../lib/idplogin.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const words = (s) => (s || '').split(' ').filter(Boolean).sort();
const digestOf = (params) => createHash('sha256').update(canonicalize(params), 'utf8').digest('base64url');
const details = (params, action = 'create_issue') => JSON.stringify([{ type: 'agent_action', action, parameters: params }]);

const EXTRA = ['dave', 'erin', 'frank', 'grace', 'heidi', 'ivan', 'judy', 'kim'];
const USERS = { ...DEFAULT_USERS };
for (const u of EXTRA) {
  USERS[u] = { password: `${u}-password`, name: `${u[0].toUpperCase()}${u.slice(1)} Example`, email: `${u}@example.test`, groups: [] };
}

const CONFIG = {
  'action.github.create_issue': { description: 'Open an issue', scope: 'issues:write', approval: 'required',
    approval_enforced_by: 'gateway' },  // the gateway holds the released token to the call (#32)
  'action.gitlab.create_merge_request': { description: 'Open a merge request', scope: 'issues:write', approval: 'required',
    approval_enforced_by: 'gateway' },  // the gateway holds the released token to the call (#32)
};

let v;        // the main stack
before(async () => {
  v = await startVaultStack({ accessTokenTTL: 60, config: CONFIG, users: USERS });
});
after(async () => { await v?.stop(); });

// --- helpers -------------------------------------------------------------------

// One cookie jar per (stack, person), signed in to consentd.
const signedIn = signedInJars();
const jarOf = (s, user) => signedIn(s.url, user);

// A consent decided on consentd's own page (no provider to visit): 200, "Permission given".
function decidedHere(a) {
  assert.equal(a.status, 200, `consent decision: ${a.status} ${a.text.slice(0, 300)}`);
  assert.match(a.text, /Permission given/);
}

// The person connects (user, agent, github) for scope through consentd and the provider;
// the gateway then gets a grant for grantScope (default: scope).
async function connect(s, { user, agent = 'coder', audience = 'github', scope, grantScope = scope }) {
  const jar = await jarOf(s, user);
  const subjectToken = await s.idToken(user);
  const g = await s.consentAndGrant({ jar, user, ask: { subjectToken, audience, scope, agentId: agent },
    grantAsk: { subjectToken, audience, scope: grantScope, agentId: agent }, approved: decidedHere });
  const { payload } = await s.gw.verify(g.body.access_token);
  return { grant: g.body.access_token, cid: payload.cid, scope: g.body.scope, jar };
}

// The gateway's downstream-token call for an action; details: an object (-> one agent_action
// entry), a raw string (sent as is) or undefined (left out).
function ask(s, grant, { action = 'create_issue', params, raw, extra = {} } = {}) {
  let ad;
  if (raw !== undefined) ad = raw;
  else if (params !== undefined) ad = details(params, action);
  return s.release(grant, action, { authorization_details: ad, ...extra });
}

// The same call with authorization_details given already percent-encoded (raw bytes).
async function rawRelease(s, grant, action, adEncoded) {
  const body = `${new URLSearchParams({
    grant_type: TOKEN_EXCHANGE, subject_token: grant, subject_token_type: TT_ACCESS_TOKEN,
    requested_token_type: TT_ACCESS_TOKEN, action,
  }).toString()}&authorization_details=${adEncoded}`;
  const res = await fetch(`${s.url}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basicAuth('agent-gateway', 'gateway-dev-secret') },
    body,
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body: json, text, headers: res.headers };
}

function assertApprovalRequired(s, r, label) {
  assert.equal(r.status, 400, `${label}: ${r.status} ${r.text}`);
  assert.equal(r.body?.error, 'approval_required', `${label}: ${r.text}`);
  assert.equal(r.body.access_token, undefined);
  assert.equal(r.body.approval_uri, `${s.url}/approve/${r.body.approval_request_id}`);
  return r.body;
}

function assertRefused(r, error, label, status = 400) {
  assert.equal(r.status, status, `${label}: ${r.status} ${r.text}`);
  assert.equal(r.body?.error, error, `${label}: ${r.text}`);
  assert.equal(r.body.access_token, undefined, `${label}: no token`);
  assert.equal(r.headers.get('cache-control'), 'no-store', `${label}: no-store`);
}

// GET an approval (or any consentd) page as user: { status, html, form, headers }.
async function openPage(s, user, url) {
  const jar = await jarOf(s, user);
  const res = await req(jar, url);
  const html = await res.text();
  return { status: res.status, html, form: postForm(html), headers: res.headers };
}

// POST a decision; headers merged over content-type and Origin = the stack; null drops one.
async function postDecision(s, user, url, fields, headers = {}) {
  const jar = await jarOf(s, user);
  const h = { 'content-type': 'application/x-www-form-urlencoded', origin: s.url, ...headers };
  for (const k of Object.keys(h)) if (h[k] === null) delete h[k];
  const res = await req(jar, url, { method: 'POST', headers: h, body: new URLSearchParams(fields).toString() });
  return { status: res.status, html: await res.text(), headers: res.headers };
}

// The person opens the approval link and decides.
async function decide(s, user, uri, decision = 'approve') {
  const page = await openPage(s, user, uri);
  assert.equal(page.status, 200, `approval page: ${page.html.slice(0, 300)}`);
  assert.ok(page.form?.fields.csrf, 'a CSRF token on the approval page');
  const done = await postDecision(s, user, uri, { csrf: page.form.fields.csrf, decision });
  assert.equal(done.status, 200, `decision: ${done.html.slice(0, 300)}`);
  assert.match(done.html, decision === 'approve' ? /Action approved/ : /Action denied/);
  return page;
}

const status = (s, id) => s.sql(`SELECT status FROM approvals WHERE id = '${id}'`);
const approvalRows = (s, where = '1 = 1') => Number(s.sql(`SELECT count(*) FROM approvals WHERE ${where}`));
const auditCount = (s, where) => Number(s.sql(`SELECT count(*) FROM audit WHERE ${where}`));
// The text of the page's parameters block (entities decoded).
function parametersBlock(html) {
  const m = /<pre[^>]*id="parameters"[^>]*>([\s\S]*?)<\/pre>/.exec(html);
  assert.ok(m, 'a parameters block');
  return m[1];
}
// A JSON number's exact decimal value as "sign digits e exponent" (no leading or trailing zeros).
function decimalKey(text) {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text);
  assert.ok(m, `a JSON number: ${text}`);
  let digits = m[2] + (m[3] || '');
  let exp = Number(m[4] || 0) - (m[3] || '').length;
  digits = digits.replace(/^0+/, '');
  if (!digits) return '0';
  while (digits.endsWith('0')) { digits = digits.slice(0, -1); exp += 1; }
  return `${m[1]}${digits}e${exp}`;
}
const unescapeHtml = (t) => t.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&#x27;/g, "'")
  .replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&#61;/g, '=').replace(/&amp;/g, '&');

// --- scope and target ------------------------------------------------------------

test('an action outside the consent or the grant is invalid_scope, audited as an escalation attempt', async () => {
  // (a) the consent granted only issues:read.
  const k = await connect(v, { user: 'dave', scope: 'issues:read' });
  assert.equal(k.scope, 'issues:read');
  const before = approvalRows(v);
  const r = await ask(v, k.grant, { params: { repo: 'acme/widgets', title: 'x' } });
  assertRefused(r, 'invalid_scope', 'create_issue on an issues:read consent');
  const rows = v.sql(`SELECT detail FROM audit WHERE action = 'vault.release.refused' AND consent_id = '${k.cid}'`);
  assert.match(rows, /escalation/, `an audit row names the escalation: ${rows}`);
  assert.match(rows, /create_issue/);
  assert.equal(approvalRows(v), before, 'no approval was created');
  // Without details it is refused the same way: the scope comes first.
  assertRefused(await ask(v, k.grant, {}), 'invalid_scope', 'create_issue without details');

  // (b) the consent has issues:write, but the grant only issues:read.
  const k2 = await connect(v, { user: 'dave', agent: 'butler', scope: 'issues:read issues:write', grantScope: 'issues:read' });
  assert.equal(k2.scope, 'issues:read', 'a grant narrower than its consent');
  const r2 = await ask(v, k2.grant, { params: { repo: 'acme/widgets', title: 'x' } });
  assertRefused(r2, 'invalid_scope', 'create_issue with an issues:read grant');
  assert.match(v.sql(`SELECT detail FROM audit WHERE action = 'vault.release.refused' AND consent_id = '${k2.cid}'`), /escalation/);
  assert.equal(approvalRows(v), before, 'no approval was created');
});

test('a grant for github cannot ask for a gitlab action: invalid_request (unknown action), nothing created', async () => {
  // dave/butler/github holds issues:read issues:write (previous test): a full grant at once.
  const g = await v.gw.exchange({ subjectToken: await v.idToken('dave'), audience: 'github', scope: 'issues:read issues:write', agentId: 'butler' });
  assert.equal(g.status, 200, g.text);
  const k = { grant: g.body.access_token };
  const before = approvalRows(v);
  const p = { project: 'acme/widgets', title: 'MR' };
  const r = await ask(v, k.grant, { action: 'create_merge_request', params: p });
  assertRefused(r, 'invalid_request', 'a gitlab action with a github grant');
  assert.match(r.body.error_description || '', /unknown action/i);
  assertRefused(await ask(v, k.grant, { action: 'create_merge_request' }), 'invalid_request', 'the same without details');
  // Naming gitlab as the audience does not help either.
  const t = await ask(v, k.grant, { action: 'create_merge_request', params: p, extra: { audience: 'gitlab' } });
  assert.equal(t.status, 400);
  assert.equal(t.body.access_token, undefined);
  assert.ok(['invalid_target', 'invalid_request'].includes(t.body.error), t.text);
  assert.equal(approvalRows(v), before, 'no approval was created');
});

// --- authorization_details -----------------------------------------------------------

let erin;
test('authorization_details naming another action, another type, several entries: invalid_authorization_details', async () => {
  erin = await connect(v, { user: 'erin', scope: 'issues:read issues:write' });
  const before = approvalRows(v);
  const p = { repo: 'acme/widgets', title: 'x' };
  const cases = [
    ['details name close_issue, action is create_issue', { action: 'create_issue', raw: details(p, 'close_issue') }],
    ['details name create_issue, action is list_issues (approval none)', { action: 'list_issues', raw: details(p, 'create_issue') }],
    ['details name create_issue, action is close_issue (approval none)', { action: 'close_issue', raw: details(p, 'create_issue') }],
    ['action differing in case', { action: 'create_issue', raw: details(p, 'Create_Issue') }],
    ['action with a trailing NUL escape', { action: 'create_issue', raw: '[{"type":"agent_action","action":"create_issue\\u0000","parameters":{}}]' }],
    ['two entries', { raw: JSON.stringify([{ type: 'agent_action', action: 'create_issue', parameters: p }, { type: 'agent_action', action: 'create_issue', parameters: {} }]) }],
    ['no entry', { raw: '[]' }],
    ['an object, not an array', { raw: JSON.stringify({ type: 'agent_action', action: 'create_issue', parameters: p }) }],
    ['another type', { raw: JSON.stringify([{ type: 'payment_initiation', action: 'create_issue', parameters: p }]) }],
    ['no action member', { raw: JSON.stringify([{ type: 'agent_action', parameters: p }]) }],
    ['an unknown member that the person would never see', { raw: JSON.stringify([{ type: 'agent_action', action: 'create_issue', parameters: p, amount: 1000 }]) }],
    ['not JSON', { raw: '[{"type":"agent_action",' }],
    ['trailing garbage', { raw: `${details(p)} x` }],
  ];
  for (const [label, args] of cases) {
    const r = await ask(v, erin.grant, args);
    assertRefused(r, 'invalid_authorization_details', label);
  }
  assert.equal(approvalRows(v), before, 'no approval was created');
});

test('an approval-required action without authorization_details: invalid_request, no approval row', async () => {
  assert.ok(erin, 'the previous test connected erin');
  const before = approvalRows(v);
  const beforeErin = approvalRows(v, `consent_id = '${erin.cid}'`);
  const r = await ask(v, erin.grant, {});
  assertRefused(r, 'invalid_request', 'create_issue without details');
  assert.match(r.body.error_description || '', /approv/i);
  assert.equal(approvalRows(v), before, 'no approval row anywhere');
  assert.equal(approvalRows(v, `consent_id = '${erin.cid}'`), beforeErin);
  assert.equal(auditCount(v, `action = 'vault.released' AND consent_id = '${erin.cid}'`), 0, 'nothing released');
});

test('non-I-JSON parameters are refused: duplicate keys, unsafe integers, lone surrogates, non-finite numbers', async () => {
  assert.ok(erin, 'erin is connected');
  const before = approvalRows(v);
  const wrap = (paramsText) => `[{"type":"agent_action","action":"create_issue","parameters":${paramsText}}]`;
  const cases = [
    ['duplicate keys', wrap('{"a":1,"a":2}')],
    ['duplicate keys, same value', wrap('{"a":1,"a":1}')],
    ['duplicate keys, nested', wrap('{"x":{"b":[{"c":1,"c":2}]}}')],
    ['duplicate keys in the entry', '[{"type":"agent_action","action":"create_issue","parameters":{},"parameters":{"a":1}}]'],
    ['2^53', wrap('{"n":9007199254740992}')],
    ['-2^53', wrap('{"n":-9007199254740992}')],
    ['a huge integer', wrap('{"n":123456789012345678901234567890}')],
    ['2^53 nested in an array', wrap('{"a":[1,2,9007199254740993]}')],
    ['lone high surrogate', wrap('{"t":"\\ud800"}')],
    ['lone low surrogate', wrap('{"t":"x\\udc00y"}')],
    ['lone surrogate in a member name', wrap('{"\\ud800":1}')],
    ['reversed surrogate pair', wrap('{"t":"\\ude00\\ud83d"}')],
    ['overflowing real', wrap('{"n":1e400}')],
    ['NaN', wrap('{"n":NaN}')],
    ['Infinity', wrap('{"n":Infinity}')],
  ];
  for (const [label, raw] of cases) {
    const r = await ask(v, erin.grant, { raw });
    assertRefused(r, 'invalid_authorization_details', label);
  }
  // Raw bytes that are not UTF-8 (a lone surrogate encoded as UTF-8 bytes ED A0 80).
  const rb = await rawRelease(v, erin.grant, 'create_issue', `${encodeURIComponent(wrap('{"t":"'))}%ED%A0%80${encodeURIComponent('"}')}`);
  assert.equal(rb.status, 400, rb.text);
  assert.equal(rb.body?.access_token, undefined);
  assert.equal(approvalRows(v), before, 'no approval was created');

  // The boundary itself is fine: ±(2^53-1) and a proper surrogate pair make an approval.
  const ok = await ask(v, erin.grant, { raw: wrap('{"n":9007199254740991,"m":-9007199254740991,"e":"\\ud83d\\ude00"}') });
  const a = assertApprovalRequired(v, ok, '±(2^53-1)');
  assert.equal(v.sql(`SELECT digest FROM approvals WHERE id = '${a.approval_request_id}'`),
    digestOf({ n: 9007199254740991, m: -9007199254740991, e: '\u{1F600}' }));
});

test('polling faster than the interval answers slow_down with interval + 5', async () => {
  assert.ok(erin, 'erin is connected');
  const p = { repo: 'acme/widgets', title: 'polled too fast' };
  // The server counts in whole seconds (interval 1): start just past a boundary, so that
  // the two calls land in the same second unless the pair takes most of one.
  const ms = Date.now() % 1000;
  if (ms > 50) await sleep(1000 - ms + 20);
  const first = assertApprovalRequired(v, await ask(v, erin.grant, { params: p }), 'first');
  const fast = await ask(v, erin.grant, { params: p });
  assertRefused(fast, 'slow_down', 'the same call at once');
  assert.equal(fast.body.approval_request_id, first.approval_request_id);
  assert.equal(fast.body.interval, first.interval + 5);
  // Member order and whitespace do not matter: the same canonical parameters, the same approval.
  const reordered = `[{"parameters": {"title": "polled too fast", "repo": "acme/widgets"}, "action": "create_issue", "type": "agent_action"}]`;
  const same = await ask(v, erin.grant, { raw: reordered });
  assert.equal(same.body?.approval_request_id, first.approval_request_id, `reordered details match: ${same.text}`);
  assert.ok(['slow_down', 'authorization_pending'].includes(same.body.error), same.text);
  assert.equal(approvalRows(v, `consent_id = '${erin.cid}' AND status = 'pending'`), 2, 'no new approval');
});

// --- the page ------------------------------------------------------------------------

test('hostile parameter text renders as harmless text: <script> escaped, bidi and zero-width characters made visible', async () => {
  const frank = await connect(v, { user: 'frank', scope: 'issues:read issues:write' });
  const p = {
    title: '<script>alert(1)</script>',
    body: 'Approve \u202Egnp.exe\u202C now',
    hidden: 'a\u200Bb\u2066c\u2069d\uFEFF',
    breakout: '</pre><img src=x onerror=alert(2)>"\'&',
    '<b>key</b>': 1,
  };
  const a = assertApprovalRequired(v, await ask(v, frank.grant, { params: p }), 'hostile text');
  const page = await openPage(v, 'frank', a.approval_uri);
  assert.equal(page.status, 200, page.html.slice(0, 300));
  assert.ok(page.html.includes('&lt;script&gt;alert(1)&lt;/script&gt;'), 'the script tag is escaped text');
  assert.ok(!page.html.includes('<script>alert(1)'), 'no script tag');
  assert.ok(!/<img/i.test(page.html), 'no img tag');
  assert.ok(page.html.includes('&lt;/pre&gt;'), 'no way out of the parameters block');
  assert.ok(page.html.includes('&lt;b&gt;key&lt;/b&gt;'), 'member names are escaped too');
  assert.ok(page.html.includes('[U+202E]'), 'the right-to-left override is made visible');
  assert.ok(page.html.includes('[U+202C]'));
  assert.ok(page.html.includes('[U+200B]') && page.html.includes('[U+2066]') && page.html.includes('[U+2069]') && page.html.includes('[U+FEFF]'),
    'zero-width and isolate characters are made visible');
  for (const ch of ['\u202E', '\u202C', '\u200B', '\u2066', '\u2069', '\uFEFF']) {
    assert.ok(!page.html.includes(ch), `no raw U+${ch.codePointAt(0).toString(16).toUpperCase()} on the page`);
  }
  assert.match(page.headers.get('content-security-policy') || '', /script-src|default-src/, 'a CSP');
  assert.match(page.headers.get('content-security-policy') || '', /frame-ancestors 'none'/);
  // The digest is still of the exact parameters, not of the visible rendering.
  assert.equal(v.sql(`SELECT digest FROM approvals WHERE id = '${a.approval_request_id}'`), digestOf(p));
  assert.ok(page.html.includes(digestOf(p)));
});

test('the page shows numbers as the agent sent them (no binary-float artefacts)', async () => {
  const frank = await connect(v, { user: 'frank', agent: 'butler', scope: 'issues:read issues:write' });
  const p = { amount: 0.1, ratio: 1.5e-7, big: 1e21, third: 0.3333333333333333, n: 42 };
  const a = assertApprovalRequired(v, await ask(v, frank.grant, { params: p }), 'numbers');
  assert.equal(v.sql(`SELECT parameters FROM approvals WHERE id = '${a.approval_request_id}'`), canonicalize(p),
    'stored canonically (RFC 8785 numbers)');
  const page = await openPage(v, 'frank', a.approval_uri);
  assert.equal(page.status, 200);
  const shown = unescapeHtml(parametersBlock(page.html));
  assert.deepEqual(JSON.parse(shown), p);
  const numbers = {};
  for (const m of shown.matchAll(/"(\w+)":\s*(-?[0-9][0-9.eE+-]*)/g)) numbers[m[1]] = m[2];
  // Equal as exact decimals: 1e21 and 1e+21 are the same number; 0.10000000000000001 is not 0.1
  // (even though both round to the same binary double).
  for (const [k, val] of Object.entries(p)) {
    const sent = JSON.stringify(val);
    assert.ok(numbers[k] !== undefined, `"${k}" is shown`);
    assert.equal(decimalKey(numbers[k]), decimalKey(sent),
      `"${k}" is shown as ${numbers[k]}, but the agent sent ${sent} (RFC 8785: ${canonicalize(val)}):\n${shown}`);
  }
});

// The readable list on the page: from id="parameter-list" up to the exact-parameters disclosure.
function listBlock(html) {
  const from = html.indexOf('id="parameter-list"');
  const to = html.indexOf('id="exact-parameters"');
  assert.ok(from > 0 && to > from, 'a readable list before the exact parameters');
  return html.slice(from, to);
}

test('the readable list: nested values as paths, names that could pass for paths or markers quoted, a long text folded, a flood of values bounded; no JSON text', async () => {
  const kim = await connect(v, { user: 'kim', scope: 'issues:read issues:write' });
  // 6,000 elements: 12 KiB of authorization_details, near its 16 KiB bound.
  const p = {
    a_note: `${'x'.repeat(400)}\u202E`,
    b_meta: { 'a.b': 'dot', '\u200B': 'zero width', '[U+200B]': 'typed', body: { text: 'one\ntwo' } },
    items: Array.from({ length: 6000 }, (_, i) => i % 10),
  };
  const a = assertApprovalRequired(v, await ask(v, kim.grant, { params: p }), 'the list');
  const page = await openPage(v, 'kim', a.approval_uri);
  assert.equal(page.status, 200, page.html.slice(0, 300));
  assert.ok(page.html.length < 256 * 1024, `the page is bounded: ${page.html.length} bytes`);
  const list = listBlock(page.html);
  const rows = [...list.matchAll(/<dt>([^<]*)<\/dt><dd>([\s\S]*?)<\/dd>/g)].map((m) => [unescapeHtml(m[1]), m[2]]);
  assert.equal(rows.length, 200, 'at most 200 rows listed');
  // The long text: 280 characters shown, the other 121 (the last one made visible) folded.
  assert.equal(rows[0][0], 'a_note');
  assert.equal(rows[0][1], `${'x'.repeat(280)}<details class="fold"><summary>Show the rest (121 more characters)</summary>${'x'.repeat(120)}[U+202E]</details>`);
  // Nested names: a dot or a bracket in a name is quoted, typed "[U+200B]" is not a marker.
  assert.deepEqual(rows.slice(1, 5), [
    ['b_meta["\\[U+200B]"]', 'typed'],
    ['b_meta["a.b"]', 'dot'],
    ['b_meta.body.text', 'one\ntwo'],
    ['b_meta["[U+200B]"]', 'zero width'],
  ]);
  assert.deepEqual(rows[5], ['items[0]', '<code>0</code>']);
  assert.deepEqual(rows[199], ['items[194]', '<code>4</code>']);
  assert.ok(list.includes('id="more-values"'), 'the rest is counted');
  assert.match(list, /And 5805 more values, not listed here/);
  // No JSON text in the list; the exact text is still all there, behind its disclosure.
  for (const json of ['{', '}', '\\n', '&quot;:', '[0,', '\u202E', '\u200B']) {
    assert.ok(!list.includes(json), `no ${JSON.stringify(json)} in the list`);
  }
  assert.deepEqual(JSON.parse(unescapeHtml(parametersBlock(page.html)).replace('[U+202E]', '\u202E').replace('[U+200B]":"zero', '\u200B":"zero')), p);
  assert.equal(v.sql(`SELECT digest FROM approvals WHERE id = '${a.approval_request_id}'`), digestOf(p));
  assert.ok(page.html.includes(digestOf(p)));
});

// --- session binding, CSRF, Origin ----------------------------------------------------------

let graceApproval;
test('another account at the approval link: 403 and consent.binding_refused; its POST is refused too', async () => {
  const grace = await connect(v, { user: 'grace', scope: 'issues:read issues:write' });
  graceApproval = assertApprovalRequired(v, await ask(v, grace.grant, { params: { repo: 'acme/widgets', title: 'grace' } }), 'grace');
  const id = graceApproval.approval_request_id;

  const other = await openPage(v, 'heidi', graceApproval.approval_uri);
  assert.equal(other.status, 403, other.html.slice(0, 300));
  assert.match(other.html, /another account/);
  assert.ok(!other.html.includes('acme/widgets'), 'the other account sees no parameter');
  assert.ok(!other.html.includes(digestOf({ repo: 'acme/widgets', title: 'grace' })), 'nor the digest');
  assert.ok(unescapeHtml(other.html).includes(`/login?prompt=login&return_to=%2Fapprove%2F${id}`),
    `offers signing in as another account: ${other.html.slice(0, 1500)}`);
  const audit = v.sql(`SELECT actor || '|' || outcome FROM audit WHERE action = 'consent.binding_refused' AND request_id = '${id}'`);
  assert.ok(audit.split('\n').includes('user:heidi|refused'), `audited: ${audit}`);

  // heidi's own, valid CSRF token (from a consent page of hers) does not decide grace's approval.
  const hq = await v.gw.exchange({ subjectToken: await v.idToken('heidi'), audience: 'github', scope: 'issues:read', agentId: 'coder' });
  assert.equal(hq.body?.error, 'consent_required', hq.text);
  const hp = await openPage(v, 'heidi', hq.body.consent_uri);
  assert.equal(hp.status, 200);
  const heidiCsrf = hp.form.fields.csrf;
  assert.ok(heidiCsrf);
  const post = await postDecision(v, 'heidi', graceApproval.approval_uri, { csrf: heidiCsrf, decision: 'approve' });
  assert.equal(post.status, 403, post.html.slice(0, 300));
  assert.equal(status(v, id), 'pending', 'still pending');
  assert.ok(auditCount(v, `action = 'consent.binding_refused' AND request_id = '${id}'`) >= 2, 'the POST is audited too');
  // grace herself still sees it.
  assert.equal((await openPage(v, 'grace', graceApproval.approval_uri)).status, 200);
});

test('CSRF and Origin on POST /approve/{id}: forged, missing and cross-origin posts change nothing', async () => {
  assert.ok(graceApproval, 'the previous test asked');
  const uri = graceApproval.approval_uri;
  const id = graceApproval.approval_request_id;
  const page = await openPage(v, 'grace', uri);
  const csrf = page.form.fields.csrf;
  const forged = `${csrf.slice(0, -4)}${csrf.slice(-4) === 'AAAA' ? 'BBBB' : 'AAAA'}`;

  const r1 = await postDecision(v, 'grace', uri, { csrf: forged, decision: 'approve' });
  assert.equal(r1.status, 403, `a wrong CSRF token: ${r1.html.slice(0, 200)}`);
  const r2 = await postDecision(v, 'grace', uri, { decision: 'approve' });
  assert.equal(r2.status, 400, `no CSRF token: ${r2.html.slice(0, 200)}`);
  const r3 = await postDecision(v, 'grace', uri, { csrf, decision: 'approve' }, { origin: 'http://evil.example' });
  assert.equal(r3.status, 403, 'a cross-origin POST');
  const r4 = await postDecision(v, 'grace', uri, { csrf, decision: 'approve' }, { origin: 'null', 'sec-fetch-site': 'cross-site' });
  assert.equal(r4.status, 403, 'Origin null from another site');
  const r5 = await postDecision(v, 'grace', uri, { csrf, decision: 'approve' }, { origin: null });
  assert.equal(r5.status, 403, 'no Origin and no Sec-Fetch-Site');
  const r6 = await postDecision(v, 'grace', uri, { csrf, decision: 'approve' }, { origin: v.url.replace('127.0.0.1', 'localhost') });
  assert.equal(r6.status, 403, 'another origin of the same host');
  const r7 = await postDecision(v, 'grace', uri, { csrf, decision: 'approve', extra: '1' });
  assert.equal(r7.status, 400, 'an unknown form field');
  const r8 = await postDecision(v, 'grace', uri, { csrf, decision: 'yes' });
  assert.equal(r8.status, 400, 'a decision that is neither approve nor deny');
  // No cookie at all (a cross-site request without credentials).
  const r9 = await fetch(uri, {
    method: 'POST', redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: v.url },
    body: new URLSearchParams({ csrf, decision: 'approve' }).toString(),
  });
  assert.ok(r9.status === 401 || r9.status === 403, `no session: ${r9.status}`);
  // A GET never decides.
  const g = await req(await jarOf(v, 'grace'), `${uri}?csrf=${encodeURIComponent(csrf)}&decision=approve`);
  await g.arrayBuffer();
  assert.notEqual(g.status, 303);
  assert.equal(status(v, id), 'pending', 'nothing was decided');
  assert.equal(auditCount(v, `action IN ('approval.approved', 'approval.denied') AND request_id = '${id}'`), 0);

  // The real form, same-origin (Origin null + Sec-Fetch-Site: same-origin as Chromium sends it), decides.
  const ok = await postDecision(v, 'grace', uri, { csrf, decision: 'deny' }, { origin: 'null', 'sec-fetch-site': 'same-origin' });
  assert.equal(ok.status, 200, ok.html.slice(0, 300));
  assert.equal(status(v, id), 'denied');
  const closed = await openPage(v, 'grace', uri);
  assert.equal(closed.status, 410);
  assert.match(closed.html, /closed/);
  assert.match(closed.html, /already denied/);
});

// --- the approval's consent ----------------------------------------------------------------

test('revoking the consent cancels its pending and approved-unused approvals; a new consent cannot use them', async () => {
  const k1 = await connect(v, { user: 'ivan', scope: 'issues:read issues:write' });
  const p1 = { repo: 'acme/widgets', title: 'approved before the revocation' };
  const p2 = { repo: 'acme/widgets', title: 'pending at the revocation' };
  const a1 = assertApprovalRequired(v, await ask(v, k1.grant, { params: p1 }), 'a1');
  const a2 = assertApprovalRequired(v, await ask(v, k1.grant, { params: p2 }), 'a2');
  await decide(v, 'ivan', a1.approval_uri, 'approve');
  assert.equal(status(v, a1.approval_request_id), 'approved');

  const rv = await v.revokeHttp({ jar: await jarOf(v, 'ivan'), cid: k1.cid });
  assert.ok(rv.status === 303 || rv.status === 200, `revoke: ${rv.status}`);
  assert.equal(status(v, a1.approval_request_id), 'cancelled', 'the approved, unused approval is cancelled');
  assert.equal(status(v, a2.approval_request_id), 'cancelled', 'the pending approval is cancelled');
  const old = await ask(v, k1.grant, { params: p1 });
  assert.equal(old.status, 400, old.text);
  assert.equal(old.body.access_token, undefined, 'the revoked consent\'s grant gets nothing');

  // Both approval pages say closed; the pending one can no longer be decided.
  for (const a of [a1, a2]) {
    const pg = await openPage(v, 'ivan', a.approval_uri);
    assert.equal(pg.status, 410, `${a.approval_request_id}: ${pg.html.slice(0, 300)}`);
    assert.match(pg.html, /closed/);
    assert.doesNotMatch(pg.html, /<form method="post" action="\/approve/);
  }
  const me = await openPage(v, 'ivan', `${v.url}/me`);
  assert.ok(!me.html.includes(`/approve/${a2.approval_request_id}`), '/me no longer lists the cancelled approval');

  // A new consent and grant: the old approval does not release, for the same parameters.
  const k2 = await connect(v, { user: 'ivan', scope: 'issues:read issues:write' });
  assert.notEqual(k2.cid, k1.cid);
  const again = await ask(v, k2.grant, { params: p1 });
  const a3 = assertApprovalRequired(v, again, 'the same parameters under the new consent');
  assert.notEqual(a3.approval_request_id, a1.approval_request_id);
  assert.equal(status(v, a1.approval_request_id), 'cancelled');
  assert.equal(auditCount(v, `action = 'approval.released' AND request_id = '${a1.approval_request_id}'`), 0);
});

test('replacing the consent (a new selection) cancels its approved-unused approvals', async () => {
  const k1 = await connect(v, { user: 'judy', scope: 'issues:read issues:write' });
  const p = { repo: 'acme/widgets', title: 'approved before the replacement' };
  const a1 = assertApprovalRequired(v, await ask(v, k1.grant, { params: p }), 'a1');
  await decide(v, 'judy', a1.approval_uri, 'approve');
  // The agent asks for one more scope: the person's new selection replaces the consent.
  const k2 = await connect(v, { user: 'judy', scope: 'metadata', grantScope: 'issues:read issues:write metadata' });
  assert.notEqual(k2.cid, k1.cid, 'a new consent');
  assert.deepEqual(words(k2.scope), ['issues:read', 'issues:write', 'metadata']);
  assert.equal(status(v, a1.approval_request_id), 'cancelled', 'the old consent\'s approval is cancelled');
  const r = await ask(v, k2.grant, { params: p });
  const a2 = assertApprovalRequired(v, r, 'the same parameters under the new consent');
  assert.notEqual(a2.approval_request_id, a1.approval_request_id);
  const old = await ask(v, k1.grant, { params: p });
  assert.equal(old.body?.access_token, undefined, 'the replaced consent\'s grant gets nothing');
  const pg = await openPage(v, 'judy', a1.approval_uri);
  assert.equal(pg.status, 410);
  assert.match(pg.html, /closed/);
});

test('an approval belongs to its consent: another agent\'s grant for the same person cannot redeem it', async () => {
  const coder = await connect(v, { user: 'bob', agent: 'coder', scope: 'issues:read issues:write' });
  const butler = await connect(v, { user: 'bob', agent: 'butler', scope: 'issues:read issues:write' });
  const p = { repo: 'acme/widgets', title: 'for the coder only' };
  const a = assertApprovalRequired(v, await ask(v, coder.grant, { params: p }), 'coder');
  await decide(v, 'bob', a.approval_uri, 'approve');
  const b = await ask(v, butler.grant, { params: p });
  const ab = assertApprovalRequired(v, b, 'the butler with the same parameters');
  assert.notEqual(ab.approval_request_id, a.approval_request_id);
  assert.equal(status(v, a.approval_request_id), 'approved', 'the coder\'s approval is untouched');
  const c = await ask(v, coder.grant, { params: p });
  assert.equal(c.status, 200, c.text);
  assert.equal(c.body.authorization_details?.[0]?.params_digest, digestOf(p));
});

// --- single use ---------------------------------------------------------------------------

let race;
test('single use under concurrency: 10 identical calls at once after the approval, exactly one gets the token', async (t) => {
  const k = await connect(v, { user: 'alice', scope: 'issues:read issues:write' });
  const p = { repo: 'acme/widgets', title: 'race', n: 1 };
  const a = assertApprovalRequired(v, await ask(v, k.grant, { params: p }), 'race');
  await decide(v, 'alice', a.approval_uri, 'approve');
  const releasedBefore = auditCount(v, `action = 'vault.released' AND consent_id = '${k.cid}'`);
  const rs = await Promise.all(Array.from({ length: 10 }, () => ask(v, k.grant, { params: p })));
  const ok = rs.filter((r) => r.status === 200);
  const summary = rs.map((r) => `${r.status} ${r.body?.error ?? ''}`).join(', ');
  t.diagnostic(`the 10 answers: ${summary}`);
  assert.equal(ok.length, 1, `exactly one 200: ${summary}`);
  for (const r of rs.filter((x) => x.status !== 200)) {
    assert.ok(r.status >= 400 && r.status < 500, `refused with a 4xx: ${r.status} ${r.text}`);
    assert.equal(r.body?.access_token, undefined, 'no token in a refusal');
    assert.equal(r.text.includes(ok[0].body.access_token), false);
  }
  assert.equal(ok[0].body.authorization_details[0].params_digest, digestOf(p));
  assert.equal(status(v, a.approval_request_id), 'used');
  assert.equal(auditCount(v, `action = 'approval.released' AND request_id = '${a.approval_request_id}'`), 1,
    'one approval.released');
  race = { k, releasedBefore, summary };
  // Afterwards the same call needs a new approval (the losers may already have asked for it).
  const after = await ask(v, k.grant, { params: p });
  assert.equal(after.status, 400, after.text);
  assert.ok(['approval_required', 'authorization_pending', 'slow_down'].includes(after.body?.error), after.text);
  assert.notEqual(after.body.approval_request_id, a.approval_request_id, 'not the used approval');
  assert.equal(status(v, after.body.approval_request_id), 'pending');
});

test('single use under concurrency: the audit records exactly one vault release for the one token handed out', async () => {
  assert.ok(race, 'the previous test raced');
  const released = auditCount(v, `action = 'vault.released' AND consent_id = '${race.k.cid}'`) - race.releasedBefore;
  assert.equal(released, 1, `vault.released entries for the 10 racing calls (answers: ${race.summary}); `
    + 'docs/architecture.md flow F: "the approval is marked used in the same transaction as the release (`vault.released`), so one approval releases one token"');
});

// --- short request_ttl and a pending cap of 2 ---------------------------------------------------

test('request_ttl = 3 s, max_pending_per_user = 2: late redemption, expired pending approvals, flooding', async (t) => {
  const s = await startVaultStack({ accessTokenTTL: 60, config: { ...CONFIG, consent: { request_ttl: 3, max_pending_per_user: 2 } } });
  try {
    await jarOf(s, 'alice');
    await jarOf(s, 'bob');

    await t.test('an approved approval is not redeemed after request_ttl', async () => {
      const k = await connect(s, { user: 'alice', scope: 'issues:read issues:write' });
      const p = { repo: 'acme/widgets', title: 'too late' };
      const a = assertApprovalRequired(s, await ask(s, k.grant, { params: p }), 'late');
      assert.equal(a.expires_in, 3);
      await decide(s, 'alice', a.approval_uri, 'approve');
      assert.equal(status(s, a.approval_request_id), 'approved');
      await sleep(4000);
      const r = await ask(s, k.grant, { params: p });
      assert.equal(r.status, 400, `redeemed after request_ttl: ${r.status} ${r.text}`);
      assert.ok(['approval_required', 'expired_token'].includes(r.body?.error), r.text);
      assert.equal(r.body.access_token, undefined);
      assert.notEqual(status(s, a.approval_request_id), 'used');
      assert.equal(auditCount(s, `action = 'approval.released' AND request_id = '${a.approval_request_id}'`), 0);
      assert.equal(auditCount(s, `action = 'vault.released' AND consent_id = '${k.cid}'`), 0, 'nothing released');

      // A pending approval nobody decides: expired_token once, then a new approval.
      const q = { repo: 'acme/widgets', title: 'never decided' };
      const b = assertApprovalRequired(s, await ask(s, k.grant, { params: q }), 'undecided');
      await sleep(4000);
      const e = await ask(s, k.grant, { params: q });
      assertRefused(e, 'expired_token', 'an undecided approval past its expiry');
      const page = await openPage(s, 'alice', b.approval_uri);
      assert.equal(page.status, 410, 'its page is closed');
      const n = await ask(s, k.grant, { params: q });
      assert.notEqual(assertApprovalRequired(s, n, 'after expired_token').approval_request_id, b.approval_request_id);
    });

    await t.test('flooding past max_pending_per_user: 429 too_many_pending_requests with Retry-After', async () => {
      const k = await connect(s, { user: 'bob', scope: 'issues:read issues:write' });
      const before = approvalRows(s);
      const r1 = await ask(s, k.grant, { params: { title: 'flood 1' } });
      const r2 = await ask(s, k.grant, { params: { title: 'flood 2' } });
      assertApprovalRequired(s, r1, 'flood 1');
      assertApprovalRequired(s, r2, 'flood 2');
      const r3 = await ask(s, k.grant, { params: { title: 'flood 3' } });
      assertRefused(r3, 'too_many_pending_requests', 'the third pending approval', 429);
      const ra = Number(r3.headers.get('retry-after'));
      assert.ok(Number.isInteger(ra) && ra >= 1 && ra <= 3, `Retry-After ${r3.headers.get('retry-after')}`);
      assert.equal(approvalRows(s) - before, 2, 'no row for the refused one');
      assert.ok(auditCount(s, `action = 'approval.refused' AND subject = 'bob'`) >= 1, 'the refusal is audited');
      // The first two still answer as usual; after Retry-After there is room again.
      await sleep((ra + 1) * 1000);
      const r4 = await ask(s, k.grant, { params: { title: 'flood 3' } });
      assertApprovalRequired(s, r4, 'after Retry-After');
    });
  } finally {
    await s.stop();
  }
});
