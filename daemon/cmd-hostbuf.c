/*
 * cmd-hostbuf.c — HOST_REGISTER and HOST_UNREGISTER: a client's memfd shared with the GPU worker, so that
 * copies to and from it (cmd-copy.c) move no data through the socket. Same host, ipc:// only.
 */
#include "config.h"

#include "cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Opens the client's fd through /proc (the kernel vouched for the pid) and checks it is a usable memfd:
 * 0 and *out, or a status with a message in e. */
static int
open_memfd(int64_t pid, uint32_t cfd, uint64_t bytes, int *out, cua_err *e)
{
	char path[64];
	struct stat st;
	int rc = 0;
	snprintf(path, sizeof(path), "/proc/%lld/fd/%u", (long long)pid, cfd);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		bool perm = errno == EACCES || errno == EPERM;
		return cua_err_set(e, perm ? CUA_EUNSUPPORTED : CUA_EBAD_ARGUMENT,
				   "cannot open the client's fd %u (%s)%s", cfd, strerror(errno),
				   perm ? ": run cuasyncd as root or as the client's user" : "");
	}
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		rc = cua_err_set(e, CUA_EBAD_ARGUMENT, "fd %u is not a memfd (memfd_create)", cfd);
	/* A buffer that could shrink under the worker's mapping would kill it (SIGBUS) and every session with it. */
	else if (!(seals & F_SEAL_SHRINK))
		rc = cua_err_set(e, CUA_EBAD_ARGUMENT,
				 "the memfd must be sealed against shrinking (MFD_ALLOW_SEALING, then F_ADD_SEALS "
				 "F_SEAL_SHRINK)");
	else if ((uint64_t)st.st_size < bytes)
		rc = cua_err_set(e, CUA_EBAD_ARGUMENT, "the memfd holds %lld bytes, not %llu", (long long)st.st_size,
				 (unsigned long long)bytes);
	if (rc != 0) {
		close(fd);
		return rc;
	}
	*out = fd;
	return 0;
}

/* Registered host bytes and the buffer's handle. */
static void
rs_host_register(const struct fe *fe, const struct request *r, struct resv *want)
{
	(void)fe;
	want->n[RES_HOST_BYTES] = r->w.body.host_register.bytes;
	want->n[RES_HANDLES] = 1;
}

static int
v_host_register(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_host_register *q = &r->w.body.host_register;
	int rc;
	if ((rc = plan_need_device(fe, q->device, e)) != 0)
		return rc;
	if (q->bytes == 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "cannot register 0 bytes");
	/* within the limits (--session-host-bytes, the tenant's `host-bytes`, --session-handles) before the client's
	 * memory is opened; .reserve reserves them once validation passed */
	struct resv want = {{0}};
	rs_host_register(fe, r, &want);
	if ((rc = do_reserve_check(fe, r, &want, e)) != 0)
		return rc;
	int64_t pid = fe->edge->peer_pid(r->pipe);
	if (pid <= 0)
		return cua_err_set(e, CUA_EUNSUPPORTED, "shared host memory needs a local ipc:// connection");
	if ((rc = open_memfd(pid, q->fd, q->bytes, &r->host_fd, e)) != 0 ||
	    (rc = plan_bind_device(fe, r, (int)q->device, 0, e)) != 0)
		return rc;
	/* the worker opens it through /proc/<daemon>/fd while the request runs; request_free closes it */
	struct wrec_host_register c = {{WR_HOST_REGISTER, 0}, r->host_fd, 0, q->bytes};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	return r->items[0].cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

static void
c_host_register(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	struct ritem *it = &r->items[0];
	uint64_t h;
	if (it->status != CUA_OK)
		return;
	if (do_handle_new(r->s, CUA_HK_HOSTBUF, r->dev, r->wdev->gen, it->value, &h) != 0) {
		item_fail(it, CUA_ENOMEM, "cannot record the host buffer");
		return;
	}
	r->s->slots[cua_handle_slot(h)].size = r->w.body.host_register.bytes;
	r->s->host_bytes += r->w.body.host_register.bytes;
	r->s->host_buffers++;
	it->value = h;
}

static int
v_host_unregister(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	uint64_t h = r->w.body.host_unregister.buffer;
	struct hslot *hb;
	int rc = do_handle_get(fe, r->s, h, CUA_HK_HOSTBUF, &hb, e);
	if (rc == CUA_ECONTEXT_LOST) {
		do_handle_free(r->s, do_handle_slot(r->s, h, CUA_HK_HOSTBUF));
		r->s->host_buffers--;
		return rc;
	}
	if (rc != 0 || (rc = plan_bind_device(fe, r, hb->dev, hb->gen, e)) != 0)
		return rc;
	r->barrier = true; /* no earlier copy of this session may still use it */
	struct wrec_host_unregister c = {{WR_HOST_UNREGISTER, 0}, hb->wid};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	if (r->items[0].cmd < 0)
		return cua_err_set(e, CUA_ENOMEM, "out of memory");
	hb->release = (struct release){r->id, r->seq}; /* later copies naming it are refused (session.h) */
	return 0;
}

static void
c_host_unregister(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	struct hslot *hb = do_handle_slot(r->s, r->w.body.host_unregister.buffer, CUA_HK_HOSTBUF);
	if (hb == NULL || hb->release.req != r->id)
		return;
	if (r->items[0].status == CUA_OK) {
		if (!hb->stale)
			r->s->host_bytes -= hb->size;
		do_handle_free(r->s, hb);
		r->s->host_buffers--;
	} else { /* still registered: the session's again */
		hb->release = (struct release){0, 0};
	}
}

/* HOST_UNREGISTER failed as a whole after validation: the buffer is the session's again. */
static void
a_host_unregister(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	struct hslot *hb = do_handle_slot(r->s, r->w.body.host_unregister.buffer, CUA_HK_HOSTBUF);
	if (hb != NULL && hb->release.req == r->id)
		hb->release = (struct release){0, 0};
}

const struct cmd_entry cmd_host_register_entry = {.op = CUA_OP_HOST_REGISTER,
						  .flags = CMD_HELLO,
						  .family = SF_MEMORY,
						  .wrec = WR_HOST_REGISTER,
						  .validate = v_host_register,
						  .reserve = rs_host_register,
						  .complete = c_host_register,
						  .reply = reply_value};
const struct cmd_entry cmd_host_unregister_entry = {.op = CUA_OP_HOST_UNREGISTER,
						    .flags = CMD_HELLO | CMD_RELEASES,
						    .family = SF_MEMORY,
						    .wrec = WR_HOST_UNREGISTER,
						    .validate = v_host_unregister,
						    .complete = c_host_unregister,
						    .abandon = a_host_unregister};
