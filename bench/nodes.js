// nodes.js -- `make bench-nodes`: the same wrk runs against one consentd on SQLite, one on
// PostgreSQL, and two on one PostgreSQL (issue 17; docs/BENCHMARKS.md "Many nodes").
//
// Each setup gets the development IdP, a consent approved over HTTP, then, for DURATION s
// each and RUNS times: POST /token (a grant issued: a write and an audit entry) and
// POST /introspect (one grant, repeated: reads only).  Two nodes are driven by wrk's two
// threads, one thread straight at each node (wrk's setup() picks the address), so no
// balancer's CPU is counted.  CPU per request is split: consentd's processes, and
// PostgreSQL's (every process of user postgres: the backends, the WAL writer, ...).
// On this 2-core machine two nodes share the cores with PostgreSQL and wrk: the point is
// that they stay correct at load, not that they scale (see BENCHMARKS.md for what would).
//
//   RUNS=3 DURATION=10 CONNECTIONS=32 node bench/nodes.js
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { median, procCpu } from './measure.js';
import { approvedConsent, benchConfig } from './bench.js';
import { wrkRunner } from './wrk.js';

const here = dirname(fileURLToPath(import.meta.url));
process.env.TEST_CONSENTD_BIN ||= join(here, '..', 'build', 'consentd');
const lib = (f) => import(join(here, '..', 'tests', 'lib', f));
const RUNS = Number(process.env.RUNS || 3);
const DURATION = Number(process.env.DURATION || 10);
const CONNECTIONS = Number(process.env.CONNECTIONS || 32);

// CPU seconds of every process of user postgres (the server and its backends).
function postgresCpu() {
  const uid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout);
  let t = 0;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = readFileSync(`/proc/${d}/status`, 'utf8');
      if (Number((st.match(/^Uid:\s+(\d+)/m) || [])[1]) === uid) t += procCpu(Number(d));
    } catch { /* gone */ }
  }
  return t;
}

// A wrk Lua script: method, body and headers; with several ports, thread i goes to
// ports[i % n] (wrk's setup() sets each thread's address).
function lua(w, { body, headers, ports }) {
  const f = join(w.dir, `nodes-${Math.random().toString(36).slice(2)}.lua`);
  const q = (s) => JSON.stringify(s);
  let s = `wrk.method = "POST"\nwrk.body = ${q(body)}\n`;
  for (const [k, v] of Object.entries(headers)) s += `wrk.headers[${q(k)}] = ${q(v)}\n`;
  s += `local ports = { ${ports.map((p) => `"${p}"`).join(', ')} }\nlocal n = 0\n`
    + 'function setup(thread)\n'
    + '  local p = ports[(n % #ports) + 1]\n  n = n + 1\n'
    + '  thread.addr = wrk.lookup("127.0.0.1", p)[1]\nend\n';
  writeFileSync(f, s);
  return f;
}

async function measure(label, { pg, nodes }) {
  const { startStack } = await lib('stack.js');
  const { freshPgDatabase } = await lib('consentd.js');
  const extra = pg ? { database: { url: await freshPgDatabase() } } : {};
  const s = await startStack({ config: await benchConfig(extra), nodes });
  const w = wrkRunner({ threads: 2, connections: CONNECTIONS, duration: DURATION });
  const pids = s.c.nodes.map((n) => n.proc.pid);
  const ports = s.c.nodes.map((n) => n.port);
  const out = {};
  try {
    const c = await approvedConsent(s);
    const headers = { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: c.auth };
    for (const [key, name, path, body] of [
      ['token', 'POST /token (grant issued)', '/token', c.tokenBody],
      ['intro', 'POST /introspect (one grant, repeated)', '/introspect', `token=${c.grant}`],
    ]) {
      const rows = [];
      for (let i = 0; i < RUNS; i++) {
        const c0 = pids.reduce((a, p) => a + procCpu(p), 0);
        const p0 = pg ? postgresCpu() : 0;
        const r = await w.run(name, `http://127.0.0.1:${ports[0]}${path}`, lua(w, { body, headers, ports }));
        const c1 = pids.reduce((a, p) => a + procCpu(p), 0);
        const p1 = pg ? postgresCpu() : 0;
        r.cpuMs = r.requests > 0 ? ((c1 - c0) * 1000) / r.requests : NaN;
        r.pgCpuMs = r.requests > 0 ? ((p1 - p0) * 1000) / r.requests : NaN;
        rows.push(r);
        console.log(`  ${label} ${name}: ${r.rps} req/s, p50 ${r.p50}, p99 ${r.p99}, `
          + `consentd ${r.cpuMs.toFixed(3)} ms CPU/req, postgres ${pg ? r.pgCpuMs.toFixed(3) : '-'} ms, `
          + `non-2xx ${r.non2xx}`);
      }
      out[key] = {
        rps: median(rows.map((r) => r.rps)), p99: rows.map((r) => r.p99),
        cpuMs: median(rows.map((r) => r.cpuMs)), pgCpuMs: median(rows.map((r) => r.pgCpuMs)),
        non2xx: rows.reduce((a, r) => a + Number(r.non2xx || 0), 0),
      };
    }
    // What the load left: the chain verifies (every node appended to it).
    const v = spawnSync(process.env.TEST_CONSENTD_BIN, ['audit', 'verify', '-c', s.c.cfgPath], { encoding: 'utf8' });
    out.auditVerify = v.status === 0 ? v.stdout.trim() : `FAILED: ${v.stderr}`;
    console.log(`  ${label}: ${out.auditVerify}`);
  } finally {
    await s.stop();
    w.cleanup();
  }
  return out;
}

const { sharedPostgres } = await lib('consentd.js');
const pgServer = await sharedPostgres();
const res = {};
try {
  res.sqlite1 = await measure('SQLite, one node', { pg: false, nodes: 1 });
  res.pg1 = await measure('PostgreSQL, one node', { pg: true, nodes: 1 });
  res.pg2 = await measure('PostgreSQL, two nodes', { pg: true, nodes: 2 });
} finally {
  await pgServer.stop();
}
console.log('\n| | POST /token (grants/s) | ms CPU/grant consentd + postgres | POST /introspect (/s) | ms CPU consentd + postgres |');
console.log('|---|---:|---:|---:|---:|');
for (const [k, label] of [['sqlite1', 'SQLite, one node'], ['pg1', 'PostgreSQL, one node'], ['pg2', 'PostgreSQL, two nodes']]) {
  const r = res[k];
  const cpu = (x) => `${x.cpuMs.toFixed(3)}${k === 'sqlite1' ? '' : ` + ${x.pgCpuMs.toFixed(3)}`}`;
  console.log(`| ${label} | ${Math.round(r.token.rps)} | ${cpu(r.token)} | ${Math.round(r.intro.rps)} | ${cpu(r.intro)} |`);
}
const ratio = (a, b) => (a / b).toFixed(2);
console.log(`\nratios: /token pg1/sqlite1 ${ratio(res.pg1.token.rps, res.sqlite1.token.rps)}, `
  + `pg2/pg1 ${ratio(res.pg2.token.rps, res.pg1.token.rps)}; /introspect pg1/sqlite1 `
  + `${ratio(res.pg1.intro.rps, res.sqlite1.intro.rps)}, pg2/pg1 ${ratio(res.pg2.intro.rps, res.pg1.intro.rps)}`);
console.log(JSON.stringify(res));
