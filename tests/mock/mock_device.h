/* tests/mock/mock_device.h - the device-memory half of the stand-in CUDA runtime
   that test_ddp_device and test_device_layout share: allocations from the
   allocator hooks tracked (garbage-filled, as cudaMalloc's), and MOCK_DEV, which
   checks a kernel's pointer range lies inside one device allocation; the device
   and loading the kernels' library. The tests define the runtime's other entry
   points (launches, streams, copies) themselves. Include after vs_test.h. */
#ifndef VS_MOCK_DEVICE_H
#define VS_MOCK_DEVICE_H
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MOCK_MAXA 4096
static pthread_mutex_t mock_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char* p;
    size_t n;
} mock_alloc[MOCK_MAXA];
static int mock_nalloc, mock_live;
static long mock_allocs; /* every device allocation ever made */

static void* mock_dalloc(size_t n, void* user)
{
    (void)user;
    char* p = (char*)malloc(n ? n : 1);
    memset(p, 0xA5, n ? n : 1); /* cudaMalloc gives garbage */
    pthread_mutex_lock(&mock_mu);
    int i = 0;
    while (i < mock_nalloc && mock_alloc[i].p) i++;
    VT_CHECK(i < MOCK_MAXA, "mock: too many device allocations");
    if (i < MOCK_MAXA) {
        mock_alloc[i].p = p, mock_alloc[i].n = n;
        if (i == mock_nalloc) mock_nalloc++;
        mock_live++;
        mock_allocs++;
    }
    pthread_mutex_unlock(&mock_mu);
    return p;
}

static void mock_dfree(void* p, void* user)
{
    (void)user;
    int found = 0;
    pthread_mutex_lock(&mock_mu);
    for (int i = 0; i < mock_nalloc; i++)
        if (mock_alloc[i].p == (char*)p) {
            mock_alloc[i].p = NULL;
            mock_live--;
            found = 1;
            break;
        }
    pthread_mutex_unlock(&mock_mu);
    VT_CHECK(found, "mock: device_free of %p, not a device allocation", p);
    free(p);
}

/* 1: [p, p+n) lies in one device allocation; 0: p is host memory; -1: p is in a
   device allocation but the range runs past its end. */
static int mock_where(const void* p, size_t n)
{
    const char* c = (const char*)p;
    int r = 0;
    pthread_mutex_lock(&mock_mu);
    for (int i = 0; i < mock_nalloc; i++) {
        const char* a = mock_alloc[i].p;
        if (a && c >= a && c < a + mock_alloc[i].n + (mock_alloc[i].n == 0)) {
            r = c + n <= a + mock_alloc[i].n ? 1 : -1;
            break;
        }
    }
    pthread_mutex_unlock(&mock_mu);
    return r;
}

#define MOCK_DEV(p, n, what)                                                                                     \
    do {                                                                                                         \
        int w_ = mock_where((p), (n));                                                                           \
        VT_CHECK(w_ == 1, "mock: %s: %p + %zu bytes is %s", (what), (const void*)(p), (size_t)(n),              \
                 w_ < 0 ? "past the end of its device allocation" : "host memory, not device memory");          \
        if (w_ != 1) return cudaErrorInvalidValue;                                                               \
    } while (0)

/* The device, and kernels loaded from NVRTC's cubin. The includer defines
   MOCK_KERNEL_NAMES (an array of kernel names) and MOCK_NKERNELS before the
   include; a kernel handle is 0x1000 + its index there. Without
   MOCK_KERNEL_NAMES (a test of code that launches no kernels) the library
   entry points are left out. */
const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "mock error"; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; } /* (the mock keeps no sticky error) */
cudaError_t cudaGetDevice(int* dev)
{
    *dev = 0;
    return cudaSuccess;
}
/* Pinned host memory (the vocab functions' id flag): host memory either way here. */
#ifndef MOCK_OWN_PINNED /* (a test that counts these calls defines its own) */
cudaError_t cudaMallocHost(void** p, size_t n)
{
    *p = malloc(n ? n : 1);
    return *p ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaFreeHost(void* p)
{
    free(p);
    return cudaSuccess;
}
#endif
/* The vocab functions' id checks (vescale_mesh.h >>tp) read their flags once their
   events are complete: the mock runs every operation when it is issued, so every
   recorded event is. */
#ifndef MOCK_OWN_EVENT_QUERY /* (a test that tracks its events defines its own) */
cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    (void)ev;
    return cudaSuccess;
}
#endif
cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    (void)ev;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int dev) { return dev == 0 ? cudaSuccess : cudaErrorInvalidValue; } /* one device */
cudaError_t cudaDeviceGetAttribute(int* v, enum cudaDeviceAttr a, int dev)
{
    (void)dev;
    *v = a == cudaDevAttrComputeCapabilityMajor ? 9 : 0; /* an H100: sm_90 */
    return cudaSuccess;
}

#ifdef MOCK_KERNEL_NAMES
#ifndef MOCK_KERNEL_NAME /* kernel i's name (a table of declarations defines its own) */
#define MOCK_KERNEL_NAME(i) ((MOCK_KERNEL_NAMES)[i])
#endif
static long mock_loads, mock_unloads;
static char mock_lib_token;

cudaError_t cudaLibraryLoadData(cudaLibrary_t* lib, const void* code, enum cudaJitOption* jo, void** jv, unsigned njo,
                                enum cudaLibraryOption* lo, void** lv, unsigned nlo)
{
    (void)jo, (void)jv, (void)njo, (void)lo, (void)lv, (void)nlo;
    /* NVRTC's cubin: an ELF image */
    VT_CHECK(code && memcmp(code, "\177ELF", 4) == 0, "mock: cudaLibraryLoadData got no cubin");
    __atomic_add_fetch(&mock_loads, 1, __ATOMIC_SEQ_CST);
    *lib = (cudaLibrary_t)(void*)&mock_lib_token;
    return cudaSuccess;
}

cudaError_t cudaLibraryGetKernel(cudaKernel_t* k, cudaLibrary_t lib, const char* name)
{
    VT_CHECK(lib == (cudaLibrary_t)(void*)&mock_lib_token, "mock: unknown library");
    for (int i = 0; i < (MOCK_NKERNELS); i++)
        if (!strcmp(name, MOCK_KERNEL_NAME(i))) {
            *k = (cudaKernel_t)(uintptr_t)(0x1000 + i);
            return cudaSuccess;
        }
    VT_CHECK(0, "mock: no kernel named %s", name);
    return cudaErrorInvalidValue;
}

cudaError_t cudaLibraryUnload(cudaLibrary_t lib)
{
    VT_CHECK(lib == (cudaLibrary_t)(void*)&mock_lib_token, "mock: unload of an unknown library");
    __atomic_add_fetch(&mock_unloads, 1, __ATOMIC_SEQ_CST);
    return cudaSuccess;
}
#endif /* MOCK_KERNEL_NAMES */

#endif
