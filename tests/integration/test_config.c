/*
 * test_config.c — the configuration file (--config, INI) and its reload on SIGHUP, with the real daemon.
 *
 * - The file's limits hold, and the command line wins over the file.
 * - A bad file stops the start with file:line and what was expected (exit status 2, nothing served).
 * - SIGHUP: a shrunk limit holds at once for new requests while a session keeps what it holds; a bad file is
 *   refused whole and the limits in effect stay. The test knows the reload is done the way systemd does
 *   (Type=notify): the daemon sends RELOADING=1, then READY=1 with the outcome in STATUS=, to $NOTIFY_SOCKET.
 */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

static void
make_dir(void)
{
	snprintf(dir, sizeof(dir), "/tmp/cuasync-conf.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void
remove_dir(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Writes text to dir/name (replacing it whole, as an editor saving it would) and returns the path. */
static const char *
write_file(const char *name, const char *text)
{
	static char path[2][128];
	static int k;
	char *p = path[k++ % 2], tmp[160];
	snprintf(p, sizeof(path[0]), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.new", p);
	FILE *f = fopen(tmp, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_ge(fputs(text, f), 0);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(rename(tmp, p), 0);
	return p;
}

/* ------------------------------------------------------------------ limits from the file */

static cua_module
try_load(cua_client *c, int *rc)
{
	cua_module m = {0};
	*rc = load_kernels_rc(c, &m);
	return m;
}

START_TEST(file_limits_hold_and_the_command_line_wins)
{
	make_dir();
	const char *conf = write_file("c.conf", "# two tenants' worth of modules is plenty here\n"
						"[daemon]\n"
						"session-modules = 1 ; inline comment\n"
						"session-streams = 16\n");
	struct daemon a, b;
	const char *args_a[] = {"--config", conf, NULL};
	const char *args_b[] = {"--config", conf, "--session-modules", "2", NULL};
	daemon_start(&a, args_a);
	daemon_start(&b, args_b);
	cua_client *ca = connect_to(&a), *cb = connect_to(&b);
	int rc;
	try_load(ca, &rc);
	CK(rc);
	try_load(ca, &rc);
	ck_assert_msg(rc == CUA_EQUOTA, "second module with session-modules = 1 in the file: %s",
		      cua_strerror_name(rc));
	try_load(cb, &rc);
	CK(rc);
	try_load(cb, &rc);
	ck_assert_msg(rc == CUA_OK, "second module with --session-modules 2 over the file's 1: %s",
		      cua_strerror_name(rc));
	try_load(cb, &rc);
	ck_assert_msg(rc == CUA_EQUOTA, "third module with --session-modules 2: %s", cua_strerror_name(rc));
	cua_disconnect(ca);
	cua_disconnect(cb);
	daemon_stop(&a);
	daemon_stop(&b);
	remove_dir();
}
END_TEST

/* ------------------------------------------------------------------ bad files */

/* Runs cuasyncd with --config path and a private socket; returns its exit status, its stderr in err. */
static int
run_daemon(const char *path, char *err, size_t len)
{
	char exe[512], url[128];
	snprintf(exe, sizeof(exe), "%s/daemon/cuasyncd", builddir());
	snprintf(url, sizeof(url), "ipc://%s/never.sock", dir);
	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(fds[1], STDERR_FILENO);
		close(fds[0]);
		close(fds[1]);
		execl(exe, exe, "--config", path, "--listen", url, "--backend", "emu", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	size_t have = 0;
	ssize_t n;
	while (have < len - 1 && (n = read(fds[0], err + have, len - 1 - have)) > 0)
		have += (size_t)n;
	err[have] = '\0';
	close(fds[0]);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const struct bad_file {
	const char *text, *want; /* want: the message after "path:" */
} bad_files[] = {
	{"[daemon]\nsession-modules = 1\nsession-modulez = 2\n", ":3: unknown key 'session-modulez'"},
	{"[daemon]\nsession-mem = lots\n", ":2: invalid value 'lots' for session-mem (expected BYTES|N%"},
	{"[daemon]\nemu-mem = -1\n", ":2: invalid value '-1' for emu-mem (expected BYTES"},
	{"[tenant research]\nhost-bytes = -4G\n", ":2: invalid value '-4G' for host-bytes in [tenant research]"},
	{"[daemon]\nisolation = partial\n", ":2: invalid value 'partial' for isolation (expected shared|session"},
	{"session-modules = 1\n", ":1: unknown section []"},
	{"[daemon]\n[tenants]\nx = 1\n", ":3: unknown section [tenants]"},
	{"[daemon]\n\n# fine\nthis line is not a setting\n", ":4: not a `key = value` line"},
	{"[daemon]\nworker = 3\n", ":2: unknown key 'worker'"},
	{"[daemon]\nready-fd = 3\n", ":2: unknown key 'ready-fd'"},
	{"[tenant research]\nuid = alice\n", ":2: uid: 'alice' is not a number"},
	{"[tenant research]\nuser = no-such-user-here\n", ":2: user: no user 'no-such-user-here'"},
	{"[tenant research]\nmemory = 4G\n", ":2: unknown key 'memory' in [tenant research]"},
	{"[tenant research]\nmem = 120%\n", ":2: invalid value '120%' for mem"},
	{"[tenant default]\nuid = 0\n", ":2: default: holds whoever matches no other tenant"},
	{"[tenant research]\nrefuse = yes\n", ":2: unknown key 'refuse' in [tenant research]"},
	{"[daemon]\nlisten = ipc:///tmp/"
	 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	 ".sock\n",
	 ":2: line longer than 198 characters"},
};

START_TEST(bad_files_are_refused_with_file_and_line)
{
	make_dir();
	for (size_t i = 0; i < sizeof(bad_files) / sizeof(bad_files[0]); i++) {
		const char *path = write_file("bad.conf", bad_files[i].text);
		char err[1024], want[512];
		int st = run_daemon(path, err, sizeof(err));
		snprintf(want, sizeof(want), "%s%s", path, bad_files[i].want);
		ck_assert_msg(st == 2, "case %zu: exit status %d, want 2 (stderr: %s)", i, st, err);
		ck_assert_msg(strstr(err, want) != NULL, "case %zu: stderr '%s' does not say '%s'", i, err, want);
	}
	/* a file named on the command line must exist (the default one is read only when it does) */
	char err[1024], missing[128];
	snprintf(missing, sizeof(missing), "%s/missing.conf", dir);
	ck_assert_int_eq(run_daemon(missing, err, sizeof(err)), 2);
	ck_assert_msg(strstr(err, "No such file") != NULL, "missing file: %s", err);
	remove_dir();
}
END_TEST

/* ------------------------------------------------------------------ SIGHUP */

/* A datagram socket standing in for systemd's $NOTIFY_SOCKET. */
static int
notify_socket(char *path, size_t len)
{
	snprintf(path, len, "%s/notify", dir);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* The next notification (bounded: 30 s) into msg. */
static void
next_notice(int fd, char *msg, size_t len)
{
	struct pollfd p = {fd, POLLIN, 0};
	ck_assert_msg(poll(&p, 1, 30000) == 1, "no notification from the daemon within 30 s");
	ssize_t n = recv(fd, msg, len - 1, 0);
	ck_assert_int_gt(n, 0);
	msg[n] = '\0';
}

/* SIGHUP, then the reload's RELOADING=1 and READY=1; the latter's STATUS= into status. */
static void
reload(const struct daemon *d, int fd, char *status, size_t len)
{
	char msg[1500];
	ck_assert_int_eq(kill(d->pid, SIGHUP), 0);
	next_notice(fd, msg, sizeof(msg));
	ck_assert_msg(strncmp(msg, "RELOADING=1\nMONOTONIC_USEC=", 27) == 0, "first notice after SIGHUP: %s", msg);
	next_notice(fd, msg, sizeof(msg));
	ck_assert_msg(strncmp(msg, "READY=1\nSTATUS=", 15) == 0, "second notice after SIGHUP: %s", msg);
	snprintf(status, len, "%s", msg + 15);
}

START_TEST(sighup_applies_new_limits_and_keeps_what_sessions_hold)
{
	make_dir();
	char npath[128], status[1500];
	int nfd = notify_socket(npath, sizeof(npath));
	const char *conf = write_file("c.conf", "[daemon]\nsession-modules = 3\n");
	const char *args[] = {"--config", conf, NULL};
	struct daemon d;
	setenv("NOTIFY_SOCKET", npath, 1);
	daemon_start(&d, args);
	unsetenv("NOTIFY_SOCKET");
	next_notice(nfd, status, sizeof(status));
	ck_assert_msg(strstr(status, "READY=1") != NULL, "start-up notice: %s", status);

	cua_client *c = connect_to(&d);
	cua_module m[3];
	int rc;
	for (int i = 0; i < 3; i++) {
		m[i] = try_load(c, &rc);
		CK(rc);
	}
	/* shrink the limit below what the session holds */
	write_file("c.conf", "[daemon]\nsession-modules = 1\npool-streams = 2\n");
	reload(&d, nfd, status, sizeof(status));
	ck_assert_msg(strstr(status, "configuration reloaded; changed now: session-modules") != NULL, "%s", status);
	ck_assert_msg(strstr(status, "at the next start: pool-streams") != NULL, "%s", status);
	try_load(c, &rc);
	ck_assert_msg(rc == CUA_EQUOTA, "a fourth module past the new limit of 1: %s", cua_strerror_name(rc));
	/* what it holds stays usable */
	cua_function f;
	for (int i = 0; i < 3; i++)
		CK(cua_module_get_function(c, m[i], "fill_u32", &f));
	CK(cua_module_unload(c, m[2]));
	CK(cua_module_unload(c, m[1]));
	try_load(c, &rc);
	ck_assert_msg(rc == CUA_EQUOTA, "holding 1 of 1: %s", cua_strerror_name(rc));
	CK(cua_module_unload(c, m[0]));
	m[0] = try_load(c, &rc);
	CK(rc);

	/* a file that does not read is refused whole: the limit in effect (1) stays */
	write_file("c.conf", "[daemon]\nsession-modules = 8\nsession-streams = many\n");
	reload(&d, nfd, status, sizeof(status));
	ck_assert_msg(strstr(status, "configuration not reloaded") != NULL && strstr(status, "c.conf:3:") != NULL, "%s",
		      status);
	try_load(c, &rc);
	ck_assert_msg(rc == CUA_EQUOTA, "after a refused reload the limit is still 1: %s", cua_strerror_name(rc));

	/* and a good one again */
	write_file("c.conf", "[daemon]\nsession-modules = 2\n");
	reload(&d, nfd, status, sizeof(status));
	try_load(c, &rc);
	CK(rc);
	cua_disconnect(c);
	daemon_stop(&d);
	close(nfd);
	remove_dir();
}
END_TEST

/* ------------------------------------------------------------------ tenants */

/* A daemon whose configuration file is text with %u replaced by this process's uid (any number of times). */
static void
start_with(struct daemon *d, const char *text, const char *const *more)
{
	char body[2048], uid[16];
	snprintf(uid, sizeof(uid), "%u", (unsigned)getuid());
	size_t o = 0;
	for (const char *p = text; *p && o < sizeof(body) - 16; p++) {
		if (p[0] == '%' && p[1] == 'u') {
			o += (size_t)snprintf(body + o, sizeof(body) - o, "%s", uid);
			p++;
		} else {
			body[o++] = *p;
		}
	}
	body[o] = '\0';
	const char *args[8] = {"--config", write_file("t.conf", body)};
	for (int i = 0; more && more[i] && i < 5; i++)
		args[2 + i] = more[i];
	daemon_start(d, args);
}

static bool
sessions_are(const cua_daemon_status *s, void *ud)
{
	return s->sessions == *(const uint32_t *)ud;
}

/* A tenant's limits hold for all its sessions together, and its sessions are counted. */
START_TEST(tenant_limits_are_summed_over_its_sessions)
{
	make_dir();
	struct daemon d;
	start_with(&d,
		   "[tenant me]\nuid = %u\nmodules = 2\nmem = 1M\nsessions = 3\n"
		   "[tenant default]\nmodules = 100\n",
		   NULL);
	cua_client *a = connect_to(&d), *b = connect_to(&d);
	int rc;
	cua_module ma = try_load(a, &rc);
	CK(rc);
	cua_module mb = try_load(b, &rc);
	CK(rc);
	try_load(a, &rc);
	ck_assert_msg(rc == CUA_EQUOTA && strstr(cua_last_error(), "tenant 'me'") != NULL,
		      "a third module of tenant me (2 allowed, one per session held): %s: %s", cua_strerror_name(rc),
		      cua_last_error());
	CK(cua_module_unload(b, mb));
	try_load(a, &rc);
	CK(rc);
	(void)ma;
	/* memory on device 0: 768 KiB + 512 KiB > 1 MiB, though each session is far below --session-mem */
	cua_deviceptr p, q;
	CK(cua_mem_alloc(a, 0, 768 << 10, &p));
	rc = cua_mem_alloc(b, 0, 512 << 10, &q);
	ck_assert_msg(rc == CUA_EQUOTA, "512 KiB more for tenant me: %s", cua_strerror_name(rc));
	CK(cua_mem_alloc(b, 0, 256 << 10, &q));
	/* sessions: a third connects, a fourth is refused, and comes in once one left */
	cua_client *c = connect_to(&d), *e = NULL;
	rc = cua_connect(d.url, &e);
	ck_assert_msg(rc == CUA_EQUOTA, "a fourth session of tenant me (3 allowed): %s", cua_strerror_name(rc));
	cua_disconnect(c);
	cua_client *op = connect_operator(&d); /* the operator belongs to no tenant: it does not count */
	uint32_t want = 3;                     /* a, b and the operator */
	cua_daemon_status st;
	ck_assert(wait_status(op, sessions_are, &want, &st));
	cua_disconnect(op);
	CK(cua_connect(d.url, &e));
	cua_disconnect(e);
	cua_disconnect(a);
	cua_disconnect(b);
	daemon_stop(&d);
	remove_dir();
}
END_TEST

static bool
in_flight_is(const cua_daemon_status *s, void *ud)
{
	return s->total.in_flight == *(const uint64_t *)ud;
}

/* A tenant's requests queued or running are limited over all its sessions. */
START_TEST(tenant_in_flight_is_summed_over_its_sessions)
{
	make_dir();
	struct daemon d;
	start_with(&d, "[tenant me]\nuid = %u\nin-flight = 2\n", NULL);
	cua_client *a = connect_to(&d), *b = connect_to(&d), *op = connect_operator(&d);
	cua_function fa = get_fn(a, load_kernels(a), "spin"), fb = get_fn(b, load_kernels(b), "spin");
	cua_stream sa, sb;
	CK(cua_stream_create(a, 0, 0, &sa));
	CK(cua_stream_create(b, 0, 0, &sb));
	cua_future *f1 = submit_spin(a, fa, 1000, sa), *f2 = submit_spin(b, fb, 1000, sb);
	uint64_t two = 2;
	cua_daemon_status st;
	ck_assert(wait_status(op, in_flight_is, &two, &st));
	cua_future *f3 = submit_spin(a, fa, 1, sa);
	int rc = cua_future_wait(f3, -1);
	ck_assert_msg(rc == CUA_EQUOTA && strstr(cua_future_error(f3), "tenant 'me'") != NULL,
		      "a third request of tenant me with in-flight = 2: %s (%s)", cua_strerror_name(rc),
		      cua_future_error(f3));
	cua_future_free(f3);
	CK(cua_future_wait(f1, -1));
	CK(cua_future_wait(f2, -1));
	cua_future_free(f1);
	cua_future_free(f2);
	CK(cua_ping(a)); /* room again */
	cua_disconnect(op);
	cua_disconnect(a);
	cua_disconnect(b);
	daemon_stop(&d);
	remove_dir();
}
END_TEST

/* In a child running as uid 65534: connects to d, loads the test kernels twice; its status codes in rc[2]
 * (rc[0]: the connect's when it failed). The caller must not have used NNG yet: it does not survive a fork. */
static void
as_nobody(const struct daemon *d, int rc[2])
{
	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	pid_t pid = fork(); /* this process has no NNG socket open now: forking is safe */
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int out[2] = {0, 0};
		cua_client *c;
		cua_module m;
		close(fds[0]);
		if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
			_exit(100);
		if ((out[0] = cua_connect(d->url, &c)) == CUA_OK) {
			out[0] = load_kernels_rc(c, &m);
			out[1] = load_kernels_rc(c, &m);
			cua_disconnect(c);
		}
		_exit(write(fds[1], out, sizeof(out)) == (ssize_t)sizeof(out) ? 0 : 101);
	}
	close(fds[1]);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed (0x%x)", st);
	ck_assert_int_eq(read(fds[0], rc, 2 * sizeof(int)), (ssize_t)(2 * sizeof(int)));
	close(fds[0]);
}

/* A client running as another user is placed in that user's tenant by the kernel's credentials, or refused. */
START_TEST(another_user_gets_its_own_tenant)
{
	if (geteuid() != 0) {
		printf("not root: cannot connect as another user; skipped\n");
		return;
	}
	make_dir();
	struct daemon d;
	const char *open_socket[] = {"--ipc-mode", "0666", NULL};
	start_with(&d, "[tenant nobody]\nuid = 65534\nmodules = 1\n[tenant me]\nuid = %u\n", open_socket);
	ck_assert_int_eq(chmod(d.dir, 0711), 0);
	int rc[2];
	as_nobody(&d, rc);
	ck_assert_msg(rc[0] == CUA_OK && rc[1] == CUA_EQUOTA, "uid 65534 in tenant nobody (1 module): %s then %s",
		      cua_strerror_name(rc[0]), cua_strerror_name(rc[1]));
	ck_assert_msg(file_has(d.log, "uid 65534") && file_has(d.log, "tenant nobody"), "see %s", d.log);
	daemon_stop(&d);
	/* (this process uses no NNG before its last fork: NNG does not survive a fork) */
	start_with(&d, "[tenant me]\nuid = %u\n[tenant default]\nrefuse = yes\n", open_socket);
	ck_assert_int_eq(chmod(d.dir, 0711), 0);
	as_nobody(&d, rc);
	ck_assert_msg(rc[0] == CUA_EPERMISSION_DENIED, "uid 65534 of no tenant: %s", cua_strerror_name(rc[0]));
	daemon_stop(&d);
	remove_dir();
}
END_TEST

/* An identity of no tenant gets default's rules, or is refused when default says so; a group rule matches. */
START_TEST(unknown_identities_are_refused_when_default_refuses)
{
	make_dir();
	struct daemon d;
	start_with(&d, "[tenant other]\nuid = 4242424\n[tenant default]\nrefuse = yes\n", NULL);
	cua_client *c = NULL;
	int rc = cua_connect(d.url, &c);
	ck_assert_msg(rc == CUA_EPERMISSION_DENIED, "uid %u in no tenant: %s", (unsigned)getuid(),
		      cua_strerror_name(rc));
	ck_assert_msg(strstr(cua_last_error(), "belongs to no tenant") != NULL, "%s", cua_last_error());
	daemon_stop(&d);

	char gid_rule[64];
	snprintf(gid_rule, sizeof(gid_rule), "[tenant mine]\ngroup = %u\n", (unsigned)getgid());
	char text[256];
	snprintf(text, sizeof(text), "%s[tenant default]\nrefuse = yes\n", gid_rule);
	start_with(&d, text, NULL);
	c = connect_to(&d);
	CK(cua_ping(c));
	cua_disconnect(c);
	daemon_stop(&d);
	remove_dir();
}
END_TEST

/* A token's name places a session in a tenant: the bearer of alice's token is tenant `tok` whatever its uid. */
START_TEST(a_token_names_the_tenant)
{
	make_dir();
	char tokens[128];
	snprintf(tokens, sizeof(tokens), "%s/tokens", dir);
	int fd = open(tokens, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	const char line[] = "alice:0123456789abcdef0123456789abcdef\n";
	ck_assert_int_eq(write(fd, line, sizeof(line) - 1), (ssize_t)(sizeof(line) - 1));
	close(fd);
	struct daemon d;
	const char *more[] = {"--token-file", tokens, NULL};
	start_with(&d, "[tenant tok]\ntoken = alice\nmodules = 1\n[tenant default]\nrefuse = yes\n", more);
	cua_client *c = NULL;
	int rc = cua_connect(d.url, &c);
	ck_assert_msg(rc == CUA_EPERMISSION_DENIED, "no token, no tenant: %s", cua_strerror_name(rc));
	setenv("CUASYNC_TOKEN", "0123456789abcdef0123456789abcdef", 1);
	rc = cua_connect(d.url, &c);
	unsetenv("CUASYNC_TOKEN");
	CK(rc);
	try_load(c, &rc);
	CK(rc);
	try_load(c, &rc);
	ck_assert_msg(rc == CUA_EQUOTA && strstr(cua_last_error(), "tenant 'tok'") != NULL, "%s: %s",
		      cua_strerror_name(rc), cua_last_error());
	cua_disconnect(c);
	daemon_stop(&d);
	remove_dir();
}
END_TEST

/* The next journald record on fd whose MESSAGE contains text (bounded: 30 s), its fields in rec; false: none. */
static bool
journal_record(int fd, const char *text, char *rec, size_t len)
{
	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, 30000) != 1)
			return false;
		ssize_t n = recv(fd, rec, len - 1, 0);
		ck_assert_int_gt(n, 0);
		rec[n] = '\0';
		const char *m = memmem(rec, (size_t)n, "MESSAGE\n", 8);
		ck_assert_msg(m != NULL && m + 16 <= rec + n, "a record without MESSAGE: %s", rec);
		uint64_t mlen;
		memcpy(&mlen, m + 8, 8);
		ck_assert_uint_le(mlen, (uint64_t)(rec + n - (m + 16)));
		if (memmem(m + 16, mlen, text, strlen(text)) != NULL)
			return true;
	}
}

/* Under systemd, records go to journald with the session, its tenant and the request as fields. */
START_TEST(journald_records_name_session_and_tenant)
{
	make_dir();
	char path[128], rec[8192];
	snprintf(path, sizeof(path), "%s/journal", dir);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, path, strlen(path) + 1);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	struct daemon d;
	setenv("CUASYNC_JOURNAL_SOCKET", path, 1);
	start_with(&d, "[tenant me]\nuid = %u\n", NULL);
	unsetenv("CUASYNC_JOURNAL_SOCKET");
	cua_client *c = connect_to(&d);
	ck_assert_msg(journal_record(fd, "hello from", rec, sizeof(rec)), "no HELLO record");
	ck_assert_msg(strstr(rec, "PRIORITY=6\n") && strstr(rec, "SYSLOG_IDENTIFIER=cuasyncd\n") &&
			      strstr(rec, "CUASYNC_TENANT=me\n") && strstr(rec, "CUASYNC_SESSION=") &&
			      strstr(rec, "CUASYNC_REQUEST=") && strstr(rec, "CODE_FUNC=v_hello\n"),
		      "fields: %s", rec);
	cua_disconnect(c);
	daemon_stop(&d);
	close(fd);
	remove_dir();
}
END_TEST

/* Two sessions' first allocations: in one shared worker they differ; each in a fresh worker of its own
 * (isolation = session) they are the same address of two separate address spaces. */
static bool
first_allocs_coincide(const struct daemon *d)
{
	cua_client *a = connect_to(d), *b = connect_to(d);
	cua_deviceptr pa, pb;
	CK(cua_mem_alloc(a, 0, 4096, &pa));
	CK(cua_mem_alloc(b, 0, 4096, &pb));
	cua_disconnect(a);
	cua_disconnect(b);
	return pa == pb;
}

/* A tenant's `isolation = session` gives each of its sessions a worker of its own in a shared daemon. */
START_TEST(a_tenant_can_have_its_own_isolation)
{
	make_dir();
	struct daemon d;
	start_with(&d, "[tenant me]\nuid = %u\nisolation = shared\n", NULL); /* whatever --isolation says */
	ck_assert_msg(!first_allocs_coincide(&d), "a shared tenant's sessions share one worker");
	daemon_stop(&d);
	start_with(&d, "[tenant me]\nuid = %u\nisolation = session\n", NULL);
	ck_assert_msg(first_allocs_coincide(&d), "isolation = session: each session in a fresh worker");
	daemon_stop(&d);
	remove_dir();
}
END_TEST

/* A reload rebuilds the tenants: sessions move to the tenant of the same name and its new limits. */
START_TEST(sighup_moves_sessions_to_the_new_tenants)
{
	make_dir();
	char npath[128], status[1500];
	int nfd = notify_socket(npath, sizeof(npath));
	struct daemon d;
	setenv("NOTIFY_SOCKET", npath, 1);
	start_with(&d, "[tenant me]\nuid = %u\nmodules = 1\n", NULL);
	unsetenv("NOTIFY_SOCKET");
	next_notice(nfd, status, sizeof(status));
	cua_client *a = connect_to(&d), *b = connect_to(&d);
	int rc;
	try_load(a, &rc);
	CK(rc);
	try_load(b, &rc);
	ck_assert_int_eq(rc, CUA_EQUOTA);
	char text[128];
	snprintf(text, sizeof(text), "[tenant me]\nuid = %u\nmodules = 2\n[tenant spare]\nuid = 4242424\n",
		 (unsigned)getuid());
	write_file("t.conf", text);
	reload(&d, nfd, status, sizeof(status));
	ck_assert_msg(strstr(status, "tenants") != NULL, "%s", status);
	try_load(b, &rc);
	CK(rc);
	try_load(a, &rc);
	ck_assert_msg(rc == CUA_EQUOTA && strstr(cua_last_error(), "tenant 'me'") != NULL, "%s: %s",
		      cua_strerror_name(rc), cua_last_error());
	cua_disconnect(a);
	cua_disconnect(b);
	daemon_stop(&d);
	close(nfd);
	remove_dir();
}
END_TEST

static Suite *
config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, file_limits_hold_and_the_command_line_wins);
	tcase_add_test(tc, bad_files_are_refused_with_file_and_line);
	tcase_add_test(tc, sighup_applies_new_limits_and_keeps_what_sessions_hold);
	tcase_add_test(tc, tenant_limits_are_summed_over_its_sessions);
	tcase_add_test(tc, unknown_identities_are_refused_when_default_refuses);
	tcase_add_test(tc, sighup_moves_sessions_to_the_new_tenants);
	tcase_add_test(tc, a_tenant_can_have_its_own_isolation);
	tcase_add_test(tc, a_token_names_the_tenant);
	tcase_add_test(tc, tenant_in_flight_is_summed_over_its_sessions);
	tcase_add_test(tc, another_user_gets_its_own_tenant);
	tcase_add_test(tc, journald_records_name_session_and_tenant);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(config_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
