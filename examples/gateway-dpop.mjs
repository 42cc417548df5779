// The gateway's side of consentd's key-bound grants, with Node's own crypto (./jws.mjs;
// no npm package):
//
//   - private_key_jwt (RFC 7523): the gateway authenticates with a signed client
//     assertion instead of a shared secret ([gateway] token_endpoint_auth = private_key_jwt,
//     jwks_file = the public half of the gateway's keys);
//   - DPoP (RFC 9449): a proof with every request binds the grant to the gateway's
//     DPoP key (cnf.jkt); a copied grant is useless without that key;
//   - verifying a DPoP-bound grant offline, as a resource server behind the gateway
//     would: consentd's signature (JWKS) AND a proof by the key the grant names.
//     JWKS validation alone does not bind a token to a key: plain JWKS validators
//     (Apache's mod_auth_openidc, for one) accept a stolen bound grant as a bearer token.
//
// Used by consentd's tests (tests/integration/dpop.test.js, examples.test.js).  Node 18+.
import { createHash, randomUUID, generateKeyPairSync } from 'node:crypto';
import { signJws, verifyJws, decodeJws, jwkThumbprint, remoteJwks } from './jws.mjs';

export const CLIENT_ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
export const DPOP_ALGS = ['ES256', 'PS256', 'EdDSA'];

// A fresh DPoP key pair: keep privateKey in the gateway, never send it anywhere.
export async function newDpopKey(alg = 'ES256') {
  const { publicKey, privateKey } = alg === 'ES256' ? generateKeyPairSync('ec', { namedCurve: 'P-256' })
    : alg === 'PS256' ? generateKeyPairSync('rsa', { modulusLength: 2048 })
      : alg === 'EdDSA' || alg === 'Ed25519' ? generateKeyPairSync('ed25519') : (() => { throw new Error(`no ${alg} keys`); })();
  const publicJwk = publicKey.export({ format: 'jwk' });
  return { alg, privateKey, publicJwk, jkt: jwkThumbprint(publicJwk) };
}

// RFC 7523 §3: iss = sub = the gateway's client id, aud = consentd's issuer (or its
// token endpoint; no other endpoint, one value: draft-ietf-oauth-rfc7523bis), a short exp (consentd accepts at most 5 minutes), a jti used once.
export async function clientAssertion({ key, alg = 'ES256', kid, clientId, audience, ttl = 60 }) {
  const now = Math.floor(Date.now() / 1000);
  return signJws({ alg, ...(kid ? { kid } : {}) },
    { jti: randomUUID(), iss: clientId, sub: clientId, aud: audience, iat: now, exp: now + ttl }, key);
}

// base64url(SHA-256(token)): the proof's ath when it goes with a token (RFC 9449 §4.2).
export const ath = (token) => createHash('sha256').update(token).digest('base64url');

// RFC 9449 §4.2: a proof for one request: method, URL (without query and fragment),
// now, a fresh jti; ath when a grant goes with it; nonce when consentd asked for one.
export async function dpopProof({ key, htm, htu, accessToken, nonce, iat }) {
  const u = new URL(htu);
  u.search = '';
  u.hash = '';
  return signJws({ typ: 'dpop+jwt', alg: key.alg, jwk: key.publicJwk }, {
    htm, htu: u.href, jti: randomUUID(), iat: iat ?? Math.floor(Date.now() / 1000),
    ...(accessToken ? { ath: ath(accessToken) } : {}), ...(nonce ? { nonce } : {}),
  }, key.privateKey);
}

// A request to consentd with a DPoP proof; when consentd answers use_dpop_nonce
// ([gateway] dpop_nonce = true) it is sent once more with the nonce it gave.
// make(proof) -> fetch arguments [url, init]; returns the fetch Response.
export async function withDpop({ key, htm, htu, accessToken, nonce: first }, make) {
  let nonce = first;
  for (let attempt = 0; ; attempt++) {
    const proof = await dpopProof({ key, htm, htu, accessToken, nonce });
    const res = await fetch(...make(proof));
    const next = res.headers.get('dpop-nonce');
    if (attempt === 0 && next && (res.status === 400 || res.status === 401)) {
      const text = await res.clone().text();
      if (/use_dpop_nonce/.test(text) || /use_dpop_nonce/.test(res.headers.get('www-authenticate') || '')) {
        nonce = next;
        continue;
      }
    }
    return res;
  }
}

// A token exchange at consentd's /token, authenticated with a client assertion and
// bound to key: the answer's access_token carries cnf.jkt = key.jkt, token_type DPoP.
export async function exchangeBound({ consentd, clientId, assertionKey, assertionAlg, kid, key, params }) {
  const htu = `${consentd}/token`;
  const res = await withDpop({ key, htm: 'POST', htu }, async (proof) => [htu, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: proof },
    body: new URLSearchParams({
      ...params,
      client_assertion_type: CLIENT_ASSERTION_TYPE,
      client_assertion: await clientAssertion({ key: assertionKey, alg: assertionAlg, kid, clientId, audience: consentd }),
    }),
  }]);
  return { status: res.status, body: await res.json() };
}

// Verifies a DPoP-bound grant offline, with the proof that came with it:
//   1. the grant: consentd's signature (jwks: the URL of its jwks_uri, or a key getter
//      such as remoteJwks(url) or jose's createRemoteJWKSet),
//      ES256, typ at+jwt, issuer, audience (the gateway's id), not expired;
//   2. the proof: typ dpop+jwt, signed by the jwk in its own header (an asymmetric
//      algorithm only), htm and htu of this request, iat within window, ath of this grant;
//   3. the binding: the proof key's RFC 7638 thumbprint equals the grant's cnf.jkt.
// Step 3 is what makes a stolen grant useless; without it, 1 and 2 prove nothing.
// (A real resource server also remembers proof jtis for the window, to refuse replays.)
const getters = new Map();   // one cached JWKS per URL
export async function verifyBoundGrant({ grant, proof, jwks, issuer, audience, htm, htu, window = 60 }) {
  const keyFor = typeof jwks === 'function' ? jwks
    : getters.get(String(jwks)) ?? getters.set(String(jwks), remoteJwks(String(jwks))).get(String(jwks));
  const { payload: claims } = await verifyJws(grant, keyFor, { algorithms: ['ES256'], typ: 'at+jwt' });
  const now = Math.floor(Date.now() / 1000);
  if (claims.iss !== issuer) throw new Error('the grant is from another issuer');
  if (![].concat(claims.aud).includes(audience)) throw new Error('the grant is for another audience');
  if (typeof claims.exp !== 'number' || claims.exp <= now) throw new Error('the grant expired');
  const jkt = claims.cnf?.jkt;
  if (!jkt) throw new Error('the grant is not DPoP-bound (no cnf.jkt)');
  if (!proof) throw new Error('a DPoP-bound grant needs a DPoP proof');
  const { header } = decodeJws(proof);
  if (header.typ !== 'dpop+jwt' || !DPOP_ALGS.includes(header.alg)) throw new Error('not a DPoP proof');
  if (!header.jwk || ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k'].some((m) => m in header.jwk)) throw new Error('the proof must carry a public key');
  const { payload: p } = await verifyJws(proof, (h) => h.jwk, { algorithms: DPOP_ALGS, typ: 'dpop+jwt' });
  const u = new URL(htu);
  u.search = '';
  u.hash = '';
  if (p.htm !== htm || typeof p.htu !== 'string' || p.htu.split(/[?#]/)[0] !== u.href) throw new Error('the proof is for another request');
  if (typeof p.iat !== 'number' || Math.abs(now - p.iat) > window) throw new Error('the proof is not fresh');
  if (p.ath !== ath(grant)) throw new Error('the proof is for another grant');
  if (jwkThumbprint(header.jwk) !== jkt) throw new Error('the proof is signed by another key than the grant names');
  return claims;
}
