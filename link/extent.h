/*
 * extent.h — first-fit allocator of address ranges (the staging area, the emulated device's memory).
 * Manages numbers, not memory: the caller maps offsets to whatever backs them. Not thread-safe.
 */
#ifndef CUAD_EXTENT_H
#define CUAD_EXTENT_H

#include <stddef.h>
#include <stdint.h>

struct extent_free {
	uint64_t off, len;
};

struct extent_alloc {
	struct extent_free *free; /* sorted by offset, coalesced */
	size_t nfree, cap;
	uint64_t size, align, used;
};

int extent_init(struct extent_alloc *a, uint64_t size, uint64_t align);
void extent_fini(struct extent_alloc *a);
/* Returns 0 and sets *off, or -1 when no free range fits len (rounded up to the alignment). */
int extent_get(struct extent_alloc *a, uint64_t len, uint64_t *off);
/* Returns the range [off, off+len) (len as given to extent_get). */
void extent_put(struct extent_alloc *a, uint64_t off, uint64_t len);

#endif
