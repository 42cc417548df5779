/* standing_pages.h -- the person's standing rules on their pages (issue #32):
 * the approval page's offer and the form it posts, the done page's words, and
 * /me's list of rules with POST /me/rules/{id}/end. */
#ifndef CS_STANDING_PAGES_H
#define CS_STANDING_PAGES_H
#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include "config.h"
#include "http.h"
#include "standing.h"
#include "store.h"

/* ctx "standing" for the approval page of call a (nothing when its action offers
 * no rules): action, match (bool), keys [{field, name, value, forced}],
 * durations [{seconds, label, selected}]. */
enum cs_err standing_pages_offer(const struct config *cfg, const struct standing_call *a,
    json_t *ctx) CS_MUST_CHECK;
/* ctx "rule" for the done page: exact, fixed, until, max_uses, has_max_uses. */
enum cs_err standing_pages_done(const struct standing_rule *r, json_t *ctx) CS_MUST_CHECK;

enum me_rules_param { ME_RULES_END_CSRF };
_Static_assert(ME_RULES_END_CSRF == ROUTE_CSRF_PARAM, "a form's csrf is where its gate reads it");
/* ctx "rules" and "has_rules" for /me: the person's live rules in words. */
enum cs_err me_rules_add(struct store_conn *c, const struct config *cfg, int64_t user_id,
    int64_t now, json_t *ctx) CS_MUST_CHECK;
/* POST /me/rules/{id}/end (csrf): ends one of the person's rules; 303 to /me. */
enum cs_err me_rules_end(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

/* For the admin pages (admin_pages.c): a rule of standing_list_consent or
 * standing_show in words, as /me's plus made (time), made_by, consent_id,
 * subject, live, ended (time or null), over (why it no longer holds: "ended
 * by ...", "used up", "expired"; only when not live) and end_label (the End
 * button's accessible name).  NULL when out of memory. */
json_t *standing_pages_admin_rule(const struct config *cfg, json_t *r);
/* ctx "rules" and "has_rules" for the admin's consent page: every rule of
 * consent_id, ended ones too, newest first, in words. */
enum cs_err standing_pages_admin_rules(struct store_conn *c, const struct config *cfg,
    const char *consent_id, int64_t now, json_t *ctx) CS_MUST_CHECK;

#endif
