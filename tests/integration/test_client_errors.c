/* libcuasync's connection errors say what went wrong and what to do (issue 21, point 5), each its own: no
 * socket, nothing listening on it, no permission on it (which group to join), a TLS server certificate that
 * does not verify or does not name the host, no client certificate for a daemon that wants one. And a tls+tcp://
 * client verifies the daemon by default (against the system's CA store when $CUASYNC_TLS_CA is unset): it never
 * talks to an unverified server. None of them ends in the catch-all "(is the daemon running?)". */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static struct daemon D;
static char tmp[64], tls_url[64];
static bool have_openssl;

static void
mk_tmp(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/cuasync-cerr.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	memset(&D, 0, sizeof(D));
}

static void
down(void)
{
	daemon_stop(&D);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmp);
	unsetenv("CUASYNC_TLS_CA");
	unsetenv("CUASYNC_TLS_CERT");
	unsetenv("CUASYNC_TLS_KEY");
	unsetenv("CUASYNC_TIMEOUT_MS");
}

/* cua_connect(url) fails with status want, and its message has each of the NULL-terminated texts and not the
 * catch-all advice. */
static void
connect_fails(const char *url, int want, const char *const *has)
{
	cua_client *c = NULL;
	int r = cua_connect(url, &c);
	const char *msg = cua_last_error();
	ck_assert_msg(r == want, "connect %s: %s (%s), want %s", url, cua_strerror_name(r), msg,
		      cua_strerror_name(want));
	for (int i = 0; has[i]; i++)
		ck_assert_msg(strstr(msg, has[i]) != NULL, "connect %s: '%s' is not in: %s", url, has[i], msg);
	ck_assert_msg(strstr(msg, "is the daemon running?") == NULL, "connect %s: the catch-all: %s", url, msg);
}

/* ------------------------------------------------------------------ local sockets */

START_TEST(no_socket_says_the_daemon_is_not_running)
{
	char url[128];
	snprintf(url, sizeof(url), "ipc://%s/none.sock", tmp);
	connect_fails(url, CUA_ETRANSPORT,
		      (const char *const[]){"there is no socket", "none.sock", "not running", "CUASYNC_URL", NULL});
}
END_TEST

/* A socket file nobody listens on (a daemon that died without removing it). */
START_TEST(nothing_listening_says_the_daemon_is_not_running)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/dead.sock", tmp);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0); /* bound, never listening */
	char url[128];
	snprintf(url, sizeof(url), "ipc://%s", sa.sun_path);
	connect_fails(url, CUA_ETRANSPORT, (const char *const[]){"nothing listens", "not running", NULL});
	close(fd);
}
END_TEST

/* A user outside the socket's group: told it is a permission problem, and which group to join. */
START_TEST(permission_denied_names_the_group_to_join)
{
	if (geteuid() != 0) {
		printf("not root: cannot connect as another user; permission test skipped\n");
		return;
	}
	daemon_start(&D, (const char *const[]){"--ipc-mode", "0660", NULL});
	ck_assert_int_eq(chmod(D.dir, 0711), 0);
	struct stat st;
	ck_assert_int_eq(stat(D.url + 6, &st), 0);
	struct group *g = getgrgid(st.st_gid);
	ck_assert_ptr_nonnull(g);
	char grp[64];
	snprintf(grp, sizeof(grp), "group %s", g->gr_name);
	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	pid_t pid = fork(); /* this process has not used NNG: forking is safe */
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
			_exit(100);
		cua_client *c;
		int r = cua_connect(D.url, &c);
		dprintf(fds[1], "%s", cua_last_error());
		_exit(r == CUA_OK ? 101 : r);
	}
	close(fds[1]);
	char msg[2048] = "";
	ssize_t n, len = 0;
	while ((n = read(fds[0], msg + len, sizeof(msg) - 1 - (size_t)len)) > 0)
		len += n;
	msg[len > 0 ? len : 0] = '\0';
	close(fds[0]);
	int ws;
	ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
	ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == CUA_ETRANSPORT, "child: 0x%x: %s", ws, msg);
	ck_assert_msg(strstr(msg, "permission denied") && strstr(msg, grp) && strstr(msg, "usermod -aG"), "%s", msg);
	ck_assert_msg(strstr(msg, "is the daemon running?") == NULL, "%s", msg);
}
END_TEST

/* ------------------------------------------------------------------ TLS */

/* A CA, the daemon's certificates (one for 127.0.0.1, one for another name) and a client's, from it. */
static bool
make_certs(void)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd),
		 "cd %s && k='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes' && "
		 "openssl req -x509 $k -keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca && "
		 "for n in server:127.0.0.1 misnamed:elsewhere.example good:alice; do set -- $(echo $n | tr : ' '); "
		 "openssl req $k -keyout $1.key -out $1.csr -subj /CN=$2 && "
		 "openssl x509 -req -in $1.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -out $1.crt && "
		 "cat $1.crt $1.key > $1.pem || exit 1; done >openssl.log 2>&1",
		 tmp);
	return system(cmd) == 0;
}

/* A daemon on tls+tcp:// with the certificate named cert; with mutual, it wants client certificates of the CA. */
static void
up_tls(const char *cert, bool mutual)
{
	mk_tmp();
	have_openssl = system("openssl version >/dev/null 2>&1") == 0;
	ck_assert_msg(!have_openssl || make_certs(), "openssl could not make the certificates: see %s/openssl.log",
		      tmp);
	snprintf(tls_url, sizeof(tls_url), "tls+tcp://127.0.0.1:%d", 20000 + (int)((getpid() + 11) % 20000));
	static char certp[128], ca[128];
	snprintf(certp, sizeof(certp), "%s/%s.pem", tmp, cert);
	snprintf(ca, sizeof(ca), "%s/ca.crt", tmp);
	const char *with[] = {"--listen", tls_url, "--tls-cert", certp, mutual ? "--tls-ca" : NULL, ca, NULL};
	daemon_start(&D, have_openssl ? with : NULL);
	/* a refused handshake: the dialer may retry until the timeout */
	setenv("CUASYNC_TIMEOUT_MS", "5000", 1);
}

static void
up_mutual(void)
{
	up_tls("server", true);
}

static void
up_misnamed(void)
{
	up_tls("misnamed", false);
}

static void
set_env_file(const char *var, const char *name)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", tmp, name);
	setenv(var, path, 1);
}

/* Without $CUASYNC_TLS_CA the daemon is verified against the system's store, which does not know the test CA:
 * refused, and told to set $CUASYNC_TLS_CA. With it, served. */
START_TEST(tls_verifies_the_daemon_by_default)
{
	if (!have_openssl) {
		printf("no openssl CLI to make certificates: TLS test skipped\n");
		return;
	}
	set_env_file("CUASYNC_TLS_CERT", "good.pem");
	unsetenv("CUASYNC_TLS_CA");
	connect_fails(tls_url, CUA_ETRANSPORT, (const char *const[]){"did not verify", "$CUASYNC_TLS_CA", NULL});
	set_env_file("CUASYNC_TLS_CA", "ca.crt");
	cua_client *c;
	CK(cua_connect(tls_url, &c));
	CK(cua_ping(c));
	cua_disconnect(c);
}
END_TEST

START_TEST(tls_missing_client_certificate_is_named)
{
	if (!have_openssl) {
		printf("no openssl CLI to make certificates: TLS test skipped\n");
		return;
	}
	set_env_file("CUASYNC_TLS_CA", "ca.crt");
	unsetenv("CUASYNC_TLS_CERT");
	connect_fails(tls_url, CUA_ETRANSPORT, (const char *const[]){"client certificate", "$CUASYNC_TLS_CERT", NULL});
}
END_TEST

START_TEST(tls_unreadable_files_are_named)
{
	if (!have_openssl) {
		printf("no openssl CLI to make certificates: TLS test skipped\n");
		return;
	}
	set_env_file("CUASYNC_TLS_CA", "nope.crt");
	connect_fails(tls_url, CUA_EBAD_ARGUMENT, (const char *const[]){"$CUASYNC_TLS_CA", "nope.crt", NULL});
	set_env_file("CUASYNC_TLS_CA", "ca.crt");
	set_env_file("CUASYNC_TLS_CERT", "nope.pem");
	connect_fails(tls_url, CUA_EBAD_ARGUMENT, (const char *const[]){"$CUASYNC_TLS_CERT", "nope.pem", NULL});
}
END_TEST

START_TEST(tls_hostname_mismatch_is_named)
{
	if (!have_openssl) {
		printf("no openssl CLI to make certificates: TLS test skipped\n");
		return;
	}
	set_env_file("CUASYNC_TLS_CA", "ca.crt");
	connect_fails(tls_url, CUA_ETRANSPORT,
		      (const char *const[]){"did not verify", "127.0.0.1", "subjectAltName", "ca.crt", NULL});
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("client_errors");
	TCase *local = tcase_create("local");
	tcase_add_checked_fixture(local, mk_tmp, down);
	tcase_set_timeout(local, 120);
	tcase_add_test(local, no_socket_says_the_daemon_is_not_running);
	tcase_add_test(local, nothing_listening_says_the_daemon_is_not_running);
	tcase_add_test(local, permission_denied_names_the_group_to_join);
	suite_add_tcase(s, local);
	TCase *mutual = tcase_create("mutual");
	tcase_add_checked_fixture(mutual, up_mutual, down);
	tcase_set_timeout(mutual, 120);
	tcase_add_test(mutual, tls_verifies_the_daemon_by_default);
	tcase_add_test(mutual, tls_missing_client_certificate_is_named);
	tcase_add_test(mutual, tls_unreadable_files_are_named);
	suite_add_tcase(s, mutual);
	TCase *misnamed = tcase_create("misnamed");
	tcase_add_checked_fixture(misnamed, up_misnamed, down);
	tcase_set_timeout(misnamed, 120);
	tcase_add_test(misnamed, tls_hostname_mismatch_is_named);
	suite_add_tcase(s, misnamed);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
