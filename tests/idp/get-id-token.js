#!/usr/bin/env node
// Print a user's ID token from an OpenID Provider (made for tests/idp/devidp.js), for using the
// gateway side of consentd by hand:
//
//   node tests/idp/get-id-token.js --issuer http://127.0.0.1:P --client gateway-app \
//     --secret S --redirect URI --user alice --password P [--scope "openid profile email groups"]
//     [--json]
//
// Defaults: --client gateway-app, --secret/--redirect from tests/idp/defaults.js for that client,
// --password "<user>-password" (devidp's default users). Prints the ID token alone on stdout
// (--json: the whole result: id_token, access_token, decoded claims ...). Exit 1 with a message
// on stderr when anything fails.
import { parseArgs } from 'node:util';
import { getIdToken } from '../lib/idplogin.js';
import { DEFAULT_CLIENTS, DEFAULT_USERS } from './defaults.js';

const usage = 'usage: node tests/idp/get-id-token.js --issuer URL [--client ID] [--secret S] [--redirect URI] --user NAME [--password P] [--scope S] [--json]';

async function main() {
  const { values: v } = parseArgs({
    options: {
      issuer: { type: 'string' },
      client: { type: 'string', default: 'gateway-app' },
      secret: { type: 'string' },
      redirect: { type: 'string' },
      user: { type: 'string' },
      password: { type: 'string' },
      scope: { type: 'string', default: 'openid profile email groups' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (v.help) { console.log(usage); return; }
  if (!v.issuer || !v.user) throw new Error(usage);
  const known = DEFAULT_CLIENTS.find((c) => c.client_id === v.client);
  const secret = v.secret ?? known?.client_secret;
  const redirect = v.redirect ?? known?.redirect_uris?.[0];
  const password = v.password ?? DEFAULT_USERS[v.user]?.password;
  if (!secret || !redirect || password === undefined) throw new Error(`--secret, --redirect and --password are needed\n${usage}`);
  const r = await getIdToken({
    issuer: v.issuer.replace(/\/$/, ''),
    clientId: v.client,
    clientSecret: secret,
    redirectUri: redirect,
    user: v.user,
    password,
    scope: v.scope,
  });
  process.stdout.write(v.json ? `${JSON.stringify(r, null, 2)}\n` : `${r.id_token}\n`);
}

main().catch((err) => {
  console.error(`get-id-token: ${err.message}`);
  process.exit(1);
});
