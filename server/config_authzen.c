/* config_authzen.c -- the [authzen] section: the organisation's decision point
 * (authzen.h), its URL, bearer token, CAs, timeout, what a failure decides and
 * which actions ask it.  It must never print the token, and never accept a
 * key that would be ignored without saying so. */
#include <string.h>
#include <openssl/crypto.h>
#include "config.h"
#include "config_priv.h"

#define AUTHZEN_TOKEN_MIN 16
#define AUTHZEN_TOKEN_MAX 4096

static const char *const on_error_names[] = { "deny", "ask", NULL };

/* A bearer token travels in an Authorization header: printable ASCII, no
 * space, of a sensible length. */
static bool token_ok(const char *t, size_t n)
{
	if (n < AUTHZEN_TOKEN_MIN || n > AUTHZEN_TOKEN_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (t[i] <= ' ' || t[i] > '~')
			return false;
	return true;
}

/* RESOURCE.ACTION: its shape here; that it names an action, below. */
static bool word_ok_action(const char *w)
{
	const char *dot = strchr(w, '.');
	return dot != NULL && dot != w && dot[1] != '\0';
}

static void load_token(struct ctx *c, struct config *cfg, const struct section *s)
{
	char *path = NULL;
	const struct entry *te = cfg_get_str(c, s, "token", NULL, S_EMPTY_NULL, &cfg->authzen_token);
	const struct entry *fe = cfg_get_str(c, s, "token_file", NULL, S_EMPTY_NULL, &path);
	if (te != NULL && fe != NULL) {
		cfg_err_e(c, fe, "give token (CONSENTD_AUTHZEN_TOKEN) or token_file, not both");
	} else if (te != NULL && cfg->authzen_token != NULL &&
	    !token_ok(cfg->authzen_token, strlen(cfg->authzen_token))) {
		cfg_err_e(c, te, "must be %d to %d printable characters without spaces",
		    AUTHZEN_TOKEN_MIN, AUTHZEN_TOKEN_MAX);
	} else if (fe != NULL && path != NULL) {
		char tok[AUTHZEN_TOKEN_MAX + 2];
		size_t n = 0;
		if (cfg_read_secret_file(c, fe, path, tok, sizeof tok, &n)) {
			if (!token_ok(tok, n))
				cfg_err_e(c, fe, "'%s' must hold one token of %d to %d printable "
				    "characters without spaces", path, AUTHZEN_TOKEN_MIN, AUTHZEN_TOKEN_MAX);
			else
				cfg->authzen_token = cfg_xstrdup(c, tok);
		}
		OPENSSL_cleanse(tok, sizeof tok);
	}
	free(path);
}

/* Each listed action must exist and need approval: the decision point is
 * asked before a person is, so an action no person is asked about never
 * reaches it (a name there would be a silent no-op). */
static void check_actions(struct ctx *c, const struct config *cfg, const struct section *s)
{
	const struct entry *e = cfg_find(s, "actions");
	for (size_t i = 0; e != NULL && i < cfg->nauthzen_actions; i++) {
		const char *w = cfg->authzen_actions[i], *dot = strchr(w, '.');
		char *res = cfg_xstrndup(c, w, (size_t)(dot - w));
		const struct config_action *a = res != NULL ? config_action(cfg, res, dot + 1) : NULL;
		if (res != NULL && a == NULL)
			cfg_err_e(c, e, "'%s' names no [action.%s] section", w, w);
		else if (a != NULL && a->approval != APPROVAL_REQUIRED)
			cfg_err_e(c, e, "'%s' has approval = none: the decision point is asked only "
			    "where a person would be (approval = required)", w);
		free(res);
	}
}

void cfg_load_authzen(struct ctx *c, struct config *cfg, const struct section *s)
{
	bool https = false, given = false;
	int i;
	const struct entry *ee = cfg_get_str(c, s, "endpoint", NULL, S_EMPTY_NULL,
	    &cfg->authzen_endpoint);
	/* SECURITY: the one URL consentd sends the person, the action and its
	 * parameters to: https, or plain http to loopback (development). */
	if (ee != NULL && cfg->authzen_endpoint != NULL &&
	    !cfg_check_url(c, ee, cfg->authzen_endpoint, URL_PATH | URL_QUERY, &https)) {
		free(cfg->authzen_endpoint);
		cfg->authzen_endpoint = NULL;
	}
	load_token(c, cfg, s);
	const struct entry *ce = cfg_get_str(c, s, "ca_file", NULL, S_EMPTY_NULL,
	    &cfg->authzen_ca_file);
	if (ce != NULL && cfg->authzen_ca_file != NULL)
		cfg_check_ca_file(c, ce, cfg->authzen_ca_file);
	cfg_get_int(c, s, "timeout_ms", 2000, 100, 30000, &cfg->authzen_timeout_ms);
	cfg_get_enum(c, s, "on_error", on_error_names, AUTHZEN_ON_ERROR_DENY, &i);
	cfg->authzen_on_error = (enum config_authzen_on_error)i;
	cfg->authzen_actions = cfg_get_words(c, s, &(struct words_key){ .key = "actions",
	    .def = "", .ok = word_ok_action, .what = "action (RESOURCE.ACTION)" },
	    &cfg->nauthzen_actions, &given);
	if (c->oom)
		return;
	if (cfg->authzen_endpoint == NULL) {
		/* Without the endpoint nothing is asked: say so for every key given. */
		for (const char *const *k = (const char *const[]){ "token", "token_file", "ca_file",
		    "timeout_ms", "on_error", "actions", NULL }; ee == NULL && *k != NULL; k++) {
			if (cfg_section_has_value(s, *k))
				cfg_err_e(c, cfg_find(s, *k), "not used without [authzen] endpoint");
		}
		return;
	}
	check_actions(c, cfg, s);
	if (cfg->authzen_ca_file != NULL && !https)
		cfg_warn_e(c, ce, "ignored: the endpoint is plain http (loopback)");
}
