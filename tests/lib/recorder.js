// A recording upstream API for consentd's proxy mode (docs/architecture.md flow H): a loopback
// HTTP server that records every request it receives, exactly as received, and answers per
// path as told.
//
//   const rec = await startRecorder({ port = 0, record = true });
//                                // record: false keeps no entries (rec.seen stays empty, for
//                                //   benchmarks); rec.count() and rec.connections() still count
//   rec.url                      // http://127.0.0.1:PORT
//   rec.seen                     // [{ method, url, path, query, headers, rawHeaders, body, status,
//                                //    socket }]  socket: a number per TCP connection (reuse)
//                                //   url: the request target as sent (raw), path: its raw path
//   rec.since(n)                 // rec.seen.slice(n)
//   rec.count()                  // requests received so far (recorded or not)
//   rec.connections()            // TCP connections accepted so far
//   rec.introspectWith({ introspectionEndpoint, clientId, clientSecret, audience })
//                                // from then on, a bearer token must be active at the provider
//                                //   (RFC 7662, tests/lib/downstream.js introspect) or -> 401
//   rec.mode(path, m)            // for that exact raw path: 'normal' (default), 'redirect',
//                                //   'hang', 'unauthorized-once', 'stream', 'huge', 'huge-chunked' or 'not-modified'
//   rec.release(path)            // lets a 'stream' answer at that path send its second part
//   rec.onRequest(fn)            // fn(entry) runs as each request arrives (its body read),
//                                //   before any answer: to look at consentd's state while it
//                                //   waits on its upstream.  null removes it.
//   await rec.stop()
//
// Modes:
//   normal             200 (201 for POST) JSON { ok, method, path, query, body, sub, scope }
//                      with `X-Recorder: normal`; never echoes a request header
//   redirect           302 with Location: rec.redirectTarget (default `${rec.url}/evil`, so a
//                      proxy that follows it shows up in rec.seen) and a small JSON body
//   hang               reads the request and never answers (until stop)
//   unauthorized-once  the first request at that path gets 401 WWW-Authenticate: Bearer
//                      error="invalid_token"; later ones are normal
//   stream             200 text/plain without Content-Length (chunked): "first part\n" at
//                      once, "second part\n" only after rec.release(path), then the end; so a
//                      client sees the first part before the second only if the proxy streams
//   not-modified       304 with ETag "v1" and no body
//   huge               200 with Content-Length: 2 MiB of 'x' (past consentd's 1 MiB cap)
//   huge-chunked       the same 2 MiB, chunked, without Content-Length: the first 64 KiB at
//                      once, the rest after rec.release(path)
import { createServer } from 'node:http';
import { introspect } from './downstream.js';

export async function startRecorder({ port = 0, record = true } = {}) {
  const seen = [];
  let nrequests = 0;
  const modes = new Map();
  const unauthorizedDone = new Set();
  const hanging = new Set();
  const releases = new Map();   // path -> resolve() of a waiting 'stream' answer
  const sockets = new WeakMap(); // socket -> its number, to see connection reuse
  let nsockets = 0;
  let check = null;
  let onRequest = null;
  const rec = {};

  const server = createServer(async (req, res) => {
    const target = req.url;
    const q = target.indexOf('?');
    const entry = {
      method: req.method, url: target, path: q < 0 ? target : target.slice(0, q),
      query: q < 0 ? null : target.slice(q + 1), headers: { ...req.headers },
      rawHeaders: [...req.rawHeaders], body: null, status: 0, introspection: null, socket: 0,
    };
    if (!sockets.has(req.socket)) sockets.set(req.socket, ++nsockets);
    entry.socket = sockets.get(req.socket);
    nrequests += 1;
    if (record) seen.push(entry);
    const reply = (status, obj, headers = {}) => {
      entry.status = status;
      res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
      res.end(JSON.stringify(obj));
    };
    try {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      entry.body = Buffer.concat(chunks).toString('utf8');
      if (onRequest) onRequest(entry);
      const mode = modes.get(entry.path) || 'normal';
      if (mode === 'hang') {
        hanging.add(res);
        return;
      }
      if (mode === 'stream') {
        entry.status = 200;
        res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'x-recorder': 'stream' });
        res.write('first part\n');
        await new Promise((resolve) => releases.set(entry.path, resolve));
        res.end('second part\n');
        return;
      }
      if (mode === 'huge' || mode === 'huge-chunked') {
        const total = 2 * 1024 * 1024;
        entry.status = 200;
        res.writeHead(200, { 'content-type': 'text/plain', ...(mode === 'huge' ? { 'content-length': total } : {}) });
        const block = Buffer.alloc(64 * 1024, 'x');
        for (let sent = 0; sent < total; sent += block.length) {
          if (!res.write(block)) await new Promise((resolve) => { res.once('drain', resolve); res.once('close', resolve); });
          if (res.destroyed) return;
          // huge-chunked: the rest only after rec.release(path), so that the status has
          // gone out before the cap is passed.
          if (sent === 0 && mode === 'huge-chunked') await new Promise((resolve) => releases.set(entry.path, resolve));
        }
        res.end();
        return;
      }
      if (mode === 'not-modified') {
        entry.status = 304;
        res.writeHead(304, { etag: '"v1"', 'x-recorder': 'not-modified' });
        res.end();
        return;
      }
      if (mode === 'redirect') {
        reply(302, { ok: true, redirected: true }, { location: rec.redirectTarget, 'x-recorder': 'redirect' });
        return;
      }
      if (mode === 'unauthorized-once' && !unauthorizedDone.has(entry.path)) {
        unauthorizedDone.add(entry.path);
        reply(401, { ok: false, error: 'token expired (told to)' }, { 'www-authenticate': 'Bearer error="invalid_token"' });
        return;
      }
      let info = null;
      if (check) {
        const m = /^Bearer ([\x21-\x7e]+)$/.exec(req.headers.authorization || '');
        if (!m) {
          reply(401, { ok: false, error: 'no bearer token' }, { 'www-authenticate': 'Bearer' });
          return;
        }
        info = await introspect({ ...check, token: m[1] });
        entry.introspection = info;
        const aud = info.aud === undefined ? [] : (Array.isArray(info.aud) ? info.aud : [info.aud]);
        if (info.active !== true || (check.audience && !aud.includes(check.audience))) {
          reply(401, { ok: false, error: info.active === true ? 'wrong audience' : 'token not active' },
            { 'www-authenticate': 'Bearer error="invalid_token"' });
          return;
        }
      }
      let body = null;
      if (entry.body) { try { body = JSON.parse(entry.body); } catch { body = entry.body; } }
      reply(req.method === 'POST' ? 201 : 200, {
        ok: true, method: req.method, path: entry.path, query: entry.query, body,
        sub: info?.sub ?? null, scope: info?.scope ?? null,
      }, { 'x-recorder': 'normal' });
    } catch (err) {
      reply(502, { ok: false, error: `recorder: ${err.message}` });
    }
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  const url = `http://127.0.0.1:${server.address().port}`;
  Object.assign(rec, {
    url,
    seen,
    redirectTarget: `${url}/evil`,
    since(n) { return seen.slice(n); },
    count() { return nrequests; },
    connections() { return nsockets; },
    onRequest(fn) { onRequest = fn; },
    introspectWith({ introspectionEndpoint, clientId, clientSecret, audience }) {
      check = { introspectionEndpoint, clientId, clientSecret, audience };
    },
    mode(path, m) {
      if (!['normal', 'redirect', 'hang', 'unauthorized-once', 'stream', 'huge', 'huge-chunked', 'not-modified'].includes(m)) {
        throw new Error(`mode ${m}`);
      }
      modes.set(path, m);
      unauthorizedDone.delete(path);
    },
    release(path) {
      const r = releases.get(path);
      if (!r) return false;
      releases.delete(path);
      r();
      return true;
    },
    async stop() {
      for (const r of releases.values()) r();
      for (const r of hanging) { try { r.destroy(); } catch { /* gone */ } }
      server.closeAllConnections?.();
      await new Promise((resolve) => { server.close(() => resolve()); });
    },
  });
  return rec;
}

export default startRecorder;
