/* tests/mock/cuda_runtime.h - a stand-in for the part of the CUDA runtime that
   the device paths call (vescale_mesh.h's, vescale_ddp.h's, vescale_pipe.h's),
   for tests/test_device_layout.c, test_ddp_device.c, test_pipe_device.c: "device" memory
   is host memory the test tracks, kernels run as the host build of the same
   kernel text. Declarations only; the test defines the functions. Never used to
   build the library for real. */
#ifndef VS_MOCK_CUDA_RUNTIME_H
#define VS_MOCK_CUDA_RUNTIME_H
#include <stddef.h>

typedef enum cudaError { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorNotReady = 600 } cudaError_t;
typedef struct mock_stream* cudaStream_t;
typedef struct mock_event* cudaEvent_t;
typedef struct mock_library* cudaLibrary_t;
typedef struct mock_kernel* cudaKernel_t;
typedef struct dim3 {
    unsigned x, y, z;
} dim3;
enum cudaDeviceAttr { cudaDevAttrComputeCapabilityMajor = 75, cudaDevAttrComputeCapabilityMinor = 76 };
enum cudaMemcpyKind { cudaMemcpyDefault = 4 };
enum cudaJitOption { cudaJitMaxRegisters = 0 };
enum cudaLibraryOption { cudaLibraryHostUniversalFunctionAndDataTable = 0 };
#define cudaEventDisableTiming 0x02
#define cudaStreamNonBlocking 0x01
#define cudaStreamLegacy ((cudaStream_t)0x1) /* CUDA's value: the legacy default stream */

#ifdef __cplusplus
extern "C" {
#endif
const char* cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaGetDevice(int* dev);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaDeviceGetAttribute(int* v, enum cudaDeviceAttr a, int dev);
cudaError_t cudaLibraryLoadData(cudaLibrary_t* lib, const void* code, enum cudaJitOption* jo, void** jv, unsigned njo,
                                enum cudaLibraryOption* lo, void** lv, unsigned nlo);
cudaError_t cudaLibraryGetKernel(cudaKernel_t* k, cudaLibrary_t lib, const char* name);
cudaError_t cudaLibraryUnload(cudaLibrary_t lib);
cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args, size_t shmem, cudaStream_t st);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* ev, unsigned flags);
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t st);
cudaError_t cudaEventDestroy(cudaEvent_t ev);
cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t ev, unsigned flags);
cudaError_t cudaEventQuery(cudaEvent_t ev);
cudaError_t cudaStreamSynchronize(cudaStream_t st);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* st, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t st);
cudaError_t cudaMemset(void* p, int v, size_t n);
cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t st);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, enum cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, enum cudaMemcpyKind k, cudaStream_t st);
cudaError_t cudaHostRegister(void* p, size_t n, unsigned flags);
cudaError_t cudaMallocHost(void** p, size_t n);
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaMallocAsync(void** p, size_t n, cudaStream_t st);
cudaError_t cudaFreeAsync(void* p, cudaStream_t st);
cudaError_t cudaHostUnregister(void* p);
cudaError_t cudaMallocHost(void** p, size_t n);
cudaError_t cudaFreeHost(void* p);
#ifdef __cplusplus
}
#endif
#endif
