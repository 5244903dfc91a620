/*
 * drv_module.c — modules, functions, their attributes and launches. A launch's arguments are sized by the
 * kernel's parameter layout the daemon reports (cua_function_get_params), fetched once per CUfunction.
 */
#include "config.h"

#include "drv.h"

#include "cua_tsa.h"
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static cua_mutex funcs_lock = PTHREAD_MUTEX_INITIALIZER; /* guards every module's funcs/nfuncs */

#define FATBIN_MAGIC 0xBA55ED50u  /* a fat binary's header */
#define FATBINC_MAGIC 0x466243b1u /* __fatBinC_Wrapper_t, what nvcc embeds around it */

struct fatbin_header {
	uint32_t magic;
	uint16_t version, header_size;
	uint64_t fat_size; /* bytes after the header */
};
struct fatbinc_wrapper {
	int magic, version;
	const unsigned long long *data;
	void *filename_or_fatbins;
};

/* The length of an image given without one (cuModuleLoadData): a fat binary's from its header, an ELF
 * cubin's from its section and program header tables and sections, text (PTX, the emulated device's image)
 * up to its NUL, which is left out (the emulated device's format has none; the worker terminates PTX itself). *img may move to the fat binary a wrapper points at. */
static size_t
image_length(const void **img)
{
	const unsigned char *p = *img;
	uint32_t magic;
	memcpy(&magic, p, sizeof(magic));
	if (magic == FATBINC_MAGIC) {
		struct fatbinc_wrapper w;
		memcpy(&w, p, sizeof(w));
		if (w.data == NULL)
			return 0;
		*img = w.data;
		p = *img;
		memcpy(&magic, p, sizeof(magic));
	}
	if (magic == FATBIN_MAGIC) {
		struct fatbin_header h;
		memcpy(&h, p, sizeof(h));
		return (size_t)h.header_size + (size_t)h.fat_size;
	}
	if (memcmp(p, ELFMAG, SELFMAG) == 0 && p[EI_CLASS] == ELFCLASS64) {
		Elf64_Ehdr eh;
		memcpy(&eh, p, sizeof(eh));
		size_t end = sizeof(eh);
		size_t sh_end = (size_t)eh.e_shoff + (size_t)eh.e_shnum * eh.e_shentsize;
		size_t ph_end = (size_t)eh.e_phoff + (size_t)eh.e_phnum * eh.e_phentsize;
		end = sh_end > end ? sh_end : end;
		end = ph_end > end ? ph_end : end;
		for (unsigned i = 0; eh.e_shentsize >= sizeof(Elf64_Shdr) && i < eh.e_shnum; i++) {
			Elf64_Shdr sh;
			memcpy(&sh, p + eh.e_shoff + (size_t)i * eh.e_shentsize, sizeof(sh));
			if (sh.sh_type != SHT_NOBITS && sh.sh_offset + sh.sh_size > end)
				end = (size_t)(sh.sh_offset + sh.sh_size);
		}
		return end;
	}
	return strlen((const char *)p);
}

static CUresult
module_new(cua_module m, CUmodule *out)
{
	struct drv_obj *o = calloc(1, sizeof(*o));
	uint64_t h = 0;
	if (o != NULL) {
		o->kind = DRV_MODULE;
		o->u.mod.m = m;
		h = drv_handle_new(o);
	}
	if (h == 0) {
		free(o);
		cua_client *c;
		if (drv_client(&c) == CUDA_SUCCESS)
			(void)cua_module_unload(c, m);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*out = (CUmodule)(uintptr_t)h;
	return CUDA_SUCCESS;
}

/* Loads image (length len, 0: found from the image) on the current context's device. */
static CUresult
module_load(CUmodule *module, const void *image, size_t len)
{
	cua_client *c;
	int dev;
	CUresult r = drv_current(&c, &dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (module == NULL || image == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	if (len == 0 && (len = image_length(&image)) == 0)
		return CUDA_ERROR_INVALID_IMAGE;
	cua_module m;
	int st = cua_module_load(c, dev, image, len, &m);
	return st != CUA_OK ? drv_result(st) : module_new(m, module);
}

CUresult CUDAAPI
cuModuleLoadData(CUmodule *module, const void *image)
{
	return module_load(module, image, 0);
}

/* JIT options are hints to NVIDIA's JIT, which runs in the daemon's worker: ignored, except that the error log
 * buffer receives the daemon's message when the image is refused. */
CUresult CUDAAPI
cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions, CUjit_option *options,
		   void **optionValues)
{
	CUresult r = module_load(module, image, 0);
	char *log = NULL;
	size_t log_len = 0;
	for (unsigned i = 0; r != CUDA_SUCCESS && options != NULL && optionValues != NULL && i < numOptions; i++) {
		if (options[i] == CU_JIT_ERROR_LOG_BUFFER)
			log = optionValues[i];
		else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
			log_len = (size_t)(uintptr_t)optionValues[i];
	}
	if (log != NULL && log_len > 0)
		snprintf(log, log_len, "%s", cua_last_error());
	return r;
}

CUresult CUDAAPI
cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	return module_load(module, fatCubin, 0);
}

CUresult CUDAAPI
cuModuleLoad(CUmodule *module, const char *fname)
{
	cua_client *c;
	int dev;
	CUresult r = drv_current(&c, &dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (module == NULL || fname == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	if (access(fname, R_OK) != 0)
		return CUDA_ERROR_FILE_NOT_FOUND;
	cua_module m;
	int st = cua_module_load_file(c, dev, fname, &m);
	return st != CUA_OK ? drv_result(st) : module_new(m, module);
}

static void
func_free(struct drv_obj *o)
{
	if (o == NULL)
		return;
	free(o->u.fn.offsets);
	free(o->u.fn.sizes);
	free(o);
}

CUresult CUDAAPI
cuModuleUnload(CUmodule hmod)
{
	cua_client *c;
	struct drv_obj *o;
	CUresult r = drv_object((uintptr_t)hmod, DRV_MODULE, true, &c, &o);
	if (r != CUDA_SUCCESS)
		return r;
	r = drv_result(cua_module_unload(c, o->u.mod.m));
	cua_mutex_lock(&funcs_lock);
	for (size_t i = 0; i < o->u.mod.nfuncs; i++)
		func_free(drv_handle_take(o->u.mod.funcs[i], DRV_FUNCTION));
	cua_mutex_unlock(&funcs_lock);
	free(o->u.mod.funcs);
	free(o);
	return r;
}

CUresult CUDAAPI
cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	cua_client *c;
	CUresult r = drv_client(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (hfunc == NULL || name == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	struct drv_obj *mod = drv_handle_get((uintptr_t)hmod, DRV_MODULE);
	if (mod == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	struct drv_obj *o = calloc(1, sizeof(*o));
	uint64_t h = 0;
	if (o == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	o->kind = DRV_FUNCTION;
	int st = cua_module_get_function(c, mod->u.mod.m, name, &o->u.fn.f);
	if (st == CUA_OK)
		st = cua_function_get_params(c, o->u.fn.f, &o->u.fn.n, NULL, NULL);
	if (st == CUA_OK) {
		o->u.fn.offsets = calloc(o->u.fn.n + 1, sizeof(uint32_t));
		o->u.fn.sizes = calloc(o->u.fn.n + 1, sizeof(uint32_t));
		st = o->u.fn.offsets != NULL && o->u.fn.sizes != NULL
			     ? cua_function_get_params(c, o->u.fn.f, &o->u.fn.n, o->u.fn.offsets, o->u.fn.sizes)
			     : CUA_ENOMEM;
	}
	if (st != CUA_OK) {
		r = st == CUA_ENOT_FOUND ? CUDA_ERROR_NOT_FOUND : drv_result(st);
		goto out;
	}
	cua_mutex_lock(&funcs_lock);
	uint64_t *grown = realloc(mod->u.mod.funcs, (mod->u.mod.nfuncs + 1) * sizeof(uint64_t));
	if (grown != NULL) {
		mod->u.mod.funcs = grown;
		if ((h = drv_handle_new(o)) != 0)
			mod->u.mod.funcs[mod->u.mod.nfuncs++] = h;
	}
	cua_mutex_unlock(&funcs_lock);
	if (h == 0) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	o = NULL; /* the map's */
	*hfunc = (CUfunction)(uintptr_t)h;
	r = CUDA_SUCCESS;
out:
	func_free(o);
	return r;
}

CUresult CUDAAPI
cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
	cua_client *c;
	CUresult r = drv_client(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (name == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	struct drv_obj *mod = drv_handle_get((uintptr_t)hmod, DRV_MODULE);
	if (mod == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	cua_deviceptr p = 0;
	size_t n = 0;
	int st = cua_module_get_global(c, mod->u.mod.m, name, &p, &n);
	if (st != CUA_OK)
		return st == CUA_ENOT_FOUND ? CUDA_ERROR_NOT_FOUND : drv_result(st);
	if (dptr != NULL)
		*dptr = (CUdeviceptr)p;
	if (bytes != NULL)
		*bytes = n;
	return CUDA_SUCCESS;
}

static CUresult
function(CUfunction hfunc, cua_client **c, struct drv_obj **o)
{
	return drv_object((uintptr_t)hfunc, DRV_FUNCTION, false, c, o);
}

CUresult CUDAAPI
cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
	cua_client *c;
	struct drv_obj *o;
	CUresult r = function(hfunc, &c, &o);
	if (r == CUDA_SUCCESS && pi == NULL)
		r = CUDA_ERROR_INVALID_VALUE;
	return r != CUDA_SUCCESS ? r : drv_result(cua_func_get_attribute(c, o->u.fn.f, (cua_func_attribute)attrib, pi));
}

CUresult CUDAAPI
cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
	cua_client *c;
	struct drv_obj *o;
	CUresult r = function(hfunc, &c, &o);
	return r != CUDA_SUCCESS ? r
				 : drv_result(cua_func_set_attribute(c, o->u.fn.f, (cua_func_attribute)attrib, value));
}

/* A cache preference the driver may ignore (CUDA says so): accepted and ignored. */
CUresult CUDAAPI
cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
	cua_client *c;
	struct drv_obj *o;
	return function(hfunc, &c, &o);
}

/* The daemon's OCCUPANCY takes no flags: CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE is accepted and the answer is
 * CUDA's default behaviour's. */
#define DRV_OCCUPANCY_FLAGS ((unsigned)(CU_OCCUPANCY_DEFAULT | CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE))

CUresult CUDAAPI
cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func, int blockSize,
						     size_t dynamicSMemSize, unsigned int flags)
{
	cua_client *c;
	struct drv_obj *o;
	CUresult r = function(func, &c, &o);
	if (r == CUDA_SUCCESS && (numBlocks == NULL || blockSize <= 0 || (flags & ~DRV_OCCUPANCY_FLAGS)))
		r = CUDA_ERROR_INVALID_VALUE;
	return r != CUDA_SUCCESS ? r
				 : drv_result(cua_occupancy_max_active_blocks(c, o->u.fn.f, (unsigned)blockSize,
									      dynamicSMemSize, numBlocks));
}

CUresult CUDAAPI
cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize)
{
	return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize, dynamicSMemSize,
								    CU_OCCUPANCY_DEFAULT);
}

/* The device's limits the search needs, in the order of CUDA's: threads per multiprocessor, warp size, threads per
 * block, multiprocessors (cuDeviceGetAttribute: the GPU's own, through the daemon). */
static const CUdevice_attribute occupancy_limits[] = {
	CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
	CU_DEVICE_ATTRIBUTE_WARP_SIZE,
	CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
	CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
};

/* CUDA's search (cuda_runtime.h, cudaOccupancyMaxPotentialBlockSizeVariableSMemWithFlags): from the largest block
 * size the device, the function and blockSizeLimit allow, down by a warp, the one whose blocks × threads per
 * multiprocessor is greatest — a tie keeps the larger block — with the dynamic shared memory the callback gives
 * for that size (dynamicSMemSize without one; more than the device's opt-in maximum fits no block), stopping
 * once a size fills the multiprocessor. The daemon answers each size's occupancy, so the result is the GPU's own.
 * minGridSize: the chosen size's blocks per multiprocessor × multiprocessors. */
CUresult CUDAAPI
cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize, CUfunction func,
					  CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize,
					  int blockSizeLimit, unsigned int flags)
{
	cua_client *c;
	int dev, func_max = 0, lim[4] = {0};
	const cua_device_info *info;
	struct drv_obj *o = NULL;
	CUresult r = drv_current(&c, &dev);
	if (r == CUDA_SUCCESS)
		r = drv_device_info(dev, &info);
	if (r == CUDA_SUCCESS && (o = drv_handle_get((uintptr_t)func, DRV_FUNCTION)) == NULL)
		r = CUDA_ERROR_INVALID_HANDLE;
	if (r == CUDA_SUCCESS && (minGridSize == NULL || blockSize == NULL || (flags & ~DRV_OCCUPANCY_FLAGS)))
		r = CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; r == CUDA_SUCCESS && i < sizeof(lim) / sizeof(lim[0]); i++)
		r = cuDeviceGetAttribute(&lim[i], occupancy_limits[i], dev);
	if (r == CUDA_SUCCESS)
		r = drv_result(
			cua_func_get_attribute(c, o->u.fn.f, CUA_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &func_max));
	if (r == CUDA_SUCCESS && lim[1] <= 0)
		r = CUDA_ERROR_UNKNOWN; /* a warp size the search cannot step by */
	if (r != CUDA_SUCCESS)
		return r;
	int sm_threads = lim[0], warp = lim[1], dev_max = lim[2], mps = lim[3];
	int limit = blockSizeLimit == 0 || blockSizeLimit > dev_max ? dev_max : blockSizeLimit;
	if (func_max < limit)
		limit = func_max;
	int best_size = 0, best_blocks = 0, best_threads = 0;
	for (int aligned = (limit + warp - 1) / warp * warp;
	     r == CUDA_SUCCESS && aligned > 0 && best_threads != sm_threads; aligned -= warp) {
		int size = limit < aligned ? limit : aligned, blocks = 0;
		size_t smem = blockSizeToDynamicSMemSize != NULL ? blockSizeToDynamicSMemSize(size) : dynamicSMemSize;
		if (smem <= info->max_shared_optin) /* else no block fits, as CUDA counts it; the daemon would refuse */
			r = drv_result(cua_occupancy_max_active_blocks(c, o->u.fn.f, (unsigned)size, smem, &blocks));
		if (r == CUDA_SUCCESS && size * blocks > best_threads) {
			best_size = size;
			best_blocks = blocks;
			best_threads = size * blocks;
		}
	}
	if (r == CUDA_SUCCESS) {
		*minGridSize = best_blocks * mps;
		*blockSize = best_size;
	}
	return r;
}

CUresult CUDAAPI
cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
				 CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize,
				 int blockSizeLimit)
{
	return cuOccupancyMaxPotentialBlockSizeWithFlags(minGridSize, blockSize, func, blockSizeToDynamicSMemSize,
							 dynamicSMemSize, blockSizeLimit, CU_OCCUPANCY_DEFAULT);
}

/* ---- launches ---- */

/* Pushes the arguments of o from kernelParams (one pointer per parameter) or from extra's one buffer laid out
 * as the kernel's parameters are (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE). */
static CUresult
push_args(cua_launch *l, const struct drv_obj *o, void **kernelParams, void **extra)
{
	uint32_t n = o->u.fn.n;
	if (kernelParams != NULL && extra != NULL)
		return CUDA_ERROR_INVALID_VALUE;
	if (kernelParams != NULL) {
		for (uint32_t i = 0; i < n; i++) {
			if (kernelParams[i] == NULL)
				return CUDA_ERROR_INVALID_VALUE;
			if (cua_launch_push_arg(l, kernelParams[i], o->u.fn.sizes[i]) != CUA_OK)
				return CUDA_ERROR_INVALID_VALUE;
		}
		return CUDA_SUCCESS;
	}
	const char *buf = NULL;
	size_t size = 0;
	bool have_size = false;
	for (unsigned i = 0; extra != NULL && i < 64 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
			buf = extra[i + 1];
		else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1] != NULL) {
			memcpy(&size, extra[i + 1], sizeof(size));
			have_size = true;
		} else
			return CUDA_ERROR_INVALID_VALUE;
	}
	if (n == 0)
		return CUDA_SUCCESS;
	if (buf == NULL || !have_size)
		return CUDA_ERROR_INVALID_VALUE; /* neither kernelParams nor a complete buffer for a kernel with arguments */
	uint64_t need = (uint64_t)o->u.fn.offsets[n - 1] + o->u.fn.sizes[n - 1];
	if (size < need)
		return CUDA_ERROR_INVALID_VALUE;
	for (uint32_t i = 0; i < n; i++)
		if (cua_launch_push_arg(l, buf + o->u.fn.offsets[i], o->u.fn.sizes[i]) != CUA_OK)
			return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

/* cuLaunchKernelEx's attributes, one row each: what libcuasync's launch builder takes. */
static CUresult
set_attribute(cua_launch *l, const CUlaunchAttribute *a)
{
	int st = CUA_OK;
	if (a->id == CU_LAUNCH_ATTRIBUTE_IGNORE)
		return CUDA_SUCCESS;
	else if (a->id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
		st = cua_launch_cooperative(l, a->value.cooperative != 0);
	else if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
		st = cua_launch_set_cluster_dims(l, a->value.clusterDim.x, a->value.clusterDim.y,
						 a->value.clusterDim.z);
	else if (a->id == CU_LAUNCH_ATTRIBUTE_PRIORITY)
		st = cua_launch_set_priority(l, a->value.priority);
	else if (a->id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) {
		if (a->value.programmaticStreamSerializationAllowed)
			st = cua_launch_programmatic_dependent_launch(l);
	} else {
		char call[64];
		snprintf(call, sizeof(call), "cuLaunchKernelEx attribute %d", (int)a->id);
		return drv_refuse(call, "cuasyncd takes the cooperative, cluster dimension, priority and "
					"programmatic stream serialization attributes; launch without the others");
	}
	return drv_result(st);
}

static CUresult
launch(CUfunction f, const CUlaunchConfig *cfg, void **kernelParams, void **extra, bool cooperative)
{
	cua_client *c;
	cua_stream s;
	CUresult r = drv_enter(&c, NULL, cfg->hStream, &s);
	if (r != CUDA_SUCCESS)
		return r;
	struct drv_obj *o = drv_handle_get((uintptr_t)f, DRV_FUNCTION);
	if (o == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	if (cfg->gridDimX == 0 || cfg->gridDimY == 0 || cfg->gridDimZ == 0 || cfg->blockDimX == 0 ||
	    cfg->blockDimY == 0 || cfg->blockDimZ == 0)
		return CUDA_ERROR_INVALID_VALUE;
	cua_launch *l = cua_launch_new(c, o->u.fn.f);
	if (l == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	cua_launch_config lc = {{cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ},
				{cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ},
				cfg->sharedMemBytes};
	r = drv_result(cua_launch_set_config(l, lc));
	if (r == CUDA_SUCCESS)
		r = drv_result(cua_launch_set_stream(l, s));
	if (r == CUDA_SUCCESS && cooperative)
		r = drv_result(cua_launch_cooperative(l, true));
	for (unsigned i = 0; r == CUDA_SUCCESS && cfg->attrs != NULL && i < cfg->numAttrs; i++)
		r = set_attribute(l, &cfg->attrs[i]);
	if (r == CUDA_SUCCESS)
		r = push_args(l, o, kernelParams, extra);
	if (r != CUDA_SUCCESS) {
		cua_launch_free(l);
		return r;
	}
	/* Fire and forget, as CUDA: a failure in the kernel surfaces at the next synchronisation. */
	drv_submitted();
	return drv_result(cua_launch_submit(l, NULL));
}

CUresult CUDAAPI
cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
	       unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes,
	       CUstream hStream, void **kernelParams, void **extra)
{
	CUlaunchConfig cfg = {gridDimX,  gridDimY,       gridDimZ, blockDimX, blockDimY,
			      blockDimZ, sharedMemBytes, hStream,  NULL,      0};
	return launch(f, &cfg, kernelParams, extra, false);
}
DRV_ALIAS(cuLaunchKernel, cuLaunchKernel_ptsz);

CUresult CUDAAPI
cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
	if (config == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, config, kernelParams, extra, false);
}
DRV_ALIAS(cuLaunchKernelEx, cuLaunchKernelEx_ptsz);

CUresult CUDAAPI
cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
			  unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
			  unsigned int sharedMemBytes, CUstream hStream, void **kernelParams)
{
	CUlaunchConfig cfg = {gridDimX,  gridDimY,       gridDimZ, blockDimX, blockDimY,
			      blockDimZ, sharedMemBytes, hStream,  NULL,      0};
	return launch(f, &cfg, kernelParams, NULL, true);
}
DRV_ALIAS(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz);
