/* test_config.c -- unit tests of the INI configuration loader: defaults, every kind of
 * bad value, cross-checks and environment overrides, with the exact messages operators see.
 * It must never depend on the process environment except in the example-file test. */
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <openssl/evp.h>
#include "buf.h"
#include "config.h"
#include "policy.h"
#include "store.h"
#include "jws_vectors.h"
#include "testutil.h"
#include "tu_config.h"

#define MIN_SERVER \
	"[server]\n" \
	"public_url = https://consent.example.com\n"
#define MIN_OIDC \
	"[oidc]\n" \
	"issuer = https://idp.example.com\n" \
	"client_id = consentd\n" \
	"client_secret = oidc-secret\n"
#define MIN_GATEWAY \
	"[gateway]\n" \
	"client_secret = gateway-secret-0123456789\n"
#define MINIMAL MIN_SERVER MIN_OIDC MIN_GATEWAY

static char *const no_env[] = { NULL };

/* tu_config.h's loader under the short names this file's checks use. */
static enum cs_err load(const char *text, char *const *env, char **msgs, struct config **out)
{
	return tu_config_load(text, env, msgs, out);
}

static void expect_error(const char *text, char *const *env, const char *want)
{
	tu_config_expect_error(text, env, want);
}

static struct config *expect_ok(const char *text, char *const *env)
{
	return tu_config_expect_ok(text, env, NULL);
}

/* The example as a file, with CONSENTD_SERVER_DEVELOPMENT set to dev (NULL: unset). */
static enum cs_err load_example(const char *dev, char **msgs, struct config **c)
{
	size_t n = 0;
	FILE *f = open_memstream(msgs, &n);
	ck_assert_ptr_nonnull(f);
	if (dev != NULL)
		ck_assert_int_eq(setenv("CONSENTD_SERVER_DEVELOPMENT", dev, 1), 0);
	enum cs_err e = config_load("config/consentd.conf.example", f, c);
	ck_assert_int_eq(unsetenv("CONSENTD_SERVER_DEVELOPMENT"), 0);
	fclose(f);
	return e;
}

START_TEST(test_config_example_loads)
{
	struct config *c = NULL;
	char *msgs = NULL;
	enum cs_err e = load_example("true", &msgs, &c);
	ck_assert_msg(e == CS_OK, "example failed:\n%s", msgs);
	ck_assert_str_eq(msgs, "");
	ck_assert(c->development);
	ck_assert_str_eq(c->oidc_scopes, "openid profile email groups");
	ck_assert_str_eq(c->public_url, "https://consent.example.com");
	ck_assert_uint_eq(c->nagents, 1);
	ck_assert_uint_eq(c->nresources, 2);
	ck_assert_uint_eq(c->nscopes, 4);
	ck_assert_uint_eq(c->nactions, 2);
	const struct config_agent *a = config_agent(c, "coder");
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(a->nallow, 4);
	ck_assert_str_eq(a->allow[2], "github:issues:read");
	ck_assert_ptr_null(a->allow[4]);
	const struct config_resource *r = config_resource(c, "github");
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(r->provider_issuer, "https://github.example");
	ck_assert_str_eq(r->base_url, "https://api.github.example");
	ck_assert_ptr_eq(config_resource_by_uri(c, "urn:consentd:resource:notes"),
	    config_resource(c, "notes"));
	const struct config_scope *s = config_scope(c, "github", "issues:write");
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(s->nprovider, 2);
	ck_assert_str_eq(s->provider[1], "issues:write");
	const struct config_action *ac = config_action(c, "github", "create_issue");
	ck_assert_ptr_nonnull(ac);
	ck_assert_int_eq(ac->approval, APPROVAL_REQUIRED);
	ck_assert_str_eq(ac->route_method, "POST");
	ck_assert_str_eq(ac->route_path, "/repos/{owner}/{repo}/issues");
	free(msgs);
	config_free(c);
}
END_TEST

/* Without the development switch the example is refused: each placeholder secret
 * and each documentation host by its line, never a secret's value. */
START_TEST(test_config_example_placeholders_refused)
{
	struct config *c = NULL;
	char *msgs = NULL;
	ck_assert_int_eq(load_example(NULL, &msgs, &c), CS_ECONFIG);
	ck_assert_ptr_null(c);
	static const char *const want[] = {
		"public_url: consent.example.com in [server] is a documentation domain (RFC 2606)",
		"issuer: idp.example.com in [oidc] is a documentation domain",
		"client_secret: a placeholder in [oidc] (it says REPLACE-ME): give the real secret, "
		    "here or in CONSENTD_OIDC_CLIENT_SECRET; [server] development = true allows it",
		"client_secret: a placeholder in [gateway] (it says REPLACE-ME)",
		"provider_issuer: github.example in [resource.github] is under a reserved top-level "
		    "domain (RFC 2606, 6761)",
		"provider_client_secret: a placeholder in [resource.github] (it says REPLACE-ME): give "
		    "the real secret, here or in CONSENTD_RESOURCE_GITHUB_PROVIDER_CLIENT_SECRET",
		"base_url: api.github.example in [resource.github]",
	};
	for (size_t i = 0; i < sizeof want / sizeof *want; i++)
		ck_assert_msg(strstr(msgs, want[i]) != NULL, "missing '%s' in:\n%s", want[i], msgs);
	ck_assert_ptr_null(strstr(msgs, "REPLACE-ME-"));     /* no secret's value */
	free(msgs);

	/* "false" is the default; a dedicated loopback setup needs no switch. */
	msgs = NULL;
	ck_assert_int_eq(load_example("false", &msgs, &c), CS_ECONFIG);
	free(msgs);
}
END_TEST

/* What counts as a placeholder and a documentation host, key by key. */
START_TEST(test_config_placeholder_kinds)
{
	static const char *const bad[] = {
		"[server]\npublic_url = https://example.org\n",
		"[server]\npublic_url = https://a.b.EXAMPLE.NET.\n",
		"[server]\npublic_url = https://consent.test:8443\n",
		"[server]\npublic_url = https://x.invalid\n",
		"[server]\npublic_url = https://192.0.2.10\n",
		"[server]\npublic_url = https://[2001:db8::1]:443\n",
		"[oidc]\nclient_secret = change-me-please\n",
		"[oidc]\nclient_secret = <your secret>\n",
		"[oidc]\nclient_secret = ....\n",
		"[gateway]\nclient_secret = Replace_Me_with_32_chars_or_so\n",
		"[gateway]\nclient_secret_sha256 = 0000000000000000000000000000000000000000000000000000000000000000\n",
		"[gateway]\nevents_uri = https://hooks.example.com/consentd\n",
		"[database]\nurl = postgresql://consentd@db.example.com/consentd\n",
	};
	static const char *const good[] = {
		"[server]\npublic_url = http://127.0.0.1:8080\n",
		"[server]\npublic_url = http://localhost:8080\n",
		"[server]\npublic_url = https://consent.example.co\n",
		"[server]\npublic_url = https://notexample.com\n",
		"[server]\npublic_url = https://192.0.3.1\n",
		"[oidc]\nclient_secret = 9c8f0a61d5b2e7f43a1c\n",
	};
	char dir[] = "/tmp/test_config_ph_XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char path[256];
	ck_assert_int_eq(str_fmt(path, sizeof path, "%s/c.conf", dir), CS_OK);
	for (size_t i = 0; i < sizeof bad / sizeof *bad + sizeof good / sizeof *good; i++) {
		const bool is_bad = i < sizeof bad / sizeof *bad;
		const char *v = is_bad ? bad[i] : good[i - sizeof bad / sizeof *bad];
		/* Each case sets one key; the others come from a loopback base. */
		const char *sec = v + 1;
		const char *key = strchr(v, '\n') + 1;
		size_t seclen = (size_t)(strchr(v, ']') - sec);
		FILE *f = fopen(path, "w");
		ck_assert_ptr_nonnull(f);
		const char *base[][3] = {
			{ "server", "public_url", "http://127.0.0.1:8080" },
			{ "oidc", "issuer", "http://127.0.0.1:9090" },
			{ "oidc", "client_id", "consentd" },
			{ "oidc", "client_secret", "a-real-oidc-secret" },
			{ "gateway", "client_secret", "a-real-gateway-secret" },
			{ "database", "path", "/tmp/x.db" },
		};
		const char *secs[] = { "server", "oidc", "gateway", "database" };
		for (size_t s = 0; s < sizeof secs / sizeof *secs; s++) {
			fprintf(f, "[%s]\n", secs[s]);
			bool here = strlen(secs[s]) == seclen && strncmp(secs[s], sec, seclen) == 0;
			if (here)
				fputs(key, f);
			for (size_t b = 0; b < sizeof base / sizeof *base; b++) {
				size_t kl = strlen(base[b][1]);
				bool overridden = here && strncmp(key, base[b][1], kl) == 0 && key[kl] == ' ';
				bool sha = here && strcmp(base[b][1], "client_secret") == 0 &&
				    strncmp(key, "client_secret_sha256", 20) == 0;
				bool url = here && strcmp(base[b][1], "path") == 0 &&
				    strncmp(key, "url ", 4) == 0;
				if (strcmp(base[b][0], secs[s]) == 0 && !overridden && !sha && !url)
					fprintf(f, "%s = %s\n", base[b][1], base[b][2]);
			}
		}
		fclose(f);
		char *msgs = NULL;
		size_t n = 0;
		struct config *c = NULL;
		FILE *m = open_memstream(&msgs, &n);
		ck_assert_ptr_nonnull(m);
		enum cs_err e = config_load(path, m, &c);
		fclose(m);
		if (is_bad) {
			ck_assert_msg(e == CS_ECONFIG, "accepted: %s", v);
			ck_assert_msg(strstr(msgs, "development = true allows it") != NULL, "%s: %s", v, msgs);
		} else {
			ck_assert_msg(e == CS_OK, "refused: %s\n%s", v, msgs);
		}
		free(msgs);
		config_free(c);
	}
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* consentd config-keys: one line per key of config_read.c's lists, each with the
 * default its getter has. */
START_TEST(test_config_print_keys)
{
	char *out = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&out, &n);
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(config_print_keys(f), CS_OK);
	fclose(f);
	static const char *const want[] = { "[server] listen = 127.0.0.1:8080\n",
		"[server] public_url (required)\n", "[server] trusted_proxies =\n",
		"[server] development = false\n", "[keys] grant_ttl = 300\n",
		"[oidc] scopes = openid profile email\n", "[limits] address_rate = 20\n",
		"[retention] enabled = true\n", "[database] write_queue = 256\n",
		"[audit] batch_interval_ms = 100\n", "[audit] crossref_interval = 300\n",
		"[resource.NAME] uri = urn:consentd:resource:NAME\n",
		"[action.NAME.ACTION] scope (required)\n", "[action.NAME.ACTION] approval = none\n",
		"[action.NAME.ACTION] standing = none\n", "[action.NAME.ACTION] standing_max = 28800\n",
		"[action.NAME.ACTION] standing_fixed =\n",
		"[mcp.NAME] resource (required)\n", "[enterprise.NAME] issuer (required)\n",
		"[enterprise.NAME] jwks_file =\n", "[enterprise.NAME] jwks_uri =\n",
		"[enterprise.NAME] allow =\n",
		"[action.NAME.ACTION] approval_enforced_by = consentd\n",
		"[login] max_pending (obsolete)\n", "[login] max_pending_per_address (obsolete)\n" };
	for (size_t i = 0; i < sizeof want / sizeof *want; i++)
		ck_assert_msg(strstr(out, want[i]) != NULL, "missing %s in:\n%s", want[i], out);
	size_t lines = 0;
	for (const char *p = out; *p; p++)
		lines += *p == '\n';
	ck_assert_uint_eq(lines, 144);   /* every key of every kind of section ([audit]: 3, [mcp]: 14, [authzen]: 7, [client.NAME]: 6, [mcp.NAME]: 6, [enterprise.NAME]: 4, [resource.NAME]: 19, [action.NAME.ACTION]: 8) */
	free(out);
}
END_TEST

START_TEST(test_config_minimal_defaults)
{
	struct config *c = expect_ok(MINIMAL, NULL);
	ck_assert_str_eq(c->path, "x.conf");
	ck_assert_str_eq(c->listen_host, "127.0.0.1");
	ck_assert_uint_eq(c->listen_port, 8080);
	ck_assert(c->public_url_is_https);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	ck_assert_uint_eq(c->threads, (unsigned)(cpus < 1 ? 1 : cpus * 8));   /* 8 per core */
	ck_assert_uint_eq(c->max_body, 65536);
	ck_assert_uint_eq(c->per_ip_connections, 64);
	ck_assert_uint_eq(c->idle_timeout, 30);
	ck_assert_str_eq(c->log, "stderr");
	ck_assert_str_eq(c->db_path, "/var/lib/consentd/consentd.db");
	ck_assert_str_eq(c->master_key_file, "/etc/consentd/master.key");
	ck_assert_ptr_null(c->master_key_b64);
	ck_assert_int_eq(c->grant_ttl, 300);
	ck_assert_int_eq(c->publish_lead, 3600);
	ck_assert_int_eq(c->oidc_token_endpoint_auth, AUTH_CLIENT_SECRET_BASIC);
	ck_assert_str_eq(c->oidc_scopes, "openid profile email");
	ck_assert_str_eq(c->oidc_subject_claim, "sub");
	ck_assert_str_eq(c->oidc_admin_claim, "groups");
	ck_assert_str_eq(c->oidc_admin_value, "consent-admins");
	ck_assert_int_eq(c->oidc_clock_skew, 60);
	ck_assert_int_eq(c->session_idle_timeout, 1800);
	ck_assert_int_eq(c->session_absolute_timeout, 43200);
	ck_assert_int_eq(c->session_admin_timeout, 3600);
	ck_assert_int_eq(c->consent_request_ttl, 600);
	ck_assert_int_eq(c->consent_interval, 5);
	ck_assert_int_eq(c->consent_deny_cooldown, 86400);
	ck_assert_int_eq(c->consent_max_pending_per_user, 5);
	ck_assert_str_eq(c->gateway_id, "agent-gateway");
	ck_assert(c->gateway_has_secret);
	ck_assert_uint_eq(c->nsubject_audiences, 1);
	ck_assert_str_eq(c->subject_audiences[0], "gateway-app");
	ck_assert_ptr_null(c->subject_audiences[1]);
	ck_assert_uint_eq(c->nsubject_token_types, 3);
	ck_assert_str_eq(c->subject_token_types[0], "id_token");
	ck_assert_str_eq(c->subject_token_types[1], "access_token");
	ck_assert_str_eq(c->subject_token_types[2], "jwt");
	ck_assert_ptr_null(c->subject_token_types[3]);
	ck_assert_ptr_null(c->events_uri);
	ck_assert_ptr_null(c->audit_head_file);
	ck_assert_uint_eq(c->nagents + c->nresources + c->nscopes + c->nactions, 0);
	ck_assert_ptr_null(config_agent(c, "coder"));
	config_free(c);
	config_free(NULL);
}
END_TEST

START_TEST(test_config_dynamic_defaults)
{
	struct config *c = expect_ok(MINIMAL
	    "[agent.bot]\n"
	    "[resource.notes]\n"
	    "[scope.notes.read]\n"
	    "[action.notes.view]\n"
	    "scope = read\n", NULL);
	const struct config_agent *a = config_agent(c, "bot");
	ck_assert_str_eq(a->name, "bot");
	ck_assert_str_eq(a->description, "");
	ck_assert_uint_eq(a->nallow, 0);
	ck_assert_ptr_nonnull(a->allow);
	ck_assert_ptr_null(a->allow[0]);
	ck_assert(!a->offline);
	const struct config_resource *r = config_resource(c, "notes");
	ck_assert_str_eq(r->name, "notes");
	ck_assert_str_eq(r->uri, "urn:consentd:resource:notes");
	ck_assert_int_eq(r->max_consent, 2592000);
	ck_assert_int_eq(r->refresh_margin, 60);
	ck_assert_int_eq(r->token_release, RELEASE_GATEWAY);
	ck_assert_ptr_null(r->provider_issuer);
	ck_assert_ptr_null(r->provider_client_secret);
	ck_assert_ptr_null(r->base_url);
	const struct config_scope *s = config_scope(c, "notes", "read");
	ck_assert_str_eq(s->description, "read");
	ck_assert_uint_eq(s->nprovider, 0);
	const struct config_action *ac = config_action(c, "notes", "view");
	ck_assert_str_eq(ac->description, "view");
	ck_assert_int_eq(ac->approval, APPROVAL_NONE);
	ck_assert_ptr_null(ac->route_method);
	ck_assert_ptr_null(ac->route_path);
	ck_assert_ptr_null(config_action(c, "notes", "edit"));
	ck_assert_ptr_null(config_scope(c, "other", "read"));
	config_free(c);
}
END_TEST

START_TEST(test_config_key_unknown)
{
	expect_error("[server]\n"
	    "public_url = https://consent.example.com\n"
	    "listn = 127.0.0.1:8080\n" MIN_OIDC MIN_GATEWAY, NULL, "x.conf:3: listn: unknown key\n");
}
END_TEST

START_TEST(test_config_section_unknown)
{
	expect_error(MINIMAL "[servre]\nlisten = 1.2.3.4:80\n", NULL,
	    "x.conf:9: [servre]: unknown section\n");
	expect_error(MINIMAL "[agent]\n", NULL, "x.conf:9: [agent]: unknown section");
	expect_error("top = 1\n" MINIMAL, NULL, "x.conf:1: top: key outside of any section");
}
END_TEST

START_TEST(test_config_key_duplicate)
{
	expect_error(MINIMAL "[keys]\ngrant_ttl = 60\ngrant_ttl = 120\n", NULL,
	    "x.conf:11: grant_ttl: duplicate key (first on line 10)");
}
END_TEST

START_TEST(test_config_section_duplicate)
{
	expect_error(MINIMAL "[server]\nthreads = 2\n", NULL,
	    "x.conf:9: [server]: duplicate section (first on line 1)");
}
END_TEST

START_TEST(test_config_limits)
{
	/* The defaults: generous enough for people behind one NAT and a busy gateway. */
	struct config *c = expect_ok(MINIMAL, NULL);
	ck_assert_int_eq(c->limit_address.rate_milli, 20000);
	ck_assert_int_eq(c->limit_address.burst, 100);
	ck_assert_int_eq(c->limit_person.rate_milli, 1000);
	ck_assert_int_eq(c->limit_person.burst, 20);
	/* Issue 34: the gateway's class is off unless set (a cap on the only client
	 * below what one node serves); its burst is ready for when it is set. */
	ck_assert_int_eq(c->limit_gateway.rate_milli, 0);
	ck_assert_int_eq(c->limit_gateway.burst, 2000);
	ck_assert_int_eq(c->limit_auth_failure.rate_milli, 1000);   /* issue 28 */
	ck_assert_int_eq(c->limit_auth_failure.burst, 50);
	ck_assert_int_eq(c->limit_buckets, 65536);
	ck_assert_uint_eq(c->ntrusted_proxies, 0);
	ck_assert_int_eq(c->proxy_header, FORWARDED_XFF);
	config_free(c);
	/* Decimals, 0 = off, and the environment. */
	c = expect_ok(MINIMAL "[limits]\naddress_rate = 0.5\naddress_burst = 3\nperson_rate = 0\n"
	    "gateway_rate = 12.125\nbuckets = 64\nauth_failure_rate = 0.2\nauth_failure_burst = 5\n",
	    (char *[]){ "CONSENTD_LIMITS_PERSON_BURST=7", NULL });
	ck_assert_int_eq(c->limit_address.rate_milli, 500);
	ck_assert_int_eq(c->limit_address.burst, 3);
	ck_assert_int_eq(c->limit_person.rate_milli, 0);
	ck_assert_int_eq(c->limit_person.burst, 7);
	ck_assert_int_eq(c->limit_gateway.rate_milli, 12125);
	ck_assert_int_eq(c->limit_buckets, 64);
	ck_assert_int_eq(c->limit_auth_failure.rate_milli, 200);
	ck_assert_int_eq(c->limit_auth_failure.burst, 5);
	config_free(c);
	/* Bad values, each named with its line. */
	const char *const bad_rates[] = { "-1", "1e3", "1.", ".5", "0.0001", "1,5", "fast", "",
		"0x10", "+2", "1 2", NULL };
	for (size_t i = 0; bad_rates[i] != NULL; i++) {
		char text[512];
		ck_assert_int_eq(str_fmt(text, sizeof text, MINIMAL "[limits]\naddress_rate = %s\n",
		    bad_rates[i]), CS_OK);
		expect_error(text, NULL, "x.conf:10: address_rate: not a rate");
	}
	expect_error(MINIMAL "[limits]\ngateway_rate = 1000001\n", NULL,
	    "x.conf:10: gateway_rate: out of range (expected requests a second from 0 to 1000000");
	expect_error(MINIMAL "[limits]\ngateway_rate = 1000000.5\n", NULL,
	    "x.conf:10: gateway_rate: out of range");
	expect_error(MINIMAL "[limits]\naddress_burst = 0\n", NULL,
	    "x.conf:10: address_burst: out of range (expected an integer from 1 to 1000000)");
	expect_error(MINIMAL "[limits]\nbuckets = 63\n", NULL, "x.conf:10: buckets: out of range");
	expect_error(MINIMAL "[limits]\nrate = 5\n", NULL, "rate");
}
END_TEST

#define PROXIES(v) MIN_SERVER "trusted_proxies = " v "\n" MIN_OIDC MIN_GATEWAY

START_TEST(test_config_trusted_proxies)
{
	struct config *c = expect_ok(PROXIES("127.0.0.1 10.0.0.0/8\t2001:db8::/32") , NULL);
	ck_assert_uint_eq(c->ntrusted_proxies, 3);
	ck_assert(net_prefix_match(c->trusted_proxies, c->ntrusted_proxies, "10.9.8.7"));
	ck_assert(net_prefix_match(c->trusted_proxies, c->ntrusted_proxies, "127.0.0.1"));
	ck_assert(!net_prefix_match(c->trusted_proxies, c->ntrusted_proxies, "127.0.0.2"));
	config_free(c);
	c = expect_ok(MIN_SERVER "trusted_proxies =\nproxy_header = forwarded\n" MIN_OIDC MIN_GATEWAY,
	    NULL);
	ck_assert_uint_eq(c->ntrusted_proxies, 0);
	ck_assert_int_eq(c->proxy_header, FORWARDED_RFC7239);
	config_free(c);
	c = expect_ok(MINIMAL, (char *[]){ "CONSENTD_SERVER_TRUSTED_PROXIES=::1", NULL });
	ck_assert_uint_eq(c->ntrusted_proxies, 1);
	config_free(c);
	expect_error(PROXIES("10.0.0.1/8"), NULL,
	    "x.conf:3: trusted_proxies: '10.0.0.1/8' is not an IPv4 or IPv6 address or network");
	expect_error(PROXIES("127.0.0.1, 10.0.0.0/8"), NULL,
	    "x.conf:3: trusted_proxies: '127.0.0.1,' is not an IPv4");
	expect_error(PROXIES("[::1]"), NULL, "x.conf:3: trusted_proxies: '[::1]' is not");
	expect_error(PROXIES("localhost"), NULL, "x.conf:3: trusted_proxies: 'localhost' is not");
	expect_error(PROXIES("10.0.0.0/33"), NULL, "x.conf:3: trusted_proxies:");
	expect_error(MIN_SERVER "proxy_header = x-real-ip\n" MIN_OIDC MIN_GATEWAY, NULL,
	    "x.conf:3: proxy_header: must be one of: x-forwarded-for, forwarded");
}
END_TEST

START_TEST(test_config_login_bounds_obsolete)
{
	/* Issue #28: no sign-in is stored before the IdP answers, so [login]
	 * max_pending and max_pending_per_address bound nothing.  A configuration
	 * that still has them loads, with one warning a key naming it; any value,
	 * even one the old bounds refused, since nothing reads it. */
	struct config *c = NULL;
	char *msgs = NULL;
	ck_assert_int_eq(load(MINIMAL "[login]\nmax_pending = 4\nmax_pending_per_address = many\n",
	    NULL, &msgs, &c), CS_OK);
	ck_assert_str_eq(msgs,
	    "warning: x.conf:10: max_pending: obsolete and ignored: sign-ins in progress are no "
	    "longer stored at consentd, so there is nothing to bound (remove the key)\n"
	    "warning: x.conf:11: max_pending_per_address: obsolete and ignored: sign-ins in "
	    "progress are no longer stored at consentd, so there is nothing to bound (remove the key)\n");
	free(msgs);
	config_free(c);
	char *env[] = { "CONSENTD_LOGIN_MAX_PENDING_PER_ADDRESS=64", NULL };
	ck_assert_int_eq(load(MINIMAL, env, &msgs, &c), CS_OK);
	ck_assert_msg(strstr(msgs, "warning: CONSENTD_LOGIN_MAX_PENDING_PER_ADDRESS") == msgs &&
	    strstr(msgs, "obsolete and ignored") != NULL, "got: %s", msgs);
	free(msgs);
	config_free(c);
	/* No [login] section, or an empty one: no word. */
	ck_assert_int_eq(load(MINIMAL "[login]\n", NULL, &msgs, &c), CS_OK);
	ck_assert_str_eq(msgs, "");
	free(msgs);
	config_free(c);
	/* Other keys of [login] stay unknown. */
	expect_error(MINIMAL "[login]\nttl = 60\n", NULL, "ttl");
}
END_TEST

START_TEST(test_config_int_bad)
{
	expect_error(MINIMAL "[keys]\ngrant_ttl = ten\n", NULL,
	    "x.conf:10: grant_ttl: not an integer");
	expect_error(MINIMAL "[keys]\ngrant_ttl = 10s\n", NULL, "grant_ttl: not an integer");
	expect_error(MINIMAL "[keys]\ngrant_ttl = \n", NULL, "grant_ttl: not an integer");
	expect_error(MINIMAL "[keys]\ngrant_ttl = +10\n", NULL, "grant_ttl: not an integer");
	expect_error(MINIMAL "[keys]\ngrant_ttl = 0x10\n", NULL, "grant_ttl: not an integer");
	expect_error(MINIMAL "[keys]\npublish_lead = 99999999999999999999999\n", NULL,
	    "x.conf:10: publish_lead: out of range");
	expect_error(MINIMAL "[consent]\ndeny_cooldown = -1\n", NULL,
	    "x.conf:10: deny_cooldown: out of range (expected an integer from 0 to");
	expect_error(MINIMAL "[server]\n", NULL, "duplicate section");
	expect_error(MIN_SERVER "max_body = 1023\n" MIN_OIDC MIN_GATEWAY, NULL,
	    "x.conf:3: max_body: out of range (expected an integer from 1024 to 16777216)");
	expect_error(MIN_SERVER "max_body = 16777217\n" MIN_OIDC MIN_GATEWAY, NULL, "max_body: out of range");
	expect_error(MIN_SERVER "idle_timeout = 0\n" MIN_OIDC MIN_GATEWAY, NULL, "idle_timeout: out of range");
	expect_error(MIN_SERVER "idle_timeout = 3601\n" MIN_OIDC MIN_GATEWAY, NULL, "idle_timeout: out of range");
	expect_error(MIN_SERVER "per_ip_connections = 10001\n" MIN_OIDC MIN_GATEWAY, NULL,
	    "per_ip_connections: out of range");
	struct config *c = expect_ok(MIN_SERVER "max_body = 16777216\nthreads = 3\n"
	    "idle_timeout = 3600\n" MIN_OIDC MIN_GATEWAY, NULL);
	ck_assert_uint_eq(c->max_body, 16777216);
	ck_assert_uint_eq(c->threads, 3);
	ck_assert_uint_eq(c->idle_timeout, 3600);
	config_free(c);
}
END_TEST

START_TEST(test_config_grant_ttl_range)
{
	expect_error(MINIMAL "[keys]\ngrant_ttl = 901\n", NULL,
	    "x.conf:10: grant_ttl: out of range (expected an integer from 1 to 900)");
	expect_error(MINIMAL "[keys]\ngrant_ttl = 0\n", NULL, "grant_ttl: out of range");
	struct config *c = expect_ok(MINIMAL "[keys]\ngrant_ttl = 900\n", NULL);
	ck_assert_int_eq(c->grant_ttl, 900);
	config_free(c);
}
END_TEST

START_TEST(test_config_bool_values)
{
	expect_error(MINIMAL "[agent.a]\noffline = maybe\n", NULL,
	    "x.conf:10: offline: not a boolean");
	expect_error(MINIMAL "[agent.a]\noffline = \n", NULL, "offline: not a boolean");
	static const char *const yes[] = { "true", "yes", "1", "on", "TRUE" };
	static const char *const no[] = { "false", "no", "0", "off", "Off" };
	for (size_t i = 0; i < 5; i++) {
		char text[512];
		ck_assert_int_eq(str_fmt(text, sizeof text, MINIMAL "[agent.a]\noffline = %s\n", yes[i]), CS_OK);
		struct config *c = expect_ok(text, NULL);
		ck_assert(config_agent(c, "a")->offline);
		config_free(c);
		ck_assert_int_eq(str_fmt(text, sizeof text, MINIMAL "[agent.a]\noffline = %s\n", no[i]), CS_OK);
		c = expect_ok(text, NULL);
		ck_assert(!config_agent(c, "a")->offline);
		config_free(c);
	}
}
END_TEST

START_TEST(test_config_listen_forms)
{
	struct config *c = expect_ok(MIN_SERVER "listen = [::1]:9000\n" MIN_OIDC MIN_GATEWAY, NULL);
	ck_assert_str_eq(c->listen_host, "::1");
	ck_assert_uint_eq(c->listen_port, 9000);
	config_free(c);
	c = expect_ok(MIN_SERVER "listen = localhost:1\n" MIN_OIDC MIN_GATEWAY, NULL);
	ck_assert_str_eq(c->listen_host, "localhost");
	ck_assert_uint_eq(c->listen_port, 1);
	config_free(c);
	c = expect_ok(MIN_SERVER "listen = 0.0.0.0:65535\n" MIN_OIDC MIN_GATEWAY, NULL);
	ck_assert_uint_eq(c->listen_port, 65535);
	config_free(c);
	expect_error(MIN_SERVER "listen = 127.0.0.1:0\n" MIN_OIDC MIN_GATEWAY, NULL,
	    "x.conf:3: listen: port must be from 1 to 65535");
	expect_error(MIN_SERVER "listen = 127.0.0.1:65536\n" MIN_OIDC MIN_GATEWAY, NULL, "listen: port");
	expect_error(MIN_SERVER "listen = 127.0.0.1\n" MIN_OIDC MIN_GATEWAY, NULL, "listen: expected HOST:PORT");
	expect_error(MIN_SERVER "listen = example.com:80\n" MIN_OIDC MIN_GATEWAY, NULL,
	    "listen: host must be an IPv4 address");
	expect_error(MIN_SERVER "listen = [zz]:80\n" MIN_OIDC MIN_GATEWAY, NULL, "listen: malformed IPv6");
}
END_TEST

START_TEST(test_config_public_url_path)
{
	expect_error("[server]\npublic_url = https://consent.example.com/consentd\n" MIN_OIDC
	    MIN_GATEWAY, NULL, "x.conf:2: public_url: URL must not have a path");
	struct config *c = expect_ok("[server]\npublic_url = https://consent.example.com:8443/\n"
	    MIN_OIDC MIN_GATEWAY, NULL);
	ck_assert_str_eq(c->public_url, "https://consent.example.com:8443");
	config_free(c);
}
END_TEST

START_TEST(test_config_public_url_query)
{
	expect_error("[server]\npublic_url = https://consent.example.com?x=1\n" MIN_OIDC MIN_GATEWAY,
	    NULL, "x.conf:2: public_url: URL must not have a query");
	expect_error("[server]\npublic_url = https://consent.example.com#top\n" MIN_OIDC MIN_GATEWAY,
	    NULL, "public_url: URL must not have a fragment");
	expect_error("[server]\npublic_url = https://user:pw@consent.example.com\n" MIN_OIDC
	    MIN_GATEWAY, NULL, "public_url: URL must not contain user information");
	expect_error("[server]\npublic_url = consent.example.com\n" MIN_OIDC MIN_GATEWAY,
	    NULL, "public_url: must be an https:// URL");
	expect_error("[server]\npublic_url = https://:443\n" MIN_OIDC MIN_GATEWAY,
	    NULL, "public_url: URL has no host");
	expect_error("[server]\npublic_url = https://x.example:0\n" MIN_OIDC MIN_GATEWAY,
	    NULL, "public_url: URL has a bad port");
}
END_TEST

START_TEST(test_config_public_url_http)
{
	expect_error("[server]\npublic_url = http://consent.example.com\n" MIN_OIDC MIN_GATEWAY,
	    NULL, "x.conf:2: public_url: http:// is allowed only for 127.0.0.1, localhost or [::1]");
	expect_error("[server]\npublic_url = http://127.0.0.2:8080\n" MIN_OIDC MIN_GATEWAY,
	    NULL, "public_url: http:// is allowed only");
	static const char *const ok[] = { "http://127.0.0.1:8080", "http://localhost",
		"http://[::1]:8080" };
	for (size_t i = 0; i < 3; i++) {
		char text[512];
		ck_assert_int_eq(str_fmt(text, sizeof text, "[server]\npublic_url = %s\n" MIN_OIDC MIN_GATEWAY, ok[i]), CS_OK);
		struct config *c = expect_ok(text, NULL);
		ck_assert(!c->public_url_is_https);
		ck_assert_str_eq(c->public_url, ok[i]);
		config_free(c);
	}
	expect_error("[server]\nthreads = 1\n" MIN_OIDC MIN_GATEWAY, NULL,
	    "x.conf:1: public_url: required in [server]");
}
END_TEST

START_TEST(test_config_public_url_equals_issuer)
{
	expect_error("[server]\npublic_url = https://idp.example.com\n" MIN_OIDC MIN_GATEWAY, NULL,
	    "x.conf:2: public_url: must differ from [oidc] issuer");
	expect_error("[server]\npublic_url = https://idp.example.com\n"
	    "[oidc]\nissuer = https://idp.example.com/\nclient_id = c\nclient_secret = s\n"
	    MIN_GATEWAY, NULL, "public_url: must differ from [oidc] issuer");
}
END_TEST

START_TEST(test_config_oidc_checks)
{
	expect_error(MIN_SERVER MIN_GATEWAY, NULL, "x.conf: issuer: required in [oidc]");
	expect_error(MIN_SERVER "[oidc]\nclient_id = c\nclient_secret = s\n" MIN_GATEWAY, NULL,
	    "x.conf:3: issuer: required in [oidc]");
	expect_error(MIN_SERVER "[oidc]\nissuer = http://idp.example.com\nclient_id = c\n"
	    "client_secret = s\n" MIN_GATEWAY, NULL, "x.conf:4: issuer: http:// is allowed only");
	expect_error(MIN_SERVER "[oidc]\nissuer = https://idp.example.com\nclient_secret = s\n"
	    MIN_GATEWAY, NULL, "client_id: required in [oidc]");
	expect_error(MIN_SERVER "[oidc]\nissuer = https://idp.example.com\nclient_id = c\n"
	    MIN_GATEWAY, NULL, "x.conf:3: client_secret: required in [oidc]");
	expect_error(MINIMAL "[oidc]\n", NULL, "duplicate section");
	expect_error(MIN_SERVER MIN_OIDC "token_endpoint_auth = private_key_jwt\n" MIN_GATEWAY, NULL,
	    "x.conf:7: token_endpoint_auth: must be one of: client_secret_basic, client_secret_post");
	expect_error(MIN_SERVER MIN_OIDC "scopes = profile email\n" MIN_GATEWAY, NULL,
	    "scopes: must include openid");
	struct config *c = expect_ok(MIN_SERVER "[oidc]\nissuer = http://127.0.0.1:9000/realms/x\n"
	    "client_id = consentd\nclient_secret = s\ntoken_endpoint_auth = client_secret_post\n"
	    MIN_GATEWAY, NULL);
	ck_assert_str_eq(c->oidc_issuer, "http://127.0.0.1:9000/realms/x");
	ck_assert_int_eq(c->oidc_token_endpoint_auth, AUTH_CLIENT_SECRET_POST);
	config_free(c);
}
END_TEST

START_TEST(test_config_subject_claim_reassignable)
{
	static const char *const bad[] = { "email", "preferred_username", "upn", "name",
		"phone_number" };
	for (size_t i = 0; i < 5; i++) {
		char text[512], want[128];
		ck_assert_int_eq(str_fmt(text, sizeof text, MIN_SERVER MIN_OIDC "subject_claim = %s\n" MIN_GATEWAY, bad[i]), CS_OK);
		ck_assert_int_eq(str_fmt(want, sizeof want, "x.conf:7: subject_claim: '%s' can be reassigned", bad[i]), CS_OK);
		expect_error(text, NULL, want);
	}
}
END_TEST

START_TEST(test_config_subject_claim_warns)
{
	struct config *c = NULL;
	char *msgs = NULL;
	enum cs_err e = load(MIN_SERVER MIN_OIDC "subject_claim = oid\n" MIN_GATEWAY, NULL, &msgs, &c);
	ck_assert_int_eq(e, CS_OK);
	ck_assert_str_eq(c->oidc_subject_claim, "oid");
	ck_assert_msg(strncmp(msgs, "warning: x.conf:7: subject_claim: ", 34) == 0, "got: %s", msgs);
	free(msgs);
	config_free(c);
	/* sub itself: no warning at all */
	e = load(MIN_SERVER MIN_OIDC "subject_claim = sub\n" MIN_GATEWAY, NULL, &msgs, &c);
	ck_assert_int_eq(e, CS_OK);
	ck_assert_str_eq(msgs, "");
	free(msgs);
	config_free(c);
}
END_TEST

START_TEST(test_config_line_too_long)
{
	char text[1024];
	char value[200];
	memset(value, 'a', sizeof value);
	/* "log = " is 6 characters: 194 more make a 200-character line */
	ck_assert_int_eq(str_fmt(text, sizeof text, MIN_SERVER "log = /%.193s\n" MIN_OIDC MIN_GATEWAY, value), CS_OK);
	expect_error(text, NULL, "x.conf:3: line too long (max 199 characters)");
	/* 199 characters is fine */
	ck_assert_int_eq(str_fmt(text, sizeof text, MIN_SERVER "log = /%.192s\n" MIN_OIDC MIN_GATEWAY, value), CS_OK);
	struct config *c = expect_ok(text, NULL);
	ck_assert_uint_eq(strlen(c->log), 193);
	config_free(c);
	/* a long comment is refused too, and later lines keep their numbers */
	ck_assert_int_eq(str_fmt(text, sizeof text, "; %.198s\n" MIN_SERVER "listn = 1\n" MIN_OIDC MIN_GATEWAY, value), CS_OK);
	struct config *c2 = NULL;
	char *msgs = NULL;
	ck_assert_int_eq(load(text, NULL, &msgs, &c2), CS_ECONFIG);
	ck_assert_ptr_nonnull(strstr(msgs, "x.conf:1: line too long"));
	ck_assert_ptr_nonnull(strstr(msgs, "x.conf:4: listn: unknown key"));
	free(msgs);
}
END_TEST

START_TEST(test_config_syntax_errors)
{
	expect_error(MINIMAL "[keys]\njust words\n", NULL, "x.conf:10: expected 'key = value'");
	expect_error(MINIMAL "[keys\n", NULL, "x.conf:9: section header without closing ']'");
	expect_error(MINIMAL "[keys] trailing\n", NULL, "x.conf:9: unexpected text after ']'");
	expect_error(MINIMAL "[keys]\n= 5\n", NULL, "x.conf:10: missing key name");
	expect_error(MINIMAL "[agent.a]\nname = \x01x\n", NULL, "x.conf:10: name: contains a control character");
	expect_error(MINIMAL "[agent.a]\nname = \xff\n", NULL, "x.conf:10: name: is not valid UTF-8");
	const char nul[] = MINIMAL "[keys]\ngrant_ttl = 1\0 2\n";
	struct config *c = NULL;
	ck_assert_int_eq(config_load_string(nul, sizeof nul - 1, "x.conf", NULL, NULL, &c), CS_ECONFIG);
	ck_assert_ptr_null(c);
}
END_TEST

START_TEST(test_config_continuation_and_comments)
{
	struct config *c = expect_ok(MINIMAL
	    "[resource.notes]\n"
	    "[scope.notes.read]\n"
	    "[scope.notes.write]   ; comment\n"
	    "# hash comment\n"
	    "[agent.a]\n"
	    "name = Agent A ; inline comment\n"
	    "allow = notes:read\n"
	    "   notes:write\n", NULL);
	const struct config_agent *a = config_agent(c, "a");
	ck_assert_str_eq(a->name, "Agent A");
	ck_assert_uint_eq(a->nallow, 2);
	ck_assert_str_eq(a->allow[1], "notes:write");
	config_free(c);
}
END_TEST

START_TEST(test_config_section_names)
{
	expect_error(MINIMAL "[agent.a.b]\n", NULL, "x.conf:9: [agent.a.b]: the agent name must be");
	expect_error(MINIMAL "[resource.n]\n[scope.n.a.b]\n", NULL,
	    "x.conf:10: [scope.n.a.b]: the scope name must be");
	expect_error(MINIMAL "[scope.n]\n", NULL, "x.conf:9: [scope.n]: expected [scope.RESOURCE.SCOPE]");
	expect_error(MINIMAL "[action.n.x:y]\n", NULL, "[action.n.x:y]: the action name must be");
	expect_error(MINIMAL "[agent.]\n", NULL, "[agent.]: the agent name must be");
	expect_error(MINIMAL "[agent.a b]\n", NULL, "[agent.a b]: the agent name must be");
	expect_error(MINIMAL "[agent.a]\nallow =\nscope = x\n", NULL, "x.conf:11: scope: unknown key");
}
END_TEST

START_TEST(test_config_env_override)
{
	char *env[] = { "PATH=/bin", "CONSENTD_SERVER_LISTEN=127.0.0.1:9999",
		"CONSENTD_KEYS_GRANT_TTL=120", "CONSENTD_CONFIG=/etc/x.conf",
		"CONSENTD_BIN=build/consentd", NULL };
	struct config *c = expect_ok(MINIMAL "[keys]\ngrant_ttl = 60\n", env);
	ck_assert_uint_eq(c->listen_port, 9999);
	ck_assert_int_eq(c->grant_ttl, 120);
	config_free(c);
	/* errors in an environment value name the variable */
	char *bad[] = { "CONSENTD_KEYS_GRANT_TTL=901", NULL };
	expect_error(MINIMAL, bad, "CONSENTD_KEYS_GRANT_TTL: grant_ttl: out of range");
	/* env=NULL reads nothing, not even the process environment */
	c = expect_ok(MINIMAL, NULL);
	ck_assert_uint_eq(c->listen_port, 8080);
	config_free(c);
	c = expect_ok(MINIMAL, no_env);
	ck_assert_uint_eq(c->listen_port, 8080);
	config_free(c);
}
END_TEST

START_TEST(test_config_env_secret)
{
	char *env[] = { "CONSENTD_OIDC_CLIENT_SECRET=from-env",
		"CONSENTD_GATEWAY_CLIENT_SECRET=gateway-secret-from-env",
		"CONSENTD_RESOURCE_GH_PROVIDER_CLIENT_SECRET=provider-secret",
		"CONSENTD_SCOPE_GH_ISSUES_READ_DESCRIPTION=Read issues (env)",
		"CONSENTD_KEYS_MASTER_KEY=AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", NULL };
	struct config *c = expect_ok(MIN_SERVER
	    "[oidc]\nissuer = https://idp.example.com\nclient_id = consentd\n"
	    "[resource.gh]\nprovider_issuer = https://gh.example\nprovider_client_id = x\n"
	    "[scope.gh.issues:read]\n", env);
	ck_assert_str_eq(c->oidc_client_secret, "from-env");
	ck_assert_str_eq(c->gateway_client_secret, "gateway-secret-from-env");
	ck_assert_str_eq(config_resource(c, "gh")->provider_client_secret, "provider-secret");
	ck_assert_str_eq(config_scope(c, "gh", "issues:read")->description, "Read issues (env)");
	ck_assert_str_eq(c->master_key_b64, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");
	config_free(c);
	char *badkey[] = { "CONSENTD_KEYS_MASTER_KEY=c2hvcnQ=", NULL };
	expect_error(MINIMAL, badkey, "CONSENTD_KEYS_MASTER_KEY: master_key: must be base64 of exactly 32 bytes");
	char *empty[] = { "CONSENTD_OIDC_CLIENT_SECRET=", NULL };
	expect_error(MINIMAL, empty, "CONSENTD_OIDC_CLIENT_SECRET: client_secret: must not be empty");
}
END_TEST

START_TEST(test_config_env_unknown)
{
	char *env[] = { "CONSENTD_SERVER_LISTN=127.0.0.1:1", "HOME=/root", NULL };
	expect_error(MINIMAL, env, "CONSENTD_SERVER_LISTN: unknown configuration variable");
	/* a dynamic section that is not in the file cannot be made from the environment */
	char *env2[] = { "CONSENTD_AGENT_GHOST_NAME=Ghost", NULL };
	expect_error(MINIMAL, env2, "CONSENTD_AGENT_GHOST_NAME: unknown configuration variable");
	char *env3[] = { "CONSENTD_=x", "CONSENTD_OIDC", NULL };
	expect_error(MINIMAL, env3, "CONSENTD_: unknown configuration variable");
	expect_error(MINIMAL, env3, "CONSENTD_OIDC: unknown configuration variable");
	/* two sections that map to the same variable name */
	char *env4[] = { "CONSENTD_AGENT_A_B_NAME=x", NULL };
	expect_error(MINIMAL "[agent.a-b]\n[agent.a_b]\n", env4, "CONSENTD_AGENT_A_B_NAME: ambiguous");
}
END_TEST

START_TEST(test_config_gateway_secret)
{
	expect_error(MIN_SERVER MIN_OIDC "[gateway]\nclient_secret = gateway-secret-0123456789\n"
	    "client_secret_sha256 = " "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n",
	    NULL, "x.conf:9: client_secret_sha256: give client_secret or client_secret_sha256, not both");
	expect_error(MIN_SERVER MIN_OIDC "[gateway]\nid = gw\n", NULL,
	    "x.conf:7: client_secret: required in [gateway]");
	expect_error(MIN_SERVER MIN_OIDC, NULL, "x.conf: client_secret: required in [gateway]");
	expect_error(MIN_SERVER MIN_OIDC "[gateway]\nclient_secret = short\n", NULL,
	    "x.conf:8: client_secret: must be at least 16 characters");
	expect_error(MIN_SERVER MIN_OIDC "[gateway]\nclient_secret_sha256 = abc\n", NULL,
	    "client_secret_sha256: must be 64 hexadecimal characters");
	expect_error(MIN_SERVER MIN_OIDC "[gateway]\nclient_secret_sha256 = "
	    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg\n", NULL,
	    "client_secret_sha256: must be 64 hexadecimal characters");

	/* the hash of the secret and the given hash end up the same */
	unsigned char want[32];
	unsigned int len = 0;
	ck_assert_int_eq(EVP_Digest("gateway-secret-0123456789", 25, want, &len, EVP_sha256(), NULL), 1);
	struct config *c = expect_ok(MINIMAL, NULL);
	ck_assert(c->gateway_has_secret);
	ck_assert_str_eq(c->gateway_client_secret, "gateway-secret-0123456789");
	ck_assert_mem_eq(c->gateway_secret_sha256, want, 32);
	config_free(c);
	char text[1024];
	char hex[65];
	for (size_t i = 0; i < 32; i++)
		ck_assert_int_eq(str_fmt(hex + 2 * i, 3, "%02X", want[i]), CS_OK);
	ck_assert_int_eq(str_fmt(text, sizeof text, MIN_SERVER MIN_OIDC "[gateway]\nclient_secret_sha256 = %s\n", hex), CS_OK);
	c = expect_ok(text, NULL);
	ck_assert(c->gateway_has_secret);
	ck_assert_ptr_null(c->gateway_client_secret);
	ck_assert_mem_eq(c->gateway_secret_sha256, want, 32);
	config_free(c);
}
END_TEST

START_TEST(test_config_gateway_private_key_jwt)
{
	char *dir = tu_tmpdir();
	char *good = tu_path(dir, "gw.jwks"), *bad = tu_path(dir, "bad.jwks");
	char text[2048];
	FILE *f = fopen(good, "w");
	ck_assert_ptr_nonnull(f);
	fputs(V_JWKS, f);
	fclose(f);
	f = fopen(bad, "w");
	ck_assert_ptr_nonnull(f);
	fputs("{\"keys\":[{\"kty\":\"oct\",\"k\":\"c2VjcmV0\"}]}", f);
	fclose(f);

	/* the default: Basic only, no keys */
	struct config *c = expect_ok(MINIMAL, NULL);
	ck_assert(c->gateway_auth_basic);
	ck_assert(!c->gateway_auth_private_key_jwt);
	ck_assert_int_eq(c->gateway_clock_skew, 60);
	ck_assert(!c->gateway_require_dpop);
	ck_assert(!c->gateway_dpop_nonce);
	config_free(c);

	ck_assert_int_eq(str_fmt(text, sizeof text, MIN_SERVER MIN_OIDC "[gateway]\ntoken_endpoint_auth = private_key_jwt\n"
	    "jwks_file = %s\n", good), CS_OK);
	c = expect_ok(text, NULL);
	ck_assert(!c->gateway_auth_basic);
	ck_assert(c->gateway_auth_private_key_jwt);
	ck_assert_ptr_nonnull(c->gateway_jwks_json);
	config_free(c);

	ck_assert_int_eq(str_fmt(text, sizeof text, MINIMAL "token_endpoint_auth = client_secret_basic private_key_jwt\n"
	    "jwks_file = %s\n", good), CS_OK);
	c = expect_ok(text, NULL);
	ck_assert(c->gateway_auth_basic && c->gateway_auth_private_key_jwt);
	config_free(c);

	expect_error(MIN_SERVER MIN_OIDC "[gateway]\ntoken_endpoint_auth = private_key_jwt\n", NULL,
	    "jwks_file: required with private_key_jwt");
	ck_assert_int_eq(str_fmt(text, sizeof text, MINIMAL "token_endpoint_auth = private_key_jwt\njwks_file = %s\n", good), CS_OK);
	expect_error(text, NULL, "client_secret: not used without client_secret_basic");
	ck_assert_int_eq(str_fmt(text, sizeof text, MINIMAL "jwks_file = %s\n", good), CS_OK);
	expect_error(text, NULL, "jwks_file: used only with private_key_jwt");
	ck_assert_int_eq(str_fmt(text, sizeof text, MIN_SERVER MIN_OIDC "[gateway]\ntoken_endpoint_auth = private_key_jwt\n"
	    "jwks_file = %s\n", bad), CS_OK);
	expect_error(text, NULL, "private or symmetric key");
	ck_assert_int_eq(str_fmt(text, sizeof text, MIN_SERVER MIN_OIDC "[gateway]\ntoken_endpoint_auth = private_key_jwt\n"
	    "jwks_file = %s/none.jwks\n", dir), CS_OK);
	expect_error(text, NULL, "cannot open");
	ck_assert_int_eq(str_fmt(text, sizeof text, MIN_SERVER MIN_OIDC "[gateway]\ntoken_endpoint_auth = private_key_jwt\n"
	    "jwks_file = %s\njwks_uri = https://gw.example.com/jwks\n", good), CS_OK);
	expect_error(text, NULL, "give jwks_file or jwks_uri, not both");
	c = expect_ok(MIN_SERVER MIN_OIDC "[gateway]\ntoken_endpoint_auth = private_key_jwt\n"
	    "jwks_uri = https://gw.example.com/jwks\n", NULL);
	ck_assert_str_eq(c->gateway_jwks_uri, "https://gw.example.com/jwks");
	ck_assert_ptr_null(c->gateway_jwks_json);
	config_free(c);
	expect_error(MINIMAL "jwks_uri = https://gw.example.com/jwks\n", NULL,
	    "jwks_uri: used only with private_key_jwt");
	expect_error(MIN_SERVER MIN_OIDC "[gateway]\ntoken_endpoint_auth = private_key_jwt\n"
	    "jwks_uri = ftp://gw.example.com/jwks\n", NULL, "jwks_uri: must be an https:// URL");
	expect_error(MINIMAL "token_endpoint_auth = client_secret_post\n", NULL,
	    "'client_secret_post' is not a valid method");
	expect_error(MINIMAL "clock_skew = 3600\n", NULL, "clock_skew");
	expect_error(MINIMAL "require_dpop = maybe\n", NULL, "require_dpop: not a boolean");
	c = expect_ok(MINIMAL "require_dpop = true\ndpop_nonce = on\n", NULL);
	ck_assert(c->gateway_require_dpop && c->gateway_dpop_nonce);
	config_free(c);
	free(good);
	free(bad);
	tu_rmdir(dir);
}
END_TEST

START_TEST(test_config_gateway_audiences)
{
	expect_error(MINIMAL "subject_audiences = gateway-app agent-gateway\n", NULL,
	    "x.conf:9: subject_audiences: 'agent-gateway' is the gateway id");
	expect_error(MINIMAL "id = gw\nsubject_audiences = gw\n", NULL,
	    "x.conf:10: subject_audiences: 'gw' is the gateway id");
	expect_error(MINIMAL "subject_audiences = consentd\n", NULL,
	    "x.conf:9: subject_audiences: 'consentd' is consentd's own [oidc] client_id");
	expect_error(MINIMAL "subject_audiences =\n", NULL,
	    "subject_audiences: must name at least one audience");
	expect_error(MINIMAL "subject_audiences = a a\n", NULL, "subject_audiences: 'a' is listed twice");
	expect_error(MINIMAL "subject_token_types = id_token saml2\n", NULL,
	    "x.conf:9: subject_token_types: 'saml2' is not a valid token type");
	expect_error(MINIMAL "events_uri = http://events.example.com/x\n", NULL,
	    "x.conf:9: events_uri: http:// is allowed only");
	struct config *c = expect_ok(MINIMAL "subject_audiences = app1  app2\n"
	    "subject_token_types = jwt\nevents_uri = https://gw.example.com/events?x=1\n", NULL);
	ck_assert_uint_eq(c->nsubject_audiences, 2);
	ck_assert_str_eq(c->subject_audiences[1], "app2");
	ck_assert_uint_eq(c->nsubject_token_types, 1);
	ck_assert_str_eq(c->events_uri, "https://gw.example.com/events?x=1");
	config_free(c);
}
END_TEST

START_TEST(test_config_metrics)
{
	/* None by default: /metrics only for the gateway, on the main listener. */
	struct config *c = expect_ok(MINIMAL, NULL);
	ck_assert_ptr_null(c->metrics_token);
	ck_assert_ptr_null(c->metrics_listen_host);
	config_free(c);
	c = expect_ok(MINIMAL "[metrics]\ntoken = scrape-token-0123456789\nlisten = 127.0.0.1:9464\n", NULL);
	ck_assert_str_eq(c->metrics_token, "scrape-token-0123456789");
	ck_assert_str_eq(c->metrics_listen_host, "127.0.0.1");
	ck_assert_uint_eq(c->metrics_listen_port, 9464);
	config_free(c);
	c = expect_ok(MINIMAL "[metrics]\nlisten = [::1]:9464\n", NULL);
	ck_assert_str_eq(c->metrics_listen_host, "::1");
	config_free(c);
	/* From the environment too. */
	char *const env[] = { (char *)"CONSENTD_METRICS_TOKEN=env-scrape-token-0123456789", NULL };
	c = expect_ok(MINIMAL, env);
	ck_assert_str_eq(c->metrics_token, "env-scrape-token-0123456789");
	config_free(c);

	/* A token file: its one line, a final newline (or CRLF) dropped. */
	char path[] = "/tmp/consentd-metrics-token-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "file-scrape-token-0123456789\r\n", 30), 30);
	close(fd);
	char text[1024];
	ck_assert_int_eq(str_fmt(text, sizeof text, MINIMAL "[metrics]\ntoken_file = %s\n", path), CS_OK);
	c = expect_ok(text, NULL);
	ck_assert_str_eq(c->metrics_token, "file-scrape-token-0123456789");
	config_free(c);
	/* Two lines, or spaces, are not one token. */
	fd = open(path, O_WRONLY | O_TRUNC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "file-scrape-token-0123456789\nsecond-line-0123456\n", 48), 48);
	close(fd);
	expect_error(text, NULL, "x.conf:10: token_file: '");
	unlink(path);
	expect_error(text, NULL, "x.conf:10: token_file: cannot open");

	expect_error(MINIMAL "[metrics]\ntoken = short\n", NULL,
	    "x.conf:10: token: must be 16 to 512 printable characters without spaces");
	expect_error(MINIMAL "[metrics]\ntoken = has a space in the token\n", NULL,
	    "x.conf:10: token: must be 16");
	expect_error(MINIMAL "[metrics]\ntoken = scrape-token-0123456789\ntoken_file = /x\n", NULL,
	    "x.conf:11: token_file: give token or token_file, not both");
	expect_error(MINIMAL "[metrics]\nlisten = 9464\n", NULL, "x.conf:10: listen: expected HOST:PORT");
	expect_error(MINIMAL "[metrics]\nlisten = 127.0.0.1:8080\n", NULL,
	    "x.conf:10: listen: must differ from [server] listen");
	expect_error(MINIMAL "[metrics]\nport = 9464\n", NULL, "x.conf:10: port");
}
END_TEST

START_TEST(test_config_audit_head_file)
{
	struct config *c = expect_ok(MINIMAL "[audit]\nhead_file = /var/lib/consentd/heads\n", NULL);
	ck_assert_str_eq(c->audit_head_file, "/var/lib/consentd/heads");
	config_free(c);
	c = expect_ok(MINIMAL "[audit]\nhead_file =\n", NULL);
	ck_assert_ptr_null(c->audit_head_file);
	config_free(c);
	char *env[] = { "CONSENTD_AUDIT_HEAD_FILE=/srv/heads", NULL };
	c = expect_ok(MINIMAL, env);
	ck_assert_str_eq(c->audit_head_file, "/srv/heads");
	config_free(c);
	expect_error(MINIMAL "[audit]\nhead_fil = /x\n", NULL, "x.conf:10: head_fil: unknown key");
}
END_TEST

START_TEST(test_config_agent_allow_unknown)
{
	expect_error(MINIMAL "[resource.notes]\n[scope.notes.read]\n[agent.a]\nallow = notes:read docs:read\n",
	    NULL, "x.conf:12: allow: 'docs:read': no [resource.docs] section");
	expect_error(MINIMAL "[resource.notes]\n[scope.notes.read]\n[agent.a]\nallow = notes:write\n",
	    NULL, "x.conf:12: allow: 'notes:write': no [scope.notes.write] section");
	expect_error(MINIMAL "[agent.a]\nallow = notes\n", NULL, "allow: 'notes' is not RESOURCE:SCOPE");
	/* the first colon separates resource and scope */
	struct config *c = expect_ok(MINIMAL "[resource.gh]\n[scope.gh.issues:read]\n[agent.a]\n"
	    "allow = gh:issues:read\n", NULL);
	ck_assert_str_eq(config_agent(c, "a")->allow[0], "gh:issues:read");
	config_free(c);
}
END_TEST

START_TEST(test_config_action_unknown_scope)
{
	expect_error(MINIMAL "[resource.notes]\n[scope.notes.read]\n[action.notes.edit]\nscope = write\n",
	    NULL, "x.conf:12: scope: no [scope.notes.write] section");
	expect_error(MINIMAL "[action.notes.edit]\nscope = write\n", NULL,
	    "x.conf:9: [action.notes.edit]: no [resource.notes] section");
	expect_error(MINIMAL "[resource.notes]\n[action.notes.edit]\n", NULL,
	    "x.conf:10: scope: required in [action.notes.edit]");
	expect_error(MINIMAL "[scope.notes.read]\n", NULL,
	    "x.conf:9: [scope.notes.read]: no [resource.notes] section");
	expect_error(MINIMAL "[resource.notes]\n[scope.notes.read]\nprovider = repo\n", NULL,
	    "x.conf:11: provider: [resource.notes] has no provider");
	expect_error(MINIMAL "[resource.notes]\n[scope.notes.read]\n[action.notes.x]\nscope = read\n"
	    "approval = sometimes\n", NULL, "x.conf:13: approval: must be one of: none, required");
}
END_TEST

/* Issue #32: standing rules per action -- none by default; exact or match only
 * with approval = required; standing_max within bounds; standing_fixed names
 * plausible top-level parameters, and only for match. */
START_TEST(test_config_action_standing)
{
#define A MINIMAL "[resource.n]\n[scope.n.r]\n[action.n.a]\nscope = r\n"
	struct config *c = expect_ok(A, NULL);
	const struct config_action *a = config_action(c, "n", "a");
	ck_assert_int_eq(a->standing, STANDING_NONE);
	ck_assert_int_eq(a->standing_max, 28800);
	ck_assert_uint_eq(a->nstanding_fixed, 0);
	config_free(c);
	c = expect_ok(A "approval = required\nstanding = match\nstanding_max = 3600\n"
	    "standing_fixed = repo owner\n", NULL);
	a = config_action(c, "n", "a");
	ck_assert_int_eq(a->standing, STANDING_MATCH);
	ck_assert_int_eq(a->standing_max, 3600);
	ck_assert_uint_eq(a->nstanding_fixed, 2);
	ck_assert_str_eq(a->standing_fixed[0], "repo");
	ck_assert_str_eq(a->standing_fixed[1], "owner");
	ck_assert_ptr_null(a->standing_fixed[2]);
	config_free(c);
	c = expect_ok(A "approval = required\nstanding = exact\n", NULL);
	ck_assert_int_eq(config_action(c, "n", "a")->standing, STANDING_EXACT);
	config_free(c);
	expect_error(A "standing = exact\n", NULL,
	    "x.conf:13: standing: needs approval = required");
	expect_error(A "approval = required\nstanding = always\n", NULL,
	    "x.conf:14: standing: must be one of: none, exact, match");
	expect_error(A "approval = required\nstanding = exact\nstanding_max = 59\n", NULL,
	    "x.conf:15: standing_max:");
	expect_error(A "approval = required\nstanding = exact\nstanding_max = 2592001\n", NULL,
	    "x.conf:15: standing_max:");
	expect_error(A "approval = required\nstanding = exact\nstanding_fixed = repo\n", NULL,
	    "x.conf:15: standing_fixed: needs standing = match");
	expect_error(A "approval = required\nstanding = match\nstanding_fixed = re/po\n", NULL,
	    "x.conf:15: standing_fixed: 're/po' is not a valid parameter name");
	expect_error(A "approval = required\nstanding = match\nstanding_fixed = repo repo\n", NULL,
	    "x.conf:15: standing_fixed: 'repo' is listed twice");
#undef A
}
END_TEST

START_TEST(test_config_route_checks)
{
	expect_error(MINIMAL "[resource.notes]\n[scope.notes.read]\n[action.notes.list]\nscope = read\n"
	    "route = GET /notes\n", NULL, "x.conf:13: route: a route needs base_url in [resource.notes]");
#define R MINIMAL "[resource.n]\nbase_url = https://api.example.com/v1/\n[scope.n.r]\n[action.n.a]\nscope = r\n"
	expect_error(R "route = FETCH /x\n", NULL, "x.conf:14: route: expected 'METHOD /path'");
	expect_error(R "route = GET x\n", NULL, "route: the path must start with '/'");
	expect_error(R "route = GET /x/{a}/{a}\n", NULL, "route: capture {a} appears twice");
	expect_error(R "route = GET /x/{a\n", NULL, "route: a capture must be {NAME}");
	expect_error(R "route = GET /x/../y\n", NULL, "route: the path must not contain empty, '.' or '..'");
	expect_error(R "route = GET /x?y=1\n", NULL, "route: the path must be printable ASCII");
	expect_error(R "route = GET /x/{id}\n[action.n.b]\nscope = r\nroute = GET /x/{id}\n", NULL,
	    "x.conf:17: route: overlaps the route of [action.n.a]: one request could match both");
	/* Overlapping, not only equal: a literal and a capture at one position. */
	expect_error(R "route = GET /x/{id}/y\n[action.n.b]\nscope = r\nroute = GET /x/me/{z}\n", NULL,
	    "x.conf:17: route: overlaps the route of [action.n.a]");
	expect_error(R "route = GET /{a}\n[action.n.b]\nscope = r\nroute = GET /x\n", NULL,
	    "x.conf:17: route: overlaps the route of [action.n.a]");
	expect_error(R "route = GET /users/\n", NULL, "route: the path must not end with '/'");
	expect_error(R "route = GET /a%2Fb\n", NULL, "route: the path must not hold '%'");
	/* A capture is a whole segment. */
	expect_error(R "route = GET /x/a{id}\n", NULL, "route: a capture must be a whole segment");
	expect_error(R "route = GET /x/{id}.json\n", NULL, "route: a capture must be a whole segment");
	/* Not overlapping: another method, another literal, another number of segments. */
	struct config *c2 = expect_ok(R "route = GET /x/{id}\n[action.n.b]\nscope = r\n"
	    "route = POST /x/{id}\n[action.n.c]\nscope = r\nroute = GET /y/{id}\n"
	    "[action.n.d]\nscope = r\nroute = GET /x/{id}/z\n[action.n.e]\nscope = r\nroute = GET /x\n",
	    NULL);
	config_free(c2);
	struct config *c = expect_ok(R "route = DELETE /notes/{id}/tags/{tag_2}\n", NULL);
	const struct config_action *a = config_action(c, "n", "a");
	ck_assert_str_eq(a->route_method, "DELETE");
	ck_assert_str_eq(a->route_path, "/notes/{id}/tags/{tag_2}");
	ck_assert_str_eq(config_resource(c, "n")->base_url, "https://api.example.com/v1");
	config_free(c);
#undef R
}
END_TEST

START_TEST(test_config_resource_checks)
{
	expect_error(MINIMAL "[resource.a]\nuri = not a uri\n", NULL, "x.conf:10: uri: must be an absolute URI");
	expect_error(MINIMAL "[resource.a]\nuri = https://x.example/#f\n", NULL, "uri: must not have a fragment");
	expect_error(MINIMAL "[resource.a]\nuri = https://x.example/api\n[resource.b]\nuri = https://x.example/api\n",
	    NULL, "x.conf:12: uri: same as the uri of [resource.a]");
	expect_error(MINIMAL "[resource.a]\nuri = urn:consentd:resource:b\n[resource.b]\n", NULL,
	    "x.conf:11: uri: the default uri of [resource.b] is already the uri of [resource.a]");
	expect_error(MINIMAL "[resource.a]\nprovider_client_id = x\n", NULL,
	    "x.conf:9: provider_issuer: required in [resource.a]");
	expect_error(MINIMAL "[resource.a]\nprovider_issuer = https://p.example\n", NULL,
	    "x.conf:9: provider_client_id: required in [resource.a]");
	expect_error(MINIMAL "[resource.a]\nprovider_token_endpoint = https://p.example/t\n"
	    "provider_client_id = x\n", NULL, "provider_issuer: required in [resource.a]");
	expect_error(MINIMAL "[resource.a]\nbase_url = http://api.example.com\n", NULL,
	    "x.conf:10: base_url: http:// is allowed only");
	expect_error(MINIMAL "[resource.a]\ntoken_release = never\n", NULL,
	    "x.conf:10: token_release: never (proxy only) needs base_url");
	expect_error(MINIMAL "[resource.a]\ntoken_release = never\nbase_url =\n", NULL,
	    "token_release: never (proxy only) needs base_url");
	expect_error(MINIMAL "[resource.a]\ntoken_release = always\n", NULL,
	    "token_release: must be one of: gateway, never");
	expect_error(MINIMAL "[resource.a]\nmax_consent = 0\n", NULL, "max_consent: out of range");
	struct config *c = expect_ok(MINIMAL "[resource.a]\nuri = https://api.example.com/a\n"
	    "provider_authorization_endpoint = https://p.example/auth\n"
	    "provider_token_endpoint = https://p.example/token?v=2\n"
	    "provider_client_id = cid\ntoken_release = never\nbase_url = https://api.example.com\n"
	    "refresh_margin = 0\n", NULL);
	const struct config_resource *r = config_resource_by_uri(c, "https://api.example.com/a");
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(r->id, "a");
	ck_assert_int_eq(r->token_release, RELEASE_NEVER);
	ck_assert_str_eq(r->provider_token_endpoint, "https://p.example/token?v=2");
	ck_assert_ptr_null(r->provider_issuer);
	ck_assert_int_eq(r->refresh_margin, 0);
	ck_assert_ptr_null(config_resource_by_uri(c, "urn:consentd:resource:a"));
	config_free(c);
	/* empty provider keys are as good as absent */
	c = expect_ok(MINIMAL "[resource.a]\nprovider_issuer =\nprovider_client_secret =\n", NULL);
	ck_assert_ptr_null(config_resource(c, "a")->provider_issuer);
	ck_assert_ptr_null(config_resource(c, "a")->provider_client_secret);
	config_free(c);
}
END_TEST

START_TEST(test_config_errors_all_reported)
{
	struct config *c = NULL;
	char *msgs = NULL;
	ck_assert_int_eq(load("[server]\nlistn = 1\nthreads = x\n[bogus]\n[keys]\ngrant_ttl = 0\n",
	    NULL, &msgs, &c), CS_ECONFIG);
	ck_assert_ptr_nonnull(strstr(msgs, "x.conf:2: listn: unknown key\n"
	    "x.conf:3: threads: not an integer"));
	ck_assert_ptr_nonnull(strstr(msgs, "x.conf:4: [bogus]: unknown section\n"));
	ck_assert_ptr_nonnull(strstr(msgs, "x.conf:6: grant_ttl: out of range"));
	ck_assert_ptr_nonnull(strstr(msgs, "x.conf:1: public_url: required in [server]"));
	ck_assert_ptr_nonnull(strstr(msgs, "x.conf: issuer: required in [oidc]"));
	free(msgs);
	/* errs may be NULL */
	ck_assert_int_eq(config_load_string("[x]\n", 4, "x.conf", NULL, NULL, &c), CS_ECONFIG);
	ck_assert_ptr_null(c);
}
END_TEST

START_TEST(test_config_missing_file)
{
	struct config *c = NULL;
	char *msgs = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&msgs, &n);
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(config_load("/nonexistent/consentd.conf", f, &c), CS_ECONFIG);
	fclose(f);
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(strstr(msgs, "/nonexistent/consentd.conf: cannot open"));
	free(msgs);
}
END_TEST

START_TEST(test_config_file_line_numbers)
{
	char *dir = tu_tmpdir();
	char *path = tu_path(dir, "c.conf");
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(MINIMAL "[keys]\r\ngrant_ttl = 1000\r\n", f);
	fclose(f);
	struct config *c = NULL;
	char *msgs = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&msgs, &n);
	ck_assert_int_eq(config_load(path, m, &c), CS_ECONFIG);
	fclose(m);
	char want[512];
	ck_assert_int_eq(str_fmt(want, sizeof want, "%s:10: grant_ttl: out of range", path), CS_OK);
	ck_assert_msg(strstr(msgs, want) != NULL, "got: %s", msgs);
	free(msgs);
	free(path);
	tu_rmdir(dir);
}
END_TEST

/* [consent] default_duration: 86400 unless given, 1 .. 315360000 like max_consent, from
 * the environment too; longer than a resource's max_consent is a warning naming the
 * resource (its page preselects max_consent), and only when the key was written. */
/* The endpoints preset fills for [resource.r] with more lines of config. */
static void ck_preset_urls(const char *more, const char *authz, const char *token,
    const char *revoke, const char *sites)
{
	char text[2048];
	ck_assert_int_eq(str_fmt(text, sizeof text, "%s[resource.r]\nprovider_client_id = cli:ent\n%s",
	    MINIMAL, more), CS_OK);
	struct config *c = expect_ok(text, NULL);
	const struct config_resource *r = config_resource(c, "r");
	ck_assert_str_eq(r->provider_authorization_endpoint, authz);
	ck_assert_str_eq(r->provider_token_endpoint, token);
	if (revoke == NULL)
		ck_assert_ptr_null(r->provider_revocation_endpoint);
	else
		ck_assert_str_eq(r->provider_revocation_endpoint, revoke);
	if (sites == NULL)
		ck_assert_ptr_null(r->provider_sites_endpoint);
	else
		ck_assert_str_eq(r->provider_sites_endpoint, sites);
	ck_assert_ptr_null(r->provider_issuer);
	config_free(c);
}

/* credential = api_key (docs/providers.md "API keys"): exactly one of header
 * and query, a quoted prefix keeps its space, no provider, base_url needed,
 * token_release never (an explicit gateway is refused: the gateway never
 * receives a key); the api_key_* keys only with api_key. */
#define KEYED "[resource.k]\ncredential = api_key\nbase_url = https://api.vendor.example\n"
START_TEST(test_config_resource_api_key)
{
	struct config *c = expect_ok(MINIMAL KEYED "api_key_header = X-Api-Key\n"
	    "api_key_prefix = \"Bearer \"\n", no_env);
	const struct config_resource *r = config_resource(c, "k");
	ck_assert_int_eq(r->credential, CREDENTIAL_API_KEY);
	ck_assert_str_eq(r->api_key_header, "X-Api-Key");
	ck_assert_ptr_null(r->api_key_query);
	ck_assert_str_eq(r->api_key_prefix, "Bearer ");
	ck_assert_int_eq(r->token_release, RELEASE_NEVER);
	config_free(c);
	c = expect_ok(MINIMAL KEYED "api_key_query = key\ntoken_release = never\n", no_env);
	r = config_resource(c, "k");
	ck_assert_str_eq(r->api_key_query, "key");
	ck_assert_str_eq(r->api_key_prefix, "");
	config_free(c);
	/* The default stays OAuth. */
	c = expect_ok(MINIMAL "[resource.n]\n", no_env);
	ck_assert_int_eq(config_resource(c, "n")->credential, CREDENTIAL_OAUTH);
	config_free(c);
}
END_TEST

START_TEST(test_config_resource_api_key_refused)
{
	expect_error(MINIMAL KEYED "api_key_header = X-Api-Key\ntoken_release = gateway\n", NULL,
	    "token_release: gateway is refused with credential = api_key in [resource.k]: the "
	    "gateway never receives an API key");
	expect_error(MINIMAL KEYED, NULL, "needs exactly one of api_key_header and api_key_query");
	expect_error(MINIMAL KEYED "api_key_header = X-Api-Key\napi_key_query = key\n", NULL,
	    "needs exactly one of api_key_header and api_key_query");
	expect_error(MINIMAL "[resource.k]\ncredential = api_key\napi_key_query = key\n", NULL,
	    "base_url: required in [resource.k] with credential = api_key");
	expect_error(MINIMAL KEYED "api_key_query = key\npreset = github\nprovider_client_id = x\n",
	    NULL, "credential: api_key in [resource.k] takes no provider or preset");
	expect_error(MINIMAL KEYED "api_key_header = Cookie\n", NULL, "api_key_header: must be a header name");
	expect_error(MINIMAL KEYED "api_key_header = Consentd-Grant\n", NULL, "api_key_header: must be");
	expect_error(MINIMAL KEYED "api_key_header = X Key\n", NULL, "api_key_header: must be");
	expect_error(MINIMAL KEYED "api_key_query = a&b\n", NULL, "api_key_query: must be a query");
	expect_error(MINIMAL KEYED "api_key_query = k\napi_key_prefix = \"a\"b\"\n", NULL,
	    "api_key_prefix: must be printable ASCII");
	expect_error(MINIMAL KEYED "api_key_query = k\ncredential = apikey\n", NULL, "credential");
	expect_error(MINIMAL "[resource.n]\napi_key_header = X-Api-Key\n", NULL,
	    "api_key_header: only with credential = api_key in [resource.n]");
}
END_TEST

START_TEST(test_config_resource_preset_endpoints)
{
	ck_preset_urls("preset = github\n", "https://github.com/login/oauth/authorize",
	    "https://github.com/login/oauth/access_token",
	    "https://api.github.com/applications/cli%3Aent/token", NULL);
	/* GitHub Enterprise Server: the API under /api/v3. */
	ck_preset_urls("preset = github-app\nprovider_base_url = https://ghe.example\n",
	    "https://ghe.example/login/oauth/authorize", "https://ghe.example/login/oauth/access_token",
	    "https://ghe.example/api/v3/applications/cli%3Aent/token", NULL);
	ck_preset_urls("preset = google\n", "https://accounts.google.com/o/oauth2/v2/auth",
	    "https://oauth2.googleapis.com/token", "https://oauth2.googleapis.com/revoke", NULL);
	ck_preset_urls("preset = microsoft\n",
	    "https://login.microsoftonline.com/common/oauth2/v2.0/authorize",
	    "https://login.microsoftonline.com/common/oauth2/v2.0/token", NULL, NULL);
	ck_preset_urls("preset = microsoft\nprovider_base_url = https://login.microsoftonline.com/contoso\n",
	    "https://login.microsoftonline.com/contoso/oauth2/v2.0/authorize",
	    "https://login.microsoftonline.com/contoso/oauth2/v2.0/token", NULL, NULL);
	ck_preset_urls("preset = slack\n", "https://slack.com/oauth/v2/authorize",
	    "https://slack.com/api/oauth.v2.access", "https://slack.com/api/auth.revoke", NULL);
	ck_preset_urls("preset = gitlab\nprovider_base_url = https://gitlab.internal.example\n",
	    "https://gitlab.internal.example/oauth/authorize",
	    "https://gitlab.internal.example/oauth/token",
	    "https://gitlab.internal.example/oauth/revoke", NULL);
	ck_preset_urls("preset = atlassian\n", "https://auth.atlassian.com/authorize",
	    "https://auth.atlassian.com/oauth/token", NULL,
	    "https://api.atlassian.com/oauth/token/accessible-resources");
	/* Explicit keys override the preset, one by one. */
	ck_preset_urls("preset = gitlab\nprovider_token_endpoint = https://tokens.example/t\n"
	    "provider_revocation_endpoint = https://tokens.example/r\n",
	    "https://gitlab.com/oauth/authorize", "https://tokens.example/t",
	    "https://tokens.example/r", NULL);
}
END_TEST

#define ATL "[resource.jira]\npreset = atlassian\nprovider_client_id = cid\ntoken_release = never\n"
START_TEST(test_config_resource_cloud_id_and_proactive_refresh)
{
	/* base_url's {cloud_id}: preset atlassian only, one whole segment, once. */
	struct config *c = expect_ok(MINIMAL ATL
	    "base_url = https://api.atlassian.com/ex/jira/{cloud_id}/\nproactive_refresh = yes\n", NULL);
	const struct config_resource *r = config_resource(c, "jira");
	ck_assert_str_eq(r->base_url, "https://api.atlassian.com/ex/jira/{cloud_id}");
	ck_assert(r->proactive_refresh);
	config_free(c);
	c = expect_ok(MINIMAL ATL "base_url = https://api.atlassian.com/ex/confluence/{cloud_id}/wiki\n",
	    NULL);
	ck_assert(!config_resource(c, "jira")->proactive_refresh);     /* off by default */
	config_free(c);
	expect_error(MINIMAL "[resource.gl]\npreset = gitlab\nprovider_client_id = cid\n"
	    "base_url = https://gitlab.com/{cloud_id}\n", NULL, "{cloud_id} needs preset = atlassian");
	expect_error(MINIMAL ATL "base_url = https://api.atlassian.com/ex/jira/x{cloud_id}\n", NULL,
	    "{cloud_id} must be one whole path segment, once");
	expect_error(MINIMAL ATL "base_url = https://api.atlassian.com/{cloud_id}/{cloud_id}\n", NULL,
	    "{cloud_id} must be one whole path segment, once");
	expect_error(MINIMAL ATL "base_url = https://api.atlassian.com/ex/jira/{site}\n", NULL,
	    "the only placeholder base_url may hold is {cloud_id}");
	/* proactive_refresh: a boolean, and only where there is a provider. */
	expect_error(MINIMAL ATL "base_url = https://api.atlassian.com/x\nproactive_refresh = soon\n",
	    NULL, "proactive_refresh: not a boolean");
	expect_error(MINIMAL "[resource.n]\nproactive_refresh = true\n", NULL,
	    "proactive_refresh: needs a provider in [resource.n]");
}
END_TEST

START_TEST(test_config_resource_preset)
{
	/* A preset is a provider: no issuer or endpoints needed, the client id is. */
	struct config *c = expect_ok(MINIMAL "[resource.gl]\npreset = gitlab\n"
	    "provider_base_url = https://gitlab.internal.example/\nprovider_client_id = cid\n", NULL);
	const struct config_resource *r = config_resource(c, "gl");
	ck_assert_int_eq(r->preset, PRESET_GITLAB);
	ck_assert_str_eq(r->provider_base_url, "https://gitlab.internal.example");
	ck_assert_ptr_null(r->provider_issuer);
	config_free(c);
	c = expect_ok(MINIMAL "[resource.gh]\npreset = github-app\nprovider_client_id = cid\n"
	    "provider_token_endpoint = https://ghe.example/t\n", NULL);
	ck_assert_int_eq(config_resource(c, "gh")->preset, PRESET_GITHUB_APP);
	ck_assert_str_eq(config_resource(c, "gh")->provider_token_endpoint, "https://ghe.example/t");
	config_free(c);
	c = expect_ok(MINIMAL "[resource.n]\nname = N\n", NULL);
	ck_assert_int_eq(config_resource(c, "n")->preset, PRESET_NONE);
	ck_assert_ptr_null(config_resource(c, "n")->provider_base_url);
	config_free(c);
	/* `consentd -n`: an unknown preset names the valid ones. */
	expect_error(MINIMAL "[resource.a]\npreset = bitbucket\nprovider_client_id = cid\n", NULL,
	    "preset: must be one of: none, github, github-app, google, microsoft, slack, gitlab, "
	    "atlassian");
	expect_error(MINIMAL "[resource.a]\npreset = gitlab\n", NULL,
	    "provider_client_id: required in [resource.a] when a provider is configured");
	expect_error(MINIMAL "[resource.a]\nprovider_base_url = https://gitlab.example\n"
	    "provider_issuer = https://gitlab.example\nprovider_client_id = cid\n", NULL,
	    "provider_base_url: needs a preset in [resource.a]");
	expect_error(MINIMAL "[resource.a]\npreset = gitlab\nprovider_client_id = cid\n"
	    "provider_base_url = ftp://gitlab.example\n", NULL, "provider_base_url:");
}
END_TEST

START_TEST(test_config_default_duration)
{
	struct config *c = expect_ok(MINIMAL, NULL);
	ck_assert_int_eq(c->consent_default_duration, 86400);
	config_free(c);
	c = expect_ok(MINIMAL "[consent]\ndefault_duration = 604800\n", NULL);
	ck_assert_int_eq(c->consent_default_duration, 604800);
	config_free(c);
	char *const env[] = { "CONSENTD_CONSENT_DEFAULT_DURATION=3600", NULL };
	c = expect_ok(MINIMAL "[consent]\ndefault_duration = 604800\n", env);
	ck_assert_int_eq(c->consent_default_duration, 3600);
	config_free(c);
	expect_error(MINIMAL "[consent]\ndefault_duration = 0\n", NULL,
	    "x.conf:10: default_duration: out of range (expected an integer from 1 to 315360000)");
	expect_error(MINIMAL "[consent]\ndefault_duration = 315360001\n", NULL,
	    "x.conf:10: default_duration: out of range");
	expect_error(MINIMAL "[consent]\ndefault_duration = 1d\n", NULL,
	    "x.conf:10: default_duration: not an integer");
	expect_error(MINIMAL "[consent]\ndefault_duration = -5\n", NULL, "x.conf:10: default_duration: ");

	char *msgs = NULL;
	ck_assert_int_eq(load(MINIMAL "[consent]\ndefault_duration = 604800\n"
	    "[resource.a]\nmax_consent = 86400\n[resource.b]\nmax_consent = 604800\n", NULL, &msgs, &c),
	    CS_OK);
	ck_assert_int_eq(c->consent_default_duration, 604800);
	ck_assert_str_eq(msgs, "warning: x.conf:10: default_duration: 604800 is longer than "
	    "max_consent of [resource.a] (86400): its consent page preselects 86400\n");
	free(msgs);
	config_free(c);
	/* The built-in default over a short max_consent: lowered without a word. */
	ck_assert_int_eq(load(MINIMAL "[resource.a]\nmax_consent = 3600\n", NULL, &msgs, &c), CS_OK);
	ck_assert_str_eq(msgs, "");
	free(msgs);
	config_free(c);
}
END_TEST

/* Issue #32 item 6: approval = required (and a policy line with a condition)
 * on an action whose resource has a provider and releases its tokens to the
 * gateway is refused, unless approval_enforced_by = gateway says the gateway
 * enforces it; proxy-only resources, actions without approval and resources
 * without a provider load. */
#define GH_RES "[resource.gh]\nprovider_issuer = https://gh.example\nprovider_client_id = x\n" \
	"[scope.gh.w]\n"
START_TEST(test_config_approval_enforced_by)
{
	expect_error(MINIMAL GH_RES "[action.gh.create_issue]\nscope = w\napproval = required\n", NULL,
	    "approval: required, but [resource.gh] has token_release = gateway: consentd "
	    "releases the provider token to the gateway, which may already hold the same token, so "
	    "only the gateway can hold it to the approved call; use token_release = never "
	    "(consentd's proxy or MCP gateway enforces each approval), or state "
	    "approval_enforced_by = gateway");
	expect_error(MINIMAL GH_RES "[action.gh.del]\nscope = w\npolicy.2 = deny if branch == main\n",
	    NULL, "policy.2: a condition on the call's parameters, but [resource.gh] has "
	    "token_release = gateway");
	expect_error(MINIMAL GH_RES "[action.gh.create_issue]\nscope = w\napproval = required\n"
	    "approval_enforced_by = proxy\n", NULL,
	    "approval_enforced_by: must be one of: consentd, gateway");
	struct config *c = expect_ok(MINIMAL GH_RES
	    "[action.gh.create_issue]\nscope = w\napproval = required\napproval_enforced_by = gateway\n"
	    "policy.1 = deny if branch == main\n"
	    /* An unconditional line needs no parameters: consentd enforces it (no token goes). */
	    "[action.gh.list_issues]\nscope = w\napproval = none\npolicy.1 = approve\n"
	    "[resource.px]\nprovider_issuer = https://gh.example\nprovider_client_id = y\n"
	    "token_release = never\nbase_url = https://api.gh.example\n"
	    "[scope.px.w]\n"
	    "[action.px.create_issue]\nscope = w\napproval = required\n"
	    "policy.1 = deny if body.title prefix WIP\n"
	    "[resource.plain]\n[scope.plain.w]\n"
	    "[action.plain.do]\nscope = w\napproval = required\n", NULL);
	ck_assert_int_eq(c->actions[0].approval_enforced_by, ENFORCER_GATEWAY);
	ck_assert_uint_eq(c->actions[0].npolicy, 1);
	ck_assert_int_eq(c->actions[2].approval_enforced_by, ENFORCER_CONSENTD);
	config_free(c);

	/* The example configuration's github create_issue states it. */
	char *msgs = NULL;
	ck_assert_int_eq(load_example("true", &msgs, &c), CS_OK);
	free(msgs);
	const struct config_action *ac = config_action(c, "github", "create_issue");
	ck_assert_ptr_nonnull(ac);
	ck_assert_int_eq(ac->approval, APPROVAL_REQUIRED);
	ck_assert_int_eq(ac->approval_enforced_by, ENFORCER_GATEWAY);
	config_free(c);
}
END_TEST

/* Issue #32 item 4: [action.R.A] policy.N lines, parsed at load (a bad line
 * names its key and what is wrong), kept in order of N; policy.0, policy.100
 * and policy.01 are unknown keys; a condition on path.NAME of a routed
 * action names a capture of its route. */
#define PX_RES "[resource.px]\nprovider_issuer = https://gh.example\nprovider_client_id = y\n" \
	"token_release = never\nbase_url = https://api.gh.example\n[scope.px.w]\n"
START_TEST(test_config_policy_lines)
{
	struct config *c = expect_ok(MINIMAL PX_RES
	    "[action.px.push]\nscope = w\nroute = POST /repos/{owner}/{repo}/git/refs\n"
	    "policy.10 = approve if path.owner == acme\n"
	    "policy.2 = deny if body.ref == refs/heads/main\n"
	    "policy.99 = deny if query.force in (\"1\", true)\n", NULL);
	const struct config_action *ac = &c->actions[0];
	ck_assert_uint_eq(ac->npolicy, 3);
	ck_assert_int_eq(ac->policy[0].number, 2);
	ck_assert_int_eq(ac->policy[0].verdict, POLICY_DENY);
	ck_assert_int_eq(ac->policy[1].number, 10);
	ck_assert_int_eq(ac->policy[1].verdict, POLICY_APPROVE);
	ck_assert_int_eq(ac->policy[2].number, 99);
	config_free(c);

	expect_error(MINIMAL PX_RES "[action.px.a]\nscope = w\npolicy.0 = deny\n", NULL,
	    "policy.0: unknown key");
	expect_error(MINIMAL PX_RES "[action.px.a]\nscope = w\npolicy.100 = deny\n", NULL,
	    "policy.100: unknown key");
	expect_error(MINIMAL PX_RES "[action.px.a]\nscope = w\npolicy.01 = deny\n", NULL,
	    "policy.01: unknown key");
	expect_error(MINIMAL PX_RES "[agent.a]\npolicy.1 = deny\n", NULL,
	    "policy.1: unknown key");
	expect_error(MINIMAL PX_RES "[action.px.a]\nscope = w\npolicy.1 = deny\npolicy.1 = approve\n",
	    NULL, "policy.1: duplicate key (first on line");
	expect_error(MINIMAL PX_RES "[action.px.a]\nscope = w\npolicy.3 = allow if x == 1\n", NULL,
	    "policy.3: allow if x == 1: a line starts with approve or deny (a line is "
	    "approve or deny [if PARAM OP VALUE and ...]; OP is == prefix in < <= > >=)");
	expect_error(MINIMAL PX_RES "[action.px.a]\nscope = w\npolicy.1 = deny if n < ten\n", NULL,
	    "policy.1: n: a numeric bound takes a number");
	expect_error(MINIMAL PX_RES "[action.px.a]\nscope = w\nroute = GET /repos/{owner}/{repo}\n"
	    "policy.1 = deny if path.branch == main\n", NULL,
	    "policy.1: path.branch: the route /repos/{owner}/{repo} has no {branch}");
	/* Only the capture's name counts, not a longer one that starts with it. */
	expect_error(MINIMAL PX_RES "[action.px.a]\nscope = w\nroute = GET /repos/{owner}/{repo}\n"
	    "policy.1 = deny if path.own == main\n", NULL, "has no {own}");
}
END_TEST

START_TEST(test_config_log_level)
{
	struct config *c = expect_ok(MINIMAL, NULL);
	ck_assert_int_eq(c->log_level, LOG_INFO);
	config_free(c);
	static const char *const names[] = { "debug", "info", "warn", "error" };
	for (int i = 0; i < 4; i++) {
		char text[512];
		ck_assert_int_eq(str_fmt(text, sizeof text, "[server]\npublic_url = https://consent.example.com\n"
		    "log = /var/log/consentd.log\nlog_level = %s\n" MIN_OIDC MIN_GATEWAY, names[i]), CS_OK);
		c = expect_ok(text, NULL);
		ck_assert_int_eq((int)c->log_level, i);
		ck_assert_str_eq(c->log, "/var/log/consentd.log");
		config_free(c);
	}
	expect_error("[server]\npublic_url = https://consent.example.com\nlog_level = loud\n"
	    MIN_OIDC MIN_GATEWAY, NULL, "x.conf:3: log_level: must be one of: debug, info, warn, error");
	char *const env[] = { (char *)"CONSENTD_SERVER_LOG_LEVEL=warn", NULL };
	c = expect_ok(MINIMAL, env);
	ck_assert_int_eq(c->log_level, LOG_WARN);
	config_free(c);
}
END_TEST

START_TEST(test_config_retention)
{
	struct config *c = expect_ok(MINIMAL, NULL);
	ck_assert(c->retention_enabled);
	ck_assert_int_eq(c->retention_interval, 300);
	ck_assert_int_eq(c->retention_batch_size, 500);
	ck_assert_int_eq(c->retention_grace, 3600);
	ck_assert_int_eq(c->retention_revoked_consent_days, 90);
	ck_assert_int_eq(c->retention_audit_days, 0);
	ck_assert_int_eq(c->retention_audit_keep, 0);
	config_free(c);
	c = expect_ok(MINIMAL "[retention]\nenabled = false\ninterval = 1\nbatch_size = 7\n"
	    "grace = 0\nrevoked_consent_days = 1\naudit_days = 30\naudit_keep = 1000\n", NULL);
	ck_assert(!c->retention_enabled);
	ck_assert_int_eq(c->retention_interval, 1);
	ck_assert_int_eq(c->retention_batch_size, 7);
	ck_assert_int_eq(c->retention_grace, 0);
	ck_assert_int_eq(c->retention_revoked_consent_days, 1);
	ck_assert_int_eq(c->retention_audit_days, 30);
	ck_assert_int_eq(c->retention_audit_keep, 1000);
	config_free(c);
	expect_error(MINIMAL "[retention]\ninterval = 0\n", NULL,
	    "x.conf:10: interval: out of range (expected an integer from 1 to 86400)");
	expect_error(MINIMAL "[retention]\nbatch_size = 0\n", NULL,
	    "x.conf:10: batch_size: out of range");
	expect_error(MINIMAL "[retention]\nbatch_size = lots\n", NULL,
	    "x.conf:10: batch_size: not an integer");
	expect_error(MINIMAL "[retention]\ngrace = -1\n", NULL, "x.conf:10: grace: out of range");
	expect_error(MINIMAL "[retention]\nrevoked_consent_days = 0\n", NULL,
	    "x.conf:10: revoked_consent_days: out of range");
	expect_error(MINIMAL "[retention]\naudit_days = -3\n", NULL,
	    "x.conf:10: audit_days: out of range");
	expect_error(MINIMAL "[retention]\naudit_keep = -1\n", NULL,
	    "x.conf:10: audit_keep: out of range");
	expect_error(MINIMAL "[retention]\nenabled = maybe\n", NULL, "x.conf:10: enabled:");
	expect_error(MINIMAL "[retention]\nkeep = 3\n", NULL, "x.conf:10:");
}
END_TEST

/* [client.NAME]: an MCP client the operator registers (issue #30): defaults,
 * every refusal with its key, and the lookup by client_id. */
/* [enterprise.NAME] (issue #30 item 6): an enterprise IdP, its keys (ES256 and
 * RS256 only) and the admin's policy of (client, MCP endpoint) pairs. */
#define ENT_BASE MINIMAL "[resource.notes]\n[scope.notes.read]\n[scope.notes.write]\n" \
	"[resource.wiki]\n[scope.wiki.read]\n[mcp.notes]\nresource = notes\n[mcp.wiki]\nresource = wiki\n"
START_TEST(test_config_enterprise)
{
	char dir[] = "/tmp/consentd-cfgent-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char *good = tu_path(dir, "idp.jwks"), *mixed = tu_path(dir, "mixed.jwks");
	char text[4096];
	FILE *f = fopen(good, "w");
	ck_assert_ptr_nonnull(f);
	fputs("{\"keys\":[{\"kty\":\"EC\",\"x\":\"1vu3JrF4lwpTYHxuS99cqOLrdAowSTXUd6eYo4FLVuU\","
	    "\"y\":\"q_Yl3VQjLmSeziQiNE3hHfiXrFMQV5ihs2NdXTeVh2w\",\"crv\":\"P-256\",\"kid\":\"es\","
	    "\"alg\":\"ES256\",\"use\":\"sig\"}]}", f);
	fclose(f);
	f = fopen(mixed, "w");
	ck_assert_ptr_nonnull(f);
	fputs(V_JWKS, f);                /* holds a PS256 and an EdDSA key */
	fclose(f);

	ck_assert_int_eq(str_fmt(text, sizeof text, ENT_BASE "[enterprise.corp]\n"
	    "issuer = https://idp.corp.example\njwks_file = %s\nallow = mcp-ide=notes:read,write "
	    "https://tools.example/c=x.json=wiki:read\n", good), CS_OK);
	struct config *c = expect_ok(text, NULL);
	ck_assert_uint_eq(c->nenterprises, 1);
	const struct config_enterprise *e = config_enterprise_by_issuer(c, "https://idp.corp.example");
	ck_assert_ptr_nonnull(e);
	ck_assert_str_eq(e->id, "corp");
	ck_assert_ptr_nonnull(e->jwks_json);
	ck_assert_uint_eq(e->nallow, 2);
	const struct config_enterprise_allow *a = config_enterprise_allows(e, "mcp-ide", "notes");
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(a->nscopes, 2);
	ck_assert_str_eq(a->scopes[0], "read");
	ck_assert_str_eq(a->scopes[1], "write");
	ck_assert_ptr_null(a->scopes[2]);
	/* A client-id URL holding '=': split at the last one. */
	a = config_enterprise_allows(e, "https://tools.example/c=x.json", "wiki");
	ck_assert_ptr_nonnull(a);
	ck_assert_str_eq(a->scopes[0], "read");
	ck_assert_ptr_null(config_enterprise_allows(e, "mcp-ide", "wiki"));   /* pairs, not products */
	ck_assert_ptr_null(config_enterprise_by_issuer(c, "https://idp.corp.example/"));
	ck_assert_ptr_null(config_enterprise_by_issuer(c, NULL));
	config_free(c);

	/* Refusals, each naming its key. */
	expect_error(ENT_BASE "[enterprise.corp]\nallow = a=notes:read\n", NULL,
	    "issuer: required in [enterprise.corp]");
	expect_error(ENT_BASE "[enterprise.corp]\nissuer = https://idp.corp.example\n", NULL,
	    "jwks_file: give jwks_file or jwks_uri (the IdP's public keys), exactly one");
	ck_assert_int_eq(str_fmt(text, sizeof text, ENT_BASE "[enterprise.corp]\n"
	    "issuer = https://idp.corp.example\njwks_file = %s\njwks_uri = https://idp.corp.example/"
	    "jwks\n", good), CS_OK);
	expect_error(text, NULL, "exactly one");
	expect_error(ENT_BASE "[enterprise.corp]\nissuer = https://idp.corp.example\n"
	    "jwks_uri = http://idp.corp.example/jwks\n", NULL, "jwks_uri");
	c = expect_ok(ENT_BASE "[enterprise.corp]\nissuer = https://idp.corp.example\n"
	    "jwks_uri = https://idp.corp.example/jwks\n", NULL);
	ck_assert_str_eq(c->enterprises[0].jwks_uri, "https://idp.corp.example/jwks");
	ck_assert_ptr_null(c->enterprises[0].jwks_json);
	ck_assert_uint_eq(c->enterprises[0].nallow, 0);
	config_free(c);
	ck_assert_int_eq(str_fmt(text, sizeof text, ENT_BASE "[enterprise.corp]\n"
	    "issuer = https://idp.corp.example\njwks_file = %s\n", mixed), CS_OK);
	expect_error(text, NULL, "mixed.jwks");          /* PS256 is no enterprise IdP's alg here */
	const char *bad_allow[][2] = {
		{ "mcp-ide", "expected CLIENT_ID=MCP_NAME:SCOPE,SCOPE" },
		{ "mcp-ide=notes", "expected CLIENT_ID=MCP_NAME:SCOPE,SCOPE" },
		{ "=notes:read", "expected CLIENT_ID=MCP_NAME:SCOPE,SCOPE" },
		{ "mcp-ide=notes:", "expected CLIENT_ID=MCP_NAME:SCOPE,SCOPE" },
		{ "mcp-ide=no/tes:read", "is not an [mcp.NAME] name" },
		{ "mcp-ide=notes:read,,write", "is not a scope name" },
		{ "mcp-ide=gone:read", "no [mcp.gone] section" },
		{ "mcp-ide=notes:admin", "[mcp.notes]: no [scope.notes.admin] section" },
		{ "mcp-ide=notes:read mcp-ide=notes:write", "the pair is listed twice" },
	};
	for (size_t i = 0; i < sizeof bad_allow / sizeof *bad_allow; i++) {
		ck_assert_int_eq(str_fmt(text, sizeof text, ENT_BASE "[enterprise.corp]\n"
		    "issuer = https://idp.corp.example\njwks_file = %s\nallow = %s\n", good,
		    bad_allow[i][0]), CS_OK);
		expect_error(text, NULL, bad_allow[i][1]);
	}
	ck_assert_int_eq(str_fmt(text, sizeof text, ENT_BASE "[enterprise.a]\n"
	    "issuer = https://idp.corp.example\njwks_file = %s\n[enterprise.b]\n"
	    "issuer = https://idp.corp.example\njwks_file = %s\n", good, good), CS_OK);
	expect_error(text, NULL, "[enterprise.b] has the issuer of [enterprise.a]");
	ck_assert_int_eq(str_fmt(text, sizeof text, ENT_BASE "[enterprise.corp]\n"
	    "issuer = http://idp.corp.example\njwks_file = %s\n", good), CS_OK);
	expect_error(text, NULL, "issuer");              /* http only on loopback */
	unlink(good);
	unlink(mixed);
	free(good);
	free(mixed);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* [mcp.NAME]'s gateway keys (issue #31): defaults, values, and every
 * refusal naming its key. */
START_TEST(test_config_mcp_gateway)
{
	struct config *c = expect_ok(ENT_BASE, NULL);
	const struct config_mcp_endpoint *m = config_mcp_endpoint(c, "notes");
	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_null(m->upstream);
	ck_assert_int_eq(m->upstream_timeout, 30);
	ck_assert_int_eq(m->unmapped, UNMAPPED_REFUSE);
	ck_assert_ptr_null(m->unmapped_scope);
	ck_assert(!m->log_arguments);
	config_free(c);
	c = expect_ok(MINIMAL "[resource.notes]\n[scope.notes.read]\n[mcp.notes]\nresource = notes\n"
	    "upstream = http://127.0.0.1:8095/mcp\nupstream_timeout = 5\nunmapped = allow\n"
	    "unmapped_scope = read\nlog_arguments = true\n", NULL);
	m = config_mcp_endpoint(c, "notes");
	ck_assert_str_eq(m->upstream, "http://127.0.0.1:8095/mcp");
	ck_assert_int_eq(m->upstream_timeout, 5);
	ck_assert_int_eq(m->unmapped, UNMAPPED_ALLOW);
	ck_assert_str_eq(m->unmapped_scope, "read");
	ck_assert(m->log_arguments);
	config_free(c);
	/* Credentials only consentd uses reach their upstream through the gateway:
	 * no base_url needed then, and still needed without an upstream. */
	c = expect_ok(MINIMAL "[resource.t]\ntoken_release = never\n"
	    "[mcp.t]\nresource = t\nupstream = http://127.0.0.1:8095/mcp\n", NULL);
	config_free(c);
	expect_error(MINIMAL "[resource.t]\ntoken_release = never\n[mcp.t]\nresource = t\n", NULL,
	    "x.conf:10: token_release: never (proxy only) needs base_url in [resource.t], or an "
	    "[mcp.NAME] with an upstream in front of it");
	c = expect_ok(MINIMAL "[resource.k]\ncredential = api_key\napi_key_header = X-Api-Key\n"
	    "[mcp.k]\nresource = k\nupstream = http://127.0.0.1:8095/mcp\n", NULL);
	config_free(c);
	expect_error(MINIMAL "[resource.k]\ncredential = api_key\napi_key_header = X-Api-Key\n"
	    "[mcp.k]\nresource = k\n", NULL, "base_url: required in [resource.k] with credential = "
	    "api_key (the key is used only by consentd's proxy), unless an [mcp.NAME] with an "
	    "upstream");
#define GW_BASE MINIMAL "[resource.notes]\n[scope.notes.read]\n[mcp.notes]\nresource = notes\n"
	expect_error(GW_BASE "upstream = http://mcp.corp.example/mcp\n", NULL,
	    "upstream: http:// is allowed only for 127.0.0.1");
	expect_error(GW_BASE "upstream = ftp://127.0.0.1/mcp\n", NULL, "upstream: must be an https:// URL");
	expect_error(GW_BASE "upstream = https://mcp.corp.example/mcp#x\n", NULL, "upstream: URL must not have a fragment");
	expect_error(GW_BASE "upstream_timeout = 0\n", NULL, "upstream_timeout: out of range");
	expect_error(GW_BASE "upstream_timeout = 301\n", NULL, "upstream_timeout: out of range");
	expect_error(GW_BASE "unmapped = maybe\n", NULL, "unmapped:");
	expect_error(GW_BASE "unmapped = allow\n", NULL, "unmapped_scope: required in [mcp.notes] with unmapped = allow");
	expect_error(GW_BASE "unmapped_scope = read\n", NULL, "unmapped_scope: used only with unmapped = allow");
	expect_error(GW_BASE "unmapped = allow\nunmapped_scope = write\n", NULL,
	    "unmapped_scope: no [scope.notes.write] section");
	expect_error(GW_BASE "unmapped = allow\nunmapped_scope = a b\n", NULL, "unmapped_scope:");
	expect_error(GW_BASE "log_arguments = sometimes\n", NULL, "log_arguments:");
	expect_error(GW_BASE "upstream_url = http://127.0.0.1/mcp\n", NULL, "upstream_url");
#undef GW_BASE
}
END_TEST

START_TEST(test_config_clients)
{
	char dir[] = "/tmp/consentd-cfgclient-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char *good = tu_path(dir, "c.jwks"), *bad = tu_path(dir, "bad.jwks");
	char text[4096];
	FILE *f = fopen(good, "w");
	ck_assert_ptr_nonnull(f);
	fputs(V_JWKS, f);
	fclose(f);
	f = fopen(bad, "w");
	ck_assert_ptr_nonnull(f);
	fputs("{\"keys\":[{\"kty\":\"oct\",\"k\":\"c2VjcmV0\"}]}", f);
	fclose(f);

	struct config *c = expect_ok(MINIMAL "[client.ide]\nredirect_uris = http://127.0.0.1/cb "
	    "https://ide.example/cb\n[client.cli]\nclient_id = cli-7\nname = The CLI\n"
	    "redirect_uris = http://[::1]:9/x?y=1 http://localhost/cb\n", NULL);
	ck_assert_uint_eq(c->nclients, 2);
	const struct config_client *k = config_client(c, "ide");
	ck_assert_ptr_nonnull(k);
	ck_assert_str_eq(k->id, "ide");
	ck_assert_str_eq(k->name, "ide");                 /* name defaults to client_id */
	ck_assert_uint_eq(k->nredirect_uris, 2);
	ck_assert_str_eq(k->redirect_uris[1], "https://ide.example/cb");
	ck_assert_ptr_null(k->redirect_uris[2]);
	ck_assert_int_eq(k->auth, CLIENT_AUTH_NONE);
	ck_assert_ptr_null(k->jwks_json);
	k = config_client(c, "cli-7");
	ck_assert_ptr_nonnull(k);
	ck_assert_str_eq(k->id, "cli");
	ck_assert_str_eq(k->name, "The CLI");
	ck_assert_ptr_null(config_client(c, "cli"));       /* by client_id, not NAME */
	ck_assert_ptr_null(config_client(c, "IDE"));
	ck_assert_ptr_null(config_client(c, NULL));
	config_free(c);

	ck_assert_int_eq(str_fmt(text, sizeof text, MINIMAL "[client.svc]\nredirect_uris = "
	    "https://svc.example/cb\ntoken_endpoint_auth = private_key_jwt\njwks_file = %s\n", good),
	    CS_OK);
	c = expect_ok(text, NULL);
	ck_assert_int_eq(c->clients[0].auth, CLIENT_AUTH_PRIVATE_KEY_JWT);
	ck_assert_ptr_nonnull(c->clients[0].jwks_json);
	config_free(c);
	/* A jwks_uri would make a client that can never authenticate: the token
	 * endpoint does not fetch client keys. */
	expect_error(MINIMAL "[client.svc]\nredirect_uris = https://svc.example/cb\n"
	    "token_endpoint_auth = private_key_jwt\njwks_uri = https://svc.example/jwks\n", NULL,
	    "jwks_uri: not supported for a [client.NAME]");

	/* Refusals, each naming its key. */
	expect_error(MINIMAL "[client.a]\n", NULL, "redirect_uris: [client.a] needs at least one");
	expect_error(MINIMAL "[client.a]\nredirect_uris = http://app.example/cb\n", NULL,
	    "http is allowed only to 127.0.0.1, [::1] or localhost");
	expect_error(MINIMAL "[client.a]\nredirect_uris = https://app.example/cb#frag\n", NULL,
	    "redirect_uris: 'https://app.example/cb#frag'");
	expect_error(MINIMAL "[client.a]\nredirect_uris = https://u:p@app.example/cb\n", NULL,
	    "redirect_uris: 'https://u:p@app.example/cb'");
	expect_error(MINIMAL "[client.a]\nredirect_uris = /cb\n", NULL, "redirect_uris: '/cb'");
	expect_error(MINIMAL "[client.a]\nredirect_uris = https://a.example/cb https://a.example/cb\n",
	    NULL, "listed twice");
	expect_error(MINIMAL "[client.a]\nclient_id = https://a.example/c.json\n"
	    "redirect_uris = https://a.example/cb\n", NULL, "client_id: must not be an https URL");
	expect_error(MINIMAL "[client.a]\nclient_id = a\x01b\nredirect_uris = https://a.example/cb\n",
	    NULL, "client_id: contains a control character");
	expect_error(MINIMAL "[client.a]\nclient_id = a\xc3\xa9\nredirect_uris = https://a.example/cb\n",
	    NULL, "client_id: must be 1 to 255 visible ASCII");
	expect_error(MINIMAL "[client.a]\nredirect_uris = https://a.example/cb\n[client.b]\n"
	    "client_id = a\nredirect_uris = https://b.example/cb\n", NULL,
	    "[client.b] has the client_id of [client.a]");
	expect_error(MINIMAL "[client.a]\nredirect_uris = https://a.example/cb\n"
	    "token_endpoint_auth = client_secret_basic\n", NULL, "token_endpoint_auth");
	expect_error(MINIMAL "[client.a]\nredirect_uris = https://a.example/cb\n"
	    "token_endpoint_auth = private_key_jwt\n", NULL, "jwks_file: required with "
	    "token_endpoint_auth = private_key_jwt");
	expect_error(MINIMAL "[client.a]\nredirect_uris = https://a.example/cb\n"
	    "jwks_uri = https://a.example/jwks\n", NULL, "used only with token_endpoint_auth = "
	    "private_key_jwt");
	expect_error(MINIMAL "[client.a]\nredirect_uris = https://a.example/cb\n"
	    "token_endpoint_auth = private_key_jwt\njwks_uri = http://a.example/jwks\n", NULL,
	    "jwks_uri");
	ck_assert_int_eq(str_fmt(text, sizeof text, MINIMAL "[client.a]\nredirect_uris = "
	    "https://a.example/cb\ntoken_endpoint_auth = private_key_jwt\njwks_file = %s\n", bad),
	    CS_OK);
	expect_error(text, NULL, "bad.jwks");
	ck_assert_int_eq(str_fmt(text, sizeof text, MINIMAL "[client.a]\nredirect_uris = "
	    "https://a.example/cb\ntoken_endpoint_auth = private_key_jwt\njwks_file = %s\n"
	    "jwks_uri = https://a.example/jwks\n", good), CS_OK);
	expect_error(text, NULL, "give jwks_file or jwks_uri, not both");
	expect_error(MINIMAL "[client.a.b]\nredirect_uris = https://a.example/cb\n", NULL,
	    "[client.a.b]: the client name must be");
	expect_error(MINIMAL "[client.a]\nredirect_uris = https://a.example/cb\nsecret = x\n", NULL,
	    "secret");
	unlink(good);
	unlink(bad);
	free(good);
	free(bad);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* [mcp]: the client-id URL policy and the fetch's bounds (cimd.h), their
 * defaults, and every refusal with its line. */
START_TEST(test_config_mcp)
{
	struct config *c = expect_ok(MINIMAL, NULL);
	ck_assert_int_eq(c->mcp_cimd_allow, CIMD_ALLOW_ANY);
	ck_assert_uint_eq(c->nmcp_cimd_hosts, 0);
	ck_assert_uint_eq(c->nmcp_cimd_prefixes, 0);
	ck_assert(!c->mcp_cimd_allow_loopback);
	ck_assert_ptr_null(c->mcp_cimd_ca_file);
	ck_assert_int_eq(c->mcp_cimd_timeout_ms, 5000);
	ck_assert_int_eq(c->mcp_cimd_connect_timeout_ms, 2000);
	ck_assert_int_eq(c->mcp_cimd_max_bytes, 5120);
	ck_assert_int_eq(c->mcp_cimd_cache_entries, 1000);
	ck_assert_int_eq(c->mcp_cimd_cache_min_ttl, 60);
	ck_assert_int_eq(c->mcp_cimd_cache_default_ttl, 300);
	ck_assert_int_eq(c->mcp_cimd_cache_max_ttl, 86400);
	ck_assert_int_eq(c->mcp_cimd_failure_ttl, 10);
	ck_assert(!c->mcp_require_dpop);
	config_free(c);
	c = expect_ok(MINIMAL "[mcp]\nrequire_dpop = true\n", NULL);
	ck_assert(c->mcp_require_dpop);
	config_free(c);
	expect_error(MINIMAL "[mcp]\nrequire_dpop = sometimes\n", NULL,
	    "x.conf:10: require_dpop: not a boolean");

	c = expect_ok(MINIMAL "[mcp]\ncimd_allow = hosts\ncimd_hosts = good.example other.example:8443\n"
	    "cimd_timeout_ms = 3000\ncimd_connect_timeout_ms = 3000\ncimd_max_bytes = 8192\n"
	    "cimd_cache_entries = 5\ncimd_cache_min_ttl = 0\ncimd_cache_default_ttl = 0\n"
	    "cimd_cache_max_ttl = 0\ncimd_failure_ttl = 0\n"
	    "cimd_ca_file = /etc/ssl/certs/ca-certificates.crt\n", NULL);
	ck_assert_int_eq(c->mcp_cimd_allow, CIMD_ALLOW_HOSTS);
	ck_assert_uint_eq(c->nmcp_cimd_hosts, 2);
	ck_assert_str_eq(c->mcp_cimd_hosts[1], "other.example:8443");
	ck_assert_ptr_null(c->mcp_cimd_hosts[2]);
	ck_assert_str_eq(c->mcp_cimd_ca_file, "/etc/ssl/certs/ca-certificates.crt");
	ck_assert_int_eq(c->mcp_cimd_timeout_ms, 3000);
	ck_assert_int_eq(c->mcp_cimd_max_bytes, 8192);
	ck_assert_int_eq(c->mcp_cimd_cache_entries, 5);
	ck_assert_int_eq(c->mcp_cimd_failure_ttl, 0);
	config_free(c);
	c = expect_ok(MINIMAL "[mcp]\ncimd_allow = prefixes\n"
	    "cimd_prefixes = https://good.example/mcp/ https://x.example:8443/\n", NULL);
	ck_assert_int_eq(c->mcp_cimd_allow, CIMD_ALLOW_PREFIXES);
	ck_assert_str_eq(c->mcp_cimd_prefixes[0], "https://good.example/mcp/");
	config_free(c);
	c = expect_ok(MINIMAL "[mcp]\ncimd_allow = none\n", NULL);
	ck_assert_int_eq(c->mcp_cimd_allow, CIMD_ALLOW_NONE);
	config_free(c);

	/* The development switch loads with a warning that -n prints. */
	char *msgs = NULL;
	ck_assert_int_eq(load(MINIMAL "[mcp]\ncimd_allow_loopback = true\n", NULL, &msgs, &c), CS_OK);
	ck_assert(c->mcp_cimd_allow_loopback);
	ck_assert_msg(strstr(msgs, "warning: x.conf:10: cimd_allow_loopback: client metadata "
	    "documents may be fetched from loopback addresses") != NULL, "%s", msgs);
	free(msgs);
	config_free(c);
	/* ... and none in a declared development setup (make run's). */
	ck_assert_int_eq(load(MIN_SERVER "development = true\n" MIN_OIDC MIN_GATEWAY
	    "[mcp]\ncimd_allow_loopback = true\n", NULL, &msgs, &c), CS_OK);
	ck_assert(c->mcp_cimd_allow_loopback);
	ck_assert_msg(msgs == NULL || strstr(msgs, "cimd_allow_loopback") == NULL, "%s", msgs);
	free(msgs);
	config_free(c);
	ck_assert_int_eq(load(MINIMAL "[mcp]\ncimd_hosts = good.example\n", NULL, &msgs, &c), CS_OK);
	ck_assert_msg(strstr(msgs, "warning: x.conf:10: cimd_hosts: ignored") != NULL, "%s", msgs);
	free(msgs);
	config_free(c);
	/* From the environment too. */
	char *const env[] = { "CONSENTD_MCP_CIMD_ALLOW=prefixes",
	    "CONSENTD_MCP_CIMD_PREFIXES=https://env.example/c/", NULL };
	c = expect_ok(MINIMAL, env);
	ck_assert_int_eq(c->mcp_cimd_allow, CIMD_ALLOW_PREFIXES);
	ck_assert_str_eq(c->mcp_cimd_prefixes[0], "https://env.example/c/");
	config_free(c);

	expect_error(MINIMAL "[mcp]\ncimd_allow = some\n", NULL, "x.conf:10: cimd_allow:");
	expect_error(MINIMAL "[mcp]\ncimd_allow = hosts\n", NULL,
	    "x.conf:10: cimd_allow: hosts needs at least one host in cimd_hosts");
	expect_error(MINIMAL "[mcp]\ncimd_allow = prefixes\n", NULL,
	    "x.conf:10: cimd_allow: prefixes needs at least one prefix in cimd_prefixes");
	expect_error(MINIMAL "[mcp]\ncimd_allow = hosts\ncimd_hosts = https://good.example\n", NULL,
	    "x.conf:11: cimd_hosts: 'https://good.example' is not a valid host");
	expect_error(MINIMAL "[mcp]\ncimd_allow = hosts\ncimd_hosts = *.good.example\n", NULL,
	    "x.conf:11: cimd_hosts: '*.good.example' is not a valid host");
	expect_error(MINIMAL "[mcp]\ncimd_allow = hosts\ncimd_hosts = a.example a.example\n", NULL,
	    "x.conf:11: cimd_hosts: 'a.example' is listed twice");
	/* A prefix must end in '/', or it could end inside a host name or a segment. */
	expect_error(MINIMAL "[mcp]\ncimd_allow = prefixes\ncimd_prefixes = https://good.example\n",
	    NULL, "x.conf:11: cimd_prefixes: 'https://good.example' is not a valid prefix");
	expect_error(MINIMAL "[mcp]\ncimd_allow = prefixes\ncimd_prefixes = https://good.example/x\n",
	    NULL, "x.conf:11: cimd_prefixes: 'https://good.example/x' is not a valid prefix");
	expect_error(MINIMAL "[mcp]\ncimd_allow = prefixes\ncimd_prefixes = http://good.example/\n",
	    NULL, "is not a valid prefix");
	expect_error(MINIMAL "[mcp]\ncimd_allow_loopback = perhaps\n", NULL,
	    "x.conf:10: cimd_allow_loopback:");
	expect_error(MINIMAL "[mcp]\ncimd_ca_file = /nonexistent/ca.pem\n", NULL,
	    "x.conf:10: cimd_ca_file: '/nonexistent/ca.pem' is not a readable PEM file");
	expect_error(MINIMAL "[mcp]\ncimd_ca_file = config/consentd.conf.example\n", NULL,
	    "is not a readable PEM file");
	expect_error(MINIMAL "[mcp]\ncimd_timeout_ms = 99\n", NULL,
	    "x.conf:10: cimd_timeout_ms: out of range (expected an integer from 100 to 30000)");
	expect_error(MINIMAL "[mcp]\ncimd_timeout_ms = 1000\n", NULL,
	    "x.conf:10: cimd_timeout_ms: cimd_connect_timeout_ms must not exceed cimd_timeout_ms");
	expect_error(MINIMAL "[mcp]\ncimd_connect_timeout_ms = 6000\n", NULL,
	    "x.conf:10: cimd_connect_timeout_ms: cimd_connect_timeout_ms must not exceed");
	expect_error(MINIMAL "[mcp]\ncimd_max_bytes = 65537\n", NULL,
	    "x.conf:10: cimd_max_bytes: out of range (expected an integer from 256 to 65536)");
	expect_error(MINIMAL "[mcp]\ncimd_cache_entries = 0\n", NULL,
	    "x.conf:10: cimd_cache_entries: out of range");
	expect_error(MINIMAL "[mcp]\ncimd_cache_min_ttl = 100000\n", NULL,
	    "x.conf:10: cimd_cache_min_ttl: out of range");
	expect_error(MINIMAL "[mcp]\ncimd_cache_max_ttl = 30\n", NULL,
	    "x.conf:10: cimd_cache_max_ttl: cimd_cache_min_ttl must not exceed cimd_cache_max_ttl");
	expect_error(MINIMAL "[mcp]\ncimd_cache_default_ttl = 90000\n", NULL,
	    "x.conf:10: cimd_cache_default_ttl: cimd_cache_default_ttl must lie between");
	expect_error(MINIMAL "[mcp]\ncimd_failure_ttl = 301\n", NULL,
	    "x.conf:10: cimd_failure_ttl: out of range");
	expect_error(MINIMAL "[mcp]\ncimd_whatever = 1\n", NULL, "x.conf:10:");
}
END_TEST

START_TEST(test_config_write_queue)
{
	struct config *c = expect_ok(MINIMAL, NULL);
	ck_assert_uint_eq(c->db_write_queue, STORE_WRITE_QUEUE_DEFAULT);
	config_free(c);
	c = expect_ok(MINIMAL "[database]\nwrite_queue = 0\n", NULL);
	ck_assert_uint_eq(c->db_write_queue, 0);
	config_free(c);
	c = expect_ok(MINIMAL "[database]\nwrite_queue = 64\n", NULL);
	ck_assert_uint_eq(c->db_write_queue, 64);
	config_free(c);
	expect_error(MINIMAL "[database]\nwrite_queue = -1\n", NULL,
	    "x.conf:10: write_queue: out of range (expected an integer from 0 to 65536)");
	expect_error(MINIMAL "[database]\nwrite_queue = many\n", NULL,
	    "x.conf:10: write_queue: not an integer");
}
END_TEST

/* [audit] batch_interval_ms: the audit queue's batch window (audit_queue.h). */
START_TEST(test_config_audit_batch_interval)
{
	struct config *c = expect_ok(MINIMAL, NULL);
	ck_assert_int_eq(c->audit_batch_interval_ms, 100);
	config_free(c);
	c = expect_ok(MINIMAL "[audit]\nbatch_interval_ms = 10000\n", NULL);
	ck_assert_int_eq(c->audit_batch_interval_ms, 10000);
	config_free(c);
	expect_error(MINIMAL "[audit]\nbatch_interval_ms = 9\n", NULL,
	    "x.conf:10: batch_interval_ms: out of range (expected an integer from 10 to 10000)");
	expect_error(MINIMAL "[audit]\nbatch_interval_ms = soon\n", NULL,
	    "x.conf:10: batch_interval_ms: not an integer");
}
END_TEST

/* [audit] crossref_interval: how often a node's chain vouches for the others'. */
START_TEST(test_config_audit_crossref_interval)
{
	struct config *c = expect_ok(MINIMAL, NULL);
	ck_assert_int_eq(c->audit_crossref_interval, 300);
	config_free(c);
	c = expect_ok(MINIMAL "[audit]\ncrossref_interval = 0\n", NULL);
	ck_assert_int_eq(c->audit_crossref_interval, 0);
	config_free(c);
	expect_error(MINIMAL "[audit]\ncrossref_interval = 86401\n", NULL,
	    "x.conf:10: crossref_interval: out of range (expected an integer from 0 to 86400)");
	expect_error(MINIMAL "[audit]\ncrossref_interval = -1\n", NULL,
	    "x.conf:10: crossref_interval: out of range (expected an integer from 0 to 86400)");
}
END_TEST

/* [database] url: the PostgreSQL backend; its password apart from it. */
START_TEST(test_config_database_url)
{
	struct config *c = expect_ok(MINIMAL, NULL);
	ck_assert_ptr_null(c->db_url);
	ck_assert_ptr_null(c->db_password);
	ck_assert(c->db_prepared);
	config_free(c);
	c = expect_ok(MINIMAL "[database]\nurl = postgresql://consentd@db:5432/consentd\n"
	    "prepared_statements = false\n",
	    (char *[]){ "CONSENTD_DATABASE_PASSWORD=pw-from-env", NULL });
	ck_assert_str_eq(c->db_url, "postgresql://consentd@db:5432/consentd");
	ck_assert_str_eq(c->db_password, "pw-from-env");
	ck_assert(!c->db_prepared);
	config_free(c);
	c = expect_ok(MINIMAL "[database]\nurl = postgres:///consentd?host=/run/postgresql\n", NULL);
	ck_assert_str_eq(c->db_url, "postgres:///consentd?host=/run/postgresql");
	config_free(c);
	/* A password in the URL is refused, and not repeated in the message. */
	expect_error(MINIMAL "[database]\nurl = postgresql://u:hunter2@db/consentd\n", NULL,
	    "x.conf:10: url: carries a password");
	{
		struct config *bad = NULL;
		char *msgs = NULL;
		ck_assert_int_eq(load(MINIMAL "[database]\nurl = postgresql://u:hunter2@db/x\n", no_env,
		    &msgs, &bad), CS_ECONFIG);
		ck_assert_ptr_null(strstr(msgs, "hunter2"));
		free(msgs);
	}
	expect_error(MINIMAL "[database]\nurl = mysql://db/consentd\n", NULL,
	    "x.conf:10: url: is not a postgresql:// URL");
	expect_error(MINIMAL "[database]\nurl = postgresql://db/x?nosuchoption=1\n", NULL,
	    "x.conf:10: url: libpq cannot parse it");
	expect_error(MINIMAL "[database]\npath = /tmp/x.db\nurl = postgresql://db/x\n", NULL,
	    "give path (SQLite) or url (PostgreSQL), not both");
	expect_error(MINIMAL "[database]\npassword = x\n", NULL,
	    "password: is for a PostgreSQL database: [database] url");
	expect_error(MINIMAL "[database]\nurl = postgresql://db/x\npassword = a\n"
	    "password_file = /nonexistent\n", NULL, "give password (CONSENTD_DATABASE_PASSWORD) or "
	    "password_file, not both");
	expect_error(MINIMAL "[database]\nurl = postgresql://db/x\npassword_file = /nonexistent/pw\n",
	    NULL, "cannot open '/nonexistent/pw'");
}
END_TEST

START_TEST(test_config_database_password_file)
{
	char path[] = "/tmp/consentd-pw-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "s3cret\n", 7), 7);
	close(fd);
	char text[1024];
	ck_assert_int_eq(str_fmt(text, sizeof text, "%s[database]\nurl = postgresql://db/x\n"
	    "password_file = %s\n", MINIMAL, path), CS_OK);
	struct config *c = expect_ok(text, NULL);
	ck_assert_str_eq(c->db_password, "s3cret");      /* the final newline is not part of it */
	config_free(c);
	fd = open(path, O_WRONLY | O_TRUNC);
	close(fd);
	expect_error(text, NULL, "must hold one password of 1 to 1024 bytes");
	unlink(path);
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *t = tcase_create("config");
	tcase_add_test(t, test_config_example_loads);
	tcase_add_test(t, test_config_example_placeholders_refused);
	tcase_add_test(t, test_config_placeholder_kinds);
	tcase_add_test(t, test_config_print_keys);
	tcase_add_test(t, test_config_enterprise);
	tcase_add_test(t, test_config_database_url);
	tcase_add_test(t, test_config_database_password_file);
	tcase_add_test(t, test_config_minimal_defaults);
	tcase_add_test(t, test_config_log_level);
	tcase_add_test(t, test_config_login_bounds_obsolete);
	tcase_add_test(t, test_config_limits);
	tcase_add_test(t, test_config_trusted_proxies);
	tcase_add_test(t, test_config_dynamic_defaults);
	tcase_add_test(t, test_config_key_unknown);
	tcase_add_test(t, test_config_section_unknown);
	tcase_add_test(t, test_config_key_duplicate);
	tcase_add_test(t, test_config_section_duplicate);
	tcase_add_test(t, test_config_int_bad);
	tcase_add_test(t, test_config_retention);
	tcase_add_test(t, test_config_mcp);
	tcase_add_test(t, test_config_clients);
	tcase_add_test(t, test_config_mcp_gateway);
	tcase_add_test(t, test_config_write_queue);
	tcase_add_test(t, test_config_audit_batch_interval);
	tcase_add_test(t, test_config_audit_crossref_interval);
	tcase_add_test(t, test_config_grant_ttl_range);
	tcase_add_test(t, test_config_bool_values);
	tcase_add_test(t, test_config_listen_forms);
	tcase_add_test(t, test_config_public_url_path);
	tcase_add_test(t, test_config_public_url_query);
	tcase_add_test(t, test_config_public_url_http);
	tcase_add_test(t, test_config_public_url_equals_issuer);
	tcase_add_test(t, test_config_oidc_checks);
	tcase_add_test(t, test_config_subject_claim_reassignable);
	tcase_add_test(t, test_config_subject_claim_warns);
	tcase_add_test(t, test_config_line_too_long);
	tcase_add_test(t, test_config_syntax_errors);
	tcase_add_test(t, test_config_continuation_and_comments);
	tcase_add_test(t, test_config_section_names);
	tcase_add_test(t, test_config_env_override);
	tcase_add_test(t, test_config_env_secret);
	tcase_add_test(t, test_config_env_unknown);
	tcase_add_test(t, test_config_gateway_secret);
	tcase_add_test(t, test_config_gateway_private_key_jwt);
	tcase_add_test(t, test_config_gateway_audiences);
	tcase_add_test(t, test_config_audit_head_file);
	tcase_add_test(t, test_config_agent_allow_unknown);
	tcase_add_test(t, test_config_action_unknown_scope);
	tcase_add_test(t, test_config_action_standing);
	tcase_add_test(t, test_config_route_checks);
	tcase_add_test(t, test_config_resource_checks);
	tcase_add_test(t, test_config_errors_all_reported);
	tcase_add_test(t, test_config_missing_file);
	tcase_add_test(t, test_config_file_line_numbers);
	tcase_add_test(t, test_config_default_duration);
	tcase_add_test(t, test_config_resource_preset);
	tcase_add_test(t, test_config_resource_cloud_id_and_proactive_refresh);
	tcase_add_test(t, test_config_resource_preset_endpoints);
	tcase_add_test(t, test_config_resource_api_key);
	tcase_add_test(t, test_config_resource_api_key_refused);
	tcase_add_test(t, test_config_approval_enforced_by);
	tcase_add_test(t, test_config_policy_lines);
	tcase_add_test(t, test_config_metrics);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(config_suite());
}
