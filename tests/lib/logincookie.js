// consentd's sealed login cookies (server/login_cookie.c, issue #28) seen from a test that
// holds the master key it gave consentd (c.dir/master.key): open one to see what a started
// sign-in carries, or seal one as only the holder of that key could (an expired state,
// another state's hash) to reach the checks behind the seal.
//
//   loginCookieName(state, { https = false })   // consentd_login_<12 hex of SHA-256(state)>
//   loginCookies(jar)                           // the jar's login cookies: [{ name, value }]
//   openLoginCookie(masterKey, name, value, now = seconds)
//     -> { expiresAt, maxAge, stateHash, nonce, verifier, returnTo }   (throws if it does not open)
//   sealLoginCookie(masterKey, name, { expiresAt, maxAge = -1, stateHash, nonce, verifier,
//                   returnTo = '/me' }, now = seconds) -> the cookie's value
//
// The format, as login_cookie.c writes it: base64url(nonce 12 || AES-256-GCM ciphertext || tag
// 16) under HKDF-SHA-256(master key, no salt, "consentd seal v1 login-state <day>"), the
// associated data "consentd login v1 " + the cookie's name; the plaintext is a version byte
// (1), expires_at and max_age as 8-byte big-endian integers, the 32-byte SHA-256 of the
// state, the 43-character nonce and verifier, then return_to.
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';

const DAY = 86400;
const sha256 = (s) => createHash('sha256').update(s).digest();
const nowSec = () => Math.floor(Date.now() / 1000);

export function loginCookieName(state, { https = false } = {}) {
  return `${https ? '__Host-consentd-login-' : 'consentd_login_'}${sha256(state).subarray(0, 6).toString('hex')}`;
}

export function loginCookies(jar) {
  return [...jar.cookies.values()].filter((c) => /^(__Host-consentd-login-|consentd_login_)/.test(c.name))
    .map(({ name, value }) => ({ name, value }));
}

function key(masterKey, day) {
  return Buffer.from(hkdfSync('sha256', masterKey, Buffer.alloc(0), `consentd seal v1 login-state ${day}`, 32));
}

const aad = (name) => Buffer.from(`consentd login v1 ${name}`);

export function openLoginCookie(masterKey, name, value, now = nowSec()) {
  const blob = Buffer.from(value, 'base64url');
  const day = Math.floor(now / DAY);
  for (const d of [day, day - 1, day + 1]) {
    try {
      const dec = createDecipheriv('aes-256-gcm', key(masterKey, d), blob.subarray(0, 12));
      dec.setAAD(aad(name));
      dec.setAuthTag(blob.subarray(blob.length - 16));
      const pt = Buffer.concat([dec.update(blob.subarray(12, blob.length - 16)), dec.final()]);
      if (pt[0] !== 1) throw new Error(`version ${pt[0]}`);
      return {
        expiresAt: Number(pt.readBigInt64BE(1)),
        maxAge: Number(pt.readBigInt64BE(9)),
        stateHash: pt.subarray(17, 49),
        nonce: pt.subarray(49, 92).toString('latin1'),
        verifier: pt.subarray(92, 135).toString('latin1'),
        returnTo: pt.subarray(135).toString('utf8'),
      };
    } catch (e) {
      if (d === day + 1) throw e;
    }
  }
  throw new Error('unreachable');
}

export function sealLoginCookie(masterKey, name, {
  expiresAt, maxAge = -1, stateHash, nonce = randomBytes(32).toString('base64url'),
  verifier = randomBytes(32).toString('base64url'), returnTo = '/me',
}, now = nowSec()) {
  const head = Buffer.alloc(17);
  head[0] = 1;
  head.writeBigInt64BE(BigInt(expiresAt), 1);
  head.writeBigInt64BE(BigInt(maxAge), 9);
  const pt = Buffer.concat([head, stateHash, Buffer.from(nonce, 'latin1'), Buffer.from(verifier, 'latin1'),
    Buffer.from(returnTo, 'utf8')]);
  const iv = randomBytes(12);
  const enc = createCipheriv('aes-256-gcm', key(masterKey, Math.floor(now / DAY)), iv);
  enc.setAAD(aad(name));
  const ct = Buffer.concat([enc.update(pt), enc.final()]);
  return Buffer.concat([iv, ct, enc.getAuthTag()]).toString('base64url');
}

export const stateHash = sha256;
