/*
 * submit.c — the worker's submit threads (--submit-threads N > 1): one thread's cuLaunchKernel rate is the
 * ceiling otherwise (docs/ARCHITECTURE.md). Thread k owns the streams sid % N and issues everything on them, so a stream's
 * work is issued by one thread in the order the main thread handed it over.
 *
 * Queues: the main thread fills one batch per thread while it decodes a record (prepared commands, their bytes
 * copied, then the notices; see core.h), and hands every non-empty batch over at the end of the record: one lock
 * per thread per record. A thread takes all its handed-over batches at once, issues them in order and returns
 * the emptied batches (their memory kept) to its free list, from which the main thread takes the next. Room is
 * reserved when an operation is appended, notices included, so handing over never allocates: once a command is
 * dispatched, its notice cannot be lost.
 */
#include "config.h"

#include "core.h"

#include "cua_clock.h"
#include "cua_log.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

/* One entry of a batch; a command's bytes (size, a multiple of 8) follow it. size == 0: a notice. */
struct sub_ent {
	struct wk_tag tag;
	void *host;
	uint32_t sid;
	uint32_t size;
};

struct sub_batch {
	TAILQ_ENTRY(sub_batch) link;
	unsigned char *p;
	size_t len, cap;
};
TAILQ_HEAD(sub_batches, sub_batch);

struct sub_thread {
	struct wksub *S;
	pthread_t tid;
	pthread_mutex_t lock;        /* the fields below up to `cur` */
	pthread_cond_t work;         /* batches handed over, or stop */
	pthread_cond_t done;         /* issued moved and a drainer waits */
	struct sub_batches inbox;    /* handed over, not yet taken */
	struct sub_batches free;     /* emptied, memory kept */
	uint64_t pushed, issued;     /* batches handed over; of those, issued */
	atomic_uint_fast64_t handed; /* pushed, readable without the lock (the idle spin) */
	bool sleeping, stop;         /* waits on work; asked to finish */
	unsigned drainers;           /* main waits on done */
	struct sub_batch *cur;       /* main only: the batch being filled (NULL: none yet) */
	size_t owed;                 /* main only: notices reserved in cur and not yet appended */
};

struct wksub {
	struct wk *w;
	const struct wksub_ops *ops;
	unsigned n;
	struct sub_thread *t;
};

/* Runs one batch in order. Submit thread. */
static void
run_batch(struct wksub *S, const struct sub_batch *b)
{
	size_t off = 0;
	while (off < b->len) {
		const struct sub_ent *e = (const struct sub_ent *)(b->p + off);
		if (e->size == 0) {
			S->ops->notice(S->w, e->sid, e->tag);
		} else {
			struct wk_op op = {e->tag, e->sid, e->host, (const struct wrec_hdr *)(e + 1)};
			S->ops->issue(S->w, &op); /* a failure goes to its command's outcome */
		}
		off += sizeof(*e) + e->size;
	}
}

/*
 * Before sleeping, a submit thread that just ran out of work watches for the next batch for SPIN_NS: a sleeping
 * thread costs the next request a wake-up (tens of microseconds on a host in deep idle states), which a client
 * waiting for each launch pays every time (sync launch + completion was ~135 µs p50 with one issuing thread,
 * ~180-210 µs with the hand-off to a sleeping thread; BENCHMARKS.md). A thread busy issuing never spins; an
 * idle worker spins once per burst, at most SPIN_NS per thread.
 */
#define SPIN_NS 50000

/* Waits up to SPIN_NS, without the lock, for a batch past `seen` to be handed over. Submit thread. */
static void
spin_for_work(struct sub_thread *T, uint64_t seen)
{
	uint64_t end = cua_now_ns() + SPIN_NS;
	for (unsigned i = 1;; i++) {
		if (atomic_load_explicit(&T->handed, memory_order_acquire) != seen)
			return;
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
		if (i % 64 == 0 && cua_now_ns() >= end)
			return;
	}
}

/* A submit thread: takes every handed-over batch, issues them, returns them emptied; until stopped with none. */
static void *
sub_main(void *arg)
{
	struct sub_thread *T = arg;
	struct wksub *S = T->S;
	char name[16];
	snprintf(name, sizeof(name), "cuaw-submit%u", (unsigned)(T - S->t));
	pthread_setname_np(pthread_self(), name);
	if (S->w->be->thread_init)
		S->w->be->thread_init(S->w);
	struct sub_batches mine;
	TAILQ_INIT(&mine);
	pthread_mutex_lock(&T->lock);
	for (;;) {
		if (TAILQ_EMPTY(&T->inbox) && !T->stop) {
			uint64_t seen = T->pushed;
			pthread_mutex_unlock(&T->lock);
			spin_for_work(T, seen);
			pthread_mutex_lock(&T->lock);
		}
		while (TAILQ_EMPTY(&T->inbox) && !T->stop) {
			T->sleeping = true;
			pthread_cond_wait(&T->work, &T->lock);
			T->sleeping = false;
		}
		if (TAILQ_EMPTY(&T->inbox))
			break;
		TAILQ_CONCAT(&mine, &T->inbox, link);
		uint64_t upto = T->pushed;
		pthread_mutex_unlock(&T->lock);
		struct sub_batch *b;
		TAILQ_FOREACH(b, &mine, link)
		{
			run_batch(S, b);
			b->len = 0;
		}
		pthread_mutex_lock(&T->lock);
		TAILQ_CONCAT(&T->free, &mine, link);
		T->issued = upto;
		if (T->drainers)
			pthread_cond_broadcast(&T->done);
	}
	pthread_mutex_unlock(&T->lock);
	return NULL;
}

static void
batches_free(struct sub_batches *l)
{
	struct sub_batch *b;
	while ((b = TAILQ_FIRST(l)) != NULL) {
		TAILQ_REMOVE(l, b, link);
		free(b->p);
		free(b);
	}
}

struct wksub *
wksub_start(struct wk *w, unsigned n, const struct wksub_ops *ops)
{
	struct wksub *S = calloc(1, sizeof(*S));
	if (S == NULL || (S->t = calloc(n, sizeof(*S->t))) == NULL) {
		free(S);
		log_warn("no memory for %u submit threads; the command loop issues everything", n);
		return NULL;
	}
	*S = (struct wksub){w, ops, 0, S->t};
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* signals stay with the main thread */
	for (; S->n < n; S->n++) {
		struct sub_thread *T = &S->t[S->n];
		T->S = S;
		pthread_mutex_init(&T->lock, NULL);
		pthread_cond_init(&T->work, NULL);
		pthread_cond_init(&T->done, NULL);
		TAILQ_INIT(&T->inbox);
		TAILQ_INIT(&T->free);
		int rc = pthread_create(&T->tid, NULL, sub_main, T);
		if (rc != 0) {
			log_warn("cannot start submit thread %u of %u: %s", S->n + 1, n, strerror(rc));
			pthread_mutex_destroy(&T->lock);
			pthread_cond_destroy(&T->work);
			pthread_cond_destroy(&T->done);
			break;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (S->n < 2) {
		wksub_stop(S);
		return NULL;
	}
	return S;
}

void
wksub_stop(struct wksub *S)
{
	if (S == NULL)
		return;
	wksub_push(S, false);
	for (unsigned k = 0; k < S->n; k++) {
		struct sub_thread *T = &S->t[k];
		pthread_mutex_lock(&T->lock);
		T->stop = true;
		pthread_cond_signal(&T->work);
		pthread_mutex_unlock(&T->lock);
		pthread_join(T->tid, NULL);
		batches_free(&T->free);
		batches_free(&T->inbox); /* empty: a thread stops only with nothing handed over */
		if (T->cur) {
			free(T->cur->p);
			free(T->cur);
		}
		pthread_mutex_destroy(&T->lock);
		pthread_cond_destroy(&T->work);
		pthread_cond_destroy(&T->done);
	}
	free(S->t);
	free(S);
}

unsigned
wksub_owner(const struct wksub *S, uint32_t sid)
{
	return sid % S->n;
}

/* Room for `more` bytes after what thread T's current batch holds and owes. 0 or CUA_ENOMEM. Main thread. */
static int
reserve(struct sub_thread *T, size_t more)
{
	if (T->cur == NULL) {
		pthread_mutex_lock(&T->lock);
		T->cur = TAILQ_FIRST(&T->free);
		if (T->cur)
			TAILQ_REMOVE(&T->free, T->cur, link);
		pthread_mutex_unlock(&T->lock);
		if (T->cur == NULL && (T->cur = calloc(1, sizeof(*T->cur))) == NULL)
			return CUA_ENOMEM;
	}
	struct sub_batch *b = T->cur;
	size_t need = b->len + T->owed * sizeof(struct sub_ent) + more;
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < need)
		cap *= 2;
	unsigned char *p = realloc(b->p, cap);
	if (p == NULL)
		return CUA_ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

int
wksub_op(struct wksub *S, const struct wk_op *op, unsigned notices)
{
	struct sub_thread *T = &S->t[wksub_owner(S, op->sid)];
	uint32_t size = op->c ? op->c->size : 0;
	if (reserve(T, (op->c ? sizeof(struct sub_ent) + size : 0) + notices * sizeof(struct sub_ent)) != 0)
		return CUA_ENOMEM;
	T->owed += notices;
	if (op->c == NULL)
		return 0;
	struct sub_batch *b = T->cur;
	struct sub_ent e = {op->tag, op->host, op->sid, size};
	memcpy(b->p + b->len, &e, sizeof(e));
	memcpy(b->p + b->len + sizeof(e), op->c, size);
	b->len += sizeof(e) + size;
	return 0;
}

void
wksub_notice(struct wksub *S, uint32_t sid, struct wk_tag tag)
{
	struct sub_thread *T = &S->t[wksub_owner(S, sid)];
	if (T->cur == NULL || T->owed == 0) {
		log_error("internal: a notice on stream %u without reserved room", sid);
		abort(); /* a bug: the request would never complete */
	}
	struct sub_ent e = {tag, NULL, sid, 0};
	memcpy(T->cur->p + T->cur->len, &e, sizeof(e));
	T->cur->len += sizeof(e);
	T->owed--;
}

/* The largest batch the main thread issues itself (wksub_push): a launch with its arguments and a notice. */
#define HERE_MAX 1024u

/* Whether batch b holds only notices and commands whose issuer returns at once without holds of its own
 * (launches and copies: what the command loop issues itself with --submit-threads 1 too). */
static bool
quick_batch(const struct sub_batch *b)
{
	for (size_t off = 0; off < b->len;) {
		const struct sub_ent *e = (const struct sub_ent *)(b->p + off);
		if (e->size != 0) {
			switch (((const struct wrec_hdr *)(e + 1))->op) {
			case WR_LAUNCH:
			case WR_HTOD:
			case WR_DTOH:
			case WR_DTOD:
			case WR_MEMSET: break;
			default: return false;
			}
		}
		off += sizeof(*e) + e->size;
	}
	return true;
}

/* The one thread with a non-empty batch, when that batch is small and quick and the thread has issued all it
 * was handed (so nothing of its streams is in flight on it); else NULL. Main thread. */
static struct sub_thread *
lone_idle(struct wksub *S)
{
	struct sub_thread *one = NULL;
	for (unsigned k = 0; k < S->n; k++) {
		struct sub_thread *T = &S->t[k];
		if (T->cur == NULL || T->cur->len == 0)
			continue;
		if (one != NULL || T->cur->len > HERE_MAX)
			return NULL;
		one = T;
	}
	if (one == NULL || !quick_batch(one->cur))
		return NULL;
	pthread_mutex_lock(&one->lock);
	bool idle = TAILQ_EMPTY(&one->inbox) && one->issued == one->pushed;
	pthread_mutex_unlock(&one->lock); /* it stays idle: only this thread hands it work */
	return idle ? one : NULL;
}

void
wksub_push(struct wksub *S, bool here)
{
	struct sub_thread *T1 = here ? lone_idle(S) : NULL;
	if (T1 != NULL) {
		/* in stream order: its thread issued everything before, under the lock taken above */
		run_batch(S, T1->cur);
		T1->cur->len = 0; /* kept as the next batch */
		T1->owed = 0;
		return;
	}
	for (unsigned k = 0; k < S->n; k++) {
		struct sub_thread *T = &S->t[k];
		if (T->cur == NULL || T->cur->len == 0)
			continue;
		pthread_mutex_lock(&T->lock);
		TAILQ_INSERT_TAIL(&T->inbox, T->cur, link); /* transferred */
		T->pushed++;
		atomic_store_explicit(&T->handed, T->pushed, memory_order_release);
		if (T->sleeping)
			pthread_cond_signal(&T->work);
		pthread_mutex_unlock(&T->lock);
		T->cur = NULL;
		T->owed = 0; /* every owed notice was appended before pushing (streams.c, wk_flush) */
	}
}

void
wksub_drain(struct wksub *S, int k)
{
	for (unsigned i = 0; i < S->n; i++) {
		if (k >= 0 && (unsigned)k != i)
			continue;
		struct sub_thread *T = &S->t[i];
		pthread_mutex_lock(&T->lock);
		T->drainers++;
		while (T->issued < T->pushed)
			pthread_cond_wait(&T->done, &T->lock);
		T->drainers--;
		pthread_mutex_unlock(&T->lock);
	}
}
