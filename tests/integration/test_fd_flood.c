/*
 * test_fd_flood.c — descriptor exhaustion from the network (issue 22, point 5), with the real daemon.
 *
 * A flood of TCP connections to the tls+tcp:// listener that never start their TLS handshake, more than the
 * daemon has descriptors for (its limit is lowered to 200 above what it uses, with prlimit(2)), beside a local
 * ipc:// client and a remote client holding a token. Both must be served while the flood is there (they
 * complete; nothing is timed), every flood connection must be closed by the daemon (--handshake-timeout, or
 * the reserve kept for local clients), and the ipc listener must still be there, its socket file and all.
 */
#define _GNU_SOURCE
#include "config.h"

#include "harness.h"
#include "rawsp.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define FLOOD 400
#define TOKEN "flood-test-token-0123456789abcdef"

static struct daemon D;
static char tmp[64], tls_url[64];
static int port;

static bool
make_certs(void)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd),
		 "cd %s && k='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes' && "
		 "openssl req -x509 $k -keyout ca.key -out ca.crt -days 2 -subj /CN=ca >openssl.log 2>&1 && "
		 "openssl req $k -keyout server.key -out server.csr -subj /CN=127.0.0.1 >>openssl.log 2>&1 && "
		 "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -out server.crt "
		 ">>openssl.log 2>&1 && cat server.crt server.key > server.pem && printf 'remote:%s\\n' > tokens && "
		 "chmod 0600 tokens",
		 tmp, TOKEN);
	return system("openssl version >/dev/null 2>&1") == 0 && system(cmd) == 0;
}

/* A TCP connection to 127.0.0.1:port begun without waiting (the backlog may be full): its descriptor. */
static int
flood_one(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	ck_assert_int_ge(fd, 0);
	int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	ck_assert_msg(r == 0 || errno == EINPROGRESS, "connect: %m");
	return fd;
}

static bool poked[FLOOD];

/* Closes (and marks -1) the descriptors of fds whose peer closed them; how many are still open.
 *
 * Each connection, once connected, sends one byte: the first of a TLS record, a handshake begun and never
 * finished. Besides, it is how a connection learns that the daemon's side never existed: when the listen
 * backlog is full, Linux drops the handshake's last ACK and later the half-made connection, and a client that
 * never sends stays ESTABLISHED forever; one that sends gets a reset. */
static unsigned
sweep(int *fds, int n)
{
	unsigned left = 0;
	for (int i = 0; i < n; i++) {
		if (fds[i] < 0)
			continue;
		if (!poked[i] && send(fds[i], "\x16", 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
			poked[i] = true;
		if (raw_fd_closed(fds[i], 0)) {
			close(fds[i]);
			fds[i] = -1;
		} else {
			left++;
		}
	}
	return left;
}

/* Waits until the daemon closes one more of fds, at most ms; how many are still open. */
static unsigned
wait_any_closed(int *fds, int n, int ms)
{
	struct pollfd p[FLOOD];
	nfds_t k = 0;
	sweep(fds, n);
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			p[k++] = (struct pollfd){fds[i], POLLRDHUP, 0};
	poll(p, k, ms);
	return sweep(fds, n);
}

START_TEST(a_half_open_flood_does_not_starve_local_or_token_clients)
{
	snprintf(tmp, sizeof(tmp), "/tmp/cuasync-flood.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	if (!make_certs()) {
		fprintf(stderr, "SKIP: no openssl to make certificates (see %s)\n", tmp);
		return;
	}
	port = 20000 + (int)((getpid() + 13) % 20000);
	snprintf(tls_url, sizeof(tls_url), "tls+tcp://127.0.0.1:%d", port);
	char pem[128], tokens[128], ca[128];
	snprintf(pem, sizeof(pem), "%s/server.pem", tmp);
	snprintf(tokens, sizeof(tokens), "%s/tokens", tmp);
	snprintf(ca, sizeof(ca), "%s/ca.crt", tmp);
	const char *args[] = {"--listen",
			      tls_url,
			      "--tls-cert",
			      pem,
			      "--token-file",
			      tokens,
			      "--handshake-timeout",
			      "3",
			      "--handshake-max",
			      "100000",
			      "--fd-reserve",
			      "32",
			      NULL};
	daemon_start(&D, args);
	ck_assert(file_has(D.log, "descriptor limit"));

	/* the daemon gets 200 descriptors more than it uses now: the flood is twice that */
	int base = proc_fd_count(D.pid);
	ck_assert_int_gt(base, 0);
	struct rlimit rl = {(rlim_t)base + 200, (rlim_t)base + 200};
	ck_assert_msg(prlimit(D.pid, RLIMIT_NOFILE, &rl, NULL) == 0, "prlimit: %m");

	int flood[FLOOD];
	for (int i = 0; i < FLOOD; i++)
		flood[i] = flood_one();

	/* a local client is served meanwhile */
	cua_client *local = connect_to(&D);
	cua_deviceptr p;
	CK(cua_mem_alloc(local, 0, 4096, &p));
	CK(cua_ping(local));

	/* and a remote one with its token */
	setenv("CUASYNC_TOKEN", TOKEN, 1);
	setenv("CUASYNC_TLS_CA", ca, 1);
	cua_client *remote = NULL;
	int rc = CUA_ETIMEOUT;
	/* refused or reset while the daemon is short of descriptors: again once it closed some of the flood
	 * (bounded: 120 tries) */
	for (int tries = 0; tries < 120 && (rc = cua_connect(tls_url, &remote)) != CUA_OK; tries++)
		wait_any_closed(flood, FLOOD, 1000);
	ck_assert_msg(rc == CUA_OK, "remote connect: %s: %s (see %s)", cua_strerror_name(rc), cua_last_error(), D.log);
	CK(cua_ping(remote));
	unsetenv("CUASYNC_TOKEN");
	unsetenv("CUASYNC_TLS_CA");

	/* every flood connection is closed by the daemon, shut down by the guard once accepted (bounded: 300 rounds
	 * of at most 1 s; a SYN the kernel dropped while the backlog was full is sent again within about a minute) */
	unsigned open_left = sweep(flood, FLOOD);
	for (int round = 0; round < 300 && open_left > 0; round++)
		open_left = wait_any_closed(flood, FLOOD, 1000);
	ck_assert_msg(open_left == 0, "%u of %d flood connections still open (see %s)", open_left, FLOOD, D.log);
	ck_assert_msg(file_has(D.log, "closed the connection from 127.0.0.1:"), "no closing logged (see %s)", D.log);

	/* the ipc listener is still there and serves a new client */
	struct stat st;
	ck_assert_int_eq(stat(D.url + 6, &st), 0);
	cua_client *again = connect_to(&D);
	CK(cua_ping(again));
	CK(cua_ping(local));
	cua_disconnect(again);
	cua_disconnect(remote);
	cua_disconnect(local);
	daemon_stop(&D);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("fd_flood");
	TCase *tc = tcase_create("fd_flood");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, a_half_open_flood_does_not_starve_local_or_token_clients);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
