// [limits] against the real binary and the real IdP: per client address on
// people's pages (a readable 429 page with Retry-After), per gateway on /token
// and /introspect (RFC 6749-shaped JSON 429), per person on new consent
// requests; others are served meanwhile; X-Forwarded-For is ignored from an
// untrusted peer (rotating it does not escape the limit) and honoured from a
// trusted proxy; a bucket refills after Retry-After.
//
// Rates are tiny (0.01/s) where a test counts a burst or expects a refusal to
// last, so no refill can happen within a test; the one refill test (1/s) waits
// the Retry-After it was given and asserts nothing about time.
// Other local addresses (127.0.0.2, 127.0.0.3) are other clients.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { consentdBin, toIni, baseConfig } from '../lib/consentd.js';
import { startStack } from '../lib/stack.js';
import { getIdToken, basicAuth } from '../lib/idplogin.js';
import { fetchFrom } from '../lib/weblogin.js';
import { gateway } from '../lib/gateway.js';
import { consentConfig, GATEWAY_APP } from '../lib/fixtures.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });

let pages;     // address limits: burst 3, trusted_proxies = 127.0.0.1
let gw;        // gateway limit: burst 4
let people;    // person limit: burst 2
let refill;    // gateway limit: rate 1/s, burst 1 (the refill test)

before(async () => {
  [pages, gw, people, refill] = await Promise.all([
    startStack({ config: {
      server: { trusted_proxies: '127.0.0.1' },
      limits: { address_rate: '0.01', address_burst: 3 },
    } }),
    startStack({ config: { limits: { gateway_rate: '0.01', gateway_burst: 4 } } }),
    startStack({ config: { ...consentConfig(), limits: { person_rate: '0.01', person_burst: 2 } } }),
    startStack({ config: { limits: { gateway_rate: '1', gateway_burst: 1 } } }),
  ]);
});
after(async () => { await Promise.all([pages?.stop(), gw?.stop(), people?.stop(), refill?.stop()]); });

function login(s, from, headers = {}) {
  return fetchFrom(from, `${s.url}/login`, { headers });
}

// Sends until a 429 comes (at most max); returns [statuses before it, the 429].
async function until429(send, max = 40) {
  const before = [];
  for (let i = 0; i < max; i++) {
    const r = await send(i);
    if (r.status === 429) return [before, r];
    before.push(r.status);
  }
  assert.fail(`no 429 in ${max} requests: ${before.join(' ')}`);
}

function retryAfter(r) {
  const v = r.headers.get('retry-after');
  assert.match(v ?? '', /^[1-9][0-9]*$/, `Retry-After is whole seconds: ${v}`);
  return Number(v);
}

test('per address on a page: the burst passes, then a readable 429 page with Retry-After; another address is served meanwhile', async () => {
  const [ok, refused] = await until429(() => login(pages, '127.0.0.2'));
  assert.deepEqual(ok, [303, 303, 303], 'address_burst = 3 sign-ins went to the IdP');
  assert.equal(refused.status, 429);
  assert.match(refused.headers.get('content-type'), /^text\/html/);
  assert.ok(retryAfter(refused) >= 1);
  const html = await refused.text();
  assert.match(html, /<title>[^<]*Too many requests/);
  assert.match(html, /Too many requests came from your network in a short time\. Wait \d+ seconds? and try again\./);
  // The same bucket holds on the consent and approval pages (before any sign-in check) ...
  for (const path of ['/consent/abc', '/approve/abc', '/callback?state=x&code=y']) {
    const r = await fetchFrom('127.0.0.2', `${pages.url}${path}`);
    assert.equal(r.status, 429, path);
  }
  // ... not on metadata or health, and another address is served.
  assert.equal((await fetchFrom('127.0.0.2', `${pages.url}/healthz`)).status, 200);
  assert.equal((await login(pages, '127.0.0.4')).status, 303);
});

test('spoofing: an untrusted peer rotating X-Forwarded-For and Forwarded is limited all the same', async () => {
  let n = 0;
  const [ok, refused] = await until429(() => {
    n += 1;
    return login(pages, '127.0.0.3', {
      'x-forwarded-for': `198.51.100.${n}`, forwarded: `for=203.0.113.${n}`,
    });
  });
  assert.deepEqual(ok, [303, 303, 303], 'the headers did not buy a fourth bucket');
  assert.equal(refused.status, 429);
});

test('a trusted proxy: X-Forwarded-For names the client, right-most untrusted first; a client cannot prepend its way out', async () => {
  const xff = (v) => login(pages, '127.0.0.1', { 'x-forwarded-for': v });
  const [ok, refused] = await until429(() => xff('192.0.2.10'));
  assert.deepEqual(ok, [303, 303, 303]);
  assert.equal(refused.status, 429);
  // Another client behind the same proxy has its own bucket.
  assert.equal((await xff('192.0.2.11')).status, 303);
  // What a client writes left of its own address is not taken ...
  assert.equal((await xff('192.0.2.99, 192.0.2.10')).status, 429);
  // ... and a trusted hop right of it is skipped.
  assert.equal((await xff('192.0.2.10, 127.0.0.1')).status, 429);
  // Two header lines count as one list: the proxy's line is the last.
  const two = await new Promise((resolve, reject) => {
    import('node:http').then(({ default: http }) => {
      const r = http.request(`${pages.url}/login`, { localAddress: '127.0.0.1', agent: false,
        headers: [['X-Forwarded-For', '192.0.2.200'], ['X-Forwarded-For', '192.0.2.10']].flat() },
      (res) => { res.resume(); resolve(res.statusCode); });
      r.on('error', reject);
      r.end();
    });
  });
  assert.equal(two, 429, 'the first line is the client\'s, the last the proxy\'s');
  // The proxy itself, without the header, is its own client.
  assert.equal((await login(pages, '127.0.0.1')).status, 303);
});

test('a trusted proxy: a client\'s malformed or overlong X-Forwarded-For does not make it the proxy (issue 28 S3)', async () => {
  const xff = (v) => login(pages, '127.0.0.1', { 'x-forwarded-for': v });
  // The client's junk, then the address its proxy appended: counted as that address, so
  // spending it leaves the proxy's own bucket alone.
  const [ok, refused] = await until429(() => xff('junk]], 192.0.2.20'));
  assert.deepEqual(ok, [303, 303, 303]);
  assert.equal(refused.status, 429);
  assert.equal((await xff('192.0.2.20')).status, 429, 'the same client, written cleanly');
  // 6 KiB of junk (longer than consentd reads) before the proxy's entry: the right end counts.
  const long = `${'x'.repeat(6000)}, 192.0.2.21`;
  const [ok2, refused2] = await until429(() => xff(long));
  assert.deepEqual(ok2, [303, 303, 303]);
  assert.equal(refused2.status, 429);
  assert.equal((await xff('192.0.2.21')).status, 429, 'the same client, written cleanly');
  // The proxy's own bucket was not spent by either: it still has room (one sign-in here;
  // the previous test spent two of its three).
  assert.equal((await login(pages, '127.0.0.1')).status, 303);
});

test('per gateway on /token, /introspect, /revoke and /proxy: JSON 429 with Retry-After and a description; a caller without credentials cannot spend the gateway\'s bucket', async () => {
  const g = gateway({ url: gw.url });
  // Failed authentication is answered before the limit: these take no token.
  for (let i = 0; i < 6; i++) {
    const r = await fetch(`${gw.url}/introspect`, { method: 'POST', headers: {
      authorization: basicAuth('agent-gateway', 'wrong-secret-wrong-secret'),
      'content-type': 'application/x-www-form-urlencoded' }, body: 'token=x' });
    assert.equal(r.status, 401);
  }
  const [ok, refused] = await until429(() => g.introspect('not-a-grant'));
  assert.deepEqual(ok, [200, 200, 200, 200], 'gateway_burst = 4 calls passed');
  assert.equal(refused.status, 429);
  assert.match(refused.headers.get('content-type'), /^application\/json/);
  assert.equal(refused.body.error, 'too_many_requests');
  assert.match(refused.body.error_description, /gateway limit \(\[limits\] gateway_rate\)/);
  retryAfter(refused);
  // /token shares the bucket: the same answer, before anything is exchanged.
  const t = await g.exchange({ subjectToken: 'x', audience: 'notes', scope: 'read', agentId: 'coder' });
  assert.equal(t.status, 429, t.text);
  assert.equal(t.body.error, 'too_many_requests');
  retryAfter(t);
  // /revoke and /proxy too.
  const rv = await g.revoke('not-a-grant');
  assert.equal(rv.status, 429, rv.text);
  const px = await fetch(`${gw.url}/proxy/notes/items`, { headers: await g.authHeaders() });
  assert.equal(px.status, 429);
  assert.match(px.headers.get('content-type'), /^application\/json/);
  assert.equal((await px.json()).error, 'too_many_requests');
  retryAfter(px);
  // People's pages are another class: served meanwhile.
  assert.equal((await fetch(`${gw.url}/login`, { redirect: 'manual' })).status, 303);
  // Each refusal is counted in /metrics (which no limit guards), by its class.
  const m = await fetch(`${gw.url}/metrics`, { headers: await g.authHeaders() });
  assert.equal(m.status, 200);
  const text = await m.text();
  assert.match(text, /^# TYPE consentd_rate_limit_refusals_total counter$/m);
  assert.match(text, /^consentd_rate_limit_refusals_total\{limit="gateway"\} 4$/m, 'introspect, token, revoke, proxy');
  assert.doesNotMatch(text, /^consentd_rate_limit_refusals_total\{limit="address"\} [1-9]/m);
});

test('a bucket refills: after the Retry-After it was given, the gateway is served again', async () => {
  const g = gateway({ url: refill.url });
  const [, refused] = await until429(() => g.introspect('not-a-grant'));
  await sleep(retryAfter(refused) * 1000);
  const again = await g.introspect('not-a-grant');
  assert.equal(again.status, 200, again.text);
  assert.equal(again.body.active, false);
});

test('per person on new consent requests: the third new request for alice is refused, polls are not, and bob is served', async () => {
  const g = gateway({ url: people.url });
  const token = async (user) => (await getIdToken({
    issuer: people.idp.issuer, ...GATEWAY_APP, user, password: `${user}-password`,
  })).id_token;
  const alice = await token('alice');
  const ask = (subjectToken, agentId, audience) => g.exchange({
    subjectToken, agentId, audience, scope: 'read', reason: 'rate limit test' });
  assert.equal((await ask(alice, 'coder', 'notes')).body?.error, 'consent_required');
  assert.equal((await ask(alice, 'coder', 'wiki')).body?.error, 'consent_required');
  const third = await ask(alice, 'butler', 'notes');
  assert.equal(third.status, 429, third.text);
  assert.equal(third.body.error, 'too_many_requests');
  assert.match(third.body.error_description, /person limit \(\[limits\] person_rate\)/);
  retryAfter(third);
  // Asking again about a pending request creates nothing: not limited.
  const poll = await ask(alice, 'coder', 'notes');
  assert.ok(['authorization_pending', 'slow_down'].includes(poll.body?.error), poll.text);
  // Another person is served meanwhile.
  const bob = await ask(await token('bob'), 'butler', 'notes');
  assert.equal(bob.body?.error, 'consent_required', bob.text);
  const m = await (await fetch(`${people.url}/metrics`, { headers: await g.authHeaders() })).text();
  assert.match(m, /^consentd_rate_limit_refusals_total\{limit="person"\} 1$/m);
});

test('consentd -n names a bad [limits] value or trusted proxy with its line', () => {
  const dir = mkdtempSync(join(tmpdir(), 'consentd-limits-'));
  try {
    const base = baseConfig({ port: 8080, dir });
    writeFileSync(base.keys.master_key_file, randomBytes(32), { mode: 0o600 });
    const check = (over) => {
      const path = join(dir, 'c.ini');
      const text = toIni({ ...base, ...over });
      writeFileSync(path, text);
      const r = spawnSync(consentdBin, ['-n', '-c', path], { encoding: 'utf8' });
      return { ...r, lines: text.split('\n') };
    };
    const good = check({ server: { ...base.server, trusted_proxies: '127.0.0.1 10.0.0.0/8' },
      limits: { address_rate: '0.5', person_rate: '0' } });
    assert.equal(good.status, 0, good.stderr);
    for (const [over, key, why] of [
      [{ limits: { address_rate: 'fast' } }, 'address_rate', /not a rate/],
      [{ limits: { gateway_burst: '0' } }, 'gateway_burst', /out of range/],
      [{ server: { ...base.server, trusted_proxies: '10.0.0.1/8' } }, 'trusted_proxies', /not an IPv4 or IPv6 address or network/],
    ]) {
      const r = check(over);
      assert.notEqual(r.status, 0, `${key} accepted`);
      const line = r.lines.findIndex((l) => l.startsWith(`${key} =`)) + 1;
      assert.ok(line > 0);
      assert.match(r.stderr, new RegExp(`c\\.ini:${line}: ${key}: `), r.stderr);
      assert.match(r.stderr, why);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
