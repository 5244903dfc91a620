/* The emulated device's module loader (worker/emu_image.c), table-driven: which images load, with which
 * kernels, and what a refused one is told. The real fatbin and PTX of tests/kernels when nvcc built them. */
#include "config.h"

#include "cua_proto.h"
#include "emu_image.h"
#include "emu_kernels.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* emu_kernels.c runs kernels through the backend's memory view; the loader never calls it. */
void *
emu_ptr(struct emu *E, uint64_t addr, uint64_t len)
{
	return NULL;
}

#define ALL_KERNELS ((1ull << 6) - 1)
#define K(name) (1ull << emu_kernel_find(name, strlen(name)))
#define IMG(s) s, sizeof(s) - 1

struct image_case {
	const char *what;
	const char *img;
	size_t len;
	uint32_t fmt;
	uint64_t kernels; /* 0: refused */
	const char *msg;  /* a part of the refusal's message */
};

static const struct image_case cases[] = {
	{"emu, all", IMG("cuasync-emu-module\naxpy\nfill_u32\nempty_kernel\nspin\npdl_count\nbad_write\n"), 4,
	 ALL_KERNELS, NULL},
	{"emu, sniffed", IMG("cuasync-emu-module\nfill_u32"), CUA_IMAGE_AUTO, 0, NULL},
	{"emu, blank lines", IMG("cuasync-emu-module\n\nspin\n\n"), CUA_IMAGE_EMU, 0, NULL},
	{"emu, header only", IMG("cuasync-emu-module\n"), CUA_IMAGE_EMU, 0, "no kernel named"},
	{"emu, header no newline", IMG("cuasync-emu-module"), CUA_IMAGE_AUTO, 0, "no kernel named"},
	{"emu, unknown kernel", IMG("cuasync-emu-module\naxpy\nfoo\n"), CUA_IMAGE_EMU, 0,
	 "line 3: unknown kernel 'foo'"},
	{"emu, twice", IMG("cuasync-emu-module\naxpy\naxpy\n"), CUA_IMAGE_EMU, 0, "line 3: kernel 'axpy' named twice"},
	{"emu, space", IMG("cuasync-emu-module\naxpy fill_u32\n"), CUA_IMAGE_EMU, 0, "line 2: byte 0x20 at column 5"},
	{"emu, CRLF", IMG("cuasync-emu-module\r\naxpy\r\n"), CUA_IMAGE_EMU, 0, "first line must be"},
	{"emu, NUL", IMG("cuasync-emu-module\naxpy\0\n"), CUA_IMAGE_EMU, 0, "line 2: byte 0x00"},
	{"emu, wrong header", IMG("cuasync-emu-modules\naxpy\n"), CUA_IMAGE_EMU, 0, "not an emulated-device image"},
	{"emu, global", IMG("cuasync-emu-module\ncopy_u32\nglobal g_1 16\n"), CUA_IMAGE_EMU, 0, NULL},
	{"emu, const_copy and its global", IMG("cuasync-emu-module\nglobal const_data 1024\nconst_copy\n"),
	 CUA_IMAGE_EMU, 0, NULL},
	{"emu, const_copy without its global", IMG("cuasync-emu-module\nconst_copy\n"), CUA_IMAGE_EMU, 0,
	 "kernel 'const_copy' reads global 'const_data' of 1024 bytes"},
	{"emu, const_copy global too small", IMG("cuasync-emu-module\nconst_copy\nglobal const_data 1020\n"),
	 CUA_IMAGE_EMU, 0, "which the image does not declare"},
	{"emu, global twice", IMG("cuasync-emu-module\naxpy\nglobal g 4\nglobal g 8\n"), CUA_IMAGE_EMU, 0,
	 "line 4: global 'g' declared twice"},
	{"emu, global of 0 bytes", IMG("cuasync-emu-module\naxpy\nglobal g 0\n"), CUA_IMAGE_EMU, 0,
	 "line 3: global size must be 1..16777216"},
	{"emu, global too large", IMG("cuasync-emu-module\naxpy\nglobal g 16777217\n"), CUA_IMAGE_EMU, 0,
	 "global size must be"},
	{"emu, global without size", IMG("cuasync-emu-module\naxpy\nglobal g\n"), CUA_IMAGE_EMU, 0,
	 "expected 'global NAME BYTES'"},
	{"emu, global bad name", IMG("cuasync-emu-module\naxpy\nglobal g-x 4\n"), CUA_IMAGE_EMU, 0,
	 "expected 'global NAME BYTES'"},
	{"emu, global size not decimal", IMG("cuasync-emu-module\naxpy\nglobal g 0x10\n"), CUA_IMAGE_EMU, 0,
	 "global size must be"},
	{"emu, global and no kernel", IMG("cuasync-emu-module\nglobal g 4\n"), CUA_IMAGE_EMU, 0, "no kernel named"},
	{"emu, headerless list", IMG("fill_u32"), CUA_IMAGE_EMU, 0, "not an emulated-device image"},
	{"headerless list sniffed", IMG("spin fill_u32"), CUA_IMAGE_AUTO, 0, "no .version directive"},
	{"garbage text", IMG("hello, world\nthis is not a module\n"), CUA_IMAGE_AUTO, 0, "as PTX: no .version"},
	{"binary garbage", IMG("\x01\x02\x03garbage"), CUA_IMAGE_AUTO, 0, "not text: byte 0x01 at offset 0"},
	{"empty", "", 0, CUA_IMAGE_AUTO, 0, "empty module image"},
	{"ptx", IMG(".version 8.0\n.target sm_90\n.visible .entry fill_u32(\n.param .u64 p\n)\n{ ret; }\n"),
	 CUA_IMAGE_PTX, 0, NULL},
	{"ptx, NUL-terminated", ".version 8.0\n.entry spin()\n{ ret; }\n", 32, CUA_IMAGE_AUTO, 0, NULL},
	{"ptx, unknown entry", IMG(".version 8.0\n.target sm_90\n.visible .entry k() { bogus; }\n"), CUA_IMAGE_AUTO, 0,
	 "line 3: unknown kernel 'k'"},
	{"ptx, no entry", IMG(".version 8.0\n.target sm_90\n"), CUA_IMAGE_PTX, 0, "names no kernel"},
	{"ptx, entry in a comment", IMG(".version 8.0\n// .entry foo(\n"), CUA_IMAGE_PTX, 0, "names no kernel"},
	{"ptx, entry first", IMG(".entry axpy(\n.version 8.0\n"), CUA_IMAGE_PTX, 0, "before the .version"},
	{"fatbin, short", IMG("\x50\xed\x55\xba\x01\x00"), CUA_IMAGE_AUTO, 0, "fatbin header truncated (6 of 16"},
	{"fatbin, version", IMG("\x50\xed\x55\xba\x07\x00\x10\x00\x00\x00\x00\x00\x00\x00\x00\x00"), CUA_IMAGE_AUTO, 0,
	 "fatbin: version 7"},
	{"fatbin, no entries", IMG("\x50\xed\x55\xba\x01\x00\x10\x00\x00\x00\x00\x00\x00\x00\x00\x00"), CUA_IMAGE_AUTO,
	 0, "fatbin: no entries"},
	{"fatbin, truncated", IMG("\x50\xed\x55\xba\x01\x00\x10\x00\x00\x01\x00\x00\x00\x00\x00\x00xx"), CUA_IMAGE_AUTO,
	 0, "promises 256 bytes of entries, 2 follow"},
	{"fatbin, wrong magic", IMG("\x51\xed\x55\xba\x01\x00\x10\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
	 CUA_IMAGE_FATBIN, 0, "fatbin: magic 0xba55ed51"},
	{"cubin, header only",
	 IMG("\x7f"
	     "ELF\x02\x01\x01"),
	 CUA_IMAGE_AUTO, 0, "cubin: ELF header truncated (7 of 64"},
	{"format 9", IMG("cuasync-emu-module\naxpy\n"), 9, 0, "image format 9 unknown"},
};

START_TEST(image_table)
{
	const struct image_case *c = &cases[_i];
	uint64_t k = 12345;
	cua_err e = {0};
	int r = emu_image_check(c->img, c->len, c->fmt, &k, &e);
	if (c->msg == NULL) {
		ck_assert_msg(r == 0, "%s: refused: %s", c->what, e.detail);
		ck_assert_msg(k != 0 && (c->kernels == 0 || k == c->kernels), "%s: kernels 0x%llx", c->what,
			      (unsigned long long)k);
	} else {
		ck_assert_msg(r == CUA_EMODULE, "%s: answered %d (%s)", c->what, r, e.detail);
		ck_assert_msg(k == 0, "%s: kernels set on a refusal", c->what);
		ck_assert_msg(strstr(e.detail, c->msg) != NULL, "%s: message '%s' lacks '%s'", c->what, e.detail,
			      c->msg);
		ck_assert_msg(strncmp(e.detail, "emulated device: ", 17) == 0, "%s: message '%s'", c->what, e.detail);
	}
}
END_TEST

/* Reads the build's file; NULL (the case skips) when nvcc did not make it. */
static unsigned char *
slurp(const char *name, size_t *len)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/tests/kernels/%s", CUA_BUILDDIR, name);
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	rewind(f);
	unsigned char *p = malloc(*len + 1);
	ck_assert_uint_eq(fread(p, 1, *len, f), *len);
	fclose(f);
	return p;
}

/* The real fatbin and PTX load with all six kernels; any prefix of the fatbin is refused. */
START_TEST(nvcc_output_loads)
{
	static const char *const files[] = {"test_kernels.fatbin", "test_kernels.ptx"};
	for (size_t i = 0; i < 2; i++) {
		size_t len;
		unsigned char *p = slurp(files[i], &len);
		if (p == NULL) {
			printf("no %s (built without nvcc): skipped\n", files[i]);
			continue;
		}
		uint64_t k;
		cua_err e = {0};
		ck_assert_msg(emu_image_check(p, len, CUA_IMAGE_AUTO, &k, &e) == 0, "%s: %s", files[i], e.detail);
		ck_assert_uint_eq(k, ALL_KERNELS);
		for (size_t cut = 1; i == 0 && cut < len; cut += 97)
			ck_assert_int_eq(emu_image_check(p, cut, CUA_IMAGE_AUTO, &k, &e), CUA_EMODULE);
		free(p);
	}
}
END_TEST

/* emu_image_parse returns the globals in declaration order; a fatbin's cubin declares its __constant__ and
 * __device__ variables, so nvcc's build of feature_kernels.cu (const_copy reads the __constant__ const_data) loads
 * on the emulated device with const_data's 1024 bytes (what a program built with nvcc -cudart shared registers). */
START_TEST(globals_are_returned_in_order)
{
	static const char img[] = "cuasync-emu-module\naxpy\nglobal a 4\n\nglobal b_2 100\n";
	static struct emu_image_info info;
	cua_err e = {0};
	ck_assert_msg(emu_image_parse(img, sizeof(img) - 1, CUA_IMAGE_EMU, &info, &e) == 0, "%s", e.detail);
	ck_assert_uint_eq(info.nglobals, 2);
	ck_assert_str_eq(info.globals[0].name, "a");
	ck_assert_uint_eq(info.globals[0].bytes, 4);
	ck_assert_str_eq(info.globals[1].name, "b_2");
	ck_assert_uint_eq(info.globals[1].bytes, 100);
	size_t len;
	unsigned char *p = slurp("feature_kernels.fatbin", &len);
	if (p == NULL)
		return;
	ck_assert_msg(emu_image_parse(p, len, CUA_IMAGE_AUTO, &info, &e) == 0, "%s", e.detail);
	ck_assert_uint_ne(info.kernels & K("const_copy"), 0);
	ck_assert_uint_eq(info.nglobals, 1);
	ck_assert_str_eq(info.globals[0].name, "const_data");
	ck_assert_uint_eq(info.globals[0].bytes, 1024);
	free(p);
}
END_TEST

/* A fatbin entry header (16 bytes as the loader reads them, then padding to hs) and its payload. */
static size_t
put_entry(unsigned char *p, uint16_t kind, uint32_t hs, const char *payload, size_t len)
{
	memset(p, 0, hs);
	memcpy(p, &kind, 2);
	memcpy(p + 4, &hs, 4);
	uint64_t n = len;
	memcpy(p + 8, &n, 8);
	memcpy(p + hs, payload, len);
	return hs + len;
}

/* Entries for several targets name the same kernels; entries it cannot read (kind 7 here) are skipped. */
START_TEST(fatbin_entries_share_kernels)
{
	static const char ptx[] = ".version 8.0\n.target sm_90\n.visible .entry axpy(\n)\n{ ret; }\n";
	static unsigned char fb[1024];
	size_t off = 16;
	off += put_entry(fb + off, 1, 64, ptx, sizeof(ptx)); /* NUL-terminated */
	off += put_entry(fb + off, 7, 16, "\x01\x02", 2);
	off += put_entry(fb + off, 1, 80, ptx, sizeof(ptx) - 1);
	uint64_t size = off - 16;
	memcpy(fb, "\x50\xed\x55\xba\x01\x00\x10\x00", 8);
	memcpy(fb + 8, &size, 8);
	uint64_t k;
	cua_err e = {0};
	ck_assert_msg(emu_image_check(fb, off, CUA_IMAGE_AUTO, &k, &e) == 0, "%s", e.detail);
	ck_assert_uint_eq(k, K("axpy"));
	/* one byte short: the last entry overruns */
	ck_assert_int_eq(emu_image_check(fb, off - 1, CUA_IMAGE_FATBIN, &k, &e), CUA_EMODULE);
	ck_assert_msg(strstr(e.detail, "promises"), "%s", e.detail);
}
END_TEST

/* Random bytes behind each magic never load and never read out of bounds (under ASan in CI). */
START_TEST(random_images_are_refused)
{
	static const char *const magics[] = {"\x50\xed\x55\xba",
					     "\x7f"
					     "ELF",
					     "cuasync-emu-module\n", ""};
	unsigned seed = 4242;
	unsigned char buf[4096];
	for (size_t m = 0; m < 4; m++)
		for (int round = 0; round < 500; round++) {
			size_t hn = strlen(magics[m]), len = hn + (size_t)(rand_r(&seed) % (sizeof(buf) - hn));
			memcpy(buf, magics[m], hn);
			for (size_t i = hn; i < len; i++)
				buf[i] = (unsigned char)rand_r(&seed);
			uint64_t k;
			cua_err e = {0};
			ck_assert_int_eq(emu_image_check(buf, len, CUA_IMAGE_AUTO, &k, &e), CUA_EMODULE);
		}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("emu_image");
	TCase *tc = tcase_create("emu_image");
	tcase_add_loop_test(tc, image_table, 0, sizeof(cases) / sizeof(cases[0]));
	tcase_add_test(tc, nvcc_output_loads);
	tcase_add_test(tc, globals_are_returned_in_order);
	tcase_add_test(tc, fatbin_entries_share_kernels);
	tcase_add_test(tc, random_images_are_refused);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
