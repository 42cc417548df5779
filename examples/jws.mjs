// JWS with Node's own crypto, for the examples (no npm package): compact JWS signing and
// verification for ES256, PS256 and EdDSA (also by RFC 9864's name, Ed25519), RFC 7638 thumbprints, and a cached JWKS.
// The algorithm always comes from the caller's allowlist and must fit the key: never
// from the token's header on trust, never "none" or HMAC.  Node 18+.
import { createHash, createPublicKey, sign, verify, constants, KeyObject } from 'node:crypto';

export const b64u = (buf) => Buffer.from(buf).toString('base64url');
const json64 = (s) => JSON.parse(Buffer.from(s, 'base64url').toString('utf8'));

// The options node:crypto needs for alg (the hash, the signature's encoding, the padding).
function params(alg, key) {
  if (alg === 'ES256') return { hash: 'sha256', key: { key, dsaEncoding: 'ieee-p1363' } };
  if (alg === 'PS256') return { hash: 'sha256', key: { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 } };
  if (alg === 'EdDSA' || alg === 'Ed25519') return { hash: null, key };
  throw new Error(`algorithm ${alg} is not allowed`);
}
// The key types each algorithm needs (a PS256 header over an EC key is refused).
const KEY_TYPE = { ES256: 'ec', PS256: 'rsa', EdDSA: 'ed25519', Ed25519: 'ed25519' };
const asKeyObject = (k) => (k instanceof KeyObject ? k : KeyObject.from(k));   // also WebCrypto keys

// header and payload -> the compact JWS, signed with privateKey (a KeyObject or CryptoKey).
export function signJws(header, payload, privateKey) {
  const input = `${b64u(JSON.stringify(header))}.${b64u(JSON.stringify(payload))}`;
  const { hash, key } = params(header.alg, asKeyObject(privateKey));
  return `${input}.${b64u(sign(hash, Buffer.from(input), key))}`;
}

// The header and payload of a compact JWS, unverified (to choose the key).
export function decodeJws(token) {
  const parts = String(token).split('.');
  if (parts.length !== 3) throw new Error('not a compact JWS');
  return { header: json64(parts[0]), payload: json64(parts[1]) };
}

// Verifies token with the public key keyFor(header) gives (a JWK, KeyObject or CryptoKey);
// alg in algorithms, typ exactly typ.  -> { header, payload }; throws on any failure.
export async function verifyJws(token, keyFor, { algorithms, typ }) {
  const { header, payload } = decodeJws(token);
  if (!algorithms.includes(header.alg)) throw new Error(`algorithm ${header.alg} is not allowed`);
  if (typ !== undefined && header.typ !== typ) throw new Error(`typ is not ${typ}`);
  const k = await keyFor(header);
  const pub = k instanceof KeyObject || !('kty' in k) ? asKeyObject(k) : createPublicKey({ key: k, format: 'jwk' });
  if (pub.asymmetricKeyType !== KEY_TYPE[header.alg]) throw new Error(`the key does not fit ${header.alg}`);
  const [h, p, s] = token.split('.');
  const { hash, key } = params(header.alg, pub);
  if (!verify(hash, Buffer.from(`${h}.${p}`), key, Buffer.from(s, 'base64url'))) throw new Error('bad signature');
  return { header, payload };
}

// RFC 7638: SHA-256 over the required members in lexicographic order, base64url.
export function jwkThumbprint(jwk) {
  const req = { EC: ['crv', 'kty', 'x', 'y'], OKP: ['crv', 'kty', 'x'], RSA: ['e', 'kty', 'n'] }[jwk.kty];
  if (!req) throw new Error(`key type ${jwk.kty} has no thumbprint here`);
  const canon = JSON.stringify(Object.fromEntries(req.map((m) => [m, jwk[m]])));
  return createHash('sha256').update(canon).digest('base64url');
}

// A JWKS at url: fetched on first use and again (at most once a minute) when a kid is
// missing, as a verifier of consentd's grants should.  -> keyFor(header) for verifyJws.
export function remoteJwks(url) {
  let keys = [];
  let fetchedAt = 0;
  const load = async () => {
    const res = await fetch(url);
    if (!res.ok) throw new Error(`JWKS: ${res.status} from ${url}`);
    keys = (await res.json()).keys || [];
    fetchedAt = Date.now();
  };
  return async (header) => {
    let k = keys.find((j) => j.kid === header.kid);
    if (!k && Date.now() - fetchedAt > 60000) { await load(); k = keys.find((j) => j.kid === header.kid); }
    if (!k) throw new Error(`no key ${header.kid} in ${url}`);
    return k;
  };
}
