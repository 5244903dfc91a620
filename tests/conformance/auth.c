/*
 * auth.c — the conformance cases of PROTOCOL.md §2's credentials and identities: [R:auth-first],
 * [R:hello-token], [R:operator-identity]. Each starts a daemon of its own with a token file.
 */
#include "config.h"

#include "auth.h"
#include "rules.h"

#include <arpa/inet.h>
#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TOKEN "conformance-token-0123456789abcdef"
#define OTHER "conformance-token-0123456789abcdeX" /* differs in the last byte only */

/* A loopback port nobody listens on (bound and released). */
static int
some_port(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &len), 0);
	close(s);
	return ntohs(a.sin_port);
}

/* Writes a token file (mode 0600) naming TOKEN "conf" into path (a fresh temporary file). */
static void
token_file(char *path, size_t len)
{
	snprintf(path, len, "/tmp/cuasync-conf-tokens.XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	static const char text[] = "# conformance\nconf:" TOKEN "\n";
	ck_assert_int_eq(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
	close(fd);
}

/* HELLO [1, 1, "conf", pid, token] on seq 0, asserting status; the reply's message in msg when not NULL. */
static void
hello_with(struct conn *c, const char *token, uint64_t status, char *msg, size_t len)
{
	struct reply r;
	expect(c, OP_HELLO, 0, status, &r, "[uusus]", U(1), U(1), "conf", U(getpid()), token);
	if (msg)
		snprintf(msg, len, "%s", r.msg);
	reply_free(&r);
}

/* The daemon's log holds no token. */
static void
log_has_no_token(const struct dmn *d)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "grep -q -e '%s' -e '%s' %s", TOKEN, OTHER, d->log);
	ck_assert_msg(system(cmd) != 0, "a token is in the daemon's log %s", d->log);
}

/* With --token-file, a tcp:// connection gets UNAUTHENTICATED for everything, PING included, until a HELLO
 * with a valid token succeeded; a HELLO without one or with a wrong one leaves it so. */
START_TEST(r_auth_first)
{
	char tokens[64], tcp[64], msg[1024];
	token_file(tokens, sizeof(tokens));
	snprintf(tcp, sizeof(tcp), "tcp://127.0.0.1:%d", some_port());
	struct dmn d;
	dmn_start(&d, (const char *const[]){"--listen", tcp, "--allow-insecure-tcp", "--token-file", tokens, NULL});
	struct conn c;
	conn_open(&c, tcp);
	expect(&c, OP_PING, 0, ST_UNAUTHENTICATED, NULL, "[u]", U(1));
	expect(&c, OP_DEVICES, 0, ST_UNAUTHENTICATED, NULL, "[]");
	expect(&c, OP_MEM_ALLOC, 1, ST_UNAUTHENTICATED, NULL, "[uu]", U(0), U(64)); /* uses up seq 1 */
	hello_with(&c, "", ST_UNAUTHENTICATED, msg, sizeof(msg));
	ck_assert_msg(strstr(msg, "token"), "%s", msg);
	hello_with(&c, OTHER, ST_UNAUTHENTICATED, NULL, 0);
	expect(&c, OP_STATUS, 0, ST_UNAUTHENTICATED, NULL, "[]");
	hello_with(&c, TOKEN, ST_OK, NULL, 0);
	expect(&c, OP_PING, 0, ST_OK, NULL, "[u]", U(2));
	expect(&c, OP_MEM_ALLOC, 2, ST_OK, NULL, "[uu]", U(0), U(64));
	conn_close(&c);
	sess(&c, &d); /* on ipc:// the kernel vouches: no token needed */
	expect(&c, OP_DEVICES, 0, ST_OK, NULL, "[]");
	conn_close(&c);
	log_has_no_token(&d);
	dmn_stop(&d);
	unlink(tokens);
}
END_TEST

/* A token that is sent is checked on every listener: a wrong one is UNAUTHENTICATED (its message without the
 * token), and so is any token for a daemon without --token-file. */
START_TEST(r_hello_token)
{
	char tokens[64], msg[1024];
	token_file(tokens, sizeof(tokens));
	struct dmn d;
	dmn_start(&d, (const char *const[]){"--token-file", tokens, NULL});
	struct conn c;
	conn_open(&c, d.url);
	hello_with(&c, OTHER, ST_UNAUTHENTICATED, msg, sizeof(msg));
	ck_assert_msg(strstr(msg, OTHER) == NULL, "the message repeats the token: %s", msg);
	hello_with(&c, TOKEN, ST_OK, NULL, 0);
	expect(&c, OP_DEVICES, 0, ST_OK, NULL, "[]");
	conn_close(&c);
	log_has_no_token(&d);
	dmn_stop(&d);
	unlink(tokens);
	dmn_start(&d, NULL); /* no --token-file */
	conn_open(&c, d.url);
	hello_with(&c, TOKEN, ST_UNAUTHENTICATED, NULL, 0);
	hello_with(&c, "", ST_OK, NULL, 0);
	conn_close(&c);
	dmn_stop(&d);
}
END_TEST

/* The operator endpoint serves the daemon's own uid (this test's); another uid gets PERMISSION_DENIED for
 * every request there, HELLO included, and is served on the client socket. The other uid needs root. */
START_TEST(r_operator_identity)
{
	struct dmn d;
	dmn_start(&d, (const char *const[]){"--ipc-mode", "0666", "--operator-mode", "0666", NULL});
	ck_assert_int_eq(chmod(d.dir, 0711), 0);
	if (geteuid() != 0) {
		printf("not root: the other-uid half of operator-identity is skipped\n");
	} else {
		pid_t pid = fork(); /* before this process uses NNG: not fork-safe after */
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			if (setgid(65534) != 0 || setuid(65534) != 0)
				_exit(3);
			struct conn c;
			conn_open(&c, d.op_url);
			hello_with(&c, "", ST_PERMISSION_DENIED, NULL, 0);
			expect(&c, OP_STATUS, 0, ST_PERMISSION_DENIED, NULL, "[]");
			expect(&c, OP_PING, 0, ST_PERMISSION_DENIED, NULL, "[u]", U(1));
			conn_close(&c);
			sess(&c, &d); /* the client socket serves it */
			expect(&c, OP_STATUS, 0, ST_OK, NULL, "[]");
			conn_close(&c);
			_exit(0);
		}
		int st;
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the uid 65534 half failed (0x%x)", st);
	}
	struct conn op;
	sess_operator(&op, &d);
	expect(&op, OP_STATUS, 0, ST_OK, NULL, "[]");
	conn_close(&op);
	dmn_stop(&d);
}
END_TEST

const TTest *
conf_auth_first(void)
{
	return r_auth_first;
}

const TTest *
conf_hello_token(void)
{
	return r_hello_token;
}

const TTest *
conf_operator_identity(void)
{
	return r_operator_identity;
}
