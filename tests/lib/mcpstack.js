// consentd as the MCP gateway (issue 31) in front of a real upstream MCP server: the set-up the
// gateway's integration files share.
//
//   const g = await startMcpGateway({
//     upstream = startMcpUpstream, // its starter: tests/lib/mcp-upstream.mjs, or
//                                  // startMcpUpstream2025 (tests/lib/mcp-upstream-2025.mjs)
//     accept,                      // (token) -> bool: the upstream's own condition, checked first
//     baseUrl,                     // [resource.ghproxy] base_url (default: the upstream's origin)
//     redirect = MCP_REDIRECT,     // [client.mcptest]'s redirect URI
//     tracker = {},                // more [mcp.tracker] keys
//     config,                      // ({ providerIssuer, ghproxy, up }) -> more sections, after
//                                  // (and over) the ones above; ghproxy: ghproxyConfig's
//     ...opts                      // more startVaultStack options
//   });
//   g.v, g.up                      // the stack (tests/lib/vaultstack.js) and the upstream
//   await g.signIn(user, { resource, scope })  -> { token, cid, jar }
//   g.signedIn(url, user)          // the person's signed-in cookie jar (signedInJars)
//   await g.stop()
//
// startVaultStack runs the real binary, the login IdP and the downstream provider "GitHub";
// [resource.ghproxy] (tests/lib/proxystack.js) offers list_issues (approval none) and
// create_issue (approval required); the MCP client is [client.mcptest] (MCP_CLIENT); and
// [mcp.tracker] stands for ghproxy at the upstream, which accepts only a token the
// provider's introspection calls active for DOWNSTREAM.resource.
//
//   await decideOverHttp({ v, jar, uri, decision = 'approve', fields = {} })
//     -> the decision's answer page (text): the person opens an approval (or consent) link,
//     which must answer 200, and posts the decision with the page's CSRF token (fields: more
//     form fields), which must answer 200 too.
//
//   MCP_META_2026                  // a 2026-07-28 request's _meta: the client declares URL elicitation
//   await post2026(endpoint, token, method, params = {}, { id = 1, headers = {} })
//     -> { status, headers, body, text }: a 2026-07-28 JSON-RPC request by hand (with
//     MCP_META_2026 and the Mcp-Method / Mcp-Name headers); body: the JSON answer, or the
//     last data: event of an event stream.
//   rpcBody(text)                  // that body of an answer's text, or null
import assert from 'node:assert/strict';
import { startVaultStack, signedInJars, DOWNSTREAM } from './vaultstack.js';
import { ghproxyClient, ghproxyConfig } from './proxystack.js';
import { vaultSignIn, decodeJwt } from './mcp.js';
import { req, postForm } from './weblogin.js';
import { startMcpUpstream } from './mcp-upstream.mjs';

export const MCP_CLIENT = 'mcp-test';
export const MCP_REDIRECT = 'http://127.0.0.1:33418/callback';

export async function startMcpGateway({
  upstream = startMcpUpstream, accept = null, baseUrl = null, redirect = MCP_REDIRECT,
  tracker = {}, config = () => ({}), ...opts
} = {}) {
  let check = async () => false;
  const up = await upstream({ check: async (t) => (accept === null || accept(t)) && check(t) });
  let v;
  try {
    v = await startVaultStack({
      accessTokenTTL: 300,
      extraDsClients: (url) => [ghproxyClient(url)],
      config: ({ providerIssuer }) => {
        const ghproxy = ghproxyConfig({ providerIssuer, baseUrl: baseUrl ?? up.url.replace(/\/mcp$/, '') });
        return {
          ...ghproxy,
          'client.mcptest': { client_id: MCP_CLIENT, redirect_uris: redirect },
          'mcp.tracker': { resource: 'ghproxy', upstream: up.url, ...tracker },
          ...config({ providerIssuer, ghproxy, up }),
        };
      },
      ...opts,
    });
  } catch (e) {
    await up.stop();
    throw e;
  }
  check = async (token) => {
    const r = await v.dsIntrospect(token);
    return r.active === true && r.aud === DOWNSTREAM.resource;
  };
  const signedIn = signedInJars();
  return {
    v, up, signedIn,
    async signIn(user, { resource = `${v.url}/mcp/tracker`, scope = 'issues:read issues:write' } = {}) {
      const jar = await signedIn(v.url, user);
      const t = await vaultSignIn({ v, jar, user, clientId: MCP_CLIENT, redirectUri: redirect, resource, scope });
      return { token: t.access_token, cid: decodeJwt(t.access_token).cid, jar };
    },
    async stop() {
      try { await v.stop(); } finally { await up.stop(); }
    },
  };
}

export async function decideOverHttp({ v, jar, uri, decision = 'approve', fields = {} }) {
  const page = await req(jar, uri);
  const html = await page.text();
  assert.equal(page.status, 200, `approval page: ${html.slice(0, 300)}`);
  const res = await req(jar, uri, {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: v.url },
    body: new URLSearchParams({ csrf: postForm(html).fields.csrf, decision, ...fields }).toString(),
  });
  const done = await res.text();
  assert.equal(res.status, 200, `decision: ${done.slice(0, 300)}`);
  return { html, done };
}

export const MCP_META_2026 = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } } };

export function rpcBody(text) {
  try { return JSON.parse(text); } catch {
    const data = text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).filter(Boolean);
    return data.length ? JSON.parse(data[data.length - 1]) : null;
  }
}

export async function post2026(endpoint, token, method, params = {}, { id = 1, headers = {} } = {}) {
  const res = await fetch(endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
      authorization: `Bearer ${token}`, 'mcp-protocol-version': '2026-07-28', 'mcp-method': method,
      ...(params.name ? { 'mcp-name': params.name } : {}), ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: MCP_META_2026 } }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: rpcBody(text), text };
}
