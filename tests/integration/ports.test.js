// The test harness's free ports (tests/lib/ports.js, tests/lib/consentd.js): a port picked
// for consentd may be taken by another process before consentd binds it (a file beside
// this one picks ports too).  Then the start tries another port, and never runs a test
// against a server that is not the one it started:
//   - a Node server on the port (no SO_REUSEPORT): consentd cannot listen there;
//   - another consentd on the port: both would listen (libmicrohttpd sets SO_REUSEPORT)
//     and the kernel would share the connections between them.
// pickPort hands out the taken port first, as the race would.
// And getFreePort itself: ports from below the kernel's ephemeral range (where no server
// binding port 0 and no outgoing connection lands), never handed to two live processes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { startConsentd } from '../lib/consentd.js';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { getFreePort, listenersOn, PortTakenError, RESERVED } from '../lib/ports.js';

// The error of a start that must fail (a consentd that started anyway is stopped first).
async function refused(opts) {
  let c;
  try {
    c = await startConsentd(opts);
  } catch (e) {
    return e;
  }
  await c.stop();
  assert.fail(`consentd started on port ${c.port}, which another process holds`);
  return null;
}

// Picks `first`, then free ports; remembers what it handed out.
function picker(first) {
  const given = [];
  return {
    given,
    async pick() {
      const p = given.length === 0 ? first : await getFreePort();
      given.push(p);
      return p;
    },
  };
}

test('a port a Node server holds: pinned, the start fails naming it; picked, consentd starts on another', async () => {
  const other = createServer((rq, rs) => { rs.writeHead(200).end('not consentd'); });
  const port = await getFreePort();
  await new Promise((resolve, reject) => { other.once('error', reject); other.listen(port, '127.0.0.1', resolve); });
  let c;
  try {
    const e = await refused({ port });
    assert.ok(e instanceof PortTakenError, e.message);
    assert.equal(e.port, port);
    assert.match(e.message, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}`));
    const p = picker(port);
    c = await startConsentd({ pickPort: p.pick });
    assert.equal(p.given.length, 2, `ports tried: ${p.given}`);
    assert.equal(p.given[0], port);
    assert.equal(c.port, p.given[1]);
    assert.equal(c.url, `http://127.0.0.1:${c.port}`);
    assert.deepEqual(listenersOn(c.port, c.proc.pid), { ours: 1, others: 0 });
    const h = await fetch(`${c.url}/healthz`);
    assert.equal(h.status, 200);
    // The Node server still has its port, and still answers there.
    assert.equal(await (await fetch(`http://127.0.0.1:${port}/`)).text(), 'not consentd');
  } finally {
    const st = await c?.stop();
    await new Promise((r) => { other.close(r); });
    if (st) assert.equal(st.code, 0, `consentd exit: ${c.proc.stderr.slice(-2000)}`);
  }
});

test('a port another consentd holds: the second gives it up instead of sharing it, and starts on another', async () => {
  const a = await startConsentd();
  let b;
  try {
    assert.deepEqual(listenersOn(a.port, a.proc.pid), { ours: 1, others: 0 });
    const e = await refused({ port: a.port });
    assert.ok(e instanceof PortTakenError, e.message);
    assert.equal(e.port, a.port);
    assert.match(e.message, /listens there beside 1 other socket/);
    const p = picker(a.port);
    b = await startConsentd({ pickPort: p.pick });
    assert.equal(p.given[0], a.port);
    assert.notEqual(b.port, a.port);
    // Each alone on its port: every connection to a's port reaches a.
    assert.deepEqual(listenersOn(a.port, a.proc.pid), { ours: 1, others: 0 });
    assert.deepEqual(listenersOn(b.port, b.proc.pid), { ours: 1, others: 0 });
    assert.equal(a.proc.exitStatus, null, 'the first consentd still runs');
  } finally {
    const sb = await b?.stop();
    const sa = await a.stop();
    assert.equal(sa.code, 0, `consentd exit: ${a.proc.stderr.slice(-2000)}`);
    if (sb) assert.equal(sb.code, 0, `consentd exit: ${b.proc.stderr.slice(-2000)}`);
  }
});

test('a port that stays taken: the start gives up after a bounded number of ports', async () => {
  const other = createServer();
  const port = await getFreePort();
  await new Promise((resolve, reject) => { other.once('error', reject); other.listen(port, '127.0.0.1', resolve); });
  let tries = 0;
  try {
    const e = await refused({ pickPort: async () => { tries++; return port; } });
    assert.ok(e instanceof PortTakenError, e.message);
    assert.equal(tries, 5);
  } finally {
    await new Promise((r) => { other.close(r); });
  }
});

test('getFreePort: below the ephemeral range, and no port handed to two test processes at once', async () => {
  const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
  const lib = new URL('../lib/ports.js', import.meta.url).href;
  // Three processes at once, 150 ports each; each prints its list once it has them all,
  // and holds them until told to exit (stdin closed).
  const script = `const { getFreePort } = await import(${JSON.stringify(lib)});
    const ps = []; for (let i = 0; i < 150; i++) ps.push(await getFreePort());
    process.stdout.write(JSON.stringify(ps) + '\\n');
    process.stdin.resume(); process.stdin.on('end', () => process.exit(0));`;
  const kids = [];
  const lists = await Promise.all([0, 1, 2].map(() => new Promise((resolve, reject) => {
    const k = execFile(process.execPath, ['--input-type=module', '-e', script], (err) => { if (err) reject(err); });
    kids.push(k);
    let out = '';
    k.stdout.on('data', (d) => { out += d; if (out.endsWith('\n')) resolve(JSON.parse(out)); });
  })));
  try {
    const all = lists.flat();
    assert.equal(all.length, 450);
    assert.equal(new Set(all).size, 450, 'no port handed out twice');
    for (const p of all) assert.ok(p >= 10000 && p < low, `port ${p} below the ephemeral range (from ${low})`);
    // Each is recorded under its process while that process lives.
    for (let i = 0; i < 3; i++) {
      for (const p of lists[i].slice(0, 5)) assert.equal(readFileSync(`${RESERVED}/${p}`, 'utf8'), String(kids[i].pid));
    }
  } finally {
    for (const k of kids) k.stdin.end();
  }
  // And given up when it exits.
  await Promise.all(kids.map((k) => new Promise((r) => { if (k.exitCode !== null) r(); else k.once('exit', r); })));
  for (const p of lists.flat().slice(0, 20)) {
    assert.throws(() => readFileSync(`${RESERVED}/${p}`), { code: 'ENOENT' });
  }
});
