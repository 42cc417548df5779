// bench_proxy.js -- measures consentd's proxy mode (docs/architecture.md flow H) on loopback with
// wrk: the real release binary, the development IdPs, resource `ghproxy` (token_release =
// never, base_url = a recording upstream, tests/lib/recorder.js), a connection made over
// HTTP for alice, then wrk against
//   (1) the upstream directly: GET /repos/o/r/issues at the recorder (the baseline);
//   (2) GET /proxy/ghproxy/repos/o/r/issues at consentd (action list_issues, approval none):
//       gateway Basic auth + Consentd-Grant checked, the route matched, the provider token
//       taken from the vault, the call forwarded with libcurl, an audit entry written, the
//       answer streamed back;
//   (3) the same path through nginx (Debian's binary, unpacked by scripts/deps.sh into
//       build/tools/nginx, never installed or started as a service) in front of the same
//       upstream, injecting a fixed Authorization header over kept-alive upstream
//       connections: issue 34's peer for a header-injecting hop (its goal 3: consentd at
//       least 1/3 of it).  Without that binary the row is left out, and said so.
// The recorder does NOT introspect the provider token (no rec.introspectWith): the bench
// measures consentd, not the provider's introspection endpoint.  It records nothing either
// ({ record: false }), only counts.
// Each row carries cpuMsPerReq: consentd's CPU time (for the upstream row: the recorder's,
// this process's) over the run divided by the requests wrk completed.
// Bounded in time (DURATION seconds per run) and stops everything it starts.
// `make bench` calls measureProxy (bench/all.js); alone: node bench/bench_proxy.js [DURATION] [CONNECTIONS]
import { readFileSync, writeFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
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
const { getFreePort } = await lib('ports.js');
const { startProcess } = await lib('proc.js');

export const NGINX_BIN = process.env.NGINX_BIN || join(here, '..', 'build', 'tools', 'nginx');

// nginx in front of upstreamUrl on a free loopback port, one worker per core, adding a fixed
// Authorization header and keeping up to 64 upstream connections alive (what a minimal
// header-injecting gateway does).  Its own temporary prefix: no file outside it is used.
// Started as its own process group (tests/lib/proc.js), so that a stop or the watchdog's
// kill reaches the workers too: they outlive a master killed alone.
// { url, pids() (master and workers, for their CPU), stop() }.
export async function startNginx(upstreamUrl) {
  const dir = mkdtempSync(join(tmpdir(), 'consentd-bench-nginx-'));
  const port = await getFreePort();
  const up = new URL(upstreamUrl);
  const url = `http://127.0.0.1:${port}`;
  writeFileSync(join(dir, 'nginx.conf'), [
    'worker_processes auto;', `pid ${dir}/nginx.pid;`, `error_log ${dir}/error.log warn;`, 'daemon off;',
    'events { worker_connections 4096; }',
    'http {',
    '  access_log off;',
    `  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fastcgi;`,
    `  uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;`,
    `  upstream up { server ${up.hostname}:${up.port}; keepalive 64; }`,
    `  server { listen 127.0.0.1:${port}; location / {`,
    '    proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection "";',
    '    proxy_set_header Authorization "Bearer bench-fixed-provider-token"; } }',
    '}', ''].join('\n'));
  let p;
  try {
    p = await startProcess(NGINX_BIN, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')],
      { name: 'nginx', group: true, ready: { url: `${url}/` }, timeoutMs: 10000 });
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return {
    url,
    pids: () => [p.pid, ...spawnSync('pgrep', ['-P', String(p.pid)], { encoding: 'utf8' }).stdout
      .trim().split('\n').filter(Boolean).map(Number)],
    async stop() { try { await p.stop(); } finally { rmSync(dir, { recursive: true, force: true }); } },
  };
}

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
  let ngx = null;
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
    if (existsSync(NGINX_BIN)) {
      ngx = await startNginx(rec.url);
      cases.push(['nginx hop (a fixed Authorization header injected)', `${ngx.url}${PATH}`, 'nginx']);
    } else {
      console.log(`(no ${NGINX_BIN}: the nginx hop is left out; scripts/deps.sh check unpacks it)`);
    }
    const rows = [];
    for (const [name, url, which] of cases) {
      const sample = () => ({
        t: performance.now() / 1000, c: procCpu(v.c.proc.pid), r: selfCpu(), m: machineCpu(), n: rec.count(), k: rec.connections(),
        x: which === 'nginx' ? ngx.pids().reduce((a, p) => a + procCpu(p), 0) : 0,
      });
      const before = sample();
      const r = await w.run(name, url, script);
      const after = sample();
      const secs = after.t - before.t;
      const pct = (x) => `${Math.round((100 * x) / secs)}%`;
      const busy = after.m.busy - before.m.busy;
      const cd = after.c - before.c;
      const rc = after.r - before.r;
      const xd = after.x - before.x;
      r.cpu = `CPU over ${secs.toFixed(1)} s (100% = one core): consentd ${pct(cd)}, recorder ${pct(rc)}, `
        + `${which === 'nginx' ? `nginx ${pct(xd)}, ` : ''}`
        + `rest (wrk, kernel, others) ${pct(busy - cd - rc - xd)}, machine busy ${pct(busy)} of 200%, iowait ${pct(after.m.iowait - before.m.iowait)}`;
      const own = { proxy: cd, nginx: xd, upstream: rc }[which];
      r.cpuMsPerReq = r.requests > 0 ? (own * 1000) / r.requests : NaN;
      r.upstream = `upstream: ${after.n - before.n} requests on ${after.k - before.k} new connections`;
      rows.push(r);
      console.log(`${name}: ${r.rps} req/s, p50 ${r.p50}, p99 ${r.p99}, non-2xx ${r.non2xx}, `
        + `${r.requests} requests${r.socketErrors ? `, socket errors: ${r.socketErrors}` : ''}`);
      console.log(`  ${r.upstream}\n  ${r.cpu}, ${r.cpuMsPerReq.toFixed(3)} ms CPU/req (${{ proxy: 'consentd', nginx: 'nginx', upstream: 'the recorder' }[which]})`);
    }
    return { rows: { upstream: rows[0], proxy: rows[1], nginx: rows[2] || null } };
  } finally {
    try { await ngx?.stop(); await v?.stop(); } finally {
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
  console.log(`\n${w.table([rows.upstream, rows.proxy, ...(rows.nginx ? [rows.nginx] : [])])}`);
  w.cleanup();
  console.log(`\n(${CONNS} connections, 2 wrk threads, ${DURATION} s each, consentd threads = 0 (eight per core), loopback, `
    + `the upstream does not introspect the provider token, ${new Date().toISOString()})`);
}
