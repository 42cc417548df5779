// Starts the real consentd binary for a test: a temporary directory with a
// config file, a master key and a SQLite database; a free port on 127.0.0.1.
//
//   const c = await startConsentd({ config: { oidc: { issuer } }, env: {} , extra: '...' });
//   c.url        // http://127.0.0.1:PORT (also the public URL)
//   c.dir        // the temporary directory (config.ini, master.key, consentd.db)
//   c.proc       // the process handle from proc.js (stdout, stderr, exited, ...)
//   await c.stop()  // SIGTERM by pid, then removes the directory
//
// The binary is $TEST_CONSENTD_BIN (make check points it at the ASan+UBSan build) or build/consentd.
import { mkdtempSync, writeFileSync, rmSync, chmodSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startProcess } from './proc.js';
import { getFreePort } from './ports.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const consentdBin = process.env.TEST_CONSENTD_BIN || join(root, 'build', 'consentd');

// Renders {section: {key: value}} as INI (sections in insertion order).
export function toIni(sections) {
  let out = '';
  for (const [name, keys] of Object.entries(sections)) {
    if (keys == null) continue;
    out += `[${name}]\n`;
    for (const [k, v] of Object.entries(keys)) {
      if (v === undefined || v === null) continue;
      out += `${k} = ${v}\n`;
    }
    out += '\n';
  }
  return out;
}

function merge(base, over) {
  const out = { ...base };
  for (const [k, v] of Object.entries(over || {})) {
    out[k] = v && typeof v === 'object' && !Array.isArray(v) ? { ...(base[k] || {}), ...v } : v;
  }
  return out;
}

export function baseConfig({ port, dir, issuer }) {
  return {
    server: { listen: `127.0.0.1:${port}`, public_url: `http://127.0.0.1:${port}`, threads: 2,
      log: join(dir, 'access.log') },
    database: { path: join(dir, 'consentd.db') },
    keys: { master_key_file: join(dir, 'master.key') },
    oidc: { issuer: issuer || 'http://127.0.0.1:9', client_id: 'consentd',
      client_secret: 'consentd-dev-secret' },
    gateway: { id: 'agent-gateway', client_secret: 'gateway-dev-secret' },
  };
}

export async function startConsentd({ config = {}, env = {}, port, dir, keepDir = false } = {}) {
  dir = dir || mkdtempSync(join(tmpdir(), 'consentd-it-'));
  port = port || await getFreePort();
  const cfg = merge(baseConfig({ port, dir, issuer: config?.oidc?.issuer }), config);
  const cfgPath = join(dir, 'config.ini');
  writeFileSync(cfgPath, toIni(cfg));
  const keyPath = join(dir, 'master.key');
  try { writeFileSync(keyPath, randomBytes(32), { flag: 'wx', mode: 0o600 }); } catch { /* kept */ }
  chmodSync(keyPath, 0o600);
  const url = cfg.server.public_url;
  const proc = await startProcess(consentdBin, ['-c', cfgPath], {
    env: { ASAN_OPTIONS: 'detect_leaks=1', ...env },
    ready: { url: `http://127.0.0.1:${port}/healthz`, status: 200 },
    timeoutMs: 20000,
    name: 'consentd',
  });
  return {
    url, port, dir, cfgPath, proc, config: cfg,
    async stop({ remove = !keepDir } = {}) {
      const st = await proc.stop(10000);
      if (remove) rmSync(dir, { recursive: true, force: true });
      return st;
    },
  };
}
