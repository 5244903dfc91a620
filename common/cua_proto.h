/*
 * cua_proto.h — wire protocol version 1: request kinds, limits, flags, handle layout and the decoded form
 * of every message body. The plain-text spec is proto/PROTOCOL.md; keep the two in step.
 *
 * Numbers here are wire values: never renumber; retire a value by leaving its line as a comment "unused".
 */
#ifndef CUA_PROTO_H
#define CUA_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CUA_PROTO_VERSION 1u
#define CUA_PROTO_VERSION_MIN 1u

/* ---- limits the decoder and the daemon enforce (PROTOCOL.md "Limits") ---- */
#define CUA_WIRE_MAX_MESSAGE ((size_t)256 << 20) /* hard cap of the decoder; listeners set a lower one */
#define CUA_WIRE_MAX_DEPTH 8u                    /* nesting of arrays/maps */
#define CUA_MAX_NAME 1024u                       /* kernel names */
#define CUA_MAX_IDENT 128u                       /* client/server names, backend names */
#define CUA_MAX_TENANT_NAME 64u                  /* tenants' names (the configuration file's) */
#define CUA_MAX_TOKEN 256u                       /* HELLO's bearer token */
#define CUA_MAX_MESSAGE_TEXT 65536u              /* human message in a reply (JIT logs) */
#define CUA_MAX_ARGS 1024u                       /* arguments of one launch */
#define CUA_MAX_ARG_BYTES 32764u                 /* one by-value argument (up to all of them) */
#define CUA_MAX_PARAM_BYTES_OLD 4096u            /* all arguments: CUDA before 12.1 or below sm_70 */
#define CUA_MAX_PARAM_BYTES 32764u               /* all arguments of one launch (CUDA 12.1+ limit) */
#define CUA_MAX_PARAMS 1024u                     /* parameters in a function's layout */
#define CUA_MAX_BATCH 4096u                      /* items in one batch */
#define CUA_MAX_DEVICES 64u
#define CUA_MAX_PING 1024u
#define CUA_MAX_SESSIONS_LIST 4096u       /* rows of one SESSIONS reply */
#define CUA_MAX_GRAPH_NODES CUA_MAX_BATCH /* nodes of one graph (GRAPH_CREATE.items) */
#define CUA_MAX_TENANT_KV 64u             /* key/value pairs of one TENANT_ADD or TENANT_SET */
#define CUA_MAX_TENANT_KEY 32u            /* a key of [tenant NAME] ("module-bytes") */
#define CUA_MAX_TENANT_VALUE 256u         /* its value */
#define CUA_MAX_TENANT_LIST 256u          /* rows of one TENANT_LIST reply (the daemon's CUAD_MAX_TENANTS) */
#define CUA_MAX_TENANT_TEXT 1024u         /* TENANT_LIST's match-rule summary */

/* ---- request kinds (the "op" of every message) ---- */
#define CUA_OP_TABLE(X)                                                                                                \
	X(HELLO, 1)                                                                                                    \
	X(PING, 2)                                                                                                     \
	X(DEVICES, 3)                                                                                                  \
	X(MODULE_LOAD, 4)                                                                                              \
	X(MODULE_UNLOAD, 5)                                                                                            \
	X(FUNCTION_GET, 6)                                                                                             \
	X(MEM_ALLOC, 7)                                                                                                \
	X(MEM_FREE, 8)                                                                                                 \
	X(MEMCPY_HTOD, 9)                                                                                              \
	X(MEMCPY_DTOH, 10)                                                                                             \
	X(MEMCPY_DTOD, 11)                                                                                             \
	X(MEMSET, 12)                                                                                                  \
	X(STREAM_CREATE, 13)                                                                                           \
	X(STREAM_DESTROY, 14)                                                                                          \
	X(STREAM_SYNC, 15)                                                                                             \
	X(LAUNCH, 16)                                                                                                  \
	X(BATCH, 17)                                                                                                   \
	X(SYNCHRONIZE, 18)                                                                                             \
	X(STATUS, 19)                                                                                                  \
	X(HOST_REGISTER, 20)                                                                                           \
	X(HOST_UNREGISTER, 21)                                                                                         \
	X(MEMCPY_HTOD_HOST, 22)                                                                                        \
	X(MEMCPY_DTOH_HOST, 23)                                                                                        \
	X(SESSIONS, 24)                                                                                                \
	X(DISCONNECT, 25)                                                                                              \
	X(DRAIN, 26)                                                                                                   \
	X(MODULE_GET_GLOBAL, 27)                                                                                       \
	X(FUNC_GET_ATTRIBUTE, 28)                                                                                      \
	X(FUNC_SET_ATTRIBUTE, 29)                                                                                      \
	X(OCCUPANCY, 30)                                                                                               \
	X(EVENT_CREATE, 31)                                                                                            \
	X(EVENT_DESTROY, 32)                                                                                           \
	X(EVENT_RECORD, 33)                                                                                            \
	X(STREAM_WAIT_EVENT, 34)                                                                                       \
	X(EVENT_SYNC, 35)                                                                                              \
	X(EVENT_ELAPSED, 36)                                                                                           \
	X(EVENT_QUERY, 37)                                                                                             \
	X(GRAPH_CREATE, 40)                                                                                            \
	X(GRAPH_LAUNCH, 41)                                                                                            \
	X(GRAPH_DESTROY, 42)                                                                                           \
	X(GRAPH_SET_ARGS, 43)                                                                                          \
	X(TENANT_ADD, 44)                                                                                              \
	X(TENANT_SET, 45)                                                                                              \
	X(TENANT_REMOVE, 46)                                                                                           \
	X(TENANT_LIST, 47)

enum cua_op {
#define CUA_X_OP(name, value) CUA_OP_##name = value,
	CUA_OP_TABLE(CUA_X_OP)
#undef CUA_X_OP
		CUA_OP_MAX
};

/* Name of an op ("LAUNCH"), or NULL when unknown. */
const char *cua_op_name(uint32_t op);

/* ---- flags ---- */
#define CUA_LAUNCH_PDL (1u << 0)         /* programmatic dependent launch (sm_90+) */
#define CUA_FLAG_NO_WAIT (1u << 1)       /* fire-and-forget: reply at acceptance; errors at SYNCHRONIZE */
#define CUA_LAUNCH_COOPERATIVE (1u << 2) /* cooperative launch: the grid is co-resident (grid-wide sync) */
#define CUA_LAUNCH_FLAGS_ALL (CUA_LAUNCH_PDL | CUA_FLAG_NO_WAIT | CUA_LAUNCH_COOPERATIVE)

/* LAUNCH's optional tail (PROTOCOL.md §4): 7 fields without it, 8 with the cluster, 9 with the priority too. */
#define CUA_LAUNCH_FIELDS 7u
#define CUA_LAUNCH_FIELDS_CLUSTER 8u
#define CUA_LAUNCH_FIELDS_PRIORITY 9u
#define CUA_MAX_CLUSTER_PORTABLE 8u /* blocks in a cluster, without NON_PORTABLE_CLUSTER_SIZE_ALLOWED */
#define CUA_MAX_CLUSTER_SIZE 16u    /* blocks in a cluster with it (sm_90) */

/* Module image formats (MODULE_LOAD.format); AUTO sniffs the image. */
enum { CUA_IMAGE_AUTO = 0, CUA_IMAGE_CUBIN = 1, CUA_IMAGE_FATBIN = 2, CUA_IMAGE_PTX = 3, CUA_IMAGE_EMU = 4 };

/* Function attributes (FUNC_GET_ATTRIBUTE / FUNC_SET_ATTRIBUTE.attribute): CUDA's CUfunction_attribute numbers.
 * MAX_DYNAMIC_SHARED, PREFERRED_CARVEOUT, REQUIRED_CLUSTER_* and NON_PORTABLE_CLUSTER_SIZE_ALLOWED can be set. */
enum {
	CUA_FATTR_MAX_THREADS_PER_BLOCK = 0,
	CUA_FATTR_SHARED_SIZE_BYTES = 1, /* static shared memory */
	CUA_FATTR_CONST_SIZE_BYTES = 2,
	CUA_FATTR_LOCAL_SIZE_BYTES = 3,
	CUA_FATTR_NUM_REGS = 4,
	CUA_FATTR_PTX_VERSION = 5,
	CUA_FATTR_BINARY_VERSION = 6,
	CUA_FATTR_CACHE_MODE_CA = 7,
	CUA_FATTR_MAX_DYNAMIC_SHARED = 8,
	CUA_FATTR_PREFERRED_CARVEOUT = 9,
	CUA_FATTR_CLUSTER_SIZE_MUST_BE_SET = 10,
	CUA_FATTR_REQUIRED_CLUSTER_WIDTH = 11,
	CUA_FATTR_REQUIRED_CLUSTER_HEIGHT = 12,
	CUA_FATTR_REQUIRED_CLUSTER_DEPTH = 13,
	CUA_FATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14,
	CUA_FATTR_CLUSTER_SCHEDULING_POLICY = 15,
	CUA_FATTR_LAST = 15
};
#define CUA_MAX_GLOBAL_NAME CUA_MAX_NAME /* MODULE_GET_GLOBAL.name */
#define CUA_MAX_BLOCK_THREADS 1024u      /* OCCUPANCY.block_size */

/* EVENT_CREATE.flags: CUDA's CUevent_flags value (CU_EVENT_DISABLE_TIMING); no other flag is accepted. The
 * public header defines the same macro identically (cuasync.h). */
#define CUA_EVENT_DISABLE_TIMING 0x2u /* CUDA's CU_EVENT_DISABLE_TIMING (the same value on the wire) */
#define CUA_EVENT_FLAGS_ALL CUA_EVENT_DISABLE_TIMING

/* ---- handles: opaque to clients; this layout is the daemon's business (PROTOCOL.md "Handles") ----
 *   bits 63..60 kind · 59..52 device · 51..40 worker generation · 39..24 tag · 23..0 slot
 * The tag changes on every reuse of a slot and starts at a per-session random offset, so a freed or another
 * session's handle is refused (NOT_FOUND) rather than aliasing a live object. 0 is never a valid handle. */
enum { CUA_HK_MODULE = 1, CUA_HK_FUNCTION = 2, CUA_HK_STREAM = 3, CUA_HK_HOSTBUF = 4 };
enum { CUA_HK_EVENT = 5, CUA_HK_GRAPH = 6 };
#define CUA_HANDLE_GEN_MASK 0xfffu
#define CUA_HANDLE_DEV_MASK 0xffu /* 8 bits: CUA_MAX_DEVICES must fit (daemon/cuad-limits.h) */
/* Stream fields: 0 is the session's pool (unordered), CUA_STREAM_ORDERED_ID its ordered stream (PROTOCOL.md §3);
 * no handle of an object is ever below 1 << 60. */
#define CUA_STREAM_ORDERED_ID 1u
static inline uint64_t
cua_handle_make(unsigned kind, unsigned dev, uint32_t gen, unsigned tag, uint32_t slot)
{
	return ((uint64_t)(kind & 0xfu) << 60) | ((uint64_t)(dev & CUA_HANDLE_DEV_MASK) << 52) |
	       ((uint64_t)(gen & CUA_HANDLE_GEN_MASK) << 40) | ((uint64_t)(tag & 0xffffu) << 24) | (slot & 0xffffffu);
}
static inline unsigned
cua_handle_kind(uint64_t h)
{
	return (unsigned)(h >> 60) & 0xfu;
}
static inline unsigned
cua_handle_dev(uint64_t h)
{
	return (unsigned)(h >> 52) & CUA_HANDLE_DEV_MASK;
}
static inline uint32_t
cua_handle_gen(uint64_t h)
{
	return (uint32_t)(h >> 40) & CUA_HANDLE_GEN_MASK;
}
static inline unsigned
cua_handle_tag(uint64_t h)
{
	return (unsigned)(h >> 24) & 0xffffu;
}
static inline uint32_t
cua_handle_slot(uint64_t h)
{
	return (uint32_t)h & 0xffffffu;
}

/* ---- decoded message parts ---- */

/* A str or bin referenced in place inside the received message (never copied by the decoder). */
typedef struct cua_bytes {
	const void *ptr;
	uint32_t len;
} cua_bytes;

/* A launch argument: by-value bytes (msgpack bin) or a device pointer (msgpack uint). */
enum { CUA_ARG_BYTES = 0, CUA_ARG_DEVPTR = 1 };
typedef struct cua_wire_arg {
	uint32_t kind;
	uint64_t devptr;
	cua_bytes bytes;
} cua_wire_arg;

typedef struct cua_param_info {
	uint32_t offset, size;
} cua_param_info;

/* One device attribute: a CU_DEVICE_ATTRIBUTE id and the value the device's driver answered. */
#define CUA_MAX_DEV_ATTRS 256
#define CUA_DEVICE_FIELDS 15
typedef struct cua_wire_dev_attr {
	uint32_t id;
	int32_t value;
} cua_wire_dev_attr;

typedef struct cua_wire_device {
	uint32_t index;
	cua_bytes name;
	uint32_t sm_major, sm_minor;
	uint64_t total_mem;
	uint32_t multiprocessors;
	int32_t prio_least, prio_greatest;
	cua_bytes backend;
	uint32_t generation;
	uint32_t max_param_bytes;    /* bytes of arguments one launch may pass: 32764 (CUDA 12.1+, sm_70+) or 4096 */
	uint32_t max_shared_optin;   /* dynamic shared memory a block may opt in to (FUNC_SET_ATTRIBUTE) */
	uint32_t cluster_launch;     /* 1: thread-block clusters (LAUNCH.cluster; sm_90+) */
	uint32_t cooperative_launch; /* 1: cooperative launches (CUA_LAUNCH_COOPERATIVE) */
	/* The optional tail (PROTOCOL.md: device_info): nfields says how many fields are on the wire (decoded) or
	 * to send (encoded): CUA_DEVICE_FIELDS with attrs, 14 without (an older daemon's row). */
	uint32_t nfields;
	const cua_wire_dev_attr *attrs; /* the device's CU_DEVICE_ATTRIBUTE values its driver answered */
	uint32_t nattrs;
} cua_wire_device;

struct cua_req_hello {
	uint32_t min_version, max_version;
	cua_bytes client;
	uint32_t pid;
	cua_bytes token; /* a bearer token of the daemon's --token-file, or empty (PROTOCOL.md §2) */
};
struct cua_rep_hello {
	uint32_t version;
	uint64_t session;
	cua_bytes server;
	uint64_t max_message;
	uint32_t max_batch, max_args, devices;
	cua_bytes fd_secret; /* ipc:// sessions: the fd channel's secret (cua_fdchan.h); else empty */
};
struct cua_req_ping {
	uint64_t nonce;
};
struct cua_rep_ping {
	uint64_t nonce;
};
struct cua_rep_devices {
	cua_wire_device *devices;
	uint32_t ndevices;
};
struct cua_req_module_load {
	uint32_t device;
	uint32_t format;
	cua_bytes image;
};
struct cua_rep_module_load {
	uint64_t module;
};
struct cua_req_module_unload {
	uint64_t module;
};
struct cua_req_function_get {
	uint64_t module;
	cua_bytes name;
};
struct cua_rep_function_get {
	uint64_t function;
	cua_param_info *params;
	uint32_t nparams;
};
struct cua_req_mem_alloc {
	uint32_t device;
	uint64_t bytes;
};
struct cua_rep_mem_alloc {
	uint64_t ptr;
};
struct cua_req_mem_free {
	uint64_t ptr;
};
struct cua_req_memcpy_htod {
	uint64_t dst;
	uint64_t stream;
	cua_bytes data;
};
struct cua_req_memcpy_dtoh {
	uint64_t src;
	uint64_t bytes;
	uint64_t stream;
};
struct cua_rep_memcpy_dtoh {
	cua_bytes data;
};
struct cua_req_memcpy_dtod {
	uint64_t dst, src, bytes, stream;
};
struct cua_req_memset {
	uint64_t dst;
	uint32_t value, width;
	uint64_t count;
	uint64_t stream;
};
struct cua_req_stream_create {
	uint32_t device;
	int32_t priority;
	uint32_t flags;
};
struct cua_rep_stream_create {
	uint64_t stream;
};
struct cua_req_stream {
	uint64_t stream;
}; /* STREAM_DESTROY, STREAM_SYNC */
struct cua_req_launch {
	uint64_t function;
	uint32_t grid[3], block[3];
	uint32_t shared_mem;
	uint64_t stream;
	uint32_t flags;
	cua_wire_arg *args;
	uint32_t nargs;
	/* The optional tail: nfields says how many fields are on the wire (decoded) or to send (encoded; below
	 * CUA_LAUNCH_FIELDS sends 7). cluster {0, 0, 0} is no cluster; priority counts only with 9 fields. */
	uint32_t cluster[3];
	int32_t priority;
	uint32_t nfields;
};

struct cua_req_module_get_global {
	uint64_t module;
	cua_bytes name;
};
struct cua_rep_module_get_global {
	uint64_t ptr, bytes;
};
struct cua_req_func_attribute { /* FUNC_GET_ATTRIBUTE (value unused) and FUNC_SET_ATTRIBUTE */
	uint64_t function;
	uint32_t attribute;
	int32_t value;
};
struct cua_rep_func_get_attribute {
	int32_t value;
};
struct cua_req_occupancy {
	uint64_t function;
	uint32_t block_size, shared_mem;
};
struct cua_rep_occupancy {
	uint32_t blocks;
};

/* Events (PROTOCOL.md §3, [R:event-*]) */
struct cua_req_event_create {
	uint32_t device;
	uint32_t flags; /* CUA_EVENT_* */
};
struct cua_rep_event_create {
	uint64_t event;
};
struct cua_req_event {
	uint64_t event;
}; /* EVENT_DESTROY, EVENT_SYNC, EVENT_QUERY */
struct cua_req_event_stream {
	uint64_t event, stream;
}; /* EVENT_RECORD [event, stream] and STREAM_WAIT_EVENT [stream, event] */
struct cua_req_event_elapsed {
	uint64_t start, end;
};
struct cua_rep_event_elapsed {
	uint32_t ms_bits; /* the milliseconds as IEEE-754 binary32 bits (protocol v1 has no floats) */
};
struct cua_rep_event_query {
	uint32_t ready; /* 1: everything before its last record has completed (or never recorded), 0: not yet */
};

/* Shared host memory (same host, ipc:// only): the client's memfd, passed into the session over the fd channel
 * (cua_fdchan.h) and named by its ticket, mapped by the GPU worker. */
struct cua_req_host_register {
	uint32_t device;
	uint64_t ticket;
	uint64_t bytes;
};
struct cua_rep_host_register {
	uint64_t buffer;
};
struct cua_req_host_unregister {
	uint64_t buffer;
};
struct cua_req_memcpy_host {
	uint64_t dev_ptr;
	uint64_t stream;
	uint64_t buffer;
	uint64_t offset, bytes;
};

/* A batch item: one of LAUNCH, MEMCPY_HTOD, MEMCPY_DTOH, MEMCPY_DTOD, MEMSET, MEMCPY_HTOD_HOST,
 * MEMCPY_DTOH_HOST (kind = that op). */
typedef struct cua_batch_item {
	uint32_t kind;
	union {
		struct cua_req_launch launch;
		struct cua_req_memcpy_htod htod;
		struct cua_req_memcpy_dtoh dtoh;
		struct cua_req_memcpy_dtod dtod;
		struct cua_req_memset memset;
		struct cua_req_memcpy_host host;
	} u;
} cua_batch_item;
struct cua_req_batch {
	uint32_t flags;
	cua_batch_item *items;
	uint32_t nitems;
};

/* One result per batch item: its status, stable name, message, and data (DTOH items) or empty. */
typedef struct cua_item_result {
	uint32_t status;
	cua_bytes name, message, data;
} cua_item_result;
struct cua_rep_batch {
	cua_item_result *results;
	uint32_t nresults;
};

typedef struct cua_wire_dev_status {
	uint32_t index, generation, restarts, in_flight;
	uint64_t allocations, alloc_bytes;
	/* The optional tail (PROTOCOL.md: dev_status): nfields says how many fields are on the wire (decoded) or
	 * to send (encoded; below CUA_DEV_STATUS_FIELDS sends 6, as older daemons do). */
	uint32_t drained; /* 1: DRAIN took the device out of service: it takes no new objects */
	uint32_t nfields;
} cua_wire_dev_status;
#define CUA_DEV_STATUS_FIELDS 7u
typedef struct cua_wire_counts {
	uint64_t allocations, alloc_bytes, modules, functions, streams, in_flight;
} cua_wire_counts;
struct cua_rep_status {
	uint64_t uptime_ms;
	uint32_t sessions;
	uint64_t requests, errors;
	cua_wire_dev_status *devices;
	uint32_t ndevices;
	cua_wire_counts session;     /* the asking session */
	cua_wire_counts total;       /* every session */
	uint32_t insecure_listeners; /* plain tcp:// listeners (--allow-insecure-tcp) */
};

/* SESSIONS: one row per session (the operator sees every session, a client its own). */
typedef struct cua_wire_session {
	uint64_t session;
	cua_bytes client;  /* the name its HELLO gave */
	uint32_t pid;      /* the pid its HELLO gave */
	uint32_t peer_pid; /* the pid the kernel reports for an ipc:// peer (0: unknown, e.g. tcp) */
	uint64_t age_ms, requests, errors, in_flight, alloc_bytes, streams, modules;
	uint32_t operator; /* 1: connected through the operator endpoint */
	cua_bytes tenant;  /* its tenant's name ("": none, the operator's) */
	uint64_t busy_ns;  /* device time its work took (the workers' measure) */
	/* The optional tail (PROTOCOL.md: session_info), who is on the other end as the transport vouches for
	 * it; nfields as in cua_wire_dev_status (CUA_SESSION_FIELDS: all of them, 14: an older daemon's row). */
	cua_bytes transport; /* "ipc", "tcp" or "tls+tcp" */
	uint32_t uid, gid;   /* ipc://: the kernel's credentials of the peer; CUA_WIRE_NO_UID when not known */
	cua_bytes peer;      /* tcp:// and tls+tcp://: the peer's address as "IP:port" ("[IPv6]:port"); "" for ipc:// */
	cua_bytes token;     /* the name of the --token-file entry its HELLO's token matched ("": none) */
	uint32_t nfields;
} cua_wire_session;
#define CUA_SESSION_FIELDS 19u
#define CUA_WIRE_NO_UID UINT32_MAX /* session_info's uid and gid when the transport does not tell them */
#define CUA_MAX_PEER_ADDR 64u      /* session_info's peer */
struct cua_rep_sessions {
	cua_wire_session *sessions;
	uint32_t nsessions;
};
struct cua_req_disconnect {
	uint64_t session;
};
struct cua_req_drain {
	uint32_t device;
	uint32_t drain; /* 1: drain, 0: take new objects again */
};
struct cua_rep_drain {
	uint32_t holding;   /* sessions that still hold objects or work on the device */
	uint32_t in_flight; /* requests in its workers */
};

/* Tenants at run time (PROTOCOL.md "Tenants at run time"), operator endpoint only: a tenant's rules and
 * limits travel as the configuration file's keys and values ([tenant NAME] of cuasyncd.conf(5)), so that the
 * file and the ops accept exactly the same things. */
typedef struct cua_wire_kv {
	cua_bytes key, value;
} cua_wire_kv;
#define CUA_TENANT_ONE_OFF_TOKEN 1u /* TENANT_ADD.flags: the daemon makes a token for the tenant, returned once */
#define CUA_TENANT_DRAIN 1u         /* TENANT_REMOVE.flags: refuse new sessions and objects, remove when done */
struct cua_req_tenant { /* TENANT_ADD (name, kv, flags), TENANT_SET (name, kv), TENANT_REMOVE (name, flags) */
	cua_bytes name;
	cua_wire_kv *kv;
	uint32_t nkv;
	uint32_t flags;
};
struct cua_rep_tenant_add {
	cua_bytes token; /* the one-off token ("" unless asked for): shown this once, never again */
};
typedef struct cua_wire_tenant {
	cua_bytes name;
	cua_bytes source;    /* "file" or "runtime" */
	cua_bytes rule;      /* who belongs to it, for people ("uid 1000, token t1"; "" for default) */
	cua_wire_kv *limits; /* its limits as the file's keys and values (only those set) */
	uint32_t nlimits;
	uint32_t removing;  /* 1: TENANT_REMOVE ran; it goes when its last session has ended */
	uint32_t sessions;  /* usage: its live sessions */
	uint64_t mem_bytes; /* device memory its sessions hold, all devices */
	uint64_t streams;   /* streams its sessions hold */
} cua_wire_tenant;
struct cua_rep_tenant_list {
	cua_wire_tenant *tenants;
	uint32_t ntenants;
};

/* Graphs (PROTOCOL.md "Graphs"): a batch of launches, memsets and device-to-device copies made into a CUDA
 * graph once, launched by handle. GRAPH_CREATE's items are batch items (stream 0 each: the launch names it). */
struct cua_req_graph_create {
	uint32_t flags; /* 0 */
	cua_batch_item *items;
	uint32_t nitems;
};
struct cua_rep_graph_create {
	uint64_t graph;
	uint32_t nodes;
};
struct cua_req_graph_launch {
	uint64_t graph;
	uint64_t stream;
	uint32_t flags; /* CUA_FLAG_NO_WAIT */
};
struct cua_req_graph_destroy {
	uint64_t graph;
};
struct cua_req_graph_set_args { /* new arguments of kernel node `node` (same function, same layout) */
	uint64_t graph;
	uint32_t node;
	cua_wire_arg *args;
	uint32_t nargs;
};

/* Every request body, by op. */
typedef union cua_req_body {
	struct cua_req_hello hello;
	struct cua_req_ping ping;
	struct cua_req_module_load module_load;
	struct cua_req_module_unload module_unload;
	struct cua_req_function_get function_get;
	struct cua_req_mem_alloc mem_alloc;
	struct cua_req_mem_free mem_free;
	struct cua_req_memcpy_htod memcpy_htod;
	struct cua_req_memcpy_dtoh memcpy_dtoh;
	struct cua_req_memcpy_dtod memcpy_dtod;
	struct cua_req_memset memset;
	struct cua_req_stream_create stream_create;
	struct cua_req_stream stream;
	struct cua_req_launch launch;
	struct cua_req_batch batch;
	struct cua_req_host_register host_register;
	struct cua_req_host_unregister host_unregister;
	struct cua_req_memcpy_host memcpy_host;
	struct cua_req_disconnect disconnect;
	struct cua_req_drain drain;
	struct cua_req_module_get_global module_get_global;
	struct cua_req_func_attribute func_attribute;
	struct cua_req_occupancy occupancy;
	struct cua_req_graph_create graph_create;
	struct cua_req_graph_launch graph_launch;
	struct cua_req_graph_destroy graph_destroy;
	struct cua_req_graph_set_args graph_set_args;
	struct cua_req_event_create event_create;
	struct cua_req_event event;
	struct cua_req_event_stream event_stream;
	struct cua_req_event_elapsed event_elapsed;
	struct cua_req_tenant tenant;
} cua_req_body;

/* Every reply body, by op (ops without a reply body use none of these). */
typedef union cua_rep_body {
	struct cua_rep_hello hello;
	struct cua_rep_ping ping;
	struct cua_rep_devices devices;
	struct cua_rep_module_load module_load;
	struct cua_rep_function_get function_get;
	struct cua_rep_mem_alloc mem_alloc;
	struct cua_rep_memcpy_dtoh memcpy_dtoh;
	struct cua_rep_stream_create stream_create;
	struct cua_rep_batch batch;
	struct cua_rep_status status;
	struct cua_rep_host_register host_register;
	struct cua_rep_sessions sessions;
	struct cua_rep_drain drain;
	struct cua_rep_module_get_global module_get_global;
	struct cua_rep_func_get_attribute func_get_attribute;
	struct cua_rep_occupancy occupancy;
	struct cua_rep_graph_create graph_create;
	struct cua_rep_event_create event_create;
	struct cua_rep_event_elapsed event_elapsed;
	struct cua_rep_event_query event_query;
	struct cua_rep_tenant_add tenant_add;
	struct cua_rep_tenant_list tenant_list;
} cua_rep_body;

#endif
