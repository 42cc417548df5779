// Web Crypto as a global on every Node this project supports. Node 20 has globalThis.crypto;
// Debian 12's Node 18 has it only behind --experimental-global-webcrypto, and an ES module
// there sees no `crypto` at all. oauth4webapi (and these tests) use the global, so import
// this first: it installs node:crypto's webcrypto (and its CryptoKey) where the globals are missing.
import { webcrypto } from 'node:crypto';

if (globalThis.crypto === undefined) globalThis.crypto = webcrypto;
// oauth4webapi also checks keys with `instanceof CryptoKey`, a global Node 18 lacks too.
if (globalThis.CryptoKey === undefined) globalThis.CryptoKey = webcrypto.CryptoKey;

export default globalThis.crypto;
