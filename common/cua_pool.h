/*
 * cua_pool.h — a region allocator (after nginx's ngx_pool_t): many allocations, one free.
 *
 * A pool hands out memory from blocks of a fixed size: the first block is allocated with the pool itself,
 * further ones are chained as they are needed. An allocation larger than a quarter of a block is a "large"
 * one: malloc'd on its own and listed in the pool. Nothing is freed one by one; cua_pool_destroy frees the
 * blocks, the large allocations and the pool. Every pointer handed out is aligned to CUA_POOL_ALIGN.
 *
 * The daemon gives each request a pool (daemon/reqobj.c): the struct request lives in it, and so does what is
 * planned for it, so a request costs one malloc in the common case and one free at the end.
 *
 * Not thread-safe, and no lock inside: a pool belongs to one owner at a time (a request belongs to one place
 * at a time, request.h). Under AddressSanitizer the free part of each block is poisoned, and each allocation
 * unpoisoned to its exact size, so an overrun into the next allocation is still reported; destroy really frees,
 * so a use after free of a whole request is reported as well.
 */
#ifndef CUA_POOL_H
#define CUA_POOL_H

#include <stddef.h>

#define CUA_POOL_ALIGN 16
/* The largest allocation a pool attempts (larger ones fail without calling malloc). */
#define CUA_POOL_MAX_ALLOC ((size_t)1 << 40)

typedef struct cua_pool cua_pool;

/* A new pool whose blocks hold block_size bytes each (rounded up to CUA_POOL_ALIGN, at least 256); the first
 * block comes in the same malloc as the pool. Returns NULL when out of memory. Free it with cua_pool_destroy. */
cua_pool *cua_pool_create(size_t block_size);

/* Frees every block, every large allocation and the pool: every pointer the pool handed out dies with it.
 * NULL is fine. */
void cua_pool_destroy(cua_pool *p);

/* n bytes (uninitialised), aligned to CUA_POOL_ALIGN, valid until cua_pool_destroy. n == 0 gives a valid,
 * distinct pointer. Returns NULL when out of memory or n > CUA_POOL_MAX_ALLOC; the pool is unchanged then and
 * stays usable. */
void *cua_pool_alloc(cua_pool *p, size_t n);

/* nmemb × size zeroed bytes; NULL when out of memory or when the product overflows. */
void *cua_pool_calloc(cua_pool *p, size_t nmemb, size_t size);

/* A copy of the NUL-terminated s; NULL when out of memory. */
char *cua_pool_strdup(cua_pool *p, const char *s);

/* A copy of at most n bytes of s (fewer when s ends sooner), NUL-terminated; NULL when out of memory. */
char *cua_pool_strndup(cua_pool *p, const char *s, size_t n);

/* Grows (or keeps) ptr, an allocation of this pool, to new_n bytes, keeping its first keep bytes (keep: at
 * most its current size). ptr NULL: a plain cua_pool_alloc(p, new_n).
 *   - ptr is the most recent allocation of the current block and new_n still fits: grown in place;
 *   - ptr is a large allocation: realloc'd (it may move);
 *   - otherwise a new allocation, the keep bytes copied; the old one stays allocated until destroy.
 * Returns the (possibly moved) allocation, or NULL when out of memory, ptr then still valid and unchanged.
 * Growing one buffer by doubling this way wastes at most what the buffer finally holds. */
void *cua_pool_realloc_last(cua_pool *p, void *ptr, size_t keep, size_t new_n);

#endif
