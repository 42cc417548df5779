/* standing_api.c -- the admin JSON API's view of the person's standing rules
 * (issue #32): GET /admin/api/rules and POST /admin/api/rules/{id}/end.  Thin:
 * the router checked the admin token; standing.c lists, ends and audits. */
#include <jansson.h>
#include "app.h"
#include "standing.h"
#include "standing_api.h"

enum cs_err admin_api_rules(const struct http_request *req, struct http_reply *rep)
{
	struct store_conn *c = store_conn(req->app->store);
	json_t *list = NULL;
	enum cs_err e;
	if (c == NULL)
		return CS_EDB;
	if ((e = standing_list(c, 0, req->now, &list)) != CS_OK)
		return e;
	return reply_json_value(rep, 200, json_pack("{s:o}", "rules", list));
}

enum cs_err admin_api_rule_end(const struct http_request *req, struct http_reply *rep)
{
	struct store_conn *c = store_conn(req->app->store);
	enum standing_end_outcome o = STANDING_ALREADY_ENDED;
	json_t *body = NULL;
	enum cs_err e;
	if (c == NULL)
		return CS_EDB;
	body = req->body != NULL ? json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES,
	    NULL) : NULL;
	if (!json_is_object(body)) {
		json_decref(body);
		return reply_oauth_error(rep, 400, "invalid_request", "The body must be a JSON object.");
	}
	json_decref(body);
	/* The actor is "admin:<token name>" (the router's gate). */
	e = standing_end(c, req->captures[0], 0, req->auth.actor, req->now, &o);
	if (e == CS_ENOENT)
		return reply_oauth_error(rep, 404, "not_found", "There is no such rule.");
	if (e != CS_OK)
		return e;
	return reply_json_value(rep, 200, json_pack("{s:b}", "ended", o == STANDING_ENDED));
}
