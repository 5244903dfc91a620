#include "config.h"

#include "emu_kernels.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define ILLEGAL(fault, len, addr)                                                                                      \
	(snprintf((fault), (len), "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered at 0x%llx",    \
		  (unsigned long long)(addr)),                                                                         \
	 -1)

static uint64_t
u64_at(void *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static int
k_empty(struct emu *E, const struct emu_dims *d, void **params, char *fault, size_t len)
{
	return 0;
}

/* y[i] = a * x[i] + y[i] for i < n (grid-stride in the CUDA version; the whole range here). */
static int
k_axpy(struct emu *E, const struct emu_dims *d, void **params, char *fault, size_t len)
{
	float a;
	memcpy(&a, params[0], sizeof(a));
	uint64_t xa = u64_at(params[1]), ya = u64_at(params[2]), n = u64_at(params[3]);
	if (n == 0)
		return 0;
	if (n > UINT64_MAX / 4)
		return ILLEGAL(fault, len, xa);
	const float *x = emu_ptr(E, xa, n * 4);
	float *y = emu_ptr(E, ya, n * 4);
	if (x == NULL)
		return ILLEGAL(fault, len, xa);
	if (y == NULL)
		return ILLEGAL(fault, len, ya);
	for (uint64_t i = 0; i < n; i++)
		y[i] = fmaf(a, x[i], y[i]); /* nvcc contracts a * x + y into one FMA: match it bit for bit */
	return 0;
}

static int
k_fill_u32(struct emu *E, const struct emu_dims *d, void **params, char *fault, size_t len)
{
	uint64_t pa = u64_at(params[0]), n = u64_at(params[2]);
	uint32_t v;
	memcpy(&v, params[1], sizeof(v));
	if (n == 0)
		return 0;
	uint32_t *p = n <= UINT64_MAX / 4 ? emu_ptr(E, pa, n * 4) : NULL;
	if (p == NULL)
		return ILLEGAL(fault, len, pa);
	for (uint64_t i = 0; i < n; i++)
		p[i] = v;
	return 0;
}

/* Busy-waits `cycles` clock cycles in CUDA; here it sleeps cycles nanoseconds (a 1 GHz clock), capped at 10 s. */
static int
k_spin(struct emu *E, const struct emu_dims *d, void **params, char *fault, size_t len)
{
	int64_t cycles;
	memcpy(&cycles, params[0], sizeof(cycles));
	if (cycles <= 0)
		return 0;
	if (cycles > 10000000000LL)
		cycles = 10000000000LL;
	struct timespec ts = {cycles / 1000000000LL, cycles % 1000000000LL};
	while (nanosleep(&ts, &ts) != 0)
		;
	return 0;
}

/* One thread of the grid increments *counter after waiting for its predecessor (griddepcontrol.wait). */
static int
k_pdl_count(struct emu *E, const struct emu_dims *d, void **params, char *fault, size_t len)
{
	uint64_t pa = u64_at(params[0]);
	int *c = emu_ptr(E, pa, sizeof(int));
	if (c == NULL)
		return ILLEGAL(fault, len, pa);
	(*c)++;
	return 0;
}

/* Writes through p + 2^40 bytes: never mapped, so the device faults (sticky) as the CUDA kernel does. */
static int
k_bad_write(struct emu *E, const struct emu_dims *d, void **params, char *fault, size_t len)
{
	uint64_t pa = u64_at(params[0]) + (1ull << 40);
	int *p = emu_ptr(E, pa, sizeof(int));
	if (p == NULL)
		return ILLEGAL(fault, len, pa);
	*p = 1;
	return 0;
}

/* dst[i] = src[i] for i < n (u32 elements). */
static int
k_copy_u32(struct emu *E, const struct emu_dims *d, void **params, char *fault, size_t len)
{
	uint64_t da = u64_at(params[0]), sa = u64_at(params[1]), n = u64_at(params[2]);
	if (n == 0)
		return 0;
	uint32_t *dst = n <= UINT64_MAX / 4 ? emu_ptr(E, da, n * 4) : NULL;
	const uint32_t *src = n <= UINT64_MAX / 4 ? emu_ptr(E, sa, n * 4) : NULL;
	if (dst == NULL)
		return ILLEGAL(fault, len, da);
	if (src == NULL)
		return ILLEGAL(fault, len, sa);
	memmove(dst, src, n * 4);
	return 0;
}

#define CONST_WORDS 256u /* __constant__ uint32_t const_data[256] */

/* out[i] = const_data[i] for i < n; n beyond the array reads outside it (a fault here). */
static int
k_const_copy(struct emu *E, const struct emu_dims *d, void **params, char *fault, size_t len)
{
	uint64_t oa = u64_at(params[0]), n = u64_at(params[1]);
	if (n == 0)
		return 0;
	if (n > CONST_WORDS)
		return ILLEGAL(fault, len, d->global + CONST_WORDS * 4);
	uint32_t *out = emu_ptr(E, oa, n * 4);
	const uint32_t *c = emu_ptr(E, d->global, n * 4);
	if (out == NULL)
		return ILLEGAL(fault, len, oa);
	if (c == NULL)
		return ILLEGAL(fault, len, d->global);
	memcpy(out, c, n * 4);
	return 0;
}

#define BIG_PARAM_WORDS 8000u /* struct big_param { uint32_t w[8000]; }: 32000 bytes by value */

/* out[i] = s.w[i] for every word of the 32000-byte by-value struct s. */
static int
k_big_param_copy(struct emu *E, const struct emu_dims *d, void **params, char *fault, size_t len)
{
	uint64_t oa = u64_at(params[0]);
	uint32_t *out = emu_ptr(E, oa, BIG_PARAM_WORDS * 4);
	if (out == NULL)
		return ILLEGAL(fault, len, oa);
	memcpy(out, params[1], BIG_PARAM_WORDS * 4);
	return 0;
}

/* out[i] = in[n - 1 - i] for i < n, through n words of dynamic shared memory: more than the launch's shared
 * bytes is an access outside shared memory (a fault, as the CUDA kernel's out-of-range shared store). */
static int
k_dyn_shared_copy(struct emu *E, const struct emu_dims *d, void **params, char *fault, size_t len)
{
	uint64_t oa = u64_at(params[0]), ia = u64_at(params[1]), n = u64_at(params[2]);
	if (n == 0)
		return 0;
	if (n > d->shared_mem / 4)
		return snprintf(fault, len,
				"CUDA_ERROR_ILLEGAL_ADDRESS: %llu words of shared memory used, %u bytes launched",
				(unsigned long long)n, d->shared_mem),
		       -1;
	uint32_t *out = emu_ptr(E, oa, n * 4);
	const uint32_t *in = emu_ptr(E, ia, n * 4);
	if (out == NULL)
		return ILLEGAL(fault, len, oa);
	if (in == NULL)
		return ILLEGAL(fault, len, ia);
	for (uint64_t i = 0; i < n; i++)
		out[i] = in[n - 1 - i];
	return 0;
}

static uint64_t
dims_blocks(const uint32_t d[3])
{
	return (uint64_t)d[0] * d[1] * d[2];
}

/*
 * A two-phase sum over a cooperative grid (coop_reduce in tests/kernels/feature_kernels.cu): thread t of the
 * grid (T threads in blocks of B) adds in[i] for i = t, t + T, …; block b's sum goes to partial[b]; after
 * grid.sync() the grid's first thread adds the partials into *out. Here the grid barrier is the line between the
 * two phases: every block's phase one has run before any phase two reads the partials. Without a cooperative
 * launch grid.sync() is undefined in CUDA; here it faults.
 */
static int
k_coop_reduce(struct emu *E, const struct emu_dims *d, void **params, char *fault, size_t len)
{
	uint64_t ia = u64_at(params[0]), n = u64_at(params[1]), pa = u64_at(params[2]), oa = u64_at(params[3]);
	uint64_t nb = dims_blocks(d->grid), B = dims_blocks(d->block), T = nb * B;
	if (!d->cooperative)
		return snprintf(fault, len,
				"CUDA_ERROR_LAUNCH_FAILED: grid.sync() in a kernel not launched cooperatively"),
		       -1;
	const uint32_t *in = n > 0 && n <= UINT64_MAX / 4 ? emu_ptr(E, ia, n * 4) : NULL;
	uint64_t *part = nb <= UINT64_MAX / 8 ? emu_ptr(E, pa, nb * 8) : NULL, *out = emu_ptr(E, oa, 8);
	if (in == NULL && n > 0)
		return ILLEGAL(fault, len, ia);
	if (part == NULL)
		return ILLEGAL(fault, len, pa);
	if (out == NULL)
		return ILLEGAL(fault, len, oa);
	memset(part, 0, nb * 8);
	for (uint64_t i = 0; i < n; i++) /* phase one: element i belongs to thread i mod T, of block (i mod T) / B */
		part[(i % T) / B] += in[i];
	uint64_t total = 0; /* grid.sync(), then phase two */
	for (uint64_t b = 0; b < nb; b++)
		total += part[b];
	*out = total;
	return 0;
}

/*
 * Each block's thread 0 writes, at out[3b..3b+2] for the block's linear index b: its rank in its cluster, the
 * cluster's block count, and the rank stored in the shared memory of the next block of its cluster (read through
 * distributed shared memory in CUDA: cluster.map_shared_rank).
 */
static int
k_cluster_rank(struct emu *E, const struct emu_dims *d, void **params, char *fault, size_t len)
{
	uint64_t oa = u64_at(params[0]), nb = dims_blocks(d->grid);
	const uint32_t *g = d->grid, *c = d->cluster;
	uint32_t csize = c[0] * c[1] * c[2];
	uint32_t *out = nb <= UINT64_MAX / 12 ? emu_ptr(E, oa, nb * 12) : NULL;
	if (out == NULL)
		return ILLEGAL(fault, len, oa);
	for (uint64_t b = 0; b < nb; b++) {
		uint32_t x = (uint32_t)(b % g[0]), y = (uint32_t)(b / g[0] % g[1]), z = (uint32_t)(b / g[0] / g[1]);
		uint32_t rank = x % c[0] + (y % c[1]) * c[0] + (z % c[2]) * c[0] * c[1];
		out[3 * b] = rank;
		out[3 * b + 1] = csize;
		out[3 * b + 2] = (rank + 1) % csize;
	}
	return 0;
}

const struct emu_kernel emu_kernels[] = {
	{"empty_kernel", 0, {{0, 0}}, k_empty},
	{"axpy", 4, {{0, 4}, {8, 8}, {16, 8}, {24, 8}}, k_axpy},
	{"fill_u32", 3, {{0, 8}, {8, 4}, {16, 8}}, k_fill_u32},
	{"spin", 1, {{0, 8}}, k_spin},
	{"pdl_count", 1, {{0, 8}}, k_pdl_count},
	{"bad_write", 1, {{0, 8}}, k_bad_write},
	{"copy_u32", 3, {{0, 8}, {8, 8}, {16, 8}}, k_copy_u32},
	{"const_copy", 2, {{0, 8}, {8, 8}}, k_const_copy, "const_data", CONST_WORDS * 4},
	{"big_param_copy", 2, {{0, 8}, {8, BIG_PARAM_WORDS * 4}}, k_big_param_copy},
	{"dyn_shared_copy", 3, {{0, 8}, {8, 8}, {16, 8}}, k_dyn_shared_copy},
	{"coop_reduce", 4, {{0, 8}, {8, 8}, {16, 8}, {24, 8}}, k_coop_reduce},
	{"cluster_rank", 1, {{0, 8}}, k_cluster_rank},
};
const size_t emu_nkernels = sizeof(emu_kernels) / sizeof(emu_kernels[0]);

_Static_assert(sizeof(emu_kernels) / sizeof(emu_kernels[0]) <= 64, "a module's kernels are a 64-bit set");

int
emu_kernel_find(const char *name, size_t len)
{
	for (size_t k = 0; k < emu_nkernels; k++)
		if (strlen(emu_kernels[k].name) == len && memcmp(emu_kernels[k].name, name, len) == 0)
			return (int)k;
	return -1;
}

const char *
emu_kernel_list(char *buf, size_t cap)
{
	size_t used = 0;
	buf[0] = '\0';
	for (size_t k = 0; k < emu_nkernels && used < cap; k++) {
		int n = snprintf(buf + used, cap - used, "%s%s", k ? ", " : "", emu_kernels[k].name);
		if (n < 0)
			break;
		used += (size_t)n;
	}
	return buf;
}
