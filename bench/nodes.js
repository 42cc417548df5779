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
// After the POST /token runs each PostgreSQL setup prints, from the nodes' /metrics, how
// often a transaction waited for its node's writer turn (consentd_db_lock_wait_seconds) and
// how long each held it (consentd_db_lock_hold_seconds): each node's ceiling is 1 / the hold
// time (the nodes' transactions run at once, SERIALIZABLE; conflicts answer 503).
// SETUPS=pg1,pg2 runs only those setups; PG_STATEMENTS=1 loads pg_stat_statements into the
// server and prints each statement's calls per grant and server time (issue 34, goal 4).
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
const SETUPS = (process.env.SETUPS || 'sqlite1,pg1,pg2').split(',');
const PG_STATEMENTS = process.env.PG_STATEMENTS === '1';

// The sum over the nodes and series of each sample named in names, from GET /metrics.
async function scrape(ports, auth, names) {
  const out = Object.fromEntries(names.map((n) => [n, 0]));
  for (const p of ports) {
    const r = await fetch(`http://127.0.0.1:${p}/metrics`, { headers: { Authorization: auth } });
    const text = await r.text();
    for (const n of names) {
      // Every series of n (with labels or without) adds up.
      const m = [...text.matchAll(new RegExp(`^${n}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))];
      // A family this build does not have is NaN; one of its series not yet counted, 0.
      const family = n.replace(/_(count|sum)$/, '');
      if (m.length) out[n] += m.reduce((a, x) => a + Number(x[1]), 0);
      else if (!text.includes(`# TYPE ${family} `)) out[n] = NaN;
    }
  }
  return out;
}
const LOCK_SAMPLES = ['consentd_db_lock_wait_seconds_count', 'consentd_db_lock_wait_seconds_sum',
  'consentd_db_lock_hold_seconds_count', 'consentd_db_lock_hold_seconds_sum',
  'consentd_grants_issued_total', 'consentd_db_conflicts_total'];

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
  const url = pg ? await freshPgDatabase() : null;
  const extra = pg ? { database: { url } } : {};
  const psql = (q) => spawnSync('psql', ['-X', '-q', '-A', '-t', '-F', '\t', '-v', 'ON_ERROR_STOP=1', '-d', url, '-c', q],
    { encoding: 'utf8' }).stdout;
  if (pg && PG_STATEMENTS) psql('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
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
      const lock0 = pg && key === 'token' ? await scrape(ports, c.auth, LOCK_SAMPLES) : null;
      if (pg && PG_STATEMENTS && key === 'token') psql('SELECT pg_stat_statements_reset()');
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
      if (lock0) {
        const l1 = await scrape(ports, c.auth, LOCK_SAMPLES);
        const d = (n) => l1[n] - lock0[n];
        const holds = d('consentd_db_lock_hold_seconds_count');
        out.lock = {
          grants: d('consentd_grants_issued_total'), transactions: holds,
          waits: d('consentd_db_lock_wait_seconds_count'),
          waitMs: (1000 * d('consentd_db_lock_wait_seconds_sum')) / d('consentd_db_lock_wait_seconds_count'),
          holdMs: (1000 * d('consentd_db_lock_hold_seconds_sum')) / holds,
        };
        out.lock.conflicts = d('consentd_db_conflicts_total');
        out.lock.waitShare = out.lock.waits / holds;
        out.lock.ceiling = 1000 / out.lock.holdMs;
        console.log(`  ${label} writer turn: ${holds} transactions (${out.lock.grants} grants), `
          + `${out.lock.waits} waited (${(100 * out.lock.waitShare).toFixed(1)} %, mean wait `
          + `${out.lock.waitMs.toFixed(3)} ms), mean hold ${out.lock.holdMs.toFixed(3)} ms: `
          + `ceiling ${Math.round(out.lock.ceiling)} transactions/s a node; `
          + `${out.lock.conflicts} conflicts with another node (rolled back, run again)`);
        if (PG_STATEMENTS) {
          const g = out.lock.grants;
          const st = psql('SELECT calls, round(mean_exec_time::numeric, 4), '
            + "regexp_replace(left(query, 90), '\\s+', ' ', 'g') FROM pg_stat_statements "
            + 'WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) '
            + 'ORDER BY calls DESC LIMIT 14');
          out.statements = st.trim().split('\n').map((l) => l.split('\t'));
          for (const [calls, ms, q] of out.statements) {
            console.log(`    ${(Number(calls) / g).toFixed(2)} a grant, ${ms} ms: ${q}`);
          }
        }
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
  if (PG_STATEMENTS) {
    await pgServer.psql("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'");
    await pgServer.restart();
  }
  if (SETUPS.includes('sqlite1')) res.sqlite1 = await measure('SQLite, one node', { pg: false, nodes: 1 });
  if (SETUPS.includes('pg1')) res.pg1 = await measure('PostgreSQL, one node', { pg: true, nodes: 1 });
  if (SETUPS.includes('pg2')) res.pg2 = await measure('PostgreSQL, two nodes', { pg: true, nodes: 2 });
} finally {
  await pgServer.stop();
}
console.log('\n| | POST /token (grants/s) | ms CPU/grant consentd + postgres | POST /introspect (/s) | ms CPU consentd + postgres |');
console.log('|---|---:|---:|---:|---:|');
for (const [k, label] of [['sqlite1', 'SQLite, one node'], ['pg1', 'PostgreSQL, one node'], ['pg2', 'PostgreSQL, two nodes']]) {
  const r = res[k];
  if (!r) continue;
  const cpu = (x) => `${x.cpuMs.toFixed(3)}${k === 'sqlite1' ? '' : ` + ${x.pgCpuMs.toFixed(3)}`}`;
  console.log(`| ${label} | ${Math.round(r.token.rps)} | ${cpu(r.token)} | ${Math.round(r.intro.rps)} | ${cpu(r.intro)} |`);
}
const ratio = (a, b) => (a && b ? (a / b).toFixed(2) : '-');
const rps = (k, e) => res[k]?.[e]?.rps;
console.log(`\nratios: /token pg1/sqlite1 ${ratio(rps('pg1', 'token'), rps('sqlite1', 'token'))}, `
  + `pg2/pg1 ${ratio(rps('pg2', 'token'), rps('pg1', 'token'))}; /introspect pg1/sqlite1 `
  + `${ratio(rps('pg1', 'intro'), rps('sqlite1', 'intro'))}, pg2/pg1 ${ratio(rps('pg2', 'intro'), rps('pg1', 'intro'))}`);
console.log(JSON.stringify(res));
