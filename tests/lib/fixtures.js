// Shared configuration for tests of consent and grants: agents, resources and
// scopes as an operator would write them (ARCHITECTURE.md "Configuration").
export const GATEWAY_APP = {
  clientId: 'gateway-app',
  clientSecret: 'gateway-app-dev-secret',
  redirectUri: 'http://127.0.0.1:43999/gateway-callback',
};

export function consentConfig(extra = {}) {
  return {
    consent: { interval: 1, request_ttl: 600, deny_cooldown: 3600, max_pending_per_user: 5 },
    'resource.notes': { name: 'Team notes', max_consent: 2592000 },
    'scope.notes.read': { description: 'Read your notes' },
    'scope.notes.write': { description: 'Create and edit notes' },
    'resource.wiki': { name: 'Wiki', uri: 'https://wiki.example.test/api', max_consent: 86400 },
    'scope.wiki.read': { description: 'Read wiki pages' },
    'scope.wiki.admin': { description: 'Administer the wiki' },
    'agent.coder': { name: 'Coding assistant', description: 'Reads and writes notes for you',
      allow: 'notes:read notes:write wiki:read', offline: 'false' },
    'agent.butler': { name: 'Butler', description: 'Acts while you are away',
      allow: 'notes:read notes:write', offline: 'true' },
    ...extra,
  };
}
