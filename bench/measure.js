// measure.js -- what `make bench` reads besides wrk's report (bench/all.js):
//
//   procCpu(pid)                -> CPU seconds (utime + stime) of a process, from /proc/PID/stat
//   procMem(pid)                -> { rssMB, hwmMB }: VmRSS and VmHWM (peak) from /proc/PID/status
//   procWritten(pid)            -> bytes the process caused to be written to the disk
//                                  (write_bytes of /proc/PID/io: the WAL and the checkpoint)
//   await timed(w, pid, name, url, script, opts)
//                               -> wrk's row (bench/wrk.js) plus cpuMsPerReq: the server's CPU
//                                  time over the run divided by the requests wrk completed,
//                                  and kbWrittenPerReq: procWritten over the run, likewise
//                                  (pages, not time: it does not drift with the machine)
//   await opensslSpeed(seconds) -> { sign, verify }: `openssl speed -seconds S ecdsap256`, per s
//   await fsyncLatency(dir, n)  -> { n, medianUs, p99Us }: build/bench_fsync in dir (4 KiB
//                                  appended + fdatasync, n times, in a temp file it removes)
//   await holdConnections(url, n, path)
//                               -> { opened, close() }: n keep-alive connections, one GET each
//                                  answered, held open until close()
//   median(xs)                  -> the median of the finite numbers in xs (NaN when none)
import { readFileSync } from 'node:fs';
import { spawn, spawnSync } from 'node:child_process';
import { connect } from 'node:net';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;

export function procCpu(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const x = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(x[11]) + Number(x[12])) / TCK;            // utime + stime (fields 14, 15)
}

export function procMem(pid) {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k) => Number((s.match(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm')) || [])[1]);
  return { rssMB: kb('VmRSS') / 1024, hwmMB: kb('VmHWM') / 1024 };
}

export function procWritten(pid) {
  const m = readFileSync(`/proc/${pid}/io`, 'utf8').match(/^write_bytes:\s+(\d+)$/m);
  return m ? Number(m[1]) : NaN;
}

export function median(xs) {
  const v = xs.map(Number).filter(Number.isFinite).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

export async function timed(w, pid, name, url, script, opts) {
  const c0 = procCpu(pid);
  const b0 = procWritten(pid);
  const r = await w.run(name, url, script, opts);
  const c1 = procCpu(pid);
  const b1 = procWritten(pid);
  r.cpuMsPerReq = r.requests > 0 ? ((c1 - c0) * 1000) / r.requests : NaN;
  r.kbWrittenPerReq = r.requests > 0 ? (b1 - b0) / 1024 / r.requests : NaN;
  console.log(`  ${name}: ${r.rps} req/s, p50 ${r.p50}, p99 ${r.p99}, ${r.cpuMsPerReq.toFixed(3)} ms CPU/req, `
    + `${r.kbWrittenPerReq.toFixed(1)} KB written/req, `
    + `non-2xx ${r.non2xx}, ${r.requests} requests, ${r.connections} connections`
    + `${r.socketErrors ? `, socket errors: ${r.socketErrors}` : ''}`);
  return r;
}

function run(cmd, args, timeoutMs) {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let so = '';
    let se = '';
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.stdout.on('data', (c) => { so += c; });
    p.stderr.on('data', (c) => { se += c; });
    p.on('error', (e) => { clearTimeout(timer); reject(e); });
    p.on('close', (code, sig) => {
      clearTimeout(timer);
      if (code !== 0) reject(new Error(`${cmd} ${args.join(' ')}: ${code ?? sig} ${se}`));
      else resolve(so);
    });
  });
}

// The summary line: "256 bits ecdsa (nistp256)   0.0000s   0.0001s  39000.0  14000.0"
// (sign/s, verify/s are the last two numbers).
export async function opensslSpeed(seconds = 3) {
  const out = await run('openssl', ['speed', '-seconds', String(seconds), 'ecdsap256'], (2 * seconds + 60) * 1000);
  const m = out.match(/^\s*256 bits ecdsa \(nistp256\)\s+[\d.]+s\s+[\d.]+s\s+([\d.]+)\s+([\d.]+)\s*$/m);
  if (!m) throw new Error(`openssl speed: no ecdsa (nistp256) line\n${out}`);
  return { sign: Number(m[1]), verify: Number(m[2]) };
}

export async function fsyncLatency(dir, n = 1000) {
  const out = await run(join(here, '..', 'build', 'bench_fsync'), [dir, String(n)], 300000);
  return JSON.parse(out.trim().split('\n').pop());
}

export async function holdConnections(url, n, path = '/healthz', timeoutMs = 60000) {
  const { hostname, port } = new URL(url);
  const socks = [];
  const close = () => { for (const s of socks) s.destroy(); };
  const one = () => new Promise((resolve, reject) => {
    const s = connect({ host: hostname, port: Number(port) });
    socks.push(s);
    let got = '';
    s.setEncoding('latin1');
    s.once('error', reject);
    s.on('connect', () => {
      s.write(`GET ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nConnection: keep-alive\r\n\r\n`);
    });
    s.on('data', (d) => {
      got += d;
      if (/^HTTP\/1\.1 200 /.test(got) && got.includes('\r\n\r\n')) resolve();
      else if (/^HTTP\/1\.1 \d{3} /.test(got) && !/^HTTP\/1\.1 200 /.test(got)) reject(new Error(`connection ${socks.length}: ${got.slice(0, 40)}`));
    });
    s.on('close', () => reject(new Error('closed before the answer')));
  });
  let timer;
  try {
    // 50 at a time: a burst of 1,000 connects would overflow the listen backlog.
    for (let i = 0; i < n; i += 50) {
      await Promise.race([
        Promise.all(Array.from({ length: Math.min(50, n - i) }, one)),
        new Promise((_, reject) => { timer = setTimeout(() => reject(new Error('holdConnections: timeout')), timeoutMs); }),
      ]);
      clearTimeout(timer);
    }
  } catch (e) {
    clearTimeout(timer);
    close();
    throw e;
  }
  for (const s of socks) { s.removeAllListeners('close'); s.on('error', () => {}); }
  return { opened: socks.filter((s) => !s.destroyed).length, close };
}

// n POSTs of body to url (concurrency at a time); -> the n access_token values, all distinct.
export async function issueMany(url, body, headers, n, concurrency = 32) {
  const tokens = [];
  let next = 0;
  const worker = async () => {
    while (next < n) {
      next += 1;
      const res = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(30000) });
      const j = await res.json().catch(() => null);
      if (res.status !== 200 || !j?.access_token) throw new Error(`issueMany ${url}: ${res.status} ${JSON.stringify(j)}`);
      tokens.push(j.access_token);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  if (new Set(tokens).size !== tokens.length) throw new Error(`issueMany ${url}: tokens repeat`);
  return tokens;
}

// wrk at about `fraction` of peakRps: conns connections, each waiting between requests (the
// wrk Lua delay()); the wait is calibrated by a short run first.  wrk 4 has no fixed-rate
// mode (-R is wrk2's), so this is a closed loop with think time, not an open-loop rate.
// Calibration costs 2 x min(3, duration) s more.
export async function atFractionOfPeak(w, pid, name, url, scriptOpts, peakRps, fraction = 0.5) {
  const conns = w.connections;
  const target = peakRps * fraction;
  let delay = (conns * 1000) / target;                  // ms: as if answers took no time
  // Two short calibration runs: each measures the time an answer takes at that rate and
  // sets the wait so that conns / (wait + answer) = target.
  for (let i = 0; i < 2; i += 1) {
    const cal = await w.run(`${name} (calibration)`, url, w.script({ ...scriptOpts, delay }),
      { duration: Math.min(3, w.duration) });
    const latency = (conns * 1000) / Number(cal.rps) - delay;    // ms per answer, measured
    delay = Math.max(0, (conns * 1000) / target - Math.max(0, latency));
  }
  const r = await timed(w, pid, name, url, w.script({ ...scriptOpts, delay }));
  r.fractionOfPeak = Number(r.rps) / peakRps;
  r.delayMs = delay;
  console.log(`    (${(100 * r.fractionOfPeak).toFixed(0)} % of the peak ${peakRps.toFixed(0)} req/s; `
    + `${conns} connections, ${delay.toFixed(2)} ms between an answer and the next request)`);
  return r;
}
