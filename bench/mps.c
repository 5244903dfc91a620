/*
 * mps.c — the private MPS control daemon of cuasync-bench --compare (mps.h).
 */
#define _XOPEN_SOURCE 700
#include "mps.h"

#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MPS_CONTROL "nvidia-cuda-mps-control"

static char mps_dir[64];
static pid_t mps_owner; /* the process that started it; 0 when none runs */

int
mps_available(void)
{
	const char *path = getenv("PATH");
	char buf[4096];
	for (const char *p = path; p != NULL && *p != '\0';) {
		const char *colon = strchr(p, ':');
		size_t n = colon ? (size_t)(colon - p) : strlen(p);
		if (n > 0 && snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, p, MPS_CONTROL) < (int)sizeof(buf) &&
		    access(buf, X_OK) == 0)
			return 1;
		p = colon ? colon + 1 : NULL;
	}
	return 0;
}

static int
remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	remove(path);
	return 0;
}

/* Waits up to 10 s until the control pipe exists (want = 1) or is gone (want = 0). */
static int
wait_control(int want)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/pipe/control", mps_dir);
	for (int i = 0; i < 1000; i++) {
		if ((access(path, F_OK) == 0) == want)
			return 0;
		nanosleep(&(struct timespec){0, 10000000}, NULL);
	}
	return -1;
}

void
mps_stop(void)
{
	if (mps_owner == 0 || mps_owner != getpid())
		return; /* none, or a forked child that inherited the handler */
	FILE *f = popen(MPS_CONTROL, "w");
	if (f != NULL) {
		fputs("quit\n", f);
		pclose(f);
	}
	if (wait_control(0) != 0)
		fprintf(stderr, "cuasync-bench: the MPS control daemon in %s did not quit within 10 s\n", mps_dir);
	mps_owner = 0;
	unsetenv("CUDA_MPS_PIPE_DIRECTORY");
	unsetenv("CUDA_MPS_LOG_DIRECTORY");
	nftw(mps_dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
}

/* SIGINT/SIGTERM/SIGHUP while a daemon runs: stop it, then die of the signal. (popen in a handler is not
 * async-signal-safe; the bench accepts that to never leave a daemon behind.) */
static void
on_signal(int sig)
{
	mps_stop();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void
install_guards(void)
{
	static int installed;
	if (installed++)
		return;
	atexit(mps_stop);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
}

int
mps_start(char *err, size_t len)
{
	char pipe_dir[96], log_dir[96];
	snprintf(mps_dir, sizeof(mps_dir), "/tmp/cuasync-mps.XXXXXX");
	if (mkdtemp(mps_dir) == NULL) {
		snprintf(err, len, "mkdtemp failed");
		return -1;
	}
	snprintf(pipe_dir, sizeof(pipe_dir), "%s/pipe", mps_dir);
	snprintf(log_dir, sizeof(log_dir), "%s/log", mps_dir);
	mkdir(pipe_dir, 0700);
	mkdir(log_dir, 0700);
	setenv("CUDA_MPS_PIPE_DIRECTORY", pipe_dir, 1);
	setenv("CUDA_MPS_LOG_DIRECTORY", log_dir, 1);
	install_guards();
	mps_owner = getpid();
	int st = system(MPS_CONTROL " -d");
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || wait_control(1) != 0) {
		snprintf(err, len, "%s -d failed (status %d)", MPS_CONTROL, st);
		mps_stop();
		return -1;
	}
	return 0;
}
