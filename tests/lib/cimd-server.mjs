// cimd-server.mjs -- a real HTTPS server (node:https) serving Client ID Metadata
// Documents for tests/unit/test_cimd.c.  It makes its own test CA and a server
// certificate (openssl CLI) for localhost, 127.0.0.1 and cimd.test in a fresh
// directory, listens on 127.0.0.1, and prints one line of JSON on stdout:
// {"port":N,"ca":"/path/ca.pem","dir":"/path"}.  It exits when stdin closes.
//
// Paths: /good.json, /private-key-jwt.json, /wrong-id.json (client_id is not the
// URL), /redirect (302), /huge.json (1 MB with Content-Length), /huge-chunked.json
// (1 MB chunked), /slow.json (headers never come), /text.json (text/html),
// /secret.json (client_secret_basic), /missing.json (404), /hits?p=PATH (how many
// times PATH was asked for).  For the MCP sign-in tests (issue 30): /mcp/client.json
// and /mcp/other.json, public clients whose one redirect URI is the loopback
// http://127.0.0.1/callback (any port matches it, RFC 8252 §7.3: the test's own
// callback listener), and /mcp/wrong-id.json, the same with a client_id that is not
// its URL.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import https from 'node:https';

const dir = mkdtempSync(join(tmpdir(), 'consentd-cimd-'));
const f = (n) => join(dir, n);
const ossl = (...args) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });

ossl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
  '-keyout', f('ca.key'), '-out', f('ca.pem'), '-days', '2', '-subj', '/CN=consentd CIMD test CA',
  '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign');
ossl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
  '-keyout', f('srv.key'), '-out', f('srv.csr'), '-subj', '/CN=localhost');
writeFileSync(f('ext.cnf'), 'subjectAltName=DNS:localhost,DNS:cimd.test,IP:127.0.0.1\n' +
  'extendedKeyUsage=serverAuth\n');
ossl('x509', '-req', '-in', f('srv.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'),
  '-CAcreateserial', '-out', f('srv.pem'), '-days', '2', '-extfile', f('ext.cnf'));

const hits = new Map();
const sockets = new Set();
let port = 0;

function doc(path, extra = {}) {
  return JSON.stringify({
    client_id: `https://${hostOf(path)}:${port}${path}`,
    client_name: 'Test MCP client',
    redirect_uris: ['http://127.0.0.1:33418/callback', 'https://client.example/cb'],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
    ...extra,
  });
}
// The host the request named (the C test uses localhost, 127.0.0.1 and cimd.test).
let lastHost = 'localhost';
const hostOf = () => lastHost;

const server = https.createServer({ key: readFileSync(f('srv.key')), cert: readFileSync(f('srv.pem')) },
  (req, res) => {
    const url = new URL(req.url, 'https://x');
    lastHost = (req.headers.host || 'localhost').replace(/:\d+$/, '');
    if (url.pathname !== '/hits') hits.set(url.pathname, (hits.get(url.pathname) || 0) + 1);
    const json = (status, body, headers = {}) => {
      res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
      res.end(body);
    };
    switch (url.pathname) {
      case '/hits':
        return json(200, JSON.stringify({ n: hits.get(url.searchParams.get('p')) || 0,
          accept: req.headers.accept || '' }));
      case '/good.json':
        return json(200, doc(url.pathname), { 'Cache-Control': 'public, max-age=600' });
      case '/private-key-jwt.json':
        return json(200, doc(url.pathname, { token_endpoint_auth_method: 'private_key_jwt',
          jwks_uri: 'https://client.example/jwks.json' }));
      case '/wrong-id.json':
        return json(200, doc(url.pathname, { client_id: `https://evil.example${url.pathname}` }));
      case '/secret.json':
        return json(200, doc(url.pathname, { token_endpoint_auth_method: 'client_secret_basic' }));
      case '/redirect':
        res.writeHead(302, { Location: `https://${lastHost}:${port}/good.json` });
        return res.end();
      case '/huge.json': {
        const body = Buffer.alloc(1 << 20, 0x20);
        return json(200, body);
      }
      case '/huge-chunked.json': {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        const chunk = Buffer.alloc(64 * 1024, 0x20);
        for (let i = 0; i < 16; i++) res.write(chunk);
        return res.end();
      }
      case '/slow.json':
        return;                              // never answers; the socket is closed at exit
      case '/mcp/client.json':
      case '/mcp/other.json':
        return json(200, doc(url.pathname, { client_name: `MCP test client ${url.pathname.slice(5, -5)}`,
          redirect_uris: ['http://127.0.0.1/callback'] }), { 'Cache-Control': 'max-age=60' });
      case '/mcp/wrong-id.json':
        return json(200, doc(url.pathname, { client_id: `https://evil.example${url.pathname}`,
          redirect_uris: ['http://127.0.0.1/callback'] }));
      case '/text.json':
        res.writeHead(200, { 'Content-Type': 'text/html' });
        return res.end(doc(url.pathname));
      default:
        return json(404, '{"error":"not found"}');
    }
  });
server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
server.listen(0, '127.0.0.1', () => {
  port = server.address().port;
  process.stdout.write(JSON.stringify({ port, ca: f('ca.pem'), dir }) + '\n');
});

function stop() {
  for (const s of sockets) s.destroy();
  server.close();
  rmSync(dir, { recursive: true, force: true });
  process.exit(0);
}
process.stdin.on('end', stop);
process.stdin.on('close', stop);
process.stdin.resume();
process.on('SIGTERM', stop);
