// Verifying a consentd grant offline, as docs/grants.md's steps 1-7 say, with Node's own
// crypto (./jws.mjs; no npm package).  Node 18+.
//
//   import { verifyGrant } from './examples/verify-grant.mjs';
//   const claims = await verifyGrant(grant, { consentd, audience, resource, scope, agent });
//
// resource is the resource's URI as the grant carries it: [resource.X] uri, by default
// urn:consentd:resource:X (not the bare name X).
import { verifyJws, remoteJwks } from './jws.mjs';

const jwksOf = new Map();     // one cached key set per consentd
const SKEW = 5;               // seconds of clock difference allowed

export async function verifyGrant(grant, { consentd, audience = 'agent-gateway', resource, scope, agent }) {
  if (!jwksOf.has(consentd)) jwksOf.set(consentd, remoteJwks(`${consentd}/.well-known/jwks.json`));
  // 1-3: ES256 pinned (never what the token says), typ at+jwt, a kid of consentd's JWKS.
  const { payload: c } = await verifyJws(grant, jwksOf.get(consentd), { algorithms: ['ES256'], typ: 'at+jwt' });
  for (const k of ['sub', 'act', 'scope', 'resource', 'cid', 'jti', 'iat', 'exp'])
    if (c[k] === undefined) throw new Error(`the grant lacks ${k}`);
  const now = Math.floor(Date.now() / 1000);
  if (c.iss !== consentd) throw new Error('grant from another issuer');                     // 4
  if (![].concat(c.aud).includes(audience)) throw new Error('grant for another audience'); // 5
  if (c.exp <= now - SKEW || c.iat > now + SKEW) throw new Error('grant expired or not yet valid'); // 6
  if (c.resource !== resource) throw new Error(`grant for another resource (${c.resource})`);      // 7
  if (!c.scope.split(' ').includes(scope)) throw new Error(`scope ${scope} not granted`);
  if (c.act?.sub !== agent) throw new Error('grant for another agent');
  return c;                   // c.sub: the person; c.cid: the consent
}
