/* tu_config.h -- loading a configuration from text in unit tests, with
 * everything the loader wrote to its error stream kept for the checks: the
 * text as "x.conf" with the environment env (NULL: the process's).
 * test_config.c and test_authzen.c use it. */
#ifndef CS_TU_CONFIG_H
#define CS_TU_CONFIG_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "testutil.h"

/* Loads text; *msgs gets everything written to the error stream (the caller
 * frees it). */
static inline enum cs_err tu_config_load(const char *text, char *const *env, char **msgs,
    struct config **out)
{
	size_t n = 0;
	*msgs = NULL;
	FILE *f = open_memstream(msgs, &n);
	ck_assert_ptr_nonnull(f);
	enum cs_err e = config_load_string(text, strlen(text), "x.conf", env, f, out);
	fclose(f);
	return e;
}

/* Expects text to fail, giving no configuration, with a message containing
 * want. */
static inline void tu_config_expect_error(const char *text, char *const *env, const char *want)
{
	struct config *c = NULL;
	char *msgs = NULL;
	enum cs_err e = tu_config_load(text, env, &msgs, &c);
	ck_assert_msg(e == CS_ECONFIG, "expected CS_ECONFIG, got %d; messages:\n%s", e, msgs);
	ck_assert_ptr_null(c);
	ck_assert_msg(strstr(msgs, want) != NULL, "wanted \"%s\" in:\n%s", want, msgs);
	free(msgs);
}

/* Expects text to load, with a message containing warn when warn is not NULL;
 * returns the configuration (the caller frees it). */
static inline struct config *tu_config_expect_ok(const char *text, char *const *env,
    const char *warn)
{
	struct config *c = NULL;
	char *msgs = NULL;
	enum cs_err e = tu_config_load(text, env, &msgs, &c);
	ck_assert_msg(e == CS_OK, "expected CS_OK, got %d; messages:\n%s", e, msgs);
	ck_assert_ptr_nonnull(c);
	if (warn != NULL)
		ck_assert_msg(strstr(msgs, warn) != NULL, "wanted \"%s\" in:\n%s", warn, msgs);
	free(msgs);
	return c;
}

#endif
