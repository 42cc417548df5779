// docs/openapi.yaml and docs/errors.md held against the code: the document is
// valid OpenAPI 3.1 for a real parser (@apidevtools/swagger-parser); every
// schema compiles and every example matches its schema (Ajv, JSON Schema
// 2020-12); every OAuth, public and API route of server/routes.c is documented
// with its method and every documented path is a route; every error code that
// server/*.c returns is in the table of docs/errors.md and every code of that
// table is returned by server/*.c; the README's tables name every documented
// path.  The last test runs the real binary against the real IdP and holds
// the live answers of every gateway and public endpoint against the document,
// and runs docs/grants.md's verification example on a real grant.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import SwaggerParser from '@apidevtools/swagger-parser';
import Ajv2020 from 'ajv/dist/2020.js';
import { decodeProtectedHeader } from 'jose';
import { startStack } from '../lib/stack.js';
import { getIdToken, basicAuth } from '../lib/idplogin.js';
import { consentdLogin, req, postForm } from '../lib/weblogin.js';
import { gateway, TOKEN_EXCHANGE, TT_ID_TOKEN } from '../lib/gateway.js';
import { consentConfig, GATEWAY_APP } from '../lib/fixtures.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const DOC = join(ROOT, 'docs', 'openapi.yaml');
const read = (...p) => readFileSync(join(ROOT, ...p), 'utf8');
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

// --- the route table -------------------------------------------------------

// The routes of server/routes.c whose clients are machines: ROUTE_OAUTH (the
// gateway), ROUTE_PUBLIC and ROUTE_API (the admin JSON API).  The person's
// pages (ROUTE_BROWSER) answer HTML and are documented in the README, but for a
// page an OAuth client sends the browser to with its own parameters (/authorize:
// ROUTE_UNKNOWN_IGNORED), which is a client's contract too.  The
// proxy's trailing {rest*} (the raw rest of the path) is {path} in OpenAPI.
function machineRoutes() {
  const src = read('server', 'routes.c');
  const out = [];
  for (const m of src.matchAll(/\{\s*HTTP_([A-Z]+)\s*,\s*"([^"]+)"\s*,\s*(ROUTE_[A-Z]+)\s*,/g)) {
    const entry = src.slice(m.index, src.indexOf('LIMIT_', m.index));
    const clientPage = m[3] === 'ROUTE_BROWSER' && entry.includes('ROUTE_UNKNOWN_IGNORED');
    if (!['ROUTE_OAUTH', 'ROUTE_PUBLIC', 'ROUTE_API'].includes(m[3]) && !clientPage) continue;
    out.push({ method: m[1].toLowerCase(), path: m[2].replace('{rest*}', '{path}') });
  }
  return out;
}

function documentedOperations(doc) {
  const out = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of METHODS) if (item[method]) out.push({ method, path, op: item[method] });
  }
  return out;
}

// --- error codes -----------------------------------------------------------

// Every error code server/*.c puts in an answer.  A code is the first string
// literal of a call to a function named *_error or *_reply (reply_oauth_error,
// reply_error, api_error, pending_reply ...) when that literal is a code
// (lower case and underscores: a page title or a description never is), the
// literals of an "error" member built with json_pack, and those of an
// `error_code` chosen for such a member (approval_answer_reply).
function codesInSources() {
  const codes = new Map();
  const add = (code, file) => codes.set(code, [...new Set([...(codes.get(code) || []), file])]);
  for (const f of readdirSync(join(ROOT, 'server')).filter((n) => n.endsWith('.c'))) {
    const src = read('server', f).replace(/\/\*[\s\S]*?\*\//g, ' ');
    for (const m of src.matchAll(/\b[a-z_]*(?:_error|_reply)\s*\(/g)) {
      let depth = 0;
      let end = m.index + m[0].length - 1;
      for (; end < src.length; end++) {
        if (src[end] === '(') depth++;
        else if (src[end] === ')' && --depth === 0) break;
      }
      const args = src.slice(m.index + m[0].length, end);
      const first = args.match(/"((?:[^"\\]|\\.)*)"/);
      if (first && /^[a-z][a-z_]*$/.test(first[1])) add(first[1], f);
    }
    for (const m of src.matchAll(/json_pack\("\{s:s\}",\s*"error",([^;]*);/g)) {
      for (const x of m[1].matchAll(/"([a-z][a-z_]*)"/g)) add(x[1], f);
    }
    for (const m of src.matchAll(/const char \*error_code = ([^;]*);/g)) {
      for (const x of m[1].matchAll(/"([a-z][a-z_]*)"/g)) add(x[1], f);
    }
  }
  return codes;
}

// The codes of docs/errors.md: the first cell of each table row, in backticks.
function codesInErrorsDoc() {
  const out = new Set();
  for (const line of read('docs', 'errors.md').split('\n')) {
    const m = line.match(/^\|\s*`([a-z][a-z_]*)`\s*\|/);
    if (m) out.add(m[1]);
  }
  return out;
}

// --- the tests -------------------------------------------------------------

test('docs/openapi.yaml is valid OpenAPI 3.1 for @apidevtools/swagger-parser, every $ref resolves', async () => {
  const text = readFileSync(DOC, 'utf8');
  const doc = JSON.parse(text);          // JSON, which is YAML 1.2: admin_api.test.js reads it so
  assert.match(doc.openapi, /^3\.1\./);
  const api = await SwaggerParser.validate(DOC);
  assert.ok(Object.keys(api.paths).length > 0);
  // The parser rejects what is not OpenAPI: a sanity check that it looks.
  const [path, item] = Object.entries(doc.paths)[0];
  const method = METHODS.find((m) => item[m]);
  const broken = structuredClone(doc);
  broken.paths[path][method].responses = 'none';
  await assert.rejects(SwaggerParser.validate(broken), /validation failed/i);
  const dangling = structuredClone(doc);
  dangling.paths[path][method].responses['299'] = {
    description: 'x', content: { 'application/json': { schema: { $ref: '#/components/schemas/Nothing' } } } };
  await assert.rejects(SwaggerParser.validate(dangling), /Nothing/);
});

test('every schema compiles, every example matches its schema, path parameters are declared, operationIds are unique', async () => {
  const api = await SwaggerParser.dereference(JSON.parse(readFileSync(DOC, 'utf8')));
  const ajv = new Ajv2020({ strict: true, strictTypes: false, allErrors: true });
  for (const [name, schema] of Object.entries(api.components.schemas)) {
    assert.doesNotThrow(() => ajv.compile(schema), `components.schemas.${name} compiles`);
  }
  const ids = new Set();
  let examples = 0;
  for (const { method, path, op } of documentedOperations(api)) {
    const where = `${method.toUpperCase()} ${path}`;
    assert.ok(op.operationId && !ids.has(op.operationId), `${where}: a unique operationId`);
    ids.add(op.operationId);
    assert.ok(op.summary, `${where}: a summary`);
    assert.ok(op.tags?.length, `${where}: a tag`);
    const params = [...(api.paths[path].parameters || []), ...(op.parameters || [])];
    for (const p of params) assert.doesNotThrow(() => ajv.compile(p.schema), `${where}: parameter ${p.name}`);
    for (const name of [...path.matchAll(/\{([^}]+)\}/g)].map((x) => x[1])) {
      assert.ok(params.some((p) => p.in === 'path' && p.name === name && p.required === true),
        `${where}: path parameter ${name} is declared and required`);
    }
    const media = [];
    if (op.requestBody) media.push(...Object.entries(op.requestBody.content).map(([t, m]) => [`request ${t}`, m]));
    assert.ok(Object.keys(op.responses).length > 0, `${where}: responses`);
    for (const [status, r] of Object.entries(op.responses)) {
      assert.ok(r.description, `${where} ${status}: a description`);
      for (const [t, m] of Object.entries(r.content || {})) media.push([`${status} ${t}`, m]);
    }
    for (const [label, m] of media) {
      const validate = ajv.compile(m.schema);
      for (const [exName, e] of Object.entries(m.examples || {})) {
        examples++;
        assert.ok(validate(e.value), `${where} ${label} example ${exName}: ${ajv.errorsText(validate.errors)}`);
      }
    }
  }
  assert.ok(examples >= 60, `examples checked: ${examples}`);
});

test('the document and server/routes.c name the same machine routes, method by method', () => {
  const doc = JSON.parse(readFileSync(DOC, 'utf8'));
  const routes = machineRoutes();
  assert.ok(routes.length >= 20, `routes read from routes.c: ${routes.length}`);
  const key = (r) => `${r.method.toUpperCase()} ${r.path}`;
  const documented = new Set(documentedOperations(doc).map(key));
  const inTable = new Set(routes.map(key));
  const undocumented = [...inTable].filter((k) => !documented.has(k));
  const unknown = [...documented].filter((k) => !inTable.has(k));
  assert.deepEqual(undocumented, [], 'routes of server/routes.c missing from docs/openapi.yaml');
  assert.deepEqual(unknown, [], 'operations of docs/openapi.yaml that server/routes.c does not route');
});

test('docs/errors.md lists exactly the error codes server/*.c returns', () => {
  const inCode = codesInSources();
  const inDoc = codesInErrorsDoc();
  assert.ok(inCode.size >= 15, `codes found in server/*.c: ${[...inCode.keys()].join(' ')}`);
  for (const must of ['invalid_request', 'consent_required', 'approval_required', 'invalid_token', 'upstream_timeout']) {
    assert.ok(inCode.has(must), `the extraction finds ${must}`);
  }
  const missing = [...inCode.keys()].filter((c) => !inDoc.has(c)).map((c) => `${c} (${inCode.get(c).join(', ')})`);
  const extra = [...inDoc].filter((c) => !inCode.has(c));
  assert.deepEqual(missing, [], 'codes returned by server/*.c but missing from docs/errors.md');
  assert.deepEqual(extra, [], 'codes in docs/errors.md that server/*.c never returns');
});

test('every error code the document names is one server/*.c returns', () => {
  const doc = JSON.parse(readFileSync(DOC, 'utf8'));
  const inCode = codesInSources();
  const named = new Set();
  const walk = (v, parentKey) => {
    if (Array.isArray(v)) { v.forEach((x) => walk(x, parentKey)); return; }
    if (v === null || typeof v !== 'object') return;
    if (parentKey === 'error' && Array.isArray(v.enum)) v.enum.forEach((c) => named.add(c));
    if (typeof v.error === 'string' && ('error_description' in v || 'interval' in v)) named.add(v.error);
    for (const [k, x] of Object.entries(v)) walk(x, k);
  };
  walk(doc, null);
  assert.ok(named.size >= 15, `codes named in the document: ${[...named].join(' ')}`);
  assert.deepEqual([...named].filter((c) => !inCode.has(c)), []);
});

test('the reference\'s tables (README.md, docs/reference.md) name every documented path', () => {
  const doc = JSON.parse(readFileSync(DOC, 'utf8'));
  const rows = [read('README.md'), read('docs', 'reference.md')].join('\n').split('\n').filter((l) => l.startsWith('|'));
  const missing = Object.keys(doc.paths).filter((p) => !rows.some((row) => {
    const i = row.indexOf(` ${p}`);
    return i >= 0 && /^[`?\s|]/.test(row.slice(i + 1 + p.length) || ' ');
  }));
  assert.deepEqual(missing, [], 'paths of docs/openapi.yaml that no table row of README.md or docs/reference.md names');
});

// --- live answers ------------------------------------------------------------

// Checks one live answer against the document: its status is documented for
// the operation (exactly, or as a range such as 2XX), its Content-Type is one of
// that response's media types, its JSON body matches the schema, and the
// headers the response documents are there (but those marked required: false).
async function liveChecker() {
  const api = await SwaggerParser.dereference(JSON.parse(readFileSync(DOC, 'utf8')));
  const ajv = new Ajv2020({ strict: true, strictTypes: false, allErrors: true });
  const seen = new Set();
  const check = (method, path, r) => {
    const op = api.paths[path]?.[method];
    assert.ok(op, `${method.toUpperCase()} ${path} is documented`);
    const status = String(r.status);
    const resp = op.responses[status] || op.responses[`${status[0]}XX`];
    const where = `${method.toUpperCase()} ${path} ${status}`;
    assert.ok(resp, `${where} is documented`);
    const ct = (r.headers.get('content-type') || '').split(';')[0].trim();
    const media = Object.entries(resp.content || {}).find(([t]) => t === '*/*' || t.split(';')[0] === ct);
    assert.ok(media, `${where}: Content-Type ${ct} is documented`);
    if (ct === 'application/json' || ct.endsWith('+json')) {
      const validate = ajv.compile(media[1].schema);
      assert.ok(validate(r.body), `${where}: ${ajv.errorsText(validate.errors)} in ${JSON.stringify(r.body).slice(0, 400)}`);
    }
    // A header the document marks required: false (DPoP-Nonce: only with
    // [gateway] dpop_nonce = true) may be absent; every other one must be there.
    for (const [h, spec] of Object.entries(resp.headers || {})) {
      if (spec.required !== false) assert.ok(r.headers.get(h), `${where}: header ${h}`);
    }
    seen.add(`${where}${r.body?.error ? ` ${r.body.error}` : ''}`);
  };
  return { check, seen };
}

async function fetchJson(url, init) {
  const res = await fetch(url, { redirect: 'manual', ...init });
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch { body = text; }
  return { status: res.status, headers: res.headers, body, text };
}

let stack;
after(async () => { await stack?.stop(); });

test('live answers of the gateway\'s and the public endpoints match the document; grants.md\'s example verifies a real grant', async () => {
  stack = await startStack({ config: consentConfig({ 'mcp.notes': { resource: 'notes' } }) });
  const { url } = stack;
  const gw = gateway({ url });
  const auth = basicAuth('agent-gateway', 'gateway-dev-secret');
  const { check, seen } = await liveChecker();

  for (const p of ['/.well-known/oauth-authorization-server', '/.well-known/jwks.json', '/healthz', '/readyz',
    '/static/consentd.css']) check('get', p, await fetchJson(`${url}${p}`));
  check('get', '/metrics', await fetchJson(`${url}/metrics`, { headers: { authorization: auth } }));
  check('get', '/metrics', await fetchJson(`${url}/metrics`));
  // MCP (issue 30): the protected resource metadata, and the endpoint's 401 with and without a token
  const prm = '/.well-known/oauth-protected-resource/mcp/{name}';
  check('get', prm, await fetchJson(`${url}/.well-known/oauth-protected-resource/mcp/notes`));
  check('get', prm, await fetchJson(`${url}/.well-known/oauth-protected-resource/mcp/nothing`));
  for (const method of ['post', 'get', 'delete']) {
    const m = method.toUpperCase();
    check(method, '/mcp/{name}', await fetchJson(`${url}/mcp/notes`, { method: m }));
    check(method, '/mcp/{name}', await fetchJson(`${url}/mcp/notes`, { method: m, headers: { authorization: 'Bearer x' } }));
    check(method, '/mcp/{name}', await fetchJson(`${url}/mcp/nothing`, { method: m }));
  }

  // refusals at /token, each one documented
  const idToken = (await getIdToken({ issuer: stack.idp.issuer, ...GATEWAY_APP, user: 'alice',
    password: 'alice-password' })).id_token;
  const args = { subjectToken: idToken, audience: 'notes', scope: 'read', agentId: 'butler' };
  check('post', '/token', await gw.exchange({ ...args, auth: null }));
  check('post', '/token', await fetchJson(`${url}/token`));
  check('post', '/token', await fetchJson(`${url}/token`, { method: 'POST', headers: { authorization: auth,
    'content-type': 'application/json' }, body: '{}' }));
  check('post', '/token', await gw.post('/token', { grant_type: 'password' }));
  check('post', '/token', await gw.exchange({ ...args, subjectToken: `${idToken.slice(0, -4)}AAAA` }));
  check('post', '/token', await gw.exchange({ ...args, audience: 'nowhere' }));
  check('post', '/token', await gw.exchange({ ...args, scope: 'read delete' }));
  check('post', '/token', await gw.exchange({ ...args, agentId: undefined }));

  // flow A: consent_required, polling, the person approves (offline), a grant with a refresh token
  const first = await gw.exchange(args);
  assert.equal(first.body?.error, 'consent_required', first.text);
  check('post', '/token', first);
  check('post', '/token', await gw.exchange(args));         // slow_down or authorization_pending
  const { jar } = await consentdLogin({ url, user: 'alice', password: 'alice-password' });
  const page = await req(jar, first.body.consent_uri);
  const html = await page.text();
  const form = postForm(html);
  assert.ok(form?.fields.version, html.slice(0, 300));
  const fields = { ...form.fields, decision: 'approve', offline: 'on',
    duration: (html.match(/<option value="(\d+)"/) || [])[1] };
  const done = await req(jar, first.body.consent_uri, { method: 'POST', body: new URLSearchParams(fields).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: url } });
  assert.equal(done.status, 200, (await done.text()).slice(0, 300));
  await new Promise((r) => { setTimeout(r, 1100); });
  const granted = await gw.exchange(args);
  assert.equal(granted.status, 200, granted.text);
  assert.ok(granted.body.refresh_token, 'an offline consent of an offline agent gets a refresh token');
  check('post', '/token', granted);

  // the grant: exactly the claims grants.md lists, and the verifier grants.md runs
  // (examples/verify-grant.mjs; examples.test.js runs grants.md's block itself) accepts it
  const grant = granted.body.access_token;
  const hdr = decodeProtectedHeader(grant);
  assert.equal(hdr.alg, 'ES256');
  assert.equal(hdr.typ, 'at+jwt');
  const { verifyGrant } = await import('../../examples/verify-grant.mjs');
  const payload = await verifyGrant(grant, { consentd: url, resource: 'urn:consentd:resource:notes', scope: 'read', agent: 'butler' });
  assert.deepEqual(Object.keys(payload).sort(),
    ['act', 'aud', 'cid', 'client_id', 'exp', 'iat', 'iss', 'jti', 'resource', 'scope', 'sub'].sort());
  assert.equal(payload.exp - payload.iat, granted.body.expires_in);
  await assert.rejects(verifyGrant(grant, { consentd: url, resource: 'urn:consentd:resource:wiki', scope: 'read', agent: 'butler' }));

  // introspection, refresh, reuse, revocation
  check('post', '/introspect', await gw.introspect(grant));
  check('post', '/introspect', await gw.introspect(granted.body.refresh_token));
  check('post', '/introspect', await gw.introspect('not-a-token'));
  check('post', '/introspect', await gw.post('/introspect', {}));
  const refreshed = await gw.refresh(granted.body.refresh_token);
  assert.equal(refreshed.status, 200, refreshed.text);
  check('post', '/token', refreshed);
  const reused = await gw.refresh(granted.body.refresh_token);
  assert.equal(reused.body?.error, 'invalid_grant', reused.text);
  check('post', '/token', reused);
  check('post', '/revoke', await gw.revoke(refreshed.body.access_token));
  check('post', '/revoke', await gw.post('/revoke', {}));
  const gone = await gw.introspect(refreshed.body.access_token);
  assert.deepEqual(gone.body, { active: false });
  check('post', '/introspect', gone);

  // the proxy: no grant, a grant of the family the reuse revoked, no gateway
  // credentials, and a live grant on a path no route maps (notes has no base_url)
  const proxy = (headers) => fetchJson(`${url}/proxy/notes/items`, { headers });
  check('get', '/proxy/{resource}/{path}', await proxy({ authorization: auth }));
  check('get', '/proxy/{resource}/{path}', await proxy({ authorization: auth, 'consentd-grant': grant }));
  check('get', '/proxy/{resource}/{path}', await proxy({ 'consentd-grant': grant }));
  const fresh = await gw.exchange(args);
  assert.equal(fresh.status, 200, fresh.text);
  const unrouted = await proxy({ authorization: auth, 'consentd-grant': fresh.body.access_token });
  assert.equal(unrouted.body?.error, 'access_denied', unrouted.text);
  check('get', '/proxy/{resource}/{path}', unrouted);

  const errors = [...seen].filter((x) => / [a-z_]+$/.test(x)).map((x) => x.split(' ').pop());
  for (const code of ['invalid_client', 'invalid_request', 'unsupported_grant_type', 'invalid_target',
    'invalid_scope', 'consent_required', 'invalid_grant', 'invalid_token', 'access_denied']) {
    assert.ok(errors.includes(code), `a live ${code} was checked (${[...seen].join(', ')})`);
  }
});
