#!/usr/bin/env node
// devcimd.js -- `make run`'s host of a Client ID Metadata Document (issue #31 item 6): the
// client-id URL that lets the official MCP SDK's example client
// (@modelcontextprotocol/sdk 1.32.2, dist/esm/examples/client/simpleOAuthClient.js, its second
// argument) sign in through consentd. The SDKs accept only an https client-id URL, and
// consentd offers no dynamic client registration, so this serves the document over https on
// loopback with a development CA of its own; run-dev.sh's config trusts that CA for client
// metadata fetches only ([mcp] cimd_ca_file) and lets them come from loopback.
//
// NOT FOR PRODUCTION: a development CA whose key lies in DIR.
//
//   node tests/idp/devcimd.js --dir DIR [--port 9094] [--host 127.0.0.1]
//
//   DIR/ca.pem, ca.key, cert.pem, key.pem: made with the openssl command-line tool when
//   missing or expiring within a day (a P-256 CA and a certificate for 127.0.0.1 and
//   localhost, 30 days), reused otherwise.
//   GET /sdk-example-client.json: the document, its client_id being that URL: a public client
//   (token_endpoint_auth_method none) whose redirect URI is the example's own,
//   http://localhost:8090/callback. Anything else: 404.
//   When listening, prints exactly one line `READY https://HOST:PORT` on stdout; one stderr
//   line per request. SIGINT/SIGTERM: exit 0.
import https from 'node:https';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const log = (...a) => console.error('[devcimd]', ...a);
export const DOC_PATH = '/sdk-example-client.json';
export const EXAMPLE_REDIRECT = 'http://localhost:8090/callback';

// The CA and server certificate in dir, made when missing or about to expire.
function certificates(dir) {
  const f = (n) => join(dir, n);
  const fresh = ['ca.pem', 'ca.key', 'cert.pem', 'key.pem'].every((n) => existsSync(f(n)))
    && new Date(new X509Certificate(readFileSync(f('cert.pem'))).validTo).getTime() > Date.now() + 86400000;
  if (!fresh) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const ossl = (...args) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    ossl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
      '-keyout', f('ca.key'), '-out', f('ca.pem'), '-days', '30',
      '-subj', '/CN=consentd make run development CA (client metadata documents)',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign');
    ossl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
      '-keyout', f('key.pem'), '-out', f('cert.csr'), '-subj', '/CN=127.0.0.1');
    writeFileSync(f('ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
    ossl('x509', '-req', '-in', f('cert.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'),
      '-CAcreateserial', '-out', f('cert.pem'), '-days', '30', '-extfile', f('ext.cnf'));
  }
  return { cert: readFileSync(f('cert.pem')), key: readFileSync(f('key.pem')) };
}

async function main() {
  const { values: v } = parseArgs({
    options: {
      dir: { type: 'string' },
      port: { type: 'string', default: '0' },
      host: { type: 'string', default: '127.0.0.1' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (v.help || !v.dir) {
    console.error('usage: node tests/idp/devcimd.js --dir DIR [--port P] [--host H]');
    process.exit(v.help ? 0 : 2);
  }
  let base = '';
  const server = https.createServer(certificates(v.dir), (req, res) => {
    const path = new URL(req.url, 'https://x').pathname;
    if (req.method === 'GET' && path === DOC_PATH) {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=60' });
      res.end(JSON.stringify({
        client_id: `${base}${DOC_PATH}`,
        client_name: 'MCP SDK example client (simpleOAuthClient, development)',
        redirect_uris: [EXAMPLE_REDIRECT],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      }, null, 2));
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found\n');
    }
    log(`${req.method} ${path} -> ${res.statusCode}`);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(v.port), v.host, resolve);
  });
  base = `https://${v.host}:${server.address().port}`;
  const stop = () => {
    server.close(() => process.exit(0));
    server.closeAllConnections?.();
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdout.write(`READY ${base}\n`);
}

main().catch((err) => {
  log('fatal', err.message);
  process.exit(1);
});
