/*
 * cua_pool.c — the region allocator (cua_pool.h).
 *
 * Memory layout: [struct cua_pool | first block's bytes], each further block [struct pool_block | bytes], each
 * large allocation [struct pool_large | bytes]; every header is padded to CUA_POOL_ALIGN so the bytes after
 * it are aligned like malloc's own (16 on the platforms we build for, asserted below).
 */
#include "config.h"

#include "cua_pool.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

_Static_assert(alignof(max_align_t) >= CUA_POOL_ALIGN, "malloc alignment below the pool's");

#if defined(__SANITIZE_ADDRESS__)
#define POOL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_ASAN 1
#endif
#endif
#ifdef POOL_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define ALIGN_UP(n) (((n) + (CUA_POOL_ALIGN - 1)) & ~(size_t)(CUA_POOL_ALIGN - 1))
#define HDR(T) ALIGN_UP(sizeof(T))

struct pool_block {
	struct pool_block *next; /* older block (the chain destroy walks; the first block is not in it) */
	unsigned char *cur;      /* first free byte, aligned */
	unsigned char *end;      /* one past the block's last byte */
	unsigned char *last;     /* the block's most recent allocation (NULL: none): what may grow in place */
};

struct pool_large {
	LIST_ENTRY(pool_large) link;
};

struct cua_pool {
	struct pool_block *current;    /* small allocations come from here (the newest block) */
	struct pool_block *blocks;     /* the further blocks, newest first */
	LIST_HEAD(, pool_large) large; /* the large allocations, newest first */
	size_t block_size;             /* bytes of each block */
	size_t large_min;              /* allocations above this many bytes are large */
	struct pool_block first;       /* its bytes follow the struct */
};

static void
block_init(struct pool_block *b, unsigned char *bytes, size_t size)
{
	b->next = NULL;
	b->cur = bytes;
	b->end = bytes + size;
	b->last = NULL;
	POISON(bytes, size);
}

cua_pool *
cua_pool_create(size_t block_size)
{
	if (block_size < 256)
		block_size = 256;
	if (block_size > CUA_POOL_MAX_ALLOC)
		return NULL;
	block_size = ALIGN_UP(block_size);
	cua_pool *p = malloc(HDR(cua_pool) + block_size);
	if (p == NULL)
		return NULL;
	p->current = &p->first;
	p->blocks = NULL;
	LIST_INIT(&p->large);
	p->block_size = block_size;
	p->large_min = block_size / 4;
	block_init(&p->first, (unsigned char *)p + HDR(cua_pool), block_size);
	return p;
}

void
cua_pool_destroy(cua_pool *p)
{
	if (p == NULL)
		return;
	struct pool_large *l;
	while ((l = LIST_FIRST(&p->large)) != NULL) {
		LIST_REMOVE(l, link);
		free(l);
	}
	struct pool_block *b = p->blocks;
	while (b != NULL) {
		struct pool_block *next = b->next;
		UNPOISON((unsigned char *)b + HDR(struct pool_block), p->block_size);
		free(b);
		b = next;
	}
	UNPOISON((unsigned char *)p + HDR(cua_pool), p->block_size);
	free(p);
}

static void *
alloc_large(cua_pool *p, size_t n)
{
	struct pool_large *l = malloc(HDR(struct pool_large) + n);
	if (l == NULL)
		return NULL;
	LIST_INSERT_HEAD(&p->large, l, link);
	return (unsigned char *)l + HDR(struct pool_large);
}

/* The large allocation whose bytes are ptr, or NULL (a block's). The list is short: a request has a few. */
static struct pool_large *
find_large(cua_pool *p, const void *ptr)
{
	struct pool_large *l;
	LIST_FOREACH(l, &p->large, link)
	{
		if ((const unsigned char *)l + HDR(struct pool_large) == ptr)
			return l;
	}
	return NULL;
}

void *
cua_pool_alloc(cua_pool *p, size_t n)
{
	if (n > CUA_POOL_MAX_ALLOC)
		return NULL;
	if (n > p->large_min)
		return alloc_large(p, n);
	size_t need = n == 0 ? CUA_POOL_ALIGN : ALIGN_UP(n);
	struct pool_block *b = p->current;
	if ((size_t)(b->end - b->cur) < need) { /* the rest of this block is left unused */
		b = malloc(HDR(struct pool_block) + p->block_size);
		if (b == NULL)
			return NULL;
		block_init(b, (unsigned char *)b + HDR(struct pool_block), p->block_size);
		b->next = p->blocks;
		p->blocks = b;
		p->current = b;
	}
	unsigned char *r = b->cur;
	b->cur += need;
	b->last = r;
	UNPOISON(r, n);
	return r;
}

void *
cua_pool_calloc(cua_pool *p, size_t nmemb, size_t size)
{
	if (size != 0 && nmemb > SIZE_MAX / size)
		return NULL;
	void *r = cua_pool_alloc(p, nmemb * size);
	if (r != NULL)
		memset(r, 0, nmemb * size);
	return r;
}

char *
cua_pool_strndup(cua_pool *p, const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *r = cua_pool_alloc(p, len + 1);
	if (r != NULL) {
		memcpy(r, s, len);
		r[len] = '\0';
	}
	return r;
}

char *
cua_pool_strdup(cua_pool *p, const char *s)
{
	return cua_pool_strndup(p, s, SIZE_MAX);
}

void *
cua_pool_realloc_last(cua_pool *p, void *ptr, size_t keep, size_t new_n)
{
	if (ptr == NULL)
		return cua_pool_alloc(p, new_n);
	if (new_n > CUA_POOL_MAX_ALLOC)
		return NULL;
	struct pool_block *b = p->current;
	if (ptr == b->last) {
		size_t need = new_n == 0 ? CUA_POOL_ALIGN : ALIGN_UP(new_n);
		if ((size_t)(b->end - (unsigned char *)ptr) >= need) {
			POISON(ptr, (size_t)(b->cur - (unsigned char *)ptr));
			b->cur = (unsigned char *)ptr + need;
			UNPOISON(ptr, new_n);
			return ptr;
		}
	}
	struct pool_large *l = find_large(p, ptr);
	if (l != NULL) {
		/* realloc may move the node: unlink it first, insert it again (at the head) after */
		LIST_REMOVE(l, link);
		struct pool_large *n = realloc(l, HDR(struct pool_large) + new_n);
		if (n == NULL) {
			LIST_INSERT_HEAD(&p->large, l, link);
			return NULL;
		}
		LIST_INSERT_HEAD(&p->large, n, link);
		return (unsigned char *)n + HDR(struct pool_large);
	}
	void *r = cua_pool_alloc(p, new_n);
	if (r != NULL)
		memcpy(r, ptr, keep < new_n ? keep : new_n);
	return r;
}
