// wrk.js -- runs wrk and reads its report, for bench/bench.js and bench/bench_proxy.js.
//
//   const w = wrkRunner({ threads = 2, connections = 16, duration = 10 });
//   const f = w.script({ method, body, headers })   // a Lua file setting them (and printing
//                                                   //   the non-2xx/3xx count); in a temp dir
//   const row = await w.run(name, url, f?)          // -> { name, rps, p50, p99, non2xx, requests,
//                                                   //      socketErrors, out }
//   w.table(rows)                                   // the markdown table, as a string
//   w.cleanup()                                     // removes the temp dir
//
// wrk runs asynchronously (never spawnSync): a server in the calling process (the recorder)
// keeps serving while wrk runs.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function wrkRunner({ threads = 2, connections = 16, duration = 10 } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'consentd-bench-'));
  let n = 0;
  return {
    threads, connections, duration,
    script({ method, body, headers = {} } = {}) {
      n += 1;
      const f = join(dir, `s${n}.lua`);
      let lua = '';
      if (method) lua += `wrk.method = ${JSON.stringify(method)}\n`;
      if (body !== undefined) lua += `wrk.body = ${JSON.stringify(body)}\n`;
      for (const [k, v] of Object.entries(headers)) lua += `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}\n`;
      lua += 'done = function(summary, latency, requests)\n'
        + '  io.write(string.format("STATUS non2xx=%d\\n", summary.errors.status))\nend\n';
      writeFileSync(f, lua);
      return f;
    },
    async run(name, url, script) {
      const args = ['-t', String(threads), '-c', String(connections), '-d', `${duration}s`, '--latency'];
      if (script) args.push('-s', script);
      args.push(url);
      const out = await new Promise((resolve, reject) => {
        const p = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
        let so = '';
        let se = '';
        const timer = setTimeout(() => p.kill('SIGKILL'), (duration + 30) * 1000);
        p.stdout.on('data', (c) => { so += c; });
        p.stderr.on('data', (c) => { se += c; });
        p.on('error', (err) => { clearTimeout(timer); reject(err); });
        p.on('close', (code, sig) => {
          clearTimeout(timer);
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
        out,
      };
      if (!row.rps) throw new Error(`wrk ${name}: no report\n${out}`);
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
