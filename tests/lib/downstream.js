// A tiny downstream API (the thing an agent finally calls, e.g. "GitHub's API") for the token
// vault's tests: it accepts only bearer tokens that the downstream provider's introspection
// endpoint (RFC 7662) calls active.
//
//   const api = await startDownstreamApi({
//     introspectionEndpoint,          // the downstream IdP's introspection endpoint
//     clientId, clientSecret,         // a client registered there for introspection
//                                     //   (client_secret_basic, RFC 6749 §2.3.1 encoding)
//     audience,                       // optional: the token's aud must include it
//     port = 0,                       // 0: a free port on 127.0.0.1
//   });
//   api.url                            // http://127.0.0.1:PORT
//   api.seen                           // [{ method, path, authorization, body, status, introspection }]
//   await api.stop()
//
// Any method and path: `Authorization: Bearer X` -> introspect X -> 200 JSON
// { ok: true, sub, scope, path, method } when active (and aud matches), else 401 JSON
// { ok: false, error } with WWW-Authenticate: Bearer error="invalid_token".
import { createServer } from 'node:http';
import { basicAuth } from './idplogin.js';
import { readBodyUpTo } from './readbody.js';

const readBody = (req) => readBodyUpTo(req, 1 << 20);

export async function introspect({ introspectionEndpoint, clientId, clientSecret, token, hint }) {
  const body = new URLSearchParams({ token });
  if (hint) body.set('token_type_hint', hint);
  const res = await fetch(introspectionEndpoint, {
    method: 'POST',
    headers: {
      authorization: basicAuth(clientId, clientSecret),
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json',
    },
    body: body.toString(),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`introspection: HTTP ${res.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

export async function startDownstreamApi({
  introspectionEndpoint, clientId, clientSecret, audience, port = 0,
}) {
  const seen = [];
  const server = createServer(async (req, res) => {
    const entry = {
      method: req.method, path: req.url, authorization: req.headers.authorization ?? null,
      body: null, status: 0, introspection: null,
    };
    seen.push(entry);
    const reply = (status, obj, headers = {}) => {
      entry.status = status;
      res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
      res.end(JSON.stringify(obj));
    };
    try {
      entry.body = await readBody(req);
      const m = /^Bearer ([\x21-\x7e]+)$/.exec(entry.authorization || '');
      if (!m) {
        reply(401, { ok: false, error: 'no bearer token' }, { 'www-authenticate': 'Bearer' });
        return;
      }
      const info = await introspect({ introspectionEndpoint, clientId, clientSecret, token: m[1] });
      entry.introspection = info;
      const aud = info.aud === undefined ? [] : (Array.isArray(info.aud) ? info.aud : [info.aud]);
      if (info.active !== true || (audience && !aud.includes(audience))) {
        reply(401, { ok: false, error: info.active === true ? 'wrong audience' : 'token not active' },
          { 'www-authenticate': 'Bearer error="invalid_token"' });
        return;
      }
      const u = new URL(req.url, 'http://x');
      reply(200, { ok: true, sub: info.sub, scope: info.scope, path: u.pathname, method: req.method });
    } catch (err) {
      reply(502, { ok: false, error: `introspection failed: ${err.message}` });
    }
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    seen,
    async stop() {
      server.closeAllConnections?.();
      await new Promise((resolve) => { server.close(() => resolve()); });
    },
  };
}

export default startDownstreamApi;
