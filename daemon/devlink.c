/*
 * devlink.c — the front-end's side of a GPU worker (see devlink.h).
 */
#include "config.h"

#include "cua_clock.h"
#include "cua_log.h"
#include "devlink.h"
#include "request.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Monotonic ns t as r->hop_ns holds it: after r's receipt, 0 when unknown, earlier or 4 s later. */
static uint32_t
hop_since(const struct request *r, uint64_t t)
{
	return t > r->recv_ns && t - r->recv_ns < UINT32_MAX ? (uint32_t)(t - r->recv_ns) : 0;
}

#define HELLO_TIMEOUT_MS 60000

static size_t
page_round(size_t n)
{
	return (n + 4095) & ~(size_t)4095;
}

static int
shm_create(struct fe *fe, struct device *d)
{
	size_t ring = fe->cfg.ring_bytes;
	struct wshm_hdr h = {.magic = WSHM_MAGIC};
	h.cmd_off = 4096;
	h.cmd_size = ring;
	h.cpl_off = h.cmd_off + page_round(ring_footprint(ring));
	h.cpl_size = ring;
	h.staging_off = h.cpl_off + page_round(ring_footprint(ring));
	h.staging_size = d->staging_size;
	h.total = h.staging_off + page_round(d->staging_size);
	char name[32];
	snprintf(name, sizeof(name), "cuasyncd-dev%d", d->index);
	int fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)h.total) != 0) {
		log_error("shared memory of %zu bytes for device %d: %s", (size_t)h.total, d->index, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	unsigned char *p = mmap(NULL, h.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return -1;
	}
	memcpy(p, &h, sizeof(h));
	d->cmd = (struct ring *)(p + h.cmd_off);
	d->cpl = (struct ring *)(p + h.cpl_off);
	ring_init(d->cmd, ring);
	ring_init(d->cpl, ring);
	d->staging = p + h.staging_off;
	d->shm = p;
	d->shm_len = h.total;
	d->shm_fd = fd;
	return extent_init(&d->staging_alloc, d->staging_size, 256);
}

static void
shm_destroy(struct device *d)
{
	if (d->shm) {
		munmap(d->shm, d->shm_len);
		d->shm = NULL;
	}
	d->cmd = d->cpl = NULL; /* they lay in it: a failed restart must not leave them to dev_stop */
	d->staging = NULL;
	if (d->shm_fd >= 0) {
		close(d->shm_fd);
		d->shm_fd = -1;
	}
	extent_fini(&d->staging_alloc);
}

/* d->gen for the thread that starts d's worker, without fe->lock (CUA_NO_TSA): gen is written only by that thread
 * (restart, under fe->lock) or before d is shared (dev_start), so that thread's read races with no write. */
static uint32_t
own_gen(const struct device *d) CUA_NO_TSA
{
	return d->gen;
}

static pid_t
spawn(struct fe *fe, struct device *d)
{
	char fd_s[16], dev_s[16], gen_s[16], sm_s[16], mem_s[32], pool_s[16], lvl_s[16], thr_s[16], sub_s[16];
	snprintf(fd_s, sizeof(fd_s), "%d", d->shm_fd);
	snprintf(dev_s, sizeof(dev_s), "%d", d->ordinal);
	snprintf(gen_s, sizeof(gen_s), "%u", own_gen(d));
	snprintf(sm_s, sizeof(sm_s), "%d", fe->cfg.emu_sm);
	snprintf(mem_s, sizeof(mem_s), "%llu", (unsigned long long)fe->cfg.emu_mem);
	snprintf(pool_s, sizeof(pool_s), "%u", fe->cfg.pool_streams);
	snprintf(lvl_s, sizeof(lvl_s), "%d", cua_log_get_level());
	snprintf(thr_s, sizeof(thr_s), "%u", fe->cfg.emu_threads);
	snprintf(sub_s, sizeof(sub_s), "%u", fe->cfg.submit_threads);
	const char *argv[] = {fe->cfg.self_exe,
			      "--worker",
			      fd_s,
			      "--worker-device",
			      dev_s,
			      "--worker-generation",
			      gen_s,
			      "--backend",
			      fe->backend,
			      "--emu-sm",
			      sm_s,
			      "--emu-mem",
			      mem_s,
			      "--pool-streams",
			      pool_s,
			      "--log-level-num",
			      lvl_s,
			      "--scrub",
			      fe->cfg.scrub ? "on" : "off",
			      "--emu-threads",
			      thr_s,
			      "--submit-threads",
			      sub_s,
			      NULL};
	pid_t pid = fork();
	if (pid == 0) {
		/* The child: keep only the shared-memory fd, then exec (no NNG, no locks, no CUDA in this image). */
		int flags = fcntl(d->shm_fd, F_GETFD);
		fcntl(d->shm_fd, F_SETFD, flags & ~FD_CLOEXEC);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execv(fe->cfg.self_exe, (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/* The worker's first record: its device info, or why it cannot serve. 0 or a status with why said. */
static int
read_hello(struct device *d, const unsigned char *rec, size_t len, char *why, size_t whylen)
{
	struct wcpl_req h;
	struct wcpl c;
	if (len < sizeof(h) + sizeof(c)) {
		snprintf(why, whylen, "worker sent a short first record");
		return CUA_EINTERNAL;
	}
	memcpy(&h, rec, sizeof(h));
	memcpy(&c, rec + sizeof(h), sizeof(c));
	const unsigned char *detail = rec + sizeof(h) + sizeof(c);
	if ((size_t)c.detail_len + c.data_len > len - sizeof(h) - sizeof(c)) {
		snprintf(why, whylen, "worker sent a malformed first record");
		return CUA_EINTERNAL;
	}
	if (c.status == 0 && c.data_len == sizeof(d->info)) {
		memcpy(&d->info, detail + c.detail_len, sizeof(d->info));
		return 0;
	}
	snprintf(why, whylen, "%.*s", (int)c.detail_len, detail);
	return c.status != 0 ? (int)c.status : CUA_EINTERNAL;
}

/* Waits for the worker's first record. Returns 0 or an error code with why filled. */
static int
await_hello(struct device *d, char *why, size_t whylen)
{
	for (int waited = 0; waited < HELLO_TIMEOUT_MS; waited += 100) {
		if (atomic_load(&d->stop) || atomic_load(&d->fe->stopping)) { /* shutting down: do not wait */
			snprintf(why, whylen, "the daemon is stopping");
			return CUA_ENO_DEVICE;
		}
		size_t len;
		const unsigned char *rec = ring_peek(d->cpl, &len);
		if (rec != NULL) {
			int rc = read_hello(d, rec, len, why, whylen);
			ring_release(d->cpl);
			return rc;
		}
		int st;
		if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
			d->pid = 0;
			snprintf(why, whylen, "worker exited during start-up (status %d)", st);
			return CUA_ENO_DEVICE;
		}
		ring_wait_data(d->cpl, 100);
	}
	snprintf(why, whylen, "worker did not report its device within %d s", HELLO_TIMEOUT_MS / 1000);
	return CUA_ENO_DEVICE;
}

/* Starts (or restarts) d's worker. Called without fe->lock (it waits for the worker). */
static int
dev_launch(struct fe *fe, struct device *d)
{
	if (shm_create(fe, d) != 0) {
		snprintf(d->why, sizeof(d->why), "cannot create the shared-memory region");
		return CUA_ENOMEM;
	}
	d->pid = spawn(fe, d);
	if (d->pid < 0) {
		snprintf(d->why, sizeof(d->why), "fork: %s", strerror(errno));
		shm_destroy(d);
		return CUA_EINTERNAL;
	}
	int rc = await_hello(d, d->why, sizeof(d->why));
	if (rc != 0) {
		if (d->pid > 0) {
			kill(d->pid, SIGKILL);
			waitpid(d->pid, NULL, 0);
			d->pid = 0;
		}
		shm_destroy(d);
	}
	return rc;
}

static void *completion_main(void *arg);
static void *spare_main(void *arg);

/* Whether d keeps a spare worker ready (--spare-worker): a shared device's worker serves every session of the
 * device, so its fault costs all of them the time a new worker takes; a session's own worker (--isolation
 * session) is replaced from the pool instead, and under --isolation session the shared worker serves only the
 * tenants that chose to share, which is not worth a second context on every device. */
static bool
spare_wanted(const struct fe *fe, const struct device *d)
{
	return fe->cfg.spare_worker && fe->cfg.isolation == ISO_SHARED && d == &fe->devs[d->index];
}

/* Not analysed (CUA_NO_TSA): it sets d's guarded fields (gen, state) without fe->lock, which is safe because d is
 * nobody else's yet: main starts the shared devices before the edge and the dispatcher run, and dev_spawn a device
 * it has just allocated. */
int
dev_start(struct fe *fe, struct device *d, dev_done_fn done) CUA_NO_TSA
{
	d->fe = fe;
	d->done = done;
	d->shm_fd = -1;
	d->gen = 1;
	TAILQ_INIT(&d->retired);
	cua_cond_init(&d->spare_cond);
	if (d->staging_size == 0) /* a shared worker (dev_spawn sets a session worker's) */
		d->staging_size = fe->cfg.staging_bytes;
	int rc = dev_launch(fe, d);
	if (rc != 0) {
		d->state = DEV_FAILED;
		log_error("device %d unusable: %s", d->index, d->why);
		return rc;
	}
	d->state = DEV_READY;
	if (pthread_create(&d->cpl_thread, NULL, completion_main, d) != 0) {
		d->state = DEV_FAILED;
		snprintf(d->why, sizeof(d->why), "cannot start the completion thread");
		return CUA_EINTERNAL;
	}
	d->cpl_thread_started = true;
	if (spare_wanted(fe, d)) {
		if (pthread_create(&d->spare_thread, NULL, spare_main, d) == 0)
			d->spare_thread_started = true;
		else /* recovery still works, with a fresh worker */
			log_warn("device %d: cannot start the spare thread; a fault will start a fresh worker",
				 d->index);
	}
	return 0;
}

/*
 * Ends d's worker, asked to finish. One with requests still in flight (abandoned: a drain that ran out of
 * time, a second SIGTERM) is killed at once — finishing would mean waiting for its kernels. An idle one is given
 * STOP_GRACE_MS to exit by itself, returning its resources in order (and, in a sanitizer build, checking itself
 * for leaks), and killed only past it (stuck in the driver, stopped by a debugger or SIGSTOP). Killed means
 * SIGKILL, which also ends a stopped or traced process; never SIGTERM, which into a worker that is exiting on
 * its own can hang it (a leak check's ptrace stop). Without fe->lock.
 */
#define STOP_GRACE_MS 5000
static void spare_abort(struct device *d);
static void spare_stop(struct device *d);
/* Not analysed (CUA_NO_TSA): it reads d->in_flight without fe->lock, safe because it runs only from dev_stop, after
 * d's completion thread was joined and with nothing dispatching to d (see dev_stop). */
static void
reap(struct device *d) CUA_NO_TSA
{
	if (d->in_flight > 0) {
		kill(d->pid, SIGKILL);
		waitpid(d->pid, NULL, 0);
		return;
	}
	int pfd = (int)syscall(SYS_pidfd_open, d->pid, 0); /* readable once the worker has exited */
	if (pfd >= 0) {
		struct pollfd p = {pfd, POLLIN, 0};
		int n;
		while ((n = poll(&p, 1, STOP_GRACE_MS)) < 0 && errno == EINTR)
			; /* a restarted wait may run a little past the grace; it still ends */
		close(pfd);
		if (n > 0) {
			waitpid(d->pid, NULL, 0);
			return;
		}
	} else { /* a kernel before 5.3: look every 10 ms */
		for (int waited = 0; waited < STOP_GRACE_MS; waited += 10) {
			if (waitpid(d->pid, NULL, WNOHANG) != 0)
				return;
			struct timespec ts = {0, 10 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
	log_warn("device %d: worker %d did not exit within %d s of being asked to; killing it", d->index, (int)d->pid,
		 STOP_GRACE_MS / 1000);
	kill(d->pid, SIGKILL);
	waitpid(d->pid, NULL, 0);
}

/* Not analysed (CUA_NO_TSA): it empties d's in-flight table without fe->lock, safe because by then d's completion
 * thread was joined and nothing dispatches to d (the dispatcher stopped, or d was a pool worker nobody owns). */
void
dev_stop(struct device *d, struct request_queue *left) CUA_NO_TSA
{
	struct request *r, *tmp;
	TAILQ_INIT(left);
	atomic_store(&d->stop, 1);
	spare_abort(d);
	if (d->shm && d->pid > 0) {
		/* a zero-length record asks the worker to finish */
		if (ring_reserve(d->cmd, 0) != NULL)
			ring_commit(d->cmd, 0);
	}
	if (d->cpl_thread_started) {
		if (d->cpl)
			ring_kick(d->cpl);
		pthread_join(d->cpl_thread, NULL);
		d->cpl_thread_started = false;
	}
	if (d->pid > 0) {
		reap(d);
		d->pid = 0;
	}
	shm_destroy(d);
	HASH_ITER(hh, d->inflight, r, tmp)
	{
		HASH_DEL(d->inflight, r);
		TAILQ_INSERT_TAIL(left, r, qlink);
	}
	d->in_flight = 0;
	spare_stop(d); /* last: the worker it made may be the one just stopped */
}

int
dev_spawn(struct fe *fe, const struct device *tmpl, dev_done_fn done, struct device **out)
{
	struct device *d = calloc(1, sizeof(*d));
	*out = NULL;
	if (d == NULL)
		return CUA_ENOMEM;
	d->index = tmpl->index;
	d->ordinal = tmpl->ordinal;
	/* a session's own worker: a smaller staging area, since the front-end maps one per session */
	d->staging_size = fe->cfg.isolation_staging_bytes < fe->cfg.staging_bytes ? fe->cfg.isolation_staging_bytes
										  : fe->cfg.staging_bytes;
	int rc = dev_start(fe, d, done);
	if (rc != 0) {
		free(d);
		return rc;
	}
	*out = d; /* transferred */
	return 0;
}

void
dev_destroy(struct device *d)
{
	struct request_queue left;
	dev_stop(d, &left);
	if (!TAILQ_EMPTY(&left))
		log_error("device %d: a worker was stopped with work in flight", d->index);
	free(d);
}

/* ------------------------------------------------------------------ dispatch */

static void
do_unplace(struct device *d, struct request *r, uint32_t n) CUA_REQUIRES(cuad_fe_lock)
{
	for (uint32_t i = 0; i < n; i++)
		if (r->stages[i].placed) {
			extent_put(&d->staging_alloc, r->stages[i].off, r->stages[i].len);
			r->stages[i].placed = false;
		}
}

/* Every stage of r gets staging space, or none does. 0 or -1. */
static int
do_place(struct device *d, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	for (uint32_t i = 0; i < r->nstages; i++) {
		struct stage *st = &r->stages[i];
		if (st->placed)
			continue;
		if (extent_get(&d->staging_alloc, st->len, &st->off) != 0) {
			do_unplace(d, r, i);
			return -1;
		}
		st->placed = true;
	}
	return 0;
}

/* Writes each stage's staging offset into its command and copies the bytes in. */
static void
do_fill_stages(struct device *d, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	for (uint32_t i = 0; i < r->nstages; i++) {
		struct stage *st = &r->stages[i];
		unsigned char *cmd = r->cmds + st->cmd_off;
		struct wrec_hdr h;
		memcpy(&h, cmd, sizeof(h));
		if (h.op == WR_MODULE_LOAD)
			memcpy(cmd + offsetof(struct wrec_module_load, staging_off), &st->off, sizeof(st->off));
		else
			memcpy(cmd + offsetof(struct wrec_copy, host_off), &st->off, sizeof(st->off));
		if (st->src)
			memcpy(d->staging + st->off, st->src, st->len);
	}
}

int
do_dev_dispatch(struct fe *fe, struct device *d, struct request *r)
{
	size_t len = sizeof(struct wrec_req) + r->cmds_len;
	if (len > ring_max_record(d->cmd)) { /* can never fit: fail it rather than wait forever */
		r->status = CUA_ETOO_LARGE;
		free(r->status_msg);
		r->status_msg = strdup("request too large for the worker ring; split the batch");
		return CUA_ETOO_LARGE;
	}
	uint64_t staged = 0; /* the same for its bulk bytes: a session's own worker has a smaller staging area */
	for (uint32_t i = 0; i < r->nstages; i++)
		staged += (r->stages[i].len + 255u) & ~(uint64_t)255u;
	if (staged > d->staging_size) {
		char msg[200];
		snprintf(msg, sizeof(msg),
			 "request of %llu bulk bytes exceeds the %llu-byte staging area of %s; split it",
			 (unsigned long long)staged, (unsigned long long)d->staging_size,
			 d->staging_size < fe->cfg.staging_bytes ? "this session's own worker (--isolation-staging)"
								 : "the device's worker (--staging)");
		r->status = CUA_ETOO_LARGE;
		free(r->status_msg);
		r->status_msg = strdup(msg);
		return CUA_ETOO_LARGE;
	}
	if (do_place(d, r) != 0)
		return -1;
	unsigned char *p = ring_reserve(d->cmd, len);
	if (p == NULL) {
		do_unplace(d, r, r->nstages);
		return -1;
	}
	do_fill_stages(d, r);
	struct wrec_req h = {r->id, r->ncmds, 0};
	memcpy(p, &h, sizeof(h));
	memcpy(p + sizeof(h), r->cmds, r->cmds_len);
	ring_commit(d->cmd, len);
	r->hop_ns[0] = hop_since(r, cua_now_ns());
	HASH_ADD(hh, d->inflight, id, sizeof(r->id), r);
	d->in_flight++;
	if (d->recover_ms != 0 && !d->recover_dispatched) {
		d->recover_dispatched = true;
		log_debug("device %d: recovery +%llu ms: first request dispatched to generation %u", d->index,
			  (unsigned long long)(cua_now_ms() - d->recover_ms), d->gen);
	}
	return 0;
}

void
do_dev_release_staging(struct device *d, struct request *r)
{
	do_unplace(d, r, r->nstages);
}

const void *
dev_stage_bytes(const struct device *d, const struct request *r, uint32_t i)
{
	return d->staging + r->stages[i].off;
}

/* ------------------------------------------------------------------ completions */

static struct request *
do_inflight_take(struct device *d, uint64_t id) CUA_REQUIRES(cuad_fe_lock)
{
	struct request *r;
	HASH_FIND(hh, d->inflight, &id, sizeof(id), r);
	if (r != NULL) {
		HASH_DEL(d->inflight, r);
		d->in_flight--;
	}
	return r;
}

/* One command's outcome into its item. */
static void
item_apply(struct ritem *it, const struct wcpl *c, const unsigned char *detail)
{
	it->status = c->status;
	it->value = c->value;
	if (c->status != CUA_OK) {
		free(it->msg);
		it->msg = strndup((const char *)detail, c->detail_len);
	}
	if (c->data_len) {
		free(it->data);
		it->data = malloc(c->data_len);
		if (it->data) {
			memcpy(it->data, detail + c->detail_len, c->data_len);
			it->data_len = c->data_len;
		}
	}
}

/* The request one completion record is for, taken out of d's in-flight table (NULL: a bad record, logged).
 * Caller holds fe->lock. */
static struct request *
do_completed(struct device *d, const unsigned char *rec, size_t len) CUA_REQUIRES(cuad_fe_lock)
{
	struct wcpl_req h;
	if (len < sizeof(h)) {
		log_error("device %d: short completion record", d->index);
		return NULL;
	}
	memcpy(&h, rec, sizeof(h));
	struct request *r = do_inflight_take(d, h.req);
	if (r == NULL) {
		log_error("device %d: completion for unknown request %llu", d->index, (unsigned long long)h.req);
		return NULL;
	}
	if (h.fatal) {
		do_log_ctx(r->s, r->id);
		log_error("device %d: sticky fault in request %llu of session %llu", d->index,
			  (unsigned long long)h.req, (unsigned long long)r->s->id);
		cua_log_ctx_clear();
		/* The worker exits next: send it nothing more, so new work waits for the fresh one. Nothing follows
		 * this record (the worker holds its completion lock until it exits), so the recovery begins now. */
		d->state = DEV_RESTARTING;
		d->dying = true;
		d->recover_ms = cua_now_ms();
		d->recover_dispatched = false;
		log_debug("device %d: recovery +0 ms: worker %d reported a sticky fault", d->index, (int)d->pid);
	} else if (d->recover_ms != 0 && d->recover_dispatched) {
		log_debug("device %d: recovery +%llu ms: first completion from generation %u; recovered", d->index,
			  (unsigned long long)(cua_now_ms() - d->recover_ms), d->gen);
		d->recover_ms = 0;
	}
	return r;
}

/* Copies one completion record's results into r's items. r is the completion thread's alone (out of the
 * in-flight table, not yet handed back), so this runs without fe->lock: the record's bytes (a DTOH's data
 * among them) are copied while other threads use the front-end. */
static void
apply(struct request *r, const unsigned char *rec, size_t len)
{
	struct wcpl_req h;
	memcpy(&h, rec, sizeof(h));
	r->busy_ns = h.busy_ns;
	r->hop_ns[1] = hop_since(r, h.t_read);
	r->hop_ns[2] = hop_since(r, h.t_issued);
	r->hop_ns[3] = hop_since(r, h.t_emit);
	r->hop_ns[4] = hop_since(r, cua_now_ns());
	size_t off = sizeof(h);
	/* Commands were planned in item order, so one cursor walks items and commands together. */
	uint32_t cur = 0;
	for (uint32_t ci = 0; ci < h.ncmds && off + sizeof(struct wcpl) <= len; ci++) {
		struct wcpl c;
		memcpy(&c, rec + off, sizeof(c));
		off += sizeof(c);
		const unsigned char *detail = rec + off;
		if ((size_t)c.detail_len + c.data_len > len - off)
			break;
		off += wrec_align8(c.detail_len + c.data_len);
		while (cur < r->nitems && r->items[cur].cmd < (int32_t)ci)
			cur++;
		if (cur < r->nitems && r->items[cur].cmd == (int32_t)ci)
			item_apply(&r->items[cur], &c, detail);
		/* else a command without an item (session cleanup) */
	}
}

/* The worker is gone: moves everything in flight on it to *q (initialised here), its items failed with
 * DEVICE_HUNG when the watchdog killed it (d->hung_s), else CONTEXT_LOST; the caller hands them back without
 * fe->lock. Caller holds fe->lock. */
static void
do_fail_inflight(struct device *d, struct request_queue *q) CUA_REQUIRES(cuad_fe_lock)
{
	struct request *r, *tmp;
	char hung[256];
	snprintf(hung, sizeof(hung),
		 "the worker of device %d stopped making progress (no heartbeat for %u s) and was killed and "
		 "restarted before this work completed; recreate modules, memory and streams",
		 d->index, d->hung_s);
	TAILQ_INIT(q);
	HASH_ITER(hh, d->inflight, r, tmp)
	{
		HASH_DEL(d->inflight, r);
		d->in_flight--;
		for (uint32_t i = 0; i < r->nitems; i++) {
			struct ritem *it = &r->items[i];
			if (it->cmd >= 0 && it->status == CUA_OK) {
				it->status = d->hung_s ? CUA_EDEVICE_HUNG : CUA_ECONTEXT_LOST;
				free(it->msg);
				it->msg =
					strdup(d->hung_s ? hung
							 : "the GPU context was lost (another request faulted or the "
							   "worker died) before this work completed; recreate modules, "
							   "memory and streams");
			}
		}
		TAILQ_INSERT_TAIL(q, r, qlink);
	}
}

/* ------------------------------------------------------------------ watchdog */

/*
 * The watchdog tells a hung worker from a long kernel by a heartbeat that does not depend on the device: a
 * thread of the worker's own bumps wshm_hdr.heartbeat every WSHM_HEARTBEAT_MS and does nothing else
 * (worker.c), so it keeps beating while a kernel runs for hours or the command loop waits in a long
 * synchronous call (a module load behind running kernels, a drain). It stops only when the whole process
 * stops being scheduled: SIGSTOP, a debugger, a frozen cgroup, a process stuck in the driver. The rule: when
 * the heartbeat has not moved for --watchdog-timeout seconds and the worker has work in flight, the worker is
 * killed (SIGKILL) and the ordinary restart path answers its requests, with DEVICE_HUNG. A worker without work
 * in flight is left alone (an operator's debugger costs nobody anything) until work reaches it.
 * The front-end measures with its own clock, between its own looks: when it was itself not running for a
 * while (WD_STALL_MS between two looks, e.g. the whole host or the daemon was stopped), the watch begins
 * afresh rather than blame the worker for the front-end's own gap.
 * What it does not catch: a kernel that never ends (indistinguishable from a long one) and a worker whose
 * command loop deadlocked while its heartbeat thread runs.
 */
#define WD_STALL_MS 1000

/* Begins watching d's current worker afresh. Completion thread. */
static void
watchdog_reset(struct device *d)
{
	const struct wshm_hdr *h = (const struct wshm_hdr *)d->shm;
	d->wd_beat = h ? atomic_load_explicit(&h->heartbeat, memory_order_relaxed) : 0;
	d->wd_seen_ms = d->wd_poll_ms = cua_now_ms();
	d->hung_s = 0;
}

/* One look at d's heartbeat; kills the worker when the rule above says it hung (d->hung_s set; its exit is
 * then reaped and restarted by the completion loop). Completion thread, without fe->lock. */
static void
watchdog_check(struct fe *fe, struct device *d)
{
	const struct wshm_hdr *h = (const struct wshm_hdr *)d->shm;
	if (fe->cfg.watchdog_s == 0 || d->pid <= 0 || h == NULL || d->hung_s)
		return;
	uint64_t now = cua_now_ms(), beat = atomic_load_explicit(&h->heartbeat, memory_order_relaxed);
	bool gap = now - d->wd_poll_ms > WD_STALL_MS;
	d->wd_poll_ms = now;
	if (beat != d->wd_beat || gap) {
		d->wd_beat = beat;
		d->wd_seen_ms = now;
		return;
	}
	uint64_t still = now - d->wd_seen_ms;
	if (still < (uint64_t)fe->cfg.watchdog_s * 1000)
		return;
	fe_lock(fe);
	uint32_t inflight = d->in_flight;
	fe_unlock(fe);
	if (inflight == 0)
		return;
	uint64_t busy = atomic_load_explicit(&h->busy_since_ms, memory_order_relaxed);
	char loop[64] = "waiting for a record";
	if (busy != 0)
		snprintf(loop, sizeof(loop), "in one record for %.1f s", now > busy ? (now - busy) / 1000.0 : 0.0);
	d->hung_s = (uint32_t)((still + 999) / 1000);
	log_error("device %d: worker %d stopped making progress: no heartbeat for %.1f s with %u request(s) in "
		  "flight (its command loop %s); killing it (--watchdog-timeout %u)",
		  d->index, (int)d->pid, still / 1000.0, inflight, loop, fe->cfg.watchdog_s);
	kill(d->pid, SIGKILL);
}

/* ------------------------------------------------------------------ recovery */

/*
 * A worker that faulted or died is replaced by the device's completion thread. The phases, each logged at debug
 * level with the milliseconds since the recovery began ("recovery +N ms"):
 *   0. the worker's fatal completion record is read (do_completed), or its death is noticed (waitpid);
 *   1. the faulting request is answered (its session sees the CUDA error);
 *   2. a faulted worker writes nothing after its fatal record, so nothing waits for its exit, whose teardown of
 *      the context can take long on a GPU: with a spare thread it is killed at once and handed to that thread to
 *      reap; without one it is waited for before the next worker starts (step 4), as its memory is freed then;
 *   3. the requests still in flight are answered CONTEXT_LOST, the generation counted, old handles marked stale
 *      (requests queued against them are answered CONTEXT_LOST from here, not when the next worker serves);
 *   4. the next generation serves: the ready spare swapped in (pointers moved), or a fresh worker spawned and
 *      waited for (process, driver, context, pool streams, staging page-locked: most of the time on a GPU);
 *   5. the first request dispatched to it and (6.) its first completion (do_dev_dispatch, do_completed).
 * The spare thread logs, on the same clock, when the faulted worker was reaped and when the next spare is ready.
 */

#define FAULTED (-1) /* restart's st: the worker reported a sticky fault (its fatal record was read) */

/* A faulted worker killed and swapped out, for the spare thread to reap. */
struct retired_worker {
	TAILQ_ENTRY(retired_worker) link;
	pid_t pid;
	uint32_t gen;
	uint64_t since_ms; /* the recovery's start */
};

static void
recovery_phase(struct device *d, uint64_t t0, const char *what)
{
	log_debug("device %d: recovery +%llu ms: %s", d->index, (unsigned long long)(cua_now_ms() - t0), what);
}

/* Kills the faulted worker pid (of generation gen) and hands it to the spare thread to reap (or reaps it here when
 * out of memory). The completion thread, without fe->lock. */
static void
retire(struct fe *fe, struct device *d, pid_t pid, uint32_t gen, uint64_t t0)
{
	struct retired_worker *o = calloc(1, sizeof(*o));
	kill(pid, SIGKILL); /* it exits by itself after its fatal record: this only makes sure */
	if (o == NULL) {
		waitpid(pid, NULL, 0);
		return;
	}
	o->pid = pid;
	o->gen = gen;
	o->since_ms = t0;
	fe_lock(fe);
	TAILQ_INSERT_TAIL(&d->retired, o, link);
	pthread_cond_broadcast(&d->spare_cond);
	fe_unlock(fe);
}

/* Waits for the faulted worker pid to exit (it does after its fatal record), looking at d->stop every 50 ms. The
 * completion thread, without fe->lock. */
static void
await_exit(struct device *d, pid_t pid)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0); /* readable once the worker has exited */
	while (waitpid(pid, NULL, WNOHANG) == 0) {
		if (atomic_load(&d->stop)) { /* shutting down: do not wait for it */
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			break;
		}
		if (pfd >= 0) {
			struct pollfd p = {pfd, POLLIN, 0};
			poll(&p, 1, 50);
		} else { /* a kernel before 5.3 */
			struct timespec ts = {0, 10 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
	if (pfd >= 0)
		close(pfd);
}

/* Moves the ready spare sp's worker and shared-memory link into d (whose own link is gone) and frees sp. Caller
 * holds fe->lock. */
static void
do_link_move(struct device *d, struct device *sp) CUA_REQUIRES(cuad_fe_lock)
{
	d->pid = sp->pid;
	d->info = sp->info;
	d->shm_fd = sp->shm_fd;
	d->shm = sp->shm;
	d->shm_len = sp->shm_len;
	d->cmd = sp->cmd;
	d->cpl = sp->cpl;
	d->staging = sp->staging;
	d->staging_alloc = sp->staging_alloc; /* transferred: its free list is d's now */
	free(sp);
}

/* Ends a spare that will not serve (stopping, or not of the generation wanted, or dead): killed, reaped, its
 * link undone. Without fe->lock. */
static void
spare_discard(struct device *sp)
{
	if (sp->pid > 0) {
		kill(sp->pid, SIGKILL); /* idle: it holds nothing that needs an orderly end */
		waitpid(sp->pid, NULL, 0);
	}
	shm_destroy(sp);
	free(sp);
}

/* Whether process pid has begun to exit: its main thread is a zombie (Z) or dead (X) in /proc. A worker killed
 * on a GPU stays unreapable while the driver tears its context down (hundreds of ms on an H200), so waitpid alone
 * takes a spare killed just before a fault for a live one. */
static bool
pid_exiting(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return true;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *rp = strrchr(buf, ')'); /* the command name may hold anything: the state follows the last ')' */
	return rp != NULL && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/* The ready spare for d's next generation (d->gen, already counted): one being started is waited for, since it is
 * further along than a fresh one would be. NULL when there is none (no spare thread, the spare failed, or it died
 * idle). The completion thread, without fe->lock. */
static struct device *
take_spare(struct fe *fe, struct device *d)
{
	if (!d->spare_thread_started)
		return NULL;
	fe_lock(fe);
	while (d->spare != NULL && !d->spare_ready && !atomic_load(&d->stop))
		fe_cond_wait(fe, &d->spare_cond, NULL);
	struct device *sp = d->spare_ready ? d->spare : NULL;
	if (sp != NULL) {
		d->spare = NULL;
		d->spare_ready = false;
	}
	uint32_t want = d->gen;
	fe_unlock(fe);
	int st;
	bool reaped = false;
	if (sp != NULL &&
	    (own_gen(sp) != want || (reaped = waitpid(sp->pid, &st, WNOHANG) != 0) || pid_exiting(sp->pid))) {
		log_warn("device %d: the spare worker %d is %s; starting a fresh one", d->index, (int)sp->pid,
			 own_gen(sp) != want ? "of another generation"
			 : reaped            ? "gone"
					     : "exiting");
		if (reaped)
			sp->pid = 0; /* reaped just now */
		spare_discard(sp);
		sp = NULL;
	}
	return sp;
}

/* The worker died or faulted (its last records were read; st its exit status, or FAULTED while it may still be
 * exiting): fail its work, mark its objects stale, start the next generation — the spare when one is ready.
 * Completion thread, without fe->lock. Returns 0 when the new worker serves. */
static int
restart(struct fe *fe, struct device *d, int st)
{
	if (st == FAULTED)
		log_error("device %d: worker %d reported a sticky fault; replacing it", d->index, (int)d->pid);
	else if (WIFEXITED(st))
		log_error("device %d: worker %d exited with status %d; restarting", d->index, d->pid, WEXITSTATUS(st));
	else
		log_error("device %d: worker %d killed by signal %d; restarting", d->index, d->pid, WTERMSIG(st));
	struct request_queue lost;
	struct request *r;
	pid_t exiting = st == FAULTED ? d->pid : 0; /* the faulted worker, until it was reaped */
	fe_lock(fe);
	if (d->recover_ms == 0) { /* a death, not a reported fault: the recovery begins now */
		d->recover_ms = cua_now_ms();
		d->recover_dispatched = false;
	}
	uint64_t t0 = d->recover_ms;
	uint32_t old = d->gen;
	d->pid = 0;
	d->state = DEV_RESTARTING; /* nothing new is sent to it from here */
	do_fail_inflight(d, &lost);
	fe_unlock(fe);
	unsigned nlost = 0;
	while ((r = TAILQ_FIRST(&lost)) != NULL) { /* answered before their objects go stale, as they ran before */
		TAILQ_REMOVE(&lost, r, qlink);
		d->done(fe, r);
		nlost++;
	}
	fe_lock(fe);
	d->gen++;
	d->restarts++;
	if (d != &fe->devs[d->index]) /* a session's own worker: the device's operator-visible count shows it too */
		fe->devs[d->index].session_restarts++;
	do_sessions_mark_stale(fe, d, old);
	d->spare_failed = false;        /* the spare thread tries again after a restart */
	pthread_cond_signal(&fe->cond); /* the dispatcher: requests queued against the lost objects are answered */
	fe_unlock(fe);
	if (cua_log_get_level() >= CUA_LOG_DEBUG) {
		char what[128];
		snprintf(what, sizeof(what), "%u request(s) in flight answered, handles of generation %u stale", nlost,
			 old);
		recovery_phase(d, t0, what);
	}
	d->hung_s = 0;
	d->dying = false;

	shm_destroy(d); /* the old worker keeps its own mapping until it exits */
	struct device *sp = take_spare(fe, d);
	int rc = 0;
	if (sp != NULL && exiting > 0) { /* the spare serves beside the faulted context's teardown */
		retire(fe, d, exiting, old, t0);
		recovery_phase(d, t0, "the faulted worker killed and handed to the spare thread to reap");
	} else if (exiting > 0) {
		/* no spare ready (none kept, it failed, or it died): a fresh worker starts only once the faulted one,
		 * and the device memory its context holds, are gone */
		await_exit(d, exiting);
		recovery_phase(d, t0, "the faulted worker exited and was reaped");
	}
	if (sp == NULL)
		rc = dev_launch(fe, d);
	fe_lock(fe);
	if (sp != NULL) {
		do_link_move(d, sp);
		d->spare_swaps++;
	}
	if (rc == 0) {
		d->state = DEV_READY;
		log_info("device %d: worker generation %u ready%s, %s, %llu ms after the %s", d->index, d->gen,
			 d->owner != NULL ? " (a session's own worker)" : "",
			 sp != NULL ? "a spare swapped in" : "a fresh worker", (unsigned long long)(cua_now_ms() - t0),
			 st == FAULTED ? "fault" : "death");
	} else {
		d->state = DEV_FAILED;
		d->recover_ms = 0;
		log_error("device %d: restart failed: %s", d->index, d->why);
	}
	pthread_cond_signal(&fe->cond);         /* the dispatcher: waiting work can go (or be refused) now */
	pthread_cond_broadcast(&d->spare_cond); /* the spare thread: the next spare */
	fe_unlock(fe);
	return rc;
}

static void *
completion_main(void *arg)
{
	struct device *d = arg;
	struct fe *fe = d->fe;
	char name[16];
	snprintf(name, sizeof(name), "cuad-cpl%d", d->index);
	pthread_setname_np(pthread_self(), name); /* top -H, gdb: which thread is busy */
	watchdog_reset(d);
	for (;;) {
		size_t len;
		const unsigned char *rec = ring_peek(d->cpl, &len);
		if (rec != NULL) {
			fe_lock(fe);
			struct request *r = do_completed(d, rec, len);
			uint64_t t0 = d->dying ? d->recover_ms : 0;
			fe_unlock(fe);
			if (r != NULL) { /* no lock held over the copy or the callback */
				apply(r, rec, len);
				d->done(fe, r);
			}
			ring_release(d->cpl);
			if (t0 != 0)
				recovery_phase(d, t0, "the faulting request answered");
			continue;
		}
		if (atomic_load(&d->stop))
			return NULL;
		int st = 0;
		bool gone = false;
		if (d->pid > 0 && d->dying) { /* nothing more comes from it: recover now, not after its exit */
			st = FAULTED;
			gone = true;
		} else if (d->pid > 0) {
			gone = waitpid(d->pid, &st, WNOHANG) == d->pid;
		}
		if (!gone) {
			watchdog_check(fe, d);
			ring_wait_data(d->cpl, 50);
			continue;
		}
		if (atomic_load(&d->stop) || atomic_load(&fe->stopping)) { /* shutting down: no new generation */
			if (st == FAULTED) {                               /* not reaped yet */
				kill(d->pid, SIGKILL);
				waitpid(d->pid, NULL, 0);
			}
			d->pid = 0;
			return NULL;
		}
		if (restart(fe, d, st) != 0)
			return NULL;
		watchdog_reset(d);
	}
}

/* ------------------------------------------------------------------ spare workers */

/*
 * The spare thread of a shared device (--spare-worker yes) keeps one worker of the next generation ready: spawned
 * and initialised — on a GPU its context made, pool streams created, staging page-locked — but sent nothing. A
 * restart takes it (take_spare) instead of starting a worker, and the thread then reaps the faulted worker and
 * starts the next spare. A spare that cannot start (out of GPU memory, say) is not retried before the next
 * restart; recovery then starts a fresh worker, as without a spare. The spare costs a context's device memory and
 * a second shared-memory region (--ring twice, --staging; page-locked on a GPU).
 */

/* Reaps the retired worker o (already killed) and frees o. The spare thread, without fe->lock. */
static void
reap_retired(struct device *d, struct retired_worker *o)
{
	int st = 0;
	while (waitpid(o->pid, &st, 0) < 0 && errno == EINTR)
		;
	if (cua_log_get_level() >= CUA_LOG_DEBUG) {
		char what[128];
		snprintf(what, sizeof(what), "the faulted worker %d (generation %u) exited and was reaped", (int)o->pid,
			 o->gen);
		recovery_phase(d, o->since_ms, what);
	}
	free(o);
}

/* Starts a spare for d's next generation and makes it d's ready spare. Entered and left with fe->lock, which it
 * drops while the worker starts. The spare thread. */
static void
do_spare_make(struct fe *fe, struct device *d) CUA_REQUIRES(cuad_fe_lock)
{
	struct device *sp = calloc(1, sizeof(*sp));
	if (sp == NULL) {
		d->spare_failed = true;
		return;
	}
	sp->fe = fe;
	sp->index = d->index;
	sp->ordinal = d->ordinal;
	sp->staging_size = d->staging_size;
	sp->shm_fd = -1;
	sp->gen = d->gen + 1;
	d->spare = sp; /* starting: only its stop is anyone else's (dev_stop) */
	uint64_t t0 = cua_now_ms();
	fe_unlock(fe);
	int rc = dev_launch(fe, sp);
	fe_lock(fe);
	if (rc == 0 && !d->spare_quit && !atomic_load(&d->stop) && !atomic_load(&fe->stopping)) {
		d->spare_ready = true;
		log_info("device %d: spare worker %d (generation %u) ready in %llu ms", d->index, (int)sp->pid, sp->gen,
			 (unsigned long long)(cua_now_ms() - t0));
	} else {
		d->spare = NULL;
		if (rc != 0 && !atomic_load(&sp->stop) && !atomic_load(&fe->stopping)) {
			d->spare_failed = true;
			log_warn("device %d: cannot keep a spare worker ready (%s); a fault will start a fresh worker",
				 d->index, sp->why);
		}
		fe_unlock(fe);
		if (rc == 0)
			spare_discard(sp);
		else
			free(sp); /* dev_launch undid its link */
		fe_lock(fe);
	}
	pthread_cond_broadcast(&d->spare_cond); /* a restart waiting for it */
}

static void *
spare_main(void *arg)
{
	struct device *d = arg;
	struct fe *fe = d->fe;
	char name[16];
	snprintf(name, sizeof(name), "cuad-spare%d", d->index);
	pthread_setname_np(pthread_self(), name);
	fe_lock(fe);
	while (!d->spare_quit) {
		struct retired_worker *o = TAILQ_FIRST(&d->retired);
		if (o != NULL) { /* first: on a GPU the next context is made after the faulted one is gone */
			TAILQ_REMOVE(&d->retired, o, link);
			fe_unlock(fe);
			reap_retired(d, o);
			fe_lock(fe);
			continue;
		}
		if (d->spare == NULL && !d->spare_failed && d->state == DEV_READY && !atomic_load(&d->stop) &&
		    !atomic_load(&fe->stopping)) {
			do_spare_make(fe, d);
			continue;
		}
		fe_cond_wait(fe, &d->spare_cond, NULL);
	}
	fe_unlock(fe);
	return NULL;
}

/* dev_stop's first step: a spare being started stops waiting for its worker, a restart waiting for it goes on. */
static void
spare_abort(struct device *d) CUA_NO_TSA
{
	if (!d->spare_thread_started)
		return;
	fe_lock(d->fe);
	if (d->spare != NULL && !d->spare_ready)
		atomic_store(&d->spare->stop, 1);
	pthread_cond_broadcast(&d->spare_cond);
	fe_unlock(d->fe);
}

/* dev_stop's last step, after d's worker exited: the spare thread ends, the ready spare is stopped as any idle
 * worker is, the retired workers are reaped. */
static void
spare_stop(struct device *d) CUA_NO_TSA
{
	if (!d->spare_thread_started)
		return;
	fe_lock(d->fe);
	d->spare_quit = true;
	pthread_cond_broadcast(&d->spare_cond);
	fe_unlock(d->fe);
	pthread_join(d->spare_thread, NULL);
	d->spare_thread_started = false;
	if (d->spare != NULL) /* ready (one being started was discarded by the thread) */
		dev_destroy(d->spare);
	d->spare = NULL;
	d->spare_ready = false;
	struct retired_worker *o;
	while ((o = TAILQ_FIRST(&d->retired)) != NULL) {
		TAILQ_REMOVE(&d->retired, o, link);
		reap_retired(d, o);
	}
}
