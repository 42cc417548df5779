// Free TCP ports on loopback.
//   getFreePort(host = '127.0.0.1') -> Promise<number>
// Listens on port 0, reads the port the kernel chose, closes. (Another process may take the
// port before you bind it; prefer letting a server bind port 0 itself and report its port,
// as tests/idp/devidp.js does, where you can.)
import { createServer } from 'node:net';

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

export default getFreePort;
