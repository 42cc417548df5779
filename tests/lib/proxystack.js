// The proxied resource `ghproxy` (docs/architecture.md flow H) for startVaultStack: another
// client of the downstream provider, token_release = never, base_url = an upstream API
// (usually tests/lib/recorder.js), scopes issues:read / issues:write and two routed actions:
//   list_issues   GET  /repos/{owner}/{repo}/issues   approval none
//   create_issue  POST /repos/{owner}/{repo}/issues   approval required
//
//   startVaultStack({
//     extraDsClients: (url) => [ghproxyClient(url)],
//     config: ({ providerIssuer }) => ({ ...ghproxyConfig({ providerIssuer, baseUrl: rec.url }), ... }),
//   });
//
// or all of it, with a recorder as the upstream:
//   const p = await startProxyStack({
//     recorder = {},        // startRecorder's options
//     introspect = true,    // the recorder takes only a token the provider's introspection
//                           // calls active for DOWNSTREAM.resource (rec.introspectWith)
//     config,               // ({ providerIssuer, ghproxy }) -> more sections, after (and over)
//                           // ghproxy's; ghproxy: ghproxyConfig's, to extend
//     ...opts               // more startVaultStack options (accessTokenTTL 60 unless given)
//   });
//   p.v, p.rec; await p.stop()
import { startVaultStack, PROVIDER_SECRETS } from './vaultstack.js';
import { startRecorder } from './recorder.js';
import { DOWNSTREAM } from './fixtures.js';

export const GHPROXY_SECRET = 'consentd-ghproxy-provider-secret';

// consentd's client at the downstream provider for ghproxy (url: consentd's URL).
export function ghproxyClient(url) {
  return {
    client_id: 'consentd-ghproxy', client_secret: GHPROXY_SECRET,
    redirect_uris: [`${url}/oauth/callback/ghproxy`],
    grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  };
}

// consentd's configuration sections for ghproxy.
export function ghproxyConfig({ providerIssuer, baseUrl }) {
  return {
    'resource.ghproxy': { name: 'GitHub via proxy', provider_issuer: providerIssuer,
      provider_client_id: 'consentd-ghproxy', provider_client_secret: GHPROXY_SECRET,
      refresh_margin: 2, token_release: 'never', base_url: baseUrl, max_consent: 2592000 },
    'scope.ghproxy.issues:read': { description: 'Read issues', provider: 'repo issues:read' },
    'scope.ghproxy.issues:write': { description: 'Open and edit issues', provider: 'repo issues:write' },
    'action.ghproxy.list_issues': { description: 'List issues', scope: 'issues:read', approval: 'none',
      route: 'GET /repos/{owner}/{repo}/issues' },
    'action.ghproxy.create_issue': { description: 'Open an issue', scope: 'issues:write', approval: 'required',
      route: 'POST /repos/{owner}/{repo}/issues' },
  };
}

export async function startProxyStack({ recorder = {}, introspect = true, config = () => ({}), ...opts } = {}) {
  const rec = await startRecorder(recorder);
  let v;
  try {
    v = await startVaultStack({
      accessTokenTTL: 60,
      extraDsClients: (url) => [ghproxyClient(url)],
      config: ({ providerIssuer }) => {
        const ghproxy = ghproxyConfig({ providerIssuer, baseUrl: rec.url });
        return { ...ghproxy, ...config({ providerIssuer, ghproxy }) };
      },
      ...opts,
    });
  } catch (e) {
    await rec.stop();
    throw e;
  }
  if (introspect) {
    rec.introspectWith({
      introspectionEndpoint: v.dsMeta.introspection_endpoint, clientId: 'resource-server',
      clientSecret: PROVIDER_SECRETS.rs, audience: DOWNSTREAM.resource,
    });
  }
  return {
    v, rec,
    async stop() {
      try { await v.stop(); } finally { await rec.stop(); }
    },
  };
}
