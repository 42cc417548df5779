// A development IdP and a consentd that trusts it, wired for one test file:
// consentd's port is chosen first so the IdP can register its redirect URIs (and when
// another process takes that port before consentd binds it, both start again on another:
// tests/lib/ports.js withFreePort).
//
//   const s = await startStack({ config: { session: { idle_timeout: 2 } }, env });  // env: consentd's
//   s.idp (tests/lib/idp.js handle), s.c (tests/lib/consentd.js handle), s.url
//   await s.stop()   // both, by pid; asserts consentd exited 0 (sanitizers clean)
import assert from 'node:assert/strict';
import { startIdp, DEFAULT_CLIENTS } from './idp.js';
import { startConsentd } from './consentd.js';
import { withFreePort } from './ports.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });

export async function waitReady(url, ms = 60000) {
  for (let t = 0; t < ms; t += 100) {
    if ((await fetch(`${url}/readyz`)).status === 200) return;
    await sleep(100);
  }
  throw new Error(`consentd at ${url} never became ready`);
}

// A consentd handle ready: every node on its own port (one node: its URL).  With many
// nodes behind the test balancer, the balancer's /readyz is one node's answer, and a node
// that has not discovered the IdP yet would answer the next step 503.
export async function waitNodesReady(c, ms = 60000) {
  for (const n of c.nodes || []) await waitReady(`http://127.0.0.1:${n.port}`, ms);
}

export function startStack(opts = {}) {
  return withFreePort((port) => startStackOn(port, opts));
}

async function startStackOn(port, { config = {}, clients, idpOptions = {}, env, nodes } = {}) {
  const url = `http://127.0.0.1:${port}`;
  const cl = (clients || DEFAULT_CLIENTS).map((x) => (x.client_id === 'consentd'
    ? { ...x, redirect_uris: [`${url}/callback`], post_logout_redirect_uris: [`${url}/`] } : x));
  const idp = await startIdp({ clients: cl, ...idpOptions });
  let c;
  try {
    c = await startConsentd({ port, env, nodes, config: { ...config, oidc: { issuer: idp.issuer, ...(config.oidc || {}) } } });
    await waitNodesReady(c);
  } catch (e) {
    await c?.stop();
    await idp.stop();
    throw e;
  }
  return {
    idp, c, url,
    async stop() {
      const st = await c.stop();
      await idp.stop();
      assert.equal(st.code, 0, `consentd exit: ${c.proc.stderr.slice(-2000)}`);
    },
  };
}
