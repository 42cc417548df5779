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
