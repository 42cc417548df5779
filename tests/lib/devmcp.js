// The development MCP server (tests/idp/devmcp.js, `make run`'s issue tracker) as a child
// process for tests: a real MCP server on the official SDK that accepts only the provider's
// tokens, with a recording of every request it received.
//
//   const mcp = await startDevMcp({
//     provider,            // the provider's issuer (a devidp in downstream mode)
//     audience,            // what a token's aud must hold (the provider's downstream.resource)
//     client, secret,      // the provider's introspection client (default resource-server / ...-dev-secret)
//     sdk = 1,             // 1: @modelcontextprotocol/sdk 1.32.2 (2025-11-25, sessions);
//                          // 2: @modelcontextprotocol/server 2.4.0 (2026-07-28 and 2025 stateless)
//     stateless, json,     // sdk 1: no sessions; JSON answers instead of SSE
//     record = true,       // record every request (to a temporary file)
//     port = 0, env, echo,
//   });
//   mcp.url                 // http://127.0.0.1:PORT/mcp (the upstream consentd's [mcp.X] names)
//   mcp.records()           // [{ t, method, path, headers, body }] received so far, in order
//   await mcp.stop()        // SIGTERM by pid; removes the recording
import { mkdtempSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startProcess } from './proc.js';

export const DEVMCP = join(dirname(fileURLToPath(import.meta.url)), '..', 'idp', 'devmcp.js');

export async function startDevMcp(opts = {}) {
  const {
    provider, audience, client, secret, sdk = 1, stateless = false, json = false, record = true,
    port = 0, env, echo, timeoutMs = 60000,
  } = opts;
  if (!provider) throw new Error('startDevMcp: provider is required');
  const dir = mkdtempSync(join(tmpdir(), 'devmcp-'));
  const file = join(dir, 'requests.jsonl');
  const args = [DEVMCP, '--provider', provider, '--port', String(port), '--sdk', String(sdk)];
  if (audience) args.push('--audience', audience);
  if (client) args.push('--client', client);
  if (secret) args.push('--secret', secret);
  if (stateless) args.push('--stateless');
  if (json) args.push('--json');
  if (record) args.push('--record', file);
  const proc = await startProcess(process.execPath, args, { env, echo, timeoutMs, name: 'devmcp' });
  const url = /^READY (\S+)$/m.exec(proc.stdout)[1];
  return {
    url, proc, pid: proc.pid, recordFile: record ? file : null,
    records() {
      if (!record || !existsSync(file)) return [];
      return readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
    },
    async stop() {
      const st = await proc.stop();
      rmSync(dir, { recursive: true, force: true });
      return st;
    },
  };
}

export default startDevMcp;
