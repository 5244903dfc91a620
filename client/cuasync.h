/*
 * cuasync.h — libcuasync, the client library of cuasyncd (the whole public API).
 *
 * Every function returns a status code: CUA_OK (0) or one of the codes below, whose stable name
 * cua_strerror_name() gives and whose advice cua_strerror() gives; cua_last_error() returns the daemon's
 * message for the calling thread's last failure (what exactly was wrong).
 *
 * Thread safety: one cua_client may be used by many threads at once. A cua_launch or cua_batch belongs to
 * the thread building it until it is submitted. A cua_future may be waited on from any one thread.
 *
 * Launches are asynchronous: cua_launch_submit returns at once with a future that completes when the kernel
 * has finished on the GPU. Launches submitted while earlier ones are in flight are coalesced into one
 * message, so many small launches reach GPU launch rates despite the transport's round trip.
 */
#ifndef CUASYNC_H
#define CUASYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(code, NAME, value, advice). Values are wire values (proto/PROTOCOL.md) and never change. */
#define CUA_ERROR_TABLE(X)                                                                                             \
	X(CUA_OK, "OK", 0, "success")                                                                                  \
	X(CUA_EINTERNAL, "INTERNAL", 1, "internal error in cuasyncd; please report it with the daemon log")            \
	X(CUA_EPROTOCOL, "PROTOCOL", 2, "malformed message: the request does not follow PROTOCOL.md")                  \
	X(CUA_EVERSION, "VERSION", 3, "unsupported protocol version: upgrade the client or the daemon")                \
	X(CUA_EUNKNOWN_OP, "UNKNOWN_OP", 4, "unknown request kind: the daemon is older than the client")               \
	X(CUA_EBAD_ARGUMENT, "BAD_ARGUMENT", 5, "invalid argument: check the values passed to the call")               \
	X(CUA_ENOT_FOUND, "NOT_FOUND", 6, "no such object in this session: the handle is unknown or was freed")        \
	X(CUA_ECONTEXT_LOST, "CONTEXT_LOST", 7,                                                                        \
	  "the GPU context was lost (a fault or worker restart); recreate modules, memory and streams")                \
	X(CUA_EQUOTA, "QUOTA", 8, "session quota exceeded: free objects or raise the daemon's limits")                 \
	X(CUA_EPDL_UNSUPPORTED, "PDL_UNSUPPORTED", 9,                                                                  \
	  "programmatic dependent launch is not supported by the target device")                                       \
	X(CUA_ENOMEM, "NO_MEMORY", 10, "out of memory: free memory or ask for less")                                   \
	X(CUA_EDEVICE, "DEVICE", 11, "the device reported an error; the message names the CUDA error")                 \
	X(CUA_ETOO_LARGE, "TOO_LARGE", 12, "message or value exceeds a protocol limit: split the request")             \
	X(CUA_ETIMEOUT, "TIMEOUT", 13, "timed out waiting for the daemon: is cuasyncd running and responsive?")        \
	X(CUA_ETRANSPORT, "TRANSPORT", 14,                                                                             \
	  "cannot talk to cuasyncd: check the URL ($CUASYNC_URL) and that the daemon runs")                            \
	X(CUA_ECLOSED, "CLOSED", 15, "the connection or object is closed")                                             \
	X(CUA_ENO_SESSION, "NO_SESSION", 16, "no session on this connection: send hello first")                        \
	X(CUA_EBUSY, "BUSY", 17, "the object is in use by work in flight: synchronize first")                          \
	X(CUA_ENO_DEVICE, "NO_DEVICE", 18, "no usable device: see the daemon log for why")                             \
	X(CUA_EUNSUPPORTED, "UNSUPPORTED", 19, "not supported by this backend or build")                               \
	X(CUA_EMODULE, "MODULE", 20, "the module image was rejected; the message holds the JIT/loader log")            \
	X(CUA_EDEVICE_HUNG, "DEVICE_HUNG", 21,                                                                         \
	  "the device's worker stopped making progress and was restarted; recreate modules, memory and streams")       \
	X(CUA_ESHUTTING_DOWN, "SHUTTING_DOWN", 22,                                                                     \
	  "cuasyncd is shutting down and did not run this request: reconnect (to its successor) and send it again")    \
	X(CUA_EUNAUTHENTICATED, "UNAUTHENTICATED", 23,                                                                 \
	  "the daemon wants credentials this connection did not give: set $CUASYNC_TOKEN (or $CUASYNC_TOKEN_FILE) "    \
	  "to a token of the daemon's --token-file, or connect over ipc://")                                           \
	X(CUA_EPERMISSION_DENIED, "PERMISSION_DENIED", 24,                                                             \
	  "the daemon knows who you are but does not allow this: ask its operator (see the message for the rule)")     \
	X(CUA_ESESSION_LOST, "SESSION_LOST", 25,                                                                       \
	  "the session is gone (the daemon restarted or an operator disconnected it) with all its objects: reconnect " \
	  "(cua_disconnect, then cua_connect) and recreate modules, memory and streams")

enum cua_status {
#define CUA_X_ENUM(code, name, value, msg) code = value,
	CUA_ERROR_TABLE(CUA_X_ENUM)
#undef CUA_X_ENUM
		CUA_ERROR_COUNT
};

/* Stable upper-case name of a status ("CONTEXT_LOST"), "UNKNOWN" for others. Never NULL. */
const char *cua_strerror_name(int status);
/* What the status means and what to do. Never NULL. */
const char *cua_strerror(int status);
/* The detailed message of the calling thread's last failed call (the daemon's words), "" if none. */
const char *cua_last_error(void);

/* ---- objects ---- */
typedef struct cua_client cua_client;
typedef struct cua_launch cua_launch;
typedef struct cua_batch cua_batch;
typedef struct cua_future cua_future;
/* Typed handles: the compiler refuses a module where a stream is wanted. {0} is "none". */
typedef struct cua_module {
	uint64_t id;
} cua_module;
typedef struct cua_function {
	uint64_t id;
} cua_function;
typedef struct cua_stream {
	uint64_t id;
} cua_stream; /* {0}: the daemon's stream pool */
typedef uint64_t cua_deviceptr;

/* Streams without a handle. CUA_STREAM_DEFAULT is the client's default: the session's pool unless
 * cua_set_default_stream (or $CUASYNC_DEFAULT_STREAM=ordered at connect) chose the ordered stream.
 * CUA_STREAM_POOL is the pool, a few streams of the session used round-robin: work on it is NOT ordered, which
 * is the fastest for independent launches (the seed cuda-async's pool). CUA_STREAM_ORDERED is the session's
 * ordered stream on device 0: its work runs in submission order, like CUDA's default stream for a one-thread
 * program — what a port from the runtime API expects. */
#define CUA_STREAM_DEFAULT ((cua_stream){0})
#define CUA_STREAM_ORDERED ((cua_stream){1})
#define CUA_STREAM_POOL ((cua_stream){2})

typedef struct cua_device_info {
	int index;
	char name[257];
	int sm_major, sm_minor;
	uint64_t total_mem;
	int multiprocessors;
	int priority_least, priority_greatest; /* stream priorities: lower number = higher priority */
	char backend[17];                      /* "cuda" or "emu" */
	uint32_t generation;                   /* worker generation: changes when the context was lost */
	uint32_t max_param_bytes;              /* argument bytes one launch may pass: 32764 (CUDA 12.1+ and sm_70+)
						* or 4096 */
	uint32_t max_shared_optin;             /* dynamic shared memory per block a kernel may be allowed
						* (cua_func_set_attribute, CUA_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) */
	/* appended: fields are only ever added at the end */
	int cluster_launch;     /* 1: thread-block clusters (cua_launch_set_cluster_dims; sm_90+) */
	int cooperative_launch; /* 1: cooperative launches (cua_launch_cooperative) */
} cua_device_info;

typedef struct cua_status_counts {
	uint64_t allocations, alloc_bytes, modules, functions, streams, in_flight;
} cua_status_counts;

typedef struct cua_daemon_status {
	uint64_t uptime_ms;
	uint32_t sessions;
	uint64_t requests, errors;
	uint32_t ndevices;
	struct {
		uint32_t generation, restarts, in_flight;
		uint64_t allocations, alloc_bytes;
	} devices[64];
	cua_status_counts session;   /* this connection */
	cua_status_counts total;     /* every connection */
	uint32_t insecure_listeners; /* plain tcp:// listeners the daemon was allowed to open (--allow-insecure-tcp) */
	uint64_t drained;            /* bit d: device d is drained (cua_drain_device): it takes no new objects */
} cua_daemon_status;

/* One session, as cua_sessions lists it. */
typedef struct cua_session_info {
	uint64_t id;
	char client[129];  /* the name its HELLO gave ("libcuasync") */
	uint32_t pid;      /* the pid its HELLO gave */
	uint32_t peer_pid; /* the pid the kernel reports for a local (ipc://) peer; 0: unknown */
	uint64_t age_ms, requests, errors;
	uint64_t in_flight;   /* its requests queued, waiting for their turn or in a worker */
	uint64_t alloc_bytes; /* device memory it holds, all devices */
	uint64_t streams, modules;
	int operator_endpoint; /* 1: connected through the operator endpoint */
	char tenant[65];       /* its tenant (the daemon's configuration file; "" for the operator's) */
	uint64_t busy_ns;      /* device time its work took, as the daemon's workers measure it */
	/* who is on the other end, as the transport vouches for it (empty, and uid/gid CUA_NO_UID, from an older daemon whose rows lack it) */
	char transport[17]; /* "ipc", "tcp" or "tls+tcp" */
	uint32_t uid, gid;  /* ipc://: the peer process's, as the daemon's kernel saw them; CUA_NO_UID: unknown */
	char peer[65];      /* tcp:// and tls+tcp://: the peer's address, "IP:port" */
	char token[65];     /* the name of the daemon's --token-file entry its HELLO's token matched */
} cua_session_info;
#define CUA_NO_UID 4294967295u /* cua_session_info's uid and gid when the transport does not tell them */

/* ---- connection ---- */

/* Connects to url (NULL: $CUASYNC_URL, else the default socket: ipc:///run/cuasyncd/cuasyncd.sock, the system
 * service's, for root or when it exists, else $XDG_RUNTIME_DIR/cuasyncd.sock or /tmp/cuasyncd.sock) and opens a session. For tls+tcp:// URLs,
 * $CUASYNC_TLS_CA names the CA file that must have signed the daemon's certificate, and $CUASYNC_TLS_CERT a
 * PEM file with this client's certificate and key (its key in $CUASYNC_TLS_KEY when apart) for a daemon that
 * asks for one (--tls-ca). HELLO carries the token in $CUASYNC_TOKEN, else the first line of the file
 * $CUASYNC_TOKEN_FILE, for a daemon with --token-file. CUA_EUNAUTHENTICATED: the daemon wanted a (valid)
 * token; CUA_EPERMISSION_DENIED: this identity may not use that endpoint (the operator's). */
int cua_connect(const char *url, cua_client **out);
/* Waits for launches still queued in the client, closes the session (the daemon frees everything it
 * holds) and frees c. Futures must have been freed before. */
void cua_disconnect(cua_client *c);
/* Timeout of synchronous calls in milliseconds (default 120000; -1: none). */
void cua_set_timeout(cua_client *c, int timeout_ms);
int cua_ping(cua_client *c);
int cua_status(cua_client *c, cua_daemon_status *out);
/* The daemon's sessions, oldest first: through the operator endpoint every session that said HELLO (at most
 * 4096), elsewhere this connection's own. *out is a malloc'd array of *n rows (the caller frees it), NULL when
 * the call fails. */
int cua_sessions(cua_client *c, cua_session_info **out, uint32_t *n);
/* Operator endpoint only: closes session id's connection within a second, as if its client had gone (its work
 * in the workers runs to its end, everything it holds is released). NOT_FOUND when there is no such session,
 * PERMISSION_DENIED on a client socket. */
int cua_disconnect_session(cua_client *c, uint64_t id);
/* Operator endpoint only: drain (drain = 1) device dev — it takes no new memory, modules, streams or host
 * buffers (NO_DEVICE), while the sessions' work on what they hold there runs on — or undo it (drain = 0).
 * *holding (sessions still holding objects or work on it) and *in_flight (requests in its workers) say when it
 * is free: poll until both are 0, or disconnect the sessions. Either pointer may be NULL. */
int cua_drain_device(cua_client *c, int dev, int drain, uint32_t *holding, uint32_t *in_flight);

/* ---- tenants at run time (operator endpoint only; PERMISSION_DENIED on a client socket) ----
 * A tenant's rules and limits are the configuration file's keys of [tenant NAME] (cuasyncd.conf(5)) with their
 * values as strings: kv is "key", "value", ..., NULL (at most 64 pairs). Rules (uid, user, group, subject,
 * token) say who belongs to it; limits (mem, modules, module-bytes, streams, host-bytes, graph-bytes, sessions,
 * workers, in-flight, weight, isolation) what its sessions together may hold. Such tenants outlive SIGHUP. */
/* Adds tenant name (1..64 letters, digits, '.', '_', '-', '/', ':', '@'). With token_out (token_len >= 65),
 * the daemon also makes a one-off token for it, written there once (HELLO with it lands in this tenant);
 * NULL: none. BAD_ARGUMENT (a bad name, key or value, a name in use, no rule), QUOTA (256 tenants). */
int cua_tenant_add(cua_client *op, const char *name, const char *const *kv, char *token_out, size_t token_len);
/* Changes limits of a tenant made at run time (rules stay): its sessions get them at once; what they hold past
 * a lowered limit stays, nothing new past it is granted. NOT_FOUND: no such tenant. */
int cua_tenant_set(cua_client *op, const char *name, const char *const *kv);
/* Removes a tenant made at run time: it claims no new session (they go to the next tenant that matches, else default) and its sessions get no new object; drain = 0 disconnects its sessions
 * (cleaned up as when a client crashes), drain = 1 lets them finish. It is gone when its last session ended.
 * NOT_FOUND: no such tenant. */
int cua_tenant_remove(cua_client *op, const char *name, int drain);
typedef struct cua_tenant_info {
	char name[65];
	char source[16]; /* "file" or "runtime" */
	char rule[1024]; /* who belongs to it ("uid 1000, token job-7") */
	struct {
		char key[33], value[33];
	} limits[16]; /* its limits that are set, as the file's keys */
	uint32_t nlimits;
	int removing;       /* cua_tenant_remove ran; it goes with its last session */
	uint32_t sessions;  /* usage: live sessions */
	uint64_t mem_bytes; /* device memory its sessions hold, all devices */
	uint64_t streams;
} cua_tenant_info;
/* Every tenant (the file's, then those made at run time): *rows is a malloc'd array of *n (the caller frees). */
int cua_tenant_list(cua_client *op, cua_tenant_info **rows, uint32_t *n);

/* ---- devices ---- */
int cua_device_count(cua_client *c, int *n);
int cua_device_get_info(cua_client *c, int dev, cua_device_info *out);
/* A device attribute as CUDA's cuDeviceGetAttribute answers it on the daemon's host (attr: a
 * CU_DEVICE_ATTRIBUTE_* number; the emulated device reports a fixed set, PROTOCOL.md). From the list read at
 * connect time: no round trip. CUA_EUNSUPPORTED when the device does not report attr, CUA_EBAD_ARGUMENT when
 * there is no device dev. */
int cua_device_get_attribute(cua_client *c, int dev, int attr, int *value);

/* ---- modules and functions ---- */
/* image: cubin, fatbin or PTX (detected), copied by the call. */
int cua_module_load(cua_client *c, int dev, const void *image, size_t len, cua_module *out);
int cua_module_load_file(cua_client *c, int dev, const char *path, cua_module *out);
int cua_module_unload(cua_client *c, cua_module m);
int cua_module_get_function(cua_client *c, cua_module m, const char *name, cua_function *out);
/* The kernel's parameter layout as the daemon checks launches against it: count, and per parameter its
 * offset and size (arrays of at least *n entries, or NULL to ask for the count). */
int cua_function_get_params(cua_client *c, cua_function f, uint32_t *n, uint32_t *offsets, uint32_t *sizes);

/* A module global (a __device__ or __constant__ variable) by name: its device address and size (either out
 * pointer may be NULL). The memory belongs to the module: it can be copied to and from, set, and passed to
 * kernels like an allocation of this client until the module is unloaded; cua_mem_free refuses it, and after
 * cua_module_unload the pointer is refused (NOT_FOUND while the unload is pending, then BAD_ARGUMENT).
 * CUA_ENOT_FOUND when the module has no such global. */
int cua_module_get_global(cua_client *c, cua_module m, const char *name, cua_deviceptr *ptr, size_t *bytes);

/* Function attributes: CUDA's CUfunction_attribute numbers. */
typedef enum cua_func_attribute {
	CUA_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
	CUA_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1, /* static shared memory */
	CUA_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2,
	CUA_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
	CUA_FUNC_ATTRIBUTE_NUM_REGS = 4,
	CUA_FUNC_ATTRIBUTE_PTX_VERSION = 5,    /* major * 10 + minor */
	CUA_FUNC_ATTRIBUTE_BINARY_VERSION = 6, /* major * 10 + minor */
	CUA_FUNC_ATTRIBUTE_CACHE_MODE_CA = 7,
	CUA_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,    /* settable: 0..cua_device_info.max_shared_optin */
	CUA_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9, /* settable: -1 (default) or 0..100 percent */
	CUA_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET = 10,        /* 1: compiled with cluster dimensions */
	CUA_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH = 11,  /* settable (sm_90+): 0..16 blocks; all three or none */
	CUA_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT = 12, /* settable (sm_90+) */
	CUA_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH = 13,  /* settable (sm_90+) */
	CUA_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14, /* settable (sm_90+): 1 allows clusters of 9..16 */
	CUA_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE = 15,
} cua_func_attribute;
/* An attribute of f (cuFuncGetAttribute). */
int cua_func_get_attribute(cua_client *c, cua_function f, cua_func_attribute attr, int *value);
/* Sets one of the settable attributes of f for this client's later launches of f (cuFuncSetAttribute);
 * out-of-range values answer CUA_EBAD_ARGUMENT naming the range. A launch with more dynamic shared memory than
 * f's MAX_DYNAMIC_SHARED_SIZE_BYTES (48 KiB until raised) fails with CUA_EBAD_ARGUMENT
 * (CUDA_ERROR_INVALID_VALUE). */
int cua_func_set_attribute(cua_client *c, cua_function f, cua_func_attribute attr, int value);
/* Active blocks of f per multiprocessor for block_size threads (1..1024) and dyn_smem bytes of dynamic shared
 * memory (cuOccupancyMaxActiveBlocksPerMultiprocessor; the emulated device's model is in PROTOCOL.md §7). */
int cua_occupancy_max_active_blocks(cua_client *c, cua_function f, unsigned block_size, size_t dyn_smem, int *blocks);

/* ---- memory ---- */
int cua_mem_alloc(cua_client *c, int dev, size_t bytes, cua_deviceptr *out);
int cua_mem_free(cua_client *c, cua_deviceptr p);
/* Synchronous copies. From or to other host memory than a shared host buffer (below), a copy of 64 KiB or more
 * is staged through a buffer of the client's own (8 MiB of shared host memory, made at the first such copy; it
 * counts against --session-host-bytes and is freed when cua_host_alloc would pass that limit, unless a copy
 * uses it at that moment), as CUDA stages pageable copies: its bytes never travel in a message. Smaller copies,
 * copies while another thread's copy holds the buffer, every copy where the daemon shows more than one device,
 * and every copy of a remote client carry their bytes. */
int cua_memcpy_htod(cua_client *c, cua_deviceptr dst, const void *src, size_t bytes);
int cua_memcpy_dtoh(cua_client *c, void *dst, cua_deviceptr src, size_t bytes);
int cua_memcpy_dtod(cua_client *c, cua_deviceptr dst, cua_deviceptr src, size_t bytes);
/* count elements of width 1, 2 or 4 bytes set to value. */
int cua_memset(cua_client *c, cua_deviceptr dst, uint32_t value, unsigned width, size_t count);
/* The same on a stream (ordered with the stream's launches). */
int cua_memcpy_htod_on(cua_client *c, cua_deviceptr dst, const void *src, size_t bytes, cua_stream s);
int cua_memcpy_dtoh_on(cua_client *c, void *dst, cua_deviceptr src, size_t bytes, cua_stream s);

/* ---- shared host memory (same host, ipc:// connections) ----
 * Host memory that the GPU worker maps too: copies between it and the device skip the socket entirely and,
 * on a GPU, run at pinned-memory speed. cua_memcpy_htod/dtoh use it by themselves when the host range lies
 * inside such a buffer registered for the device of the copy. */
int cua_host_alloc(cua_client *c, int dev, size_t bytes, void **out);
int cua_host_free(cua_client *c, void *p);

/* ---- streams and synchronization ---- */
/* priority is clamped to the device's range (cua_device_info). */
int cua_stream_create(cua_client *c, int dev, int priority, cua_stream *out);
/* What CUA_STREAM_DEFAULT means for c from now on: CUA_STREAM_POOL (the initial default), CUA_STREAM_ORDERED,
 * or a stream c created. Calls already submitted keep theirs. Any thread. */
int cua_set_default_stream(cua_client *c, cua_stream s);
int cua_stream_destroy(cua_client *c, cua_stream s);
int cua_stream_synchronize(cua_client *c, cua_stream s);
/* Waits for all work of this client; returns the first error of fire-and-forget work since the last call. */
int cua_synchronize(cua_client *c);

/* ---- events (CUDA events: cross-stream dependencies and GPU timing) ----
 * An event belongs to its client's session and to one device. cua_event_record marks the point of stream s
 * after all work submitted to s before it (launches still batched in the client go out first); s must be a
 * stream c created or CUA_STREAM_ORDERED: the pool (CUA_STREAM_POOL, and CUA_STREAM_DEFAULT while it means the
 * pool) is not ordered, so recording there is refused (CUA_EBAD_ARGUMENT). cua_stream_wait_event makes the work
 * submitted to s afterwards wait until the event's last record is reached (at once when it was never
 * recorded); s must also be the session's. Both return once the daemon enqueued them, not when reached.
 * cua_event_synchronize returns when the event's last record has been reached (at once when never recorded);
 * cua_event_query sets *ready to 1 then, else 0. cua_event_elapsed_ms: milliseconds between two events' last
 * records (cuEventElapsedTime); CUA_EBUSY while either is not reached yet, CUA_EBAD_ARGUMENT for an event
 * created with CUA_EVENT_DISABLE_TIMING or never recorded. cua_event_destroy releases it at once (later use:
 * CUA_ENOT_FOUND); work queued before that still uses it safely. At most --session-events per session
 * (CUA_EQUOTA). Any thread, as the other calls. */
typedef struct cua_event {
	uint64_t id;
} cua_event;
#define CUA_EVENT_DISABLE_TIMING 0x2u /* CUDA's CU_EVENT_DISABLE_TIMING (the same value on the wire) */
int cua_event_create(cua_client *c, unsigned flags, cua_event *out); /* on device 0 */
int cua_event_create_on(cua_client *c, int dev, unsigned flags, cua_event *out);
int cua_event_destroy(cua_client *c, cua_event ev);
int cua_event_record(cua_client *c, cua_event ev, cua_stream s);
int cua_stream_wait_event(cua_client *c, cua_stream s, cua_event ev);
int cua_event_synchronize(cua_client *c, cua_event ev);
int cua_event_query(cua_client *c, cua_event ev, int *ready);
int cua_event_elapsed_ms(cua_client *c, cua_event start, cua_event end, float *ms);

/* ---- launches (the builder mirrors cuda-async's AsyncKernelLaunch) ---- */
typedef struct cua_launch_config {
	uint32_t grid[3];
	uint32_t block[3];
	uint32_t shared_mem_bytes;
} cua_launch_config;

/* NULL when out of memory. */
cua_launch *cua_launch_new(cua_client *c, cua_function f);
/* Copies size bytes (1..32764) as the next by-value argument, with the exact size of the kernel's parameter.
 * The daemon refuses a launch whose arguments total more than the device's max_param_bytes (cua_device_info). */
int cua_launch_push_arg(cua_launch *l, const void *value, size_t size);
int cua_launch_push_u8(cua_launch *l, uint8_t v);
int cua_launch_push_u16(cua_launch *l, uint16_t v);
int cua_launch_push_u32(cua_launch *l, uint32_t v);
int cua_launch_push_u64(cua_launch *l, uint64_t v);
int cua_launch_push_i32(cua_launch *l, int32_t v);
int cua_launch_push_i64(cua_launch *l, int64_t v);
int cua_launch_push_f32(cua_launch *l, float v);
int cua_launch_push_f64(cua_launch *l, double v);
/* A device pointer argument: must lie inside an allocation of this client (or be 0). */
int cua_launch_push_device_ptr(cua_launch *l, cua_deviceptr p);
int cua_launch_set_config(cua_launch *l, cua_launch_config cfg);
int cua_launch_set_stream(cua_launch *l, cua_stream s);
/* Programmatic dependent launch (sm_90+; refused with CUA_EPDL_UNSUPPORTED below). The kernel must wait
 * (griddepcontrol.wait) before touching its predecessor's results. */
int cua_launch_programmatic_dependent_launch(cua_launch *l);
/* Thread-block clusters of x·y·z blocks (cuLaunchKernelEx's CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION; sm_90+, else
 * the launch fails with CUA_EUNSUPPORTED). Each dimension 1.., the grid a multiple of it in each dimension, at
 * most 8 blocks (16 with f's NON_PORTABLE_CLUSTER_SIZE_ALLOWED attribute): else CUA_EBAD_ARGUMENT naming the
 * numbers. 0, 0, 0 takes the cluster off again. */
int cua_launch_set_cluster_dims(cua_launch *l, unsigned x, unsigned y, unsigned z);
/* A cooperative launch (CU_LAUNCH_ATTRIBUTE_COOPERATIVE): every block of the grid is resident at once, so the
 * kernel may synchronise the whole grid (cooperative_groups::this_grid().sync()). A grid larger than
 * cua_occupancy_max_active_blocks × multiprocessors fails with CUA_EBAD_ARGUMENT and those numbers. */
int cua_launch_cooperative(cua_launch *l, bool on);
/* The launch's own priority (CU_LAUNCH_ATTRIBUTE_PRIORITY) instead of its stream's: within
 * [priority_greatest, priority_least] of cua_device_info (lower numbers run first), else CUA_EBAD_ARGUMENT. */
int cua_launch_set_priority(cua_launch *l, int priority);
/* Submits and consumes l (also on failure). *out receives a future that completes when the kernel has
 * run; out == NULL makes it fire-and-forget (errors surface at cua_synchronize). */
int cua_launch_submit(cua_launch *l, cua_future **out);
/* Frees an unsubmitted launch. */
void cua_launch_free(cua_launch *l);

/* ---- explicit batches: many launches and copies in one message, one status per item ---- */
cua_batch *cua_batch_new(cua_client *c);
/* Consumes l. */
int cua_batch_add_launch(cua_batch *b, cua_launch *l);
/* src is read by cua_batch_submit — unless it lies in a cua_host_alloc buffer (and the daemon shows one
 * device): then the GPU reads it when the copy runs in its stream's order, as CUDA's asynchronous copies from
 * page-locked memory do, and the message carries no bytes; change it only after the copy completed. */
int cua_batch_add_memcpy_htod(cua_batch *b, cua_deviceptr dst, const void *src, size_t bytes, cua_stream s);
/* dst is written when the batch's future completes; it must stay valid until then. Inside a cua_host_alloc
 * buffer (one device) the GPU writes it in stream order, fire-and-forget batches too: it holds the data once the
 * stream was synchronized (the future, cua_stream_synchronize, an event). */
int cua_batch_add_memcpy_dtoh(cua_batch *b, void *dst, cua_deviceptr src, size_t bytes, cua_stream s);
int cua_batch_add_memcpy_dtod(cua_batch *b, cua_deviceptr dst, cua_deviceptr src, size_t bytes, cua_stream s);
int cua_batch_add_memset(cua_batch *b, cua_deviceptr dst, uint32_t value, unsigned width, size_t count, cua_stream s);
size_t cua_batch_count(const cua_batch *b);
/* Submits and consumes b. The future's status is that of the first failed item; see cua_future_item. Sends it
 * at once, after the launches submitted before it; with 8 batches of this client already unanswered, first
 * waits for one of them to be answered (the daemon refuses a connection's requests past --session-pending). */
int cua_batch_submit(cua_batch *b, cua_future **out);
void cua_batch_free(cua_batch *b);

/* ---- graphs: a batch made into a CUDA graph once, launched by handle with one small message ----
 * cua_graph_begin returns a batch whose items become the graph's nodes, in order (each runs after the one
 * before): launches (cua_batch_add_launch), memsets and device-to-device copies; the streams given to those
 * calls are ignored (the graph's launch names its stream); host copies, PDL and launch attributes (clusters,
 * cooperative, priority) are refused (CUA_EUNSUPPORTED: copy before or after the launch, launch those alone). Every node is checked as the single request it mirrors; at most CUA_MAX_BATCH
 * nodes, and the daemon's --session-graphs / --session-graph-nodes limits (CUA_EQUOTA).
 * While a graph lives, the memory and modules its nodes use cannot be freed or unloaded (CUA_EBUSY): destroy
 * the graph first. After a worker restart its handle answers CUA_ECONTEXT_LOST. */
typedef struct cua_graph {
	uint64_t id;
} cua_graph;
cua_batch *cua_graph_begin(cua_client *c);
/* Sends b's nodes, builds and instantiates the graph; consumes b. 0 and *out, or the status (the message names
 * the node at fault). */
int cua_graph_instantiate(cua_batch *b, cua_graph *out);
/* Runs the whole graph on s (a stream of the session, CUA_STREAM_ORDERED, or the pool). With out, the future
 * completes when the graph has; without, it is fire-and-forget (errors at cua_synchronize). Launches of one
 * graph run one after the other, in submission order, whatever their streams. */
int cua_graph_launch(cua_client *c, cua_graph g, cua_stream s, cua_future **out);
/* New arguments for kernel node `node` (its index in the builder): l's pushed arguments, checked against the
 * node's function like a launch's (count, sizes, device pointers); l's function, configuration and stream are
 * ignored; consumes l. Launches submitted before keep the old arguments, later ones get the new. */
int cua_graph_set_kernel_args(cua_client *c, cua_graph g, uint32_t node, cua_launch *l);
/* Destroys g once its launches in flight completed; later use answers CUA_ENOT_FOUND. */
int cua_graph_destroy(cua_client *c, cua_graph g);

/* ---- futures ---- */
/* Waits up to timeout_ms (-1: forever). Returns the work's status, or CUA_ETIMEOUT (the future stays valid). */
int cua_future_wait(cua_future *f, int timeout_ms);
/* 1 when complete, 0 when not yet. */
int cua_future_poll(cua_future *f);
/* The status once complete (CUA_OK or the first failure). */
int cua_future_status(cua_future *f);
/* Message of the (first) failure, "" when none. Valid until cua_future_free. */
const char *cua_future_error(cua_future *f);
/* Items of a batch future: their count, and item i's status and message. */
size_t cua_future_items(cua_future *f);
int cua_future_item(cua_future *f, size_t i, const char **message);
/* Frees f; a future still in flight is released when its work completes. */
void cua_future_free(cua_future *f);

/* ---- completions for event loops (epoll, poll, libuv, Python's asyncio) ----
 * cua_client_fd returns a file descriptor (an eventfd, non-blocking, close-on-exec) that becomes readable
 * when a future of c completes: launches' and batches' futures, not the synchronous calls nor
 * fire-and-forget work. It is written by the thread that completes the future (an NNG callback thread, or
 * the submitting thread when a submission fails at once), never blocks it, and is level-triggered: it stays
 * readable from the first completion after the last cua_client_fd_clear until the next one, however many
 * futures completed in between (with EPOLLET you get one edge per clear).
 * After a wake-up: call cua_client_fd_clear first, then cua_future_poll each future you wait for; a future
 * that completes after the clear makes the fd readable again, so none is missed. Do not read(2) the fd
 * yourself: only cua_client_fd_clear may, and it reads it only when the library has written it.
 * The fd is created by the first call and owned by c: do not close it; cua_disconnect closes it, so take it
 * out of your loop before disconnecting. Futures completed before that first call did not write it: poll
 * them once after asking for the fd. Returns the fd (the same one on every call), or -1 when none could be
 * created (cua_last_error says why). Any thread. */
int cua_client_fd(cua_client *c);
/* Requests c sent through its shared-memory channel (PROTOCOL.md §10): 0 when it has none. The channel is made
 * at cua_connect on an ipc:// URL unless $CUASYNC_SHM is 0 (any failure leaves everything on the socket). */
uint64_t cua_shm_requests(const cua_client *c);
/* Makes cua_client_fd's fd unreadable until the next completion. Any thread; a no-op before cua_client_fd. */
void cua_client_fd_clear(cua_client *c);

#ifdef __cplusplus
}
#endif
#endif
