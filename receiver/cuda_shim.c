/* cuda_shim.c: see cuda_shim.h. */
#ifndef MLXD_HAVE_CUDA
#define MLXD_HAVE_CUDA 0
#endif
#if MLXD_HAVE_CUDA
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include "cuda_shim.h"

static struct cuda_shim shim;
static const struct cuda_shim *loaded;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
#define GET(field, name) \
    if (!(*(void **)&shim.field = dlsym(h, name))) return
    GET(PointerGetAttribute, "cuPointerGetAttribute");
    GET(MemGetHandleForAddressRange, "cuMemGetHandleForAddressRange");
    GET(MemcpyDtoH, "cuMemcpyDtoH_v2");
    GET(CtxGetCurrent, "cuCtxGetCurrent");
    GET(CtxSetCurrent, "cuCtxSetCurrent");
    GET(GetErrorName, "cuGetErrorName");
#undef GET
    loaded = &shim;   /* the handle stays open for the life of the process */
}

const struct cuda_shim *cuda_shim(void)
{
    pthread_once(&once, load);
    return loaded;
}
#else
typedef int mlxd_cuda_shim_unused;   /* ISO C: a translation unit is not empty */
#endif
