/*
 * daemon.h — the front-end of cuasyncd: configuration, devices (one supervised worker each), sessions and
 * requests. The front-end never calls CUDA; everything GPU-facing happens in worker processes.
 *
 * Locking: one mutex, fe->lock, guards sessions, handle tables, request queues, device state and the staging
 * allocators. NNG callbacks decode outside it; validation, dispatch and completion take it briefly.
 * Functions named do_* expect the caller to hold fe->lock.
 */
#ifndef CUAD_DAEMON_H
#define CUAD_DAEMON_H

#include "cua_error.h"
#include "cua_proto.h"
#include "cua_wire.h"
#include "extent.h"
#include "ring.h"
#include "wproto.h"

#include <nng/nng.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

#define CUAD_MAX_LISTEN 16
#define CUAD_MAX_PARKED 4096 /* out-of-order requests one session may have waiting */

struct config {
	const char *listen[CUAD_MAX_LISTEN];
	int nlisten;
	const char *backend; /* auto, emu, cuda */
	int emu_sm;
	int emu_devices;
	uint64_t emu_mem;
	const char *devices; /* comma-separated subset of device indices, or NULL for all */
	unsigned pool_streams;
	unsigned contexts;
	size_t max_message;
	uint64_t staging_bytes;
	uint64_t ring_bytes;
	uint64_t session_mem;
	unsigned session_handles;
	unsigned session_inflight;
	unsigned session_window;
	unsigned session_pending;
	const char *tls_cert, *tls_key;
	int ready_fd;
	int ipc_mode; /* -1: umask */
	const char *self_exe;
};

enum dev_state { DEV_STARTING, DEV_READY, DEV_RESTARTING, DEV_FAILED };

struct request;
struct fe;

struct device {
	struct fe *fe;
	int index;     /* daemon-visible index */
	int ordinal;   /* backend device ordinal */
	enum dev_state state;
	uint32_t gen;  /* worker generation, 1.. */
	uint32_t restarts;
	pid_t pid;
	struct wdev_info info;
	char why[CUA_ERR_DETAIL_MAX]; /* why the device is unusable (DEV_FAILED) */
	int shm_fd;
	unsigned char *shm;
	size_t shm_len;
	struct ring *cmd, *cpl;
	unsigned char *staging;
	struct extent_alloc staging_alloc;
	pthread_t cpl_thread;
	bool cpl_thread_started;
	atomic_int worker_dead;
	atomic_int stop;
	uint32_t next_pool;
	uint32_t in_flight;
	struct request **inflight; /* hash by request id */
	size_t inflight_buckets;
	uint64_t allocations, alloc_bytes;
};

/* One object of a session's handle table. */
struct hslot {
	uint8_t kind; /* 0 = free */
	uint8_t dev;
	uint16_t tag;
	uint32_t gen;
	bool stale;
	uint64_t wid; /* the worker's id: module id, function id, stream id */
	uint32_t module_slot; /* functions: their module */
	cua_param_info *params; /* functions */
	uint32_t nparams;
	uint64_t size; /* host buffers */
};

struct alloc_rec {
	uint64_t addr, len;
	uint32_t gen;
	uint8_t dev;
	bool stale;
};

struct session {
	uint64_t id;
	uint32_t pipe;
	bool hello;
	bool pipe_gone; /* NNG_PIPE_EV_REM_POST seen; the dispatcher closes the session */
	bool zombie;    /* to be freed once the dispatcher's pass ends */
	struct session *znext;
	bool closing;
	uint16_t tag_salt;
	struct hslot *slots;
	uint32_t nslots, slots_cap;
	uint32_t nhandles;
	struct alloc_rec *allocs; /* sorted by addr */
	uint32_t nallocs, allocs_cap;
	cua_wire_counts counts;
	uint32_t host_buffers;
	struct request *qhead, *qtail;
	uint32_t queued;
	uint32_t in_flight;
	uint32_t cleanup_pending;
	bool in_ready;
	struct session *rnext, *rprev; /* ready ring */
	struct session *next;          /* all sessions */
	uint32_t deferred_status;
	char deferred_msg[CUA_ERR_DETAIL_MAX];
	/* Ordered requests (seq != 0) are handled in seq order: NNG hands messages of one connection to
	 * several contexts at once, so a later request can arrive first; it waits here for its turn. */
	uint64_t next_seq;
	struct request *parked; /* sorted by seq */
	uint32_t nparked;
	uint32_t held; /* requests holding an NNG context (not yet answered) */
};

/* An NNG context with its aio: receives a request, later sends its reply. */
struct fectx {
	struct fe *fe;
	nng_ctx ctx;
	nng_aio *aio;
	int sending;
};

/* What one item of a request (the request itself, or one batch item) came to. */
struct ritem {
	int32_t cmd;     /* index of its worker command, or -1 */
	uint32_t status; /* set by validation or completion */
	char *msg;       /* malloc'd message or NULL (the table's) */
	uint64_t value;  /* worker result */
	void *data;      /* worker result data (malloc'd) */
	uint32_t data_len;
	int32_t stage;   /* staging index or -1 */
};

struct stage {
	size_t cmd_off; /* byte offset of its command in request.cmds */
	uint64_t len;
	uint64_t off;
	const void *src; /* HTOD / MODULE_LOAD: bytes to copy in; NULL: DTOH (copied out at completion) */
	bool placed;
};

struct request {
	uint64_t id;
	struct fe *fe;
	struct session *s;
	struct fectx *ctx; /* NULL once replied (fire-and-forget) or for internal requests */
	nng_msg *msg;      /* owns the bytes the decoded request points into */
	nng_pipe pipe;     /* the connection it came on */
	int host_fd;       /* HOST_REGISTER: the client's memfd, opened here (-1: none) */
	cua_wire_request w;
	bool decoded;
	uint32_t op;
	int dev;          /* -1: no device work */
	uint32_t dep_gen; /* generation the request's handles belong to, 0: none */
	bool barrier;     /* wait until the session has nothing in flight */
	bool no_wait;
	bool internal;    /* session cleanup */
	unsigned char *cmds;
	size_t cmds_len, cmds_cap, last_cmd_off;
	uint32_t ncmds;
	struct ritem *items;
	uint32_t nitems;
	struct stage *stages;
	uint32_t nstages;
	struct request *qnext, *hnext;
	uint64_t seq;
	bool held;       /* counted in s->held until answered */
	bool refused;    /* answered QUOTA while parked: skipped when its turn comes */
	uint32_t status; /* whole-request status when not OK */
	char *status_msg;
};

enum { FL_IPC, FL_TCP, FL_OTHER };
struct flistener {
	const char *url;
	nng_listener l;
	int kind;
	nng_sockaddr_in tcp; /* bound address of a tcp listener */
};

struct fe {
	struct config cfg;
	struct flistener listeners[CUAD_MAX_LISTEN];
	int nlisteners;
	uint64_t listener_restarts;
	uint32_t pending_closes; /* sessions whose pipe left, not yet closed */
	bool dispatching;        /* the dispatcher is walking the ready ring: frees wait until it is done */
	struct session *zombies;
	pthread_t watchdog;
	pthread_mutex_t wd_lock;
	pthread_cond_t wd_cond;
	atomic_ushort probe_port;
	atomic_uint_fast64_t probe_adds; /* probe pipes the socket has seen */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* dispatcher: work may be ready */
	nng_socket sock;
	struct fectx *ctxs;
	unsigned nctxs;
	struct device *devs;
	int ndevs;
	struct session *sessions;
	struct session *ready; /* ready ring cursor */
	uint32_t nsessions;
	uint64_t next_session, next_req;
	uint64_t requests, errors;
	uint64_t start_ms;
	pthread_t dispatcher;
	atomic_int stopping;
	const char *backend; /* chosen backend */
	/* Pipes that left before sending anything: a message NNG still delivers from one must not create a
	 * session (ADD_POST and the first message race on different threads). */
	uint32_t tombs[256];
	unsigned ntombs;
};

/* frontend.c */
int fe_start(struct fe *fe);
void fe_stop(struct fe *fe);
uint64_t now_ms(void);
/* Sends the reply of r (status, items) and frees r. Caller holds fe->lock. */
void do_finish(struct fe *fe, struct request *r);
void do_wake_dispatcher(struct fe *fe);

/* listener.c */
int listener_open(struct fe *fe, struct flistener *fl);
bool listener_is_probe(struct fe *fe, nng_pipe p);
int listener_watchdog_start(struct fe *fe);
void listener_watchdog_stop(struct fe *fe);

/* session.c */
struct session *do_session_new(struct fe *fe, uint32_t pipe);
struct session *do_session_by_pipe(struct fe *fe, uint32_t pipe);
void do_session_close(struct fe *fe, struct session *s);
void do_session_maybe_free(struct fe *fe, struct session *s);
/* Takes s out of the dispatcher's round-robin ring (if it is in it). */
void do_ready_remove(struct fe *fe, struct session *s);
/* Handle table. */
int do_handle_new(struct session *s, unsigned kind, int dev, uint32_t gen, uint64_t wid, uint64_t *h);
/* Looks h up: 0 and *slot, or NOT_FOUND / CONTEXT_LOST with a message in e. */
int do_handle_get(struct fe *fe, struct session *s, uint64_t h, unsigned kind, struct hslot **slot, cua_err *e);
void do_handle_free(struct session *s, struct hslot *slot);
/* Allocation table: 0 when [p, p+len) is inside one live allocation of s (its device in *dev). */
int do_alloc_find(struct fe *fe, struct session *s, uint64_t p, uint64_t len, int *dev, struct alloc_rec **rec,
		  cua_err *e);
int do_alloc_add(struct session *s, int dev, uint32_t gen, uint64_t addr, uint64_t len);
void do_alloc_remove(struct session *s, struct alloc_rec *rec);
/* After a worker restart: marks everything of dev's old generation stale in every session. */
void do_sessions_mark_stale(struct fe *fe, struct device *d, uint32_t old_gen);

/* handlers.c */
enum handled { H_REPLY, H_QUEUE };
/* Validates r (decoded) and plans its worker commands. Caller holds fe->lock. */
enum handled do_handle_request(struct fe *fe, struct request *r);
/* Packs the reply of a completed request through out. Caller holds fe->lock. */
int do_pack_reply(struct fe *fe, struct request *r, cua_wire_out out);
/* Plans the release of everything s holds on dev (session close). */
struct request *do_cleanup_request(struct fe *fe, struct session *s, int dev);
void request_free(struct request *r);

/* worker link (workerlink.c) */
int dev_start(struct fe *fe, struct device *d);
void dev_stop(struct device *d);
/* Writes r's commands into the worker's ring. 0, or -1 when it must wait (staging or ring full). */
int do_dev_dispatch(struct fe *fe, struct device *d, struct request *r);

#endif
