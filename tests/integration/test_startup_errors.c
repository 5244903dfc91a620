/*
 * test_startup_errors.c — start-up errors that say what is wrong and what to do (issue 21, point 5), with the
 * real daemon: a --listen that is no URL or names an unknown scheme, an ipc:// socket in a directory that does
 * not exist, and a TLS certificate without its key, a missing certificate file, a key file without a key. Each
 * start must fail (before serving anything) with a message naming the option, the file or directory, and the
 * way out — not NNG's "Entry not found" or "Cryptographic error".
 */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmp[64];
static char sock_url[128];

static void
mk_tmp(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/cuasync-start.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	snprintf(sock_url, sizeof(sock_url), "ipc://%s/d.sock", tmp);
}

static void
rm_tmp(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	ck_assert_int_eq(system(cmd), 0);
}

/* Runs cuasyncd --backend emu with args (NULL-terminated), which must stop by itself with a failure: its exit
 * status, its stderr in err. */
static int
start_refused(const char *const *args, char *err, size_t len)
{
	char exe[512], out[128];
	snprintf(exe, sizeof(exe), "%s/daemon/cuasyncd", builddir());
	snprintf(out, sizeof(out), "%s/refused.log", tmp);
	const char *argv[32] = {exe, "--backend", "emu", "--emu-mem", "64M", "--staging", "8M"};
	int n = 7;
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
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 127, "cuasyncd started (0x%x)", st);
	FILE *f = fopen(out, "r");
	ck_assert_ptr_nonnull(f);
	size_t got = fread(err, 1, len - 1, f);
	err[got] = '\0';
	fclose(f);
	return WEXITSTATUS(st);
}

#define HAS(text) ck_assert_msg(strstr(err, (text)) != NULL, "stderr does not say \"%s\":\n%s", (text), err)
#define HASNT(text) ck_assert_msg(strstr(err, (text)) == NULL, "stderr says \"%s\":\n%s", (text), err)

START_TEST(a_listen_url_of_an_unknown_scheme_names_the_accepted_ones)
{
	char err[4096];
	mk_tmp();
	ck_assert_int_eq(start_refused((const char *const[]){"--listen", "ipx:///tmp/x.sock", NULL}, err, sizeof(err)),
			 2);
	HAS("--listen 'ipx:///tmp/x.sock': unknown scheme 'ipx://'");
	HAS("ipc://");
	HAS("tls+tcp://HOST:PORT");
	HASNT("neither encrypts nor authenticates");
	rm_tmp();
}
END_TEST

START_TEST(a_bare_path_is_told_to_be_an_ipc_url)
{
	char err[4096];
	mk_tmp();
	ck_assert_int_eq(start_refused((const char *const[]){"--listen", "/tmp/x.sock", NULL}, err, sizeof(err)), 2);
	HAS("--listen '/tmp/x.sock' is a path, not a URL: for a local socket say ipc:///tmp/x.sock");
	HASNT("neither encrypts nor authenticates");
	rm_tmp();
}
END_TEST

START_TEST(a_missing_socket_directory_is_named_with_what_to_do)
{
	char err[4096], url[160], want[200];
	mk_tmp();
	snprintf(url, sizeof(url), "ipc://%s/run/cuasyncd/cuasyncd.sock", tmp);
	start_refused((const char *const[]){"--listen", url, NULL}, err, sizeof(err));
	snprintf(want, sizeof(want), "the directory %s/run/cuasyncd does not exist: create it", tmp);
	HAS(want);
	HAS("RuntimeDirectory=cuasyncd");
	HASNT("Entry not found");
	rm_tmp();
}
END_TEST

/* ------------------------------------------------------------------ TLS files */

static bool
make_cert(void)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
		 "cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "
		 "server.key "
		 "-out server.crt -days 2 -subj /CN=127.0.0.1 >openssl.log 2>&1",
		 tmp);
	return system("openssl version >/dev/null 2>&1") == 0 && system(cmd) == 0;
}

/* Starts with a tls+tcp:// listener beside the ipc one and the given TLS options; the stderr in err. */
static void
start_tls(const char *const *tls, char *err, size_t len)
{
	const char *args[16] = {"--listen", sock_url, "--listen", "tls+tcp://127.0.0.1:0"};
	int n = 4;
	for (int i = 0; tls[i] && n < 15; i++)
		args[n++] = tls[i];
	args[n] = NULL;
	start_refused(args, err, len);
}

START_TEST(tls_files_that_do_not_serve_are_named_with_what_is_missing)
{
	char err[4096], cert[128], key[128], want[256];
	mk_tmp();
	if (!make_cert()) {
		fprintf(stderr, "SKIP tls_files…: no openssl to make a certificate\n");
		rm_tmp();
		return;
	}
	snprintf(cert, sizeof(cert), "%s/server.crt", tmp);
	snprintf(key, sizeof(key), "%s/server.key", tmp);

	/* a certificate without its key */
	start_tls((const char *const[]){"--tls-cert", cert, NULL}, err, sizeof(err));
	snprintf(want, sizeof(want), "--tls-cert %s holds a certificate but no private key", cert);
	HAS(want);
	HAS("--tls-key");
	HASNT("Cryptographic error");

	/* a certificate file that is not there */
	char missing[160];
	snprintf(missing, sizeof(missing), "%s/nope.pem", tmp);
	start_tls((const char *const[]){"--tls-cert", missing, NULL}, err, sizeof(err));
	snprintf(want, sizeof(want), "--tls-cert %s: No such file or directory", missing);
	HAS(want);

	/* a key file that holds no key (the certificate named twice) */
	start_tls((const char *const[]){"--tls-cert", cert, "--tls-key", cert, NULL}, err, sizeof(err));
	snprintf(want, sizeof(want), "--tls-key %s holds no PEM private key", cert);
	HAS(want);

	/* a CA file that holds no certificate */
	start_tls((const char *const[]){"--tls-cert", cert, "--tls-key", key, "--tls-ca", key, NULL}, err, sizeof(err));
	snprintf(want, sizeof(want), "--tls-ca %s holds no PEM certificate", key);
	HAS(want);
	rm_tmp();
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("startup_errors");
	TCase *tc = tcase_create("startup_errors");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, a_listen_url_of_an_unknown_scheme_names_the_accepted_ones);
	tcase_add_test(tc, a_bare_path_is_told_to_be_an_ipc_url);
	tcase_add_test(tc, a_missing_socket_directory_is_named_with_what_to_do);
	tcase_add_test(tc, tls_files_that_do_not_serve_are_named_with_what_is_missing);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
