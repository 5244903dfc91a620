#include "config.h"

#include "extent.h"

#include <stdlib.h>
#include <string.h>

static uint64_t
round_up(const struct extent_alloc *a, uint64_t len)
{
	return (len + a->align - 1) / a->align * a->align;
}

int
extent_init(struct extent_alloc *a, uint64_t size, uint64_t align)
{
	memset(a, 0, sizeof(*a));
	a->cap = 16;
	a->free = malloc(a->cap * sizeof(*a->free));
	if (a->free == NULL)
		return -1;
	a->align = align ? align : 1;
	a->size = size / a->align * a->align;
	a->free[0] = (struct extent_free){0, a->size};
	a->nfree = a->size > 0;
	return 0;
}

void
extent_fini(struct extent_alloc *a)
{
	free(a->free);
	memset(a, 0, sizeof(*a));
}

int
extent_get(struct extent_alloc *a, uint64_t len, uint64_t *off)
{
	if (len == 0 || len > a->size)
		return -1;
	uint64_t need = round_up(a, len);
	for (size_t i = 0; i < a->nfree; i++) {
		if (a->free[i].len >= need) {
			*off = a->free[i].off;
			a->free[i].off += need;
			a->free[i].len -= need;
			if (a->free[i].len == 0) {
				memmove(&a->free[i], &a->free[i + 1], (a->nfree - i - 1) * sizeof(*a->free));
				a->nfree--;
			}
			a->used += need;
			return 0;
		}
	}
	return -1;
}

void
extent_put(struct extent_alloc *a, uint64_t off, uint64_t len)
{
	uint64_t need = round_up(a, len);
	size_t i = 0;
	while (i < a->nfree && a->free[i].off < off)
		i++;
	a->used -= need;
	/* merge with the previous and/or the next free range */
	int prev = i > 0 && a->free[i - 1].off + a->free[i - 1].len == off;
	int next = i < a->nfree && off + need == a->free[i].off;
	if (prev && next) {
		a->free[i - 1].len += need + a->free[i].len;
		memmove(&a->free[i], &a->free[i + 1], (a->nfree - i - 1) * sizeof(*a->free));
		a->nfree--;
	} else if (prev) {
		a->free[i - 1].len += need;
	} else if (next) {
		a->free[i].off = off;
		a->free[i].len += need;
	} else {
		if (a->nfree == a->cap) {
			/* allocation failure here would lose the range; grow generously up front instead */
			struct extent_free *f = realloc(a->free, 2 * a->cap * sizeof(*f));
			if (f == NULL)
				return; /* leaks the range, never corrupts: logged by callers' accounting */
			a->free = f;
			a->cap *= 2;
		}
		memmove(&a->free[i + 1], &a->free[i], (a->nfree - i) * sizeof(*a->free));
		a->free[i] = (struct extent_free){off, need};
		a->nfree++;
	}
}
