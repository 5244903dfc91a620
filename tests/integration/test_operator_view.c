/*
 * The operator's view (issue 21, point 7, and point 9's --devices by UUID): `cuasyncctl sessions` says who each
 * session is (user, tenant, transport), a drained device shows in `status` and `devices`, a client socket says
 * that it shows only its own session, session start and end leave one info line each (the operator's
 * cuasyncctl sessions none), a tenant's `mem` is its sessions' total beside the per-session limit, and
 * `--devices` takes GPU UUIDs and unambiguous prefixes, refusing a bad one with the devices' UUIDs.
 *
 * The test process itself never uses NNG before it forks a client as another user (NNG is not fork-safe):
 * it looks through cuasyncctl, a process of its own.
 */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static struct daemon D;

/* Runs `cuasyncctl --url url args` and returns its stdout (malloc'd), its stderr in *err (malloc'd, when err is
 * not NULL); asserts that it exited 0. */
static char *
ctl_at(const char *url, const char *args, char **err)
{
	char cmd[1200], errpath[400];
	snprintf(errpath, sizeof(errpath), "%s/ctl.err", D.dir);
	snprintf(cmd, sizeof(cmd), "%s/tools/cuasyncctl --url %s %s 2>%s", builddir(), url, args, errpath);
	FILE *f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	char *out = calloc(1, 65536);
	size_t n = fread(out, 1, 65535, f);
	out[n] = '\0';
	ck_assert_msg(pclose(f) == 0, "%s failed: %s", cmd, out);
	if (err != NULL) {
		*err = calloc(1, 65536);
		FILE *e = fopen(errpath, "r");
		ck_assert_ptr_nonnull(e);
		(*err)[fread(*err, 1, 65535, e)] = '\0';
		fclose(e);
	}
	return out;
}

static char *
ctl(const char *args)
{
	return ctl_at(D.op_url, args, NULL);
}

/* Waits (bounded: 20 s) until the daemon's log holds text. */
static bool
log_gets(const char *text)
{
	for (int i = 0; i < 2000; i++) {
		if (file_has(D.log, text))
			return true;
		usleep(10000);
	}
	return false;
}

/* ------------------------------------------------------------------ sessions: who they are */

/* A client as another user: a child that drops to uid:gid, connects to url, allocates 1 MiB, says so on a pipe
 * and holds its session until the pipe from the test closes. */
struct held {
	pid_t pid;
	int go; /* closing it ends the child */
};

static struct held
hold_session_as(uid_t uid, gid_t gid, const char *url)
{
	int ready[2], go[2];
	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(go), 0);
	pid_t pid = fork(); /* this process has not used NNG: forking is safe */
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(ready[0]);
		close(go[1]);
		if (setgroups(0, NULL) != 0 || setgid(gid) != 0 || setuid(uid) != 0)
			_exit(100);
		cua_client *c;
		cua_deviceptr p;
		char ok = 1, byte;
		if (cua_connect(url, &c) != CUA_OK || cua_mem_alloc(c, 0, 1 << 20, &p) != CUA_OK)
			ok = 0;
		if (write(ready[1], &ok, 1) != 1 || !ok)
			_exit(101);
		while (read(go[0], &byte, 1) > 0) /* until the test closes it */
			;
		cua_disconnect(c);
		_exit(0);
	}
	close(ready[1]);
	close(go[0]);
	char ok = 0;
	ck_assert_int_eq(read(ready[0], &ok, 1), 1);
	close(ready[0]);
	ck_assert_msg(ok == 1, "the client as uid %u could not connect and allocate", (unsigned)uid);
	return (struct held){pid, go[1]};
}

static void
release(struct held *h)
{
	int st;
	close(h->go);
	ck_assert_int_eq(waitpid(h->pid, &st, 0), h->pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the client failed (0x%x)", st);
}

static void
up_shared(void)
{
	daemon_start(&D, (const char *const[]){"--ipc-mode", "0666", NULL});
	ck_assert_int_eq(chmod(D.dir, 0711), 0); /* the other user reaches the socket */
}

static void
down(void)
{
	daemon_stop(&D);
}

/* The operator sees another uid's session with its user, tenant and transport; the session's start and end
 * are one info line each with who it was, and cuasyncctl's own sessions leave none at info. */
START_TEST(sessions_say_who)
{
	if (geteuid() != 0) {
		printf("not root: cannot connect as another user; sessions_say_who skipped\n");
		return;
	}
	struct passwd *pw = getpwuid(65534);
	const char *name = pw != NULL ? pw->pw_name : "65534";
	struct held h = hold_session_as(65534, 65533, D.url);

	char *out = ctl("sessions"), want[256];
	ck_assert_msg(strstr(out, "USER") && strstr(out, "TENANT") && strstr(out, "VIA") && strstr(out, "ADDRESS"),
		      "%s", out);
	/* its row: user, tenant, transport; the operator's own: root */
	snprintf(want, sizeof(want), " %-12s %-12s %-7s %-21s ", name, "default", "ipc", "-");
	ck_assert_msg(strstr(out, want), "no row with '%s':\n%s", want, out);
	snprintf(want, sizeof(want), " %-12s %-12s %-7s %-21s ", "root", "-", "ipc", "-");
	ck_assert_msg(strstr(out, want) && strstr(out, "(operator)"), "no operator row '%s':\n%s", want, out);
	free(out);

	out = ctl("--json sessions");
	snprintf(want, sizeof(want),
		 "\"tenant\":\"default\",\"transport\":\"ipc\",\"uid\":65534,\"gid\":65533,\"user\":\"%s\","
		 "\"peer\":\"\",\"token\":\"\"}",
		 name);
	ck_assert_msg(strstr(out, want), "no '%s' in %s", want, out);
	ck_assert_msg(strstr(out, "\"uid\":0,\"gid\":0,\"user\":\"root\""), "%s", out);
	free(out);

	ck_assert(log_gets("hello from 'libcuasync'"));
	ck_assert_msg(file_has(D.log, "over ipc uid 65534 gid 65533"), "see %s", D.log);
	release(&h);
	ck_assert_msg(log_gets("ended (its connection closed) after "), "no end line in %s", D.log);
	ck_assert_msg(file_has(D.log, " requests, 0 errors; it was ipc uid 65534 gid 65533"), "see %s", D.log);
	/* cuasyncctl's two sessions (operator endpoint): at debug, not in an info log */
	ck_assert_msg(!file_has(D.log, ", operator, tenant - (operator)"), "an operator session at info: %s", D.log);
}
END_TEST

/* Through a client socket cuasyncctl says that it shows only its own session, and how to see every one; through
 * the operator endpoint it says nothing of the kind. */
START_TEST(client_socket_says_own_session_only)
{
	char *err, *out = ctl_at(D.url, "sessions", &err);
	ck_assert_msg(strstr(err, "not the daemon's operator endpoint") && strstr(err, "--operator-url") &&
			      strstr(err, "--operator-group") && strstr(err, "--url"),
		      "%s", err);
	free(out);
	free(err);
	out = ctl_at(D.url, "status", &err);
	ck_assert_msg(strstr(err, "only this connection's own session is shown"), "%s", err);
	free(out);
	free(err);
	out = ctl_at(D.op_url, "sessions", &err);
	ck_assert_msg(err[0] == '\0', "a note on the operator endpoint: %s", err);
	free(out);
	free(err);
}
END_TEST

/* A drained device shows in status and devices, table and JSON, on the operator endpoint and a client socket;
 * undrain takes it away. */
START_TEST(drained_device_shows)
{
	free(ctl("drain 0"));
	const char *urls[] = {D.op_url, D.url};
	for (int u = 0; u < 2; u++) {
		char *out = ctl_at(urls[u], "status", NULL);
		ck_assert_msg(strstr(out, "device 0  DRAINED"), "%s", out);
		free(out);
		out = ctl_at(urls[u], "devices", NULL);
		ck_assert_msg(strstr(out, "DRAINED"), "%s", out);
		free(out);
		out = ctl_at(urls[u], "--json devices", NULL);
		ck_assert_msg(strstr(out, "\"drained\":true}"), "%s", out);
		free(out);
		out = ctl_at(urls[u], "--json status", NULL);
		ck_assert_msg(strstr(out, "\"drained\":true}"), "%s", out);
		free(out);
	}
	free(ctl("undrain 0"));
	char *out = ctl("status");
	ck_assert_msg(!strstr(out, "DRAINED"), "%s", out);
	free(out);
	out = ctl("--json devices");
	ck_assert_msg(strstr(out, "\"drained\":false}"), "%s", out);
	free(out);
}
END_TEST

/* A tcp:// session: no uid, its address instead, in the table, the JSON and the log's start line. */
static char tcp_url[64];

static void
up_tcp(void)
{
	snprintf(tcp_url, sizeof(tcp_url), "tcp://127.0.0.1:%d", 20000 + (int)((getpid() + 11) % 20000));
	daemon_start(&D, (const char *const[]){"--listen", tcp_url, "--allow-insecure-tcp", NULL});
}

START_TEST(tcp_session_shows_its_address)
{
	cua_client *c;
	CK(cua_connect(tcp_url, &c));
	char *out = ctl("sessions");
	ck_assert_msg(strstr(out, " tcp     127.0.0.1:"), "%s", out);
	free(out);
	out = ctl("--json sessions");
	ck_assert_msg(strstr(out,
			     "\"transport\":\"tcp\",\"uid\":null,\"gid\":null,\"user\":null,\"peer\":\"127.0.0.1:"),
		      "%s", out);
	free(out);
	ck_assert_msg(file_has(D.log, "over tcp (insecure) from 127.0.0.1:"), "see %s", D.log);
	cua_disconnect(c);
}
END_TEST

/* ------------------------------------------------------------------ a tenant's mem */

static char conf_path[300];

static void
up_tenant(void)
{
	snprintf(conf_path, sizeof(conf_path), "/tmp/cuasync-opview.XXXXXX");
	int fd = mkstemp(conf_path);
	ck_assert_int_ge(fd, 0);
	static const char conf[] = "[tenant default]\nmem = 50%\n";
	ck_assert_int_eq(write(fd, conf, sizeof(conf) - 1), (ssize_t)(sizeof(conf) - 1));
	close(fd);
	daemon_start(&D, (const char *const[]){"--config", conf_path, NULL});
}

static void
down_tenant(void)
{
	daemon_stop(&D);
	unlink(conf_path);
}

/* mem = 50% is the tenant's total; each session stays within --session-mem (25%): the log says both at start,
 * one session past 25% is refused naming both, two sessions reach 50% together and no further. */
START_TEST(tenant_mem_is_the_total)
{
	ck_assert_msg(file_has(D.log, "tenant default: its sessions together may hold 50% of the device's memory on "
				      "each device (mem); each session at most 25% of the device's memory "
				      "(--session-mem): one session alone cannot reach the tenant's limit"),
		      "see %s", D.log);
	cua_client *a = connect_to(&D), *b = connect_to(&D), *c = connect_to(&D);
	cua_device_info in;
	CK(cua_device_get_info(a, 0, &in));
	uint64_t quarter = in.total_mem / 100 * 25;
	cua_deviceptr p;
	ck_assert_int_eq(cua_mem_alloc(a, 0, quarter + (1 << 20), &p), CUA_EQUOTA);
	ck_assert_msg(strstr(cua_last_error(), "--session-mem") &&
			      strstr(cua_last_error(), "(tenant 'default''s `mem` bounds its sessions together; each "
						       "session also stays within --session-mem)"),
		      "%s", cua_last_error());
	CK(cua_mem_alloc(a, 0, quarter, &p));
	CK(cua_mem_alloc(b, 0, quarter, &p));
	ck_assert_int_eq(cua_mem_alloc(c, 0, 1 << 20, &p), CUA_EQUOTA);
	ck_assert_msg(strstr(cua_last_error(), "tenant 'default''s sessions to") && strstr(cua_last_error(), "`mem`"),
		      "%s", cua_last_error());
	cua_disconnect(a);
	cua_disconnect(b);
	cua_disconnect(c);
}
END_TEST

/* ------------------------------------------------------------------ --devices by UUID */

/* The UUID the log gives device ordinal ord of a daemon started with every device: "GPU-…" in uuid. */
static void
uuid_of(int ord, char *uuid, size_t len)
{
	static char log[1 << 20];
	char key[64];
	FILE *f = fopen(D.log, "r");
	ck_assert_ptr_nonnull(f);
	log[fread(log, 1, sizeof(log) - 1, f)] = '\0';
	fclose(f);
	snprintf(key, sizeof(key), " device ordinal %d, UUID ", ord);
	const char *p = strstr(log, key);
	ck_assert_msg(p != NULL, "no '%s' in %s", key, D.log);
	p += strlen(key);
	snprintf(uuid, len, "%.*s", (int)strcspn(p, "\n"), p);
	ck_assert_msg(strncmp(uuid, "GPU-", 4) == 0 && strlen(uuid) == 40, "'%s'", uuid);
}

/* Starts cuasyncd with args on a socket of its own in D.dir and returns its exit status, its stderr in err. */
static int
start_fails(const char *args, char *err, size_t len)
{
	char cmd[1200], path[400];
	snprintf(path, sizeof(path), "%s/bad.log", D.dir);
	snprintf(cmd, sizeof(cmd),
		 "%s/daemon/cuasyncd --backend %s --emu-mem 64M --listen ipc://%s/bad.sock %s 2>%s >/dev/null",
		 builddir(), test_backend(), D.dir, args, path);
	int st = system(cmd);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	err[fread(err, 1, len - 1, f)] = '\0';
	fclose(f);
	return st;
}

static void
up_two(void)
{
	daemon_start(&D, (const char *const[]){"--emu-devices", "2", NULL});
}

/* --devices takes a UUID and an unambiguous start of one, in any case, beside ordinals; a UUID of no device,
 * one that names several and a device named twice stop the start, naming the devices' UUIDs. */
START_TEST(devices_by_uuid)
{
	char u0[64], u1[64], args[400], err[8192];
	uuid_of(0, u0, sizeof(u0));
	bool two = file_has(D.log, " device ordinal 1, UUID ");
	if (two)
		uuid_of(1, u1, sizeof(u1));
	daemon_stop(&D);

	/* by its whole UUID, upper case: the second device alone (on one GPU: the first) */
	const char *want = two ? u1 : u0;
	char upper[64];
	for (size_t i = 0; i <= strlen(want); i++)
		upper[i] = (char)(i < 4 ? want[i] : (want[i] >= 'a' && want[i] <= 'f' ? want[i] - 32 : want[i]));
	daemon_start(&D, (const char *const[]){"--emu-devices", "2", "--devices", upper, NULL});
	cua_client *c = connect_to(&D);
	int n = 0;
	CK(cua_device_count(c, &n));
	ck_assert_int_eq(n, 1);
	cua_disconnect(c);
	snprintf(args, sizeof(args), "device 0: %s device ordinal %d, UUID %s", test_backend(), two ? 1 : 0, want);
	ck_assert_msg(file_has(D.log, args), "no '%s' in %s", args, D.log);

	/* a UUID of no device: the start fails, naming the devices there */
	ck_assert_int_ne(start_fails("--emu-devices 2 --devices GPU-00000000-1111-2222-3333-444444444444", err,
				     sizeof(err)),
			 0);
	ck_assert_msg(strstr(err, "--devices: no ") && strstr(err, "has the UUID 'GPU-00000000-1111-2222-3333-") &&
			      strstr(err, u0) && strstr(err, "nvidia-smi -L"),
		      "%s", err);
	/* neither an ordinal nor a UUID */
	ck_assert_int_ne(start_fails("--devices fast", err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "'fast' is neither a device ordinal nor a GPU UUID (GPU-..., see nvidia-smi -L)"),
		      "%s", err);
	if (two) { /* "GPU-" alone starts both: ambiguous; a device named twice */
		ck_assert_int_ne(start_fails("--emu-devices 2 --devices GPU-", err, sizeof(err)), 0);
		ck_assert_msg(strstr(err, "'GPU-' is the start of 2 devices' UUIDs") && strstr(err, u1), "%s", err);
		snprintf(args, sizeof(args), "--emu-devices 2 --devices 0,%s", u0);
		ck_assert_int_ne(start_fails(args, err, sizeof(err)), 0);
		ck_assert_msg(strstr(err, "device 0 is named twice"), "%s", err);
	}
}
END_TEST

static Suite *
operator_view_suite(void)
{
	Suite *s = suite_create("operator_view");
	TCase *tc = tcase_create("sessions");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up_shared, down);
	tcase_add_test(tc, sessions_say_who);
	tcase_add_test(tc, client_socket_says_own_session_only);
	tcase_add_test(tc, drained_device_shows);
	suite_add_tcase(s, tc);
	tc = tcase_create("tcp");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up_tcp, down);
	tcase_add_test(tc, tcp_session_shows_its_address);
	suite_add_tcase(s, tc);
	tc = tcase_create("tenant_mem");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up_tenant, down_tenant);
	tcase_add_test(tc, tenant_mem_is_the_total);
	suite_add_tcase(s, tc);
	tc = tcase_create("devices");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up_two, down);
	tcase_add_test(tc, devices_by_uuid);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(operator_view_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
