#!/usr/bin/env node
// benchidp.mjs -- the development IdP's software (panva's oidc-provider 8.x, from
// tests/node_modules) configured for `make bench` only: the client_credentials grant with
// resource indicators, so that its token endpoint issues ES256-signed JWT access tokens, as
// consentd's POST /token issues ES256 grants.  The tests' IdP (tests/idp/devidp.js) is not
// changed.  NOT FOR PRODUCTION: plain http on loopback, keys made at each start.
//
//   node bench/benchidp.mjs      -> listens on 127.0.0.1, a free port; prints
//                                   "READY http://127.0.0.1:P" on stdout; SIGTERM: exit 0
//
// Client "bench-rs" (client_secret_basic, secret "bench-rs-secret"), grant client_credentials.
//   POST /token grant_type=client_credentials&scope=read&resource=https://jwt.bench
//        -> an ES256 JWT access token (format "jwt": signed, not stored)
//   POST /token grant_type=client_credentials&scope=read&resource=https://opaque.bench
//        -> an opaque access token (stored): oidc-provider introspects only stored tokens,
//           a JWT access token introspects as {"active":false}
//   POST /token/introspection token=...   GET /jwks
// Storage: an unbounded in-memory Map (oidc-provider's own memory adapter keeps the last
// 1,000 entries only, too few for 10,000 distinct tokens).
import { createServer } from 'node:http';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const { default: Provider } = await import(pathToFileURL(
  join(here, '..', 'tests', 'node_modules', 'oidc-provider', 'lib', 'index.js')).href);

const store = new Map();                    // key -> { payload, exp (ms) }
class MapAdapter {
  constructor(name) { this.name = name; }
  key(id) { return `${this.name}:${id}`; }
  async upsert(id, payload, expiresIn) {
    store.set(this.key(id), { payload, exp: expiresIn ? Date.now() + expiresIn * 1000 : Infinity });
  }
  async find(id) {
    const e = store.get(this.key(id));
    if (!e) return undefined;
    if (e.exp <= Date.now()) { store.delete(this.key(id)); return undefined; }
    return e.payload;
  }
  async findByUserCode() { return undefined; }
  async findByUid() { return undefined; }
  async consume(id) { const p = await this.find(id); if (p) p.consumed = Math.floor(Date.now() / 1000); }
  async destroy(id) { store.delete(this.key(id)); }
  async revokeByGrantId() { /* no grants with client_credentials */ }
}

const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const jwk = { ...privateKey.export({ format: 'jwk' }), alg: 'ES256', use: 'sig', kid: 'bench-es256' };
const RS = {
  'https://jwt.bench': { scope: 'read', audience: 'https://jwt.bench', accessTokenTTL: 900,
    accessTokenFormat: 'jwt', jwt: { sign: { alg: 'ES256' } } },
  'https://opaque.bench': { scope: 'read', audience: 'https://opaque.bench', accessTokenTTL: 3600,
    accessTokenFormat: 'opaque' },
};

const server = createServer();
await new Promise((resolve) => { server.listen(0, '127.0.0.1', resolve); });
const issuer = `http://127.0.0.1:${server.address().port}`;
const provider = new Provider(issuer, {
  adapter: MapAdapter,
  jwks: { keys: [jwk] },
  clients: [{
    client_id: 'bench-rs', client_secret: 'bench-rs-secret', grant_types: ['client_credentials'],
    response_types: [], redirect_uris: [], token_endpoint_auth_method: 'client_secret_basic',
  }],
  clientDefaults: { id_token_signed_response_alg: 'ES256' },
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  scopes: ['read'],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async () => undefined,
      useGrantedResource: async () => true,
      async getResourceServerInfo(ctx, indicator) {
        if (!Object.hasOwn(RS, indicator)) throw new Provider.errors.InvalidTarget();
        return RS[indicator];
      },
    },
  },
});
server.on('request', provider.callback());
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdout.write(`READY ${issuer}\n`);
