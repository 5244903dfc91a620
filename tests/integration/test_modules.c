/* MODULE_LOAD on the emulated device, through the real daemon: corrupt images of every kind answer MODULE with
 * a loader-style message, and the session keeps working (a good module loads and runs after each). */
#include "config.h"

#include "cua_proto.h"
#include "cua_wire.h"
#include "harness.h"

#include <check.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct daemon D;

static void
up(void)
{
	daemon_start(&D, NULL);
}

static void
down(void)
{
	daemon_stop(&D);
}

static const char good[] = "cuasync-emu-module\nfill_u32\n";

/* The session still serves: a good module loads, and its fill_u32 runs and writes. */
static void
session_works(cua_client *c)
{
	cua_module m;
	CK(cua_module_load(c, 0, good, sizeof(good) - 1, &m));
	cua_function fill = get_fn(c, m, "fill_u32");
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, 64 * 4, &p));
	cua_launch *l = launch_1d(c, fill, 1, 64);
	cua_launch_push_device_ptr(l, p);
	cua_launch_push_u32(l, 0xfeedu);
	cua_launch_push_u64(l, 64);
	launch_and_wait(l);
	uint32_t v[64];
	CK(cua_memcpy_dtoh(c, v, p, sizeof(v)));
	for (int i = 0; i < 64; i++)
		ck_assert_uint_eq(v[i], 0xfeedu);
	CK(cua_mem_free(c, p));
	CK(cua_module_unload(c, m));
}

/* Loads img (format detected) and expects MODULE with a message holding want. */
static void
refused(cua_client *c, const char *what, const void *img, size_t len, const char *want)
{
	cua_module m;
	int rc = cua_module_load(c, 0, img, len, &m);
	ck_assert_msg(rc == CUA_EMODULE, "%s: %s: %s", what, cua_strerror_name(rc), cua_last_error());
	ck_assert_msg(strstr(cua_last_error(), want) != NULL, "%s: message '%s' lacks '%s'", what, cua_last_error(),
		      want);
	printf("%s: %s\n", what, cua_last_error());
	session_works(c);
}

static unsigned char *
random_bytes(size_t len, const char *magic, unsigned seed)
{
	unsigned char *p = malloc(len);
	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)rand_r(&seed);
	memcpy(p, magic, strlen(magic));
	return p;
}

START_TEST(corrupt_images_answer_module)
{
	if (strcmp(test_backend(), "emu") != 0) {
		printf("the emulated device's loader: skipped on %s\n", test_backend());
		return;
	}
	cua_client *c = connect_to(&D);
	session_works(c);
	unsigned char *fb = random_bytes(4096, "\x50\xed\x55\xba", 1);
	refused(c, "fatbin magic + random bytes", fb, 4096, "emulated device: fatbin");
	/* a plausible fatbin header whose one entry overruns it */
	memcpy(fb, "\x50\xed\x55\xba\x01\x00\x10\x00\xf0\x0f\x00\x00\x00\x00\x00\x00", 16);
	memcpy(fb + 16, "\x02\x00\x01\x01\x40\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00", 16);
	refused(c, "fatbin entry overrun", fb, 4096, "fatbin entry 1: 65536 payload bytes overrun the fatbin");
	free(fb);
	unsigned char elf[512] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
	elf[18] = 190; /* EM_CUDA, and a section table far outside the image */
	memset(elf + 40, 0x7f, 8);
	refused(c, "fake ELF cubin header", elf, sizeof(elf), "cubin: section header table out of bounds");
	static const char text[] = "Lorem ipsum dolor sit amet,\nconsectetur adipiscing elit.\n";
	refused(c, "garbage text", text, sizeof(text) - 1, "as PTX: no .version directive");
	static const char hdr[] = "cuasync-emu-module\n";
	refused(c, "empty after the header", hdr, sizeof(hdr) - 1, "no kernel named after the header");
	static const char unknown[] = "cuasync-emu-module\nfill_u32\nfoo\n";
	refused(c, "unknown kernel", unknown, sizeof(unknown) - 1, "line 3: unknown kernel 'foo'");
	unsigned char *blob = random_bytes(1 << 20, "", 7);
	blob[0] = 0x01; /* not a magic of any format */
	refused(c, "1 MiB random blob", blob, 1 << 20, "not text: byte 0x01 at offset 0");
	free(blob);
	cua_disconnect(c);
}
END_TEST

/* One MODULE_LOAD as a raw message (any format, any length, 0 included): its status and message. */
static int
raw_load(nng_socket s, uint32_t format, const void *img, uint32_t len, char *msg, size_t cap)
{
	struct cua_req_module_load q = {0, format, {img, len}};
	cua_wbuf b = {0};
	ck_assert_int_eq(cua_wire_pack_request(cua_wbuf_out(&b), CUA_OP_MODULE_LOAD, 0, &q), 0);
	ck_assert_int_eq(nng_send(s, b.data, b.len, 0), 0);
	cua_wbuf_free(&b);
	char *rep = NULL;
	size_t rlen = 0;
	ck_assert_int_eq(nng_recv(s, &rep, &rlen, NNG_FLAG_ALLOC), 0);
	cua_wire_reply r;
	cua_err e;
	ck_assert_int_eq(cua_wire_decode_reply(rep, rlen, &r, &e), 0);
	int status = (int)r.status;
	snprintf(msg, cap, "%.*s", (int)r.message.len, (const char *)r.message.ptr);
	cua_wire_reply_free(&r);
	nng_free(rep, rlen);
	return status;
}

/* Explicit formats over raw messages: 4 takes only emulated-device images; an empty image is refused before
 * any loader (BAD_ARGUMENT); the connection keeps serving. */
START_TEST(explicit_formats_and_empty_image)
{
	if (strcmp(test_backend(), "emu") != 0)
		return;
	nng_socket s;
	ck_assert_int_eq(nng_req0_open(&s), 0);
	nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 10000);
	ck_assert_int_eq(nng_dial(s, D.url, NULL, 0), 0);
	struct cua_req_hello h = {1, 1, {"raw", 3}, 1};
	cua_wbuf b = {0};
	ck_assert_int_eq(cua_wire_pack_request(cua_wbuf_out(&b), CUA_OP_HELLO, 0, &h), 0);
	char *rep = NULL, msg[1024];
	size_t rlen = 0;
	ck_assert_int_eq(nng_send(s, b.data, b.len, 0), 0);
	ck_assert_int_eq(nng_recv(s, &rep, &rlen, NNG_FLAG_ALLOC), 0);
	nng_free(rep, rlen);
	cua_wbuf_free(&b);
	ck_assert_int_eq(raw_load(s, CUA_IMAGE_AUTO, "", 0, msg, sizeof(msg)), CUA_EBAD_ARGUMENT);
	ck_assert_int_eq(raw_load(s, CUA_IMAGE_EMU, "fill_u32\n", 9, msg, sizeof(msg)), CUA_EMODULE);
	ck_assert_msg(strstr(msg, "not an emulated-device image"), "%s", msg);
	ck_assert_int_eq(raw_load(s, CUA_IMAGE_FATBIN, good, sizeof(good) - 1, msg, sizeof(msg)), CUA_EMODULE);
	ck_assert_msg(strstr(msg, "fatbin: magic"), "%s", msg);
	ck_assert_int_eq(raw_load(s, CUA_IMAGE_CUBIN, good, sizeof(good) - 1, msg, sizeof(msg)), CUA_EMODULE);
	ck_assert_msg(strstr(msg, "cubin: ELF header truncated"), "%s", msg);
	static const char ptx[] = ".version 8.0\n.target sm_90\n.visible .entry k() { bogus; }\n";
	ck_assert_int_eq(raw_load(s, CUA_IMAGE_PTX, ptx, sizeof(ptx) - 1, msg, sizeof(msg)), CUA_EMODULE);
	ck_assert_msg(strstr(msg, "PTX: line 3: unknown kernel 'k'"), "%s", msg);
	ck_assert_int_eq(raw_load(s, CUA_IMAGE_EMU, good, sizeof(good) - 1, msg, sizeof(msg)), CUA_OK);
	nng_close(s);
}
END_TEST

/* The real nvcc output (when the build has it) loads through the emulated device with every kernel. */
START_TEST(nvcc_fatbin_and_ptx_load)
{
	static const char *const kernels[] = {"empty_kernel", "axpy", "fill_u32", "spin", "pdl_count", "bad_write"};
	static const char *const files[] = {"test_kernels.fatbin", "test_kernels.ptx"};
	cua_client *c = connect_to(&D);
	for (int i = 0; i < 2; i++) {
		char path[512];
		snprintf(path, sizeof(path), "%s/tests/kernels/%s", builddir(), files[i]);
		cua_module m;
		if (cua_module_load_file(c, 0, path, &m) == CUA_EBAD_ARGUMENT) {
			printf("no %s (built without nvcc): skipped\n", path);
			continue;
		}
		for (int k = 0; k < 6; k++)
			get_fn(c, m, kernels[k]);
		CK(cua_module_unload(c, m));
	}
	session_works(c);
	cua_disconnect(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("modules");
	TCase *tc = tcase_create("modules");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, corrupt_images_answer_module);
	tcase_add_test(tc, explicit_formats_and_empty_image);
	tcase_add_test(tc, nvcc_fatbin_and_ptx_load);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
