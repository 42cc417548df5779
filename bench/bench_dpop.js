// bench_dpop.js -- the cost of DPoP (RFC 9449), measured in one run on loopback with wrk:
// the real release binary, the development IdPs, resource `ghproxy` (as bench_proxy.js) and
// an approved consent for alice, then, interleaved, without and with DPoP:
//   POST /token (token exchange: a grant for the live consent; with DPoP a proof per request
//     is checked, its jti written to the replay cache, and the grant carries cnf.jkt);
//   GET /proxy/ghproxy/... (list_issues; with DPoP a bound grant and a proof per request
//     with ath; its jti written to the replay cache).
// Proofs are single-use, so each is made beforehand (jose, ES256, examples/gateway-dpop.mjs)
// and wrk's Lua takes the next one per request (one list per wrk thread).  Proofs are made
// just before their run: iat stays inside the 60 s window.  Basic client auth throughout.
// Usage: node bench/bench_dpop.js [DURATION] [CONNECTIONS]
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
process.env.TEST_CONSENTD_BIN ||= join(here, '..', 'build', 'consentd');
const lib = (f) => import(join(here, '..', 'tests', 'lib', f));
const { startVaultStack, OriginJar } = await lib('vaultstack.js');
const { startRecorder } = await lib('recorder.js');
const { ghproxyClient, ghproxyConfig } = await lib('proxystack.js');
const { pollExchange } = await lib('gateway.js');
const { basicAuth } = await lib('idplogin.js');
const { example } = await lib('example.js');
const { wrkRunner } = await import(join(here, 'wrk.js'));

const DURATION = Number(process.argv[2] || 8);
const CONNS = Number(process.argv[3] || 16);
const PATH = '/repos/o/r/issues';
const THREADS = 2;

const rec = await startRecorder({ record: false });
let v;
const w = wrkRunner({ threads: THREADS, connections: CONNS, duration: DURATION });
const pdir = mkdtempSync(join(tmpdir(), 'consentd-bench-dpop-'));
try {
  v = await startVaultStack({
    accessTokenTTL: 3600,
    extraDsClients: (url) => [ghproxyClient(url)],
    config: ({ providerIssuer }) => ({
      server: { log: '/dev/null', threads: 2 },
      limits: { gateway_rate: 0 },    // the bench measures consentd, not [limits]
      ...ghproxyConfig({ providerIssuer, baseUrl: rec.url }),
      'agent.coder': { allow: 'ghproxy:issues:read' },
    }),
  });
  const ask = { subjectToken: await v.idToken('alice'), audience: 'ghproxy', scope: 'issues:read', agentId: 'coder' };
  const first = await v.gw.exchange(ask);
  if (first.body?.error !== 'consent_required') throw new Error(`first exchange: ${JSON.stringify(first.body)}`);
  const c = await v.connectHttp({ jar: new OriginJar(), consentUri: first.body.consent_uri, user: 'alice' });
  if (c.first?.status !== 303) throw new Error(`connect: ${c.text?.slice(0, 300)}`);
  const bearer = await pollExchange(v.gw, ask);
  if (bearer.status !== 200) throw new Error(`no grant: ${bearer.text}`);
  const key = await example.newDpopKey('ES256');
  const tokenUrl = `${v.url}/token`;
  const proxyUrl = `${v.url}/proxy/ghproxy${PATH}`;
  const boundG = await v.gw.post('/token', {
    grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange', subject_token: ask.subjectToken,
    subject_token_type: 'urn:ietf:params:oauth:token-type:id_token', audience: 'ghproxy', scope: 'issues:read', agent_id: 'coder',
  }, undefined, { dpop: await example.dpopProof({ key, htm: 'POST', htu: tokenUrl }) });
  if (boundG.status !== 200 || boundG.body?.token_type !== 'DPoP') throw new Error(`no bound grant: ${boundG.text}`);
  const auth = basicAuth('agent-gateway', 'gateway-dev-secret');
  const tokenBody = new URLSearchParams({
    grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange', subject_token: ask.subjectToken,
    subject_token_type: 'urn:ietf:params:oauth:token-type:id_token', audience: 'ghproxy', scope: 'issues:read', agent_id: 'coder',
  }).toString();

  // A Lua script whose requests take the next proof of their thread's list.
  let nscript = 0;
  async function proofScript({ method, body, headers, htm, htu, accessToken, perThread }) {
    nscript += 1;
    const files = [];
    for (let t = 0; t < THREADS; t++) {
      const lines = [];
      for (let i = 0; i < perThread; i++) lines.push(await example.dpopProof({ key, htm, htu, accessToken }));
      const f = join(pdir, `proofs-${nscript}-${t}.txt`);
      writeFileSync(f, `${lines.join('\n')}\n`);
      files.push(f);
    }
    const lua = `local n = 0
local files = ${JSON.stringify(files).replace('[', '{').replace(/]$/, '}')}
setup = function(thread) n = n + 1; thread:set("id", n) end
init = function(args)
  proofs = {}
  for line in io.lines(files[id]) do proofs[#proofs + 1] = line end
  i = 0
end
request = function()
  i = i + 1
  local h = ${luaTable(headers)}
  h["DPoP"] = proofs[((i - 1) % #proofs) + 1]
  return wrk.format(${JSON.stringify(method)}, nil, h, ${body === undefined ? 'nil' : JSON.stringify(body)})
end
done = function(summary, latency, requests)
  io.write(string.format("STATUS non2xx=%d\\n", summary.errors.status))
end
`;
    const f = join(pdir, `proofs-${nscript}.lua`);
    writeFileSync(f, lua);
    return { f, files };
  }
  function luaTable(h) {
    return `{ ${Object.entries(h).map(([k, val]) => `[${JSON.stringify(k)}] = ${JSON.stringify(val)}`).join(', ')} }`;
  }

  const rows = [];
  const run = async (name, url, script) => {
    const r = await w.run(name, url, script);
    rows.push(r);
    console.log(`${name}: ${r.rps} req/s, p50 ${r.p50}, p99 ${r.p99}, non-2xx ${r.non2xx}, ${r.requests} requests`);
    return r;
  };
  const form = { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: auth };
  // Enough proofs for the run at a generous rate; a proof used twice would show as non-2xx.
  const perThreadToken = 12000;
  const perThreadProxy = 8000;
  await run('POST /token, bearer grant', tokenUrl, w.script({ method: 'POST', body: tokenBody, headers: form }));
  let s = await proofScript({ method: 'POST', body: tokenBody, headers: form, htm: 'POST', htu: tokenUrl, perThread: perThreadToken });
  await run('POST /token, DPoP-bound grant (a proof per request)', tokenUrl, s.f);
  const ph = { Authorization: auth };
  await run('GET /proxy/ghproxy/…, bearer grant', proxyUrl, w.script({ headers: { ...ph, 'Consentd-Grant': bearer.body.access_token } }));
  s = await proofScript({ method: 'GET', headers: { ...ph, 'Consentd-Grant': boundG.body.access_token }, htm: 'GET', htu: proxyUrl,
    accessToken: boundG.body.access_token, perThread: perThreadProxy });
  await run('GET /proxy/ghproxy/…, DPoP-bound grant (a proof per request)', proxyUrl, s.f);
  console.log(`\n${w.table(rows)}`);
  console.log(`\n(${CONNS} connections, ${THREADS} wrk threads, ${DURATION} s each, consentd threads = 2, loopback, ${new Date().toISOString()})`);
} finally {
  try { await v?.stop(); } finally {
    await rec.stop();
    w.cleanup();
    rmSync(pdir, { recursive: true, force: true });
  }
}
