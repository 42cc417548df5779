// /me as the person's control panel (issue #14.5, .6) against the real binary and the
// real IdP, over plain HTTP: the token endpoint's side of [consent] deny_cooldown -- a
// denial, and a scope the person unticked, answer access_denied until the person lets
// the agent ask again on /me ("Allow it to ask again", a CSRF-protected POST) or the
// cooldown ends; revoking needs the confirmation page's form; a grant records the
// consent's last use; the front page's entry and logout's landing words.  What Chromium
// shows of each is tests/e2e/me.test.js.
//
//   main stack triples: alice/coder/notes (denial), carol/coder/notes (decline),
//                       bob/coder/notes (revocation); the cooldown stack its own
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from '../lib/stack.js';
import { getIdToken } from '../lib/idplogin.js';
import { consentdLogin, req, postForm, revokeOnMe } from '../lib/weblogin.js';
import { gateway } from '../lib/gateway.js';
import { consentConfig, GATEWAY_APP } from '../lib/fixtures.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });

// A stack with a gateway client, ID tokens and signed-in jars per person.
async function harness(opts) {
  const s = await startStack(opts);
  const gw = gateway({ url: s.url });
  const tokens = new Map();
  const jars = new Map();
  return {
    s, gw, url: s.url,
    async ask(user, args) {
      if (!tokens.has(user)) {
        tokens.set(user, (await getIdToken({
          issuer: s.idp.issuer, ...GATEWAY_APP, user, password: `${user}-password`,
        })).id_token);
      }
      return gw.exchange({ subjectToken: tokens.get(user), ...args });
    },
    async jar(user) {
      if (!jars.has(user)) {
        const { jar, final } = await consentdLogin({ url: s.url, user, password: `${user}-password` });
        assert.equal(final.status, 303, `login of ${user}`);
        jars.set(user, jar);
      }
      return jars.get(user);
    },
    sql: (query) => s.c.rows(query),
    stop: () => s.stop(),
  };
}

async function openPage(jar, url) {
  const res = await req(jar, url);
  const html = await res.text();
  return { status: res.status, html, headers: res.headers, form: postForm(html) };
}

async function postPage(jar, url, fields, headers = {}) {
  const h = { 'content-type': 'application/x-www-form-urlencoded', origin: new URL(url).origin, ...headers };
  for (const k of Object.keys(h)) if (h[k] === null) delete h[k];
  const res = await req(jar, url, { method: 'POST', headers: h, body: new URLSearchParams(fields).toString() });
  return { status: res.status, html: await res.text(), headers: res.headers };
}

// The person decides on the consent page at uri: approve with the boxes named (all by
// default) or deny.
async function decide(jar, uri, { decision = 'approve', boxes, duration } = {}) {
  const page = await openPage(jar, uri);
  assert.equal(page.status, 200, page.html.slice(0, 300));
  const f = { csrf: page.form.fields.csrf, decision, version: page.form.fields.version };
  for (const name of Object.keys(page.form.fields)) {
    if (/^s\d+$/.test(name) && (!boxes || boxes.includes(name))) f[name] = 'on';
  }
  f.duration = duration ?? (page.html.match(/<option value="(\d+)"/) || [])[1];
  const done = await postPage(jar, uri, f);
  assert.equal(done.status, 200, done.html.slice(0, 300));
  return done;
}

function assertError(r, error, what) {
  assert.equal(r.status, 400, `${what}: ${r.text}`);
  assert.equal(r.body?.error, error, `${what}: ${r.text}`);
}

// The CSRF token of a person's session (in every form of /me).
async function csrfOf(jar, url) {
  return (await openPage(jar, `${url}/me`)).form.fields.csrf;
}

let h;
before(async () => { h = await harness({ config: consentConfig() }); });
after(async () => { await h?.stop(); });

test('a denial holds at the token endpoint until the person lets the agent ask again on /me', async () => {
  const ask = { agentId: 'coder', audience: 'notes', scope: 'read' };
  const first = await h.ask('alice', ask);
  assertError(first, 'consent_required', 'first call');
  const rid = first.body.consent_request_id;
  const jar = await h.jar('alice');
  const done = await decide(jar, first.body.consent_uri, { decision: 'deny' });
  // The page after the click says how long it holds, and where to lift it.
  assert.match(done.html, /It cannot ask again until <time datetime="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ" title="\d{4}-\d\d-\d\d \d\d:\d\d UTC">\d{4}-\d\d-\d\d \d\d:\d\d UTC<\/time>\./);
  assert.match(done.html, /href="\/me#blocked"/);
  assertError(await h.ask('alice', ask), 'access_denied', 'after the denial');

  const me = await openPage(jar, `${h.url}/me`);
  assert.match(me.html, new RegExp(`id="block-${rid}"`));
  const decidedAt = h.sql(`SELECT decided_at FROM consent_requests WHERE id = '${rid}'`)[0].decided_at;
  const iso = new Date((decidedAt + 3600) * 1000).toISOString().replace('.000', '');
  const until = `${iso.slice(0, 16).replace('T', ' ')} UTC`;
  assert.ok(me.html.includes(`blocked from asking again until <strong><time datetime="${iso}" title="${until}">${until}</time></strong>`), me.html);
  assert.ok(me.html.includes(`action="/me/requests/${rid}/allow"`));

  // Refused: another person's session (as if missing), a wrong or missing CSRF token, a
  // foreign Origin.  The agent stays blocked and nothing is audited.
  const allow = `${h.url}/me/requests/${rid}/allow`;
  const bob = await h.jar('bob');
  const other = await postPage(bob, allow, { csrf: await csrfOf(bob, h.url) });
  assert.equal(other.status, 404, other.html.slice(0, 300));
  assert.doesNotMatch(other.html, /Coding assistant/);
  const csrf = await csrfOf(jar, h.url);
  assert.equal((await postPage(jar, allow, { csrf: 'A'.repeat(43) })).status, 403);
  assert.equal((await postPage(jar, allow, {})).status, 400);
  assert.equal((await postPage(jar, allow, { csrf }, { origin: 'http://evil.example' })).status, 403);
  assert.equal((await postPage(jar, `${h.url}/me/requests/AAAAAAAAAAAAAAAAAAAAAA/allow`, { csrf })).status, 404);
  assertError(await h.ask('alice', ask), 'access_denied', 'after the refused lifts');
  assert.equal(h.sql("SELECT count(*) AS n FROM audit WHERE action = 'consent.cooldown_lifted'")[0].n, 0);

  // The person: back to /me, the block gone, audited; the next call asks her again.
  const ok = await postPage(jar, allow, { csrf });
  assert.equal(ok.status, 303, ok.html.slice(0, 300));
  assert.equal(ok.headers.get('location'), '/me');
  const rows = h.sql(`SELECT actor, request_id, detail FROM audit WHERE action = 'consent.cooldown_lifted'`);
  assert.deepEqual(rows, [{ actor: 'user:alice', request_id: rid, detail: 'denied' }]);
  assert.doesNotMatch((await openPage(jar, `${h.url}/me`)).html, new RegExp(`block-${rid}`));
  const again = await h.ask('alice', ask);
  assertError(again, 'consent_required', 'after lifting');
  assert.notEqual(again.body.consent_request_id, rid, 'a new request');
  // Lifting twice is harmless.
  assert.equal((await postPage(jar, allow, { csrf })).status, 303);
  assert.equal(h.sql("SELECT count(*) AS n FROM audit WHERE action = 'consent.cooldown_lifted'")[0].n, 1);
  // A request still pending holds nobody back: nothing to allow.
  const pending = await postPage(jar, `${h.url}/me/requests/${again.body.consent_request_id}/allow`, { csrf });
  assert.equal(pending.status, 400, pending.html.slice(0, 300));
});

test('a declined scope answers like a denial of that scope within deny_cooldown, until lifted', async () => {
  const ask = { agentId: 'coder', audience: 'notes', scope: 'read write' };
  const first = await h.ask('carol', ask);
  assertError(first, 'consent_required', 'first call');
  const rid = first.body.consent_request_id;
  const jar = await h.jar('carol');
  await decide(jar, first.body.consent_uri, { boxes: ['s0'] });          // read ticked, write not
  const g = await h.ask('carol', ask);
  assert.equal(g.status, 200, g.text);
  assert.equal(g.body.scope, 'read', 'the granted part is answered from the consent');
  // Only the declined scope: access_denied, and no new request for the person.
  assertError(await h.ask('carol', { ...ask, scope: 'write' }), 'access_denied', 'the declined scope alone');
  assert.equal(h.sql("SELECT count(*) AS n FROM consent_requests r JOIN users u ON u.id = r.user_id WHERE u.subject = 'carol'")[0].n, 1);

  const me = await openPage(jar, `${h.url}/me`);
  assert.match(me.html, new RegExp(`id="block-${rid}"`));
  assert.match(me.html, /You declined <strong>Coding assistant<\/strong> these permissions/);
  assert.match(me.html, /Create and edit notes <code>write<\/code>/);
  assert.match(me.html, /blocked from asking for them again until/);

  const ok = await postPage(jar, `${h.url}/me/requests/${rid}/allow`, { csrf: me.form.fields.csrf });
  assert.equal(ok.status, 303, ok.html.slice(0, 300));
  assert.equal(h.sql("SELECT detail FROM audit WHERE action = 'consent.cooldown_lifted' AND request_id = '" + rid + "'")[0].detail, 'declined');
  const again = await h.ask('carol', { ...ask, scope: 'write' });
  assertError(again, 'consent_required', 'after lifting');
  // The person is asked for write again, with read, which she already gave, pre-ticked.
  assert.deepEqual(h.sql(`SELECT scopes, pre_granted FROM consent_requests WHERE id = '${again.body.consent_request_id}'`),
    [{ scopes: 'read write', pre_granted: 'read' }]);
  assert.match((await openPage(jar, again.body.consent_uri)).html, /Create and edit notes/);
});

test('deny_cooldown ends both blocks by itself; an expired consent moves to the history', async () => {
  const x = await harness({ config: consentConfig({ consent: { interval: 1, request_ttl: 600, deny_cooldown: 2, max_pending_per_user: 5 } }) });
  try {
    const jar = await x.jar('alice');
    const denied = { agentId: 'coder', audience: 'notes', scope: 'read' };
    const d1 = await x.ask('alice', denied);
    await decide(jar, d1.body.consent_uri, { decision: 'deny' });
    const declined = { agentId: 'butler', audience: 'notes', scope: 'read write' };
    const d2 = await x.ask('alice', declined);
    await decide(jar, d2.body.consent_uri, { boxes: ['s0'] });
    assertError(await x.ask('alice', denied), 'access_denied', 'the denial');
    assertError(await x.ask('alice', { ...declined, scope: 'write' }), 'access_denied', 'the decline');
    // A consent given for 2 seconds (the form's duration is any 1 .. max_consent).
    const short = { agentId: 'coder', audience: 'wiki', scope: 'read' };
    const d3 = await x.ask('alice', short);
    await decide(jar, d3.body.consent_uri, { duration: '2' });
    const g = await x.ask('alice', short);
    assert.equal(g.status, 200, g.text);
    const cid = JSON.parse(Buffer.from(g.body.access_token.split('.')[1], 'base64url')).cid;
    assert.match((await openPage(jar, `${x.url}/me`)).html, new RegExp(`<div class="consent" id="consent-${cid}">`));
    await sleep(2500);
    const hist = (await openPage(jar, `${x.url}/me`)).html;
    assert.match(hist, new RegExp(`<div class="consent ended" id="consent-${cid}">\\s*<p><strong>Coding assistant</strong> on <strong>Wiki</strong>: <span class="how">Expired</span>`));
    assert.match(hist, /it reached the end of the time you chose/);
    assertError(await x.ask('alice', denied), 'consent_required', 'the denial after 2 s');
    assertError(await x.ask('alice', { ...declined, scope: 'write' }), 'consent_required', 'the decline after 2 s');
    assert.doesNotMatch((await openPage(jar, `${x.url}/me`)).html, /id="block-/);
  } finally {
    await x.stop();
  }
});

test('revoking on /me needs the confirmation page\'s form; then the page says what happened', async () => {
  const ask = { agentId: 'coder', audience: 'notes', scope: 'read' };
  const first = await h.ask('bob', ask);
  const jar = await h.jar('bob');
  await decide(jar, first.body.consent_uri);
  const t0 = Math.floor(Date.now() / 1000);
  const g = await h.ask('bob', ask);
  assert.equal(g.status, 200, g.text);
  const cid = JSON.parse(Buffer.from(g.body.access_token.split('.')[1], 'base64url')).cid;
  // The grant recorded a use of the consent, in its transaction.
  const used = h.sql(`SELECT last_used_at FROM consents WHERE id = '${cid}'`)[0].last_used_at;
  assert.ok(used >= t0 - 1 && used <= t0 + 5, `last_used_at ${used}`);

  // /me offers a link to the confirmation, not a form that revokes.
  const me = await openPage(jar, `${h.url}/me`);
  assert.ok(me.html.includes(`href="/me/consents/${cid}/revoke"`));
  assert.ok(!me.html.includes(`action="/me/consents/${cid}/revoke"`));
  // A POST without the confirmation's field revokes nothing.
  const csrf = me.form.fields.csrf;
  const bare = await postPage(jar, `${h.url}/me/consents/${cid}/revoke`, { csrf });
  assert.equal(bare.status, 400, bare.html.slice(0, 300));
  assert.equal((await postPage(jar, `${h.url}/me/consents/${cid}/revoke`, { csrf, confirm: 'no' })).status, 400);
  assert.equal((await h.gw.introspect(g.body.access_token)).body.active, true);
  // Another person's confirmation page and revocation: as if there were none.
  const alice = await h.jar('alice');
  const seen = await openPage(alice, `${h.url}/me/consents/${cid}/revoke`);
  assert.equal(seen.status, 404);
  assert.doesNotMatch(seen.html, /Coding assistant/);
  const forged = await postPage(alice, `${h.url}/me/consents/${cid}/revoke`, { csrf: await csrfOf(alice, h.url), confirm: 'yes' });
  assert.equal(forged.status, 404);
  assert.equal((await h.gw.introspect(g.body.access_token)).body.active, true);

  // The person's confirmation page names what ends; its form revokes.
  const page = await openPage(jar, `${h.url}/me/consents/${cid}/revoke`);
  assert.equal(page.status, 200);
  assert.match(page.html, /Revoke Coding assistant&#39;s access to Team notes\?|Revoke Coding assistant's access to Team notes\?/);
  assert.match(page.html, /Read your notes <code>read<\/code>/);
  const rv = await revokeOnMe({ url: h.url, jar, cid });
  assert.equal(rv.status, 303);
  assert.equal(rv.headers.get('location'), `/me/consents/${cid}/revoked`);
  assert.deepEqual((await h.gw.introspect(g.body.access_token)).body, { active: false });
  const said = await openPage(jar, `${h.url}/me/consents/${cid}/revoked`);
  assert.equal(said.status, 200);
  assert.match(said.html, /Coding assistant can no longer use Team notes\.<\/strong> Its grants stopped working at once\./);
  assert.deepEqual(h.sql(`SELECT revoked_by, revoke_reason FROM consents WHERE id = '${cid}'`),
    [{ revoked_by: 'user:bob', revoke_reason: 'revoked by the person on /me' }]);
  // The confirmation page of a revoked consent goes to what happened; another's stays hidden.
  const again = await req(jar, `${h.url}/me/consents/${cid}/revoke`);
  assert.equal(again.status, 303);
  assert.equal(again.headers.get('location'), `/me/consents/${cid}/revoked`);
  assert.equal((await openPage(alice, `${h.url}/me/consents/${cid}/revoked`)).status, 404);
});

test('the front page offers Sign in, or Your consents with a session; logout\'s landing words are fixed', async () => {
  const anon = await fetch(`${h.url}/`);
  const a = await anon.text();
  assert.equal(anon.status, 200);
  assert.match(a, /<a class="button" href="\/login">Sign in<\/a>/);
  assert.doesNotMatch(a, /Your consents/);
  const jar = await h.jar('alice');
  const mine = await openPage(jar, `${h.url}/`);
  assert.match(mine.html, /<a class="button" href="\/me">Your consents<\/a>/);
  assert.match(mine.html, /signed in as <strong>/);
  assert.doesNotMatch(mine.html, /href="\/login"/);
  // Only two words: anything else is refused without being shown.
  const bad = await fetch(`${h.url}/?state=${encodeURIComponent('<b>you were hacked</b>')}`);
  assert.equal(bad.status, 400);
  assert.doesNotMatch(await bad.text(), /hacked/);
  const here = await (await fetch(`${h.url}/?state=signed-out-here`)).text();
  assert.match(here, /<h1>You are signed out<\/h1>/);
  assert.match(here, /Your session at your identity provider, <code>[^<]+<\/code>, was not ended\./);
  const via = await (await fetch(`${h.url}/?state=signed-out`)).text();
  assert.match(via, /also sent you to your identity provider/);
  // A session again (signed in since): nothing is said about signing out.
  assert.doesNotMatch((await openPage(jar, `${h.url}/?state=signed-out`)).html, /You are signed out/);
  // Logout without a session lands on the "here" words; with one it goes through the IdP.
  const gone = await fetch(`${h.url}/logout`, { method: 'POST', redirect: 'manual', body: 'csrf=' + 'A'.repeat(43), headers: { 'content-type': 'application/x-www-form-urlencoded', origin: h.url } });
  assert.equal(gone.status, 303);
  assert.equal(gone.headers.get('location'), '/?state=signed-out-here');
  const out = await postPage(jar, `${h.url}/logout`, { csrf: await csrfOf(jar, h.url) });
  assert.equal(out.status, 303);
  const loc = new URL(out.headers.get('location'));
  assert.equal(loc.searchParams.get('post_logout_redirect_uri'), `${h.url}/`);
  assert.equal(loc.searchParams.get('state'), 'signed-out');
});

// Issue 35: /me is headed by what it is, and the agents acting for the person come before
// the ones the person said no to.
test('/me: headed "Your consents"; "Agents acting for you" before "Agents you said no to"', async () => {
  const ok = { agentId: 'coder', audience: 'notes', scope: 'read' };
  const no = { agentId: 'butler', audience: 'notes', scope: 'read' };
  const jar = await h.jar('admin');
  const a = await h.ask('admin', ok);
  assertError(a, 'consent_required', 'coder');
  await decide(jar, a.body.consent_uri);
  const d = await h.ask('admin', no);
  assertError(d, 'consent_required', 'butler');
  await decide(jar, d.body.consent_uri, { decision: 'deny' });
  const me = await openPage(jar, `${h.url}/me`);
  assert.equal(me.status, 200);
  assert.match(me.html, /<title>Your consents · consentd<\/title>/);
  assert.match(me.html, /<h1>Your consents<\/h1>/);
  assert.doesNotMatch(me.html, /Signed in</);
  const active = me.html.indexOf('<section id="active">');
  const blocked = me.html.indexOf('<section id="blocked">');
  assert.ok(active > 0 && blocked > 0, 'both sections are there');
  assert.ok(active < blocked, 'acting for you first, then said no to');
  assert.ok(blocked < me.html.indexOf('<section id="history">'));
});
