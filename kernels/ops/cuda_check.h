// The CUDA runtime and cuBLAS(Lt) members of the check macro family (src/core/check.h): a failure throws
// mt::Error naming the failing statement, file:line and the library's own message (the job-level handler ends
// every rank).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include "core/check.h"

#define MT_CHECK_CUDA(call) MT_CHECK_CALL(throw_error, "CUDA", call, mt_rc_ == cudaSuccess, cudaGetErrorString(mt_rc_))
#define MT_CHECK_CUBLAS(call) \
  MT_CHECK_CALL(throw_error, "cuBLAS", call, mt_rc_ == CUBLAS_STATUS_SUCCESS, cublasLtGetStatusString(mt_rc_))
