/*
 * emu_mem.c — the emulated device's memory: host memory (one mapping made by init) behind fake device addresses,
 * handed out by an extent allocator (link/extent.c), the live allocations, and the view kernels and copies get of
 * it. The bottom of the emulated device's files (emu_impl.h, "Layers"); under E->lock.
 */
#include "config.h"

#include "emu_impl.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void *
emu_ptr(struct emu *E, uint64_t addr, uint64_t len)
{
	if (addr < E->base || addr - E->base > E->size || len > E->size - (addr - E->base))
		return NULL;
	return E->mem + (addr - E->base);
}

int
emu_mem_alloc(struct wk *w, uint64_t bytes, uint64_t *addr, cua_err *e)
{
	struct emu *E = w->be_state;
	struct emu_alloc *a = malloc(sizeof(*a));
	uint64_t off;
	int r = 0;
	if (a == NULL)
		return cua_err_set(e, CUA_ENOMEM, "out of host memory");
	pthread_mutex_lock(&E->lock);
	if (extent_get(&E->alloc, bytes, &off) != 0) {
		r = cua_err_set(e, CUA_ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY: %llu bytes requested, %llu of %llu in use",
				(unsigned long long)bytes, (unsigned long long)E->alloc.used,
				(unsigned long long)E->size);
		goto out;
	}
	/* Memory never allocated before reads as zero (a fresh mapping); reused memory reads as zero only because
	 * emu_mem_free cleared it (--scrub on). CUDA promises neither. */
	*a = (struct emu_alloc){E->base + off, bytes};
	if (cua_idmap_set(&E->allocs, a->addr, a) != 0) {
		extent_put(&E->alloc, off, bytes);
		r = cua_err_set(e, CUA_ENOMEM, "out of host memory");
		goto out;
	}
	*addr = a->addr;
	a = NULL; /* transferred */
out:
	pthread_mutex_unlock(&E->lock);
	free(a);
	return r;
}

/*
 * Clears the block [off, off + len) of the emulated memory and nothing else: the whole pages inside it are
 * given back to the system (MADV_DONTNEED: they read as zeros next time and cost no memory until then), the
 * partial pages at its ends are memset, since a page may be shared with a neighbour's live block.
 */
void
emu_clear(struct emu *E, uint64_t off, uint64_t len)
{
	uint64_t page = E->page, end = off + len;
	uint64_t lo = (off + page - 1) / page * page, hi = end / page * page;
	if (hi <= lo) { /* no whole page inside the block */
		memset(E->mem + off, 0, len);
		return;
	}
	memset(E->mem + off, 0, lo - off);
	if (madvise(E->mem + lo, hi - lo, MADV_DONTNEED) != 0)
		memset(E->mem + lo, 0, hi - lo);
	memset(E->mem + hi, 0, end - hi);
}

/* The core calls this after all work on the block has run (backend.h), so no stream thread touches it. The
 * block is cleared (with --scrub on) before it goes back to the allocator; with --scrub off its contents survive
 * and the next allocation of the same range reads them, as on a GPU. */
int
emu_mem_free(struct wk *w, uint64_t addr, struct wk_tag tag, cua_err *e)
{
	struct emu *E = w->be_state;
	pthread_mutex_lock(&E->lock);
	struct emu_alloc *a = cua_idmap_remove(&E->allocs, addr);
	if (a != NULL) {
		uint64_t off = addr - E->base, len = a->len;
		/* the whole extent: its rounding up to EMU_ALIGN is this block's too (the last one may end with the
		 * memory) */
		uint64_t ext = (len + EMU_ALIGN - 1) / EMU_ALIGN * EMU_ALIGN;
		if (w->opts.scrub)
			emu_clear(E, off, ext < E->size - off ? ext : E->size - off);
		extent_put(&E->alloc, off, len);
	}
	pthread_mutex_unlock(&E->lock);
	if (a == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no allocation at 0x%llx", (unsigned long long)addr);
	free(a);
	return 0;
}
