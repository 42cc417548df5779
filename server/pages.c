/* pages.c -- the consent page, the decision and the approval page (/me is
 * in me_pages.c).
 * Session binding: a request is shown and decided only by the person it was
 * made for.  Every value that matters comes from the stored request, never
 * from the form: the form only says which of the stored scopes are ticked. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jansson.h>
#include "app.h"
#include "approval.h"
#include "jcs.h"
#include "audit.h"
#include "buf.h"
#include "consent.h"
#include "form.h"
#include "login_pages.h"
#include "page.h"
#include "pages.h"
#include "session.h"
#include "vault.h"
#include "vault_connect.h"

static const int64_t durations[] = { 3600, 86400, 7 * 86400, 30 * 86400, 90 * 86400, 365 * 86400 };
static const char *const duration_names[] = { "1 hour", "1 day", "7 days", "30 days", "90 days", "1 year" };
#define N_DURATIONS (sizeof durations / sizeof durations[0])

/* ---- Invisible characters ---------------------------------------------
 * The code points visible_text() shows as a marker such as "[U+200B]" instead of passing on.
 * They are Unicode's Default_Ignorable_Code_Point, all of it, reserved ranges
 * included, from DerivedCoreProperties.txt of Unicode 15.0.0 (Debian 12's
 * unicode-data package; test_token_visible_text_every_default_ignorable_marked
 * holds this table against that file).  That set already holds every bidi
 * control (U+061C, U+200E-200F, U+202A-202E, U+2066-2069).  To it we add the
 * C0 controls but LF, DEL and the C1 controls: LF stays because a parameter's
 * text on the approval page is shown line by line (the exact canonical JSON has
 * none: JCS writes it as \n).
 * Sorted and disjoint, for the binary search below. */
struct cp_range {
	uint32_t lo, hi;
};

static const struct cp_range hidden_ranges[] = {
	{ 0x0000, 0x0009 },     /* C0 controls before LF */
	{ 0x000b, 0x001f },     /* C0 controls after LF */
	{ 0x007f, 0x009f },     /* DEL, C1 controls */
	{ 0x00ad, 0x00ad },     /* SOFT HYPHEN */
	{ 0x034f, 0x034f },     /* COMBINING GRAPHEME JOINER */
	{ 0x061c, 0x061c },     /* ARABIC LETTER MARK */
	{ 0x115f, 0x1160 },     /* HANGUL CHOSEONG FILLER, HANGUL JUNGSEONG FILLER */
	{ 0x17b4, 0x17b5 },     /* KHMER VOWEL INHERENT AQ, AA */
	{ 0x180b, 0x180f },     /* MONGOLIAN FREE VARIATION SELECTORS, VOWEL SEPARATOR */
	{ 0x200b, 0x200f },     /* ZERO WIDTH SPACE .. RIGHT-TO-LEFT MARK */
	{ 0x202a, 0x202e },     /* LEFT-TO-RIGHT EMBEDDING .. RIGHT-TO-LEFT OVERRIDE */
	{ 0x2060, 0x206f },     /* WORD JOINER .. NOMINAL DIGIT SHAPES, reserved U+2065 */
	{ 0x3164, 0x3164 },     /* HANGUL FILLER */
	{ 0xfe00, 0xfe0f },     /* VARIATION SELECTOR-1..16 */
	{ 0xfeff, 0xfeff },     /* ZERO WIDTH NO-BREAK SPACE (BOM) */
	{ 0xffa0, 0xffa0 },     /* HALFWIDTH HANGUL FILLER */
	{ 0xfff0, 0xfff8 },     /* reserved */
	{ 0x1bca0, 0x1bca3 },   /* SHORTHAND FORMAT LETTER OVERLAP .. UP STEP */
	{ 0x1d173, 0x1d17a },   /* MUSICAL SYMBOL BEGIN BEAM .. END PHRASE */
	{ 0xe0000, 0xe0fff },   /* TAG characters, VARIATION SELECTOR-17..256, reserved */
};

static bool cp_hidden(uint32_t cp)
{
	size_t lo = 0, hi = sizeof hidden_ranges / sizeof hidden_ranges[0];
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cp < hidden_ranges[mid].lo)
			hi = mid;
		else if (cp > hidden_ranges[mid].hi)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

#define UTF8_ILL_FORMED UINT32_MAX

/* Decodes the UTF-8 sequence that starts at p (NUL-terminated) into *cp and
 * returns its length.  An ill-formed sequence (overlong, a surrogate, past
 * U+10FFFF, truncated, a stray continuation byte) gives UTF8_ILL_FORMED and
 * the length of its maximal subpart, at least 1, so that each one becomes a
 * single U+FFFD as Unicode 15.0 section 3.9 recommends.  The byte ranges are
 * those of its table 3-7; a NUL fails every continuation test, so nothing
 * past the terminator is read. */
static size_t utf8_next(const unsigned char *p, uint32_t *cp)
{
	unsigned c = p[0], lo = 0x80, hi = 0xbf;      /* lo..hi: the second byte */
	size_t n;
	uint32_t v;
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		v = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		v = c & 0x0f;
		lo = c == 0xe0 ? 0xa0 : 0x80;             /* no overlongs */
		hi = c == 0xed ? 0x9f : 0xbf;             /* no surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		v = c & 0x07;
		lo = c == 0xf0 ? 0x90 : 0x80;             /* no overlongs */
		hi = c == 0xf4 ? 0x8f : 0xbf;             /* nothing past U+10FFFF */
	} else {
		*cp = UTF8_ILL_FORMED;                    /* C0, C1, F5-FF, or a continuation */
		return 1;
	}
	for (size_t k = 1; k < n; k++, lo = 0x80, hi = 0xbf) {
		if (p[k] < lo || p[k] > hi) {
			*cp = UTF8_ILL_FORMED;
			return k;
		}
		v = v << 6 | (p[k] & 0x3fu);
	}
	*cp = v;
	return n;
}

/* SECURITY: agent-supplied text is decoded completely before it is shown, so
 * no invisible character and no ill-formed byte reaches the page raw. */
char *visible_text(const char *s)
{
	struct buf b;
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s);
	enum cs_err e = CS_OK;
	/* Each input byte makes at most 8 output bytes ("[U+0001]" for one). */
	if (len > (SIZE_MAX - 1) / 8)
		return NULL;
	buf_init(&b, 8 * len);
	while (*p && e == CS_OK) {
		uint32_t cp;
		size_t n = utf8_next(p, &cp);
		if (cp == UTF8_ILL_FORMED)
			e = buf_append(&b, "\xef\xbf\xbd", 3);              /* U+FFFD */
		else if (cp_hidden(cp))
			e = buf_printf(&b, "[U+%04X]", (unsigned)cp);
		else
			e = buf_append(&b, p, n);
		p += n;
	}
	if (e != CS_OK) {
		buf_clear(&b);
		return NULL;
	}
	return buf_steal(&b);
}

/* A time for a template: {"iso": "2026-12-01T20:00:00Z", "utc": "2026-12-01 20:00 UTC"},
 * written <time datetime="{{iso}}" title="{{utc}}">{{utc}}</time>, which
 * /static/local-time.js rewrites into the reader's local time (the title keeps UTC). */
static json_t *time_value(int64_t t)
{
	char iso[32] = "", utc[32] = "";
	time_t tt = (time_t)t;
	struct tm tm;
	if (gmtime_r(&tt, &tm) == NULL || strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0 ||
	    strftime(utc, sizeof utc, "%Y-%m-%d %H:%M UTC", &tm) == 0)
		return NULL;
	return json_pack("{s:s, s:s}", "iso", iso, "utc", utc);
}

/* "3 days", "1 hour", "90 minutes": a duration of s seconds in its largest whole unit. */
static void duration_label(int64_t s, char out[48])
{
	static const struct {
		int64_t unit;
		const char *one, *many;
	} units[] = { { 86400, "day", "days" }, { 3600, "hour", "hours" }, { 60, "minute", "minutes" },
		{ 1, "second", "seconds" } };
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		if (s % units[i].unit == 0) {
			int64_t n = s / units[i].unit;
			snprintf(out, 48, "%lld %s", (long long)n, n == 1 ? units[i].one : units[i].many);
			return;
		}
	}
}

/* The durations the consent page offers for res, shortest first: the usual ones up to
 * max_consent, max_consent itself ("the longest allowed") and the preselected default,
 * [consent] default_duration lowered to max_consent.  consent_decide takes any duration
 * from 1 to max_consent; these are only the choices shown. */
static json_t *duration_options(const struct config *cfg, const struct config_resource *res)
{
	int64_t max = res->max_consent, v[N_DURATIONS + 2];
	int64_t dflt = cfg->consent_default_duration < max ? cfg->consent_default_duration : max;
	size_t n = 0;
	json_t *opts = json_array();
	for (size_t i = 0; i < N_DURATIONS && durations[i] <= max; i++)
		v[n++] = durations[i];
	for (int k = 0; k < 2; k++) {
		int64_t want = k == 0 ? dflt : max;
		size_t at = 0;
		while (at < n && v[at] < want)
			at++;
		if (at < n && v[at] == want)
			continue;
		memmove(&v[at + 1], &v[at], (n - at) * sizeof v[0]);
		v[at] = want;
		n++;
	}
	for (size_t i = 0; opts != NULL && i < n; i++) {
		char label[80], unit[48] = "";
		const char *std = NULL;
		for (size_t j = 0; j < N_DURATIONS; j++)
			if (durations[j] == v[i])
				std = duration_names[j];
		if (std == NULL)
			duration_label(v[i], unit);
		snprintf(label, sizeof label, "%s%s", std ? std : unit,
		    std == NULL && v[i] == max ? " (the longest allowed)" : "");
		if (json_array_append_new(opts, json_pack("{s:I, s:s, s:b}", "seconds", (json_int_t)v[i],
		    "label", label, "selected", v[i] == dflt)) != 0) {
			json_decref(opts);
			return NULL;
		}
	}
	return opts;
}

static const char *agent_name(const struct config *cfg, const char *id)
{
	const struct config_agent *a = config_agent(cfg, id);
	return a ? a->name : id;
}

static const char *resource_name(const struct config *cfg, const char *id)
{
	const struct config_resource *r = config_resource(cfg, id);
	return r ? r->name : id;
}

/* SECURITY: session binding (invariant 4).  A request opened by another
 * account is audited and answered with a 403 page that offers to sign in as
 * the right person; the request stays pending for its person.  kind is
 * "consent" or "approve" (the page's path). */
static enum cs_err refuse_other_account(const struct http_request *req, struct http_reply *rep,
    struct store_conn *c, const struct session *s, const char *kind, const char *id,
    const char *subject, const char *agent, const char *resource)
{
	char actor[300], loginurl[200];
	struct audit_entry a;
	json_t *ctx;
	enum cs_err e;
	snprintf(actor, sizeof actor, "user:%s", s->subject);
	memset(&a, 0, sizeof a);
	a.ts = req->now;
	a.actor = actor;
	a.action = "consent.binding_refused";
	a.subject = subject;
	a.agent = agent;
	a.resource = resource;
	a.request_id = id;
	a.outcome = "refused";
	a.detail = "opened by another account";
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if ((e = audit_append(c, &a)) != CS_OK || (e = store_commit(c)) != CS_OK) {
		store_rollback(c);
		return e;
	}
	snprintf(loginurl, sizeof loginurl, "/login?prompt=login&return_to=%%2F%s%%2F%s", kind, id);
	ctx = json_pack("{s:s, s:s}", "title", "This request is for another account",
	    "login_url", loginurl);
	if (ctx == NULL)
		return CS_ENOMEM;
	e = page_render(rep, 403, "consent_other.html", ctx, s);
	json_decref(ctx);
	return e;
}

/* Loads the request named in the URL and checks it belongs to the signed-in
 * person.  Returns CS_OK with *ok true when the caller may go on; otherwise
 * the reply is complete. */
static enum cs_err bound_request(const struct http_request *req, struct http_reply *rep,
    struct store_conn *c, const struct session *s, struct consent_request *r, bool *ok)
{
	enum cs_err e;
	*ok = false;
	e = consent_request_get(c, req->captures[0], r);
	if (e == CS_ENOENT)
		return reply_html_error(rep, 404, "No such request",
		    "This consent request does not exist. Ask your agent for a new link.");
	if (e != CS_OK)
		return e;
	/* SECURITY: session binding (invariant 4) -- only the person the agent
	 * asked for may see or decide this request. */
	if (r->user_id != s->user_id)
		return refuse_other_account(req, rep, c, s, "consent", r->id, r->subject, r->agent,
		    r->resource);
	*ok = true;
	return CS_OK;
}

static json_t *scope_items(const struct config *cfg, const struct consent_request *r)
{
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < r->scopes.n; i++) {
		const struct config_scope *sc = config_scope(cfg, r->resource, r->scopes.v[i]);
		char field[24];
		snprintf(field, sizeof field, "s%zu", i);
		json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:b}", "field", field,
		    "name", r->scopes.v[i], "description", sc ? sc->description : r->scopes.v[i],
		    "already", scope_set_has(&r->pre_granted, r->scopes.v[i])));
	}
	return arr;
}

/* Who is deciding, as the page names them: the IdP's name, else the e-mail, else the
 * subject, with invisible characters made visible. */
static char *signed_in_name(const struct session *s)
{
	const char *n = s->name && *s->name ? s->name : s->email && *s->email ? s->email : s->subject;
	return visible_text(n ? n : "");
}

/* True when the person already has a live connection at res's provider for this agent,
 * which a consent keeping the same provider scopes takes over without a new sign-in
 * there (vault_begin_connect). */
static bool provider_connected(struct store_conn *c, const struct consent_request *r, int64_t now)
{
	struct consent live;
	bool yes;
	memset(&live, 0, sizeof live);
	if (c == NULL || consent_current(c, r->user_id, r->agent, r->resource, now, &live) != CS_OK)
		return false;
	yes = !live.reconnect_required && vault_has_record(c, live.id);
	consent_clear(&live);
	return yes;
}

/* The consent page for r, pending and the signed-in person's, with the
 * version it shows in its form.  notice (or NULL) is said above the request. */
static enum cs_err consent_page(const struct http_request *req, struct http_reply *rep,
    const struct session *s, const struct consent_request *r, int status, const char *notice)
{
	const struct config *cfg = req->app->cfg;
	char version[CONSENT_VERSION_LEN + 1], other[200];
	json_t *ctx = NULL, *opts = NULL, *expires = NULL;
	char *reason = NULL, *who = NULL;
	bool provider;
	enum cs_err e;

	if (strcmp(r->status, "pending") != 0 || r->expires_at <= req->now)
		return reply_html_error(rep, 410, "This request is closed",
		    strcmp(r->status, "approved") == 0 ? "You already approved this request." :
		    strcmp(r->status, "denied") == 0 ? "You already denied this request." :
		    "This request expired. Your agent can ask again.");
	const struct config_resource *res = config_resource(cfg, r->resource);
	const struct config_agent *ag = config_agent(cfg, r->agent);
	if (res == NULL || ag == NULL)
		return reply_html_error(rep, 410, "This request is closed",
		    "The agent or resource it names is no longer configured.");
	provider = vault_provider(req->app->vault, r->resource) != NULL;
	if ((opts = duration_options(cfg, res)) == NULL || (expires = time_value(r->expires_at)) == NULL ||
	    (who = signed_in_name(s)) == NULL ||
	    (r->reason && (reason = visible_text(r->reason)) == NULL)) {
		e = CS_ENOMEM;
		goto out;
	}
	/* "Not you?" signs in afresh (prompt=login) and comes back to this request, as
	 * the page for another account does (refuse_other_account). */
	snprintf(other, sizeof other, "/login?prompt=login&return_to=%%2Fconsent%%2F%s", r->id);
	/* SECURITY: the form names the version it was drawn from; a decision on
	 * any other version of the request grants nothing (consent_decide). */
	consent_request_version(r, version);
	ctx = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?, s:o, s:O, s:b, s:O, s:s, s:s?, s:s, s:s, "
	    "s:b, s:b}",
	    "title", "An agent asks for your permission", "request_id", r->id,
	    "agent", ag->name, "agent_description", ag->description, "resource", res->name,
	    "reason", reason, "scopes", scope_items(cfg, r), "durations", opts,
	    "offline", ag->offline, "expires", expires, "version", version, "notice", notice,
	    "signed_in_as", who, "other_account_url", other, "provider", provider,
	    "provider_connected", provider && provider_connected(store_conn(req->app->store), r,
	    req->now));
	if (ctx == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	e = page_render(rep, status, "consent.html", ctx, s);
out:
	free(reason);
	free(who);
	json_decref(opts);
	json_decref(expires);
	json_decref(ctx);
	return e;
}

enum cs_err pages_consent_show(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct session *s = req->auth.session;
	struct consent_request r;
	struct store_conn *c = store_conn(app->store);
	bool ok;
	enum cs_err e;

	memset(&r, 0, sizeof r);
	if (c == NULL)
		return CS_EDB;
	if ((e = bound_request(req, rep, c, s, &r, &ok)) != CS_OK || !ok)
		goto out;
	e = consent_page(req, rep, s, &r, 200, NULL);
out:
	consent_request_clear(&r);
	return e;
}

/* The request changed under the person's open page: nothing was decided; the
 * request is shown again as it is now (409), to be decided anew. */
static enum cs_err consent_changed(const struct http_request *req, struct http_reply *rep,
    struct store_conn *c, const struct session *s)
{
	struct consent_request now;
	bool ok;
	enum cs_err e;
	memset(&now, 0, sizeof now);
	if ((e = bound_request(req, rep, c, s, &now, &ok)) == CS_OK && ok)
		e = consent_page(req, rep, s, &now, 409,
		    "This request changed while you were looking at it, so nothing was given. "
		    "Here it is as it is now: check it and decide again.");
	consent_request_clear(&now);
	return e;
}

enum cs_err pages_consent_decide(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	struct session s;
	struct consent_request r;
	struct consent_decision d;
	struct store_conn *c = store_conn(app->store);
	const char *decision = form_get(&req->params, "decision");
	const char *version = form_get(&req->params, "version");
	uint64_t boxes = http_param_family(req, "s");
	char actor[300], *new_id = NULL;
	json_t *ctx = NULL;
	bool ok;
	enum cs_err e;

	memset(&s, 0, sizeof s);
	memset(&r, 0, sizeof r);
	memset(&d, 0, sizeof d);
	if (c == NULL)
		return CS_EDB;
	e = session_from_cookie(c, cfg, req->cookie, req->now, &s);
	if (e == CS_ENOENT) {
		e = reply_html_error(rep, 401, "Not signed in",
		    "Your session ended. Open the link from your agent again to sign in.");
		goto out;
	} else if (e != CS_OK) {
		goto out;
	}
	if (!session_csrf_ok(&s, form_get(&req->params, "csrf"))) {
		e = reply_html_error(rep, 403, "Not allowed",
		    "This form is stale or did not come from this site. Reload the page and try again.");
		goto out;
	}
	if ((e = bound_request(req, rep, c, &s, &r, &ok)) != CS_OK || !ok)
		goto out;
	d.approve = strcmp(decision, "approve") == 0;
	/* A form without a version is treated as drawn from another version. */
	if (version != NULL && strlen(version) == CONSENT_VERSION_LEN)
		memcpy(d.version, version, sizeof d.version);
	if (d.approve) {
		/* The boxes are named by position in the stored request: a form can only
		 * choose among the scopes the agent asked for, never add one, and the
		 * version (checked in consent_decide) makes the positions those the
		 * person saw. */
		for (size_t i = 0; i < r.scopes.n; i++) {
			if (boxes & (UINT64_C(1) << i)) {
				d.selected.v[d.selected.n] = strdup(r.scopes.v[i]);
				if (d.selected.v[d.selected.n++] == NULL) {
					e = CS_ENOMEM;
					goto out;
				}
			}
		}
		if (r.scopes.n < CONSENT_MAX_SCOPES && (boxes >> r.scopes.n) != 0) {
			e = reply_html_error(rep, 400, "Bad request",
			    "The form names a permission the agent did not ask for.");
			goto out;
		}
		if (d.selected.n == 0) {
			e = reply_html_error(rep, 400, "Nothing selected",
			    "Tick at least one permission to approve, or choose Deny.");
			goto out;
		}
		if (!http_param_int(req, "duration", &d.duration) || d.duration <= 0) {
			e = reply_html_error(rep, 400, "Bad request", "Choose how long the permission lasts.");
			goto out;
		}
		d.offline = http_param(req, "offline") != NULL;
	}
	snprintf(actor, sizeof actor, "user:%s", s.subject);
	if (d.approve && vault_provider(app->vault, r.resource) != NULL) {
		/* A resource with a provider: the consent goes live only once the
		 * provider authorized exactly its scopes (or a record moves over). */
		struct vault_begin vb = { NULL, NULL };
		e = vault_begin_connect(app->vault, c, cfg,
		    &(struct vault_person){ s.user_id, s.id_hash, actor, req->now },
		    &(struct vault_decision){ r.id, &d }, &vb);
		if (e == CS_OK && vb.authorize_url != NULL) {
			rep->status = 303;
			rep->content_type = "text/plain; charset=utf-8";
			e = reply_header(rep, "Location", vb.authorize_url);
			vault_begin_clear(&vb);
			goto out;
		}
		vault_begin_clear(&vb);
	} else {
		e = consent_decide(c, cfg, r.id, s.user_id, &d, actor, req->now, &new_id);
	}
	if (e == CS_ESTALE) {
		e = consent_changed(req, rep, c, &s);
		goto out;
	} else if (e == CS_EPERM) {
		e = reply_html_error(rep, 403, "Not allowed", "This request is for another account.");
		goto out;
	} else if (e == CS_EINVAL) {
		e = reply_html_error(rep, 400, "This request cannot be decided",
		    "It was already decided, it expired, or the choice was not valid.");
		goto out;
	} else if (e != CS_OK) {
		goto out;
	}
	/* A denial holds the agent back for deny_cooldown (consent.h): said here,
	 * with the way to lift it, so that a misclick is not a silent day. */
	ctx = json_pack("{s:s, s:b, s:s, s:s, s:o?}", "title", d.approve ? "Permission given" : "Request denied",
	    "approved", d.approve, "agent", agent_name(cfg, r.agent), "resource",
	    resource_name(cfg, r.resource), "blocked_until", !d.approve && cfg->consent_deny_cooldown > 0 ?
	    time_value(req->now + cfg->consent_deny_cooldown) : NULL);
	if (ctx == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	e = page_render(rep, 200, "consent_done.html", ctx, &s);
out:
	free(new_id);
	json_decref(ctx);
	scope_set_clear(&d.selected);
	consent_request_clear(&r);
	session_clear(&s);
	return e;
}

static enum cs_err done_page(struct http_reply *rep, const struct config *cfg, int status,
    const struct consent_request *r, const struct session *s, bool approved, const char *narrowed,
    const char *failure)
{
	json_t *ctx = json_pack("{s:s, s:b, s:s, s:s, s:s?, s:s?, s:s, s:b}", "title",
	    failure ? "Not connected" : approved ? "Permission given" : "Request denied",
	    "approved", approved && !failure, "agent", agent_name(cfg, r->agent),
	    "resource", resource_name(cfg, r->resource), "narrowed", narrowed, "failure", failure,
	    "request_id", r->id, "retry", failure != NULL && strcmp(r->status, "pending") == 0);
	enum cs_err e;
	if (ctx == NULL)
		return CS_ENOMEM;
	e = page_render(rep, status, "consent_done.html", ctx, s);
	json_decref(ctx);
	return e;
}

enum cs_err pages_consent_done(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct session *s = req->auth.session;
	struct consent_request r;
	struct store_conn *c = store_conn(app->store);
	const char *outcome = form_get(&req->params, "outcome");
	char back[128];
	bool ok;
	enum cs_err e;
	memset(&r, 0, sizeof r);
	if (c == NULL)
		return CS_EDB;
	if ((e = bound_request(req, rep, c, s, &r, &ok)) != CS_OK || !ok)
		goto out;
	char cancelled[600];
	snprintf(cancelled, sizeof cancelled, "You cancelled at %s, so %s was not connected to it "
	    "and nothing was given. The request still waits for you: review it again to connect, "
	    "or deny it.", resource_name(app->cfg, r.resource), agent_name(app->cfg, r.agent));
	/* SECURITY: the stored status decides what the page says; a link (an agent
	 * hands the person that link) chooses at most which of consentd's sentences
	 * explains a request that is still pending. */
	if (strcmp(r.status, "pending") == 0 && outcome == NULL) {
		rep->status = 303;
		rep->content_type = "text/plain; charset=utf-8";
		buf_reset(&rep->body);
		snprintf(back, sizeof back, "/consent/%s", r.id);
		e = reply_header(rep, "Location", back);
	} else if (strcmp(r.status, "pending") != 0 || outcome == NULL)
		/* What was left out comes from the stored request, never from the link. */
		e = done_page(rep, app->cfg, 200, &r, s, strcmp(r.status, "approved") == 0,
		    strcmp(r.status, "approved") == 0 ? r.narrowed : NULL, NULL);
	else if (strcmp(outcome, "cancelled") == 0)
		e = done_page(rep, app->cfg, 200, &r, s, false,  NULL, cancelled);
	else if (strcmp(outcome, "too_much") == 0)
		e = done_page(rep, app->cfg, 200, &r, s, false, NULL,
		    "The provider granted more than was asked for, so consentd revoked those tokens at once "
		    "and gave nothing. Try again or ask the provider's administrator.");
	else if (strcmp(outcome, "changed") == 0)
		e = done_page(rep, app->cfg, 200, &r, s, false, NULL,
		    "The request changed while you were at the provider, so nothing was given and the "
		    "connection was undone. Open the request again to see it as it is now.");
	else
		e = done_page(rep, app->cfg, 200, &r, s, false, NULL,
		    "The connection to the provider failed. Nothing was given; you can try again.");
out:
	consent_request_clear(&r);
	return e;
}

/* --- per-action approval (flow F) ----------------------------------------- */

/* The approval named in the URL, checked to belong to the signed-in person;
 * the 403 page and an audit entry otherwise. */
static enum cs_err bound_approval(const struct http_request *req, struct http_reply *rep,
    struct store_conn *c, const struct session *s, struct approval *a, bool *ok)
{
	enum cs_err e;
	*ok = false;
	e = approval_get(c, req->captures[0], a);
	if (e == CS_ENOENT)
		return reply_html_error(rep, 404, "No such request",
		    "This approval request does not exist. Ask your agent for a new link.");
	if (e != CS_OK)
		return e;
	if (a->user_id != s->user_id)
		return refuse_other_account(req, rep, c, s, "approve", a->id, a->subject, a->agent,
		    a->resource);
	*ok = true;
	return CS_OK;
}

/* True for parameters built by the proxy from a request: {"path", "query", "body"}. */
static bool proxy_shaped(const char *parameters)
{
	json_t *v = json_loads(parameters, JSON_REJECT_DUPLICATES, NULL);
	bool yes = json_is_object(v) && json_object_size(v) == 3 &&
	    json_is_object(json_object_get(v, "path")) &&
	    json_is_object(json_object_get(v, "query")) && json_object_get(v, "body") != NULL;
	json_decref(v);
	return yes;
}

/* One member of the readable list: {"name", "value", "literal"}.  A string's value is
 * its text; any other value is its compact canonical JSON (literal: shown as code).
 * Both through visible_text.  NULL on failure. */
static json_t *parameter_item(const char *name, json_t *v)
{
	struct buf b;
	char *n = NULL, *val = NULL;
	json_t *item = NULL;
	bool literal = !json_is_string(v) || json_string_length(v) == 0;
	buf_init(&b, APPROVAL_MAX_CANONICAL);
	if (!literal)
		val = visible_text(json_string_value(v));
	else if (jcs_canonicalize(v, &b) == CS_OK && b.data != NULL)
		val = visible_text(b.data);
	if (val != NULL && (name == NULL || (n = visible_text(name)) != NULL))
		item = json_pack("{s:s?, s:s, s:b}", "name", n, "value", val, "literal", literal);
	free(n);
	free(val);
	buf_clear(&b);
	return item;
}

/* The parameters as the page lists them, set on ctx: for an object, "members" (one
 * parameter_item per top-level member, in canonical order; "has_members" when there is
 * one); for any other value, "single" (its item).  Canonical text that cannot be read
 * back (it holds a \u0000, say) sets "unreadable": the page then opens the exact text. */
static enum cs_err parameter_list(const char *canonical, json_t *ctx)
{
	/* Every number read as a double and written back by jcs_canonicalize gives the
	 * very digits of the canonical text (see jcs_pretty). */
	json_t *v = json_loads(canonical, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES |
	    JSON_DECODE_INT_AS_REAL, NULL), *members = NULL, *m;
	const char *k;
	enum cs_err e = CS_ENOMEM;
	if (v == NULL)
		return json_object_set_new(ctx, "unreadable", json_true()) == 0 ? CS_OK : CS_ENOMEM;
	if (!json_is_object(v)) {
		json_t *item = parameter_item(NULL, v);
		if (item != NULL && json_object_set_new(ctx, "single", item) == 0)
			e = CS_OK;
		goto out;
	}
	if ((members = json_array()) == NULL)
		goto out;
	json_object_foreach(v, k, m) {
		if (json_array_append_new(members, parameter_item(k, m)) != 0)
			goto out;
	}
	if (json_object_set_new(ctx, "has_members", json_boolean(json_array_size(members) > 0)) == 0 &&
	    json_object_set(ctx, "members", members) == 0)
		e = CS_OK;
out:
	json_decref(members);
	json_decref(v);
	return e;
}

enum cs_err pages_approve_show(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	const struct session *s = req->auth.session;
	struct approval a;
	struct store_conn *c = store_conn(app->store);
	char other[200];
	char *shown = NULL, *who = NULL;
	json_t *ctx = NULL, *expires = NULL;
	bool ok;
	enum cs_err e;

	memset(&a, 0, sizeof a);
	if (c == NULL)
		return CS_EDB;
	if ((e = bound_approval(req, rep, c, s, &a, &ok)) != CS_OK || !ok)
		goto out;
	if (strcmp(a.status, "pending") != 0 || a.expires_at <= req->now) {
		e = reply_html_error(rep, 410, "This request is closed",
		    strcmp(a.status, "approved") == 0 || strcmp(a.status, "used") == 0 ?
		    "You already approved this action." : strcmp(a.status, "denied") == 0 ?
		    "You already denied this action." : "This request expired or was cancelled.");
		goto out;
	}
	const struct config_action *act = config_action(cfg, a.resource, a.action);
	const struct config_resource *res = config_resource(cfg, a.resource);
	/* The exact parameters are the canonical JSON text itself, the very bytes the
	 * digest is of, with invisible characters made visible. */
	if ((shown = visible_text(a.parameters)) == NULL || (who = signed_in_name(s)) == NULL ||
	    (expires = time_value(a.expires_at)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	snprintf(other, sizeof other, "/login?prompt=login&return_to=%%2Fapprove%%2F%s", a.id);
	/* Who keeps the approval to this one action: consentd itself when only its proxy
	 * uses the tokens, the gateway when the token is released to it (flow F). */
	ctx = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:O, s:s, s:s, s:b}",
	    "title", "An agent asks to act now", "approval_id", a.id,
	    "agent", agent_name(cfg, a.agent), "resource", resource_name(cfg, a.resource),
	    "action", a.action, "action_description", act ? act->description : a.action,
	    "parameters", shown, "digest", a.digest, "expires", expires,
	    "signed_in_as", who, "other_account_url", other,
	    "proxy_enforced", res != NULL && res->token_release == RELEASE_NEVER);
	if (ctx == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	if ((e = parameter_list(a.parameters, ctx)) != CS_OK)
		goto out;
	/* A request made through the proxy (flow H): its method and route, from
	 * consentd's configuration, above the path values, query and body. */
	if (act != NULL && act->route_method != NULL && act->route_path != NULL &&
	    proxy_shaped(a.parameters)) {
		char line[600];
		snprintf(line, sizeof line, "%s %s", act->route_method, act->route_path);
		if (json_object_set_new(ctx, "request_line", json_string(line)) != 0 ||
		    json_object_set_new(ctx, "proxied", json_true()) != 0) {
			e = CS_ENOMEM;
			goto out;
		}
	}
	e = page_render(rep, 200, "approve.html", ctx, s);
out:
	free(shown);
	free(who);
	json_decref(expires);
	json_decref(ctx);
	approval_clear(&a);
	return e;
}

enum cs_err pages_approve_decide(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	struct session s;
	struct approval a;
	struct store_conn *c = store_conn(app->store);
	bool approve = strcmp(form_get(&req->params, "decision"), "approve") == 0, ok;
	char actor[300];
	json_t *ctx = NULL;
	enum cs_err e;

	memset(&s, 0, sizeof s);
	memset(&a, 0, sizeof a);
	if (c == NULL)
		return CS_EDB;
	e = session_from_cookie(c, cfg, req->cookie, req->now, &s);
	if (e == CS_ENOENT) {
		e = reply_html_error(rep, 401, "Not signed in",
		    "Your session ended. Open the link from your agent again to sign in.");
		goto out;
	} else if (e != CS_OK) {
		goto out;
	}
	if (!session_csrf_ok(&s, form_get(&req->params, "csrf"))) {
		e = reply_html_error(rep, 403, "Not allowed",
		    "This form is stale or did not come from this site. Reload the page and try again.");
		goto out;
	}
	if ((e = bound_approval(req, rep, c, &s, &a, &ok)) != CS_OK || !ok)
		goto out;
	snprintf(actor, sizeof actor, "user:%s", s.subject);
	enum approval_decide_outcome decided;
	e = approval_decide(c, cfg, &(struct approval_decision){ .id = a.id, .user_id = s.user_id,
	    .approve = approve, .actor = actor, .now = req->now }, &decided);
	if (e != CS_OK) {
		goto out;
	} else if (decided == APPROVAL_NOT_YOURS) {
		e = reply_html_error(rep, 403, "Not allowed", "This request is for another account.");
		goto out;
	} else if (decided == APPROVAL_CLOSED) {
		e = reply_html_error(rep, 400, "This request cannot be decided",
		    "It was already decided, it expired, or its consent ended.");
		goto out;
	}
	const struct config_resource *res = config_resource(cfg, a.resource);
	ctx = json_pack("{s:s, s:b, s:s, s:s, s:s, s:b}", "title", approve ? "Action approved" : "Action denied",
	    "approved", approve, "agent", agent_name(cfg, a.agent), "resource",
	    resource_name(cfg, a.resource), "action", a.action,
	    "proxy_enforced", res != NULL && res->token_release == RELEASE_NEVER);
	if (ctx == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	e = page_render(rep, 200, "approve_done.html", ctx, &s);
out:
	json_decref(ctx);
	approval_clear(&a);
	session_clear(&s);
	return e;
}
