// Shared configuration for tests of consent and grants: agents, resources and
// scopes as an operator would write them (docs/reference.md "Configuration").
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

// The token vault (flow D): the downstream provider's resource and scopes (tests/idp/devidp.js
// downstream mode) and consentd's resources `github` and `gitlab` at that provider (one client
// and redirect URI each), with agents coder and butler allowed their issue scopes.
export const DOWNSTREAM = {
  resource: 'https://api.downstream.test',
  scopes: ['repo', 'issues:read', 'issues:write'],
};

export function vaultConfig({
  providerIssuer, refreshMargin = 2, githubSecret = 'consentd-github-provider-secret',
  gitlabSecret = 'consentd-gitlab-provider-secret', extra = {},
}) {
  const allow = 'github:issues:read github:issues:write github:metadata gitlab:issues:read gitlab:issues:write';
  return consentConfig({
    'resource.github': { name: 'GitHub', provider_issuer: providerIssuer, provider_client_id: 'consentd-github',
      provider_client_secret: githubSecret, refresh_margin: refreshMargin, token_release: 'gateway',
      max_consent: 2592000 },
    'scope.github.issues:read': { description: 'Read issues', provider: 'repo issues:read' },
    'scope.github.issues:write': { description: 'Open and edit issues', provider: 'repo issues:write' },
    'scope.github.metadata': { description: 'See repository metadata', provider: 'repo' },
    'action.github.list_issues': { description: 'List issues', scope: 'issues:read', approval: 'none' },
    'action.github.close_issue': { description: 'Close an issue', scope: 'issues:write', approval: 'none' },
    'resource.gitlab': { name: 'GitLab', provider_issuer: providerIssuer, provider_client_id: 'consentd-gitlab',
      provider_client_secret: gitlabSecret, refresh_margin: refreshMargin, token_release: 'gateway',
      max_consent: 2592000 },
    'scope.gitlab.issues:read': { description: 'Read issues', provider: 'repo issues:read' },
    'scope.gitlab.issues:write': { description: 'Open and edit issues', provider: 'repo issues:write' },
    'action.gitlab.list_issues': { description: 'List issues', scope: 'issues:read', approval: 'none' },
    'agent.coder': { name: 'Coding assistant', description: 'Reads and files issues for you',
      allow: `notes:read notes:write wiki:read ${allow}`, offline: 'false' },
    'agent.butler': { name: 'Butler', description: 'Acts while you are away',
      allow: `notes:read notes:write ${allow}`, offline: 'true' },
    ...extra,
  });
}

// Standing rules (issue #32) at the vault's resource github: create_issue offers match rules
// with repo never left open, add_comment exact rules for at most an hour; the gateway holds
// the released token to the call (approval_enforced_by = gateway).
export const STANDING_ACTIONS = {
  'action.github.create_issue': {
    description: 'Open an issue', scope: 'issues:write', approval: 'required',
    standing: 'match', standing_max: '28800', standing_fixed: 'repo',
    approval_enforced_by: 'gateway',
  },
  'action.github.add_comment': {
    description: 'Comment on an issue', scope: 'issues:write', approval: 'required',
    standing: 'exact', standing_max: '3600',
    approval_enforced_by: 'gateway',
  },
};
