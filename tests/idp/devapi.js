#!/usr/bin/env node
// devapi.js -- the development upstream API of `make run` (scripts/run-dev.sh): a tiny issue
// tracker standing in for "GitHub's API" behind the development provider (a second devidp.js
// in downstream mode). It accepts only bearer tokens that the provider's introspection endpoint
// (RFC 7662) calls active, with this API as their audience, as a real resource server would.
//
// NOT FOR PRODUCTION: plain http on loopback, issues kept in memory.
//
//   node tests/idp/devapi.js --provider http://127.0.0.1:9091 --port 9092 \
//     [--client resource-server --secret S] [--audience http://127.0.0.1:9092] [--host 127.0.0.1]
//
//   --provider: the provider's issuer (its introspection endpoint comes from its discovery
//     document, read at the first request); --client/--secret: a client registered there for introspection
//     (client_secret_basic); --audience: what a token's aud must hold (default: this API's URL).
//   When listening, prints exactly one line `READY http://HOST:PORT` on stdout; one stderr line
//   per request ("[devapi] GET /path -> 200 sub=alice", never a token). SIGINT/SIGTERM: exit 0.
//
// Routes (JSON; {owner}/{repo} any names; acme/widgets starts with one issue):
//   GET  /user                           any active token    -> 200 { login, scope }
//   GET  /repos/{owner}/{repo}/issues    scope issues:read   -> 200 [ { number, title, body, author } ]
//   POST /repos/{owner}/{repo}/issues    scope issues:write, body { "title": "...", "body": "..." }
//                                                            -> 201 { number, title, body, author }
//   no token or not active -> 401 (WWW-Authenticate: Bearer error="invalid_token"); a token
//   without the scope -> 403 insufficient_scope; anything else -> 404.
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { introspect } from '../lib/downstream.js';
import { readBodyUpTo } from '../lib/readbody.js';

const log = (...a) => console.error('[devapi]', ...a);

const readBody = (req) => readBodyUpTo(req, 65536);

async function main() {
  const { values: v } = parseArgs({
    options: {
      provider: { type: 'string' },
      port: { type: 'string', default: '0' },
      host: { type: 'string', default: '127.0.0.1' },
      client: { type: 'string', default: 'resource-server' },
      secret: { type: 'string', default: 'resource-server-dev-secret' },
      audience: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (v.help || !v.provider) {
    console.error('usage: node tests/idp/devapi.js --provider ISSUER [--port P] [--client ID --secret S] [--audience A]');
    process.exit(v.help ? 0 : 2);
  }
  // The provider's introspection endpoint, from its discovery document at the first request
  // (so this API can start alongside the provider).
  let introspectionEndpoint = null;
  const endpoint = async () => {
    if (!introspectionEndpoint) {
      const res = await fetch(`${v.provider.replace(/\/$/, '')}/.well-known/openid-configuration`);
      const meta = res.ok ? await res.json() : {};
      if (!meta.introspection_endpoint) throw new Error(`${v.provider}: no introspection_endpoint (HTTP ${res.status})`);
      introspectionEndpoint = meta.introspection_endpoint;
    }
    return introspectionEndpoint;
  };

  const issues = new Map([['acme/widgets', [
    { number: 1, title: 'Welcome to the development API', body: 'Opened by run-dev.sh', author: 'run-dev' },
  ]]]);
  let audience = v.audience;

  const server = createServer(async (req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    let who = '-';
    const reply = (status, obj, headers = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
      res.end(`${JSON.stringify(obj, null, 2)}\n`);
      log(`${req.method} ${path} -> ${status} sub=${who}`);
    };
    try {
      const body = await readBody(req);
      const m = /^Bearer ([\x21-\x7e]+)$/.exec(req.headers.authorization || '');
      if (!m) return reply(401, { error: 'no bearer token' }, { 'www-authenticate': 'Bearer' });
      const info = await introspect({
        introspectionEndpoint: await endpoint(), clientId: v.client, clientSecret: v.secret, token: m[1],
      });
      const aud = info.aud === undefined ? [] : [].concat(info.aud);
      if (info.active !== true || !aud.includes(audience)) {
        return reply(401, { error: info.active === true ? 'wrong audience' : 'token not active' },
          { 'www-authenticate': 'Bearer error="invalid_token"' });
      }
      who = info.sub;
      const scopes = String(info.scope || '').split(' ');
      const need = (s) => {
        if (scopes.includes(s)) return true;
        reply(403, { error: 'insufficient_scope', scope: s },
          { 'www-authenticate': `Bearer error="insufficient_scope", scope="${s}"` });
        return false;
      };
      if (path === '/user' && req.method === 'GET') return reply(200, { login: info.sub, scope: info.scope });
      const r = /^\/repos\/([^/]+)\/([^/]+)\/issues$/.exec(path);
      if (!r) return reply(404, { error: 'not found' });
      const key = `${decodeURIComponent(r[1])}/${decodeURIComponent(r[2])}`;
      if (req.method === 'GET') {
        if (need('issues:read')) reply(200, issues.get(key) || []);
        return undefined;
      }
      if (req.method === 'POST') {
        if (!need('issues:write')) return undefined;
        let b;
        try { b = JSON.parse(body); } catch { b = null; }
        if (!b || typeof b.title !== 'string' || b.title === '') return reply(422, { error: 'a JSON body with a title is needed' });
        const list = issues.get(key) || [];
        const issue = { number: list.length + 1, title: b.title, body: typeof b.body === 'string' ? b.body : '', author: info.sub };
        list.push(issue);
        issues.set(key, list);
        return reply(201, issue);
      }
      return reply(405, { error: 'method not allowed' }, { allow: 'GET, POST' });
    } catch (err) {
      return reply(502, { error: `introspection failed: ${err.message}` });
    }
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(v.port), v.host, resolve);
  });
  const url = `http://${v.host}:${server.address().port}`;
  audience = audience || url;
  const stop = () => {
    server.close(() => process.exit(0));
    server.closeAllConnections?.();
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdout.write(`READY ${url}\n`);
}

main().catch((err) => {
  log('fatal', err.message);
  process.exit(1);
});
