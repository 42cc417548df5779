/* arena.c -- request-lifetime memory (arena.h): one block of the caller's,
 * heap blocks past it, everything wiped and released by arena_clear.  Must
 * never hand out memory past a block's end or past the cap, whatever n is. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "arena.h"

struct arena_block {
	struct arena_block *next;
	size_t              size;        /* usable bytes in mem */
	size_t              used;        /* handed out (wiped at clear) */
	_Alignas(ARENA_ALIGN) unsigned char mem[];
};

void arena_init(struct arena *a, void *first, size_t first_size, size_t cap)
{
	memset(a, 0, sizeof *a);
	a->cap = cap;
	if (first == NULL)
		return;
	/* The caller's block may start anywhere: pieces are aligned by address,
	 * so the block starts at its first aligned byte. */
	uintptr_t p = (uintptr_t)first;
	size_t skip = (size_t)((ARENA_ALIGN - (p % ARENA_ALIGN)) % ARENA_ALIGN);
	if (first_size > skip) {
		a->first = (unsigned char *)first + skip;
		a->first_size = first_size - skip;
	}
}

/* n rounded up to ARENA_ALIGN (0 counts as 1); false when that overflows. */
static int round_up(size_t n, size_t *out)
{
	if (n == 0)
		n = 1;
	if (n > SIZE_MAX - (ARENA_ALIGN - 1))
		return 0;
	*out = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	return 1;
}

void *arena_alloc(struct arena *a, size_t n)
{
	size_t r;
	void *p;
	if (!round_up(n, &r) || r > a->cap || a->total > a->cap - r)
		return NULL;
	if (a->heap != NULL) {
		struct arena_block *b = a->heap;
		if (b->size - b->used >= r) {
			p = b->mem + b->used;
			b->used += r;
			a->total += r;
			return p;
		}
	} else if (a->first != NULL && a->first_size - a->first_used >= r) {
		p = a->first + a->first_used;
		a->first_used += r;
		a->total += r;
		return p;
	}
	/* A new heap block; what is left of the one before is not used again. */
	size_t size = r > ARENA_HEAP_BLOCK ? r : ARENA_HEAP_BLOCK;
	if (size > SIZE_MAX - sizeof(struct arena_block))
		return NULL;
	struct arena_block *b = malloc(sizeof *b + size);
	if (b == NULL)
		return NULL;
	b->size = size;
	b->used = r;
	b->next = a->heap;
	a->heap = b;
	a->total += r;
	return b->mem;
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	if (n == SIZE_MAX)
		return NULL;
	size_t len = strnlen(s, n);
	char *d = arena_alloc(a, len + 1);
	if (d == NULL)
		return NULL;
	memcpy(d, s, len);
	d[len] = '\0';
	return d;
}

char *arena_strdup(struct arena *a, const char *s)
{
	return arena_strndup(a, s, strlen(s));
}

void arena_clear(struct arena *a)
{
	if (a == NULL)
		return;
	struct arena_block *b = a->heap;
	while (b != NULL) {
		struct arena_block *next = b->next;
		OPENSSL_cleanse(b->mem, b->used);
		free(b);
		b = next;
	}
	if (a->first != NULL)
		OPENSSL_cleanse(a->first, a->first_used);
	a->heap = NULL;
	a->first_used = 0;
	a->total = 0;
}
