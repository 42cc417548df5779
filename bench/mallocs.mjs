// mallocs.mjs -- `make bench-mallocs`: heap allocations per grant issuance (issue 15).
// The release binary and the development IdP (as bench/bench.js), a consent approved over
// HTTP, WARMUP grants (caches filled, first-use allocations done), then heaptrack attached to
// the running consentd (gdb injection) for exactly N more POST /token grants, detached, and
// its allocation calls split by who called the allocator: for each call stack the innermost
// frame that is not the allocator itself (libc's malloc family, OpenSSL's CRYPTO_*alloc,
// jansson's jsonp_*, sqlite3's mem wrappers are counted as their library's own calls).
// Not part of `make check`: it needs heaptrack and gdb, and takes about a minute.
// Alone: node bench/mallocs.mjs [N] [WARMUP] [CONCURRENCY]; writes build/mallocs/*.
// WRK_SECONDS=10 first runs wrk (-t2 -c32) on POST /token for that long, before heaptrack
// attaches: grants/s and consentd's CPU ms per grant (noisy on a shared machine).
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync, readFileSync, existsSync, rmSync, readdirSync, readlinkSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { approvedConsent, benchConfig } from './bench.js';
import { issueMany, timed } from './measure.js';
import { wrkRunner } from './wrk.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');
const N = Number(process.argv[2] || 2000);
const WARMUP = Number(process.argv[3] || 200);
const CONC = Number(process.argv[4] || 4);
const out = join(root, 'build', 'mallocs');
mkdirSync(out, { recursive: true });
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });

const { startStack } = await import(join(root, 'tests', 'lib', 'stack.js'));

// Which library a frame belongs to. heaptrack's flame graph keeps function names where it has
// them and bare addresses where it has not (stripped libraries): addresses are placed by the
// process's memory map, names by the symbol tables of consentd and of each mapped library.
const GROUPS = [[/consentd/, 'consentd'], [/libjansson/, 'jansson'], [/libcjose/, 'cjose'],
  [/libcrypto|libssl/, 'OpenSSL'], [/libsqlite3/, 'SQLite'], [/libmicrohttpd/, 'libmicrohttpd'],
  [/libcurl/, 'libcurl'], [/libpq/, 'libpq'], [/libc\.so|ld-linux|libm\.so/, 'libc']];
const groupOf = (path) => (GROUPS.find(([re]) => re.test(path)) || [null, path.split('/').pop()])[1];

function symbols(path, dynamic) {
  try {
    return execFileSync('nm', [...(dynamic ? ['-D'] : []), '--defined-only', path],
      { encoding: 'utf8', maxBuffer: 1 << 28, stdio: ['ignore', 'pipe', 'ignore'] })
      .split('\n').map((l) => l.trim().split(/\s+/)).filter((f) => /^[tTiW]$/.test(f[1] || '')).map((f) => f[2].replace(/@.*$/, '').replace(/\.(isra|part|constprop|cold)\..*$/, ''));
  } catch { return []; }
}

function loadMap(pid) {
  const ranges = []; const byName = new Map(); const paths = new Set();
  for (const line of readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n')) {
    const f = line.split(/\s+/);
    if (f.length < 6 || !f[5].startsWith('/') || !f[1].includes('x')) continue;
    const [a, b] = f[0].split('-').map((x) => BigInt(`0x${x}`));
    ranges.push([a, b, groupOf(f[5])]);
    paths.add(f[5]);
  }
  for (const p of paths) {
    if (/heaptrack/.test(p)) continue;
    const own = groupOf(p) === 'consentd';
    for (const sym of symbols(p, !own)) if (!byName.has(sym) || own) byName.set(sym, groupOf(p));
  }
  return { ranges, byName };
}

// The allocator's own entry points and thin wrappers: skipped when looking for the caller, so
// that consentd's strdup() counts as consentd's and OpenSSL's CRYPTO_zalloc() as OpenSSL's.
const ALLOC = new Set(['malloc', 'calloc', 'realloc', 'reallocarray', 'free', 'posix_memalign',
  'aligned_alloc', 'memalign', 'strdup', 'strndup', '__strdup', '__strndup', '__GI___strdup',
  '__GI___strndup', 'asprintf', 'vasprintf', '__vasprintf_internal', '___asprintf',
  'CRYPTO_malloc', 'CRYPTO_zalloc', 'CRYPTO_realloc', 'CRYPTO_clear_realloc', 'CRYPTO_memdup',
  'CRYPTO_strdup', 'CRYPTO_strndup', 'sqlite3_malloc', 'sqlite3_malloc64', 'sqlite3_realloc',
  'sqlite3_realloc64', 'sqlite3_mprintf', 'sqlite3_vmprintf']);

function summarize(folded, map) {
  const where = (frame) => {
    const fn = frame.replace(/\s*\(.*$/, '');
    if (/^0x[0-9a-f]+$/.test(fn)) {
      const a = BigInt(fn);
      const r = map.ranges.find(([lo, hi]) => a >= lo && a < hi);
      return { fn, lib: r ? r[2] : 'unknown' };
    }
    const base = fn.replace(/^__GI_/, '');
    // Inlined functions have no symbol of their own; their source file says whose they are.
    const src = frame.match(/\(([\w.-]+\.c)\)$/);
    if (src && existsSync(join(root, 'server', src[1]))) return { fn, lib: 'consentd' };
    return { fn, lib: map.byName.get(fn) || map.byName.get(base) || (/\.[cS]\)$/.test(frame) && /^__/.test(fn) ? 'libc' : 'unknown') };
  };
  const byLib = {}; const byOurs = {}; const byLeaf = {}; const byLibOurs = {};
  let total = 0;
  for (const line of folded.split('\n')) {
    const m = line.match(/^(.*?);? (\d+)$/);
    if (!m) continue;
    const n = Number(m[2]);
    const frames = m[1].split(';').filter(Boolean);     // outermost first; the allocator is left out
    total += n;
    let caller = { fn: '?', lib: 'unknown' };
    for (let i = frames.length - 1; i >= 0; i -= 1) {
      const w = where(frames[i]);
      if (ALLOC.has(w.fn) || ALLOC.has(w.fn.replace(/^__GI_/, ''))) continue;
      caller = w;
      break;
    }
    // The innermost consentd function on the stack: who, in our code, drove the call.
    let mine = '(no consentd frame)';
    for (let i = frames.length - 1; i >= 0; i -= 1) {
      const w = where(frames[i]);
      if (w.lib === 'consentd') { mine = w.fn; break; }
    }
    const add = (o, k) => { o[k] = (o[k] || 0) + n; };
    add(byLib, caller.lib);
    add(byLeaf, `${caller.lib}: ${caller.fn}`);
    add(byOurs, mine);
    add(byLibOurs, `${caller.lib} <- ${mine}`);
  }
  return { total, byLib, byOurs, byLeaf, byLibOurs };
}

const per = (n) => (n / N).toFixed(1);
function table(title, obj, limit = 40) {
  const rows = Object.entries(obj).sort((a, b) => b[1] - a[1]).slice(0, limit);
  return [`${title}`, ...rows.map(([k, v]) => `  ${per(v).padStart(8)}  ${k}`)].join('\n');
}

const s = await startStack({ config: await benchConfig() });
let hp = null;
let stopped = false;
try {
  const c = await approvedConsent(s);
  const form = { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: c.auth };
  await issueMany(`${s.url}/token`, c.tokenBody, form, WARMUP, CONC);
  const pid = s.c.proc.pid;
  let wrkLine = '';
  if (Number(process.env.WRK_SECONDS) > 0) {
    const w = wrkRunner({ threads: 2, connections: 32, duration: Number(process.env.WRK_SECONDS) });
    try {
      const r = await timed(w, pid, 'POST /token (grant issued)', `${s.url}/token`,
        w.script({ method: 'POST', body: c.tokenBody, headers: form }));
      wrkLine = `wrk -t2 -c32 ${process.env.WRK_SECONDS} s: ${r.rps} grants/s, p50 ${r.p50}, p99 ${r.p99}, `
        + `${r.cpuMsPerReq.toFixed(3)} ms consentd CPU a grant, non-2xx ${r.non2xx}\n\n`;
    } finally {
      w.cleanup();
    }
  }
  const map = loadMap(pid);
  const file = join(out, 'consentd');
  for (const f of [`${file}.zst`, `${file}.gz`]) rmSync(f, { force: true });
  hp = spawn('heaptrack', ['-o', file, '-p', String(pid)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  hp.stdout.on('data', (d) => { log += d; });
  hp.stderr.on('data', (d) => { log += d; });
  for (let t = 0; !log.includes('injection finished'); t += 100) {
    if (t > 60000 || hp.exitCode !== null) throw new Error(`heaptrack did not attach: ${log}`);
    await sleep(100);
  }
  await sleep(500);
  const t0 = Date.now();
  await issueMany(`${s.url}/token`, c.tokenBody, form, N, CONC);
  const ms = Date.now() - t0;
  await sleep(300);
  // SIGINT: heaptrack's exit trap stops the injected tracker through gdb and detaches.
  const done = new Promise((r) => { hp.on('exit', r); });
  hp.kill('SIGINT');
  await done;
  hp = null;
  // heaptrack's interpreter finishes the file once consentd closes its end of the pipe: stop
  // consentd (its shutdown's few allocations are counted in the file, under main()).
  await s.stop();
  stopped = true;
  const zst = [`${file}.zst`, `${file}.gz`].find(existsSync);
  if (!zst) throw new Error(`no heaptrack output: ${log}`);
  // Its interpreter and compressor go on writing after the script exits: wait until no
  // process holds the file open.
  const holders = () => readdirSync('/proc').filter((d) => /^\d+$/.test(d)).filter((d) => {
    try { return readdirSync(`/proc/${d}/fd`).some((fd) => { try { return readlinkSync(`/proc/${d}/fd/${fd}`) === zst; } catch { return false; } }); } catch { return false; }
  });
  for (let t = 0; holders().length; t += 200) {
    if (t > 120000) throw new Error('heaptrack output still open after 120 s');
    await sleep(200);
  }
  const folded = join(out, 'grant.folded');
  const summary = execFileSync('heaptrack_print', ['-f', zst, '--print-flamegraph', folded,
    '--flamegraph-cost-type', 'allocations', '--print-peaks=0', '--print-allocators=0', '--print-temporary=0', '--print-leaks=0'], { encoding: 'utf8', maxBuffer: 1 << 28 });
  writeFileSync(join(out, 'heaptrack_print.txt'), summary);
  const r = summarize(readFileSync(folded, 'utf8'), map);
  const calls = summary.match(/calls to allocation functions: (\d+)/);
  const report = wrkLine + [
    `${N} grants (POST /token, token exchange of a consented person -> ES256 JWT), ${CONC} at a time, `
      + `after ${WARMUP} warm-up grants; ${ms} ms under heaptrack`,
    `allocation calls: ${calls ? calls[1] : r.total} in all, ${per(r.total)} per grant`,
    table('per grant, by the library whose code called the allocator:', r.byLib),
    table('per grant, by the innermost consentd function on the stack:', r.byOurs, 30),
    table('per grant, by the calling library <- the innermost consentd function (top 60):', r.byLibOurs, 60),
    table('per grant, by the calling function (top 40):', r.byLeaf, 40),
  ].join('\n\n');
  writeFileSync(join(out, 'report.txt'), `${report}\n`);
  console.log(report);
} finally {
  if (hp) hp.kill('SIGINT');
  if (!stopped) await s.stop();
}
