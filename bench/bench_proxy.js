// bench_proxy.js -- measures consentd's proxy mode (docs/architecture.md flow H) on loopback with
// wrk: the real release binary, the development IdPs, resource `ghproxy` (token_release =
// never, base_url = a recording upstream, tests/lib/recorder.js), a connection made over
// HTTP for alice, then wrk against
//   (1) the upstream directly: GET /repos/o/r/issues at the recorder (the baseline);
//   (2) GET /proxy/ghproxy/repos/o/r/issues at consentd (action list_issues, approval none):
//       gateway Basic auth + Consentd-Grant checked, the route matched, the provider token
//       taken from the vault, the call forwarded with libcurl, an audit entry written, the
//       answer streamed back.
// The recorder does NOT introspect the provider token (no rec.introspectWith): the bench
// measures consentd, not the provider's introspection endpoint.  It records nothing either
// ({ record: false }), only counts.
// Each row carries cpuMsPerReq: consentd's CPU time (for the upstream row: the recorder's,
// this process's) over the run divided by the requests wrk completed.
// Bounded in time (DURATION seconds per run) and stops everything it starts.
// `make bench` calls measureProxy (bench/all.js); alone: node bench/bench_proxy.js [DURATION] [CONNECTIONS]
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
process.env.TEST_CONSENTD_BIN ||= join(here, '..', 'build', 'consentd');
const lib = (f) => import(join(here, '..', 'tests', 'lib', f));
const { startVaultStack, OriginJar } = await lib('vaultstack.js');
const { startRecorder } = await lib('recorder.js');
const { ghproxyClient, ghproxyConfig } = await lib('proxystack.js');
const { pollExchange } = await lib('gateway.js');
const { basicAuth } = await lib('idplogin.js');
const { wrkRunner } = await import(join(here, 'wrk.js'));

const PATH = '/repos/o/r/issues';

// CPU time (s) of a process, and the machine's busy / iowait time (s, all cores).
const TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;
const procCpu = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const x = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(x[11]) + Number(x[12])) / TCK;            // utime + stime
};
const machineCpu = () => {
  const x = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, idle, iowait, irq, softirq, steal] = x;
  return { busy: (user + nice + system + irq + softirq + steal) / TCK, iowait: iowait / TCK };
};
const selfCpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };

// A warning line when a test run or another wrk is on the machine (the numbers will be low).
export function warnOtherLoad() {
  const others = spawnSync('pgrep', ['-f', 'scripts/check.sh|^wrk '], { encoding: 'utf8' }).stdout.trim();
  if (others) console.log(`WARNING: other load on this machine (pids ${others.split('\n').join(' ')}): the numbers will be low`);
}

export async function measureProxy({ duration: DURATION = 10, connections: CONNS = 32 } = {}) {
  const rec = await startRecorder({ record: false });
  let v;
  const w = wrkRunner({ threads: 2, connections: CONNS, duration: DURATION });
  try {
    v = await startVaultStack({
      accessTokenTTL: 3600,             // no provider refresh during the runs
      extraDsClients: (url) => [ghproxyClient(url)],
      config: ({ providerIssuer }) => ({
        server: { log: '/dev/null', threads: 0 },   // the default: eight workers per core
        limits: { gateway_rate: 0 },    // the bench measures consentd, not [limits]
        ...ghproxyConfig({ providerIssuer, baseUrl: rec.url }),
        'agent.coder': { allow: 'ghproxy:issues:read' },
      }),
    });

    // alice connects (alice, coder, ghproxy) through consentd and the provider; the gateway
    // then gets a grant (as in tests/integration/proxy.test.js, connect()).
    const user = 'alice';
    const ask = { subjectToken: await v.idToken(user), audience: 'ghproxy', scope: 'issues:read', agentId: 'coder' };
    const first = await v.gw.exchange(ask);
    if (first.body?.error !== 'consent_required') throw new Error(`first exchange: ${JSON.stringify(first.body)}`);
    const jar = new OriginJar();
    const c = await v.connectHttp({ jar, consentUri: first.body.consent_uri, user });
    if (c.approve.status !== 303 || c.first?.status !== 303) {
      throw new Error(`connect: approve ${c.approve.status}, callback ${c.first?.status} ${c.text?.slice(0, 300)}`);
    }
    const g = await pollExchange(v.gw, ask);
    if (g.status !== 200) throw new Error(`no grant: ${JSON.stringify(g.body)}`);
    const headers = { Authorization: basicAuth('agent-gateway', 'gateway-dev-secret'), 'Consentd-Grant': g.body.access_token };

    // One call by hand: the proxy answers 200 with the recorder's JSON.
    const probe = await fetch(`${v.url}/proxy/ghproxy${PATH}`, { headers });
    const pb = await probe.json().catch(() => null);
    if (probe.status !== 200 || pb?.ok !== true || pb?.path !== PATH) {
      throw new Error(`probe through the proxy: ${probe.status} ${JSON.stringify(pb)}`);
    }

    const script = w.script({ headers });
    const cases = [
      ['upstream alone (the recorder, direct)', `${rec.url}${PATH}`, 'upstream'],
      ['GET /proxy/ghproxy/… (list_issues, pass-through)', `${v.url}/proxy/ghproxy${PATH}`, 'proxy'],
    ];
    const rows = [];
    for (const [name, url, which] of cases) {
      const sample = () => ({
        t: performance.now() / 1000, c: procCpu(v.c.proc.pid), r: selfCpu(), m: machineCpu(), n: rec.count(), k: rec.connections(),
      });
      const before = sample();
      const r = await w.run(name, url, script);
      const after = sample();
      const secs = after.t - before.t;
      const pct = (x) => `${Math.round((100 * x) / secs)}%`;
      const busy = after.m.busy - before.m.busy;
      const cd = after.c - before.c;
      const rc = after.r - before.r;
      r.cpu = `CPU over ${secs.toFixed(1)} s (100% = one core): consentd ${pct(cd)}, recorder ${pct(rc)}, `
        + `rest (wrk, kernel, others) ${pct(busy - cd - rc)}, machine busy ${pct(busy)} of 200%, iowait ${pct(after.m.iowait - before.m.iowait)}`;
      r.cpuMsPerReq = r.requests > 0 ? ((which === 'proxy' ? cd : rc) * 1000) / r.requests : NaN;
      r.upstream = `upstream: ${after.n - before.n} requests on ${after.k - before.k} new connections`;
      rows.push(r);
      console.log(`${name}: ${r.rps} req/s, p50 ${r.p50}, p99 ${r.p99}, non-2xx ${r.non2xx}, `
        + `${r.requests} requests${r.socketErrors ? `, socket errors: ${r.socketErrors}` : ''}`);
      console.log(`  ${r.upstream}\n  ${r.cpu}, ${r.cpuMsPerReq.toFixed(3)} ms CPU/req (${which === 'proxy' ? 'consentd' : 'the recorder'})`);
    }
    return { rows: { upstream: rows[0], proxy: rows[1] } };
  } finally {
    try { await v?.stop(); } finally {
      await rec.stop();
      w.cleanup();
    }
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const DURATION = Number(process.argv[2] || 10);
  const CONNS = Number(process.argv[3] || 32);
  warnOtherLoad();
  const { rows } = await measureProxy({ duration: DURATION, connections: CONNS });
  const w = wrkRunner();
  console.log(`\n${w.table([rows.upstream, rows.proxy])}`);
  w.cleanup();
  console.log(`\n(${CONNS} connections, 2 wrk threads, ${DURATION} s each, consentd threads = 0 (eight per core), loopback, `
    + `the upstream does not introspect the provider token, ${new Date().toISOString()})`);
}
