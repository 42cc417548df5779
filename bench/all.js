// all.js -- `make bench`: consentd and the development IdP's software (oidc-provider 8,
// bench/benchidp.mjs) side by side in one run, with the same wrk settings, then the proxy
// beside its upstream alone, the MCP gateway's tools/call beside the same call straight to its
// upstream MCP server (issue 31, bench/bench_mcp.js), `openssl speed` for ECDSA P-256, the disk's fsync latency and
// memory; every figure the median of RUNS runs; one Markdown report on stdout, ending with
// the ratios issue 15 targets.  Each server is the only load while wrk runs against it.
//
//   RUNS=3 DURATION=10 CONNECTIONS=32 FSYNC_N=1000 node bench/all.js   (from tests/ or anywhere)
//
// Bounded in time: a watchdog ends the run (and, through tests/lib/proc.js and bench/wrk.js,
// every process it started, by pid) after RUNS x (20 x DURATION + 300) s.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { median, opensslSpeed } from './measure.js';
import { measureConsentd, DISTINCT, HELD } from './bench.js';
import { measureIdp } from './bench_idp.js';
import { measureProxy, warnOtherLoad } from './bench_proxy.js';
import { measureMcp, added } from './bench_mcp.js';

const here = dirname(fileURLToPath(import.meta.url));
const RUNS = Math.max(1, Number(process.env.RUNS || 3));
const DURATION = Math.max(1, Number(process.env.DURATION || 10));
const CONNS = Math.max(1, Number(process.env.CONNECTIONS || 32));
const FSYNC_N = Math.max(1, Number(process.env.FSYNC_N || 1000));

const limitS = RUNS * (28 * DURATION + 360);
setTimeout(() => {
  console.error(`bench: not done after ${limitS} s; stopping (everything started is killed by pid)`);
  process.exit(3);
}, limitS * 1000).unref();

const sh = (cmd, args) => {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : '';
};

function machine() {
  const model = (sh('lscpu', []).match(/^Model name:\s+(.+)$/m) || [])[1] || '?';
  const memKB = Number((readFileSync('/proc/meminfo', 'utf8').match(/^MemTotal:\s+(\d+)/m) || [])[1]);
  const dir = tmpdir();
  const [src = '?', fstype = '?'] = sh('findmnt', ['-no', 'SOURCE,FSTYPE', '-T', dir]).split(/\s+/);
  let rota = '';
  try {
    const dev = src.replace(/^\/dev\//, '').replace(/p?\d+$/, '');
    rota = `, /sys/block/${dev}/queue/rotational = ${readFileSync(`/sys/block/${dev}/queue/rotational`, 'utf8').trim()}`;
  } catch { /* unknown */ }
  let oidcProvider = '?';
  try {
    oidcProvider = JSON.parse(readFileSync(join(here, '..', 'tests', 'node_modules', 'oidc-provider', 'package.json'), 'utf8')).version;
  } catch { /* unknown */ }
  return {
    cores: sh('nproc', []), model, memGiB: (memKB / 1048576).toFixed(1), kernel: sh('uname', ['-r']),
    disk: `${dir} on ${src} (${fstype}${rota})`, openssl: sh('openssl', ['version']), node: process.version,
    wrk: (spawnSync('wrk', ['-v'], { encoding: 'utf8' }).stdout || 'wrk ?').split('\n')[0].replace(/ \[.*$/, ''),
    oidcProvider, commit: sh('git', ['-C', join(here, '..'), 'describe', '--always', '--dirty']),
  };
}

const runs = [];
const t0 = Date.now();
for (let i = 1; i <= RUNS; i += 1) {
  warnOtherLoad();
  console.log(`# run ${i} of ${RUNS}: consentd`);
  const c = await measureConsentd({ duration: DURATION, connections: CONNS, fsyncN: FSYNC_N });
  console.log(`# run ${i} of ${RUNS}: oidc-provider`);
  const idp = await measureIdp({ duration: DURATION, connections: CONNS });
  console.log(`# run ${i} of ${RUNS}: proxy`);
  const p = await measureProxy({ duration: DURATION, connections: CONNS });
  console.log(`# run ${i} of ${RUNS}: MCP gateway (uptime: ${sh('uptime', [])})`);
  const g = await measureMcp({ duration: DURATION, connections: CONNS });
  console.log(`# run ${i} of ${RUNS}: openssl speed ecdsap256`);
  const ossl = await opensslSpeed(3);
  console.log(`  sign ${ossl.sign}/s, verify ${ossl.verify}/s`);
  runs.push({ c, idp, p, g, ossl, load: sh('cat', ['/proc/loadavg']).split(' ').slice(0, 3).join(' ') });
}

// --- medians and the report -------------------------------------------------------------
const med = (f) => median(runs.map(f));
const range = (f) => {
  const v = runs.map(f).map(Number).filter(Number.isFinite);
  return v.length > 1 ? `${fmt(Math.min(...v))}–${fmt(Math.max(...v))}` : '';
};
function fmt(x, digits = 0) {
  if (!Number.isFinite(x)) return 'n/a';
  const [a, b] = x.toFixed(digits).split('.');
  return `${a.replace(/\B(?=(\d{3})+(?!\d))/g, ' ')}${b ? `.${b}` : ''}`;
}
const ms = (x) => (Number.isFinite(x) ? `${x < 10 ? x.toFixed(2) : x.toFixed(1)} ms` : 'n/a');
const cpu = (x) => (Number.isFinite(x) ? `${x.toFixed(3)} ms` : 'n/a');
const row = (get) => ({
  rps: med((r) => Number(get(r).rps)), rpsRange: range((r) => Number(get(r).rps)),
  p50: med((r) => get(r).p50ms), p99: med((r) => get(r).p99ms), cpu: med((r) => get(r).cpuMsPerReq),
  non2xx: Math.max(...runs.map((r) => Number(get(r).non2xx))),
  frac: med((r) => get(r).fractionOfPeak),
});
const R = {
  token: row((r) => r.c.rows.token), tokenHalf: row((r) => r.c.rows.tokenHalf),
  intro: row((r) => r.c.rows.intro), intro10k: row((r) => r.c.rows.intro10k),
  jwks: row((r) => r.c.rows.jwks), healthz: row((r) => r.c.rows.healthz),
  iToken: row((r) => r.idp.rows.token), iIntro: row((r) => r.idp.rows.intro),
  iIntro10k: row((r) => r.idp.rows.intro10k), iJwks: row((r) => r.idp.rows.jwks),
  upstream: row((r) => r.p.rows.upstream), proxy: row((r) => r.p.rows.proxy),
  nginx: runs.every((r) => r.p.rows.nginx) ? row((r) => r.p.rows.nginx) : null,
};
// The MCP gateway: each run's rows, and the added p50 / p99 (through minus direct, per run,
// then the median of the runs).
const G = {};
for (const [set, get] of [['sdk', (r) => r.g.rows], ['raw', (r) => r.g.raw]]) {
  for (const k of ['direct', 'through', 'direct1', 'through1']) G[`${set}.${k}`] = row((r) => get(r)[k]);
  for (const sfx of ['', '1']) {
    G[`${set}.added${sfx}`] = { p50: med((r) => added(get(r), sfx).p50), p99: med((r) => added(get(r), sfx).p99),
      upCpu: med((r) => get(r)[`through${sfx}`].upstreamCpuMsPerReq) };
  }
}
const ratio = (a, b) => a.rps / b.rps;
const m = machine();
const line = (cells) => `| ${cells.join(' | ')} |`;
const out = [];
out.push(`## \`make bench\` — ${new Date().toISOString().slice(0, 10)}`, '');
out.push(`${m.cores} cores (${m.model}), ${m.memGiB} GiB, Linux ${m.kernel}; database directory ${m.disk}; `
  + `${m.openssl}; Node.js ${m.node}; oidc-provider ${m.oidcProvider}; ${m.wrk}; commit ${m.commit}.`);
out.push(`wrk -t2 -c${CONNS}, ${DURATION} s per endpoint, on the same cores as the servers; every figure is the median `
  + `of ${RUNS} run${RUNS > 1 ? 's' : ''}${RUNS > 1 ? ' (req/s range in brackets)' : ''}; CPU = the server's utime + stime `
  + 'over the run / the requests wrk completed.', '');
out.push('### Side by side', '');
out.push(line(['what', 'consentd req/s', 'p99', 'CPU/req', 'oidc-provider req/s', 'p99', 'CPU/req', 'ratio']));
out.push(line(Array(8).fill('---')));
const rps = (x) => `${fmt(x.rps)}${x.rpsRange ? ` (${x.rpsRange})` : ''}`;
const side = (name, a, b) => out.push(line([name, rps(a), ms(a.p99), cpu(a.cpu), rps(b), ms(b.p99), cpu(b.cpu), `${ratio(a, b).toFixed(2)}×`]));
side('token issuance (consentd: token exchange → ES256 grant; IdP: client_credentials → ES256 JWT)', R.token, R.iToken);
side('introspection, one token repeated', R.intro, R.iIntro);
side(`introspection, ${fmt(DISTINCT)} distinct tokens`, R.intro10k, R.iIntro10k);
side('JWKS', R.jwks, R.iJwks);
out.push('', '### consentd', '');
out.push(line(['endpoint', 'req/s', 'p50', 'p99', 'CPU/req', 'non-2xx']), line(Array(6).fill('---')));
const plain = (name, a) => out.push(line([name, rps(a), ms(a.p50), ms(a.p99), cpu(a.cpu), String(a.non2xx)]));
plain('`GET /.well-known/jwks.json`', R.jwks);
plain('`GET /healthz`', R.healthz);
plain('`POST /token` (token exchange → a grant for a live consent)', R.token);
plain(`\`POST /token\` at about half the peak (${Number.isFinite(R.tokenHalf.frac) ? `${(100 * R.tokenHalf.frac).toFixed(0)} %` : '?'} of it)`, R.tokenHalf);
plain('`POST /introspect` (one grant, repeated)', R.intro);
plain(`\`POST /introspect\` (${fmt(DISTINCT)} distinct grants)`, R.intro10k);
plain('upstream alone (the recorder, direct)', R.upstream);
plain('`GET /proxy/ghproxy/…` (pass-through)', R.proxy);
if (R.nginx) plain('nginx in front of the same upstream, a fixed `Authorization` injected (its CPU: master and workers)', R.nginx);
else out.push('', '(no nginx hop in these runs: `build/tools/nginx` is missing; `make deps` unpacks it)');
out.push('', '### The MCP gateway (issue 31): `tools/call` straight to the upstream and through consentd', '');
out.push(`Upstream: @modelcontextprotocol/server 2.4.0 (bench/mcpupstream.mjs), one tool answering at once, or the `
  + 'same answer written on node:http without the SDK. Through consentd: `[mcp.bench]`, alice\'s consent and provider '
  + 'connection, list_issues → an action with approval = none. CPU/call: consentd\'s (direct rows: the upstream\'s). '
  + `Load average at the end of each run: ${runs.map((r) => r.load).join('; ')}.`, '');
out.push(line(['upstream', 'connections', 'direct req/s', 'p50', 'p99', 'through consentd req/s', 'p50', 'p99',
  'added p50', 'added p99', 'consentd CPU/call']), line(Array(11).fill('---')));
for (const [set, label] of [['sdk', 'the SDK'], ['raw', 'without the SDK']]) {
  for (const [sfx, n] of [['1', '1'], ['', String(CONNS)]]) {
    const d = G[`${set}.direct${sfx}`];
    const t = G[`${set}.through${sfx}`];
    const a = G[`${set}.added${sfx}`];
    out.push(line([label, n, rps(d), ms(d.p50), ms(d.p99), rps(t), ms(t.p50), ms(t.p99), ms(a.p50), ms(a.p99), cpu(t.cpu)]));
  }
}
const non2xx = Math.max(...Object.keys(G).filter((k) => !k.includes('added')).map((k) => G[k].non2xx));
out.push('', `(the SDK upstream's own CPU per call, direct: ${cpu(G['sdk.direct1'].cpu)} at 1 connection, `
  + `${cpu(G['sdk.direct'].cpu)} at ${CONNS}; without the SDK: ${cpu(G['raw.direct1'].cpu)}, ${cpu(G['raw.direct'].cpu)}; `
  + `non-2xx answers in any of these runs: ${non2xx})`);
out.push('', '### The machine\'s bounds and memory', '');
out.push(line(['what', 'value']), line(['---', '---']));
out.push(line(['`openssl speed -seconds 3 ecdsap256`: sign', `${fmt(med((r) => r.ossl.sign))}/s`]));
out.push(line(['`openssl speed -seconds 3 ecdsap256`: verify', `${fmt(med((r) => r.ossl.verify))}/s`]));
out.push(line([`fsync: 4 KiB appended + \`fdatasync\`, ${FSYNC_N}× in the database's directory`,
  `median ${fmt(med((r) => r.c.fsync.medianUs))} µs, p99 ${fmt(med((r) => r.c.fsync.p99Us))} µs`]));
out.push(line(['consentd RSS idle (after start)', `${med((r) => r.c.mem.idleMB).toFixed(1)} MB`]));
out.push(line([`consentd RSS with ${fmt(HELD)} keep-alive connections held`, `${med((r) => r.c.mem.heldMB).toFixed(1)} MB`]));
out.push(line(['consentd peak RSS (VmHWM, end of its runs)', `${med((r) => r.c.mem.peakMB).toFixed(1)} MB`]));
out.push(line(['oidc-provider RSS idle / peak', `${med((r) => r.idp.mem.idleMB).toFixed(1)} / ${med((r) => r.idp.mem.peakMB).toFixed(1)} MB`]));
out.push('', '### Targets (issue 15; the MCP gateway: issue 31)', '');
out.push(line(['what', 'target', 'this run', 'met']), line(['---', '---', '---', '---']));
const target = (what, goal, value, ok) => out.push(line([what, goal, value, ok ? 'yes' : '**no**']));
const rt = (a, b) => `${ratio(a, b).toFixed(2)}×`;
target('grant issuance / IdP token endpoint', '≥ 2×', rt(R.token, R.iToken), ratio(R.token, R.iToken) >= 2);
target('grant issuance p99 at about half of peak', '≤ 10 ms', ms(R.tokenHalf.p99), R.tokenHalf.p99 <= 10);
target('introspection / IdP introspection, one repeated', '≥ 2.5×', rt(R.intro, R.iIntro), ratio(R.intro, R.iIntro) >= 2.5);
target(`introspection / IdP introspection, ${fmt(DISTINCT)} distinct`, '≥ 2.5×', rt(R.intro10k, R.iIntro10k), ratio(R.intro10k, R.iIntro10k) >= 2.5);
target('JWKS / IdP JWKS', '≥ 4×', rt(R.jwks, R.iJwks), ratio(R.jwks, R.iJwks) >= 4);
target('proxy / upstream alone', '≥ 1/6', `1/${(1 / ratio(R.proxy, R.upstream)).toFixed(1)}`, ratio(R.proxy, R.upstream) >= 1 / 6);
target('proxy pass-through', '≥ 8 000/s, p99 ≤ 20 ms', `${fmt(R.proxy.rps)}/s, p99 ${ms(R.proxy.p99)}`, R.proxy.rps >= 8000 && R.proxy.p99 <= 20);
target('MCP gateway: added p50, tools/call one at a time (SDK upstream; without the SDK in brackets) (issue 31)', '≤ 1 ms',
  `${ms(G['sdk.added1'].p50)} (${ms(G['raw.added1'].p50)})`, G['sdk.added1'].p50 <= 1);
target('consentd RSS idle', '≤ 20 MB', `${med((r) => r.c.mem.idleMB).toFixed(1)} MB`, med((r) => r.c.mem.idleMB) <= 20);
target(`consentd RSS with ${fmt(HELD)} keep-alive connections`, '≤ 64 MB', `${med((r) => r.c.mem.heldMB).toFixed(1)} MB`, med((r) => r.c.mem.heldMB) <= 64);
// Issue 34's goals, as its text words them; the cluster's (goal 4) are make bench-nodes'.
out.push('', '### Targets of issue 34 (goals 1, 2, 3 and 5; goal 4 is `make bench-nodes`)', '');
out.push(line(['what', 'target', 'this run', 'met']), line(['---', '---', '---', '---']));
target('1: grant issuance / IdP token endpoint', '≥ 2×', rt(R.token, R.iToken), ratio(R.token, R.iToken) >= 2);
target('1: consentd CPU per grant', '≤ 0.15 ms', cpu(R.token.cpu), R.token.cpu <= 0.15);
target('1: grant issuance p99 at about half of peak', '≤ 10 ms', ms(R.tokenHalf.p99), R.tokenHalf.p99 <= 10);
target(`2: introspection / IdP introspection, ${fmt(DISTINCT)} distinct`, '≥ 4×', rt(R.intro10k, R.iIntro10k), ratio(R.intro10k, R.iIntro10k) >= 4);
target('2: JWKS / IdP JWKS', '≥ 4×', rt(R.jwks, R.iJwks), ratio(R.jwks, R.iJwks) >= 4);
if (R.nginx) {
  target('3: proxy / the nginx header-injecting hop, same upstream', '≥ 1/3', `1/${(1 / ratio(R.proxy, R.nginx)).toFixed(1)}`,
    ratio(R.proxy, R.nginx) >= 1 / 3);
} else {
  target('3: proxy / the nginx header-injecting hop, same upstream', '≥ 1/3', 'not measured (no build/tools/nginx)', false);
}
target('3: consentd CPU per proxied call', '≤ 0.1 ms', cpu(R.proxy.cpu), R.proxy.cpu <= 0.1);
target(`3: consentd CPU per MCP tools/call (upstream without the SDK, ${CONNS} connections)`, '≤ 0.1 ms',
  cpu(G['raw.through'].cpu), G['raw.through'].cpu <= 0.1);
target('5: consentd RSS idle / with 1 000 connections', '≤ 20 / ≤ 64 MB',
  `${med((r) => r.c.mem.idleMB).toFixed(1)} / ${med((r) => r.c.mem.heldMB).toFixed(1)} MB`,
  med((r) => r.c.mem.idleMB) <= 20 && med((r) => r.c.mem.heldMB) <= 64);
out.push('', `(half of peak: wrk 4 has no fixed-rate mode (\`-R\` is wrk2's); the ${CONNS} connections wait between an answer `
  + 'and their next request (wrk\'s Lua `delay()`, calibrated by two short runs) so that the rate is about half the peak: '
  + `a closed loop with think time. ${Math.round((Date.now() - t0) / 1000)} s in all.)`);
console.log(`\n${out.join('\n')}`);
