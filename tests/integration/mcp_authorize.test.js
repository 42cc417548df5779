// The authorization endpoint of MCP clients (issue #30; docs/mcp.md, "The authorization
// endpoint") against the real binary, the real development IdP and a real HTTPS server of
// Client ID Metadata Documents (tests/lib/cimd-server.mjs, its own test CA): a client-id URL
// client signs alice in and gets a code at its loopback redirect URI on any port (RFC 8252
// §7.3), with state and iss (RFC 9207); and the attacker's side -- a redirect URI the client
// did not register and an open redirect attempt (an error page, no Location to it), PKCE
// plain and a missing challenge (an error to the client), another person's request id (404),
// a document whose client_id is not its URL and a client the [mcp] policy does not allow
// (error pages), a resource consentd does not serve (invalid_target to the client).  The
// token leg (redeeming the code) is tests of its own.
//
//   users: alice (the sign-in), carol (a request bob tries to take), bob (another person)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { startStack } from '../lib/stack.js';
import { consentdLogin, req, postForm } from '../lib/weblogin.js';
import { consentConfig } from '../lib/fixtures.js';
import { CIMD_TEST_TIMEOUTS } from '../lib/mcp.js';

const CHALLENGE = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';
const CALLBACK = 'http://127.0.0.1:40123/callback';   // registered: :33418 (any port matches)

let cimd;          // { proc, port, ca }
let s;             // the stack
let clientUrl;     // the client-id URL of /good.json
const jars = new Map();

// tests/lib/cimd-server.mjs: its first line of stdout says its port and CA.
async function startCimd() {
  const proc = spawn(process.execPath, [fileURLToPath(new URL('../lib/cimd-server.mjs', import.meta.url))],
    { stdio: ['pipe', 'pipe', 'inherit'] });
  const line = await new Promise((resolve, reject) => {
    createInterface({ input: proc.stdout }).once('line', resolve);
    proc.once('exit', (code) => reject(new Error(`cimd-server exited ${code}`)));
  });
  const { port, ca } = JSON.parse(line);
  return { proc, port, ca };
}

before(async () => {
  cimd = await startCimd();
  clientUrl = `https://localhost:${cimd.port}/good.json`;
  s = await startStack({
    config: consentConfig({
      mcp: {
        // Only documents under localhost's root: the same server by its address is
        // another prefix, which the policy does not list.
        cimd_allow: 'prefixes', cimd_prefixes: `https://localhost:${cimd.port}/`,
        cimd_ca_file: cimd.ca, cimd_allow_loopback: 'true', ...CIMD_TEST_TIMEOUTS,
      },
      'mcp.notes': { resource: 'notes' },
      'client.ide': { name: 'Example IDE', redirect_uris: 'https://ide.example/cb' },
      // A resource whose credential is an API key the person enters (docs/providers.md).
      'resource.keyed': { name: 'Keyed API', credential: 'api_key', api_key_header: 'X-Api-Key',
        base_url: 'http://127.0.0.1:9/' },
      'scope.keyed.items:read': { description: 'Read items' },
      'mcp.keyed': { resource: 'keyed' },
    }),
  });
});

after(async () => {
  await s?.stop();
  cimd?.proc.stdin.end();
  cimd?.proc.kill();
});

async function jar(user) {
  if (!jars.has(user)) {
    const { jar: j, final } = await consentdLogin({ url: s.url, user, password: `${user}-password` });
    assert.equal(final.status, 303, `login of ${user}`);
    jars.set(user, j);
  }
  return jars.get(user);
}

// GET /authorize with the usual request of the /good.json client, fields replaced
// (undefined: left out), not following redirects.
async function authorize(fields = {}, j = null) {
  const p = {
    response_type: 'code', client_id: clientUrl, redirect_uri: CALLBACK, state: 'st-42',
    code_challenge: CHALLENGE, code_challenge_method: 'S256', resource: `${s.url}/mcp/notes`,
    scope: 'read write', ...fields,
  };
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(p)) if (v !== undefined) q.append(k, v);
  const res = j ? await req(j, `${s.url}/authorize?${q}`) : await fetch(`${s.url}/authorize?${q}`, { redirect: 'manual' });
  return { status: res.status, location: res.headers.get('location'), html: await res.text(), headers: res.headers };
}

// An error page for the person: no redirect anywhere.
function assertPage(r, status, words) {
  assert.equal(r.status, status, r.html.slice(0, 400));
  assert.equal(r.location, null, `no Location: ${r.location}`);
  assert.match(r.headers.get('content-type'), /text\/html/);
  assert.ok(r.html.includes(words), `"${words}" in ${r.html.slice(0, 600)}`);
}

// An error for the client at its redirect URI, with state and iss.
function assertToClient(r, error, descPart, callback = CALLBACK) {
  assert.equal(r.status, 303, r.html.slice(0, 300));
  const u = new URL(r.location);
  assert.equal(`${u.origin}${u.pathname}`, callback);
  assert.equal(u.searchParams.get('error'), error);
  assert.match(u.searchParams.get('error_description'), descPart);
  assert.equal(u.searchParams.get('state'), 'st-42');
  assert.equal(u.searchParams.get('iss'), s.url);
  assert.equal(u.searchParams.get('code'), null);
}

test('a client-id URL client signs alice in: consent page, then a code at its loopback redirect on another port, with state and iss', async () => {
  const a = await jar('alice');
  const r = await authorize({ unknown_extension: 'ignored' });
  assert.equal(r.status, 303, r.html);
  const m = /^\/authorize\/([A-Za-z0-9_-]{22})$/.exec(r.location);
  assert.ok(m, r.location);
  const id = m[1];

  // Signed out, the request's page signs in and comes back to it.
  const out = await fetch(`${s.url}/authorize/${id}`, { redirect: 'manual' });
  assert.equal(out.status, 303);
  assert.equal(out.headers.get('location'), `/login?return_to=%2Fauthorize%2F${id}`);

  let res = await req(a, `${s.url}/authorize/${id}`);
  assert.equal(res.status, 303, await res.text());
  const consentPath = res.headers.get('location');
  assert.match(consentPath, /^\/consent\/[A-Za-z0-9_-]{22}$/);

  // The consent page: the client's own name, marked; its host; where the answer goes,
  // with the warning for this computer.
  res = await req(a, `${s.url}${consentPath}`);
  const html = await res.text();
  assert.equal(res.status, 200, html.slice(0, 400));
  assert.ok(html.includes('<h1>Test MCP client asks for your permission</h1>'), html.slice(0, 800));
  assert.match(html, /id="client-self-named">[^<]*<strong>named by the client<\/strong>/);
  assert.ok(html.includes(`published at <strong>localhost</strong>`));
  assert.ok(html.includes('you go back to <strong>127.0.0.1</strong>'));
  assert.ok(html.includes('id="client-loopback"'));
  assert.ok(html.includes('name="s0"') && html.includes('name="s1"'), 'both scopes asked');

  // Approve read only: the decision goes on to the done step, which answers the client.
  const form = postForm(html);
  const fields = { csrf: form.fields.csrf, version: form.fields.version, decision: 'approve', s0: 'on',
    duration: (html.match(/<option value="(\d+)"/) || [])[1] };
  res = await req(a, `${s.url}${form.action}`, {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: s.url },
    body: new URLSearchParams(fields).toString(),
  });
  // A page that moves on by itself (a redirect after a form would be held to the page's
  // CSP form-action, which cannot name the client's redirect URI).
  const cont = await res.text();
  assert.equal(res.status, 200, cont.slice(0, 300));
  assert.ok(cont.includes(`<meta http-equiv="refresh" content="0; url=/authorize/${id}/done">`), cont);
  assert.ok(cont.includes(`href="/authorize/${id}/done"`), cont);
  res = await req(a, `${s.url}/authorize/${id}/done`);
  assert.equal(res.status, 303, await res.text());
  const cb = new URL(res.headers.get('location'));
  assert.equal(`${cb.origin}${cb.pathname}`, CALLBACK, 'the port the client sent, not the registered one');
  assert.match(cb.searchParams.get('code'), /^[A-Za-z0-9_-]{43}$/);
  assert.equal(cb.searchParams.get('state'), 'st-42');
  assert.equal(cb.searchParams.get('iss'), s.url);
  assert.equal(cb.searchParams.get('error'), null);

  // One request, one code: the done step again is the 404 of an unknown request.
  res = await req(a, `${s.url}/authorize/${id}/done`);
  assert.equal(res.status, 404);
  const rows = await s.c.rows(`SELECT client_id, scope, resource, redirect_uri FROM authz_codes`);
  assert.deepEqual(rows, [{ client_id: clientUrl, scope: 'read', resource: `${s.url}/mcp/notes`,
    redirect_uri: CALLBACK }]);
  // The consent is consentd's: agent = the client, resource = the endpoint's resource.
  const k = await s.c.rows(`SELECT agent, resource FROM consents WHERE revoked_at = 0`);
  assert.deepEqual(k, [{ agent: clientUrl, resource: 'notes' }]);
});

test('a redirect URI the client did not register, and open redirect attempts: an error page, no Location', async () => {
  const kept0 = await s.c.rows('SELECT count(*) AS n FROM authz_requests');
  for (const redirect of ['https://evil.example/callback', 'http://127.0.0.1.evil.example/callback',
    'http://127.0.0.1:40123/callback/../../evil', 'http://127.0.0.1:40123/other',
    'https://127.0.0.1:33418/callback', '//evil.example/callback']) {
    const r = await authorize({ redirect_uri: redirect });
    assertPage(r, 400, 'redirect_uri');
    assert.ok(!r.html.includes('evil.example/callback"'), 'no link to it either');
  }
  // The same for a client the operator registered.
  const r = await authorize({ client_id: 'ide', redirect_uri: 'https://ide.example/cb/../evil' });
  assertPage(r, 400, 'redirect_uri');
  assert.deepEqual(await s.c.rows('SELECT count(*) AS n FROM authz_requests'), kept0, 'nothing kept');
});

test('PKCE plain and a missing challenge: an error to the client, with state and iss', async () => {
  assertToClient(await authorize({ code_challenge_method: 'plain' }), 'invalid_request', /S256/);
  assertToClient(await authorize({ code_challenge: undefined }), 'invalid_request', /code_challenge/);
  assertToClient(await authorize({ code_challenge: undefined, code_challenge_method: undefined }),
    'invalid_request', /code_challenge/);
});

test('a private_key_jwt client whose keys are only at a jwks_uri: unauthorized_client before the person is asked', async () => {
  // /token does not fetch a client's keys: such a client could never redeem the code.
  assertToClient(await authorize({ client_id: `https://localhost:${cimd.port}/private-key-jwt.json`,
    redirect_uri: 'https://client.example/cb' }), 'unauthorized_client', /jwks_uri/,
  'https://client.example/cb');
  assert.equal(s.c.sql(`SELECT count(*) FROM authz_requests WHERE client_id LIKE '%private-key-jwt%'`), '0');
});

test('a resource consentd does not serve: invalid_target to the client', async () => {
  assertToClient(await authorize({ resource: 'https://wiki.example.test/api' }), 'invalid_target', /resource/);
  assertToClient(await authorize({ resource: `${s.url}/mcp/other` }), 'invalid_target', /resource/);
  assertToClient(await authorize({ resource: undefined }), 'invalid_target', /resource/);
});

test("a request id bound to another person: the same 404 as an unknown one", async () => {
  const a = await jar('carol');     // no consent for this client yet: the request waits for her
  const b = await jar('bob');
  const r = await authorize();
  const id = r.location.split('/').pop();
  let res = await req(a, `${s.url}/authorize/${id}`);
  assert.equal(res.status, 303);
  await res.arrayBuffer();
  for (const path of [`/authorize/${id}`, `/authorize/${id}/done`, '/authorize/AAAAAAAAAAAAAAAAAAAAAA']) {
    res = await req(b, `${s.url}${path}`);
    const html = await res.text();
    assert.equal(res.status, 404, `${path}: ${html.slice(0, 200)}`);
    assert.equal(res.headers.get('location'), null);
    assert.ok(html.includes('No such sign-in request'));
  }
  // Bob's tries did not make it his: the request stays carol's.
  const rows = await s.c.rows(`SELECT u.subject FROM authz_requests r JOIN users u ON u.id = r.user_id WHERE r.id = '${id}'`);
  assert.deepEqual(rows, [{ subject: 'carol' }]);
});

test("a client-id URL whose document's client_id is not its URL, or that the policy does not allow: an error page", async () => {
  let r = await authorize({ client_id: `https://localhost:${cimd.port}/wrong-id.json` });
  assertPage(r, 400, 'client_id');
  // The same server by another spelling of its URL: not under the configured prefix.
  r = await authorize({ client_id: `https://127.0.0.1:${cimd.port}/good.json` });
  assertPage(r, 400, 'This sign-in cannot go on');
});

test('an API key resource: after the decision the person enters the key, and the sign-in goes back to the client', async () => {
  const a = await jar('alice');
  const r = await authorize({ resource: `${s.url}/mcp/keyed`, scope: 'items:read' });
  assert.equal(r.status, 303, r.html);
  const id = /^\/authorize\/([A-Za-z0-9_-]{22})$/.exec(r.location)[1];
  let res = await req(a, `${s.url}/authorize/${id}`);
  assert.equal(res.status, 303, await res.text());
  const consentPath = res.headers.get('location');
  res = await req(a, `${s.url}${consentPath}`);
  const html = await res.text();
  assert.equal(res.status, 200, html.slice(0, 400));
  const form = postForm(html);
  res = await req(a, `${s.url}${form.action}`, {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: s.url },
    body: new URLSearchParams({ csrf: form.fields.csrf, version: form.fields.version,
      decision: 'approve', s0: 'on', duration: (html.match(/<option value="(\d+)"/) || [])[1] }).toString(),
  });
  // The key page comes first, where a provider's sign-in would be.
  assert.equal(res.status, 303, await res.text());
  const keyPage = new URL(res.headers.get('location'), s.url).href;
  assert.match(keyPage, /\/me\/consents\/[A-Za-z0-9_-]+\/key$/);
  res = await req(a, keyPage);
  const keyHtml = await res.text();
  const kf = postForm(keyHtml, /logout/);
  res = await req(a, new URL(kf.action, keyPage).href, {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: s.url },
    body: new URLSearchParams({ csrf: kf.fields.csrf, key: 'sk-test-0123456789' }).toString(),
  });
  // The key stored, the sign-in moves on to the client by itself.
  const cont = await res.text();
  assert.equal(res.status, 200, cont.slice(0, 300));
  assert.ok(cont.includes(`<meta http-equiv="refresh" content="0; url=/authorize/${id}/done">`), cont);
  res = await req(a, `${s.url}/authorize/${id}/done`);
  assert.equal(res.status, 303, await res.text());
  const cb = new URL(res.headers.get('location'));
  assert.equal(`${cb.origin}${cb.pathname}`, CALLBACK);
  assert.match(cb.searchParams.get('code'), /^[A-Za-z0-9_-]{43}$/);
  // Storing a key again later (no sign-in waiting) stays on the key page.
  res = await req(a, keyPage);
  const again = postForm(await res.text(), /logout/);
  res = await req(a, new URL(again.action, keyPage).href, {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: s.url },
    body: new URLSearchParams({ csrf: again.fields.csrf, key: 'sk-test-replaced' }).toString(),
  });
  await res.text();
  assert.equal(res.status, 303);
  assert.equal(new URL(res.headers.get('location'), s.url).href, keyPage);
});
