// Forged and tampered JWTs for attacker-side tests (docs/security.md invariant 7).
// Every function takes a real compact JWS and returns a string that a careless
// verifier might accept; none of them needs a private key.
//
//   decodeJws(jwt)                       -> { header, payload, parts: [h, p, s] }
//   algNone(jwt, { keepSignature })      -> header {"alg":"none","kid":<same>}, signature dropped (or kept)
//   hmacWithPublicKey(jwt, secretText)   -> header {"alg":"HS256","kid":<same>}, HMAC-SHA256 over
//                                           header.payload keyed with secretText (e.g. a public JWK's JSON)
//   withClaims(jwt, changes)             -> payload changed ({ sub: 'bob' }), header and signature kept
//   fetchIdpJwk(issuer, kid)             -> { jwk, text }: the IdP's public key with that kid and its JSON text
import { createHmac } from 'node:crypto';
import { discover } from './idplogin.js';

const b64uJson = (v) => Buffer.from(JSON.stringify(v)).toString('base64url');
const unb64uJson = (s) => JSON.parse(Buffer.from(s, 'base64url').toString('utf8'));

export function decodeJws(jwt) {
  const parts = jwt.split('.');
  if (parts.length !== 3) throw new Error(`not a compact JWS (${parts.length} parts)`);
  return { header: unb64uJson(parts[0]), payload: unb64uJson(parts[1]), parts };
}

export function algNone(jwt, { keepSignature = false } = {}) {
  const { header, parts } = decodeJws(jwt);
  const h = b64uJson({ alg: 'none', kid: header.kid });
  return `${h}.${parts[1]}.${keepSignature ? parts[2] : ''}`;
}

export function hmacWithPublicKey(jwt, secretText) {
  const { header, parts } = decodeJws(jwt);
  const h = b64uJson({ alg: 'HS256', kid: header.kid });
  const sig = createHmac('sha256', Buffer.from(secretText, 'utf8')).update(`${h}.${parts[1]}`).digest('base64url');
  return `${h}.${parts[1]}.${sig}`;
}

export function withClaims(jwt, changes) {
  const { payload, parts } = decodeJws(jwt);
  return `${parts[0]}.${b64uJson({ ...payload, ...changes })}.${parts[2]}`;
}

export async function fetchIdpJwk(issuer, kid) {
  const meta = await discover(issuer);
  const res = await fetch(meta.jwks_uri);
  if (res.status !== 200) throw new Error(`jwks_uri ${meta.jwks_uri}: HTTP ${res.status}`);
  const { keys } = await res.json();
  const jwk = keys.find((k) => k.kid === kid);
  if (!jwk) throw new Error(`no key ${kid} at ${meta.jwks_uri}`);
  return { jwk, text: JSON.stringify(jwk) };
}
