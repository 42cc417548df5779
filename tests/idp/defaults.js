// Default users and clients of the development IdP (tests/idp/devidp.js), used when its config
// file leaves `users` / `clients` out. Plain data: importing this loads no provider code.
// Passwords here are test fixtures for a loopback-only development IdP, never real secrets.

export const DEFAULT_USERS = {
  alice: { password: 'alice-password', name: 'Alice Example', email: 'alice@example.test', groups: [] },
  bob: { password: 'bob-password', name: 'Bob Example', email: 'bob@example.test', groups: [] },
  carol: { password: 'carol-password', name: 'Carol Example', email: 'carol@example.test', groups: [] },
  admin: { password: 'admin-password', name: 'Admin Example', email: 'admin@example.test', groups: ['consent-admins'] },
};

export const DEFAULT_CLIENTS = [
  {
    client_id: 'consentd',
    client_secret: 'consentd-dev-secret',
    redirect_uris: ['http://127.0.0.1:8080/callback'],
    post_logout_redirect_uris: ['http://127.0.0.1:8080/'],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
    id_token_signed_response_alg: 'ES256',
    require_auth_time: true, // ID tokens carry auth_time (admin pages need a recent login)
  },
  {
    client_id: 'gateway-app',
    client_secret: 'gateway-app-dev-secret',
    redirect_uris: ['http://127.0.0.1:43999/gateway-callback'],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
    id_token_signed_response_alg: 'RS256',
  },
];

export default { DEFAULT_USERS, DEFAULT_CLIENTS };
