// The organisation's policy lines (issue #32 item 4) against the real binary, the real IdPs
// and a recording upstream: a line decides before a person is asked, at the provider-token
// exchange with authorization_details (flow D) and at the proxy (flow H); its deny holds for
// an action without approval too; the audit names the line; the answers say that the
// organisation's policy decided, and a person's denial says until when (issue #32 item 2).
//
//   github (token_release = gateway; approval_enforced_by = gateway, as it must be):
//     create_issue  policy.1 = deny if repo == acme/secrets
//                   policy.2 = approve if repo prefix acme/docs
//     list_issues   policy.1 = deny if repo == acme/secrets          (approval = none)
//   ghproxy (token_release = never, consentd's proxy):
//     create_issue  policy.1 = deny if path.repo == secrets
//                   policy.2 = approve if body.title prefix "[bot]"
//     list_issues   policy.1 = deny if path.owner == evil              (approval = none)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { signedInJars } from '../lib/vaultstack.js';
import { startProxyStack } from '../lib/proxystack.js';
import { req, postForm } from '../lib/weblogin.js';
import { pollExchange } from '../lib/gateway.js';
import { basicAuth } from '../lib/idplogin.js';

const GW_AUTH = basicAuth('agent-gateway', 'gateway-dev-secret');
const ALLOW = 'github:issues:read github:issues:write ghproxy:issues:read ghproxy:issues:write';
const digestOf = (params) => createHash('sha256').update(canonicalize(params), 'utf8').digest('base64url');
const details = (action, params) => JSON.stringify([{ type: 'agent_action', action, parameters: params }]);

let stack;
let v;
let rec;
before(async () => {
  stack = await startProxyStack({
    introspect: false,
    config: ({ ghproxy: px }) => ({
      'action.ghproxy.create_issue': { ...px['action.ghproxy.create_issue'],
        'policy.1': 'deny if path.repo == secrets', 'policy.2': 'approve if body.title prefix "[bot]"' },
      'action.ghproxy.list_issues': { ...px['action.ghproxy.list_issues'], 'policy.1': 'deny if path.owner == evil' },
      'action.github.create_issue': { description: 'Open an issue', scope: 'issues:write', approval: 'required',
        approval_enforced_by: 'gateway', 'policy.1': 'deny if repo == acme/secrets',
        'policy.2': 'approve if repo prefix acme/docs' },
      'action.github.list_issues': { description: 'List issues', scope: 'issues:read', approval: 'none',
        approval_enforced_by: 'gateway', 'policy.1': 'deny if repo == acme/secrets' },
      'agent.coder': { allow: `notes:read notes:write wiki:read ${ALLOW}` },
    }),
  });
  ({ v, rec } = stack);
});
after(async () => { await stack?.stop(); });

const signedIn = signedInJars();
const jarOf = (user) => signedIn(v.url, user);
const auditRows = (where) => v.sql(`SELECT action || '|' || outcome || '|' || detail FROM audit WHERE ${where} ORDER BY seq`);
const approvalRows = (cid) => Number(v.sql(`SELECT count(*) FROM approvals WHERE consent_id = '${cid}'`));

// The person connects (user, coder, audience) through consentd and the provider; the gateway
// then holds a grant.
async function connect(user, audience) {
  const jar = await jarOf(user);
  const subjectToken = await v.idToken(user);
  const scope = 'issues:read issues:write';
  const first = await v.gw.exchange({ subjectToken, audience, scope, agentId: 'coder' });
  assert.equal(first.body?.error, 'consent_required', JSON.stringify(first.body));
  const a = await v.approveHttp({ jar, consentUri: first.body.consent_uri, user });
  assert.equal(a.status, 303, `consent decision: ${a.status} ${a.text.slice(0, 300)}`);
  const callbackUrl = await v.providerLoginHttp({ jar, authorizeUrl: a.location, user });
  const d = await v.deliverCallback({ jar, callbackUrl });
  assert.equal(d.first.status, 303, `callback: ${d.text?.slice(0, 300)}`);
  const g = await pollExchange(v.gw, { subjectToken, audience, scope, agentId: 'coder' });
  assert.equal(g.status, 200, JSON.stringify(g.body));
  const { payload } = await v.gw.verify(g.body.access_token);
  return { grant: g.body.access_token, cid: payload.cid, jar };
}

async function proxy(path, grant, { method = 'GET', json } = {}) {
  const headers = { authorization: GW_AUTH, 'consentd-grant': grant };
  if (json !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${v.url}/proxy/ghproxy${path}`, { method, headers, body: json === undefined ? undefined : JSON.stringify(json) });
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body, text };
}

// The person decides an approval on its page.
async function decide(user, uri, decision) {
  const jar = await jarOf(user);
  const page = await req(jar, uri);
  const form = postForm(await page.text());
  assert.ok(form?.fields.csrf, 'a CSRF token on the approval page');
  const res = await req(jar, uri, {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: v.url },
    body: new URLSearchParams({ csrf: form.fields.csrf, decision }).toString(),
  });
  assert.equal(res.status, 200, await res.text());
}

const POLICY_DENIED = /^denied by the organisation's policy \(policy (create_issue|list_issues)#1\): no one is asked, and the same call is denied every time$/;

test('/token with authorization_details: a deny line decides before a person is asked, audited naming the line', async () => {
  const k = await connect('alice', 'github');
  const params = { repo: 'acme/secrets', title: 'Leak' };
  for (let i = 0; i < 2; i++) {
    const r = await v.release(k.grant, 'create_issue', { authorization_details: details('create_issue', params) });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.body.error, 'access_denied');
    assert.match(r.body.error_description, POLICY_DENIED);
    assert.equal(r.body.access_token, undefined);
    assert.equal(r.body.approval_uri, undefined, 'nobody is asked');
  }
  assert.equal(approvalRows(k.cid), 0, 'no approval request was made');
  const rows = auditRows(`consent_id = '${k.cid}' AND action = 'approval.denied_by_policy'`).split('\n');
  assert.equal(rows.length, 2, rows.join('\n'));
  assert.equal(rows[0], `approval.denied_by_policy|denied|action=create_issue; line=policy.1; params_digest=${digestOf(params)}`);
  assert.equal(auditRows(`consent_id = '${k.cid}' AND action = 'vault.released'`), '', 'nothing released');

  // An approve line releases without asking, and vault.released names it.
  const docs = await v.release(k.grant, 'create_issue', { authorization_details: details('create_issue', { repo: 'acme/docs-site', title: 'Typo' }) });
  assert.equal(docs.status, 200, docs.text);
  assert.ok(docs.body.access_token);
  assert.equal(approvalRows(k.cid), 0, 'still no approval request');
  assert.match(auditRows(`consent_id = '${k.cid}' AND action = 'vault.released'`), /\|ok\|.*action=create_issue.*; approved_by=policy create_issue#2$/m);

  // No line holds: the person is asked, as before.
  const other = await v.release(k.grant, 'create_issue', { authorization_details: details('create_issue', { repo: 'acme/widgets', title: 'Bug' }) });
  assert.equal(other.body?.error, 'approval_required', other.text);
  assert.equal(approvalRows(k.cid), 1);
});

test('/token: a deny line holds on an action without approval; such an action then needs its details', async () => {
  const k = await connect('bob', 'github');
  const none = await v.release(k.grant, 'list_issues');
  assert.equal(none.status, 400, none.text);
  assert.equal(none.body.error, 'invalid_request');
  assert.equal(none.body.error_description, "the organisation's policy judges this action by its parameters: send authorization_details");
  const denied = await v.release(k.grant, 'list_issues', { authorization_details: details('list_issues', { repo: 'acme/secrets' }) });
  assert.equal(denied.status, 400, denied.text);
  assert.equal(denied.body.error, 'access_denied');
  assert.match(denied.body.error_description, POLICY_DENIED);
  const ok = await v.release(k.grant, 'list_issues', { authorization_details: details('list_issues', { repo: 'acme/widgets' }) });
  assert.equal(ok.status, 200, ok.text);
  assert.match(auditRows(`consent_id = '${k.cid}' AND action = 'approval.denied_by_policy'`), /line=policy\.1/);
});

let carol;   // the proxy test's person and consent, whose denial the /me test lifts

test('/proxy: a deny line is a 403 before a person is asked and nothing goes upstream; an approve line forwards; a deny holds without approval', async () => {
  const k = await connect('carol', 'ghproxy');
  carol = k;
  const n0 = rec.seen.length;
  const r = await proxy('/repos/acme/secrets/issues', k.grant, { method: 'POST', json: { title: 'Leak' } });
  assert.equal(r.status, 403, r.text);
  assert.equal(r.body.error, 'access_denied');
  assert.match(r.body.error_description, POLICY_DENIED);
  assert.equal(r.body.approval_uri, undefined);
  assert.equal(rec.seen.length, n0, 'nothing upstream');
  assert.equal(approvalRows(k.cid), 0);
  const params = { path: { owner: 'acme', repo: 'secrets' }, query: {}, body: { title: 'Leak' } };
  assert.equal(auditRows(`consent_id = '${k.cid}' AND action = 'approval.denied_by_policy'`),
    `approval.denied_by_policy|denied|action=create_issue; line=policy.1; params_digest=${digestOf(params)}`);

  // policy.2: a bot's issue goes through without asking.
  const bot = await proxy('/repos/acme/widgets/issues', k.grant, { method: 'POST', json: { title: '[bot] nightly report' } });
  assert.ok(bot.status >= 200 && bot.status < 300, `${bot.status} ${bot.text}`);
  assert.equal(rec.seen.length, n0 + 1, 'forwarded once');
  assert.equal(approvalRows(k.cid), 0);
  assert.match(auditRows(`consent_id = '${k.cid}' AND action = 'vault.released'`), /approved_by=policy create_issue#2/);

  // approval = none, and policy.1 denies this owner.
  const evil = await proxy('/repos/evil/x/issues', k.grant);
  assert.equal(evil.status, 403, evil.text);
  assert.match(evil.body.error_description, POLICY_DENIED);
  assert.equal(rec.seen.length, n0 + 1, 'nothing upstream');
  const fine = await proxy('/repos/acme/x/issues', k.grant);
  assert.equal(fine.status, 200, fine.text);

  // No line holds: the person is asked; their denial then says until when.
  const asked = await proxy('/repos/acme/widgets/issues', k.grant, { method: 'POST', json: { title: 'Human' } });
  assert.equal(asked.body?.error, 'approval_required', asked.text);
  await decide('carol', asked.body.approval_uri, 'deny');
  const again = await proxy('/repos/acme/widgets/issues', k.grant, { method: 'POST', json: { title: 'Human' } });
  assert.equal(again.status, 403, again.text);
  assert.equal(again.body.error, 'access_denied');
  const m = /^the person denied this action with these parameters; the same call is refused until (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) \((\d+) s from now\) unless the person lets it ask again on their \/me page$/.exec(again.body.error_description);
  assert.ok(m, again.body.error_description);
  // [consent] deny_cooldown after the denial: the time and the seconds agree.
  const left = Number(m[2]);
  assert.ok(left > 60, `${left} s left`);
  assert.ok(Math.abs(Date.parse(m[1]) - (Date.now() + left * 1000)) < 5000, `until ${m[1]}, ${left} s`);
});

// POST a form on consentd as user -> { status, location, html }.
async function postPage(user, url, fields, headers = {}) {
  const jar = await jarOf(user);
  const res = await req(jar, url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded',
    origin: v.url, ...headers }, body: new URLSearchParams(fields).toString() });
  return { status: res.status, location: res.headers.get('location'), html: await res.text() };
}
const mePage = async (user) => (await (await req(await jarOf(user), `${v.url}/me`)).text());

test('/me lists a denied action by its description with its values and until when, and "let it ask again" makes the next call ask (issue #32 item 3)', async () => {
  assert.ok(carol, 'the proxy test ran first');
  const html = await mePage('carol');
  const section = /<section id="denied-actions">([\s\S]*?)<\/section>/.exec(html)?.[1];
  assert.ok(section, html.slice(0, 2000));
  const blocks = section.split('<div class="block" ').slice(1);
  assert.equal(blocks.length, 1, section);
  const b = blocks[0];
  const text = b.replace(/<[^>]+>/g, '');
  assert.match(text, /You denied (Coding assistant|coder): Open an issue on GitHub via proxy \(/, `the agent, the action by its description, the resource: ${text}`);
  assert.doesNotMatch(text, /create_issue/, 'not the id');
  assert.deepEqual([...b.matchAll(/<dt>([^<]*)<\/dt><dd>([^<]*)<\/dd>/g)].map((m) => `${m[1]}=${m[2]}`),
    ['owner=acme', 'repo=widgets', 'title=Human']);
  const until = /<p class="until">[^]*?<time datetime="([^"]+)"/.exec(b)?.[1];
  assert.ok(until, 'until when');
  const denial = Number(v.sql(`SELECT decided_at FROM approvals WHERE consent_id = '${carol.cid}' AND status = 'denied'`));
  const held = Date.parse(until) / 1000 - denial;
  assert.ok(held >= 3600, `blocked until the cooldown ends (${held} s after the denial)`);
  const action = /<form method="post" action="([^"]+)">/.exec(b)?.[1];
  const id = /^\/me\/approvals\/([A-Za-z0-9_-]+)\/allow$/.exec(action || '')?.[1];
  assert.ok(id, action);
  const csrf = /name="csrf" value="([^"]+)"/.exec(b)?.[1];
  assert.ok(csrf);

  // Not without the CSRF token, not from another origin, not by another person (a 404 like a missing one).
  assert.equal((await postPage('carol', `${v.url}${action}`, {})).status, 400);
  assert.equal((await postPage('carol', `${v.url}${action}`, { csrf: 'A'.repeat(43) })).status, 403);
  assert.equal((await postPage('carol', `${v.url}${action}`, { csrf }, { origin: 'http://evil.example' })).status, 403);
  const bobHtml = await mePage('bob');
  const bobCsrf = postForm(bobHtml)?.fields.csrf || /name="csrf" value="([^"]+)"/.exec(bobHtml)?.[1];
  assert.ok(bobCsrf, 'bob has a CSRF token on his /me');
  assert.equal((await postPage('bob', `${v.url}${action}`, { csrf: bobCsrf })).status, 404);
  assert.equal((await postPage('carol', `${v.url}/me/approvals/AAAAAAAAAAAAAAAAAAAAAA/allow`, { csrf })).status, 404);
  // Still blocked.
  const still = await proxy('/repos/acme/widgets/issues', carol.grant, { method: 'POST', json: { title: 'Human' } });
  assert.equal(still.body?.error, 'access_denied', still.text);

  const ok = await postPage('carol', `${v.url}${action}`, { csrf });
  assert.equal(ok.status, 303, ok.html);
  assert.equal(ok.location, '/me');
  assert.equal(auditRows(`request_id = '${id}' AND action = 'approval.cooldown_lifted'`).split('\n').length, 1);
  assert.doesNotMatch(await mePage('carol'), /id="denied-actions"/, 'no longer listed');
  // The next call of the same action with the same values asks the person again.
  const again = await proxy('/repos/acme/widgets/issues', carol.grant, { method: 'POST', json: { title: 'Human' } });
  assert.equal(again.status, 403, again.text);
  assert.equal(again.body.error, 'approval_required', again.text);
  // Lifting twice changes nothing more.
  assert.equal((await postPage('carol', `${v.url}${action}`, { csrf })).status, 303);
  assert.equal(auditRows(`request_id = '${id}' AND action = 'approval.cooldown_lifted'`).split('\n').length, 1);
});

// --- the done pages (issue #32 item 7) ------------------------------------------------

// The approval page's form, then the decision posted -> { status, html }.
async function decideHtml(user, uri, decision, beforePost = () => {}, csrf = undefined) {
  const jar = await jarOf(user);
  let token = csrf;
  if (token === undefined) {
    const page = await req(jar, uri);
    const pageHtml = await page.text();
    token = postForm(pageHtml)?.fields.csrf;
    assert.ok(token, `a CSRF token on the approval page: ${page.status} ${textOf(pageHtml).slice(0, 400)}`);
  }
  await beforePost();
  const res = await req(jar, uri, {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: v.url },
    body: new URLSearchParams({ csrf: token, decision }).toString(),
  });
  return { status: res.status, html: await res.text(), csrf: token };
}
const textOf = (html) => html.replace(/<script[\s\S]*?<\/script>/g, '').replace(/<[^>]+>/g, '').replace(/\s+/g, ' ');
const values = (html) => [...html.matchAll(/<dt>([^<]*)<\/dt><dd>([^<]*)<\/dd>/g)].map((m) => `${m[1]}=${m[2]}`);
const timeIn = (html, id) => Date.parse(new RegExp(`id="${id}"[^]*?<time datetime="([^"]+)"`).exec(html)?.[1]);

test('the approval done pages name the action by its description, list the values and say until when; a request that expired while its page was open says so', async () => {
  const k = await connect('alice', 'ghproxy');
  const call = (title) => proxy('/repos/acme/widgets/issues', k.grant, { method: 'POST', json: { title } });
  const ttl = 600;        // [consent] request_ttl: an approval is redeemable this long after the decision
  const a1 = await call('Approve me');
  assert.equal(a1.body?.error, 'approval_required', a1.text);
  const ok = await decideHtml('alice', a1.body.approval_uri, 'approve');
  assert.equal(ok.status, 200, ok.html);
  assert.match(textOf(ok.html), /Action approved \S.* may Open an issue on GitHub via proxy once, with these values:/);
  assert.doesNotMatch(textOf(ok.html), /create_issue/, 'the description, not the id');
  assert.deepEqual(values(ok.html), ['owner=acme', 'repo=widgets', 'title=Approve me']);
  const useBy = timeIn(ok.html, 'use-by');
  assert.ok(Math.abs(useBy - (Date.now() + ttl * 1000)) < 60000, `use by ${new Date(useBy).toISOString()}`);

  const a2 = await call('Deny me');
  const no = await decideHtml('alice', a2.body.approval_uri, 'deny');
  assert.equal(no.status, 200, no.html);
  assert.match(textOf(no.html), /Action denied \S.* may not Open an issue on GitHub via proxy with these values:/);
  assert.deepEqual(values(no.html), ['owner=acme', 'repo=widgets', 'title=Deny me']);
  const blocked = timeIn(no.html, 'blocked-until');
  const denied = Number(v.sql(`SELECT decided_at FROM approvals WHERE id = '${a2.body.approval_request_id}'`));
  assert.ok(blocked / 1000 - denied >= 3600, 'blocked for [consent] deny_cooldown');
  assert.match(no.html, /<a href="\/me#denied-actions">Let it ask again<\/a>/);

  // Expired while its page was open: said exactly, and nothing decided.
  const a3 = await call('Too late');
  const id = a3.body.approval_request_id;
  const late = await decideHtml('alice', a3.body.approval_uri, 'approve', () => {
    v.sql(`UPDATE approvals SET expires_at = ${Math.floor(Date.now() / 1000) - 5} WHERE id = '${id}'`);
  });
  assert.equal(late.status, 400, late.html);
  assert.match(textOf(late.html), /This request expired at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ, while its page was open: nothing was approved or denied\. If the agent still needs to do this, its next try asks you again\./);
  assert.notEqual(v.sql(`SELECT status FROM approvals WHERE id = '${id}'`), 'approved');
  // Decided already (its page is closed; a form left open is posted): says which decision stands.
  const again = await decideHtml('alice', a2.body.approval_uri, 'approve', () => {}, no.csrf);
  assert.equal(again.status, 400);
  assert.match(textOf(again.html), /You already denied this request at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ; that decision stands\./);
});

test('the consent done pages list what was given and declined and until when, or everything declined', async () => {
  const jar = await jarOf('bob');
  const subjectToken = await v.idToken('bob');
  const ask = { subjectToken, audience: 'notes', scope: 'read write', agentId: 'coder' };
  const first = await v.gw.exchange(ask);
  assert.equal(first.body?.error, 'consent_required', first.text);
  // Tick only the first scope (read), for a day.
  const a = await v.approveHttp({ jar, consentUri: first.body.consent_uri, user: 'bob', select: [0], duration: 86400 });
  assert.equal(a.status, 200, a.text.slice(0, 300));
  const t = textOf(a.text);
  assert.match(t, /Permission given/);
  assert.match(t, /Until \d{4}-\d\d-\d\d \d\d:\d\d UTC, it may: Read your notes read You declined: Create and edit notes write/);
  const until = timeIn(a.text, 'given-until');
  assert.ok(Math.abs(until - (Date.now() + 86400 * 1000)) < 60000, new Date(until).toISOString());

  const wiki = await v.gw.exchange({ ...ask, audience: 'wiki', scope: 'read' });
  assert.equal(wiki.body?.error, 'consent_required', wiki.text);
  const d = await v.approveHttp({ jar, consentUri: wiki.body.consent_uri, user: 'bob', decision: 'deny' });
  assert.equal(d.status, 200, d.text.slice(0, 300));
  assert.match(textOf(d.text), /Request denied .* You declined everything it asked for: \S.* read It cannot ask again until/);
});
