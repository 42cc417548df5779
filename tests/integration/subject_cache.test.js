// The subject-token cache on /token (#15), seen from the outside: the real binary and
// the real development IdP.  consentd remembers a subject token it verified (by its
// SHA-256) until the token's exp and until it installs a new IdP key set; it never
// makes a token valid that a full validation would refuse at that moment.
//
//   rotation: the IdP restarts on the same port with fresh signing keys; once consentd
//     fetches the new JWKS (an unknown kid, at most once a minute: this test waits out
//     that minute), a token it cached under the old keys is verified again and refused.
//   expiry: an ID token of a few seconds, accepted (and cached) while valid, is refused
//     as "subject token expired" once its exp has passed ([oidc] clock_skew = 0).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startIdp, DEFAULT_CLIENTS } from '../lib/idp.js';
import { startConsentd } from '../lib/consentd.js';
import { waitReady } from '../lib/stack.js';
import { getFreePort } from '../lib/ports.js';
import { getIdToken } from '../lib/idplogin.js';
import { gateway } from '../lib/gateway.js';
import { consentConfig, GATEWAY_APP } from '../lib/fixtures.js';
import { decodeJws } from '../lib/forge.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const ASK = { agentId: 'coder', audience: 'notes', scope: 'read' };
const REFETCH_EVERY_MS = 60 * 1000;    // oidc.c OIDC_REFETCH_EVERY

// The subject token passed every check: the answer is about the consent, not the token.
function accepted(r, what) {
  assert.equal(r.status, 400, `${what}: ${r.text}`);
  assert.ok(['consent_required', 'authorization_pending', 'slow_down'].includes(r.body?.error),
    `${what}: the subject token should pass: ${r.text}`);
}

function refused(r, description, what) {
  assert.equal(r.status, 400, `${what}: ${r.text}`);
  assert.equal(r.body?.error, 'invalid_request', `${what}: ${r.text}`);
  assert.equal(r.body?.error_description, description, what);
}

// An IdP on port (0: any) that registers consentd at url, and consentd trusting it.
async function idpFor(url, port, idpOptions = {}) {
  const clients = DEFAULT_CLIENTS.map((x) => (x.client_id === 'consentd'
    ? { ...x, redirect_uris: [`${url}/callback`], post_logout_redirect_uris: [`${url}/`] } : x));
  return startIdp({ clients, port, ...idpOptions });
}

const idToken = async (idp) => (await getIdToken({
  issuer: idp.issuer, ...GATEWAY_APP, user: 'alice', password: 'alice-password',
})).id_token;

test('rotation: after consentd installs the IdP\'s new key set, a token cached under the old one is verified again', async () => {
  const port = await getFreePort();
  const url = `http://127.0.0.1:${port}`;
  let idp = await idpFor(url, 0);
  let c;
  try {
    c = await startConsentd({ port, config: { ...consentConfig(), oidc: { issuer: idp.issuer } } });
    await waitReady(url);
    const fetchedBy = Date.now();       // discovery (and its JWKS fetch) happened before ready
    const gw = gateway({ url });

    const old = await idToken(idp);
    accepted(await gw.exchange({ subjectToken: old, ...ASK }), 'old token, first use');
    accepted(await gw.exchange({ subjectToken: old, ...ASK }), 'old token, from the cache');

    // The IdP rotates: same issuer, fresh keys (devidp makes new ones at each start).
    const issuer = idp.issuer;
    await idp.stop();
    idp = await idpFor(url, Number(new URL(issuer).port));
    assert.equal(idp.issuer, issuer);
    const fresh = await idToken(idp);
    assert.notEqual(decodeJws(fresh).header.kid, decodeJws(old).header.kid);
    // consentd has not seen the new key set yet: its keys, and the cached token, stand.
    accepted(await gw.exchange({ subjectToken: old, ...ASK }), 'old token before consentd refetches');

    // The new kid makes consentd fetch the JWKS again, at most once a minute.
    const wait = fetchedBy + REFETCH_EVERY_MS + 1500 - Date.now();
    if (wait > 0) await sleep(wait);
    accepted(await gw.exchange({ subjectToken: fresh, ...ASK }), 'a token of the new key');

    // The new set no longer has the old key: the cached token is checked again, and refused.
    refused(await gw.exchange({ subjectToken: old, ...ASK }),
      'subject token is signed with a key the IdP does not publish (unknown kid)', 'old token after the rotation');
    accepted(await gw.exchange({ subjectToken: fresh, ...ASK }), 'the new token, again');
  } finally {
    const st = await c?.stop();
    await idp.stop();
    if (st) assert.equal(st.code, 0, `consentd exit: ${c.proc.stderr.slice(-2000)}`);
  }
});

test('expiry: a subject token accepted (and cached) while valid is refused once its exp has passed', async () => {
  const port = await getFreePort();
  const url = `http://127.0.0.1:${port}`;
  const idp = await idpFor(url, 0, { ttl: { IdToken: 5 } });
  let c;
  try {
    c = await startConsentd({ port, config: { ...consentConfig(), oidc: { issuer: idp.issuer, clock_skew: 0 } } });
    await waitReady(url);
    const gw = gateway({ url });
    const t = await idToken(idp);
    const { exp, iat } = decodeJws(t).payload;
    assert.ok(exp - iat <= 5, `ID token lifetime ${exp - iat}`);
    accepted(await gw.exchange({ subjectToken: t, ...ASK }), 'while valid');

    const wait = (exp + 1) * 1000 - Date.now();
    if (wait > 0) await sleep(wait);
    refused(await gw.exchange({ subjectToken: t, ...ASK }), 'subject token expired', 'after exp');
  } finally {
    const st = await c?.stop();
    await idp.stop();
    if (st) assert.equal(st.code, 0, `consentd exit: ${c.proc.stderr.slice(-2000)}`);
  }
});
