/*
 * stats.h — the daemon's counters for monitoring (issue 14) and the snapshot the Prometheus endpoint
 * (metrics.c) formats.
 *
 * The counters live in fe->stats and are bumped where requests finish (request.c), under the fe->lock that
 * path already holds: no lock or atomic of their own on the hot path. The endpoint copies them, with the
 * gauges it derives from the sessions and devices, out under fe->lock (stats_snapshot) and formats the copy
 * without the lock (stats_format), so a slow scrape never holds up a request.
 *
 * Labels: per op and status, per op family (latency), per device (`device`, with dcgm-exporter's `UUID` beside
 * it, so that the series join the DCGM exporter's, and `model_name`: dcgm-exporter's `modelName` is camelCase,
 * which promtool's lint rejects), per tenant (requests by family, errors by
 * name, usage), per session (--metrics-sessions only: a series per client connection is unbounded
 * cardinality). Per-tenant and per-session series say who uses the GPU: metrics.c serves them to operators
 * only (stats_snap_aggregate drops them for everyone else). Beside the cuasyncd_ series, the process_ ones of
 * Prometheus's client libraries (CPU, memory, descriptors, start time), read from /proc at each snapshot.
 */
#ifndef CUAD_STATS_H
#define CUAD_STATS_H

#include "cua_proto.h"
#include "cuad-lock.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fe;
struct request;

#define STATS_NSTATUS 32  /* status codes counted one by one; larger ones are counted as INTERNAL */
#define STATS_NBUCKETS 17 /* latency histogram buckets, 50 µs to 10 s (stats.c has the bounds), +Inf beside */

/* Families of request kinds (each op's row in daemon/cmd-*.c names its own); SF_NONE is no family: a row
 * without one fails the row test. A histogram per family: one per op would multiply its 18 series by 41. */
enum stats_family {
	SF_NONE,
	SF_INFO,
	SF_OPERATOR,
	SF_MODULE,
	SF_MEMORY,
	SF_COPY,
	SF_STREAM,
	SF_LAUNCH,
	SF_BATCH,
	SF_EVENT,
	SF_GRAPH,
	SF_NFAMILIES
};

enum stats_dir { SD_HTOD, SD_DTOH, SD_DTOD, SD_NDIRS };

/* One tenant's request counters (by name: they outlive configuration reloads, as its busy time does). */
struct stats_tenant_ctr {
	char name[64];
	uint64_t requests[SF_NFAMILIES]; /* answered client requests by family */
	uint64_t errors[STATS_NSTATUS];  /* of them, answered with an error, by status */
};

struct stats_hist {
	uint64_t bucket[STATS_NBUCKETS]; /* observations <= the bucket's bound (not cumulative here) */
	uint64_t count;
	uint64_t sum_ns;
};

/* The hops of a launch through cuasyncd (issue 19's breakdown), summed over the LAUNCH requests answered with
 * their one kernel run, in ns: the edge received it → its command record written to the worker's ring →
 * the worker's command loop took it up → its kernel issued (the completion notice asked) → the worker wrote
 * its completion (the GPU ran it, the worker noticed) → the front-end read that → its reply handed to the edge.
 * What the client sees beyond their sum is the transport both ways (socket or shared-memory ring). */
enum stats_hop { HOP_ADMIT, HOP_TO_WORKER, HOP_ISSUE, HOP_DEVICE, HOP_TO_FRONT, HOP_REPLY, STATS_NHOPS };
struct stats_hops {
	uint64_t count;
	uint64_t sum_ns[STATS_NHOPS];
};

/* Counters only ever grow (Prometheus counters). Guarded by fe->lock. */
struct stats {
	uint64_t requests[CUA_OP_MAX]
			 [STATS_NSTATUS]; /* answered client requests by op (0: unknown or unreadable) and status */
	uint64_t dropped;                 /* requests dropped unanswered (request.c do_drop) */
	uint64_t launches;                /* kernels launched (LAUNCH and BATCH items that ran) */
	uint64_t copied[SD_NDIRS];        /* bytes copied by copies that succeeded */
	uint64_t host_copied[SD_NDIRS];   /* … of them through shared host buffers (no socket) */
	struct stats_hist latency[SF_NFAMILIES]; /* receive → reply (completion for fire-and-forget) */
	struct stats_hops hops;                  /* of launches answered after their kernel ran */
	struct stats_tenant_ctr *tenant;         /* per tenant, first request first (malloc'd, grown) */
	uint32_t ntenant, cap_tenant;
};

/* A client request of kind op and family fam (its row's) was answered (or, fire-and-forget, completed) with
 * status; lat_ns is the time from its receipt (UINT64_MAX: not known, no latency observed). What it did
 * (launches, bytes copied) the rows' count functions add to fe->stats themselves. fe->lock held; never blocks. */
void do_stats_request(struct fe *fe, uint32_t op, enum stats_family fam, uint32_t status, uint64_t lat_ns)
	CUA_REQUIRES(cuad_fe_lock);
/* The same request counted for the tenant named tenant (NULL: none yet, not counted). fe->lock held; allocates
 * only the first time a tenant is seen (out of memory: not counted). */
void do_stats_tenant(struct fe *fe, const char *tenant, enum stats_family fam, uint32_t status)
	CUA_REQUIRES(cuad_fe_lock);
/* r, a request answered at reply_ns, added to the hops when it was one launch that went through a worker. */
struct request;
void do_stats_hops(struct fe *fe, const struct request *r, uint64_t reply_ns) CUA_REQUIRES(cuad_fe_lock);
/* Frees the per-tenant counters (at the end, with fe). */
void stats_fini(struct stats *st);

/* One session's row in a snapshot. */
struct stats_session {
	uint64_t id;
	uint64_t requests, errors;
	uint64_t dev_bytes, host_bytes; /* device memory on all devices, registered host memory */
	uint32_t streams, modules, queued, parked, in_flight;
	bool operator;
};

/* One tenant's row in a snapshot (tenant.h). */
struct stats_tenant {
	char name[64];
	unsigned weight;
	uint64_t busy_ns;   /* device time its sessions' work took */
	uint32_t sessions;  /* live sessions that said HELLO */
	uint64_t dev_bytes; /* device memory its sessions hold, all devices */
};

/* One device's row in a snapshot. */
struct stats_device {
	char uuid[64];   /* the GPU's UUID as nvidia-smi and dcgm-exporter write it (GPU-…), or "" */
	char model[256]; /* its name (dcgm-exporter's modelName; model_name here) */
	uint32_t generation, restarts, in_flight;
	uint64_t mem_bytes;   /* device memory the sessions hold on it */
	uint64_t total_bytes; /* the device's memory */
	bool ready;
	bool drained; /* by the operator (DRAIN): no new objects */
	/* --spare-worker: a spare worker is ready to replace the shared one; restarts a ready spare served */
	bool spare_ready;
	uint32_t spare_swaps;
};

/* Everything the endpoint reports, copied out of the daemon at one moment. */
struct stats_snap {
	struct stats c;
	uint64_t uptime_ms;
	uint64_t requests, errors;          /* every message received, every error answered (STATUS's totals) */
	uint64_t sessions_total;            /* connections that got a session since the start */
	uint32_t sessions;                  /* live sessions that said HELLO */
	uint64_t host_bytes;                /* registered host memory of every session */
	uint32_t queued, parked, in_flight; /* client requests waiting for a worker, for their turn, in a worker */
	bool draining;
	struct stats_device dev[CUA_MAX_DEVICES];
	int ndevs;
	struct stats_session *sess; /* with_sessions: one row per live session (malloc'd), else NULL */
	uint32_t nsess;
	struct stats_tenant *ten; /* one row per tenant of the configuration (malloc'd; NULL: none) */
	uint32_t nten;
	struct stats_tenant_ctr *tctr; /* per-tenant request counters (malloc'd; NULL: none) */
	uint32_t ntctr;
	uint64_t http_refused; /* metrics connections closed at once for a bound (metrics.c fills it in) */
	struct {
		bool ok;              /* read from /proc */
		double cpu_seconds;   /* user and system */
		double start_seconds; /* since the Epoch */
		uint64_t rss_bytes, vsize_bytes, open_fds, max_fds;
	} proc;
};

/* Copies the counters and gauges out under fe->lock (takes it; any thread without it). With with_sessions,
 * one row per live session too. 0 or CUA_ENOMEM. stats_snap_free releases it either way. */
int stats_snapshot(struct fe *fe, bool with_sessions, struct stats_snap *out) CUA_EXCLUDES(cuad_fe_lock);
void stats_snap_free(struct stats_snap *snap);
/* Drops the per-tenant and per-session rows from snap: what a scraper that is not an operator gets. */
void stats_snap_aggregate(struct stats_snap *snap);

/* The Prometheus text format (0.0.4) of snap in a malloc'd string (*len bytes, NUL-terminated), or NULL
 * (out of memory). Pure: no lock, any thread. */
char *stats_format(const struct stats_snap *snap, size_t *len);

/* The health verdict of snap: true when serving (not shutting down) with at least one device ready and not
 * drained by the operator; else false and why in why. */
bool stats_healthy(const struct stats_snap *snap, char *why, size_t len);

#endif
