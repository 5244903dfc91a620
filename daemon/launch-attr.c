/*
 * launch-attr.c — LAUNCH's attributes (PROTOCOL.md §4 LAUNCH, [R:cluster] [R:cooperative] [R:priority]) as far
 * as the front-end can judge them: whether the device has clusters and cooperative launches at all, the
 * cluster's shape against the grid and the hard ceiling of 16 blocks, the priority against the device's range.
 * What depends on the function (its NON_PORTABLE_CLUSTER_SIZE_ALLOWED and REQUIRED_CLUSTER_* attributes) and on
 * occupancy (whether a cooperative grid can be co-resident) is the worker's to check (worker/launch-attr.c).
 */
#include "config.h"

#include "cmd.h"

static bool
has_cluster(const struct cua_req_launch *q)
{
	return q->nfields >= CUA_LAUNCH_FIELDS_CLUSTER && (q->cluster[0] | q->cluster[1] | q->cluster[2]) != 0;
}

/* Clusters: on a device with them (sm_90+), every dimension at least 1, at most 16 blocks, dividing the grid. */
static int
check_cluster(const struct device *d, const struct cua_req_launch *q, cua_err *e)
{
	const uint32_t *c = q->cluster;
	if (!has_cluster(q))
		return 0;
	if (!d->info.cluster_launch)
		return cua_err_set(e, CUA_EUNSUPPORTED, "thread block clusters require sm_90 or newer; target sm_%u%u",
				   d->info.sm_major, d->info.sm_minor);
	if (c[0] == 0 || c[1] == 0 || c[2] == 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "cluster %ux%ux%u: every cluster dimension must be at least 1 (all 0: no cluster)",
				   c[0], c[1], c[2]);
	/* dimensions over 2^16 first, so the product cannot wrap (2^31 x 2^31 x 4 would be 0 in 64 bits) */
	bool huge = c[0] > 65536 || c[1] > 65536 || c[2] > 65536;
	uint64_t size = huge ? 0 : (uint64_t)c[0] * c[1] * c[2];
	if (huge || size > CUA_MAX_CLUSTER_SIZE)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "cluster %ux%ux%u has %s%llu blocks; a cluster has at most %u (%u unless the "
				   "kernel's "
				   "NON_PORTABLE_CLUSTER_SIZE_ALLOWED attribute is set)",
				   c[0], c[1], c[2], huge ? "more than " : "",
				   huge ? (unsigned long long)CUA_MAX_CLUSTER_SIZE : (unsigned long long)size,
				   CUA_MAX_CLUSTER_SIZE, CUA_MAX_CLUSTER_PORTABLE);
	for (int i = 0; i < 3; i++)
		if (q->grid[i] % c[i] != 0)
			return cua_err_set(e, CUA_EBAD_ARGUMENT,
					   "grid %ux%ux%u is not a multiple of cluster %ux%ux%u (dimension %c: %u %% "
					   "%u = "
					   "%u)",
					   q->grid[0], q->grid[1], q->grid[2], c[0], c[1], c[2], "xyz"[i], q -> grid[i],
					   c[i], q -> grid[i] % c[i]);
	return 0;
}

static int
check_cooperative(const struct device *d, const struct cua_req_launch *q, cua_err *e)
{
	if (!(q->flags & CUA_LAUNCH_COOPERATIVE) || d->info.cooperative_launch)
		return 0;
	return cua_err_set(e, CUA_EUNSUPPORTED, "cooperative launch requires sm_60 or newer; target sm_%u%u",
			   d->info.sm_major, d->info.sm_minor);
}

/* CUDA's convention: prio_greatest (the highest priority) is the lower number. */
static int
check_priority(const struct device *d, const struct cua_req_launch *q, cua_err *e)
{
	int32_t p = q->priority;
	if (q->nfields < CUA_LAUNCH_FIELDS_PRIORITY || (p >= d->info.prio_greatest && p <= d->info.prio_least))
		return 0;
	return cua_err_set(e, CUA_EBAD_ARGUMENT,
			   "launch priority %d is out of range: device %d allows %d (highest) .. %d (lowest)", p,
			   d->index, d->info.prio_greatest, d->info.prio_least);
}

int
check_launch_attrs(const struct device *d, const struct cua_req_launch *q, cua_err *e)
{
	int rc;
	if ((rc = check_cluster(d, q, e)) != 0 || (rc = check_cooperative(d, q, e)) != 0 ||
	    (rc = check_priority(d, q, e)) != 0)
		return rc;
	return 0;
}

uint32_t
launch_wrec_flags(const struct cua_req_launch *q)
{
	return (q->flags & CUA_LAUNCH_PDL ? WREC_LAUNCH_PDL : 0) |
	       (q->flags & CUA_LAUNCH_COOPERATIVE ? WREC_LAUNCH_COOPERATIVE : 0) |
	       (q->nfields >= CUA_LAUNCH_FIELDS_PRIORITY ? WREC_LAUNCH_PRIORITY : 0);
}
