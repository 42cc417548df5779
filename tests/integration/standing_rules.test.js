// The person's standing rules (issue #32) from the attacker's side, against the real IdPs
// and the real binary, through flow D's /token with authorization_details: a rule made on
// the approval page covers its calls and nothing else -- another value of a fixed parameter,
// another agent, another action -- and an expired, used-up, ended or revoked-consent rule
// does nothing; the form cannot widen what the configuration offers; each use is audited
// naming the rule; /me lists the rules in words with an End button; admins list and end them.
//
//   persons: alice (match rules, /me, the admin API)  bob (exact rules, use counts, expiry)
//            carol (the form's values)  dave (revocation)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { startVaultStack, signedInJars } from '../lib/vaultstack.js';
import { STANDING_ACTIONS } from '../lib/fixtures.js';
import { DEFAULT_USERS } from '../lib/idp.js';
import { req, postForm } from '../lib/weblogin.js';
import { consentdBin } from '../lib/consentd.js';

const USERS = { ...DEFAULT_USERS };
for (const u of ['carol', 'dave']) {
  USERS[u] = { password: `${u}-password`, name: `${u[0].toUpperCase()}${u.slice(1)} Example`, email: `${u}@example.test`, groups: [] };
}

// create_issue: match rules, repo never left open; add_comment: exact rules for at most 1 h;
// close_issue: approval without rules (the default).
const CONFIG = {
  consent: { max_pending_per_user: 50 },
  ...STANDING_ACTIONS,   // tests/lib/fixtures.js
  'action.github.close_issue': { description: 'Close an issue', scope: 'issues:write', approval: 'required',
    approval_enforced_by: 'gateway' },
};

let v;
before(async () => { v = await startVaultStack({ accessTokenTTL: 60, config: CONFIG, users: USERS }); });
after(async () => { await v?.stop(); });

const signedIn = signedInJars();
const jarOf = (user) => signedIn(v.url, user);
const details = (params, action) => JSON.stringify([{ type: 'agent_action', action, parameters: params }]);
const ask = (grant, action, params) => v.release(grant, action, { authorization_details: details(params, action) });

async function connect({ user, agent = 'coder' }) {
  const jar = await jarOf(user);
  const subjectToken = await v.idToken(user);
  const scope = 'issues:read issues:write';
  const g = await v.consentAndGrant({ jar, user, ask: { subjectToken, audience: 'github', scope, agentId: agent },
    approved: (a) => assert.equal(a.status, 200, `consent decision: ${a.status} ${a.text.slice(0, 300)}`) });
  const { payload } = await v.gw.verify(g.body.access_token);
  return { grant: g.body.access_token, cid: payload.cid };
}

function needsApproval(r, label) {
  assert.equal(r.status, 400, `${label}: ${r.status} ${JSON.stringify(r.body)}`);
  assert.equal(r.body?.error, 'approval_required', `${label}: ${JSON.stringify(r.body)}`);
  assert.equal(r.body.access_token, undefined, `${label}: no token`);
  return r.body;
}
function released(r, label) {
  assert.equal(r.status, 200, `${label}: ${r.status} ${JSON.stringify(r.body)}`);
  assert.ok(r.body.access_token, `${label}: a token`);
}

async function openPage(user, url) {
  const res = await req(await jarOf(user), url);
  const html = await res.text();
  return { status: res.status, html, form: postForm(html) };
}
async function post(user, url, fields) {
  const res = await req(await jarOf(user), url, {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: v.url },
    body: new URLSearchParams(fields).toString(), redirect: 'manual',
  });
  return { status: res.status, html: await res.text(), location: res.headers.get('location') };
}
// The person approves with a standing rule: fields beyond csrf and decision as given.
async function approveWithRule(user, uri, fields) {
  const page = await openPage(user, uri);
  assert.equal(page.status, 200, page.html.slice(0, 300));
  return { page, done: await post(user, uri, { csrf: page.form.fields.csrf, decision: 'standing', ...fields }) };
}

const ruleRows = (where) => v.sql(`SELECT id || '|' || kind || '|' || uses || '|' || max_uses || '|' || ended_at FROM standing_rules WHERE ${where} ORDER BY created_at, id`);
const audit = (where) => v.sql(`SELECT action || ' ' || coalesce(detail, '') FROM audit WHERE ${where} ORDER BY seq`);

test('a match rule covers calls with its fixed values, and not another value, action or agent; each use audited naming the rule', async () => {
  const k = await connect({ user: 'alice' });
  const p1 = { repo: 'acme/widgets', title: 'First', body: 'one' };
  const a1 = needsApproval(await ask(k.grant, 'create_issue', p1), 'first call');
  // The page offers both rules; repo stays fixed and cannot be unticked; title and body can.
  const page = await openPage('alice', a1.approval_uri);
  assert.match(page.html, /<fieldset id="standing">/);
  assert.match(page.html, /Allow exactly this call again/);
  assert.match(page.html, /Allow Open an issue with these values fixed/);
  assert.match(page.html, /name="k1" value="on" checked disabled[^>]*> <code>repo<\/code>/);
  assert.match(page.html, /name="k2" value="on" checked> <code>title<\/code>/);
  assert.match(page.html, /<option value="900" selected>15 minutes<\/option>/);
  assert.match(page.html, /<option value="28800">8 hours<\/option>/);
  // Only repo fixed: the form leaves k0 (body) and k2 (title) unticked.
  const done = await post('alice', a1.approval_uri, { csrf: page.form.fields.csrf, decision: 'standing', rule: 'match', for: '3600', uses: '0' });
  assert.equal(done.status, 200, done.html.slice(0, 400));
  assert.match(done.html, /Action approved/);
  assert.match(done.html, /id="rule-made"/);
  const [rule] = ruleRows(`consent_id = '${k.cid}'`).split('\n').map((l) => l.split('|'));
  assert.equal(rule[1], 'match');
  const ruleId = rule[0];
  assert.match(audit(`action = 'standing.created' AND consent_id = '${k.cid}'`), new RegExp(`rule=${ruleId}; kind=match; action=create_issue; fixed=repo`));

  // The approved call goes out on the person's approval (not counted as the rule's).
  released(await ask(k.grant, 'create_issue', p1), 'the approved call');
  assert.equal(ruleRows(`id = '${ruleId}'`).split('|')[2], '0');
  // Other titles and bodies in acme/widgets: no person asked; each use counted and audited.
  const before = Number(v.sql("SELECT count(*) FROM approvals"));
  released(await ask(k.grant, 'create_issue', { repo: 'acme/widgets', title: 'Second' }), 'another title');
  released(await ask(k.grant, 'create_issue', { repo: 'acme/widgets', title: 'Third', labels: ['x'] }), 'more values');
  assert.equal(Number(v.sql('SELECT count(*) FROM approvals')), before, 'no approval request');
  assert.equal(ruleRows(`id = '${ruleId}'`).split('|')[2], '2');
  const used = audit(`consent_id = '${k.cid}' AND action IN ('standing.used', 'vault.released') AND seq > (SELECT max(seq) FROM audit WHERE action = 'approval.released')`);
  assert.match(used, new RegExp(`standing.used rule=${ruleId}; action=create_issue`));
  assert.match(used, new RegExp(`vault.released action=create_issue; approved_by=rule ${ruleId}`));
  // The person's approval reads differently: approval=..., no approved_by.
  assert.match(audit(`consent_id = '${k.cid}' AND action = 'vault.released'`).split('\n')[0], /approval=[A-Za-z0-9_-]+$/);

  // Attacks: another repo, a look-alike, an array, repo left out; another action; another agent.
  needsApproval(await ask(k.grant, 'create_issue', { repo: 'acme/secrets', title: 'Second' }), 'another repo');
  needsApproval(await ask(k.grant, 'create_issue', { repo: 'acme/widgets ', title: 'x' }), 'a look-alike repo');
  needsApproval(await ask(k.grant, 'create_issue', { repo: ['acme/widgets'], title: 'x' }), 'repo as an array');
  needsApproval(await ask(k.grant, 'create_issue', { title: 'no repo' }), 'no repo');
  needsApproval(await ask(k.grant, 'add_comment', { repo: 'acme/widgets', title: 'Second' }), 'another action');
  needsApproval(await ask(k.grant, 'close_issue', { repo: 'acme/widgets', title: 'Second' }), 'an action without rules');
  const kb = await connect({ user: 'alice', agent: 'butler' });
  needsApproval(await ask(kb.grant, 'create_issue', { repo: 'acme/widgets', title: 'Second' }), 'another agent');
  assert.equal(ruleRows(`id = '${ruleId}'`).split('|')[2], '2', 'none of them counted');

  // /me lists it in words and ends it in one step (POST with CSRF).
  const me = await openPage('alice', `${v.url}/me`);
  assert.match(me.html, /<section id="rules">/);
  assert.match(me.html, new RegExp(`id="rule-${ruleId}"`));
  assert.match(me.html, /may <strong>Open an issue<\/strong> \(<code>create_issue<\/code>\) on <strong>[^<]+<\/strong> whenever repo is &quot;acme\/widgets&quot;/);
  assert.match(me.html, /used 2 times/);
  const forms = [...me.html.matchAll(/<form method="post" action="\/me\/rules\/([^/]+)\/end">\s*<input type="hidden" name="csrf" value="([^"]+)">/g)];
  assert.equal(forms.length, 1);
  // Without the CSRF token nothing ends.
  const noCsrf = await post('alice', `${v.url}/me/rules/${ruleId}/end`, {});
  assert.notEqual(noCsrf.status, 303);
  // Bob cannot end it (it looks missing to him).
  const bobsPage = await openPage('bob', `${v.url}/me`);
  const bobCsrf = /name="csrf" value="([^"]+)"/.exec(bobsPage.html)?.[1];
  assert.ok(bobCsrf, 'bob has a CSRF token on /me');
  assert.equal((await post('bob', `${v.url}/me/rules/${ruleId}/end`, { csrf: bobCsrf })).status, 404);
  assert.equal(ruleRows(`id = '${ruleId}'`).split('|')[4], '0', 'still live');
  const end = await post('alice', `${v.url}/me/rules/${ruleId}/end`, { csrf: forms[0][2] });
  assert.equal(end.status, 303);
  assert.equal(end.location, '/me#rules');
  assert.notEqual(ruleRows(`id = '${ruleId}'`).split('|')[4], '0', 'ended');
  assert.match(audit(`action = 'standing.ended'`), new RegExp(`rule=${ruleId}; action=create_issue; by=the person`));
  needsApproval(await ask(k.grant, 'create_issue', { repo: 'acme/widgets', title: 'Fourth' }), 'after End');
  assert.doesNotMatch((await openPage('alice', `${v.url}/me`)).html, /<section id="rules">/);
});

test('an exact rule covers exactly its call, at most its use count, and not after it expired', async () => {
  const k = await connect({ user: 'bob' });
  const p = { repo: 'acme/widgets', issue: 7, body: 'LGTM' };
  const a = needsApproval(await ask(k.grant, 'add_comment', p), 'first');
  // add_comment offers exact rules only, for at most 1 h.
  const page = await openPage('bob', a.approval_uri);
  assert.match(page.html, /Allow exactly this call again/);
  assert.doesNotMatch(page.html, /with these values fixed/);
  assert.doesNotMatch(page.html, /8 hours/);
  const done = await post('bob', a.approval_uri, { csrf: page.form.fields.csrf, decision: 'standing', rule: 'exact', for: '3600', uses: '1' });
  assert.equal(done.status, 200, done.html.slice(0, 300));
  assert.match(done.html, /at most 1 times|at most 1 time/);
  const ruleId = ruleRows(`consent_id = '${k.cid}'`).split('|')[0];
  released(await ask(k.grant, 'add_comment', p), 'approved once');
  // Another body is another call.
  needsApproval(await ask(k.grant, 'add_comment', { ...p, body: 'LGTM!' }), 'another body');
  released(await ask(k.grant, 'add_comment', p), 'the rule\'s one use');
  needsApproval(await ask(k.grant, 'add_comment', p), 'used up');
  assert.equal(ruleRows(`id = '${ruleId}'`).split('|')[2], '1');

  // Expired: a second rule, its expiry moved into the past.
  const p2 = { repo: 'acme/widgets', issue: 8, body: 'ok' };
  const a2 = needsApproval(await ask(k.grant, 'add_comment', p2), 'second');
  assert.equal((await approveWithRule('bob', a2.approval_uri, { rule: 'exact', for: '900', uses: '0' })).done.status, 200);
  released(await ask(k.grant, 'add_comment', p2), 'approved once');
  released(await ask(k.grant, 'add_comment', p2), 'by the rule');
  v.sql(`UPDATE standing_rules SET expires_at = 1 WHERE consent_id = '${k.cid}' AND max_uses = 0`);
  needsApproval(await ask(k.grant, 'add_comment', p2), 'expired');
});

test('the form cannot widen what the action offers: durations, kinds, use counts, the never-open repo', async () => {
  const k = await connect({ user: 'carol' });
  const p = { repo: 'acme/widgets', title: 'x' };
  const a = needsApproval(await ask(k.grant, 'create_issue', p), 'first');
  const cases = [
    [{ rule: 'match', for: '28801' }, /longer than this action allows/],
    [{ rule: 'match', for: '59' }, /longer than this action allows/],
    [{ rule: 'match', for: '900', uses: '10001' }, /uses is out of bounds/],
    [{ rule: 'match', for: '900', k7: 'on' }, /not among this call/],
    [{ rule: 'match' }, /Choose how long/],
    [{ for: '900' }, /Choose how long/],
  ];
  for (const [fields, why] of cases) {
    const { done } = await approveWithRule('carol', a.approval_uri, fields);
    assert.equal(done.status, 400, `${JSON.stringify(fields)}: ${done.status}`);
    assert.match(done.html, why, JSON.stringify(fields));
  }
  assert.equal(ruleRows(`consent_id = '${k.cid}'`), '', 'no rule made');
  assert.equal(v.sql(`SELECT status FROM approvals WHERE id = '${a.approval_request_id}'`), 'pending', 'nothing decided');
  // A match rule on an exact-only action, a rule on an action without rules.
  const c = needsApproval(await ask(k.grant, 'add_comment', p), 'comment');
  assert.match((await approveWithRule('carol', c.approval_uri, { rule: 'match', for: '900', k1: 'on' })).done.html, /offers no such rule/);
  const d = needsApproval(await ask(k.grant, 'close_issue', p), 'close');
  assert.doesNotMatch((await openPage('carol', d.approval_uri)).html, /fieldset id="standing"/);
  assert.match((await approveWithRule('carol', d.approval_uri, { rule: 'exact', for: '900' })).done.html, /offers no such rule/);
  // Only title ticked (k1 = title): repo stays fixed all the same.
  const { done } = await approveWithRule('carol', a.approval_uri, { rule: 'match', for: '900', k1: 'on' });
  assert.equal(done.status, 200, done.html.slice(0, 300));
  assert.match(v.sql(`SELECT details FROM standing_rules WHERE consent_id = '${k.cid}'`),
    /"match":\{"repo":\{"exact":"acme\/widgets"\},"title":\{"exact":"x"\}\}/);
  released(await ask(k.grant, 'create_issue', p), 'approved');
  released(await ask(k.grant, 'create_issue', p), 'by the rule');
  needsApproval(await ask(k.grant, 'create_issue', { repo: 'acme/other', title: 'x' }), 'repo fixed');
  needsApproval(await ask(k.grant, 'create_issue', { repo: 'acme/widgets', title: 'y' }), 'title fixed');
});

test('revoking the consent ends its rules; admins list and end rules through the admin API', async () => {
  const k = await connect({ user: 'dave' });
  const p = { repo: 'acme/widgets', title: 'x' };
  const a = needsApproval(await ask(k.grant, 'create_issue', p), 'first');
  assert.equal((await approveWithRule('dave', a.approval_uri, { rule: 'match', for: '3600' })).done.status, 200);
  released(await ask(k.grant, 'create_issue', p), 'approved');
  const b = needsApproval(await ask(k.grant, 'add_comment', p), 'comment');
  assert.equal((await approveWithRule('dave', b.approval_uri, { rule: 'exact', for: '900' })).done.status, 200);
  released(await ask(k.grant, 'add_comment', p), 'approved');
  const r1 = v.sql(`SELECT id FROM standing_rules WHERE consent_id = '${k.cid}' AND action = 'create_issue'`);
  const r2 = v.sql(`SELECT id FROM standing_rules WHERE consent_id = '${k.cid}' AND action = 'add_comment'`);

  // The admin API: a token from the command line.
  const mk = spawnSync(consentdBin, ['admin', 'token', 'create', '--name', 'rules-ops', '-c', v.c.cfgPath], { encoding: 'utf8' });
  assert.equal(mk.status, 0, mk.stderr);
  const token = mk.stdout.trim();
  const api = async (path, init = {}) => {
    const res = await fetch(`${v.url}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, ...(init.headers || {}) } });
    return { status: res.status, body: await res.json().catch(() => null) };
  };
  assert.equal((await fetch(`${v.url}/admin/api/rules`)).status, 401, 'no token, no list');
  const list = await api('/admin/api/rules');
  assert.equal(list.status, 200);
  const mine = list.body.rules.filter((x) => x.consent_id === k.cid);
  assert.deepEqual(mine.map((x) => x.id).sort(), [r1, r2].sort());
  const m = mine.find((x) => x.id === r1);
  assert.equal(m.subject, 'dave');
  assert.equal(m.action, 'create_issue');
  assert.deepEqual(m.fixed, { repo: 'acme/widgets' });
  assert.deepEqual(m.details.actions, ['create_issue']);
  assert.equal(m.details.type, 'agent_action');
  const ended = await api(`/admin/api/rules/${r2}/end`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  assert.deepEqual(ended, { status: 200, body: { ended: true } });
  assert.deepEqual((await api(`/admin/api/rules/${r2}/end`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).body, { ended: false });
  assert.equal((await api('/admin/api/rules/nosuchrule/end', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status, 404);
  assert.match(audit(`action = 'standing.ended'`), new RegExp(`rule=${r2}; action=add_comment; by=an admin`));
  needsApproval(await ask(k.grant, 'add_comment', p), 'ended by an admin');

  // r1 still lets a call through; revoking the consent ends it with the consent.
  released(await ask(k.grant, 'create_issue', { ...p, title: 'y' }), 'by the rule');
  const me = await openPage('dave', `${v.url}/me/consents/${k.cid}/revoke`);
  const rv = await post('dave', `${v.url}/me/consents/${k.cid}/revoke`, { csrf: me.form.fields.csrf, confirm: 'yes' });
  assert.ok(rv.status === 303 || rv.status === 200, `revoke: ${rv.status}`);
  assert.match(v.sql(`SELECT ended_by FROM standing_rules WHERE id = '${r1}'`), /revoked with its consent/);
  const after = await ask(k.grant, 'create_issue', { ...p, title: 'z' });
  assert.equal(after.body?.access_token, undefined, `after revocation: ${JSON.stringify(after.body)}`);
  assert.equal((await api('/admin/api/rules')).body.rules.filter((x) => x.consent_id === k.cid).length, 0);
});
