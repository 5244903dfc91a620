/*
 * shmchan.c — libcuasync's side of the shared-memory channel (PROTOCOL.md §10, layout in common/cua_shm.h).
 *
 * The client makes a sealed memfd with the header and both rings and an eventfd (the daemon's doorbell); calls.c
 * passes both over the fd channel (SHM record) and hands the channel to transport.c. This file calls no other
 * client file (transport.c calls it). Requests go into the request ring under s->lock (any thread),
 * each with a tag naming its waiter; the eventfd is written only when the daemon says it sleeps. One reader
 * thread takes replies out of the reply ring: it polls after the last one and after each request for the adaptive
 * spin (cua_shm_spin_ns: twice the usual wait for a reply, 20..200 µs), then sleeps on the header's futex word
 * (FUTEX_WAIT, shared: the daemon wakes it from its own process), and hands each reply to its waiter: a
 * callback (asynchronous exchanges) or a condition (synchronous calls, which poll as long before they sleep).
 */
#include "config.h"

#include "cua_clock.h"
#include "cua_shm.h"
#include "cuac_transport.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct cuac_shm {
	int memfd, efd;
	unsigned char *map;
	size_t size;
	struct cua_shm_hdr *h;
	unsigned char *req, *rep;
	uint32_t ring, mask;
	pthread_mutex_t lock; /* guards below and the request ring's producer side */
	pthread_cond_t cond;  /* broadcast when a synchronous waiter is answered */
	uint32_t req_tail;
	uint64_t next_tag;
	bool failed; /* every waiter was failed: nothing more is sent */
	LIST_HEAD(, cuac_shm_wait) waiters;
	atomic_uint_fast64_t sent;
	atomic_int stop, lost;
	pthread_t reader;
	bool started;
	_Atomic uint64_t last_send; /* now_ns of the last request sent */
	_Atomic uint64_t spin;      /* how long the reader and a synchronous waiter poll (cua_shm_spin_ns) */
	atomic_bool quick;          /* replies usually come within CUA_SHM_SPIN_MAX_NS (worth waking the reader) */
	uint64_t wait_avg;          /* the reader's: moving average from a request to its reply (cua_shm_avg) */
	uint32_t rep_head;          /* the reader's */
	unsigned char *acc;         /* the reader's: a reply in pieces (CUA_SHM_MORE) */
	size_t acc_len, acc_cap;
};

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

static uint32_t
padded(size_t len)
{
	return (uint32_t)(sizeof(struct cua_shm_rec) + ((len + CUA_SHM_ALIGN - 1) & ~(size_t)(CUA_SHM_ALIGN - 1)));
}

static uint64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ waiters */

/* Answers w (removed from the list already; s->lock not held). */
static void
answer(struct cuac_shm *s, struct cuac_shm_wait *w, int status, const char *why, void *buf, size_t len)
{
	if (w->fn != NULL) {
		w->fn(w->arg, status, why, buf, len);
		return;
	}
	pthread_mutex_lock(&s->lock);
	w->status = status;
	snprintf(w->why, sizeof(w->why), "%s", why ? why : "");
	w->buf = buf;
	w->len = len;
	__atomic_store_n(&w->done, true, __ATOMIC_RELEASE); /* a polling waiter reads it without the lock */
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* Fails every waiter (reader thread); later sends are refused. */
static void
fail_all(struct cuac_shm *s, int status, const char *why)
{
	pthread_mutex_lock(&s->lock);
	s->failed = true;
	while (!LIST_EMPTY(&s->waiters)) {
		struct cuac_shm_wait *w = LIST_FIRST(&s->waiters);
		LIST_REMOVE(w, link);
		w->listed = false;
		pthread_mutex_unlock(&s->lock);
		answer(s, w, status, why, NULL, 0);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
}

static void
deliver(struct cuac_shm *s, uint64_t tag, void *buf, size_t len)
{
	struct cuac_shm_wait *w;
	pthread_mutex_lock(&s->lock);
	LIST_FOREACH(w, &s->waiters, link)
	if (w->tag == tag)
		break;
	if (w != NULL) {
		LIST_REMOVE(w, link);
		w->listed = false;
	}
	pthread_mutex_unlock(&s->lock);
	if (w == NULL) {
		free(buf); /* its waiter timed out */
		return;
	}
	answer(s, w, 0, NULL, buf, len);
}

/* ------------------------------------------------------------------ the reader */

static void
ring_read(const struct cuac_shm *s, uint32_t pos, void *dst, size_t len)
{
	size_t at = pos & s->mask, first = s->ring - at < len ? s->ring - at : len;
	memcpy(dst, s->rep + at, first);
	memcpy((unsigned char *)dst + first, s->rep, len - first);
}

/* Takes one record out of the reply ring (tail published past head). false: the ring is broken. */
static bool
take_record(struct cuac_shm *s, uint32_t tail)
{
	uint32_t avail = tail - s->rep_head;
	struct cua_shm_rec rec;
	if (avail > s->ring || avail < sizeof(rec))
		return false;
	ring_read(s, s->rep_head, &rec, sizeof(rec));
	if (rec.len == 0 || rec.len > avail - sizeof(rec) || padded(rec.len) > avail)
		return false;
	if (s->acc_len + rec.len > s->acc_cap) {
		/* doubled, not grown to fit: a 32 MiB reply comes in pieces of up to the ring's room, and growing to fit
		 * each copied the whole reply again per piece (quadratic: under ASan, whose realloc always moves, a
		 * client spent minutes on one copy's reply while its other calls waited behind it) */
		size_t cap = s->acc_cap ? 2 * s->acc_cap : 65536;
		if (cap < s->acc_len + rec.len)
			cap = s->acc_len + rec.len;
		unsigned char *p = realloc(s->acc, cap);
		if (p == NULL)
			return false;
		s->acc = p;
		s->acc_cap = cap;
	}
	ring_read(s, s->rep_head + (uint32_t)sizeof(rec), s->acc + s->acc_len, rec.len);
	s->acc_len += rec.len;
	s->rep_head += padded(rec.len);
	st(&s->h->rep_head, s->rep_head);
	if ((rec.flags & CUA_SHM_MORE) == 0) {
		void *buf = s->acc;
		size_t len = s->acc_len;
		s->acc = NULL;
		s->acc_len = s->acc_cap = 0;
		deliver(s, rec.tag, buf, len);
	}
	return true;
}

static void *
reader_main(void *arg)
{
	struct cuac_shm *s = arg;
	uint64_t last = now_ns();
	bool over = false;
	while (!atomic_load(&s->stop)) {
		uint32_t tail = ld(&s->h->rep_tail);
		if (!over && tail != s->rep_head) {
			uint64_t sent = atomic_load(&s->last_send);
			if (!take_record(s, tail)) {
				over = true;
				fail_all(s, CUA_EPROTOCOL, "cuasyncd's reply ring is broken; reconnect");
			}
			last = now_ns();
			if (sent != 0 && last > sent) { /* how long replies keep us waiting: the next poll's length */
				s->wait_avg = cua_shm_avg(s->wait_avg, last - sent);
				atomic_store(&s->spin, cua_shm_spin_ns(s->wait_avg));
				atomic_store(&s->quick, s->wait_avg * 2 <= CUA_SHM_SPIN_MAX_NS);
			}
			continue;
		}
		if (!over && (atomic_load(&s->lost) || ld(&s->h->closed) != 0)) {
			over = true;
			fail_all(s, CUA_ESESSION_LOST, CUAC_SESSION_LOST_WHY);
			continue;
		}
		/* poll after the last reply, and after a request whose reply is due (atomic_load(&s->last_send)) */
		uint64_t since = atomic_load(&s->last_send) > last ? atomic_load(&s->last_send) : last;
		if (!over && now_ns() - since < atomic_load(&s->spin)) {
			sched_yield();
			continue;
		}
		st(&s->h->client_waiting, 1);
		uint32_t v = ld(&s->h->rep_futex);
		if (ld(&s->h->rep_tail) == s->rep_head || over) {
			/* a timeout keeps a daemon that died without a word from leaving us asleep for good */
			struct timespec ts = {1, 0};
			if (!atomic_load(&s->stop))
				(void)syscall(SYS_futex, &s->h->rep_futex, FUTEX_WAIT, v, &ts, NULL, 0);
		}
		st(&s->h->client_waiting, 0);
		/* no spin after a wake-up that brought nothing (the 1 s timeout of an idle client): only a record
		 * taken (above) starts the next spin, so an idle waiter costs one futex call a second */
	}
	if (!over)
		fail_all(s, CUA_ECLOSED, "the connection to cuasyncd was closed");
	return NULL;
}

/* ------------------------------------------------------------------ open, send, close */

static void
shm_free(struct cuac_shm *s)
{
	if (s->map != NULL && s->map != MAP_FAILED)
		munmap(s->map, s->size);
	if (s->memfd >= 0)
		close(s->memfd);
	if (s->efd >= 0)
		close(s->efd);
	free(s->acc);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}

struct cuac_shm *
cuac_shm_create(int *memfd, int *efd)
{
	struct cuac_shm *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return NULL;
	s->memfd = s->efd = -1;
	pthread_mutex_init(&s->lock, NULL);
	cua_cond_init(&s->cond);
	LIST_INIT(&s->waiters);
	s->ring = CUA_SHM_RING_DEFAULT;
	atomic_init(&s->spin, CUA_SHM_SPIN_NS);
	atomic_init(&s->quick, true);
	s->mask = s->ring - 1;
	s->size = CUA_SHM_HDR_BYTES + 2u * (size_t)s->ring;
	s->memfd = memfd_create("cuasync-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->memfd < 0 || s->efd < 0 || ftruncate(s->memfd, (off_t)s->size) != 0 ||
	    fcntl(s->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
		goto fail;
	s->map = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, s->memfd, 0);
	if (s->map == MAP_FAILED)
		goto fail;
	s->h = (struct cua_shm_hdr *)s->map;
	s->h->magic = CUA_SHM_MAGIC;
	s->h->version = CUA_SHM_VERSION;
	s->h->ring_bytes = s->ring;
	s->req = s->map + CUA_SHM_HDR_BYTES;
	s->rep = s->req + s->ring;
	*memfd = s->memfd;
	*efd = s->efd;
	return s;
fail:
	shm_free(s);
	return NULL;
}

int
cuac_shm_start(struct cuac_shm *s)
{
	close(s->memfd); /* the mapping and the daemon's copy keep it */
	s->memfd = -1;
	if (pthread_create(&s->reader, NULL, reader_main, s) != 0) {
		st(&s->h->closed, CUA_ECLOSED);
		shm_free(s); /* the daemon serves a ring nobody writes until the session ends */
		return -1;
	}
	s->started = true;
	return 0;
}

bool
cuac_shm_send(struct cuac_shm *s, const void *body, size_t len, struct cuac_shm_wait *w)
{
	if (s == NULL || len == 0 || padded(len) > s->ring / 2)
		return false;
	pthread_mutex_lock(&s->lock);
	uint32_t used = s->req_tail - ld(&s->h->req_head);
	bool ok = !s->failed && !atomic_load(&s->lost) && ld(&s->h->closed) == 0 && used <= s->ring &&
		  s->ring - used >= padded(len);
	if (ok) {
		w->tag = ++s->next_tag;
		w->done = false;
		w->listed = true;
		LIST_INSERT_HEAD(&s->waiters, w, link);
		struct cua_shm_rec rec = {(uint32_t)len, 0, w->tag};
		size_t at = s->req_tail & s->mask; /* records start at multiples of 16: the header never wraps */
		memcpy(s->req + at, &rec, sizeof(rec));
		at = (at + sizeof(rec)) & s->mask;
		size_t first = s->ring - at < len ? s->ring - at : len;
		memcpy(s->req + at, body, first);
		memcpy(s->req, (const unsigned char *)body + first, len - first);
		s->req_tail += padded(len);
		st(&s->h->req_tail, s->req_tail);
		if (ld(&s->h->daemon_sleeping))
			(void)eventfd_write(s->efd, 1);
		atomic_fetch_add(&s->sent, 1);
		atomic_store(&s->last_send, now_ns());
	}
	pthread_mutex_unlock(&s->lock);
	/* For a synchronous caller whose reply usually comes soon, an asleep reader is woken now, while the daemon
	 * works, and polls for the reply (the spin) instead of waiting for the daemon's wake-up after it: the
	 * wake-up's latency hides behind the round trip. Asynchronous exchanges and slow replies leave it asleep. */
	if (ok && w->fn == NULL && atomic_load(&s->quick) && ld(&s->h->client_waiting)) {
		__atomic_fetch_add(&s->h->rep_futex, 1, __ATOMIC_SEQ_CST);
		(void)syscall(SYS_futex, &s->h->rep_futex, FUTEX_WAKE, 1, NULL, NULL, 0);
	}
	return ok;
}

bool
cuac_shm_wait_reply(struct cuac_shm *s, struct cuac_shm_wait *w, int timeout_ms)
{
	struct timespec until = cua_deadline_ts(timeout_ms < 0 ? 0 : (uint64_t)timeout_ms); /* s->cond: monotonic */
	/* poll as the reader does before sleeping on the condition: a reply due soon then costs no wake-up */
	uint64_t t0 = now_ns(), spin = atomic_load(&s->spin);
	while (!__atomic_load_n(&w->done, __ATOMIC_ACQUIRE) && now_ns() - t0 < spin)
		sched_yield();
	pthread_mutex_lock(&s->lock);
	int rv = 0;
	/* once the reader took w off the list its answer is on the way: wait for it whatever the time */
	while (!w->done && (rv != ETIMEDOUT || !w->listed))
		rv = timeout_ms < 0 || !w->listed ? pthread_cond_wait(&s->cond, &s->lock)
						  : pthread_cond_timedwait(&s->cond, &s->lock, &until);
	bool done = w->done;
	if (!done) {
		LIST_REMOVE(w, link);
		w->listed = false;
	}
	pthread_mutex_unlock(&s->lock);
	return done;
}

void
cuac_shm_lost(struct cuac_shm *s)
{
	if (s == NULL)
		return;
	atomic_store(&s->lost, 1);
	__atomic_fetch_add(&s->h->rep_futex, 1, __ATOMIC_SEQ_CST);
	(void)syscall(SYS_futex, &s->h->rep_futex, FUTEX_WAKE, 1, NULL, NULL, 0);
}

void
cuac_shm_close(struct cuac_shm *s)
{
	if (s == NULL)
		return;
	if (s->started) {
		atomic_store(&s->stop, 1);
		__atomic_fetch_add(&s->h->rep_futex, 1, __ATOMIC_SEQ_CST);
		(void)syscall(SYS_futex, &s->h->rep_futex, FUTEX_WAKE, 1, NULL, NULL, 0);
		pthread_join(s->reader, NULL);
	}
	shm_free(s);
}

uint64_t
cuac_shm_count(const struct cuac_shm *s)
{
	return s == NULL ? 0 : atomic_load(&s->sent);
}
