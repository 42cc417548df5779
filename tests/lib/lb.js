// A round-robin HTTP load balancer on 127.0.0.1, in front of consentd nodes
// that share one PostgreSQL database: request n goes to node n mod N, so any
// two requests in a row reach different nodes, and every flow of a test
// crosses nodes at each step (login and callback, consent page and exchange,
// approval and redemption, provider connect and callback).  No stickiness.
// Like a real balancer it appends the client's address to X-Forwarded-For, and
// it reaches the nodes from an address of its own, PROXY_ADDRESS, which the
// nodes list in [server] trusted_proxies (tests/lib/consentd.js): each node
// sees the test's client addresses (localAddress), not the balancer's.
//
//   const lb = await startLb({ port, backends: [portA, portB] });
//   lb.counts      // requests sent to each backend
//   lb.pin(i)      // send everything to backend i (null: round robin again)
//   await lb.stop()
import http from 'node:http';

export const PROXY_ADDRESS = '127.0.0.254';

export async function startLb({ port, backends, host = '127.0.0.1' }) {
  const counts = backends.map(() => 0);
  let next = 0;
  let pinned = null;
  const down = new Set();
  const sockets = new Set();
  const server = http.createServer((req, res) => {
    let i = pinned ?? next++ % backends.length;
    for (let k = 0; k < backends.length && down.has(i); k++) i = (i + 1) % backends.length;
    counts[i]++;
    const xff = [req.headers['x-forwarded-for'], req.socket.remoteAddress].filter(Boolean).join(', ');
    const up = http.request({
      host, port: backends[i], method: req.method, path: req.url, localAddress: PROXY_ADDRESS,
      headers: { ...req.headers, connection: 'close', 'x-forwarded-for': xff },
    }, (r) => {
      res.writeHead(r.statusCode, r.rawHeaders);
      r.pipe(res);
    });
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end('bad gateway');
    });
    req.pipe(up);
  });
  server.keepAliveTimeout = 1000;
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  return {
    port,
    url: `http://${host}:${port}`,
    counts,
    pin(i) { pinned = i; },
    // A node taken out (killed): the balancer skips it, as a health check would.
    markDown(i) { down.add(i); },
    markUp(i) { down.delete(i); },
    async stop() {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => { server.close(() => resolve()); });
    },
  };
}

export default startLb;
