/* metrics_api.c -- GET /metrics: the registry's families (metrics.c), the
 * proxy's counters (proxy_api.c) and the audit publisher's (audit_head.c)
 * among them, in the Prometheus text format; the [metrics] bearer token; and the two
 * collectors that read the database at each scrape.  It must never put a
 * request's text into a label, and never compare the token but in constant
 * time. */
#include <string.h>
#include <strings.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include "app.h"
#include "audit_head.h"
#include "buf.h"
#include "events.h"
#include "health.h"
#include "metrics.h"
#include "metrics_api.h"
#include "proxy_api.h"
#include "audit.h"
#include "consent.h"

enum cs_err metrics_api_scrape(const struct http_request *req, struct http_reply *rep)
{
	enum cs_err e;
	(void)req;
	buf_reset(&rep->body);
	/* The proxy's and the audit publisher's families are the registry's too;
	 * declared at start, made sure of here (idempotent), then all rendered. */
	if ((e = proxy_metrics_declare()) != CS_OK || (e = audit_head_metrics(NULL)) != CS_OK ||
	    (e = metrics_render(&rep->body)) != CS_OK)
		return e;
	rep->status = 200;
	rep->content_type = "text/plain; version=0.0.4; charset=utf-8";
	return CS_OK;
}

static bool sha256(const char *s, unsigned char out[32])
{
	return EVP_Digest(s, strlen(s), out, NULL, EVP_sha256(), NULL) == 1;
}

bool metrics_api_token_ok(const struct http_request *req, bool *presented)
{
	const char *want = req->app->cfg->metrics_token, *h = req->authorization;
	unsigned char a[32], b[32];
	bool ok;
	*presented = want != NULL && h != NULL && strncasecmp(h, "Bearer ", 7) == 0;
	if (!*presented)
		return false;
	h += 7;
	while (*h == ' ')
		h++;
	/* SECURITY: digests of equal length, compared in constant time: neither
	 * the token's length nor its bytes show in the timing. */
	ok = sha256(h, a) && sha256(want, b) && CRYPTO_memcmp(a, b, sizeof a) == 0;
	OPENSSL_cleanse(a, sizeof a);
	OPENSSL_cleanse(b, sizeof b);
	return ok;
}

enum cs_err metrics_api_refuse(struct http_reply *rep)
{
	enum cs_err e = reply_oauth_error(rep, 401, "invalid_token", "the metrics token is not valid");
	if (e == CS_OK)
		e = reply_header(rep, "WWW-Authenticate",
		    "Bearer realm=\"consentd-metrics\", error=\"invalid_token\"");
	return e;
}

/* --- collectors: one aggregate query each, bounded answers ----------------- */

static void collect_consents(void *arg)
{
	struct app *app = arg;
	int64_t n[CONSENT_STATES];
	struct store_conn *c = store_conn(app->store);
	if (c == NULL || consent_count_by_state(c, app_now(), n) != CS_OK)
		return;                         /* the last values stay */
	for (int i = 0; i < CONSENT_STATES; i++) {
		const char *v[] = { consent_state_names[i] };
		metrics_set(metric[M_CONSENTS], v, (double)n[i]);
	}
}

static void collect_connections(void *arg)
{
	struct app *app = arg;
	int64_t ok, broken;
	struct store_conn *c = store_conn(app->store);
	if (c == NULL || health_count(c, app_now(), &ok, &broken) != CS_OK)
		return;                         /* the last values stay */
	metrics_set(metric[M_CONNECTIONS], (const char *const[]){ "ok" }, (double)ok);
	metrics_set(metric[M_CONNECTIONS], (const char *const[]){ "reconnect_required" },
	    (double)broken);
}

/* What SQLite's group commit counts as under way (store_requests): the
 * scrape's own request, and those running beside it. */
static void collect_requests(void *arg)
{
	struct app *app = arg;
	metrics_set(metric[M_DB_REQUESTS], NULL, (double)store_requests_under_way(app->store));
}

static void collect_events(void *arg)
{
	struct app *app = arg;
	int64_t waiting, failing, delivered;
	struct store_conn *c = store_conn(app->store);
	if (c != NULL && events_count(c, &waiting, &failing, &delivered) == CS_OK)
		metrics_set(metric[M_EVENT_BACKLOG], NULL, (double)waiting);
}

static void collect_audit_lag(void *arg)
{
	struct app *app = arg;
	struct audit_head db, pub;
	struct store_conn *c = store_conn(app->store);
	if (!app->publishing || c == NULL || audit_head(c, &db) != CS_OK)
		return;
	audit_head_published(&pub);
	metrics_set(metric[M_AUDIT_HEAD_LAG], NULL, db.seq > pub.seq ? (double)(db.seq - pub.seq) : 0);
}

enum cs_err metrics_api_init(struct app *app)
{
	enum cs_err e;
	if ((e = metrics_declare_consentd()) != CS_OK || (e = proxy_metrics_declare()) != CS_OK ||
	    (e = audit_head_metrics(NULL)) != CS_OK ||
	    (e = metrics_collector(collect_consents, app)) != CS_OK ||
	    (e = metrics_collector(collect_events, app)) != CS_OK ||
	    (e = metrics_collector(collect_connections, app)) != CS_OK ||
	    (e = metrics_collector(collect_audit_lag, app)) != CS_OK ||
	    (e = metrics_collector(collect_requests, app)) != CS_OK)
		return e;
	return CS_OK;
}
