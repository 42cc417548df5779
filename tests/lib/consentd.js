// Starts the real consentd binary for a test: a temporary directory with a
// config file, a master key and a SQLite database; a free port on 127.0.0.1.
//
//   const c = await startConsentd({ config: { oidc: { issuer } }, env: {} , extra: '...' });
//   c.url        // http://127.0.0.1:PORT (also the public URL)
//   c.port       // PORT: the one given, else a free one (tests/lib/ports.js withFreePort: if
//                //   another process takes it before consentd binds it, again on another;
//                //   option pickPort: how each is picked, for tests/integration/ports.test.js)
//   c.dir        // the temporary directory (config.ini, master.key, consentd.db)
//   c.proc       // the process handle from proc.js (stdout, stderr, exited, ...)
//   c.sql(q)     // q on consentd's database, either backend: rows as text, '|' between columns
//   c.rows(q)    // a SELECT q on it: an array of row objects
//   await c.stop()  // SIGTERM by pid, then removes the directory
//
// The binary is $TEST_CONSENTD_BIN (make check points it at the ASan+UBSan build) or build/consentd.
import { mkdtempSync, writeFileSync, rmSync, chmodSync, cpSync } from 'node:fs';
import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startProcess } from './proc.js';
import { withFreePort, listenersOn, PortTakenError } from './ports.js';
import { startPostgres, psqlBin } from './pg.js';
import { startLb, PROXY_ADDRESS } from './lb.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const consentdBin = process.env.TEST_CONSENTD_BIN || join(root, 'build', 'consentd');
// The binary at the moment a process starts: bench/ab.mjs points TEST_CONSENTD_BIN at each of
// two builds in turn in one Node.js process (consentdBin is read once, at import).
const binNow = () => process.env.TEST_CONSENTD_BIN || consentdBin;

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

// The PostgreSQL backend: TEST_DB=pg runs every startConsentd of the test
// file against one PostgreSQL server (tests/lib/pg.js, started on first use),
// each in a fresh database of its own that `consentd migrate` prepares; and
// TEST_NODES=2 (with TEST_DB=pg) runs two nodes on that database behind a
// round-robin balancer (tests/lib/lb.js) at the public URL, so every flow of
// the test crosses nodes.  A config with database.url set uses that database.
export const testDb = process.env.TEST_DB === 'pg' ? 'pg' : 'sqlite';
export const testNodes = testDb === 'pg' ? Math.max(1, Number(process.env.TEST_NODES || 1)) : 1;
let pgServer = null;
let pgDbs = 0;
export async function sharedPostgres() {
  if (!pgServer) pgServer = await startPostgres();
  return pgServer;
}
export async function freshPgDatabase() {
  const pg = await sharedPostgres();
  const name = `it${process.pid}_${pgDbs++}`;
  await pg.psql(`CREATE DATABASE ${name}`, { db: 'postgres' });
  return pg.url.replace('/consentd?', `/${name}?`);
}

// A query on the database of config cfg, whichever backend it names: the sqlite3 CLI
// on the file, or psql on the PostgreSQL URL (unaligned, tuples only: the same text).
// With json, a SELECT's rows come back as an array of objects (sqlite3 -json, or
// json_agg on PostgreSQL; integers are numbers on both).
export function dbQuery(cfg, query, { json = false } = {}) {
  const url = cfg.database?.url;
  let r;
  if (url) {
    const q = json ? `SELECT coalesce(json_agg(q), '[]') FROM (${query}) q` : query;
    r = spawnSync(psqlBin, ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', url, '-c', q], { encoding: 'utf8' });
  } else {
    r = spawnSync('sqlite3', [...(json ? ['-json'] : []), '-cmd', '.timeout 5000', cfg.database.path, query],
      { encoding: 'utf8' });
  }
  if (r.status !== 0) throw new Error(`${url ? 'psql' : 'sqlite3'} ${query}: ${r.stderr}`);
  const out = r.stdout.trim();
  if (!json) return out;
  return out ? JSON.parse(out) : [];
}

// Runs `consentd SUB... -c cfgPath` to completion: { code, stdout, stderr }.
export async function consentdCommand(args, { env = {} } = {}) {
  return new Promise((resolve) => {
    execFile(binNow(), args, { env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1', ...env },
      timeout: 60000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr });
    });
  });
}

// One consentd process on port, ready: /healthz answers 200 and the listening socket on
// port is this process's alone.  Throws a PortTakenError when another process has the
// port: consentd could not bind it ("cannot listen on"), or bound it beside another
// (SO_REUSEPORT, tests/lib/ports.js listenersOn); the caller may try another port.
async function startNode({ cfg, dir, port, env, name }) {
  const cfgPath = join(dir, 'config.ini');
  writeFileSync(cfgPath, toIni(cfg));
  const taken = (output) => new RegExp(`cannot listen on \\S+:${port}\\b`).test(output);
  let proc;
  try {
    proc = await startProcess(binNow(), ['-c', cfgPath], {
      env: { ASAN_OPTIONS: 'detect_leaks=1', ...env },
      ready: { url: `http://127.0.0.1:${port}/healthz`, status: 200 },
      timeoutMs: 60000,
      name,
    });
  } catch (e) {
    if (taken(e.message)) throw new PortTakenError(port, e.message);
    throw e;
  }
  // The answer may have come from another process on the port: wait until this one
  // listens there (or exits), and then that no other process does.
  for (let t = 0; ; t += 50) {
    const l = listenersOn(port, proc.pid);
    if (proc.exitStatus || t >= 60000) {
      await proc.stop(1000);
      const why = `${name} ${proc.exitStatus ? 'exited' : 'never listened'} after /healthz on port ${port} answered`;
      if (taken(proc.output())) throw new PortTakenError(port, `${why}\n${proc.output()}`);
      throw new Error(`${why}\n${proc.output()}`);
    }
    if (l === null) break;                         // no /proc: nothing more to learn
    if (l.ours > 0 && l.others > 0) {
      await proc.stop(10000);
      throw new PortTakenError(port, `${name} listens there beside ${l.others} other socket(s)`);
    }
    if (l.ours > 0) break;
    await sleep(50);
  }
  return { proc, cfgPath };
}

export async function startConsentd({ config = {}, env = {}, port, dir, keepDir = false,
  nodes = testNodes, migrate = true, pickPort } = {}) {
  const made = !dir;
  dir = dir || mkdtempSync(join(tmpdir(), 'consentd-it-'));
  try {
    return await startIn({ config, env, port, dir, keepDir, nodes, migrate, pickPort });
  } catch (e) {
    if (made) rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}

async function startIn({ config, env, port, dir, keepDir, nodes, migrate, pickPort }) {
  const dbUrl = testDb === 'pg' || config.database?.url ? config.database?.url || await freshPgDatabase() : null;
  const configAt = (p) => {
    const c = merge(baseConfig({ port: p, dir, issuer: config?.oidc?.issuer }), config);
    return dbUrl ? { ...c, database: { ...c.database, path: undefined, url: dbUrl } } : c;
  };
  const cfgPath = join(dir, 'config.ini');
  const keyPath = join(dir, 'master.key');
  try { writeFileSync(keyPath, randomBytes(32), { flag: 'wx', mode: 0o600 }); } catch { /* kept */ }
  chmodSync(keyPath, 0o600);
  if (dbUrl && migrate) {
    writeFileSync(cfgPath, toIni(configAt(port || 1)));    // (migrate listens on nothing)
    const m = await consentdCommand(['migrate', '-c', cfgPath], { env });
    if (m.code !== 0) throw new Error(`consentd migrate: ${m.stderr}`);
  }
  // Everything that names the port; a port the caller chose is the one used.
  const launch = (p) => {
    const cfg = configAt(p);
    writeFileSync(cfgPath, toIni(cfg));
    const at = { cfg, cfgPath, dir, port: p, env, keepDir };
    return nodes <= 1 ? launchOne(at) : launchMany({ ...at, nodes });
  };
  return port ? launch(port) : withFreePort(launch, { pick: pickPort });
}

async function launchOne({ cfg, cfgPath, dir, port, env, keepDir }) {
  const { proc } = await startNode({ cfg, dir, port, env, name: 'consentd' });
  return {
    url: cfg.server.public_url, port, dir, cfgPath, proc, config: cfg, nodes: [{ proc, dir, port }],
    sql: (q) => dbQuery(cfg, q),
    rows: (q) => dbQuery(cfg, q, { json: true }),
    async stop({ remove = !keepDir } = {}) {
      const st = await proc.stop(10000);
      if (remove) rmSync(dir, { recursive: true, force: true });
      return st;
    },
  };
}

// N nodes: each its own port and directory (a copy of dir: the same master key and
// files), the same database, the balancer on `port`.
async function launchMany({ cfg, cfgPath, dir, port, env, keepDir, nodes }) {
  const url = cfg.server.public_url;
  const list = [];
  let lb = null;
  try {
    for (let i = 0; i < nodes; i++) {
      const ndir = `${dir}-node${i}`;
      cpSync(dir, ndir, { recursive: true });
      const rewrite = (v) => (typeof v === 'string' && v.startsWith(dir) ? ndir + v.slice(dir.length) : v);
      const ncfg = {};
      for (const [sec, keys] of Object.entries(cfg)) {
        if (keys == null) continue;
        ncfg[sec] = {};
        for (const [k, v] of Object.entries(keys)) ncfg[sec][k] = rewrite(v);
      }
      list.push(await withFreePort(async (nport) => {
        // The balancer is a trusted proxy: the nodes key their per-address limits by the client.
        const ncfgAt = { ...ncfg, server: { ...ncfg.server, listen: `127.0.0.1:${nport}`, public_url: url,
          trusted_proxies: [ncfg.server.trusted_proxies, PROXY_ADDRESS].filter(Boolean).join(' ') } };
        const { proc } = await startNode({ cfg: ncfgAt, dir: ndir, port: nport, env, name: `consentd#${i}` });
        return { proc, dir: ndir, port: nport, config: ncfgAt };
      }));
    }
    lb = await startLb({ port, backends: list.map((n) => n.port) });
  } catch (e) {
    for (const n of list) await n.proc.stop(10000);
    throw e;
  }
  return {
    url, port, dir, cfgPath, proc: list[0].proc, config: cfg, nodes: list, lb,
    sql: (q) => dbQuery(cfg, q),
    rows: (q) => dbQuery(cfg, q, { json: true }),
    async stop({ remove = !keepDir } = {}) {
      await lb.stop();
      // Every node took part: round robin gave each its share of the flows.
      const idle = lb.counts.findIndex((n) => n === 0);
      let st = null;
      for (const n of list) {
        const s1 = await n.proc.stop(10000);
        if (st === null || (s1 && s1.code !== 0)) st = s1;
      }
      if (remove) {
        rmSync(dir, { recursive: true, force: true });
        for (const n of list) rmSync(n.dir, { recursive: true, force: true });
      }
      if (idle >= 0 && lb.counts.reduce((a, n) => a + n, 0) >= 2 * list.length) {
        throw new Error(`node ${idle} of ${list.length} served no request (${lb.counts})`);
      }
      return st;
    },
  };
}
