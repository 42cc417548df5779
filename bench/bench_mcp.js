// bench_mcp.js -- measures consentd's MCP gateway (issue 31) on loopback with wrk: a tools/call
// straight to the upstream MCP server and the same call through consentd, in the same run.
//
// The stack: the real release binary, the development IdPs (login, and the provider "GitHub"),
// resource ghproxy (tests/lib/proxystack.js: token_release = never, list_issues -> action
// list_issues, scope issues:read, approval none), [mcp.bench] in front of the bench upstream
// (bench/mcpupstream.mjs: @modelcontextprotocol/server 2.4.0, one tool answering at once,
// accepting only a provider token the provider's introspection calls active, that verdict
// cached per token), and a registered MCP client.  alice signs the client in as the gateway's
// tests do (tests/integration/mcp_gateway.test.js: /authorize, the consent page, the provider
// connect, the code at /token): a consent, a vault record and an MCP access token.  One call
// by hand through consentd must answer the tool's result; the provider token it carried
// upstream is the one the direct rows use.
//
// Rows (each a wrk run of DURATION s with the same Lua script shape: POST, the JSON-RPC body,
// Content-Type, Accept: application/json, text/event-stream, MCP-Protocol-Version 2026-07-28,
// Mcp-Method and Mcp-Name):
//   upstream, direct             Authorization: Bearer <provider token>, CONNECTIONS connections
//   through consentd             Authorization: Bearer <MCP access token>, CONNECTIONS connections
//   the same two at 1 connection (one call at a time: the added latency without queueing)
//   the same two against an upstream without the SDK (node:http writing the SDK's answer):
//                                what the SDK itself costs, and consentd's addition without it
// Each row carries cpuMsPerReq: consentd's utime + stime over the run (for a direct row: the
// upstream's, this process's) over the requests wrk completed.  The MCP access token lives
// [keys] grant_ttl (900 s here); before every wrk run it is refreshed (refresh_token grant)
// when it would expire within the run plus a minute, so it never expires during one.
// `make bench` calls measureMcp (bench/all.js); alone (from tests/):
//   node ../bench/bench_mcp.js [DURATION] [CONNECTIONS] [sdk,raw]   (the upstreams to measure)
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
process.env.TEST_CONSENTD_BIN ||= join(here, '..', 'build', 'consentd');
const lib = (f) => import(join(here, '..', 'tests', 'lib', f));
const { startVaultStack, signedInJars, PROVIDER_SECRETS, DOWNSTREAM } = await lib('vaultstack.js');
const { ghproxyClient, ghproxyConfig } = await lib('proxystack.js');
const { tokenPost, decodeJwt, vaultSignIn } = await lib('mcp.js');
const { wrkRunner } = await import(join(here, 'wrk.js'));
const { startBenchMcpUpstream } = await import(join(here, 'mcpupstream.mjs'));

const CLIENT = 'mcp-bench';
const REDIRECT = 'http://127.0.0.1:33419/callback';   // never listened on: the code is read from the redirect
const TOOL = 'list_issues';
const BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: TOOL, arguments: {},
  _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': { name: 'wrk', version: '1' },
    'io.modelcontextprotocol/clientCapabilities': {} } } });
const HEADERS = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
  'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/call', 'Mcp-Name': TOOL };

const TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;
const procCpu = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const x = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(x[11]) + Number(x[12])) / TCK;            // utime + stime
};
const selfCpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };

// One tools/call by fetch -> { status, body } (JSON, or the last SSE data line).
async function callOnce(url, token) {
  const res = await fetch(url, { method: 'POST', headers: { ...HEADERS, Authorization: `Bearer ${token}` }, body: BODY });
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch {
    const d = text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).filter(Boolean);
    try { body = d.length ? JSON.parse(d[d.length - 1]) : null; } catch { body = null; }
  }
  return { status: res.status, body, text };
}

// alice signs the MCP client in at consentd (consent page, then the provider) -> tokens.
async function signIn(v, endpoint) {
  const jar = await signedInJars()(v.url, 'alice');
  const t = await vaultSignIn({ v, jar, user: 'alice', clientId: CLIENT, redirectUri: REDIRECT,
    resource: endpoint, scope: 'issues:read' });
  return { access: t.access_token, refresh: t.refresh_token };
}

// The stack of one measurement (sdk: the SDK's upstream, or the hand-written one), checked
// by hand; also bench/ab.mjs's (MCP=1) ->
//   { v, up, endpoint, providerToken, token(), fresh(secs), pid, stop() }
export async function startMcpBench({ sdk = true, threads = 0 } = {}) {
  let v;
  let check = async () => false;
  const up = await startBenchMcpUpstream({ check: (t) => check(t), sdk });
  try {
    v = await startVaultStack({
      accessTokenTTL: 3600,             // no provider refresh during the runs
      extraDsClients: (url) => [ghproxyClient(url)],
      config: ({ providerIssuer }) => ({
        server: { log: '/dev/null', threads },   // 0: the default, eight workers per core
        limits: { gateway_rate: 0, address_rate: 0 },   // the bench measures consentd, not [limits]
        keys: { grant_ttl: 900 },       // the MCP access token's lifetime (the most allowed)
        ...ghproxyConfig({ providerIssuer, baseUrl: up.url.replace(/\/mcp$/, '') }),
        'client.mcpbench': { client_id: CLIENT, redirect_uris: REDIRECT },
        'mcp.bench': { resource: 'ghproxy', upstream: up.url },
      }),
    });
    check = async (token) => {
      const r = await v.dsIntrospect(token);
      return r.active === true && r.aud === DOWNSTREAM.resource;
    };
    const endpoint = `${v.url}/mcp/bench`;
    const tok = await signIn(v, endpoint);
    const fresh = async (secs) => {
      if (decodeJwt(tok.access).exp - Date.now() / 1000 > secs + 60) return;
      if (!tok.refresh) throw new Error('the MCP access token would expire during the run and there is no refresh token');
      const t = await tokenPost(v.url, { grant_type: 'refresh_token', refresh_token: tok.refresh, client_id: CLIENT, resource: endpoint });
      if (t.status !== 200) throw new Error(`refresh: ${t.status} ${t.text}`);
      tok.access = t.body.access_token;
      tok.refresh = t.body.refresh_token || tok.refresh;
      if (decodeJwt(tok.access).exp - Date.now() / 1000 < secs + 5) {
        throw new Error(`an MCP access token lives less than a run of ${secs} s: raise [keys] grant_ttl`);
      }
    };

    // One call by hand through consentd: the tool's result; the provider token it carried.
    const probe = await callOnce(endpoint, tok.access);
    if (probe.status !== 200 || !/"title":"first"/.test(probe.body?.result?.content?.[0]?.text || '')) {
      throw new Error(`probe through consentd: ${probe.status} ${probe.text.slice(0, 400)}`);
    }
    const providerToken = up.firstToken();
    if (!providerToken || providerToken === tok.access) throw new Error('no provider token reached the upstream');
    const direct = await callOnce(up.url, providerToken);
    if (direct.status !== 200 || JSON.stringify(direct.body?.result?.content) !== JSON.stringify(probe.body.result.content)) {
      throw new Error(`probe direct: ${direct.status} ${direct.text.slice(0, 400)}`);
    }
    const refused = await callOnce(up.url, tok.access);
    if (refused.status !== 401) throw new Error(`the upstream took the MCP access token: ${refused.status}`);
    return {
      v, up, endpoint, providerToken, fresh, token: () => tok.access, pid: v.c.proc.pid,
      async stop() { try { await v.stop(); } finally { await up.stop(); } },
    };
  } catch (e) {
    try { await v?.stop(); } finally { await up.stop(); }
    throw e;
  }
}

// The measurement on one upstream (sdk: the SDK's, or the hand-written one).
async function measureOn({ sdk, w, durations, conns }) {
  const st = await startMcpBench({ sdk });
  const { v, up, endpoint, providerToken, fresh } = st;
  try {
    const rows = {};
    const which = sdk ? 'SDK upstream' : 'upstream without the SDK';
    for (const [c, secs] of conns.map((c, i) => [c, durations[i]])) {
      for (const through of [false, true]) {
        await fresh(secs);
        const key = `${through ? 'through' : 'direct'}${c === 1 ? '1' : ''}`;
        const name = `tools/call ${through ? 'through consentd' : 'direct'} (${which}, ${c} connection${c > 1 ? 's' : ''})`;
        const url = through ? endpoint : up.url;
        const script = w.script({ method: 'POST', body: BODY,
          headers: { ...HEADERS, Authorization: `Bearer ${through ? st.token() : providerToken}` } });
        const b = { c: procCpu(v.c.proc.pid), r: selfCpu(), n: up.count(), k: up.connections() };
        const r = await w.run(name, url, script, { connections: c, duration: secs });
        const cd = procCpu(v.c.proc.pid) - b.c;
        const rc = selfCpu() - b.r;
        r.cpuMsPerReq = r.requests > 0 ? ((through ? cd : rc) * 1000) / r.requests : NaN;
        r.upstreamCpuMsPerReq = r.requests > 0 ? (rc * 1000) / r.requests : NaN;
        r.consentdCpuMsPerReq = r.requests > 0 ? (cd * 1000) / r.requests : NaN;
        r.upstreamNote = `upstream: ${up.count() - b.n} requests on ${up.connections() - b.k} new connections`;
        rows[key] = r;
        console.log(`${name}: ${r.rps} req/s, p50 ${r.p50}, p99 ${r.p99}, non-2xx ${r.non2xx}, ${r.requests} requests`
          + `${r.socketErrors ? `, socket errors: ${r.socketErrors}` : ''}`);
        console.log(`  ${r.upstreamNote}; CPU/call: consentd ${r.consentdCpuMsPerReq.toFixed(3)} ms, `
          + `upstream (and the bench's own process) ${r.upstreamCpuMsPerReq.toFixed(3)} ms`);
      }
    }
    return rows;
  } finally {
    await st.stop();
  }
}

// The wrk script of a tools/call with this bearer token.
export const mcpScript = (w, token) => w.script({ method: 'POST', body: BODY, headers: { ...HEADERS, Authorization: `Bearer ${token}` } });

// -> { rows: { direct, through, direct1, through1 } on the SDK's upstream (when sdk),
//      raw: { direct, through, direct1, through1 } on the upstream without the SDK (when raw) }
export async function measureMcp({ duration: DURATION = 10, connections: CONNS = 32, sdk = true, raw = true } = {}) {
  const w = wrkRunner({ threads: 2, connections: CONNS, duration: DURATION });
  try {
    const conns = [CONNS, 1];
    const durations = [DURATION, DURATION];
    const rows = sdk ? await measureOn({ sdk: true, w, durations, conns }) : null;
    const rawRows = raw ? await measureOn({ sdk: false, w, durations, conns }) : null;
    return { rows, raw: rawRows };
  } finally {
    w.cleanup();
  }
}

// The added latency: through minus direct, from one run's rows.
export const added = (rows, sfx = '') => ({
  p50: rows[`through${sfx}`].p50ms - rows[`direct${sfx}`].p50ms,
  p99: rows[`through${sfx}`].p99ms - rows[`direct${sfx}`].p99ms,
});

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const DURATION = Number(process.argv[2] || 10);
  const CONNS = Number(process.argv[3] || 32);
  const which = (process.argv[4] || 'sdk,raw').split(',');
  const { warnOtherLoad } = await import(join(here, 'bench_proxy.js'));
  warnOtherLoad();
  const { rows, raw } = await measureMcp({ duration: DURATION, connections: CONNS,
    sdk: which.includes('sdk'), raw: which.includes('raw') });
  console.log('\n| row | req/s | p50 | p99 | CPU/call (consentd; direct: the upstream) |\n| --- | --- | --- | --- | --- |');
  for (const set of [rows, raw].filter(Boolean)) {
    for (const r of Object.values(set)) console.log(`| ${r.name} | ${r.rps} | ${r.p50} | ${r.p99} | ${r.cpuMsPerReq.toFixed(3)} ms |`);
    for (const sfx of ['', '1']) {
      const a = added(set, sfx);
      console.log(`| added (${sfx ? '1 connection' : `${CONNS} connections`}) | | ${a.p50.toFixed(2)} ms | ${a.p99.toFixed(2)} ms | |`);
    }
  }
  console.log(`\n(${DURATION} s per row, 2 wrk threads, consentd threads = 0 (eight per core), loopback, uptime: `
    + `${spawnSync('uptime', [], { encoding: 'utf8' }).stdout.trim()}, ${new Date().toISOString()})`);
}
