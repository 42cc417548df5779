// Enterprise-managed authorization (issue #30 item 6; docs/mcp.md "Enterprise-managed
// authorization (ID-JAG)"), against the real binary and the real development IdP, which mints
// the ID-JAGs by RFC 8693 token exchange of a person's ID token (tests/idp/devidp.js "idJag"):
// an MCP client presents it at /token as grant_type jwt-bearer; the admin's [enterprise.corp]
// policy stands in for the person's consent. From the attacker's side: a replayed, expired,
// unlisted, foreign-client, unknown-key, alg-none and wrong-typ ID-JAG are each refused.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync, readFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  generateKeyPair, exportJWK, SignJWT, decodeJwt, decodeProtectedHeader, calculateJwkThumbprint,
} from 'jose';
import { randomUUID } from 'node:crypto';
import { startIdp, DEFAULT_CLIENTS } from '../lib/idp.js';
import { startConsentd, consentdBin } from '../lib/consentd.js';
import { waitNodesReady } from '../lib/stack.js';
import { getFreePort } from '../lib/ports.js';
import { getIdToken, discover, basicAuth } from '../lib/idplogin.js';
import { consentdLogin, req } from '../lib/weblogin.js';
import { gateway } from '../lib/gateway.js';
import { consentConfig, GATEWAY_APP } from '../lib/fixtures.js';

const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const TT_ID_TOKEN = 'urn:ietf:params:oauth:token-type:id_token';
const TT_ID_JAG = 'urn:ietf:params:oauth:token-type:id-jag';

let idp; let c; let url; let dir; let idToken; let tokenEndpoint; let jwksUri;

before(async () => {
  const port = await getFreePort();
  url = `http://127.0.0.1:${port}`;
  dir = mkdtempSync(join(tmpdir(), 'idjag-it-'));
  // The IdP's clients: consentd's sign-in, and gateway-app standing for the MCP client's own
  // registration at the enterprise IdP, allowed the token exchange; its id at consentd is
  // mcp-ide (the ID-JAG's client_id).
  const clients = DEFAULT_CLIENTS.map((x) => {
    if (x.client_id === 'consentd') return { ...x, redirect_uris: [`${url}/callback`], post_logout_redirect_uris: [`${url}/`] };
    if (x.client_id === 'gateway-app') return { ...x, grant_types: ['authorization_code', TOKEN_EXCHANGE] };
    return x;
  });
  idp = await startIdp({ clients, idJag: { clientIds: { 'gateway-app': 'mcp-ide' }, testKnobs: true } });
  const meta = await discover(idp.issuer);
  tokenEndpoint = meta.token_endpoint;
  jwksUri = meta.jwks_uri;
  // The enterprise IdP's public keys, as an operator would save them to jwks_file.
  const jwks = await (await fetch(meta.jwks_uri)).json();
  writeFileSync(join(dir, 'idp.jwks'), JSON.stringify(jwks));
  c = await startConsentd({
    port,
    config: {
      ...consentConfig({
        'mcp.notes': { resource: 'notes' },
        'mcp.wiki': { resource: 'wiki' },
        'client.ide': { client_id: 'mcp-ide', name: 'Example IDE', redirect_uris: 'http://127.0.0.1/callback' },
        'client.other': { client_id: 'mcp-other', name: 'Other tool', redirect_uris: 'http://127.0.0.1/callback' },
        'enterprise.corp': { issuer: idp.issuer, jwks_file: join(dir, 'idp.jwks'), allow: 'mcp-ide=notes:read,write' },
      }),
      oidc: { issuer: idp.issuer },
    },
  });
  await waitNodesReady(c);
  idToken = (await getIdToken({
    issuer: idp.issuer, clientId: GATEWAY_APP.clientId, clientSecret: GATEWAY_APP.clientSecret,
    redirectUri: GATEWAY_APP.redirectUri, user: 'alice', password: 'alice-password', scope: 'openid',
  })).id_token;
});

after(async () => {
  if (process.env.IDJAG_DEBUG) writeFileSync('/tmp/idjag-consentd.log', c?.proc.output() ?? '');
  const st = await c?.stop();
  await idp?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
  if (st) assert.equal(st.code, 0, `consentd exit: ${c.proc.stderr.slice(-2000)}`);
});

// The IdP's token exchange: the person's ID token for an ID-JAG (extra: resource, scope, knobs).
async function mintJag(extra = {}) {
  const body = new URLSearchParams({
    grant_type: TOKEN_EXCHANGE, requested_token_type: TT_ID_JAG, subject_token: idToken,
    subject_token_type: TT_ID_TOKEN, audience: url, resource: `${url}/mcp/notes`, ...extra,
  });
  const r = await fetch(tokenEndpoint, {
    method: 'POST', body,
    headers: { authorization: basicAuth(GATEWAY_APP.clientId, GATEWAY_APP.clientSecret),
      'content-type': 'application/x-www-form-urlencoded' },
  });
  const j = await r.json();
  assert.equal(r.status, 200, JSON.stringify(j));
  assert.equal(j.issued_token_type, TT_ID_JAG);
  assert.equal(j.token_type, 'N_A');
  return j.access_token;
}

// consentd's /token with the jwt-bearer grant, as the MCP client clientId (public: none).
async function redeem(assertion, { clientId = 'mcp-ide', extra = {}, at = url, headers = {} } = {}) {
  const r = await fetch(`${at}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams({ grant_type: JWT_BEARER, client_id: clientId, assertion, ...extra }),
  });
  return { status: r.status, body: await r.json(), headers: r.headers };
}

function refused(r, error, re, label) {
  assert.equal(r.status, 400, `${label}: ${JSON.stringify(r.body)}`);
  assert.equal(r.body.error, error, label);
  assert.match(r.body.error_description, re, label);
  assert.equal(r.body.access_token, undefined, label);
}

const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');

test('the metadata offers the ID-JAG profile where an [enterprise.NAME] IdP is configured (MCP ext-auth)', async () => {
  const m = await (await fetch(`${url}/.well-known/oauth-authorization-server`)).json();
  assert.deepEqual(m.authorization_grant_profiles_supported, ['urn:ietf:params:oauth:grant-profile:id-jag']);
  assert.ok(m.grant_types_supported.includes('urn:ietf:params:oauth:grant-type:jwt-bearer'));
});

test('an ID-JAG from the enterprise IdP for a pair the policy lists: an access token for the endpoint, the organisation\'s consent on /me, and an admin revocation ends it', async () => {
  const jag = await mintJag({ scope: 'read write' });
  const h = decodeProtectedHeader(jag);
  assert.equal(h.typ, 'oauth-id-jag+jwt');
  const r = await redeem(jag);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.headers.get('cache-control'), 'no-store');
  assert.equal(r.body.token_type, 'Bearer');
  assert.equal(r.body.refresh_token, undefined, 'no refresh token: the client returns with a new ID-JAG');
  assert.deepEqual(r.body.scope.split(' ').sort(), ['read', 'write']);
  const at = decodeJwt(r.body.access_token);
  assert.equal(at.aud, `${url}/mcp/notes`, 'aud is the MCP endpoint the ID-JAG names');
  assert.equal(at.client_id, 'mcp-ide');
  assert.equal(at.sub, 'alice');

  // The organisation's consent: one row, marked, audited as given by the policy.
  const rows = c.rows("SELECT id, agent, resource, granted, granted_by FROM consents");
  assert.equal(rows.length, 1);
  assert.deepEqual({ ...rows[0], id: undefined }, { id: undefined, agent: 'mcp-ide', resource: 'notes', granted: 'read write', granted_by: 'organisation' });
  const audit = c.rows("SELECT actor, agent, resource, consent_id FROM audit WHERE action = 'consent.granted_by_policy'");
  assert.deepEqual(audit, [{ actor: 'enterprise:corp', agent: 'mcp-ide', resource: 'notes', consent_id: rows[0].id }]);

  // A second ID-JAG reuses the consent.
  assert.equal((await redeem(await mintJag({ scope: 'read' }))).status, 200);
  assert.equal(c.rows('SELECT count(*) AS n FROM consents')[0].n, 1);

  // /me shows it as given by the organisation.
  const { jar } = await consentdLogin({ url, user: 'alice', password: 'alice-password' });
  const me = await (await req(jar, `${url}/me`)).text();
  const entry = me.slice(me.indexOf(`id="consent-${rows[0].id}"`));
  assert.ok(entry.length < me.length, 'the consent is on /me');
  assert.match(entry.slice(0, 600), /given by your organisation/);

  // The admin sees it with the same mark and revokes it: the token ends at once.
  const mk = spawnSync(consentdBin, ['admin', 'token', 'create', '--name', 'ops', '-c', c.cfgPath],
    { encoding: 'utf8', env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1' } });
  assert.equal(mk.status, 0, mk.stderr);
  const admin = mk.stdout.trim();
  const one = await fetch(`${url}/admin/api/consents/${rows[0].id}`, { headers: { authorization: `Bearer ${admin}` } });
  assert.equal((await one.json()).consent.granted_by, 'organisation');
  const gw = gateway({ url });
  assert.equal((await gw.introspect(r.body.access_token)).body.active, true, 'live before the revocation');
  const rv = await fetch(`${url}/admin/api/consents/${rows[0].id}/revoke`, {
    method: 'POST', headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ reason: 'policy review' }),
  });
  assert.equal(rv.status, 200, await rv.text());
  assert.deepEqual((await gw.introspect(r.body.access_token)).body, { active: false });
  // The person's history keeps the mark: who gave what ended.
  const after = await (await req(jar, `${url}/me`)).text();
  const hist = after.slice(after.indexOf('id="history"'));
  const ended = hist.slice(hist.indexOf(`id="consent-${rows[0].id}"`));
  assert.ok(ended.length < hist.length, 'the ended consent is in the history');
  assert.match(ended.slice(0, 600), /given by your organisation[^]*Revoked by an administrator/);
});

test('the attacker\'s side: a replayed, expired, unlisted, foreign-client, unknown-key, alg-none and wrong-typ ID-JAG are each refused', async () => {
  const jag = await mintJag();
  assert.equal((await redeem(jag)).status, 200);
  refused(await redeem(jag), 'invalid_grant', /used already/, 'replayed');

  refused(await redeem(await mintJag({ devidp_iat_offset: '-1000' })), 'invalid_grant', /expired/, 'expired');

  refused(await redeem(await mintJag({ resource: `${url}/mcp/wiki` })), 'invalid_grant',
    /policy of \[enterprise\.corp\] does not let this client/, 'a pair the policy does not list');

  refused(await redeem(await mintJag(), { clientId: 'mcp-other' }), 'invalid_grant',
    /client_id is not the authenticated client/, 'another client than the authenticated one');

  // Claims as the IdP would write them, signed by a key consentd was never given.
  const claims = decodeJwt(await mintJag());
  const { privateKey } = await generateKeyPair('ES256');
  const forged = await new SignJWT({ ...claims, jti: `${claims.jti}-forged` })
    .setProtectedHeader({ alg: 'ES256', typ: 'oauth-id-jag+jwt', kid: (await exportJWK(privateKey)).x }).sign(privateKey);
  refused(await redeem(forged), 'invalid_grant', /signature does not verify/, 'an unknown key');

  const none = `${b64({ alg: 'none', typ: 'oauth-id-jag+jwt' })}.${b64({ ...claims, jti: `${claims.jti}-none` })}.`;
  refused(await redeem(none), 'invalid_grant', /not an ID-JAG/, 'alg none');
  const hs = `${b64({ alg: 'HS256', typ: 'oauth-id-jag+jwt' })}.${b64({ ...claims, jti: `${claims.jti}-hs` })}.c2ln`;
  refused(await redeem(hs), 'invalid_grant', /not an ID-JAG/, 'alg HS256');

  refused(await redeem(await mintJag({ devidp_typ: 'JWT' })), 'invalid_grant', /typ is not oauth-id-jag\+jwt/, 'wrong typ');

  // Nothing of these made a consent or a token: only the first test's and this one's good grant.
  assert.equal(c.rows("SELECT count(*) AS n FROM audit WHERE action = 'consent.granted_by_policy'")[0].n, 2);
});

test('client authentication comes first: an unknown client or a public client sending an assertion get 401 invalid_client; the gateway (Basic) has no jwt-bearer grant', async () => {
  const jag = await mintJag();
  let r = await redeem(jag, { clientId: 'nobody' });
  assert.equal(r.status, 401, JSON.stringify(r.body));
  assert.equal(r.body.error, 'invalid_client');
  r = await redeem(jag, { extra: { client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: 'a.b.c' } });
  assert.equal(r.status, 401);
  assert.match(r.body.error_description, /public/);
  const rb = await fetch(`${url}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basicAuth('agent-gateway', 'gateway-dev-secret') },
    body: new URLSearchParams({ grant_type: JWT_BEARER, client_id: 'mcp-ide', assertion: jag }),
  });
  const rbBody = await rb.json();
  assert.equal(rb.status, 400, 'the gateway\'s credentials are no MCP client\'s');
  assert.equal(rbBody.error, 'unsupported_grant_type', 'the gateway has no jwt-bearer grant');
  // The ID-JAG was not spent by the refusals: the right client still redeems it once.
  assert.equal((await redeem(jag)).status, 200);
});

test('an IdP named by jwks_uri: its keys fetched on first use (a stranger\'s kid refused); an IdP whose jwks_uri does not answer is 503; [mcp] require_dpop asks a proof of a public client, which binds the token', async () => {
  const port2 = await getFreePort();
  const url2 = `http://127.0.0.1:${port2}`;
  const c2 = await startConsentd({
    port: port2,
    config: {
      ...consentConfig({
        'mcp.notes': { resource: 'notes' },
        'client.ide': { client_id: 'mcp-ide', redirect_uris: 'http://127.0.0.1/callback' },
        'enterprise.corp': { issuer: idp.issuer, jwks_uri: jwksUri, allow: 'mcp-ide=notes:read' },
        'enterprise.down': { issuer: 'http://127.0.0.1:9', jwks_uri: 'http://127.0.0.1:9/jwks', allow: 'mcp-ide=notes:read' },
      }),
      oidc: { issuer: idp.issuer },
      mcp: { require_dpop: 'true' },
    },
  });
  try {
    await waitNodesReady(c2);
    const jag = await mintJag({ audience: url2, resource: `${url2}/mcp/notes` });
    const noProof = await redeem(jag, { at: url2 });
    assert.equal(noProof.status, 400, JSON.stringify(noProof.body));
    assert.equal(noProof.body.error, 'invalid_dpop_proof');
    assert.match(noProof.body.error_description, /require_dpop/);
    // A DPoP proof (RFC 9449) binds the token to its key; the refusal above spent nothing.
    const { publicKey, privateKey: dpopPriv } = await generateKeyPair('ES256');
    const jwk = await exportJWK(publicKey);
    const proof = await new SignJWT({ htm: 'POST', htu: `${url2}/token`, iat: Math.floor(Date.now() / 1000), jti: randomUUID() })
      .setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk }).sign(dpopPriv);
    const r = await redeem(jag, { at: url2, headers: { dpop: proof } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.scope, 'read');
    assert.equal(r.body.token_type, 'DPoP');
    assert.equal(decodeJwt(r.body.access_token).cnf?.jkt, await calculateJwkThumbprint(jwk));
    const claims = decodeJwt(jag);
    const { privateKey } = await generateKeyPair('ES256');
    const forged = await new SignJWT({ ...claims, jti: `${claims.jti}-forged` })
      .setProtectedHeader({ alg: 'ES256', typ: 'oauth-id-jag+jwt', kid: 'no-such-kid' }).sign(privateKey);
    const proof2 = await new SignJWT({ htm: 'POST', htu: `${url2}/token`, iat: Math.floor(Date.now() / 1000), jti: randomUUID() })
      .setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk }).sign(dpopPriv);
    refused(await redeem(forged, { at: url2, headers: { dpop: proof2 } }), 'invalid_grant', /signature does not verify/, 'a stranger\'s kid');
    const down = `${b64({ alg: 'ES256', typ: 'oauth-id-jag+jwt' })}.${b64({ ...claims, iss: 'http://127.0.0.1:9' })}.c2ln`;
    const proof3 = await new SignJWT({ htm: 'POST', htu: `${url2}/token`, iat: Math.floor(Date.now() / 1000), jti: randomUUID() })
      .setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk }).sign(dpopPriv);
    const d = await redeem(down, { at: url2, headers: { dpop: proof3 } });
    assert.equal(d.status, 503, JSON.stringify(d.body));
    assert.equal(d.body.error, 'temporarily_unavailable');
    assert.match(d.body.error_description, /keys of \[enterprise\.down\] could not be had/);
  } finally {
    const st = await c2.stop();
    assert.equal(st.code, 0, `consentd exit: ${c2.proc.stderr.slice(-2000)}`);
  }
});

test('a pair taken out of [enterprise] allow takes back what it gave: at the next start its consents are revoked and their tokens end', async () => {
  // A live organisation consent with read and write, and its token.
  const r = await redeem(await mintJag({ scope: 'read write' }));
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const live = () => c.rows("SELECT id, granted, revoked_at, revoked_by, revoke_reason FROM consents "
    + "WHERE granted_by = 'organisation' AND revoked_at = 0");
  const [k] = live();
  assert.equal(k.granted, 'read write');
  const port = Number(new URL(url).port);
  const restart = async (allow) => {
    const st = await c.stop({ remove: false });
    assert.equal(st.code, 0, c.proc.stderr.slice(-2000));
    c = await startConsentd({ port, dir: c.dir, config: { ...c.config,
      'enterprise.corp': { ...c.config['enterprise.corp'], allow } } });
    await waitNodesReady(c);
  };
  // The same policy at a restart takes nothing back.
  await restart('mcp-ide=notes:read,write');
  assert.deepEqual(live().map((x) => x.id), [k.id]);
  const gw = gateway({ url });
  assert.equal((await gw.introspect(r.body.access_token)).body.active, true);
  // Narrowed to read: the consent holding write is no longer what the policy gives.
  await restart('mcp-ide=notes:read');
  assert.deepEqual(live(), []);
  const [ended] = c.rows(`SELECT revoked_by, revoke_reason FROM consents WHERE id = '${k.id}'`);
  assert.deepEqual(ended, { revoked_by: 'consentd',
    revoke_reason: "the organisation's policy no longer lets this client use this resource" });
  assert.deepEqual((await gw.introspect(r.body.access_token)).body, { active: false });
  // Each node checks at its start; the first one up revoked it (one node, or two on PostgreSQL).
  const logs = c.nodes.map((n) => (n.config?.server?.log ?? c.config.server.log))
    .filter((f) => existsSync(f)).map((f) => readFileSync(f, 'utf8')).join('\n');
  assert.match(logs, /revoked 1 consent\(s\) an organisation gave/);
  const audit = c.rows(`SELECT actor, detail FROM audit WHERE action = 'consent.revoked' AND consent_id = '${k.id}'`);
  assert.deepEqual(audit, [{ actor: 'consentd',
    detail: "the organisation's policy no longer lets this client use this resource" }]);
  // What the policy still gives, it gives again.
  const again = await redeem(await mintJag({ scope: 'read' }));
  assert.equal(again.status, 200, JSON.stringify(again.body));
  assert.equal(again.body.scope, 'read');
});
