// End to end (issue 31): consentd as the MCP gateway in front of the development MCP server
// (tests/idp/devmcp.js, the tracker of `make run`), with the official SDK clients and the
// person in Chromium.
//   - /mcp/tracker: the tracker on @modelcontextprotocol/sdk 1.32.2 behind consentd; the
//     client is @modelcontextprotocol/sdk 1.32.2 (2025-11-25). Declaring URL elicitation:
//     it lists the tools; list_issues (approval none) runs at once; create_issue (approval
//     required) is answered -32042 with the approval link, the person approves in Chromium,
//     notifications/elicitation/complete arrives on the session's stream, and the retry goes
//     out once. Declaring none (the fallback): the link comes in a tool error; approved, the
//     retry goes out once; the same call again asks again (released once), other arguments
//     ask again, a denial is a tool error that says until when; the person revokes the
//     consent on /me, and the next call asks for consent (a /consent/ link), which given,
//     the call goes on;
//   - /mcp/tracker26: the tracker on @modelcontextprotocol/server 2.4.0; the client is
//     @modelcontextprotocol/client 2.4.0 with versionNegotiation {mode: 'auto'}
//     (2026-07-28): the tool call comes back input_required with a URL elicitation, which the
//     client's elicitation/create handler gives to the person (approve, then deny), and the
//     client's own retry with the requestState goes on (once) or ends in the denial's tool error;
//   - both upstreams record every request (devmcp.js --record): the upstream never sees a
//     client's token, only the person's provider token (the provider's introspection says
//     so), and nothing the clients received holds a provider token.
// The 2.x packages declare Node >= 20; on Debian 12's Node 18 they run once globalThis.crypto
// is Web Crypto: ../lib/webcrypto.js is imported first (and devmcp.js --sdk 2 does the same).
import '../lib/webcrypto.js';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { auth } from '@modelcontextprotocol/sdk/client/auth.js';
import { ElicitationCompleteNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { startVaultStack, PROVIDER_SECRETS, DOWNSTREAM } from '../lib/vaultstack.js';
import { launchBrowser, revokeInBrowser } from '../lib/browser.js';
import { startCallback, decodeJwt } from '../lib/mcp.js';
import { startDevMcp } from '../lib/devmcp.js';
import { getFreePort } from '../lib/ports.js';

const shots = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'build', 'e2e');
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const UP1 = await getFreePort();
const UP2 = await getFreePort();
const CLIENT_ID = 'e2e-mcp';
let v; let b; let cb; let up1; let up2;

before(async () => {
  v = await startVaultStack({
    extraDsClients: (url) => [{
      client_id: 'consentd-tracker', client_secret: 'consentd-tracker-provider-secret',
      redirect_uris: [`${url}/oauth/callback/tracker`],
      grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    }],
    // make run's [resource.tracker], [mcp.tracker] and actions (scripts/run-dev.sh)
    config: ({ providerIssuer }) => ({
      'resource.tracker': { name: 'Issue tracker', provider_issuer: providerIssuer,
        provider_client_id: 'consentd-tracker', provider_client_secret: 'consentd-tracker-provider-secret',
        token_release: 'never', max_consent: 2592000 },
      'scope.tracker.issues:read': { description: 'Read issues', provider: 'issues:read' },
      'scope.tracker.issues:write': { description: 'Open and close issues', provider: 'issues:write' },
      'action.tracker.list_issues': { description: 'List the tracker\'s issues', scope: 'issues:read', approval: 'none' },
      'action.tracker.create_issue': { description: 'Open an issue in the tracker', scope: 'issues:write', approval: 'required' },
      'action.tracker.close_issue': { description: 'Close an issue in the tracker', scope: 'issues:write', approval: 'required' },
      'mcp.tracker': { resource: 'tracker', upstream: `http://127.0.0.1:${UP1}/mcp` },
      'mcp.tracker26': { resource: 'tracker', upstream: `http://127.0.0.1:${UP2}/mcp` },
      [`client.${CLIENT_ID}`]: { name: 'E2E MCP client', redirect_uris: 'http://127.0.0.1/callback' },
    }),
  });
  const common = { provider: v.ds.issuer, audience: DOWNSTREAM.resource, client: 'resource-server', secret: PROVIDER_SECRETS.rs };
  up1 = await startDevMcp({ ...common, port: UP1, sdk: 1 });
  up2 = await startDevMcp({ ...common, port: UP2, sdk: 2 });
  cb = await startCallback();
  b = await launchBrowser();
  mkdirSync(shots, { recursive: true });
});
after(async () => {
  await b?.close(); await cb?.stop(); await up1?.stop(); await up2?.stop(); await v?.stop();
});

// ---- the client's side --------------------------------------------------------------------------
// The SDK's OAuthClientProvider for the registered client CLIENT_ID, kept in memory.
function clientProvider() {
  const kept = { state: randomBytes(16).toString('base64url') };
  return {
    kept,
    get redirectUrl() { return cb.redirectUri; },
    get clientMetadata() {
      return { client_name: 'E2E MCP client', redirect_uris: [cb.redirectUri], grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'], token_endpoint_auth_method: 'none' };
    },
    state: () => kept.state,
    clientInformation: () => ({ client_id: CLIENT_ID }),
    saveClientInformation: () => {},
    tokens: () => kept.tokens,
    saveTokens: (t) => { kept.tokens = t; },
    redirectToAuthorization: (u) => { kept.authorizationUrl = u; },
    saveCodeVerifier: (x) => { kept.verifier = x; },
    codeVerifier: () => kept.verifier,
    saveDiscoveryState: (d) => { kept.discovery = d; },
    discoveryState: () => kept.discovery,
    invalidateCredentials: (what) => { if (what === 'all' || what === 'tokens') kept.tokens = undefined; },
  };
}

// What a client received: every response body it read (a fetch that keeps a copy).
function recordingFetch(into) {
  return async (url, init) => {
    const res = await fetch(url, init);
    res.clone().text().then((t) => { into.push(t); }, () => {});
    return res;
  };
}

// ---- the person's side, in Chromium -------------------------------------------------------------
// Until `until` settles: sign in where an IdP asks (the login IdP, the provider), approve a
// consent page. -> what `until` resolved to.
async function personConsents(page, until) {
  let done = false;
  const result = until.finally(() => { done = true; });
  for (let i = 0; i < 240 && !done; i += 1) {
    const u = page.url();
    if ((u.startsWith(v.idp.issuer) || u.startsWith(v.ds.issuer)) && await page.$('input[name=login]')) {
      await page.fill('input[name=login]', 'alice');
      await page.fill('input[name=password]', 'alice-password');
      await Promise.all([page.waitForNavigation().catch(() => {}), page.click('button[type=submit]')]);
      continue;
    }
    if (u.startsWith(`${v.url}/consent/`) && await page.$('button[value=approve]')) {
      await Promise.all([page.waitForNavigation().catch(() => {}), page.click('button[value=approve]')]);
      continue;
    }
    await sleep(250);
  }
  return result;
}

// The person opens an approval link and decides -> the page's text after the decision.
async function decide(url, decision, shot) {
  const page = await b.newPage();
  try {
    await page.goto(url);
    await page.waitForSelector(`button[value=${decision}]`);
    const shown = await page.textContent('main');
    if (shot) await page.screenshot({ path: join(shots, shot), fullPage: true });
    await Promise.all([page.waitForLoadState('load'), page.click(`button[value=${decision}]`)]);
    await page.waitForFunction((d) => !document.querySelector(`button[value=${d}]`), decision);
    return shown;
  } finally {
    await page.close();
  }
}

// The client's sign-in for an endpoint (the SDK's auth(), the person in Chromium) -> its provider.
async function signIn(endpoint) {
  const p = clientProvider();
  assert.equal(await auth(p, { serverUrl: endpoint }), 'REDIRECT');
  const page = await b.newPage();
  const back = cb.next(60000);
  await page.goto(p.kept.authorizationUrl.href);
  const answer = await personConsents(page, back);
  await page.close();
  assert.equal(answer.searchParams.get('state'), p.kept.state);
  assert.equal(await auth(p, { serverUrl: endpoint, authorizationCode: answer.searchParams.get('code') }), 'AUTHORIZED');
  assert.equal(decodeJwt(p.kept.tokens.access_token).aud, endpoint);
  return p;
}

// ---- the upstreams' recordings ----------------------------------------------------------------------
const bodyOf = (r) => { try { return JSON.parse(r.body); } catch { return null; } };
const calls = (up, name, args) => up.records().filter((r) => {
  const m = bodyOf(r);
  return m?.method === 'tools/call' && m.params?.name === name
    && (args === undefined || JSON.stringify(m.params.arguments) === JSON.stringify(args));
});
const bearer = (r) => /^Bearer (.+)$/.exec(r.headers.authorization || '')?.[1];

const thrown = (p) => p.then((x) => assert.fail(`expected an error, got ${JSON.stringify(x)}`), (e) => e);
const waitFor = async (fn, what, ms = 20000) => {
  for (const t0 = Date.now(); Date.now() - t0 < ms; await sleep(100)) if (fn()) return;
  assert.fail(`waited ${ms} ms for ${what}`);
};

const clientTokens = [];   // every access and refresh token a client holds
const received = [];       // every body the clients received

// One sign-in of the 1.32.2 client at /mcp/tracker for both of its tests.
let p1;
const tracker = () => `${v.url}/mcp/tracker`;
async function trackerClient(name, capabilities) {
  if (!p1) {
    p1 = await signIn(tracker());
    clientTokens.push(p1.kept.tokens.access_token, p1.kept.tokens.refresh_token);
  }
  const client = new Client({ name, version: '1.0.0' }, { capabilities });
  return client;
}
const connect = (client) => client.connect(new StreamableHTTPClientTransport(new URL(tracker()),
  { authProvider: p1, fetch: recordingFetch(received) }));

test('2025-11-25, @modelcontextprotocol/sdk 1.32.2 declaring URL elicitation: tools; approval by -32042 and notifications/elicitation/complete; the retry goes out once', { timeout: 180000 }, async () => {
  const client = await trackerClient('e2e-2025', { elicitation: { url: {} } });
  const completes = [];
  client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => { completes.push(n.params.elicitationId); });
  await connect(client);
  try {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name), ['list_issues', 'create_issue', 'close_issue']);

    // approval none: at once, with alice's provider token upstream
    const listed = await client.callTool({ name: 'list_issues', arguments: {} });
    assert.match(listed.content[0].text, /Welcome to the development tracker/);
    const upTok = bearer(calls(up1, 'list_issues').at(-1));
    const info = await v.dsIntrospect(upTok);
    assert.equal(info.active, true, 'the upstream received an active provider token');
    assert.equal(info.client_id, 'consentd-tracker');
    assert.equal(info.sub, 'alice');

    // approval required: -32042 with the approval link; nothing upstream yet
    const ARGS = { title: 'Crash on start', body: 'Steps:\n1. run it\n2. see it crash', labels: ['bug'] };
    const e1 = await thrown(client.callTool({ name: 'create_issue', arguments: ARGS }));
    assert.equal(e1.code, -32042, String(e1));
    const [el] = e1.data.elicitations;
    assert.equal(el.mode, 'url');
    assert.match(el.url, new RegExp(`^${v.url}/approve/`));
    assert.ok(el.elicitationId && el.message);
    assert.equal(calls(up1, 'create_issue').length, 0, 'nothing upstream before the approval');
    await decide(el.url, 'approve');
    await waitFor(() => completes.includes(el.elicitationId), 'notifications/elicitation/complete');
    const made = await client.callTool({ name: 'create_issue', arguments: ARGS });
    assert.equal(made.isError, undefined, JSON.stringify(made));
    assert.equal(JSON.parse(made.content[0].text).title, ARGS.title);
    assert.equal(calls(up1, 'create_issue', ARGS).length, 1, 'the approved call went out once');
    const e2 = await thrown(client.callTool({ name: 'create_issue', arguments: ARGS }));
    assert.equal(e2.code, -32042, 'released once: the same call asks again');
  } finally {
    await client.close();
  }
});

test('2025-11-25, @modelcontextprotocol/sdk 1.32.2 without URL elicitation: the link in a tool error; approved, the retry goes out once; other arguments ask again; a denial says until when; revoked on /me, the next call asks for consent', { timeout: 240000 }, async () => {
  const plain = await trackerClient('e2e-2025-plain', {});
  await connect(plain);
  const linkIn = (r, kind) => {
    assert.equal(r.isError, true, JSON.stringify(r));
    const m = r.content[0].text.match(new RegExp(`${v.url}/${kind}/[A-Za-z0-9_-]+`));
    assert.ok(m, r.content[0].text);
    assert.match(r.content[0].text, /call the tool again|retry/i);
    return m[0];
  };
  try {
    const { tools } = await plain.listTools();
    assert.deepEqual(tools.map((t) => t.name), ['list_issues', 'create_issue', 'close_issue']);
    const listed = await plain.callTool({ name: 'list_issues', arguments: {} });
    assert.match(listed.content[0].text, /Welcome to the development tracker/);
    const info = await v.dsIntrospect(bearer(calls(up1, 'list_issues').at(-1)));
    assert.equal(info.active, true, 'the upstream received an active provider token');
    assert.equal(info.client_id, 'consentd-tracker');
    assert.equal(info.sub, 'alice');

    const ARGS = { title: 'Crash on exit', body: 'Steps:\n1. quit\n2. see it crash' };
    const link = linkIn(await plain.callTool({ name: 'create_issue', arguments: ARGS }), 'approve');
    assert.equal(calls(up1, 'create_issue', ARGS).length, 0, 'nothing upstream before the approval');
    const shown = await decide(link, 'approve', 'mcp-approval-page.png');
    assert.match(shown, /Open an issue in the tracker/, 'the tool\'s description');
    assert.match(shown, /Crash on exit/, 'the arguments');
    const made = await plain.callTool({ name: 'create_issue', arguments: ARGS });
    assert.equal(made.isError, undefined, JSON.stringify(made));
    assert.equal(JSON.parse(made.content[0].text).title, ARGS.title);
    assert.equal(calls(up1, 'create_issue', ARGS).length, 1, 'the approved call went out once');
    const again = linkIn(await plain.callTool({ name: 'create_issue', arguments: ARGS }), 'approve');
    assert.notEqual(again, link, 'released once: the same call asks again');
    assert.equal(calls(up1, 'create_issue', ARGS).length, 1);

    const OTHER = { ...ARGS, title: 'Crash on resume' };
    const other = linkIn(await plain.callTool({ name: 'create_issue', arguments: OTHER }), 'approve');
    assert.notEqual(other, again, 'other arguments: another approval');
    await decide(other, 'deny');
    const denied = await plain.callTool({ name: 'create_issue', arguments: OTHER });
    assert.equal(denied.isError, true, JSON.stringify(denied));
    assert.match(denied.content[0].text, /denied/i);
    assert.match(denied.content[0].text, /until \d{4}-\d\d-\d\d/);
    assert.equal(calls(up1, 'create_issue', OTHER).length, 0, 'a denied call never goes out');

    const close = linkIn(await plain.callTool({ name: 'close_issue', arguments: { id: 1, reason: 'completed' } }), 'approve');
    await decide(close, 'approve');
    const closed = await plain.callTool({ name: 'close_issue', arguments: { id: 1, reason: 'completed' } });
    assert.equal(JSON.parse(closed.content[0].text).state, 'closed');
    assert.equal(calls(up1, 'close_issue').length, 1);

    // revoked on /me: the next call asks for consent (nothing goes upstream), given, it goes on
    const page = await b.newPage();
    const text = await revokeInBrowser(page, { url: v.url, cid: decodeJwt(p1.kept.tokens.access_token).cid });
    assert.match(text, /revoked/i);
    const before = up1.records().length;
    const consent = linkIn(await plain.callTool({ name: 'list_issues', arguments: {} }), 'consent');
    assert.equal(up1.records().slice(before).filter((x) => bodyOf(x)?.method === 'tools/call').length, 0,
      'nothing goes upstream without a live consent');
    await page.goto(consent);
    await personConsents(page, page.waitForURL((u) => u.href.startsWith(v.url) && /\/done$/.test(u.pathname), { timeout: 60000 }));
    await page.screenshot({ path: join(shots, 'mcp-consent-again.png'), fullPage: true });
    await page.close();
    const after = await plain.callTool({ name: 'list_issues', arguments: { state: 'all' } });
    assert.equal(after.isError, undefined, JSON.stringify(after));
    // The tracker as this test left it (the test before may have opened issues of its own).
    const issues = JSON.parse(after.content[0].text);
    assert.equal(issues.find((i) => i.id === 1)?.state, 'closed');
    assert.equal(issues.find((i) => i.title === ARGS.title)?.state, 'open');
  } finally {
    await plain.close();
  }
});

test('2026-07-28, @modelcontextprotocol/client 2.4.0 (versionNegotiation auto): input_required, the person decides, the client\'s retry goes on once or ends in the denial', { timeout: 180000 }, async () => {
  const { Client: Client2, StreamableHTTPClientTransport: Transport2 } = await import('@modelcontextprotocol/client');
  const endpoint = `${v.url}/mcp/tracker26`;
  const p = await signIn(endpoint);
  clientTokens.push(p.kept.tokens.access_token, p.kept.tokens.refresh_token);
  const asked = [];
  let decision = 'approve';
  const client = new Client2({ name: 'e2e-2026', version: '1.0.0' },
    { capabilities: { elicitation: { url: {} } }, versionNegotiation: { mode: 'auto' } });
  client.setRequestHandler('elicitation/create', async (request) => {
    asked.push(request.params);
    await decide(request.params.url, decision);
    return { action: 'accept' };
  });
  await client.connect(new Transport2(new URL(endpoint), {
    requestInit: { headers: { authorization: `Bearer ${p.kept.tokens.access_token}` } }, fetch: recordingFetch(received),
  }));
  try {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name), ['list_issues', 'create_issue', 'close_issue']);
    const ARGS = { title: 'From the 2026 client', body: 'input_required, then approved' };
    const made = await client.callTool({ name: 'create_issue', arguments: ARGS });
    assert.equal(made.isError, undefined, JSON.stringify(made));
    assert.equal(JSON.parse(made.content[0].text).title, ARGS.title);
    assert.equal(asked.length, 1, 'one URL elicitation');
    assert.equal(asked[0].mode, 'url');
    assert.match(asked[0].url, new RegExp(`^${v.url}/approve/`));
    assert.equal(calls(up2, 'create_issue', ARGS).length, 1, 'the approved call went out once');
    const rec = calls(up2, 'create_issue', ARGS)[0];
    assert.equal(bodyOf(rec).params._meta?.['io.modelcontextprotocol/protocolVersion'] ?? rec.headers['mcp-protocol-version'], '2026-07-28');

    decision = 'deny';
    const OTHER = { title: 'Denied from the 2026 client', body: 'no' };
    const denied = await client.callTool({ name: 'create_issue', arguments: OTHER });
    assert.equal(denied.isError, true, JSON.stringify(denied));
    assert.match(denied.content[0].text, /denied/i);
    assert.match(denied.content[0].text, /until/i);
    assert.equal(asked.length, 2);
    assert.equal(calls(up2, 'create_issue', OTHER).length, 0);
    console.log(`# node ${process.version}: @modelcontextprotocol/client and server 2.4.0 (engines node >= 20) with globalThis.crypto = node:crypto's webcrypto`);
  } finally {
    await client.close();
  }
});

test('the recordings: no upstream request holds a client\'s token; no answer a client received holds a provider token', async () => {
  assert.ok(clientTokens.filter(Boolean).length >= 2, 'the previous tests signed clients in');
  const upstream = [...up1.records(), ...up2.records()];
  assert.ok(upstream.length > 10, `the upstreams were called (${upstream.length})`);
  const providerTokens = new Set();
  for (const r of upstream) {
    const all = JSON.stringify(r);
    for (const t of clientTokens.filter(Boolean)) assert.ok(!all.includes(t), `a client's token reached the upstream: ${r.method} ${r.path}`);
    const t = bearer(r);
    assert.ok(t, `every upstream request carries a bearer token: ${r.method} ${r.path}`);
    providerTokens.add(t);
  }
  for (const t of providerTokens) {
    assert.ok(!received.some((body) => body.includes(t)), 'a provider token reached a client');
  }
});
