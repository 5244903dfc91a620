/*
 * slurm_job — the client a Slurm job of tests/integration/test_slurm.sh runs (issue 23).
 *
 *   slurm_job READY GO BYTES MORE
 *
 * Connects to $CUASYNC_URL (the job's TaskProlog set it), allocates BYTES of device 0 and then MORE bytes
 * beside them, and writes one line to the FIFO READY: "session=ID tenant=NAME alloc=RESULT more=RESULT"
 * (RESULT: OK or the error's stable name, e.g. QUOTA; tenant: the one the daemon put this session in). Then it
 * holds its memory until a line arrives on the FIFO GO (or GO's writer closes it: the test ended or cancelled
 * the job), so that the test can run a second job beside it, and disconnects. The FIFOs are the test's
 * synchronization: no step of it waits a fixed time.
 * Exit status 0 when it connected and reported, 1 otherwise (the reason on stderr).
 */
#include "cuasync.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The session's own row of SESSIONS (a client socket shows only this connection's), into tenant. 0 or the
 * error. */
static int
own_tenant(cua_client *c, char *tenant, size_t cap)
{
	cua_session_info *s = NULL;
	uint32_t n = 0;
	int rc = cua_sessions(c, &s, &n);
	if (rc == 0)
		snprintf(tenant, cap, "%s", n == 1 ? s[0].tenant : "?");
	if (rc == 0)
		snprintf(tenant + strlen(tenant), cap - strlen(tenant), " session=%llu",
			 n == 1 ? (unsigned long long)s[0].id : 0ull);
	free(s);
	return rc;
}

int
main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: slurm_job READY_FIFO GO_FIFO BYTES MORE\n");
		return 2;
	}
	size_t bytes = strtoull(argv[3], NULL, 0), more = strtoull(argv[4], NULL, 0);
	cua_client *c = NULL;
	int rc = cua_connect(NULL, &c);
	if (rc != 0) {
		fprintf(stderr, "slurm_job: connect to %s: %s: %s\n",
			getenv("CUASYNC_URL") ? getenv("CUASYNC_URL") : "?", cua_strerror_name(rc), cua_last_error());
		return 1;
	}
	char tenant[160] = "?";
	int trc = own_tenant(c, tenant, sizeof(tenant));
	cua_deviceptr p = 0, q = 0;
	int a = cua_mem_alloc(c, 0, bytes, &p);
	int b = cua_mem_alloc(c, 0, more, &q);
	char line[512];
	snprintf(line, sizeof(line), "tenant=%s alloc=%s more=%s\n", trc == 0 ? tenant : cua_strerror_name(trc),
		 a == 0 ? "OK" : cua_strerror_name(a), b == 0 ? "OK" : cua_strerror_name(b));
	fputs(line, stdout);
	fflush(stdout);
	int status = 1;
	FILE *ready = fopen(argv[1], "w");
	if (ready != NULL && fputs(line, ready) >= 0 && fclose(ready) == 0) {
		FILE *go = fopen(argv[2], "r");
		char buf[64];
		if (go != NULL) {
			(void)fgets(buf, sizeof(buf), go); /* a line, or EOF: either releases the job */
			fclose(go);
			status = 0;
		}
	} else {
		if (ready != NULL)
			fclose(ready);
		fprintf(stderr, "slurm_job: cannot report on %s\n", argv[1]);
	}
	cua_disconnect(c);
	return status;
}
