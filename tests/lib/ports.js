// Free TCP ports on loopback, and starting a server on one when another process may take it.
//   getFreePort(host = '127.0.0.1') -> Promise<number>
//     Listens on port 0, reads the port the kernel chose, closes.  Another process may take
//     the port before you bind it: prefer letting a server bind port 0 itself and report its
//     port, as tests/idp/devidp.js does, where you can; else start it through withFreePort.
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
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';

export const PORT_TRIES = 5;

export function getFreePort(host = '127.0.0.1') {
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
