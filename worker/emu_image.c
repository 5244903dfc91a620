/*
 * emu_image.c — the emulated device's module loader: checks an image's structure strictly and finds the
 * built-in kernels it names. Anything it cannot read as a well-formed image answers CUA_EMODULE with a
 * message saying where and what, as a real loader's log would.
 */
#include "config.h"

#include "cua_proto.h"
#include "emu_image.h"
#include "emu_kernels.h"

#include <elf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FATBIN_MAGIC 0xba55ed50u
#define FATBIN_KIND_PTX 1u
#define FATBIN_KIND_ELF 2u
#define KERNEL_NAME_MAX 1024u
#define TEXT_PROBE 256u /* bytes of a fatbin PTX entry looked at to tell text from compressed data */

#define FAIL(e, ...) cua_err_set((e), CUA_EMODULE, "emulated device: " __VA_ARGS__)

static uint16_t
rd16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t
rd32(const unsigned char *p)
{
	return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16;
}

static uint64_t
rd64(const unsigned char *p)
{
	return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* Adds the kernel name[0..n) to *set. Fails (CUA_EMODULE) when it is not built in or already there. */
static int
add_kernel(const char *what, const char *where, const char *name, size_t n, uint64_t *set, cua_err *e)
{
	char known[256];
	int k = emu_kernel_find(name, n);
	int shown = n > 64 ? 64 : (int)n;
	if (k < 0)
		return FAIL(e, "%s: %sunknown kernel '%.*s%s' (built-in kernels: %s)", what, where, shown, name,
			    n > 64 ? "..." : "", emu_kernel_list(known, sizeof(known)));
	if (*set & (1ull << k))
		return FAIL(e, "%s: %skernel '%.*s' named twice", what, where, shown, name);
	*set |= 1ull << k;
	return 0;
}

static bool
is_name_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* "global NAME BYTES" (after the "global " that s[0..n) starts with): a module global of BYTES bytes. */
static int
emu_global_line(const unsigned char *s, size_t n, const char *where, struct emu_image_info *info, cua_err *e)
{
	static const char what[] = "emulated-device image";
	size_t i = 7, name0, namelen;
	uint64_t bytes = 0;
	for (name0 = i; i < n && is_name_char(s[i]); i++)
		;
	namelen = i - name0;
	if (namelen == 0 || namelen > EMU_GLOBAL_NAME_MAX || i >= n || s[i] != ' ' || i + 1 == n)
		return FAIL(e, "%s: %sexpected 'global NAME BYTES' (NAME [A-Za-z0-9_]{1,%u}, BYTES 1..%u)", what, where,
			    EMU_GLOBAL_NAME_MAX, EMU_GLOBAL_BYTES_MAX);
	for (i++; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || (bytes = bytes * 10 + (s[i] - '0')) > EMU_GLOBAL_BYTES_MAX)
			return FAIL(e, "%s: %sglobal size must be 1..%u decimal bytes", what, where,
				    EMU_GLOBAL_BYTES_MAX);
	}
	if (bytes == 0)
		return FAIL(e, "%s: %sglobal size must be 1..%u decimal bytes", what, where, EMU_GLOBAL_BYTES_MAX);
	for (uint32_t g = 0; g < info->nglobals; g++)
		if (strlen(info->globals[g].name) == namelen && memcmp(info->globals[g].name, s + name0, namelen) == 0)
			return FAIL(e, "%s: %sglobal '%.*s' declared twice", what, where, (int)namelen, s + name0);
	if (info->nglobals == EMU_GLOBALS_MAX)
		return FAIL(e, "%s: %smore than %u globals", what, where, EMU_GLOBALS_MAX);
	struct emu_global_decl *d = &info->globals[info->nglobals++];
	memcpy(d->name, s + name0, namelen);
	d->name[namelen] = '\0';
	d->bytes = bytes;
	return 0;
}

/* One line after the header of an emulated-device image: empty, one built-in kernel name, or a global. */
static int
emu_line(const unsigned char *s, size_t n, unsigned line, struct emu_image_info *info, cua_err *e)
{
	char where[32];
	uint64_t *set = &info->kernels;
	snprintf(where, sizeof(where), "line %u: ", line);
	if (n > 7 && memcmp(s, "global ", 7) == 0)
		return emu_global_line(s, n, where, info, e);
	for (size_t i = 0; i < n; i++)
		if (!is_name_char(s[i]))
			return FAIL(e,
				    "emulated-device image: %sbyte 0x%02x at column %zu (a line holds one kernel name, "
				    "[A-Za-z0-9_]+)",
				    where, s[i], i + 1);
	return n == 0 ? 0 : add_kernel("emulated-device image", where, (const char *)s, n, set, e);
}

/* Format 4: the header line, then one built-in kernel name per line (empty lines allowed). */
static int
check_emu(const unsigned char *p, size_t len, struct emu_image_info *info, cua_err *e)
{
	static const char hdr[] = EMU_IMAGE_HEADER;
	const size_t hn = sizeof(hdr) - 1;
	if (len > EMU_IMAGE_MAX)
		return FAIL(e, "emulated-device image: %zu bytes, more than %u", len, EMU_IMAGE_MAX);
	if (len < hn || memcmp(p, hdr, hn) != 0 || (len > hn && p[hn] != '\n'))
		return FAIL(e, "not an emulated-device image: the first line must be '%s'", hdr);
	size_t off = len > hn ? hn + 1 : hn;
	for (unsigned line = 2; off < len; line++) {
		const unsigned char *eol = memchr(p + off, '\n', len - off);
		size_t n = (eol ? (size_t)(eol - p) : len) - off;
		int r = emu_line(p + off, n, line, info, e);
		if (r != 0)
			return r;
		off += n + 1;
	}
	if (info->kernels == 0)
		return FAIL(e, "emulated-device image: no kernel named after the header line");
	return 0;
}

/* Text as PTX is: tab, CR, LF, printable ASCII, or any byte >= 0x80 (UTF-8 in comments and file names). */
static bool
is_text_byte(unsigned char c)
{
	return c == '\t' || c == '\n' || c == '\r' || (c >= 0x20 && c != 0x7f);
}

/* The name after a ".entry" directive of one PTX line s[0..n), if the line has one. */
static bool
ptx_entry(const unsigned char *s, size_t n, const char **name, size_t *nlen)
{
	static const char dir[] = ".entry";
	for (size_t i = 0; i + sizeof(dir) - 1 < n; i++) {
		if (memcmp(s + i, dir, sizeof(dir) - 1) != 0 || (i > 0 && s[i - 1] != ' ' && s[i - 1] != '\t'))
			continue;
		size_t j = i + sizeof(dir) - 1;
		if (s[j] != ' ' && s[j] != '\t')
			continue;
		while (j < n && (s[j] == ' ' || s[j] == '\t'))
			j++;
		size_t k = j;
		while (k < n && (is_name_char(s[k]) || s[k] == '$'))
			k++;
		*name = (const char *)s + j;
		*nlen = k - j;
		return true;
	}
	return false;
}

/* One PTX line (comment already cut): notes .version, checks an .entry's kernel. */
static int
ptx_line(const char *what, const unsigned char *s, size_t n, unsigned line, bool *version, uint64_t *set, cua_err *e)
{
	char where[32];
	const char *name;
	size_t nlen;
	while (n > 0 && (*s == ' ' || *s == '\t'))
		s++, n--;
	if (n >= 8 && memcmp(s, ".version", 8) == 0)
		*version = true;
	if (!ptx_entry(s, n, &name, &nlen))
		return 0;
	snprintf(where, sizeof(where), "line %u: ", line);
	if (!*version)
		return FAIL(e, "%s: %s.entry before the .version directive", what, where);
	if (nlen == 0 || nlen > KERNEL_NAME_MAX)
		return FAIL(e, "%s: %s.entry without a valid kernel name", what, where);
	return add_kernel(what, where, name, nlen, set, e);
}

/* PTX text: a .version directive, then .entry directives that each name a built-in kernel. Trailing NULs
 * (a NUL-terminated string, a fatbin entry's padding) end the text. */
static int
check_ptx(const unsigned char *p, size_t len, const char *what, uint64_t *set, cua_err *e)
{
	while (len > 0 && p[len - 1] == '\0')
		len--;
	for (size_t i = 0; i < len; i++)
		if (!is_text_byte(p[i]))
			return FAIL(e, "%s: not text: byte 0x%02x at offset %zu", what, p[i], i);
	bool version = false;
	size_t off = 0;
	for (unsigned line = 1; off < len; line++) {
		const unsigned char *eol = memchr(p + off, '\n', len - off);
		size_t n = (eol ? (size_t)(eol - p) : len) - off;
		const unsigned char *c = n >= 2 ? memmem(p + off, n, "//", 2) : NULL;
		int r = ptx_line(what, p + off, c ? (size_t)(c - (p + off)) : n, line, &version, set, e);
		if (r != 0)
			return r;
		off += n + 1;
	}
	if (!version)
		return FAIL(e, "%s: no .version directive", what);
	return 0;
}

/* The section header i of an ELF whose table was checked to lie inside p. */
static Elf64_Shdr
elf_section(const unsigned char *p, const Elf64_Ehdr *h, size_t i)
{
	Elf64_Shdr s;
	memcpy(&s, p + h->e_shoff + i * sizeof(s), sizeof(s));
	return s;
}

static int
check_elf_header(const unsigned char *p, size_t len, const char *what, Elf64_Ehdr *h, cua_err *e)
{
	if (len < sizeof(*h))
		return FAIL(e, "%s: ELF header truncated (%zu of %zu bytes)", what, len, sizeof(*h));
	memcpy(h, p, sizeof(*h));
	if (memcmp(h->e_ident, ELFMAG, SELFMAG) != 0)
		return FAIL(e, "%s: no ELF magic", what);
	if (h->e_ident[EI_CLASS] != ELFCLASS64 || h->e_ident[EI_DATA] != ELFDATA2LSB)
		return FAIL(e, "%s: not a 64-bit little-endian ELF", what);
	if (h->e_machine != EM_CUDA)
		return FAIL(e, "%s: ELF machine %u is not CUDA (%u)", what, h->e_machine, EM_CUDA);
	if (h->e_shentsize != sizeof(Elf64_Shdr) || h->e_shnum == 0 || h->e_shoff > len ||
	    h->e_shnum > (len - h->e_shoff) / sizeof(Elf64_Shdr))
		return FAIL(e, "%s: section header table out of bounds", what);
	if (h->e_shstrndx >= h->e_shnum)
		return FAIL(e, "%s: section name table index %u out of range", what, h->e_shstrndx);
	return 0;
}

/* The module globals of a cubin: its symbol table's objects in .nv.constant3 (__constant__) and .nv.global*
 * (__device__), by name and size, added to info (once per name across a fatbin's entries: the largest size).
 * Symbols whose names are not [A-Za-z0-9_]{1,128} are not addressable by MODULE_GET_GLOBAL and are left out. */
static int
cubin_globals(const unsigned char *p, const Elf64_Ehdr *h, const char *names, const Elf64_Shdr *symtab,
	      const char *what, struct emu_image_info *info, cua_err *e)
{
	if (symtab->sh_entsize != sizeof(Elf64_Sym) || symtab->sh_link >= h->e_shnum)
		return FAIL(e, "%s: symbol table entry size %llu or string table %u unusable", what,
			    (unsigned long long)symtab->sh_entsize, symtab->sh_link);
	Elf64_Shdr strs = elf_section(p, h, symtab->sh_link);
	if (strs.sh_type == SHT_NOBITS || strs.sh_size == 0)
		return FAIL(e, "%s: symbol string table empty", what);
	const char *str = (const char *)p + strs.sh_offset;
	for (size_t i = 0; i < symtab->sh_size / sizeof(Elf64_Sym); i++) {
		Elf64_Sym sym;
		memcpy(&sym, p + symtab->sh_offset + i * sizeof(sym), sizeof(sym));
		if (ELF64_ST_TYPE(sym.st_info) != STT_OBJECT || sym.st_size == 0 || sym.st_shndx >= h->e_shnum)
			continue;
		const char *sec = names + elf_section(p, h, sym.st_shndx).sh_name; /* checked by check_cubin */
		if (strcmp(sec, ".nv.constant3") != 0 && strncmp(sec, ".nv.global", 10) != 0)
			continue;
		if (sym.st_name >= strs.sh_size || memchr(str + sym.st_name, '\0', strs.sh_size - sym.st_name) == NULL)
			return FAIL(e, "%s: symbol %zu: name out of bounds", what, i);
		const char *name = str + sym.st_name;
		size_t n = strlen(name), k = 0;
		while (k < n && is_name_char((unsigned char)name[k]))
			k++;
		if (n == 0 || k < n || n > EMU_GLOBAL_NAME_MAX)
			continue;
		if (sym.st_size > EMU_GLOBAL_BYTES_MAX)
			return FAIL(e, "%s: global '%s' of %llu bytes exceeds %u", what, name,
				    (unsigned long long)sym.st_size, EMU_GLOBAL_BYTES_MAX);
		uint32_t g = 0;
		while (g < info->nglobals && strcmp(info->globals[g].name, name) != 0)
			g++;
		if (g == EMU_GLOBALS_MAX)
			return FAIL(e, "%s: more than %u globals", what, EMU_GLOBALS_MAX);
		if (g == info->nglobals) {
			info->nglobals++;
			memcpy(info->globals[g].name, name, n + 1);
			info->globals[g].bytes = 0;
		}
		if (sym.st_size > info->globals[g].bytes)
			info->globals[g].bytes = sym.st_size;
	}
	return 0;
}

/* A cubin (CUDA ELF): every section inside the image; each kernel (a .nv.info.NAME section) built in; its
 * __constant__ and __device__ variables declared as module globals. */
static int
check_cubin(const unsigned char *p, size_t len, const char *what, uint64_t *set, struct emu_image_info *info,
	    cua_err *e)
{
	static const char nvinfo[] = ".nv.info.";
	Elf64_Ehdr h;
	int r = check_elf_header(p, len, what, &h, e);
	if (r != 0)
		return r;
	Elf64_Shdr str = elf_section(p, &h, h.e_shstrndx);
	if (str.sh_offset > len || str.sh_size > len - str.sh_offset || str.sh_size == 0)
		return FAIL(e, "%s: section name table out of bounds", what);
	const char *names = (const char *)p + str.sh_offset;
	for (size_t i = 0; i < h.e_shnum; i++) {
		Elf64_Shdr s = elf_section(p, &h, i);
		if (s.sh_name >= str.sh_size || memchr(names + s.sh_name, '\0', str.sh_size - s.sh_name) == NULL)
			return FAIL(e, "%s: section %zu: name out of bounds", what, i);
		const char *name = names + s.sh_name;
		if (s.sh_type != SHT_NOBITS && (s.sh_offset > len || s.sh_size > len - s.sh_offset))
			return FAIL(e, "%s: section %zu '%.64s' out of bounds", what, i, name);
		if (strncmp(name, nvinfo, sizeof(nvinfo) - 1) == 0 &&
		    (r = add_kernel(what, "", name + sizeof(nvinfo) - 1, strlen(name + sizeof(nvinfo) - 1), set, e)) !=
			    0)
			return r;
	}
	for (size_t i = 0; i < h.e_shnum; i++) {
		Elf64_Shdr s = elf_section(p, &h, i);
		if (s.sh_type == SHT_SYMTAB && (r = cubin_globals(p, &h, names, &s, what, info, e)) != 0)
			return r;
	}
	return 0;
}

/* A fatbin PTX entry is read only when stored as text (a compressed one is skipped). */
static bool
looks_like_text(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len && i < TEXT_PROBE; i++)
		if (!is_text_byte(p[i]))
			return p[i] == '\0' && i > 0; /* the end of a short NUL-terminated text */
	return len > 0;
}

/* One fatbin entry at p[off..end): checks its bounds, reads its kernels, sets *next. *skipped counts the
 * entries it could not read (compressed, or of another kind). */
static int
fatbin_entry(const unsigned char *p, size_t off, size_t end, unsigned n, size_t *next, unsigned *skipped, uint64_t *set,
	     struct emu_image_info *info, cua_err *e)
{
	char what[48];
	if (end - off < 16)
		return FAIL(e, "fatbin entry %u: header truncated (%zu of 16 bytes)", n, end - off);
	uint16_t kind = rd16(p + off);
	uint32_t hs = rd32(p + off + 4);
	uint64_t size = rd64(p + off + 8);
	if (hs < 16 || hs > end - off)
		return FAIL(e, "fatbin entry %u: header size %u out of range", n, hs);
	if (size > end - off - hs)
		return FAIL(e, "fatbin entry %u: %llu payload bytes overrun the fatbin (%zu left)", n,
			    (unsigned long long)size, end - off - hs);
	const unsigned char *pl = p + off + hs;
	uint64_t own = 0; /* entries for several targets name the same kernels */
	int r = 0;
	*next = off + hs + (size_t)size;
	if (kind == FATBIN_KIND_ELF && size >= SELFMAG && memcmp(pl, ELFMAG, SELFMAG) == 0) {
		snprintf(what, sizeof(what), "fatbin entry %u (cubin)", n);
		r = check_cubin(pl, (size_t)size, what, &own, info, e);
	} else if (kind == FATBIN_KIND_PTX && looks_like_text(pl, (size_t)size)) {
		snprintf(what, sizeof(what), "fatbin entry %u (PTX)", n);
		r = check_ptx(pl, (size_t)size, what, &own, e);
	} else
		(*skipped)++;
	*set |= own;
	return r;
}

/* A fatbin: its header, then entries that exactly fill the size it gives. */
static int
check_fatbin(const unsigned char *p, size_t len, uint64_t *set, struct emu_image_info *info, cua_err *e)
{
	if (len < 16)
		return FAIL(e, "fatbin header truncated (%zu of 16 bytes)", len);
	if (rd32(p) != FATBIN_MAGIC)
		return FAIL(e, "fatbin: magic 0x%08x, not 0x%08x", rd32(p), FATBIN_MAGIC);
	uint16_t version = rd16(p + 4), hs = rd16(p + 6);
	uint64_t size = rd64(p + 8);
	if (version != 1)
		return FAIL(e, "fatbin: version %u not supported (1)", version);
	if (hs < 16 || hs > len)
		return FAIL(e, "fatbin: header size %u out of range (16..%zu)", hs, len);
	if (size > len - hs)
		return FAIL(e, "fatbin truncated: the header promises %llu bytes of entries, %zu follow",
			    (unsigned long long)size, len - hs);
	unsigned n = 0, skipped = 0;
	for (size_t off = hs, end = hs + (size_t)size; off < end;) {
		int r = fatbin_entry(p, off, end, ++n, &off, &skipped, set, info, e);
		if (r != 0)
			return r;
	}
	if (n == 0)
		return FAIL(e, "fatbin: no entries");
	if (*set == 0)
		return FAIL(e, "fatbin: no readable entry names a kernel (%u compressed or unknown entries skipped)",
			    skipped);
	return 0;
}

static uint32_t
sniff(const unsigned char *p, size_t len)
{
	if (len >= 4 && rd32(p) == FATBIN_MAGIC)
		return CUA_IMAGE_FATBIN;
	if (len >= SELFMAG && memcmp(p, ELFMAG, SELFMAG) == 0)
		return CUA_IMAGE_CUBIN;
	if (len >= sizeof(EMU_IMAGE_HEADER) - 1 && memcmp(p, EMU_IMAGE_HEADER, sizeof(EMU_IMAGE_HEADER) - 1) == 0)
		return CUA_IMAGE_EMU;
	return CUA_IMAGE_PTX;
}

/* Every kernel that reads a module global finds it declared, with room for what it reads. */
static int
check_kernel_globals(const struct emu_image_info *info, cua_err *e)
{
	for (size_t k = 0; k < emu_nkernels; k++) {
		const struct emu_kernel *K = &emu_kernels[k];
		if (!(info->kernels & (1ull << k)) || K->global == NULL)
			continue;
		uint32_t g = 0;
		while (g < info->nglobals && strcmp(info->globals[g].name, K->global) != 0)
			g++;
		if (g == info->nglobals || info->globals[g].bytes < K->global_bytes)
			return FAIL(e, "kernel '%s' reads global '%s' of %u bytes, which the image does not declare",
				    K->name, K->global, K->global_bytes);
	}
	return 0;
}

int
emu_image_check(const void *img, size_t len, uint32_t fmt, uint64_t *kernels, cua_err *e)
{
	struct emu_image_info *info = malloc(sizeof(*info)); /* 9 KiB: not on a thread's stack */
	int r = info ? emu_image_parse(img, len, fmt, info, e) : cua_err_set(e, CUA_ENOMEM, "out of host memory");
	*kernels = r == 0 ? info->kernels : 0;
	free(info);
	return r;
}

int
emu_image_parse(const void *img, size_t len, uint32_t fmt, struct emu_image_info *info, cua_err *e)
{
	const unsigned char *p = img;
	uint64_t set = 0;
	int r;
	memset(info, 0, sizeof(*info));
	if (len == 0)
		return FAIL(e, "empty module image");
	uint32_t f = fmt == CUA_IMAGE_AUTO ? sniff(p, len) : fmt;
	switch (f) {
	case CUA_IMAGE_EMU:
		r = check_emu(p, len, info, e);
		set = info->kernels;
		break;
	case CUA_IMAGE_FATBIN: r = check_fatbin(p, len, &set, info, e); break;
	case CUA_IMAGE_CUBIN: r = check_cubin(p, len, "cubin", &set, info, e); break;
	case CUA_IMAGE_PTX:
		r = check_ptx(p, len,
			      fmt == CUA_IMAGE_AUTO ? "not a fatbin, cubin or emulated-device image; as PTX" : "PTX",
			      &set, e);
		break;
	default: r = FAIL(e, "image format %u unknown", f); break;
	}
	if (r == 0 && set == 0)
		r = FAIL(e, "the module names no kernel");
	info->kernels = r == 0 ? set : 0;
	if (r == 0 && (r = check_kernel_globals(info, e)) != 0)
		info->kernels = 0;
	return r;
}
