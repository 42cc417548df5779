// Writes tests/unit/jws_vectors.h: fixed keys, client assertions and DPoP proofs for
// test_jws.c, signed here with jose (an implementation independent of consentd's),
// all made for NOW below so the C tests pass the same fixed time.
//   cd tests && node unit/vectors/gen_jws.mjs > unit/jws_vectors.h
import { createHash } from 'node:crypto';
import { generateKeyPair, exportJWK, SignJWT, calculateJwkThumbprint } from 'jose';

const NOW = 1700000000;
const ID = 'agent-gateway';
const ISS = 'https://consent.example.com';
const out = [];
const put = (name, v) => out.push(`#define ${name} ${JSON.stringify(v)}`);

const pair = async (alg, kid) => {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(publicKey);
  return { alg, kid, privateKey, jwk, priv: await exportJWK(privateKey) };
};
const es = await pair('ES256', 'es');
const ps = await pair('PS256', 'ps');
const ed = await pair('EdDSA', 'ed');
const rogue = await pair('ES256', 'es');
put('V_JWKS', JSON.stringify({ keys: [es, ps, ed].map((k) => ({ ...k.jwk, kid: k.kid, alg: k.alg, use: 'sig' })) }));
put('V_JWK_ES', JSON.stringify(es.jwk));
put('V_JWK_PS', JSON.stringify(ps.jwk));
put('V_JWK_ED', JSON.stringify(ed.jwk));
put('V_JWK_ES_PRIVATE', JSON.stringify(es.priv));
put('V_JKT_ES', await calculateJwkThumbprint(es.jwk, 'sha256'));
put('V_JKT_PS', await calculateJwkThumbprint(ps.jwk, 'sha256'));
put('V_JKT_ED', await calculateJwkThumbprint(ed.jwk, 'sha256'));

const sign = (claims, header, key) => new SignJWT(claims).setProtectedHeader(header).sign(key);
const base = (extra = {}) => ({ iss: ID, sub: ID, aud: ISS, iat: NOW, exp: NOW + 60, jti: 'jti-1', ...extra });
const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');

put('V_ASSERT_ES', await sign(base(), { alg: 'ES256', kid: 'es' }, es.privateKey));
put('V_ASSERT_PS', await sign(base(), { alg: 'PS256', kid: 'ps' }, ps.privateKey));
put('V_ASSERT_ED', await sign(base(), { alg: 'EdDSA', kid: 'ed' }, ed.privateKey));
put('V_ASSERT_NOKID', await sign(base(), { alg: 'EdDSA' }, ed.privateKey));
put('V_ASSERT_AUD_ARRAY', await sign(base({ aud: ['https://other.example', `${ISS}/token`] }), { alg: 'ES256', kid: 'es' }, es.privateKey));
put('V_ASSERT_AUD_OTHER', await sign(base({ aud: 'https://other.example' }), { alg: 'ES256', kid: 'es' }, es.privateKey));
put('V_ASSERT_EXPIRED', await sign(base({ iat: NOW - 600, exp: NOW - 120 }), { alg: 'ES256', kid: 'es' }, es.privateKey));
put('V_ASSERT_TOO_LONG', await sign(base({ exp: NOW + 600 }), { alg: 'ES256', kid: 'es' }, es.privateKey));
put('V_ASSERT_NO_EXP', await sign(base({ exp: undefined }), { alg: 'ES256', kid: 'es' }, es.privateKey));
put('V_ASSERT_ISS_OTHER', await sign(base({ iss: 'someone-else' }), { alg: 'ES256', kid: 'es' }, es.privateKey));
put('V_ASSERT_SUB_OTHER', await sign(base({ sub: 'someone-else' }), { alg: 'ES256', kid: 'es' }, es.privateKey));
put('V_ASSERT_NO_JTI', await sign(base({ jti: undefined }), { alg: 'ES256', kid: 'es' }, es.privateKey));
put('V_ASSERT_FUTURE_IAT', await sign(base({ iat: NOW + 200 }), { alg: 'ES256', kid: 'es' }, es.privateKey));
put('V_ASSERT_ROGUE', await sign(base(), { alg: 'ES256', kid: 'es' }, rogue.privateKey));
put('V_ASSERT_KID_UNKNOWN', await sign(base(), { alg: 'ES256', kid: 'nope' }, es.privateKey));
put('V_ASSERT_ALG_MISMATCH', await sign(base(), { alg: 'ES256', kid: 'ps' }, es.privateKey));
put('V_ASSERT_HS256', await sign(base(), { alg: 'HS256', kid: 'es' }, new TextEncoder().encode('x'.repeat(32))));
put('V_ASSERT_NONE', `${b64({ alg: 'none' })}.${b64(base())}.`);

// DPoP proofs (RFC 9449 §4.2) for POST https://consent.example.com/token at NOW.
const HTU = `${ISS}/token`;
const proof = (claims, header = {}, k = es) => sign({ htm: 'POST', htu: HTU, iat: NOW, jti: 'p-1', ...claims },
  { typ: 'dpop+jwt', alg: k.alg, jwk: k.jwk, ...header }, k.privateKey);
const ath = createHash('sha256').update('the-access-token').digest('base64url');
put('V_PROOF_ES', await proof({}));
put('V_PROOF_PS', await proof({}, {}, ps));
put('V_PROOF_ED', await proof({}, {}, ed));
put('V_PROOF_QUERY', await proof({ htu: `${HTU}?a=b#frag` }));
put('V_PROOF_ATH', await proof({ ath, htm: 'GET', htu: `${ISS}/proxy/gh/repos` }));
put('V_PROOF_NONCE', await proof({ nonce: 'the-nonce' }));
put('V_PROOF_TYP_JWT', await proof({}, { typ: 'JWT' }));
put('V_PROOF_NO_JWK', await proof({}, { jwk: undefined }));
put('V_PROOF_PRIVATE_JWK', await proof({}, { jwk: es.priv }));
put('V_PROOF_WRONG_JWK', await proof({}, { jwk: ed.jwk }));
put('V_PROOF_OLD', await proof({ iat: NOW - 600 }));
put('V_PROOF_FUTURE', await proof({ iat: NOW + 600 }));
put('V_PROOF_NO_JTI', await proof({ jti: undefined }));
put('V_PROOF_HS256', await sign({ htm: 'POST', htu: HTU, iat: NOW, jti: 'p-1' }, { typ: 'dpop+jwt', alg: 'HS256', jwk: es.jwk }, new TextEncoder().encode('x'.repeat(32))));
put('V_PROOF_NONE', `${b64({ typ: 'dpop+jwt', alg: 'none', jwk: es.jwk })}.${b64({ htm: 'POST', htu: HTU, iat: NOW, jti: 'p-1' })}.`);
put('V_ATH', ath);

console.log(`/* jws_vectors.h -- generated by tests/unit/vectors/gen_jws.mjs (jose); do not edit.
 * Keys, client assertions and DPoP proofs made for V_NOW. */
#ifndef CS_JWS_VECTORS_H
#define CS_JWS_VECTORS_H
#define V_NOW ${NOW}
${out.join('\n')}
#endif`);
