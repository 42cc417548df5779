// `make run` on a machine where something already holds one of its ports (issue 35 item 1:
// Debian's prometheus.service listens on *:9090). scripts/run-dev.sh must stop before it
// starts anything, and say which port, which variable changes it, and which process holds it
// (with its pid, and its systemd unit where there is one), instead of a Node stack trace.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { consentdBin } from '../lib/consentd.js';
import { getFreePort } from '../lib/ports.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SCRIPT = join(ROOT, 'scripts', 'run-dev.sh');
const DEV = mkdtempSync(join(tmpdir(), 'consentd-devports-'));
after(() => rmSync(DEV, { recursive: true, force: true }));

async function holdPort(host) {
  const srv = createServer();
  const port = await getFreePort();
  await new Promise((resolve, reject) => { srv.once('error', reject); srv.listen(port, host, resolve); });
  return { srv, port };
}

for (const [v, host] of [['IDP_PORT', '0.0.0.0'], ['PORT', '127.0.0.1'], ['API_PORT', '::'], ['MCP_PORT', '127.0.0.1']]) {
  test(`a port held by another process (${v} on ${host}) is named, with its holder and the variable`, async () => {
    const { srv, port } = await holdPort(host);
    try {
      const ports = {
        PORT: String(await getFreePort()), IDP_PORT: String(await getFreePort()),
        PROVIDER_PORT: String(await getFreePort()), API_PORT: String(await getFreePort()),
        MCP_PORT: String(await getFreePort()), CIMD_PORT: String(await getFreePort()),
        [v]: String(port),
      };
      const r = spawnSync('bash', [SCRIPT], {
        env: { ...process.env, ...ports, DEV_DIR: DEV, CONSENTD_BIN: consentdBin, NODE: process.execPath },
        encoding: 'utf8', timeout: 60000,
      });
      const out = `${r.stdout}${r.stderr}`;
      assert.equal(r.status, 1, `run-dev.sh should stop with status 1:\n${out}`);
      assert.match(r.stderr, new RegExp(`port ${port} on 127\\.0\\.0\\.1 \\(for [^)]*, ${v}\\) is in use by node \\(pid ${process.pid}[,)]`));
      assert.match(r.stderr, new RegExp(`${v}=<port> make run`));
      // Nothing was started: no IdP log, no consentd database.
      assert.ok(!existsSync(join(DEV, 'idp.log')), 'an IdP was started');
      assert.ok(!existsSync(join(DEV, 'consentd.db')), 'consentd was started');
      assert.doesNotMatch(out, /EADDRINUSE|at Server\.setupListenHandle/);
    } finally {
      await new Promise((r) => { srv.close(r); });
    }
  });
}
