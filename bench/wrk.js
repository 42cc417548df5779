// wrk.js -- runs wrk and reads its report, for the benches in bench/.
//
//   const w = wrkRunner({ threads = 2, connections = 32, duration = 10 });
//   const f = w.script({ method, body, headers,   // a Lua file setting them (and printing the
//                        bodies, delay })          //   non-2xx/3xx count); in a temp dir
//       bodies: { file, prefix = '' }  each request's body is prefix + the next line of file
//                                      (cycled; each wrk thread starts at its own offset):
//                                      e.g. 10,000 distinct tokens to introspect
//       delay: ms                      after each response a connection waits ms (a fraction
//                                      is dithered: 2.3 waits 3 ms 30 % of the time, else 2)
//                                      before its next request: a rate below the peak
//   const row = await w.run(name, url, f?, { connections, duration }?)
//       -> { name, rps, p50, p99, p50ms, p99ms, non2xx, requests, socketErrors, connections, out }
//   w.table(rows)                                   // the markdown table, as a string
//   w.cleanup()                                     // removes the temp dir
//
// wrk runs asynchronously (never spawnSync): a server in the calling process (the recorder)
// keeps serving while wrk runs.  Each run is bounded: wrk is killed (by pid) duration + 30 s
// after it starts.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// "1.23ms" -> 1.23 (milliseconds)
export function toMs(s) {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(s || '');
  if (!m) return NaN;
  return Number(m[1]) * { us: 0.001, ms: 1, s: 1000, m: 60000 }[m[2]];
}

// wrk processes still running: killed (by pid) if this process exits first.
const live = new Set();
process.on('exit', () => { for (const p of live) { try { p.kill('SIGKILL'); } catch { /* gone */ } } });

const lstr = (s) => JSON.stringify(String(s));   // a JSON string is a valid Lua string here (ASCII)

export function wrkRunner({ threads = 2, connections = 32, duration = 10 } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'consentd-bench-'));
  let n = 0;
  return {
    threads, connections, duration, dir,
    script({ method, body, headers = {}, bodies, delay } = {}) {
      n += 1;
      const f = join(dir, `s${n}.lua`);
      let lua = '';
      if (method) lua += `wrk.method = ${lstr(method)}\n`;
      if (body !== undefined) lua += `wrk.body = ${lstr(body)}\n`;
      for (const [k, v] of Object.entries(headers)) lua += `wrk.headers[${lstr(k)}] = ${lstr(v)}\n`;
      lua += 'local nthreads = 0\n'
        + 'function setup(thread)\n  thread:set("tid", nthreads)\n  nthreads = nthreads + 1\nend\n';
      if (bodies) {
        lua += 'local bodies = {}\nlocal at = 0\n'
          + 'function init(args)\n'
          + `  for line in io.lines(${lstr(bodies.file)}) do\n`
          + `    if #line > 0 then bodies[#bodies + 1] = ${lstr(bodies.prefix || '')} .. line end\n  end\n`
          + '  at = ((tid or 0) * 5003) % #bodies\n'
          + '  math.randomseed(1000 + (tid or 0))\nend\n'
          + 'function request()\n  at = at % #bodies + 1\n'
          + '  return wrk.format(nil, nil, nil, bodies[at])\nend\n';
      } else if (delay !== undefined) {
        lua += 'function init(args)\n  math.randomseed(1000 + (tid or 0))\nend\n';
      }
      if (delay !== undefined) {
        const base = Math.floor(delay);
        const frac = delay - base;
        lua += `function delay()\n  if math.random() < ${frac.toFixed(4)} then return ${base + 1} end\n  return ${base}\nend\n`;
      }
      lua += 'done = function(summary, latency, requests)\n'
        + '  io.write(string.format("STATUS non2xx=%d\\n", summary.errors.status))\nend\n';
      writeFileSync(f, lua);
      return f;
    },
    async run(name, url, script, opts = {}) {
      const conns = opts.connections || connections;
      const secs = opts.duration || duration;
      const args = ['-t', String(Math.min(threads, conns)), '-c', String(conns), '-d', `${secs}s`, '--latency'];
      if (script) args.push('-s', script);
      args.push(url);
      const out = await new Promise((resolve, reject) => {
        const p = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
        live.add(p);
        let so = '';
        let se = '';
        const timer = setTimeout(() => p.kill('SIGKILL'), (secs + 30) * 1000);
        p.stdout.on('data', (c) => { so += c; });
        p.stderr.on('data', (c) => { se += c; });
        p.on('error', (err) => { clearTimeout(timer); reject(err); });
        p.on('close', (code, sig) => {
          clearTimeout(timer);
          live.delete(p);
          if (code !== 0) reject(new Error(`wrk ${args.join(' ')}: ${code ?? sig} ${se}`));
          else resolve(so);
        });
      });
      const m = (re) => (out.match(re) || [])[1];
      const row = {
        name,
        rps: m(/Requests\/sec:\s+([\d.]+)/),
        p50: m(/50%\s+([\d.]+\w+)/),
        p99: m(/99%\s+([\d.]+\w+)/),
        non2xx: m(/Non-2xx or 3xx responses:\s+(\d+)/) || '0',
        requests: Number(m(/(\d+) requests in/) || 0),
        socketErrors: m(/Socket errors:\s+([^\n]+)/) || null,
        connections: conns,
        out,
      };
      if (!row.rps) throw new Error(`wrk ${name}: no report\n${out}`);
      row.p50ms = toMs(row.p50);
      row.p99ms = toMs(row.p99);
      return row;
    },
    table(rows) {
      return ['| endpoint | req/s | p50 | p99 | non-2xx |', '|---|---|---|---|---|',
        ...rows.map((r) => `| ${r.name} | ${r.rps} | ${r.p50} | ${r.p99} | ${r.non2xx} |`)].join('\n');
    },
    cleanup() { rmSync(dir, { recursive: true, force: true }); },
  };
}

export default wrkRunner;
