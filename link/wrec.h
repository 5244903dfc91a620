/*
 * wrec.h — the records the front-end and a GPU worker exchange through their shared-memory region. Both
 * sides are built from this one header (same binary), so these are plain structs: no versioning.
 *
 * Region (one memfd, mapped by both):  [wshm_hdr][command ring][completion ring][staging area]
 *
 * Command record (front-end → worker, one per request):
 *     struct wrec_req, then ncmds commands. Every command starts with struct wrec_hdr {op, size}; size counts
 *     the whole command (header, fixed fields and whatever follows them), a multiple of 8. One struct per
 *     command kind below, named after it (tmux-protocol.h style); what follows the fixed part is said beside it.
 * Completion record (worker → front-end, one per request, once every command of it has finished, stream
 *     work included): struct wcpl_req, then ncmds × (struct wcpl, detail text, data, padded to 8).
 * The worker's first completion record has req == 0 and reports the device (struct wdev_info as its data)
 * or, with a non-zero status, why the device cannot be used.
 * A command record of zero bytes asks the worker to finish.
 */
#ifndef CUA_WREC_H
#define CUA_WREC_H

#include "cua_proto.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define WSHM_MAGIC 0x43554144u /* "CUAD" */

/* The worker's heartbeat thread bumps `heartbeat` every WSHM_HEARTBEAT_MS. */
#define WSHM_HEARTBEAT_MS 100

struct wshm_hdr {
	uint32_t magic, pad;
	uint64_t cmd_off, cmd_size; /* ring data bytes */
	uint64_t cpl_off, cpl_size;
	uint64_t staging_off, staging_size;
	uint64_t total;
	/*
	 * Liveness, written by the worker only (relaxed stores; the front-end's watchdog reads them, devlink.c).
	 * heartbeat: bumped by a thread of the worker's own that does nothing else, so it keeps moving while a
	 * kernel runs or the command loop sits in a long synchronous call, and stops only when the whole process
	 * stops being scheduled (SIGSTOP, a debugger, a frozen cgroup, a process stuck in the driver).
	 * busy_since_ms: CLOCK_MONOTONIC ms at which the command loop began its current record, 0 while it waits
	 * for one (said in the watchdog's log line; not used to decide).
	 */
	_Alignas(64) _Atomic uint64_t heartbeat;
	_Atomic uint64_t busy_since_ms;
};

/*
 * Command kinds, one row each: name, then whether the command names a stream in the field right after its
 * header (WRF_STREAM: its stream id is a uint32_t at byte 8 — stream work, and the ordered stream's sync; the
 * front-end patches pool slots there, daemon/streampool.c). "sync" commands run on the worker's main thread in
 * record order; "stream" commands are queued on their stream and complete asynchronously. The worker's own row
 * of each (worker/commands.c, wk_cmds) says how it runs; a unit test checks that the two agree.
 */
#define WRF_STREAM 1u
#define WREC_OPS(X)                                                                                                    \
	X(MODULE_LOAD, 0)           /* sync;   value: module id */                                                     \
	X(MODULE_UNLOAD, 0)         /* sync */                                                                         \
	X(FUNCTION_GET, 0)          /* sync;   value: function id; data: cua_param_info[] */                           \
	X(MEM_ALLOC, 0)             /* sync;   value: device address */                                                \
	X(MEM_FREE, 0)              /* sync */                                                                         \
	X(STREAM_CREATE, 0)         /* sync;   value: stream id */                                                     \
	X(STREAM_DESTROY, 0)        /* sync (drains the stream first) */                                               \
	X(STREAM_SYNC, WRF_STREAM)  /* stream: completes when everything before it on the stream has */                \
	X(HTOD, WRF_STREAM)         /* stream */                                                                       \
	X(DTOH, WRF_STREAM)         /* stream */                                                                       \
	X(DTOD, WRF_STREAM)         /* stream */                                                                       \
	X(MEMSET, WRF_STREAM)       /* stream */                                                                       \
	X(LAUNCH, WRF_STREAM)       /* stream */                                                                       \
	X(HOST_REGISTER, 0)         /* sync;   value: host buffer id */                                                \
	X(HOST_UNREGISTER, 0)       /* sync */                                                                         \
	X(MODULE_GET_GLOBAL, 0)     /* sync;   value: device address; data: its size (uint64_t) */                     \
	X(FUNC_GET_ATTR, 0)         /* sync;   value: the attribute's value (int32_t, sign-extended) */                \
	X(FUNC_SET_ATTR, 0)         /* sync, after every earlier launch was issued */                                  \
	X(OCCUPANCY, 0)             /* sync;   value: active blocks per multiprocessor */                              \
	X(GRAPH_CREATE, 0)          /* sync;   value: graph id */                                                      \
	X(GRAPH_LAUNCH, WRF_STREAM) /* stream */                                                                       \
	X(GRAPH_SET_ARGS, 0)        /* sync, after every earlier launch was issued */                                  \
	X(GRAPH_DESTROY, 0)         /* sync, after every earlier launch was issued */                                  \
	X(EVENT_CREATE, 0)          /* sync;   value: event id */                                                      \
	X(EVENT_DESTROY, 0)         /* sync, after every earlier command was issued (uses in flight keep it alive) */  \
	X(EVENT_RECORD, WRF_STREAM) /* stream: completes when issued, not when reached */                              \
	X(STREAM_WAIT_EVENT, WRF_STREAM) /* stream: completes when issued */                                           \
	X(EVENT_SYNC, 0)                 /* completes when the event's last record has been reached */                 \
	X(EVENT_ELAPSED, 0)              /* sync, after every earlier command was issued; value: float ms bits */      \
	X(EVENT_QUERY, 0)                /* sync, after every earlier command was issued; value: 1 reached, 0 not yet */

enum wrec_op {
	WR_NONE = 0, /* no command (an op the front-end answers alone) */
#define WREC_X_ENUM(name, flags) WR_##name,
	WREC_OPS(WREC_X_ENUM)
#undef WREC_X_ENUM
		WR_OP_MAX
};

/* The WRF_* flags of command kind op (0 for an unknown one). */
static inline uint32_t
wrec_flags(uint32_t op)
{
	static const uint8_t flags[WR_OP_MAX] = {0, /* WR_NONE */
#define WREC_X_FLAGS(name, f) (f),
						 WREC_OPS(WREC_X_FLAGS)
#undef WREC_X_FLAGS
	};
	return op < WR_OP_MAX ? flags[op] : 0;
}

/* Every command starts with this. */
struct wrec_hdr {
	uint32_t op;   /* enum wrec_op */
	uint32_t size; /* bytes of the whole command, a multiple of 8 */
};

/* A command that releases one object by its worker id: MODULE_UNLOAD, HOST_UNREGISTER, EVENT_DESTROY and
 * GRAPH_DESTROY and MEM_FREE have exactly this layout, and STREAM_DESTROY's struct wrec_stream too (its stream id the low 32
 * bits, its pad 0), so a closing session's objects are released through one builder (daemon/cleanup.c). */
struct wrec_release {
	struct wrec_hdr h;
	uint64_t id;
};

struct wrec_module_load {
	struct wrec_hdr h;
	uint32_t format, pad;      /* CUA_IMAGE_* */
	uint64_t staging_off, len; /* the image, in the staging area */
};

struct wrec_module_unload {
	struct wrec_hdr h;
	uint64_t module;
};

struct wrec_function_get {
	struct wrec_hdr h;
	uint64_t module;
	/* followed by the kernel name, NUL-terminated, padded to 8 */
};

struct wrec_mem_alloc {
	struct wrec_hdr h;
	uint64_t bytes;
};

struct wrec_mem_free {
	struct wrec_hdr h;
	uint64_t addr;
};

struct wrec_stream_create {
	struct wrec_hdr h;
	int32_t priority;
	uint32_t pad;
};

/* WR_STREAM_DESTROY and WR_STREAM_SYNC */
struct wrec_stream {
	struct wrec_hdr h;
	uint32_t stream, pad;
};

/* WR_HTOD and WR_DTOH: between device memory and the staging area (hostbuf 0) or a registered host buffer. */
struct wrec_copy {
	struct wrec_hdr h;
	uint32_t stream;
	uint32_t hostbuf;  /* 0: the staging area; else a host buffer id from WR_HOST_REGISTER */
	uint64_t dev;      /* device address */
	uint64_t host_off; /* offset in the staging area or the host buffer */
	uint64_t bytes;
};

struct wrec_dtod {
	struct wrec_hdr h;
	uint32_t stream, pad;
	uint64_t dst, src, bytes;
};

struct wrec_memset {
	struct wrec_hdr h;
	uint32_t stream, width; /* width: 1, 2 or 4 bytes */
	uint64_t dst, value, count;
};

#define WREC_LAUNCH_PDL (1u << 0)
#define WREC_LAUNCH_COOPERATIVE (1u << 1) /* the grid must be co-resident (grid-wide sync) */
#define WREC_LAUNCH_PRIORITY (1u << 2)    /* priority is the launch's own (else the stream's) */

/* A launch; followed by nargs × (struct wrec_arg, then its bytes padded to 8). */
struct wrec_launch {
	struct wrec_hdr h;
	uint32_t stream, flags; /* WREC_LAUNCH_* */
	uint64_t function;
	uint32_t grid[3], block[3];
	uint32_t shared_mem, nargs;
	uint32_t cluster[3]; /* blocks per cluster; {0, 0, 0}: no cluster asked */
	int32_t priority;    /* with WREC_LAUNCH_PRIORITY */
};

struct wrec_arg {
	uint32_t size, pad;
};

/* The client's memfd, which the front-end holds open as its own descriptor fd (the worker opens it through
 * /proc/<front-end>/fd/<fd>). */
struct wrec_host_register {
	struct wrec_hdr h;
	int32_t fd;
	uint32_t pad;
	uint64_t bytes;
};

struct wrec_host_unregister {
	struct wrec_hdr h;
	uint64_t buffer;
};

struct wrec_module_get_global {
	struct wrec_hdr h;
	uint64_t module;
	/* followed by the global's name, NUL-terminated, padded to 8 */
};

/* WR_FUNC_GET_ATTR (value unused) and WR_FUNC_SET_ATTR */
struct wrec_func_attr {
	struct wrec_hdr h;
	uint64_t function;
	uint32_t attribute; /* CUA_FATTR_* */
	int32_t value;
};

struct wrec_occupancy {
	struct wrec_hdr h;
	uint64_t function;
	uint32_t block_size, shared_mem;
};

/* A graph's nodes, in order (each depends on the one before): nnodes node commands follow, each a complete
 * WR_LAUNCH, WR_MEMSET or WR_DTOD command (header, fixed part, payload) whose stream field is unused. */
struct wrec_graph_create {
	struct wrec_hdr h;
	uint32_t nnodes, pad;
};

/* The stream field sits where every stream command has it (offset 8: the pool patch relies on it). */
struct wrec_graph_launch {
	struct wrec_hdr h;
	uint32_t stream, pad;
	uint64_t graph;
};

/* New arguments of kernel node `node`. */
struct wrec_graph_set_args {
	struct wrec_hdr h;
	uint64_t graph;
	uint32_t node, nargs;
	/* followed by nargs × (struct wrec_arg, then its bytes padded to 8), as after struct wrec_launch */
};

struct wrec_graph_destroy {
	struct wrec_hdr h;
	uint64_t graph;
};

struct wrec_event_create {
	struct wrec_hdr h;
	uint32_t flags, pad; /* CUA_EVENT_* */
};

/* WR_EVENT_DESTROY, WR_EVENT_SYNC, WR_EVENT_QUERY */
struct wrec_event {
	struct wrec_hdr h;
	uint64_t event;
};

/* WR_EVENT_RECORD and WR_STREAM_WAIT_EVENT (the stream right after the header, as in every stream command: the
 * front-end patches pool slots there, streampool.c) */
struct wrec_event_stream {
	struct wrec_hdr h;
	uint32_t stream, pad;
	uint64_t event;
};

struct wrec_event_elapsed {
	struct wrec_hdr h;
	uint64_t start, end;
};

/* Head of a command record. */
struct wrec_req {
	uint64_t req;
	uint32_t ncmds, pad;
};

/* Head of a completion record. */
struct wcpl_req {
	uint64_t req;
	uint32_t ncmds;
	uint32_t fatal;   /* 1: a sticky fault; the worker exits after this record */
	uint64_t busy_ns; /* how long its work kept the device's streams busy, summed over the streams (see worker.c) */
	/* CLOCK_MONOTONIC ns (one clock for the whole host, so the front-end compares them with its own): when the
	 * worker's command loop began the record, when its last stream work was issued (0: none), and when this
	 * record was written; the hops of a launch (stats.h, struct stats_hops) */
	uint64_t t_read, t_issued, t_emit;
};

/* One command's outcome. */
struct wcpl {
	uint32_t status;     /* CUA_OK or a CUA_E* code */
	uint32_t detail_len; /* bytes of detail text following */
	uint32_t data_len;   /* bytes of data following the detail */
	uint32_t pad;
	uint64_t value;
};

/* Data of the worker's first record. */
struct wdev_info {
	char name[256];
	char backend[16];
	uint32_t sm_major, sm_minor;
	uint64_t total_mem;
	uint32_t multiprocessors;
	int32_t prio_least, prio_greatest;
	uint32_t pool_streams;
	uint32_t max_param_bytes;    /* argument bytes one launch may pass (32764 or 4096) */
	uint32_t max_shared_optin;   /* dynamic shared memory per block with the attribute raised */
	uint32_t cluster_launch;     /* 1: thread-block clusters (sm_90+) */
	uint32_t cooperative_launch; /* 1: cooperative launches */
	/* Every CU_DEVICE_ATTRIBUTE the device answered (the drop-in libraries' cuDeviceGetAttribute and
	 * cudaGetDeviceProperties read them), in increasing id order. */
	uint32_t nattrs;
	uint32_t pad;
	cua_wire_dev_attr attrs[CUA_MAX_DEV_ATTRS];
};

static inline uint32_t
wrec_align8(uint32_t n)
{
	return (n + 7u) & ~7u;
}

/* Bytes of a command of fixed struct `fixed` followed by `extra` bytes, padded. */
static inline uint32_t
wrec_size(size_t fixed, uint32_t extra)
{
	return (uint32_t)fixed + wrec_align8(extra);
}

_Static_assert(sizeof(struct wrec_module_unload) == sizeof(struct wrec_release) &&
		       sizeof(struct wrec_host_unregister) == sizeof(struct wrec_release) &&
		       sizeof(struct wrec_event) == sizeof(struct wrec_release) &&
		       sizeof(struct wrec_graph_destroy) == sizeof(struct wrec_release) &&
		       sizeof(struct wrec_stream) == sizeof(struct wrec_release) &&
		       sizeof(struct wrec_mem_free) == sizeof(struct wrec_release) &&
		       offsetof(struct wrec_stream, stream) == offsetof(struct wrec_release, id),
	       "release commands share struct wrec_release's layout");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "wrec_release carries a stream id in its low 32 bits");

#endif
