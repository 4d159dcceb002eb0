// Check macros for CUDA runtime and cuBLAS(Lt) calls: a failure throws mt::Error naming the failing
// statement, file:line and the library's own message (the job-level handler ends every rank).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include "core/error.h"

#define MT_CHECK_CUDA(call)                                                                            \
  do {                                                                                                 \
    const cudaError_t mt_err_ = (call);                                                                \
    if (mt_err_ != cudaSuccess)                                                                        \
      throw ::mt::Error(MT_FORMAT("CUDA error at {}:{}: `{}`: {}", __FILE__, __LINE__, #call,        \
                                    cudaGetErrorString(mt_err_)));                                    \
  } while (0)

#define MT_CHECK_CUBLAS(call)                                                                          \
  do {                                                                                                 \
    const cublasStatus_t mt_st_ = (call);                                                              \
    if (mt_st_ != CUBLAS_STATUS_SUCCESS)                                                               \
      throw ::mt::Error(MT_FORMAT("cuBLAS error at {}:{}: `{}`: {}", __FILE__, __LINE__, #call,      \
                                    cublasLtGetStatusString(mt_st_)));                                \
  } while (0)
