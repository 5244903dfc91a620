/*
 * shmchan.c — the shared-memory channels (see shmchan.h; layout in common/cua_shm.h, spec in PROTOCOL.md §10).
 *
 * Locks: svc->lock guards the list of channels (taken by the service thread around its pass, by attach, by
 * stop); ch->lock guards a channel's reply side (rep_tail, the queue, closed). Order: svc->lock, then fe->lock
 * (request_receive), then ch->lock (shmchan_send under fe->lock). request_reply_sent (fe->lock) is called with
 * no channel lock held.
 */
#include "config.h"

#include "cua_log.h"
#include "cua_shm.h"
#include "request.h"
#include "shmchan.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <nng/nng.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS 250u   /* sessions that ended and stalled queues are looked at this often */
#define BACKLOG_MS 2u  /* how often a channel with queued replies is looked at for room */
#define MIN_PIECE 256u /* a queued reply is written in pieces of at least this (or what is left of it) */
#define MAX_EVENTS 64

/* A reply waiting for room in the reply ring, or written and waiting to be accounted (request_reply_sent). */
struct shmrep {
	nng_msg *m; /* NULL once written */
	size_t off; /* bytes of it written */
	size_t bytes;
	uint64_t tag;
	bool counted;
	STAILQ_ENTRY(shmrep) link;
};
STAILQ_HEAD(shmrep_q, shmrep);

struct shmch {
	struct shmsvc *svc;
	atomic_int refs; /* the service thread's list, and one per request read from the ring not yet answered */
	uint64_t session;
	uint32_t pipe;
	int efd;
	unsigned char *map;
	size_t size;
	struct cua_shm_hdr *h;
	unsigned char *req, *rep; /* the rings */
	uint32_t ring, mask;
	uint32_t req_head; /* service thread only: the daemon's own copy, never read back from the mapping */
	uint64_t records;
	pthread_mutex_t lock;
	uint32_t rep_tail;     /* guarded by lock: the daemon's own copy */
	struct shmrep_q queue; /* guarded by lock: replies not yet (fully) in the ring */
	struct shmrep_q done;  /* guarded by lock: written, to be accounted by the service thread */
	unsigned nqueue;       /* guarded by lock */
	uint64_t moved_ms;     /* guarded by lock: when the queue's head last moved */
	bool closed;           /* guarded by lock */
	TAILQ_ENTRY(shmch) link;
};
TAILQ_HEAD(shmch_list, shmch);

struct shmsvc {
	struct fe *fe;
	pthread_mutex_t lock;
	struct shmch_list list; /* guarded by lock */
	unsigned n;             /* guarded by lock */
	int epfd, wake;         /* wake: an eventfd, for attach, stop and replies written while the thread sleeps */
	atomic_int sleeping;
	atomic_int stopping;
	atomic_int attaching; /* threads waiting for lock in attach: a busy pass loop hands it over */
	pthread_t thread;
	bool started;
};

/* A request's reply context: where its answer goes. */
struct shmctx {
	uint32_t kind; /* SHMCHAN_CTX_KIND: must stay first (edge.c reads it) */
	struct shmch *ch;
	uint64_t tag;
};

/* ------------------------------------------------------------------ the mapping: shared with a hostile peer */

static uint32_t
ld(uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

static void
st(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_SEQ_CST);
}

/* Copies len bytes at ring position pos out of ring (wrapping). */
static void
ring_read(const struct shmch *ch, const unsigned char *ring, uint32_t pos, void *dst, size_t len)
{
	size_t at = pos & ch->mask, first = ch->ring - at < len ? ch->ring - at : len;
	memcpy(dst, ring + at, first);
	memcpy((unsigned char *)dst + first, ring, len - first);
}

static void
ring_write(const struct shmch *ch, unsigned char *ring, uint32_t pos, const void *src, size_t len)
{
	size_t at = pos & ch->mask, first = ch->ring - at < len ? ch->ring - at : len;
	memcpy(ring + at, src, first);
	memcpy(ring, (const unsigned char *)src + first, len - first);
}

static uint32_t
padded(size_t len)
{
	return (uint32_t)(sizeof(struct cua_shm_rec) + ((len + CUA_SHM_ALIGN - 1) & ~(size_t)(CUA_SHM_ALIGN - 1)));
}

static void
futex_wake(uint32_t *word)
{
	(void)syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* ------------------------------------------------------------------ channel lifetime */

static void
ch_unref(struct shmch *ch)
{
	if (atomic_fetch_sub(&ch->refs, 1) != 1)
		return;
	munmap(ch->map, ch->size);
	pthread_mutex_destroy(&ch->lock);
	free(ch);
}

/* Calls request_reply_sent for the written replies (no channel lock held). */
static bool
account(struct shmch *ch)
{
	struct shmrep_q q = STAILQ_HEAD_INITIALIZER(q);
	pthread_mutex_lock(&ch->lock);
	STAILQ_CONCAT(&q, &ch->done);
	pthread_mutex_unlock(&ch->lock);
	bool any = !STAILQ_EMPTY(&q);
	while (!STAILQ_EMPTY(&q)) {
		struct shmrep *r = STAILQ_FIRST(&q);
		STAILQ_REMOVE_HEAD(&q, link);
		if (r->counted)
			request_reply_sent(ch->svc->fe, ch->pipe, r->bytes);
		if (r->m)
			nng_msg_free(r->m);
		free(r);
	}
	return any;
}

/* Closes ch (service thread, svc->lock held): status goes into the header for the client, what waits in the
 * queue is dropped (and accounted as a failed send), and with violation the session's connection is closed. */
static void
ch_close(struct shmch *ch, uint32_t status, bool violation)
{
	struct shmsvc *svc = ch->svc;
	pthread_mutex_lock(&ch->lock);
	ch->closed = true;
	STAILQ_CONCAT(&ch->done, &ch->queue);
	ch->nqueue = 0;
	pthread_mutex_unlock(&ch->lock);
	account(ch);
	st(&ch->h->closed, status);
	__atomic_fetch_add(&ch->h->rep_futex, 1, __ATOMIC_SEQ_CST);
	futex_wake(&ch->h->rep_futex);
	epoll_ctl(svc->epfd, EPOLL_CTL_DEL, ch->efd, NULL);
	close(ch->efd);
	if (violation) {
		nng_pipe p = NNG_PIPE_INITIALIZER;
		p.id = ch->pipe;
		nng_pipe_close(p);
	}
	TAILQ_REMOVE(&svc->list, ch, link);
	svc->n--;
	ch_unref(ch);
}

/* A ring broke a rule: logged with who, the channel and its connection closed. Returns false (no work). */
static bool __attribute__((format(printf, 2, 3))) violation(struct shmch *ch, const char *fmt, ...)
{
	char why[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_warn("shared-memory channel of session %llu (pipe %u): %s; closing the channel and its connection",
		 (unsigned long long)ch->session, ch->pipe, why);
	ch_close(ch, CUA_EPROTOCOL, true);
	return false;
}

/* ------------------------------------------------------------------ replies */

/* Writes what fits of the queue into the reply ring (ch->lock held). true when anything was written. */
static bool
flush_locked(struct shmch *ch)
{
	bool wrote = false;
	uint32_t head = ld(&ch->h->rep_head);
	uint32_t used = ch->rep_tail - head;
	if (used > ch->ring || used % CUA_SHM_ALIGN != 0)
		return false; /* a broken head: the service thread closes the channel (serve) */
	while (!STAILQ_EMPTY(&ch->queue)) {
		struct shmrep *r = STAILQ_FIRST(&ch->queue);
		size_t left = r->bytes - r->off, room = ch->ring - (ch->rep_tail - head);
		if (room < padded(1))
			break;
		size_t piece = padded(left) <= room ? left : (room - sizeof(struct cua_shm_rec)) & ~(size_t)15;
		if (piece < left && piece < MIN_PIECE)
			break;
		struct cua_shm_rec rec = {(uint32_t)piece, piece < left ? CUA_SHM_MORE : 0, r->tag};
		ring_write(ch, ch->rep, ch->rep_tail, &rec, sizeof(rec));
		ring_write(ch, ch->rep, ch->rep_tail + (uint32_t)sizeof(rec),
			   (unsigned char *)nng_msg_body(r->m) + r->off, piece);
		ch->rep_tail += padded(piece);
		r->off += piece;
		wrote = true;
		if (r->off == r->bytes) {
			STAILQ_REMOVE_HEAD(&ch->queue, link);
			ch->nqueue--;
			STAILQ_INSERT_TAIL(&ch->done, r, link);
		}
	}
	if (wrote) {
		ch->moved_ms = cua_now_ms();
		st(&ch->h->rep_tail, ch->rep_tail);
		__atomic_fetch_add(&ch->h->rep_futex, 1, __ATOMIC_SEQ_CST);
		if (ld(&ch->h->client_waiting))
			futex_wake(&ch->h->rep_futex);
	}
	return wrote;
}

size_t
shmchan_send(void *ctx, void *msg, bool counted)
{
	struct shmctx *x = ctx;
	struct shmch *ch = x->ch;
	struct shmrep *r = msg ? calloc(1, sizeof(*r)) : NULL;
	size_t bytes = msg ? nng_msg_len(msg) : 0;
	if (msg && r == NULL)
		log_error("out of memory for a reply; the client will time out");
	pthread_mutex_lock(&ch->lock);
	if (r && !ch->closed) {
		*r = (struct shmrep){msg, 0, bytes, x->tag, counted, {NULL}};
		if (STAILQ_EMPTY(&ch->queue))
			ch->moved_ms = cua_now_ms();
		STAILQ_INSERT_TAIL(&ch->queue, r, link);
		ch->nqueue++;
		msg = NULL;
		r = NULL;
		flush_locked(ch);
		/* the service thread accounts what was written and retries what was not. Under ch->lock with the
		 * channel open: the service (and its eventfd) outlive every open channel, not a closed one's sender */
		if (atomic_load(&ch->svc->sleeping))
			(void)eventfd_write(ch->svc->wake, 1);
	} else {
		bytes = 0;
	}
	pthread_mutex_unlock(&ch->lock);
	if (msg)
		nng_msg_free(msg);
	free(r);
	ch_unref(ch);
	free(x);
	return bytes;
}

void
shmchan_drop(void *ctx)
{
	shmchan_send(ctx, NULL, false);
}

/* ------------------------------------------------------------------ requests */

/* Reads up to SHMCHAN_BURST records from ch's request ring into the core. true when it read any; a broken
 * ring closes the channel (then false: ch is gone). */
static bool
read_requests(struct shmch *ch)
{
	struct fe *fe = ch->svc->fe;
	unsigned n = 0;
	if (ld(&ch->h->req_tail) == ch->req_head)
		return false;
	/* Records of a session that is closing (its connection going, an operator's DISCONNECT) are not read: on NNG
	 * its connection is closed and they would never arrive, and request_receive would answer CLOSED, or make a
	 * new session for a pipe it has forgotten. The channel goes with the session; its client sees SESSION_LOST. */
	fe_lock(fe);
	struct session *s = do_session_by_pipe(fe, ch->pipe);
	bool live = s != NULL && s->id == ch->session;
	fe_unlock(fe);
	if (!live) {
		log_debug("shared-memory channel of session %llu: the session is closing",
			  (unsigned long long)ch->session);
		ch_close(ch, CUA_ECLOSED, false);
		return false;
	}
	for (; n < SHMCHAN_BURST; n++) {
		/* the replies written since the last record first: each one the client read may have let it send the
		 * next request, which must not find the session still holding it (--session-pending counts replies
		 * until they are written; a burst read without this held a whole burst more) */
		account(ch);
		uint32_t tail = ld(&ch->h->req_tail), avail = tail - ch->req_head;
		if (avail == 0)
			break;
		if (avail > ch->ring || avail % CUA_SHM_ALIGN != 0 || avail < sizeof(struct cua_shm_rec))
			return violation(ch, "request ring tail %u is not a record boundary within the ring (head %u)",
					 tail, ch->req_head);
		struct cua_shm_rec rec;
		ring_read(ch, ch->req, ch->req_head, &rec, sizeof(rec));
		if (rec.len == 0 || rec.len > avail - sizeof(rec) || rec.len > fe->cfg.max_message ||
		    padded(rec.len) > avail || rec.flags != 0)
			return violation(ch,
					 "a request record of %u bytes (flags %u) with %u bytes published "
					 "(at most %zu per message)",
					 rec.len, rec.flags, avail, (size_t)fe->cfg.max_message);
		nng_msg *m;
		struct shmctx *x = malloc(sizeof(*x));
		if (x == NULL || nng_msg_alloc(&m, rec.len) != 0) {
			free(x);
			break; /* out of memory: the records wait in the ring */
		}
		/* copied out once: what the client writes into the ring from now on changes nothing */
		ring_read(ch, ch->req, ch->req_head + (uint32_t)sizeof(rec), nng_msg_body(m), rec.len);
		ch->req_head += padded(rec.len);
		st(&ch->h->req_head, ch->req_head);
		ch->records++;
		*x = (struct shmctx){SHMCHAN_CTX_KIND, ch, rec.tag};
		atomic_fetch_add(&ch->refs, 1);
		struct incoming in = {m, nng_msg_body(m), rec.len, x, ch->pipe, false, ch->session};
		request_receive(fe, &in); /* takes m; x comes back through shmchan_send or shmchan_drop */
	}
	return n > 0;
}

/* One pass over ch: replies written, accounted, requests read. true when anything moved. */
static bool
serve(struct shmch *ch)
{
	pthread_mutex_lock(&ch->lock);
	bool moved = flush_locked(ch);
	uint32_t used = ch->rep_tail - ld(&ch->h->rep_head);
	unsigned queued = ch->nqueue;
	pthread_mutex_unlock(&ch->lock);
	if (used > ch->ring || used % CUA_SHM_ALIGN != 0)
		return violation(ch, "reply ring head is %u bytes behind the tail (ring of %u)", used, ch->ring);
	moved |= account(ch);
	if (queued < SHMCHAN_QUEUE_MAX)
		moved |= read_requests(ch);
	return moved;
}

/* ------------------------------------------------------------------ the service thread */

/* Every TICK_MS: channels whose session ended are closed, and so are those whose queue has not moved for
 * --send-timeout (their client stopped reading: as NNG does, the connection goes too). */
static void
tick(struct shmsvc *svc)
{
	struct shmch *ch, *next;
	for (ch = TAILQ_FIRST(&svc->list); ch != NULL; ch = next) {
		next = TAILQ_NEXT(ch, link);
		fe_lock(svc->fe);
		bool gone = do_session_by_id(svc->fe, ch->session) == NULL;
		unsigned timeout = svc->fe->cfg.send_timeout_ms;
		fe_unlock(svc->fe);
		/* what the client made room for is written first: a queue that waited on this thread (delayed by
		 * another channel's work, or by the machine) is not the client's fault */
		pthread_mutex_lock(&ch->lock);
		flush_locked(ch);
		bool stalled = ch->nqueue > 0 && cua_now_ms() - ch->moved_ms >= timeout;
		pthread_mutex_unlock(&ch->lock);
		if (gone) {
			log_debug("shared-memory channel of session %llu: the session ended",
				  (unsigned long long)ch->session);
			ch_close(ch, CUA_ECLOSED, false);
		} else if (stalled) {
			log_warn("shared-memory channel of session %llu (pipe %u): a reply waited %u ms for the client "
				 "to read it (--send-timeout); closing the channel and its connection",
				 (unsigned long long)ch->session, ch->pipe, timeout);
			ch_close(ch, CUA_ETIMEOUT, true);
		}
	}
}

static uint64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Tells every channel the thread is about to sleep; false when one has a record already (then it does not). */
static bool
may_sleep(struct shmsvc *svc, bool *backlog)
{
	struct shmch *ch;
	*backlog = false;
	atomic_store(&svc->sleeping, 1);
	TAILQ_FOREACH(ch, &svc->list, link)
	{
		st(&ch->h->daemon_sleeping, 1);
		pthread_mutex_lock(&ch->lock);
		*backlog |= ch->nqueue > 0;
		bool done = !STAILQ_EMPTY(&ch->done);
		pthread_mutex_unlock(&ch->lock);
		if (ld(&ch->h->req_tail) != ch->req_head || done)
			return false;
	}
	return true;
}

static void *
svc_main(void *arg)
{
	struct shmsvc *svc = arg;
	struct epoll_event ev[MAX_EVENTS];
	uint64_t last_work = now_ns(), last_tick = cua_now_ms();
	uint64_t gap_avg = 0, spin = CUA_SHM_SPIN_NS; /* the adaptive spin (cua_shm.h): the gaps between records */
	bool waited = false;                          /* the last pass found nothing */
	pthread_mutex_lock(&svc->lock);
	while (!atomic_load(&svc->stopping)) {
		bool work = false;
		struct shmch *ch, *next;
		for (ch = TAILQ_FIRST(&svc->list); ch != NULL; ch = next) {
			next = TAILQ_NEXT(ch, link); /* serve may close ch */
			work |= serve(ch);
		}
		if (cua_now_ms() - last_tick >= TICK_MS) {
			tick(svc);
			last_tick = cua_now_ms();
		}
		if (work) {
			uint64_t t = now_ns();
			if (waited) { /* how long clients keep the service waiting: the next poll's length */
				gap_avg = cua_shm_avg(gap_avg, t - last_work);
				spin = cua_shm_spin_ns(gap_avg);
			}
			waited = false;
			last_work = t;
			/* A channel that always has work must not keep attach (the fd channel's only thread, which
			 * every session's AUTH and PASS also wait for) out: yield the lock until it was taken. */
			while (atomic_load(&svc->attaching) > 0) {
				pthread_mutex_unlock(&svc->lock);
				sched_yield();
				pthread_mutex_lock(&svc->lock);
			}
			continue;
		}
		waited = true;
		if (now_ns() - last_work < spin) {
			pthread_mutex_unlock(&svc->lock); /* let attach in */
			sched_yield();
			pthread_mutex_lock(&svc->lock);
			continue;
		}
		bool backlog;
		if (may_sleep(svc, &backlog)) {
			pthread_mutex_unlock(&svc->lock);
			int n = epoll_wait(svc->epfd, ev, MAX_EVENTS, backlog ? (int)BACKLOG_MS : (int)TICK_MS);
			for (int i = 0; i < n; i++) {
				eventfd_t v;
				(void)eventfd_read(ev[i].data.fd, &v); /* nonblocking: a client may have read it */
			}
			pthread_mutex_lock(&svc->lock);
		}
		atomic_store(&svc->sleeping, 0);
		TAILQ_FOREACH(ch, &svc->list, link)
		st(&ch->h->daemon_sleeping, 0);
		/* no spin after a wake-up that brought nothing (a tick): the next pass finds a doorbell's record and
		 * that work starts the spin, so idle channels cost one pass per TICK_MS */
	}
	while (!TAILQ_EMPTY(&svc->list))
		ch_close(TAILQ_FIRST(&svc->list), CUA_ESHUTTING_DOWN, false);
	pthread_mutex_unlock(&svc->lock);
	return NULL;
}

struct shmsvc *
shmchan_start(struct fe *fe)
{
	struct shmsvc *svc = calloc(1, sizeof(*svc));
	if (svc == NULL)
		return NULL;
	svc->fe = fe;
	TAILQ_INIT(&svc->list);
	pthread_mutex_init(&svc->lock, NULL);
	svc->epfd = epoll_create1(EPOLL_CLOEXEC);
	svc->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct epoll_event e = {.events = EPOLLIN, .data.fd = svc->wake};
	if (svc->epfd < 0 || svc->wake < 0 || epoll_ctl(svc->epfd, EPOLL_CTL_ADD, svc->wake, &e) != 0 ||
	    pthread_create(&svc->thread, NULL, svc_main, svc) != 0) {
		log_error("cannot start the shared-memory channels' thread: %s; clients use NNG only", strerror(errno));
		if (svc->epfd >= 0)
			close(svc->epfd);
		if (svc->wake >= 0)
			close(svc->wake);
		pthread_mutex_destroy(&svc->lock);
		free(svc);
		return NULL;
	}
	svc->started = true;
	return svc;
}

void
shmchan_stop(struct shmsvc *svc)
{
	if (svc == NULL)
		return;
	atomic_store(&svc->stopping, 1);
	(void)eventfd_write(svc->wake, 1);
	pthread_join(svc->thread, NULL);
	close(svc->epfd);
	close(svc->wake);
	pthread_mutex_destroy(&svc->lock);
	free(svc);
}

/* ------------------------------------------------------------------ attach */

/* true when fd is an eventfd (the only doorbell the thread may read: a pipe or a socket could block it). */
static bool
is_eventfd(int fd)
{
	char path[64], target[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return false;
	target[n] = '\0';
	return strcmp(target, "anon_inode:[eventfd]") == 0;
}

/* Checks memfd and maps it into ch. 0, or a status with why. */
static int
map_channel(struct shmch *ch, int memfd, int efd, char *why, size_t len)
{
	const int need = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	struct stat sb;
	int seals = fcntl(memfd, F_GET_SEALS);
	struct cua_shm_hdr h;
	if (seals < 0 || (seals & need) != need)
		return snprintf(why, len,
				"the channel's memfd must be sealed with F_SEAL_SHRINK, F_SEAL_GROW and "
				"F_SEAL_SEAL (memfd_create with MFD_ALLOW_SEALING)"),
		       CUA_EBAD_ARGUMENT;
	if ((seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) != 0)
		return snprintf(why, len, "the channel's memfd must stay writable"), CUA_EBAD_ARGUMENT;
	if (!is_eventfd(efd))
		return snprintf(why, len, "the channel's second descriptor must be an eventfd (its doorbell)"),
		       CUA_EBAD_ARGUMENT;
	if (fstat(memfd, &sb) != 0 || sb.st_size < (off_t)CUA_SHM_HDR_BYTES ||
	    pread(memfd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return snprintf(why, len, "the channel's memfd is smaller than its header (%u bytes)",
				CUA_SHM_HDR_BYTES),
		       CUA_EBAD_ARGUMENT;
	/* h is a copy: the sizes checked are the sizes used */
	if (h.magic != CUA_SHM_MAGIC || h.version != CUA_SHM_VERSION)
		return snprintf(why, len, "the channel's header is not magic %#x version %u", CUA_SHM_MAGIC,
				CUA_SHM_VERSION),
		       CUA_EVERSION;
	if (h.ring_bytes < CUA_SHM_RING_MIN || h.ring_bytes > CUA_SHM_RING_MAX ||
	    (h.ring_bytes & (h.ring_bytes - 1)) != 0 ||
	    (uint64_t)sb.st_size != (uint64_t)CUA_SHM_HDR_BYTES + 2u * (uint64_t)h.ring_bytes)
		return snprintf(why, len,
				"ring_bytes %u: each ring must be a power of two of %u..%u bytes and the memfd exactly "
				"%u + 2 rings long (it is %lld)",
				h.ring_bytes, CUA_SHM_RING_MIN, CUA_SHM_RING_MAX, CUA_SHM_HDR_BYTES,
				(long long)sb.st_size),
		       CUA_EBAD_ARGUMENT;
	ch->size = (size_t)sb.st_size;
	ch->map = mmap(NULL, ch->size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (ch->map == MAP_FAILED)
		return snprintf(why, len, "cannot map the channel: %s", strerror(errno)), CUA_ENOMEM;
	ch->h = (struct cua_shm_hdr *)ch->map;
	ch->ring = h.ring_bytes;
	ch->mask = h.ring_bytes - 1;
	ch->req = ch->map + CUA_SHM_HDR_BYTES;
	ch->rep = ch->req + ch->ring;
	/* the client starts both rings empty at 0; the daemon's copies start there whatever the mapping says now */
	ch->req_head = ch->rep_tail = 0;
	return 0;
}

int
shmchan_attach(struct shmsvc *svc, uint64_t session, int memfd, int efd, char *why, size_t why_len)
{
	struct shmch *ch = calloc(1, sizeof(*ch));
	int status = 0;
	why[0] = '\0';
	if (svc == NULL || ch == NULL) {
		status = svc == NULL ? CUA_EUNSUPPORTED : CUA_ENOMEM;
		snprintf(why, why_len, "%s",
			 svc == NULL ? "this daemon serves no shared-memory channels" : "out of memory");
		goto out;
	}
	ch->svc = svc;
	ch->session = session;
	ch->efd = -1;
	pthread_mutex_init(&ch->lock, NULL);
	STAILQ_INIT(&ch->queue);
	STAILQ_INIT(&ch->done);
	atomic_init(&ch->refs, 1);
	fe_lock(svc->fe);
	struct session *s = do_session_by_id(svc->fe, session);
	bool ipc = s != NULL && s->ident.transport == ID_IPC;
	if (s != NULL)
		ch->pipe = s->pipe;
	fe_unlock(svc->fe);
	if (s == NULL || !ipc) {
		status = s == NULL ? CUA_ECLOSED : CUA_EUNSUPPORTED;
		snprintf(why, why_len, "%s", s == NULL ? "the session has ended" : "the session is not on ipc://");
		goto out;
	}
	if ((status = map_channel(ch, memfd, efd, why, why_len)) != 0)
		goto out;
	if (fcntl(efd, F_SETFL, O_NONBLOCK) != 0) {
		status = CUA_EBAD_ARGUMENT;
		snprintf(why, why_len, "cannot make the eventfd nonblocking: %s", strerror(errno));
		goto out;
	}
	atomic_fetch_add(&svc->attaching, 1); /* the service thread hands the lock over (svc_main) */
	pthread_mutex_lock(&svc->lock);
	atomic_fetch_sub(&svc->attaching, 1);
	struct shmch *o;
	bool dup = false;
	TAILQ_FOREACH(o, &svc->list, link)
	dup |= o->session == session;
	/* edge-triggered: every write wakes the thread once, whatever the counter holds (a client's eventfd in
	 * semaphore mode, or a huge count, cannot keep it readable and the thread awake) */
	struct epoll_event e = {.events = EPOLLIN | EPOLLET, .data.fd = efd};
	if (dup || svc->n >= SHMCHAN_MAX) {
		status = CUA_EQUOTA;
		snprintf(why, why_len,
			 dup ? "the session has a shared-memory channel already"
			     : "too many shared-memory channels (at most %u): use NNG",
			 SHMCHAN_MAX);
	} else if (epoll_ctl(svc->epfd, EPOLL_CTL_ADD, efd, &e) != 0) {
		status = CUA_ENOMEM;
		snprintf(why, why_len, "cannot watch the eventfd: %s", strerror(errno));
	} else {
		ch->efd = efd;
		efd = -1;
		TAILQ_INSERT_TAIL(&svc->list, ch, link);
		svc->n++;
		log_info("session %llu (pipe %u): shared-memory channel attached (rings of %u bytes)",
			 (unsigned long long)session, ch->pipe, ch->ring);
		ch = NULL;
	}
	pthread_mutex_unlock(&svc->lock);
	(void)eventfd_write(svc->wake, 1);
out:
	close(memfd);
	if (efd >= 0)
		close(efd);
	if (ch != NULL) {
		if (ch->map != NULL && ch->map != MAP_FAILED)
			munmap(ch->map, ch->size);
		if (ch->svc != NULL)
			pthread_mutex_destroy(&ch->lock);
		free(ch);
	}
	return status;
}
