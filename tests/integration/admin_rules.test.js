// The person's standing rules on the admin pages (issue #32, item 3: "admins list and end
// them"), against the real IdPs and the real binary: the admin's consent page lists the
// consent's rules in words -- what they allow, for which agent, until when, how often used,
// made when and by whom, ended or not -- and each live one has an End button that opens a
// confirmation; its POST (with this session's CSRF token) ends the rule through the same
// standing_end the admin API uses, audited alike, and the agent's next call asks the person
// again.  A non-admin, a form without the CSRF token and one with another session's cannot
// end it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startVaultStack, signedInJars } from '../lib/vaultstack.js';
import { STANDING_ACTIONS } from '../lib/fixtures.js';
import { req, postForm } from '../lib/weblogin.js';

const CONFIG = {
  oidc: { scopes: 'openid profile email groups' },   // the admin claim comes in groups
  ...STANDING_ACTIONS,   // tests/lib/fixtures.js: create_issue match rules, add_comment exact ones
};

let v;
before(async () => { v = await startVaultStack({ accessTokenTTL: 60, config: CONFIG }); });
after(async () => { await v?.stop(); });

const signedIn = signedInJars();
const jarOf = (user) => signedIn(v.url, user);
const details = (params, action) => JSON.stringify([{ type: 'agent_action', action, parameters: params }]);
const ask = (grant, action, params) => v.release(grant, action, { authorization_details: details(params, action) });

async function openPage(user, url) {
  const res = await req(await jarOf(user), url);
  const html = await res.text();
  // The page's own form, not the admin header's sign-out.
  return { status: res.status, html, form: postForm(html, /^\/logout$/) };
}
async function post(user, url, fields) {
  const res = await req(await jarOf(user), url, {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: v.url },
    body: new URLSearchParams(fields).toString(), redirect: 'manual',
  });
  return { status: res.status, html: await res.text(), location: res.headers.get('location') };
}

function needsApproval(r, label) {
  assert.equal(r.status, 400, `${label}: ${r.status} ${JSON.stringify(r.body)}`);
  assert.equal(r.body?.error, 'approval_required', `${label}: ${JSON.stringify(r.body)}`);
  return r.body;
}
function released(r, label) {
  assert.equal(r.status, 200, `${label}: ${r.status} ${JSON.stringify(r.body)}`);
  assert.ok(r.body.access_token, `${label}: a token`);
}

async function connect(user) {
  const jar = await jarOf(user);
  const subjectToken = await v.idToken(user);
  const scope = 'issues:read issues:write';
  const g = await v.consentAndGrant({ jar, user, ask: { subjectToken, audience: 'github', scope, agentId: 'coder' } });
  const { payload } = await v.gw.verify(g.body.access_token);
  return { grant: g.body.access_token, cid: payload.cid };
}

// The person approves a call and makes a rule with it; the rule's id.
async function ruleOf(user, k, action, params, fields) {
  const a = needsApproval(await ask(k.grant, action, params), `${action}: first call`);
  const page = await openPage(user, a.approval_uri);
  assert.equal(page.status, 200, page.html.slice(0, 300));
  const done = await post(user, a.approval_uri, { csrf: page.form.fields.csrf, decision: 'standing', ...fields });
  assert.equal(done.status, 200, done.html.slice(0, 300));
  released(await ask(k.grant, action, params), `${action}: the approved call`);
  return v.sql(`SELECT id FROM standing_rules WHERE consent_id = '${k.cid}' AND action = '${action}' ORDER BY created_at DESC LIMIT 1`);
}

const ruleState = (id) => v.sql(`SELECT ended_at || '|' || coalesce(ended_by, '') FROM standing_rules WHERE id = '${id}'`);

test('an admin sees a consent\'s rules in words, ends one after a confirmation (CSRF), audited; the next call asks again', async () => {
  const k = await connect('alice');
  const p = { repo: 'acme/widgets', title: 'First' };
  const matchRule = await ruleOf('alice', k, 'create_issue', p, { rule: 'match', for: '3600', uses: '5' });
  released(await ask(k.grant, 'create_issue', { repo: 'acme/widgets', title: 'Second' }), 'by the rule');
  const c = { repo: 'acme/widgets', issue: 1, body: 'ok' };
  const exactRule = await ruleOf('alice', k, 'add_comment', c, { rule: 'exact', for: '900', uses: '0' });
  // The person ends the exact rule herself on /me: the admin sees it over, and by whom.
  const me = await openPage('alice', `${v.url}/me`);
  const meCsrf = /name="csrf" value="([^"]+)"/.exec(me.html)[1];
  assert.equal((await post('alice', `${v.url}/me/rules/${exactRule}/end`, { csrf: meCsrf })).status, 303);

  // The consent page: both rules, in words.
  const page = await openPage('admin', `${v.url}/admin/consents/${k.cid}`);
  assert.equal(page.status, 200, page.html.slice(0, 300));
  assert.match(page.html, /<section class="admin" id="rules">/);
  // A live connection is not said to be broken (consent_row once asked str_of, which answers "" for none).
  assert.match(page.html, /<td class="state">live<\/td>/);
  assert.doesNotMatch(page.html, /reconnect-why/);
  const block = (id) => (new RegExp(`<div class="rule" id="rule-${id}">([\\s\\S]*?)</div>`).exec(page.html) || [])[1] || '';
  const m = block(matchRule);
  assert.match(m, /<strong>Coding assistant<\/strong> may <strong>Open an issue<\/strong> \(<code>create_issue<\/code>\) on <strong>GitHub<\/strong> whenever repo is &quot;acme\/widgets&quot;/);
  assert.match(m, /Made <time datetime="[^"]+Z">\d{4}-\d\d-\d\d \d\d:\d\d UTC<\/time> by <code>user:alice<\/code> · until <time datetime="[^"]+Z">/);
  assert.match(m, /used 1 of 5 times/);
  assert.match(m, /In force\./);
  assert.match(m, new RegExp(`<a class="button danger small" href="/admin/rules/${matchRule}/end" aria-label="End the rule of Coding assistant: create_issue…">End…</a>`));
  const x = block(exactRule);
  assert.match(x, /may <strong>Comment on an issue<\/strong> \(<code>add_comment<\/code>\) on <strong>GitHub<\/strong> again with exactly the values the person approved/);
  assert.match(x, /Over: ended by user:alice \(<time datetime=/);
  assert.doesNotMatch(x, /\/end"/, 'no End button for a rule that is over');

  // A non-admin cannot open the confirmation or end the rule, even with a valid CSRF token of her own.
  for (const user of ['alice', 'bob']) {
    const g = await openPage(user, `${v.url}/admin/rules/${matchRule}/end`);
    assert.equal(g.status, 403, `${user}: ${g.status}`);
    assert.doesNotMatch(g.html, /id="end-rule"/);
  }
  const bobMe = await openPage('bob', `${v.url}/me`);
  const bobCsrf = /name="csrf" value="([^"]+)"/.exec(bobMe.html)?.[1];
  assert.ok(bobCsrf, 'bob has a CSRF token on /me');
  assert.equal((await post('bob', `${v.url}/admin/rules/${matchRule}/end`, { csrf: bobCsrf })).status, 403);
  assert.equal((await post('alice', `${v.url}/admin/rules/${matchRule}/end`, { csrf: meCsrf })).status, 403);
  assert.equal(ruleState(matchRule), '0|', 'a non-admin ended nothing');

  // The confirmation, then the admin's POST without the CSRF token, with another session's, with hers.
  const confirm = await openPage('admin', `${v.url}/admin/rules/${matchRule}/end`);
  assert.equal(confirm.status, 200, confirm.html.slice(0, 300));
  assert.match(confirm.html, /<h1>End this standing rule\?<\/h1>/);
  assert.match(confirm.html, /whenever repo is &quot;acme\/widgets&quot;/);
  assert.match(confirm.html, new RegExp(`<a href="/admin/consents/${k.cid}#rules">Cancel</a>`));
  assert.equal(confirm.form.action, `/admin/rules/${matchRule}/end`);
  const csrf = confirm.form.fields.csrf;
  assert.ok(csrf);
  const noCsrf = await post('admin', `${v.url}/admin/rules/${matchRule}/end`, {});
  assert.ok([400, 403].includes(noCsrf.status), `no csrf: ${noCsrf.status}`);
  assert.equal((await post('admin', `${v.url}/admin/rules/${matchRule}/end`, { csrf: bobCsrf })).status, 403, 'another session\'s token');
  assert.equal(ruleState(matchRule), '0|', 'no CSRF token, nothing ended');
  released(await ask(k.grant, 'create_issue', { repo: 'acme/widgets', title: 'Third' }), 'still by the rule');

  const ended = await post('admin', `${v.url}/admin/rules/${matchRule}/end`, { csrf });
  assert.equal(ended.status, 303, ended.html.slice(0, 300));
  assert.equal(ended.location, `/admin/consents/${k.cid}#rules`);
  assert.match(ruleState(matchRule), /^[1-9]\d*\|admin:admin$/);
  // Audited as the admin API's end: standing.ended, by an admin, the admin named as the actor.
  assert.equal(v.sql(`SELECT actor || ' ' || outcome || ' ' || consent_id || ' ' || detail FROM audit WHERE action = 'standing.ended' AND detail LIKE 'rule=${matchRule};%'`),
    `admin:admin ok ${k.cid} rule=${matchRule}; action=create_issue; by=an admin`);
  // The next call asks the person again.
  needsApproval(await ask(k.grant, 'create_issue', { repo: 'acme/widgets', title: 'Fourth' }), 'after the admin ended it');

  // The page says it is over and by whom; ending it again ends nothing and writes nothing.
  const after = await openPage('admin', `${v.url}/admin/consents/${k.cid}`);
  assert.match(after.html, new RegExp(`id="rule-${matchRule}">[\\s\\S]*?Over: ended by admin:admin`));
  assert.doesNotMatch(after.html, /href="\/admin\/rules\/[^/]+\/end"/, 'no End button left');
  const again = await openPage('admin', `${v.url}/admin/rules/${matchRule}/end`);
  assert.equal(again.status, 200);
  assert.match(again.html, /id="already"/);
  assert.doesNotMatch(again.html, /id="end-rule"/);
  assert.equal((await post('admin', `${v.url}/admin/rules/${matchRule}/end`, { csrf })).status, 303);
  assert.equal(v.sql(`SELECT count(*) FROM audit WHERE action = 'standing.ended' AND detail LIKE 'rule=${matchRule};%'`), '1');
  // An unknown rule: 404, both ways.
  assert.equal((await openPage('admin', `${v.url}/admin/rules/nosuchrule/end`)).status, 404);
  assert.equal((await post('admin', `${v.url}/admin/rules/nosuchrule/end`, { csrf })).status, 404);
});

test('a consent without rules says so', async () => {
  const k = await connect('carol');
  const page = await openPage('admin', `${v.url}/admin/consents/${k.cid}`);
  assert.equal(page.status, 200);
  assert.match(page.html, /id="no-rules">The person made no standing rule under this consent\./);
});
