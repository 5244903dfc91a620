/* A fix for a hang in NNG 1.5.x that stops every later connection's cleanup (issue 22, point 4).
 *
 * NNG 1.5.2's ipc, tcp and tls transports re-submit a pipe's stream read (or the rest of a partial write) from
 * their completion callbacks without checking whether the pipe was closed in the meantime (ipc.c:359 and :403,
 * tcp.c and tls.c alike). When a client pipelines requests and goes away without reading the replies, the
 * reply's send fails and closes the pipe while its next read has just completed: the re-submit meets an aio
 * that nni_aio_close already stopped, nni_aio_begin refuses it (a_result = NNG_ECANCELED, no callback, ever:
 * aio.c:347-355), and the protocol's own receive aio stays queued forever. NNG's single reaper thread then
 * waits in rep0_pipe_stop for that aio, and no pipe, fd or endpoint closed after it is ever freed: sessions of
 * later clients are never cleaned up, descriptors leak, and nng_close hangs at shutdown (socket.c:773).
 *
 * Upstream fixed tcp only (a1bc737b, NNG 1.6.0); ipc and tls are unfixed in every 1.x release. The transports
 * call nng_stream_recv and nng_stream_send through the public symbol, so the daemon wraps those two: after the
 * real call, an aio that was refused (its result NNG_ECANCELED right after the submit, which only a refused
 * begin leaves there: every caller holds the mutex its callback takes first, so the operation cannot have run
 * to completion in between) is finished with NNG_ECLOSED. That runs the transport's callback, whose error path
 * fails the protocol's queued aio and frees the message; the reaper then goes on. With the shared libnng the
 * daemon's definition interposes on the library's calls (ELF symbol interposition; libnng 1.5.2 calls through
 * its PLT); with --enable-static-deps the link wraps them (-Wl,--wrap, see Makefile.am).
 *
 * metrics.c does its own stream I/O and handles a stopped aio itself: it calls cuad_stream_recv/send, which go
 * to NNG unchanged. The fix is on for NNG 1.5.x only, the release whose behaviour it was checked against. */
#include "config.h"

#include "nngfix.h"

#include <errno.h>
#include <nng/nng.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

typedef void (*stream_io_fn)(nng_stream *, nng_aio *);

#ifdef CUAD_NNG_WRAPPED
/* The static link: ld sends libnng.a's calls to the __wrap_ names and __real_ names to NNG's own. */
void __real_nng_stream_recv(nng_stream *s, nng_aio *aio);
void __real_nng_stream_send(nng_stream *s, nng_aio *aio);
void __wrap_nng_stream_recv(nng_stream *s, nng_aio *aio);
void __wrap_nng_stream_send(nng_stream *s, nng_aio *aio);
#define REAL_RECV __real_nng_stream_recv
#define REAL_SEND __real_nng_stream_send
#define FIXED_RECV __wrap_nng_stream_recv
#define FIXED_SEND __wrap_nng_stream_send
#else
/* The shared libnng: the executable's nng_stream_recv interposes on the library's own calls. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static stream_io_fn real_recv, real_send;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;

static void
find_real(void)
{
	real_recv = (stream_io_fn)(void (*)(void))dlsym(RTLD_NEXT, "nng_stream_recv");
	real_send = (stream_io_fn)(void (*)(void))dlsym(RTLD_NEXT, "nng_stream_send");
	if (real_recv == NULL || real_send == NULL) {
		fprintf(stderr, "cuasyncd: libnng's nng_stream_recv/nng_stream_send not found (%s)\n", dlerror());
		abort();
	}
}

static void
real_recv_call(nng_stream *s, nng_aio *aio)
{
	pthread_once(&real_once, find_real);
	real_recv(s, aio);
}

static void
real_send_call(nng_stream *s, nng_aio *aio)
{
	pthread_once(&real_once, find_real);
	real_send(s, aio);
}
#define REAL_RECV real_recv_call
#define REAL_SEND real_send_call
#define FIXED_RECV nng_stream_recv
#define FIXED_SEND nng_stream_send
#endif

/* Whether the running NNG is a 1.5 release (the behaviour this fix was checked against; 1.6+ and 2.x differ). */
static bool
fix_applies(void)
{
	static int applies = -1; /* a benign race: every thread computes the same answer */
	if (applies < 0)
		applies = strncmp(nng_version(), "1.5.", 4) == 0;
	return applies != 0;
}

static void
finish_if_refused(nng_aio *aio)
{
	if (nng_aio_result(aio) == NNG_ECANCELED && fix_applies())
		nng_aio_finish(aio, NNG_ECLOSED);
}

void FIXED_RECV(nng_stream *s, nng_aio *aio);
void FIXED_SEND(nng_stream *s, nng_aio *aio);

void
FIXED_RECV(nng_stream *s, nng_aio *aio)
{
	REAL_RECV(s, aio);
	finish_if_refused(aio);
}

void
FIXED_SEND(nng_stream *s, nng_aio *aio)
{
	REAL_SEND(s, aio);
	finish_if_refused(aio);
}

void
cuad_stream_recv(nng_stream *s, nng_aio *aio)
{
	REAL_RECV(s, aio);
}

void
cuad_stream_send(nng_stream *s, nng_aio *aio)
{
	REAL_SEND(s, aio);
}

/*
 * A second fix: NNG 1.5.2's listeners stop accepting for good when a peer hangs up during the SP handshake
 * (upstream #1518, fixed in 1.6.0 by 6d93083c, in ipc.c and tls.c; tcp.c of 1.5.2 has the same code). The
 * transport writes its 8-byte SP header first; when the peer already closed its end, sendmsg fails with EPIPE,
 * which NNG maps to NNG_ECLOSED (posix_debug.c); the negotiation's error path hands that status to the
 * listener's pending accept (ep->user_aio), and the listener reads NNG_ECLOSED as "I was closed" and never
 * accepts again (listener.c, listener_accept_cb). Any local client can do that by connecting and hanging up at
 * once — NNG's own dialer does it when its socket is closed while it redials a connection the daemon just closed
 * (a client whose shared-memory channel broke a rule, test_shm_hostile). The listener watchdog (edge-listen.c)
 * then had to restart the listener, which closes every connection of it, well-behaved clients' too.
 *
 * The daemon's sendmsg reports a peer that hung up as ECONNRESET instead, for libnng's calls only: NNG maps that
 * to NNG_ECONNRESET, the status the listener treats as a remote condition (it accepts the next connection at
 * once), and everywhere else in NNG both statuses end the pipe alike. The daemon's own sendmsg calls (fdchan.c)
 * see EPIPE as before on a shared libnng; on a static link (--wrap) every caller sees ECONNRESET, which the
 * daemon treats as EPIPE (a peer gone) everywhere.
 */
#ifdef CUAD_NNG_WRAPPED
ssize_t __real_sendmsg(int fd, const struct msghdr *msg, int flags);
ssize_t __wrap_sendmsg(int fd, const struct msghdr *msg, int flags);

ssize_t
__wrap_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	ssize_t n = __real_sendmsg(fd, msg, flags);
	if (n < 0 && errno == EPIPE && fix_applies())
		errno = ECONNRESET;
	return n;
}
#else
typedef ssize_t (*sendmsg_fn)(int, const struct msghdr *, int);
static sendmsg_fn real_sendmsg;
static const void *nng_base; /* where libnng is mapped (dladdr's dli_fbase) */
static pthread_once_t sendmsg_once = PTHREAD_ONCE_INIT;

static void
find_sendmsg(void)
{
	Dl_info info;
	real_sendmsg = (sendmsg_fn)(void (*)(void))dlsym(RTLD_NEXT, "sendmsg");
	pthread_once(&real_once, find_real);
	if (dladdr((const void *)(void (*)(void))real_send, &info) != 0)
		nng_base = info.dli_fbase;
	if (real_sendmsg == NULL) {
		fprintf(stderr, "cuasyncd: libc's sendmsg not found (%s)\n", dlerror());
		abort();
	}
}

/* Whether the code at return address ra is libnng's. */
static bool
from_nng(const void *ra)
{
	Dl_info info;
	return nng_base != NULL && dladdr(ra, &info) != 0 && info.dli_fbase == nng_base;
}

ssize_t
sendmsg(int fd, const struct msghdr *msg, int flags)
{
	pthread_once(&sendmsg_once, find_sendmsg);
	ssize_t n = real_sendmsg(fd, msg, flags);
	if (n < 0 && errno == EPIPE) {
		int e = errno;
		bool nng = fix_applies() && from_nng(__builtin_return_address(0));
		errno = nng ? ECONNRESET : e;
	}
	return n;
}
#endif
