/*
 * test_auth.c — identities and credentials against the real daemon (issue 12): the kernel's credentials of
 * ipc:// peers in the log, plain tcp:// refused unless allowed, mutual TLS with certificates made here by the
 * openssl CLI, bearer tokens through libcuasync's $CUASYNC_TOKEN, a token file others can read refused, and the
 * operator endpoint for operators only (another uid needs root: the test then says it skipped that half).
 */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TOKEN "alice-0123456789abcdef0123456789abcdef"
#define WRONG "alice-0123456789abcdef0123456789abcdeX"

static struct daemon D;
static char tmp[64]; /* this case's files: certificates, token files */

static void
mk_tmp(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/cuasync-auth.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
}

static void
rm_tmp(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmp);
}

static void
down(void)
{
	daemon_stop(&D);
	rm_tmp();
	unsetenv("CUASYNC_TOKEN");
	unsetenv("CUASYNC_TOKEN_FILE");
	unsetenv("CUASYNC_TLS_CA");
	unsetenv("CUASYNC_TLS_CERT");
	unsetenv("CUASYNC_TIMEOUT_MS");
}

/* Runs cuasyncd with args, expecting it to refuse to start: its exit status (non-zero), its stderr in err. */
static void
start_refused(const char *const *args, char *err, size_t len)
{
	char exe[512], out[128];
	snprintf(exe, sizeof(exe), "%s/daemon/cuasyncd", builddir());
	snprintf(out, sizeof(out), "%s/refused.log", tmp);
	const char *argv[32] = {exe, "--backend", "emu"};
	int n = 3;
	for (int i = 0; args[i] && n < 31; i++)
		argv[n++] = args[i];
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, STDERR_FILENO);
		execv(exe, (char *const *)argv);
		_exit(127);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid); /* it stops by itself: before any worker or listener */
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 127, "cuasyncd started (0x%x)", st);
	FILE *f = fopen(out, "r");
	ck_assert_ptr_nonnull(f);
	size_t got = fread(err, 1, len - 1, f);
	err[got] = '\0';
	fclose(f);
}

/* ------------------------------------------------------------------ ipc:// identities, plain tcp:// */

static void
up(void)
{
	mk_tmp();
	daemon_start(&D, NULL);
}

/* The hello log line names the kernel's uid, gid and pid of the peer, not what the client says. */
START_TEST(ipc_peer_credentials_are_logged)
{
	cua_client *c = connect_to(&D);
	char want[128];
	snprintf(want, sizeof(want), "over ipc uid %u gid %u pid %d", (unsigned)getuid(), (unsigned)getgid(),
		 (int)getpid());
	ck_assert_msg(file_has(D.log, want), "no '%s' in %s", want, D.log);
	cua_daemon_status st;
	CK(cua_status(c, &st));
	ck_assert_uint_eq(st.insecure_listeners, 0);
	cua_disconnect(c);
}
END_TEST

START_TEST(plain_tcp_is_refused_without_the_flag)
{
	char err[4096];
	start_refused((const char *const[]){"--listen", "tcp://127.0.0.1:0", NULL}, err, sizeof(err));
	ck_assert_msg(strstr(err, "--allow-insecure-tcp") && strstr(err, "tls+tcp://"), "%s", err);
}
END_TEST

static char tcp_url[64];

static void
up_tcp(void)
{
	mk_tmp();
	snprintf(tcp_url, sizeof(tcp_url), "tcp://127.0.0.1:%d", 20000 + (int)((getpid() + 3) % 20000));
	daemon_start(&D, (const char *const[]){"--listen", tcp_url, "--allow-insecure-tcp", NULL});
}

START_TEST(insecure_tcp_is_allowed_with_a_warning)
{
	ck_assert_msg(file_has(D.log, "plain tcp:// allowed by --allow-insecure-tcp"), "no warning in %s", D.log);
	cua_client *c;
	CK(cua_connect(tcp_url, &c));
	cua_daemon_status st;
	CK(cua_status(c, &st));
	ck_assert_uint_eq(st.insecure_listeners, 1);
	cua_disconnect(c);
	ck_assert_msg(file_has(D.log, "over tcp (insecure)"), "no tcp hello in %s", D.log);
}
END_TEST

/* ------------------------------------------------------------------ tokens */

/* Writes name:token lines into tmp/tokens with mode. Returns its path. */
static const char *
write_tokens(mode_t mode)
{
	static char path[128];
	snprintf(path, sizeof(path), "%s/tokens", tmp);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "# who:token\nalice:%s\n\nbob:bob-token-for-the-tests-0000000000\n", TOKEN);
	fclose(f);
	ck_assert_int_eq(chmod(path, mode), 0);
	return path;
}

static void
up_tokens(void)
{
	mk_tmp();
	snprintf(tcp_url, sizeof(tcp_url), "tcp://127.0.0.1:%d", 20000 + (int)((getpid() + 5) % 20000));
	daemon_start(&D, (const char *const[]){"--listen", tcp_url, "--allow-insecure-tcp", "--token-file",
					       write_tokens(0600), NULL});
}

START_TEST(tokens_right_wrong_missing)
{
	cua_client *c;
	ck_assert_int_eq(cua_connect(tcp_url, &c), CUA_EUNAUTHENTICATED); /* none */
	ck_assert_msg(strstr(cua_last_error(), "CUASYNC_TOKEN"), "%s", cua_last_error());
	setenv("CUASYNC_TOKEN", WRONG, 1);
	ck_assert_int_eq(cua_connect(tcp_url, &c), CUA_EUNAUTHENTICATED);
	ck_assert_msg(strstr(cua_last_error(), WRONG) == NULL, "%s", cua_last_error());
	setenv("CUASYNC_TOKEN", TOKEN, 1);
	CK(cua_connect(tcp_url, &c));
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, 4096, &p));
	cua_disconnect(c);
	unsetenv("CUASYNC_TOKEN");
	char path[128];
	snprintf(path, sizeof(path), "%s/mine", tmp);
	FILE *f = fopen(path, "w");
	fprintf(f, "%s\n", TOKEN);
	fclose(f);
	setenv("CUASYNC_TOKEN_FILE", path, 1);
	CK(cua_connect(tcp_url, &c));
	cua_disconnect(c);
	unsetenv("CUASYNC_TOKEN_FILE");
	c = connect_to(&D); /* ipc://: the kernel's credentials are enough */
	cua_disconnect(c);
	ck_assert_msg(file_has(D.log, "token 'alice'"), "no token name in %s", D.log);
	ck_assert_msg(!file_has(D.log, TOKEN) && !file_has(D.log, WRONG), "a token is in %s", D.log);
}
END_TEST

START_TEST(a_token_file_others_can_read_is_refused)
{
	char err[4096];
	const char *path = write_tokens(0644);
	start_refused((const char *const[]){"--token-file", path, "--listen", "ipc:///nonexistent/x.sock", NULL}, err,
		      sizeof(err));
	ck_assert_msg(strstr(err, "chmod 0600") && strstr(err, path), "%s", err);
	ck_assert_msg(strstr(err, TOKEN) == NULL, "%s", err);
}
END_TEST

/* ------------------------------------------------------------------ mutual TLS */

static char tls_url[64];
static bool have_openssl;

/* A CA, the daemon's certificate and a client's from it, and a client certificate of another CA. */
static bool
make_certs(void)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd),
		 "cd %s && k='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes' && "
		 "for ca in ca other; do openssl req -x509 $k -keyout $ca.key -out $ca.crt -days 2 -subj /CN=$ca-ca "
		 "|| exit 1; done && "
		 "for n in server:ca:127.0.0.1 good:ca:alice bad:other:mallory; do set -- $(echo $n | tr : ' '); "
		 "openssl req $k -keyout $1.key -out $1.csr -subj /CN=$3 && "
		 "openssl x509 -req -in $1.csr -CA $2.crt -CAkey $2.key -CAcreateserial -days 2 -out $1.crt && "
		 "cat $1.crt $1.key > $1.pem || exit 1; done",
		 tmp);
	snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), " >%s/openssl.log 2>&1", tmp);
	return system(cmd) == 0;
}

static void
up_mtls(void)
{
	mk_tmp();
	have_openssl = system("openssl version >/dev/null 2>&1") == 0;
	ck_assert_msg(!have_openssl || make_certs(), "openssl could not make the certificates: see %s/openssl.log",
		      tmp);
	snprintf(tls_url, sizeof(tls_url), "tls+tcp://127.0.0.1:%d", 20000 + (int)((getpid() + 9) % 20000));
	static char cert[128], ca[128];
	snprintf(cert, sizeof(cert), "%s/server.pem", tmp);
	snprintf(ca, sizeof(ca), "%s/ca.crt", tmp);
	const char *with[] = {"--listen", tls_url, "--tls-cert", cert, "--tls-ca", ca, NULL};
	daemon_start(&D, have_openssl ? with : NULL);
}

/* Connects with client certificate name (NULL: none) and pings: the status. */
static int
tls_try(const char *name)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s.pem", tmp, name ? name : "");
	if (name)
		setenv("CUASYNC_TLS_CERT", path, 1);
	else
		unsetenv("CUASYNC_TLS_CERT");
	cua_client *c;
	int r = cua_connect(tls_url, &c);
	if (r == CUA_OK) {
		r = cua_ping(c);
		cua_disconnect(c);
	}
	return r;
}

START_TEST(mutual_tls_right_wrong_and_no_certificate)
{
	if (!have_openssl) {
		printf("no openssl CLI to make certificates: mutual TLS test skipped\n");
		return;
	}
	char ca[128];
	snprintf(ca, sizeof(ca), "%s/ca.crt", tmp);
	setenv("CUASYNC_TLS_CA", ca, 1);
	setenv("CUASYNC_TIMEOUT_MS", "3000", 1); /* a refused handshake: the dialer retries until the timeout */
	ck_assert_int_eq(tls_try("good"), CUA_OK);
	ck_assert_int_ne(tls_try("bad"), CUA_OK); /* another CA's certificate */
	ck_assert_int_ne(tls_try(NULL), CUA_OK);  /* none */
	ck_assert_int_eq(tls_try("good"), CUA_OK);
	ck_assert_msg(file_has(D.log, "over tls+tcp (client certificate verified)"), "see %s", D.log);
}
END_TEST

/* ------------------------------------------------------------------ operators */

static void
up_operator(void)
{
	mk_tmp();
	daemon_start(&D, (const char *const[]){"--ipc-mode", "0666", "--operator-mode", "0666", "--operator-group",
					       "nogroup", NULL});
	ck_assert_int_eq(chmod(D.dir, 0711), 0);
}

/* In a child running as uid:gid: connects to url and asks STATUS; exits with the status (0: served). */
static int
as_user(uid_t uid, gid_t gid, const char *url, uint32_t *sessions)
{
	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	pid_t pid = fork(); /* this process has not used NNG: forking is safe */
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		if (setgroups(0, NULL) != 0 || setgid(gid) != 0 || setuid(uid) != 0)
			_exit(100);
		cua_client *c;
		cua_daemon_status st = {0};
		int r = cua_connect(url, &c);
		if (r == CUA_OK) {
			r = cua_status(c, &st);
			cua_disconnect(c);
		}
		if (write(fds[1], &st.sessions, sizeof(st.sessions)) != (ssize_t)sizeof(st.sessions))
			_exit(101);
		_exit(r);
	}
	close(fds[1]);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_int_eq(read(fds[0], sessions, sizeof(*sessions)), (ssize_t)sizeof(*sessions));
	close(fds[0]);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) < 100, "the child failed (0x%x)", st);
	return WEXITSTATUS(st);
}

static bool
sessions_are(const cua_daemon_status *s, void *ud)
{
	return s->sessions == *(uint32_t *)ud;
}

START_TEST(operator_endpoint_serves_operators_only)
{
	if (geteuid() != 0) {
		printf("not root: cannot connect as other users; operator identity test skipped\n");
		return;
	}
	uint32_t sessions;
	struct group *ng = getgrnam("nogroup");
	ck_assert_ptr_nonnull(ng);
	gid_t nogroup = ng->gr_gid;
	/* uid 65534 outside the operator group: refused there, served on the client socket */
	ck_assert_int_eq(as_user(65534, 65533, D.op_url, &sessions), CUA_EPERMISSION_DENIED);
	ck_assert_int_eq(as_user(65534, 65533, D.url, &sessions), CUA_OK);
	ck_assert_uint_eq(sessions, 1); /* its own view */
	ck_assert_msg(file_has(D.log, "over ipc uid 65534 gid 65533"), "see %s", D.log);
	/* the same uid in --operator-group: an operator */
	ck_assert_int_eq(as_user(65534, nogroup, D.op_url, &sessions), CUA_OK);
	/* root too, and this process's uid (the daemon's) */
	cua_client *op = connect_operator(&D), *c = connect_to(&D);
	cua_daemon_status st;
	uint32_t two = 2; /* the daemon-wide view, once the children's sessions are gone */
	ck_assert_msg(wait_status(op, sessions_are, &two, &st), "%u sessions", st.sessions);
	cua_disconnect(c);
	cua_disconnect(op);
}
END_TEST

static Suite *
auth_suite(void)
{
	Suite *s = suite_create("auth");
	TCase *tc = tcase_create("ipc");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, ipc_peer_credentials_are_logged);
	tcase_add_test(tc, plain_tcp_is_refused_without_the_flag);
	tcase_add_test(tc, a_token_file_others_can_read_is_refused);
	suite_add_tcase(s, tc);
	tc = tcase_create("tcp");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, up_tcp, down);
	tcase_add_test(tc, insecure_tcp_is_allowed_with_a_warning);
	suite_add_tcase(s, tc);
	tc = tcase_create("tokens");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, up_tokens, down);
	tcase_add_test(tc, tokens_right_wrong_missing);
	suite_add_tcase(s, tc);
	tc = tcase_create("mtls");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up_mtls, down);
	tcase_add_test(tc, mutual_tls_right_wrong_and_no_certificate);
	suite_add_tcase(s, tc);
	tc = tcase_create("operator");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, up_operator, down);
	tcase_add_test(tc, operator_endpoint_serves_operators_only);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(auth_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
