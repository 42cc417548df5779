// A gateway's whole turn, against `make run` (node built-ins only): exchange the person's
// ID token, show the consent link, poll, verify the grant offline, call the API through
// consentd's proxy.  With `make run` running:
//   ID_TOKEN=$(node tests/idp/get-id-token.js --issuer http://127.0.0.1:9090 --user alice) \
//     node examples/gateway.mjs
// Open the link it prints, sign in as alice, approve, and sign in at the development
// provider; the script goes on by itself.  CONSENTD_URL, GATEWAY_SECRET change the defaults.
import { verifyGrant } from './verify-grant.mjs';

const CONSENTD = process.env.CONSENTD_URL || 'http://127.0.0.1:8080';
const AUTH = `Basic ${Buffer.from(`agent-gateway:${process.env.GATEWAY_SECRET || 'gateway-dev-secret'}`).toString('base64')}`;
const ask = {
  grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
  subject_token: process.env.ID_TOKEN, subject_token_type: 'urn:ietf:params:oauth:token-type:id_token',
  agent_id: 'coder', audience: 'ghproxy', scope: 'issues:read', reason: 'to list your open issues',
};
const sleep = (s) => new Promise((r) => { setTimeout(r, 1000 * s); });
const show = (uri) => console.log(`Open this link to decide: ${uri}`);
const exchange = async (args) => {
  const res = await fetch(`${CONSENTD}/token`, { method: 'POST', body: new URLSearchParams(args),
    headers: { authorization: AUTH, 'content-type': 'application/x-www-form-urlencoded' } });
  return { status: res.status, headers: res.headers, body: await res.json() };
};

async function grantFor(args) {
  for (;;) {
    const r = await exchange(args);                 // POST /token
    if (r.status === 200) return r.body;            // the grant
    const e = r.body.error;
    if (e === 'consent_required' && r.body.consent_uri) show(r.body.consent_uri);
    else if (e === 'consent_required' || e === 'expired_token') continue;   // ask again now
    else if (e === 'too_many_pending_requests' || e === 'too_many_requests') { await sleep(r.headers.get('retry-after')); continue; }
    else if (e !== 'authorization_pending' && e !== 'slow_down') throw new Error(`${e}: ${r.body.error_description}`);
    await sleep(r.body.interval);                   // slow_down: the interval has grown
  }
}

if (!ask.subject_token) throw new Error('set ID_TOKEN to the person\'s ID token (see the top of this file)');
const { access_token: grant } = await grantFor(ask);
const claims = await verifyGrant(grant, { consentd: CONSENTD, resource: 'urn:consentd:resource:ghproxy',
  scope: 'issues:read', agent: 'coder' });
console.log(`A grant for ${claims.sub}, ${claims.scope} on ${claims.resource}, until ${new Date(claims.exp * 1000).toISOString()}`);
const res = await fetch(`${CONSENTD}/proxy/ghproxy/repos/acme/widgets/issues`,
  { headers: { authorization: AUTH, 'consentd-grant': grant } });
const issues = await res.json();
if (!res.ok) throw new Error(`the proxy answered ${res.status}: ${JSON.stringify(issues)}`);
for (const i of issues) console.log(`#${i.number} ${i.title}`);
