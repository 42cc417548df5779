// Realistic data for pages that list many things (the admin pages): consents made the way
// people make them (the gateway asks, the person approves on the consent page over HTTP),
// with subjects as long as real IdPs issue them.
//
//   USERS_WITH_LONG_SUBJECTS   // DEFAULT_USERS plus a Keycloak-style UUID subject and an
//                              // Entra-style 43-character pairwise-looking subject
//   await approveConsent({ url, issuer, gw, jar, user, agentId, audience, scope })
//     -> { grant, cid }        // one live consent; jar must be signed in to consentd as user
import assert from 'node:assert/strict';
import { DEFAULT_USERS } from './idp.js';
import { getIdToken } from './idplogin.js';
import { req, postForm } from './weblogin.js';
import { GATEWAY_APP } from './fixtures.js';

export const UUID_SUBJECT = 'f47ac10b-58cc-4372-a567-0e02b2c3d479';
export const ENTRA_SUBJECT = 'AAAAAAAAAAAAAAAAAAAAAIkzqFVrSaSaFHy782bbtaQ';

export const USERS_WITH_LONG_SUBJECTS = {
  ...DEFAULT_USERS,
  [UUID_SUBJECT]: { password: `${UUID_SUBJECT}-password`, name: 'Dana Keycloak', email: 'dana@example.test', groups: [] },
  [ENTRA_SUBJECT]: { password: `${ENTRA_SUBJECT}-password`, name: 'Erin Entra', email: 'erin@example.test', groups: [] },
};

export async function approveConsent({
  url, issuer, gw, jar, user, agentId, audience, scope,
}) {
  const subjectToken = (await getIdToken({
    issuer, ...GATEWAY_APP, user, password: `${user}-password`,
  })).id_token;
  const ask = { subjectToken, agentId, audience, scope };
  const first = await gw.exchange(ask);
  assert.equal(first.body?.error, 'consent_required', first.text);
  const page = await req(jar, first.body.consent_uri);
  const html = await page.text();
  assert.equal(page.status, 200, `${page.headers.get('location')} ${html.slice(0, 300)}`);
  const form = postForm(html);
  const fields = { ...form.fields, decision: 'approve' };
  for (const m of html.matchAll(/<input type="checkbox" name="(s\d+)"/g)) fields[m[1]] = 'on';
  fields.duration = (html.match(/<option value="(\d+)"/) || [])[1];
  const done = await req(jar, first.body.consent_uri, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: new URL(url).origin },
    body: new URLSearchParams(fields).toString(),
  });
  assert.equal(done.status, 200, (await done.text()).slice(0, 300));
  const g = await gw.exchange(ask);
  assert.equal(g.status, 200, g.text);
  return { grant: g.body.access_token, cid: (await gw.verify(g.body.access_token)).payload.cid };
}
