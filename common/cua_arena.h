/*
 * cua_arena.h — the kernel argument arena (after cuda-async's KernelArgStorage).
 *
 * Values live in 16-byte slots; a value of size s takes max(1, ceil(s/16)) slots, zero-filled and then
 * written, so every value is 16-byte aligned and its padding reads as zero. The first CUA_ARENA_INLINE slots
 * and arguments live inside the struct; the push that would overflow either moves everything so far to the
 * heap (as bytes) and carries on there. The `void *params[]` array that cuLaunchKernel wants is built only by
 * cua_arena_with_params, after the last push, on the stack for an inline arena: a launch with a common
 * parameter count allocates nothing, and growth can never invalidate a handed-out pointer.
 *
 * Not thread-safe: one arena belongs to one launch being built.
 */
#ifndef CUA_ARENA_H
#define CUA_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CUA_ARENA_INLINE 32
#define CUA_ARENA_SLOT 16

typedef struct cua_slot {
	_Alignas(16) unsigned char bytes[CUA_ARENA_SLOT];
} cua_slot;

typedef struct cua_arena {
	cua_slot inline_values[CUA_ARENA_INLINE];
	uint8_t inline_offsets[CUA_ARENA_INLINE]; /* slot index of each argument, push order */
	cua_slot *heap_values;                    /* non-NULL once spilled */
	size_t *heap_offsets;
	size_t heap_values_cap, heap_offsets_cap;
	size_t nslots; /* slots in use */
	size_t nargs;  /* arguments pushed */
} cua_arena;

void cua_arena_init(cua_arena *a);
/* Frees the heap part; the arena is empty and reusable afterwards. Safe on a zeroed or initialised arena. */
void cua_arena_fini(cua_arena *a);

/* Copies size bytes of value in. Returns 0, CUA_EBAD_ARGUMENT (size 0 or value NULL) or CUA_ENOMEM. On
 * failure the arena is unchanged. */
int cua_arena_push(cua_arena *a, const void *value, size_t size);

static inline size_t
cua_arena_count(const cua_arena *a)
{
	return a->nargs;
}
static inline bool
cua_arena_on_heap(const cua_arena *a)
{
	return a->heap_values != NULL;
}

/* Value of argument i (< count): its first byte, 16-byte aligned. Valid until the next push or fini. */
static inline const void *
cua_arena_arg(const cua_arena *a, size_t i)
{
	return a->heap_values ? (const void *)(a->heap_values + a->heap_offsets[i])
			      : (const void *)(a->inline_values + a->inline_offsets[i]);
}

/* Calls fn with the parameter pointer array (params[i] points at argument i) and returns what fn returns,
 * or CUA_ENOMEM when a spilled arena cannot allocate its pointer array. The pointers are valid only during
 * the call. */
typedef int (*cua_arena_params_fn)(void **params, size_t n, void *ud);
int cua_arena_with_params(cua_arena *a, cua_arena_params_fn fn, void *ud);

#endif
