/*
 * emu_image.h — which module images the emulated device accepts and which built-in kernels an image names
 * (the format is specified in proto/PROTOCOL.md, "The emulated device"). Pure functions of the bytes: no
 * device state, any thread.
 */
#ifndef CUAW_EMU_IMAGE_H
#define CUAW_EMU_IMAGE_H

#include "cua_error.h"

#include <stddef.h>
#include <stdint.h>

/* The first line of an emulated-device image (format 4), and the most bytes such an image may have. */
#define EMU_IMAGE_HEADER "cuasync-emu-module"
#define EMU_IMAGE_MAX (64u << 10)

/*
 * Checks img (len bytes, borrowed) as a module of format fmt (CUA_IMAGE_*; CUA_IMAGE_AUTO sniffs it) for the
 * emulated device: an emulated-device image, or a fatbin, cubin or PTX whose kernels are all built in. Sets
 * *kernels to the set of built-in kernels it names (bit k: emu_kernels[k]). Returns 0, or CUA_EMODULE with a
 * loader-style message in e ("emulated device: <format>: <what is wrong>"), *kernels then 0. An image that
 * names no kernel is refused.
 */
int emu_image_check(const void *img, size_t len, uint32_t fmt, uint64_t *kernels, cua_err *e);

/* Module globals an emulated-device image declares ("global NAME BYTES" lines; other formats declare none). */
#define EMU_GLOBALS_MAX 64u
#define EMU_GLOBAL_NAME_MAX 128u
#define EMU_GLOBAL_BYTES_MAX (16u << 20)
struct emu_global_decl {
	char name[EMU_GLOBAL_NAME_MAX + 1];
	uint64_t bytes; /* 1..EMU_GLOBAL_BYTES_MAX */
};
struct emu_image_info {
	uint64_t kernels; /* bit k: emu_kernels[k] */
	uint32_t nglobals;
	struct emu_global_decl globals[EMU_GLOBALS_MAX];
};

/* emu_image_check, also returning the globals the image declares, in *info (zeroed first). A kernel that reads
 * a module global (emu_kernel.global) needs it declared with room for its reads, else CUA_EMODULE. */
int emu_image_parse(const void *img, size_t len, uint32_t fmt, struct emu_image_info *info, cua_err *e);

#endif
