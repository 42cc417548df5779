/* fuzz_config.c -- libFuzzer driver for the configuration parser: any byte string must
 * load or fail cleanly, without crashes, leaks or undefined behaviour -- the placeholder
 * checks of a deployed file (config_placeholder.c: URL hosts, secrets) included.
 * It must never read the process environment (env is NULL) nor print (errs is /dev/null). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *devnull;
	struct config *c = NULL;

	if (devnull == NULL)
		devnull = fopen("/dev/null", "w");
	if (config_load_string_deployed((const char *)data, size, "fuzz.conf", NULL, devnull, &c) == CS_OK)
		config_free(c);
	return 0;
}
