// /me as the person's control panel, and the way in and out (issue #14.5, .6), as Chromium
// shows them: the real login IdP, the downstream IdP as the provider, the real binary.
//
// - `/` offers "Sign in", and "Your consents" once signed in;
// - each consent's permissions with their descriptions, and its last use, which moves
//   when a grant is issued;
// - revoking asks first (Cancel keeps it), then says what happened; the consent moves to
//   the history, which says when and by whom (you, a newer consent, an administrator
//   through the admin API) and why;
// - pending consent requests and approvals, each with agent, action, resource, expiry and
//   a link that opens it;
// - a denial and an unticked permission show "blocked from asking again until <time>",
//   with "Allow it to ask again": then the gateway's next exchange answers
//   consent_required instead of access_denied;
// - cancelling at the provider and at the IdP is said in words; signing out lands on a
//   page that says so, and what became of the IdP's session.
// Each of these pages, in the state shown, passes axe-core with no serious or critical
// violation (as tests/e2e/a11y.test.js holds the others).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import AxeBuilder from '@axe-core/playwright';
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startVaultStack, signedInJars } from '../lib/vaultstack.js';
import { launchBrowser, idpSignIn, revokeInBrowser } from '../lib/browser.js';
import { consentdBin } from '../lib/consentd.js';
import { pollExchange, TOKEN_EXCHANGE, TT_ACCESS_TOKEN } from '../lib/gateway.js';

const shots = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'build', 'e2e');
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
// consentd's way of writing a time (UTC seconds) on its pages: <time datetime="ISO"
// title="UTC text">, the text turned into the reader's local time by /static/local-time.js.
const shown = (t) => `${new Date(t * 1000).toISOString().slice(0, 16).replace('T', ' ')} UTC`;
const isoOf = (t) => new Date(t * 1000).toISOString().replace('.000', '');
const CONFIG = {
  'action.github.create_issue': { description: 'Open an issue', scope: 'issues:write', approval: 'required',
    approval_enforced_by: 'gateway' },  // the gateway holds the released token to the call (#32)
};

let v; let b; let page;
const jarOf = signedInJars();
before(async () => {
  v = await startVaultStack({ accessTokenTTL: 60, config: CONFIG });
  b = await launchBrowser();
  page = await b.newPage();
  mkdirSync(shots, { recursive: true });
});
after(async () => { await b?.close(); await v?.stop(); });

const ask = async (user, args) => ({ subjectToken: await v.idToken(user), ...args });
const cidOf = async (grant) => (await v.gw.verify(grant)).payload.cid;
const text = (sel) => page.textContent(sel);
// The time shown by the <time> element at sel: its UTC title, checked against its datetime.
async function timeAt(sel) {
  const [title, iso] = [await page.getAttribute(sel, 'title'), await page.getAttribute(sel, 'datetime')];
  assert.equal(title, shown(Date.parse(iso) / 1000), `${sel}: title and datetime agree`);
  return title;
}
const one = (q) => v.sql(q);

// axe-core on what the page shows now: no serious or critical violation.
async function axeClean(label) {
  const r = await new AxeBuilder({ page }).analyze();
  assert.ok(r.passes.length > 10, `${label}: axe ran`);
  const bad = r.violations.filter((x) => ['serious', 'critical'].includes(x.impact))
    .flatMap((x) => x.nodes.map((n) => `${x.id} (${x.impact}): ${x.help} -- ${n.target.join(' ')}`));
  assert.deepEqual(bad, [], `${label}: axe violations`);
}

// The gateway asks; the person decides in Chromium (approve with the boxes named, all by
// default, or deny) -> the request id.
async function decideInBrowser(args, { decision = 'approve', untick = [] } = {}) {
  const first = await v.gw.exchange(args);
  assert.equal(first.body?.error, 'consent_required', JSON.stringify(first.body));
  await page.goto(first.body.consent_uri);
  await page.waitForSelector('button[value=approve]');
  for (const name of untick) await page.uncheck(`input[name=${name}]`);
  await Promise.all([page.waitForLoadState('load'), page.click(`button[value=${decision}]`)]);
  await page.waitForSelector(decision === 'approve' ? 'text=Permission given' : 'text=Request denied');
  return first.body.consent_request_id;
}

test('/ offers "Sign in" before and "Your consents" after signing in', async () => {
  await page.goto(`${v.url}/`);
  assert.equal(await page.textContent('a[href="/login"]'), 'Sign in');
  assert.equal(await page.$('a[href="/me"].button'), null, 'no "Your consents" without a session');
  await Promise.all([page.waitForURL((u) => u.href.startsWith(v.idp.issuer)), page.click('a:has-text("Sign in")')]);
  await idpSignIn(page, { user: 'alice', backTo: v.url });
  assert.equal(new URL(page.url()).pathname, '/me', 'signing in from / lands on /me');
  await page.goto(`${v.url}/`);
  assert.equal(await page.textContent('a.button[href="/me"]'), 'Your consents');
  assert.match(await text('main'), /You are signed in as Alice Example/);
  assert.equal(await page.$('a[href="/login"]'), null);
  await axeClean('/ signed in');
  await Promise.all([page.waitForURL(`${v.url}/me`), page.click('a:has-text("Your consents")')]);
});

test('descriptions and last use; Revoke asks first, then says what happened; the history says by you', async () => {
  const args = await ask('alice', { audience: 'notes', scope: 'read write', agentId: 'coder' });
  await decideInBrowser(args);
  const g = await pollExchange(v.gw, args);
  assert.equal(g.status, 200, JSON.stringify(g.body));
  const cid = await cidOf(g.body.access_token);
  await page.goto(`${v.url}/me`);
  const entry = `#active #consent-${cid}`;
  const shownNow = await text(entry);
  assert.match(shownNow, /Read your notes\s*read/);
  assert.match(shownNow, /Create and edit notes\s*write/);
  assert.match(await text(`${entry} .last-used`), /^last used \S/);
  assert.equal(await timeAt(`${entry} .last-used time`), shown(Number(one(`SELECT last_used_at FROM consents WHERE id = '${cid}'`))));

  // Last use moves with the next grant: set back a year's worth, then one exchange.
  one(`UPDATE consents SET last_used_at = 1000000000 WHERE id = '${cid}'`);
  await page.reload();
  assert.equal(await timeAt(`${entry} .last-used time`), '2001-09-09 01:46 UTC');
  assert.equal(await page.getAttribute(`${entry} .last-used time`, 'datetime'), '2001-09-09T01:46:40Z');
  await sleep(1100);
  const g2 = await v.gw.exchange(args);
  assert.equal(g2.status, 200, JSON.stringify(g2.body));
  const used = Number(one(`SELECT last_used_at FROM consents WHERE id = '${cid}'`));
  assert.ok(Math.abs(used - Date.now() / 1000) < 10, `last_used_at ${used}`);
  await page.reload();
  assert.equal(await timeAt(`${entry} .last-used time`), shown(used));
  assert.equal(await page.getAttribute(`${entry} .last-used time`, 'datetime'), isoOf(used));
  // /static/local-time.js wrote it in the reader's local time; the UTC text is the tooltip.
  assert.notEqual(await text(`${entry} .last-used time`), shown(used));
  await page.screenshot({ path: join(shots, 'me-panel.png'), fullPage: true });

  // "Revoke…" opens the confirmation; Cancel keeps the consent.
  await Promise.all([page.waitForURL(`${v.url}/me/consents/${cid}/revoke`), page.click(`${entry} a:has-text("Revoke")`)]);
  const confirm = await text('main');
  assert.match(confirm, /Revoke Coding assistant's access to Team notes\?/);
  assert.match(confirm, /Read your notes/);
  assert.match(confirm, /every grant it holds stops working at once/);
  await page.screenshot({ path: join(shots, 'me-revoke-confirm.png'), fullPage: true });
  await axeClean('revoke confirmation');
  await Promise.all([page.waitForURL(`${v.url}/me`), page.click('a:has-text("Cancel, keep it")')]);
  assert.ok(await page.$(entry), 'still acting for you');
  assert.equal((await v.gw.introspect(g2.body.access_token)).body.active, true);

  // Confirmed: the page says what happened, and it did.
  const said = await revokeInBrowser(page, { url: v.url, cid });
  assert.match(said, /Coding assistant can no longer use Team notes\. Its grants stopped working at once\./);
  assert.deepEqual((await v.gw.introspect(g2.body.access_token)).body, { active: false });
  const revokedAt = Number(one(`SELECT revoked_at FROM consents WHERE id = '${cid}'`));
  assert.match(said, /You revoked it \S/);
  await axeClean('revoked');
  assert.equal(await timeAt('main p.muted time'), shown(revokedAt));
  await page.click('a:has-text("Back to your consents")');
  await page.waitForSelector('#history');
  assert.equal(await page.$(entry), null, 'no longer among the agents acting for you');
  const hist = `#history #consent-${cid}`;
  assert.equal(await text(`${hist} .how`), 'Revoked by you');
  assert.equal(await timeAt(`${hist} .ended-at time`), shown(revokedAt));
  assert.match(await text(hist), /Coding assistant on Team notes/);
});

test('an unticked permission: blocked from asking for it until <time>; allowed again; then replaced', async () => {
  const args = await ask('alice', { audience: 'notes', scope: 'read write', agentId: 'butler' });
  const rid = await decideInBrowser(args, { untick: ['s1'] });
  const g = await pollExchange(v.gw, args);
  assert.equal(g.status, 200, JSON.stringify(g.body));
  assert.equal(g.body.scope, 'read');
  const cid = await cidOf(g.body.access_token);
  const writeOnly = { ...args, scope: 'write' };
  assert.equal((await v.gw.exchange(writeOnly)).body?.error, 'access_denied');

  await page.goto(`${v.url}/me`);
  const block = `#block-${rid}`;
  const decided = Number(one(`SELECT decided_at FROM consent_requests WHERE id = '${rid}'`));
  const said = await text(block);
  assert.match(said, /You declined Butler these permissions on Team notes/);
  assert.match(said, /Create and edit notes\s*write/);
  assert.match(said, /Butler is blocked from asking for them again until \S.*\./);
  assert.equal(await timeAt(`${block} .until time`), shown(decided + 3600));
  assert.match(await text(`#active #consent-${cid}`), /You declined: Create and edit notes/);
  await Promise.all([page.waitForURL(`${v.url}/me`), page.click(`${block} button:has-text("Allow it to ask again")`)]);
  assert.equal(await page.$(block), null, 'the block is gone');

  // It asks again; the person gives both; the first consent is replaced.
  await sleep(1100);
  const rid2 = await decideInBrowser(writeOnly);
  assert.notEqual(rid2, rid);
  const g2 = await pollExchange(v.gw, writeOnly);
  assert.equal(g2.status, 200, JSON.stringify(g2.body));
  const cid2 = await cidOf(g2.body.access_token);
  await page.goto(`${v.url}/me`);
  assert.ok(await page.$(`#active #consent-${cid2}`));
  const hist = `#history #consent-${cid}`;
  assert.equal(await text(`${hist} .how`), 'Replaced by a newer consent');
  assert.match(await text(`${hist} .why`), /you approved a newer request from this agent for the same account/);
  assert.equal(await timeAt(`${hist} .ended-at time`), shown(Number(one(`SELECT revoked_at FROM consents WHERE id = '${cid}'`))));
});

test('revoked by an administrator through the admin API: the history says so, and why', async () => {
  const args = await ask('alice', { audience: 'wiki', scope: 'read', agentId: 'coder' });
  await decideInBrowser(args);
  const g = await pollExchange(v.gw, args);
  const cid = await cidOf(g.body.access_token);
  const mk = spawnSync(consentdBin, ['admin', 'token', 'create', '--name', 'ops', '-c', v.c.cfgPath], { encoding: 'utf8' });
  assert.equal(mk.status, 0, mk.stderr);
  const res = await fetch(`${v.url}/admin/api/consents/${cid}/revoke`, {
    method: 'POST', body: JSON.stringify({ reason: 'Left the wiki project' }),
    headers: { authorization: `Bearer ${mk.stdout.trim()}`, 'content-type': 'application/json' },
  });
  assert.equal(res.status, 200, await res.text());
  await page.goto(`${v.url}/me`);
  const hist = `#history #consent-${cid}`;
  assert.equal(await text(`${hist} .how`), 'Revoked by an administrator');
  assert.equal(await text(`${hist} .why`), ' — Left the wiki project');
  assert.match(await text(hist), /Coding assistant on Wiki/);
  assert.equal(await page.$(`#active #consent-${cid}`), null);
});

test('pending requests and approvals are listed with agent, action, resource, expiry and a link', async () => {
  // A connected GitHub consent (over HTTP, as the same person), then an approval-required action.
  const jar = await jarOf(v.url, 'alice');
  const gh = await ask('alice', { audience: 'github', scope: 'issues:read issues:write', agentId: 'coder' });
  const first = await v.gw.exchange(gh);
  const c = await v.connectHttp({ jar, consentUri: first.body.consent_uri, user: 'alice' });
  assert.equal(c.first?.status, 303, c.text?.slice(0, 300));
  const g = await pollExchange(v.gw, gh);
  assert.equal(g.status, 200, JSON.stringify(g.body));
  const a = await v.gw.post('/token', {
    grant_type: TOKEN_EXCHANGE, subject_token: g.body.access_token, subject_token_type: TT_ACCESS_TOKEN,
    requested_token_type: TT_ACCESS_TOKEN, action: 'create_issue',
    authorization_details: JSON.stringify([{ type: 'agent_action', action: 'create_issue', parameters: { title: 'x' } }]),
  });
  assert.equal(a.body?.error, 'approval_required', a.text);
  const aid = a.body.approval_request_id;
  const pending = await v.gw.exchange(await ask('alice', { audience: 'gitlab', scope: 'issues:read', agentId: 'coder' }));
  assert.equal(pending.body?.error, 'consent_required', pending.text);
  const rid = pending.body.consent_request_id;

  await page.goto(`${v.url}/me`);
  // Last use of the GitHub consent: its grant (never a release yet).
  const gcid = await cidOf(g.body.access_token);
  assert.match(await text(`#active #consent-${gcid} .last-used`), /^last used \S/);
  const ap = await text(`#approval-${aid}`);
  assert.match(ap, /Coding assistant wants to Open an issue \(create_issue\) on GitHub\./);
  const aexp = Number(one(`SELECT expires_at FROM approvals WHERE id = '${aid}'`));
  assert.match(ap, /expires \S/);
  assert.equal(await timeAt(`#approval-${aid} time`), shown(aexp));
  const rq = await text(`#request-${rid}`);
  assert.match(rq, /Coding assistant asks to use GitLab/);
  assert.match(rq, /Read issues\s*issues:read/);
  const rexp = Number(one(`SELECT expires_at FROM consent_requests WHERE id = '${rid}'`));
  assert.match(rq, /expires \S/);
  assert.equal(await timeAt(`#request-${rid} time`), shown(rexp));
  await page.screenshot({ path: join(shots, 'me-pending.png'), fullPage: true });
  // Each link opens its page.
  await Promise.all([page.waitForURL(`${v.url}/approve/${aid}`), page.click(`#approval-${aid} a:has-text("Review the action")`)]);
  assert.match(await text('main'), /create_issue/);
  await page.goto(`${v.url}/me`);
  await Promise.all([page.waitForURL(`${v.url}/consent/${rid}`), page.click(`#request-${rid} a:has-text("Review the request")`)]);
  assert.ok(await page.$('button[value=approve]'), 'the consent page, ready to decide');
});

test('a denial: "blocked from asking again until <time>", and Allow it to ask again -> consent_required', async () => {
  const args = await ask('alice', { audience: 'gitlab', scope: 'issues:read', agentId: 'butler' });
  const rid = await decideInBrowser(args, { decision: 'deny' });
  const decided = Number(one(`SELECT decided_at FROM consent_requests WHERE id = '${rid}'`));
  // The page after the click says it, with the way back.
  assert.match(await text('main'), /It cannot ask again until \S.*\. Changed your mind\?/);
  assert.equal(await timeAt('main .notice time'), shown(decided + 3600));
  await axeClean('request denied, with its block');
  assert.equal((await v.gw.exchange(args)).body?.error, 'access_denied');
  await Promise.all([page.waitForURL(`${v.url}/me#blocked`), page.click('a:has-text("Allow it to ask again")')]);
  const block = `#block-${rid}`;
  const said = await text(block);
  assert.match(said, /You denied Butler's request to use GitLab/);
  assert.match(said, /Read issues\s*issues:read/);
  assert.match(said, /Butler is blocked from asking again until \S.*\./);
  assert.equal(await timeAt(`${block} .until time`), shown(decided + 3600));
  await page.screenshot({ path: join(shots, 'me-blocked.png'), fullPage: true });
  await axeClean('/me with a block, pending requests, approvals, consents and history');
  assert.equal((await v.gw.exchange(args)).body?.error, 'access_denied', 'still blocked');
  await Promise.all([page.waitForURL(`${v.url}/me`), page.click(`${block} button:has-text("Allow it to ask again")`)]);
  assert.equal(await page.$(block), null, 'the block is gone');
  const again = await v.gw.exchange(args);
  assert.equal(again.body?.error, 'consent_required', JSON.stringify(again.body));
  assert.notEqual(again.body.consent_request_id, rid);
});

test('cancelling at the provider is said in words', async () => {
  const args = await ask('alice', { audience: 'github', scope: 'issues:read', agentId: 'butler' });
  const first = await v.gw.exchange(args);
  await page.goto(first.body.consent_uri);
  await Promise.all([page.waitForURL((u) => u.href.startsWith(v.ds.issuer)), page.click('button[value=approve]')]);
  await page.waitForSelector('#abort');
  await Promise.all([page.waitForURL((u) => u.href.startsWith(`${v.url}/consent/`)), page.click('#abort')]);
  const said = await text('main');
  assert.match(said, /You cancelled at GitHub, so Butler was not connected to it and nothing was given\./);
  assert.doesNotMatch(said, /access_denied|aborted/i);
});

test('signing out says so, and what became of the IdP session; cancelling at the IdP is said in words', async () => {
  await page.goto(`${v.url}/me`);
  await Promise.all([page.waitForURL(`${v.url}/?state=signed-out`), page.click('button:has-text("Sign out")')]);
  assert.equal(await text('h1'), 'You are signed out');
  const said = await text('#signed-out');
  assert.match(said, /You are signed out of consentd/);
  assert.match(said, /also sent you to your identity provider, http:\/\/127\.0\.0\.1:\d+, to sign out there/);
  await page.screenshot({ path: join(shots, 'signed-out.png'), fullPage: true });
  await axeClean('signed out');
  // It did end there: /me now needs the IdP's sign-in form again.
  await page.goto(`${v.url}/me`);
  await page.waitForSelector('input[name=login]');
  assert.ok(page.url().startsWith(v.idp.issuer));
  // Cancelling that sign-in: consentd's words, not the IdP's error text.
  await Promise.all([page.waitForURL((u) => u.href.startsWith(`${v.url}/callback`)), page.click('#abort')]);
  const cancelled = await text('main');
  assert.match(cancelled, /Sign-in cancelled/);
  assert.match(cancelled, /You cancelled the sign-in at your identity provider, so you are not signed in/);
  assert.doesNotMatch(cancelled, /access_denied|End-User aborted/);
});
