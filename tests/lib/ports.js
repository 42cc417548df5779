// Free TCP ports on loopback, and starting a server on one when another process may take it.
//   getFreePort(host = '127.0.0.1') -> Promise<number>
//     A port no process listens on, and that no test process (of any file running now) has
//     been handed before: each is recorded in a directory shared by the test processes
//     (RESERVED, a file per port naming its pid; a dead pid's record is taken over), and
//     it is never handed out twice while that process lives.  The ports come from below
//     the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), where the
//     kernel never puts a server that binds port 0 (the IdPs, the recorders) nor the local
//     end of an outgoing connection: a port a test holds free on purpose (a receiver that
//     is down) stays free.  Without such a range: the kernel's choice of port 0.
//     Binding it is still the caller's: start a server on it through withFreePort.
//   withFreePort(start, { tries = PORT_TRIES, pick = getFreePort }) -> what start(port) resolved to
//     start(port) on a fresh free port, and again on another when it throws a PortTakenError
//     for that port (the port was taken between the pick and the bind), up to tries times.
//     start cleans up after itself when it throws.  pick() chooses each port (a test of
//     this file hands out a taken one first).
//   new PortTakenError(port, detail)    // what a start throws when port was not its own
//   portTaken(err, port) -> boolean     // err is a PortTakenError for port, or a Node
//                                       //   server's EADDRINUSE on it
//   listenersOn(port, pid) -> { ours, others }, or null without Linux's /proc/net/tcp
//     the listening TCP sockets on port (any address, IPv4 and IPv6), split into those of
//     process pid and the rest (Linux /proc).  consentd listens with SO_REUSEPORT
//     (libmicrohttpd's LISTENING_ADDRESS_REUSE), so a second consentd on a taken port does
//     not fail to bind: both listen and the kernel shares the connections between them.
//     A start that sees others > 0 has to give the port up (tests/lib/consentd.js).
import { createServer } from 'node:net';
import { readFileSync, readdirSync, readlinkSync, writeFileSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const PORT_TRIES = 5;

export const RESERVED = join(tmpdir(), `consentd-test-ports-${process.getuid?.() ?? 0}`);
const mine = new Set();              // the records this process made, removed at its exit

// [low, high] below the ephemeral range, or null.
function pickRange() {
  let low = 32768;
  try { low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]); } catch { /* default */ }
  return low - 1 - 10000 >= 2000 ? [10000, low - 1] : null;
}
const RANGE = pickRange();

function alive(pid) {
  try { process.kill(pid, 0); return true; } catch (e) { return e.code === 'EPERM'; }
}

// Records port for this process; false when a live process (this one too) holds it.
function reserve(port) {
  const f = join(RESERVED, String(port));
  for (let i = 0; i < 2; i++) {
    try {
      writeFileSync(f, String(process.pid), { flag: 'wx' });
      if (mine.size === 0) process.on('exit', () => { for (const q of mine) rmSync(join(RESERVED, String(q)), { force: true }); });
      mine.add(port);
      return true;
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
    }
    let pid = 0;
    try { pid = Number(readFileSync(f, 'utf8')); } catch { /* just removed */ }
    if (pid && alive(pid)) return false;
    rmSync(f, { force: true });      // a dead process's record (a race loser finds EEXIST again)
  }
  return false;
}

function bindable(port, host) {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen({ port, host, exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

function kernelPort(host) {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen({ port: 0, host, exclusive: true }, () => {
      const { port } = srv.address();
      srv.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}

export async function getFreePort(host = '127.0.0.1') {
  if (RANGE) {
    mkdirSync(RESERVED, { recursive: true, mode: 0o700 });
    const [low, high] = RANGE;
    for (let i = 0; i < 200; i++) {
      const port = low + Math.floor(Math.random() * (high - low + 1));
      if (!reserve(port)) continue;
      if (await bindable(port, host)) return port;
    }
  }
  for (;;) {
    const port = await kernelPort(host);
    if (!RANGE || reserve(port)) return port;
  }
}

export class PortTakenError extends Error {
  constructor(port, detail) {
    super(`port ${port} was taken by another process: ${detail}`);
    this.name = 'PortTakenError';
    this.port = port;
  }
}

export function portTaken(err, port) {
  if (err instanceof PortTakenError) return err.port === port;
  return err?.code === 'EADDRINUSE' && err.port === port;
}

export async function withFreePort(start, { tries = PORT_TRIES, pick = getFreePort } = {}) {
  for (let i = 1; ; i++) {
    const port = await pick();
    try {
      return await start(port);
    } catch (e) {
      if (i >= tries || !portTaken(e, port)) throw e;
      if (process.env.TEST_VERBOSE) process.stderr.write(`[ports] ${e.message.split('\n')[0]}: again on another\n`);
    }
  }
}

function listeningInodes(port) {
  const inodes = new Set();
  let read = 0;
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text;
    try { text = readFileSync(f, 'utf8'); read++; } catch { continue; }
    for (const line of text.split('\n').slice(1)) {
      const col = line.trim().split(/\s+/);
      if (col.length < 10 || col[3] !== '0A') continue;            // 0A: LISTEN
      if (parseInt(col[1].split(':')[1], 16) === port) inodes.add(col[9]);
    }
  }
  return read ? inodes : null;
}

export function listenersOn(port, pid) {
  const inodes = listeningInodes(port);
  if (!inodes) return null;
  let ours = 0;
  let fds = [];
  try { fds = readdirSync(`/proc/${pid}/fd`); } catch { /* exited */ }
  for (const fd of fds) {
    let target;
    try { target = readlinkSync(`/proc/${pid}/fd/${fd}`); } catch { continue; }
    const m = /^socket:\[(\d+)\]$/.exec(target);
    if (m && inodes.delete(m[1])) ours++;
  }
  return { ours, others: inodes.size };
}

export default getFreePort;
