/* Kiln C API: load a model, run it, read its outputs, from C or any language with a C FFI.
 *
 *   kiln_session* s = NULL;
 *   kiln_session_options* o = NULL;
 *   kiln_session_options_create(&o);
 *   kiln_session_options_set_dim(o, "N", 4);
 *   if (kiln_session_create("model.onnx", o, &s) != KILN_OK)
 *       fprintf(stderr, "%s\n", kiln_last_error());
 *   kiln_tensor* x = NULL;   (borrows `data`: no copy; keep it alive while x is used)
 *   kiln_tensor_borrow(KILN_DTYPE_FLOAT32, shape, 4, data, &x);
 *   const char* names[1] = {"image"};
 *   const kiln_tensor* ins[1];
 *   kiln_tensor* outs[2];    (one per model output, in model order, the caller's to free)
 *   ins[0] = x;
 *   kiln_session_run(s, NULL, names, ins, 1, outs, 2);
 *   ... kiln_tensor_data(outs[0], &p) ...
 *   kiln_tensor_free(outs[0]); kiln_tensor_free(outs[1]); kiln_tensor_free(x);
 *   kiln_session_free(s); kiln_session_options_free(o);
 *
 * Errors. Every function that can fail returns a kiln_status; KILN_OK is 0. Nothing throws
 * across this boundary and no bad argument crashes: a NULL handle or out-pointer is
 * KILN_INVALID_ARGUMENT. On failure, kiln_last_error() returns the message (which names the
 * input, node or file and says expected vs got). That message is per thread: it belongs to the
 * calling thread's most recent failed call, and stays until that thread's next failed call
 * (successful calls leave it alone, like errno). Out-pointers are set to NULL on failure.
 *
 * Ownership. Handles come from *_create / kiln_tensor_borrow / kiln_session_run and are
 * released with the matching *_free (each accepts NULL). Strings and arrays a getter returns
 * belong to the handle and live as long as it does.
 *
 * Threads. kiln_session_run may be called on one session from several threads at once; each
 * call gets its own outputs. A kiln_run_options's terminate flag may be set from any thread.
 *
 * This header is C99 (and C++). The library: libkiln.so (-lkiln), or libkiln_runtime for
 * compiled .kiln artifacts only.
 */
#ifndef KILN_KILN_C_H_
#define KILN_KILN_C_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define KILN_C_EXPORT __attribute__((visibility("default")))
#else
#define KILN_C_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Outcome of a call. The non-zero values mirror kiln::ErrorKind. */
typedef enum kiln_status {
    KILN_OK = 0,
    KILN_INVALID_MODEL = 1,    /* malformed or inconsistent model file */
    KILN_INVALID_ARGUMENT = 2, /* bad argument: NULL pointer, missing input, wrong shape or dtype */
    KILN_UNSUPPORTED = 3,      /* op, opset, attribute or dtype Kiln does not handle */
    KILN_COMPILE_ERROR = 4,    /* the system compiler failed on generated code */
    KILN_OUT_OF_MEMORY = 5,    /* a memory budget was exceeded, or allocation failed */
    KILN_IO_ERROR = 6,         /* a file could not be read or written */
    KILN_PARSE_ERROR = 7,      /* text could not be parsed */
    KILN_CANCELLED = 8,        /* a run stopped by kiln_run_options_set_terminate */
    KILN_INTERNAL = 9          /* a bug in Kiln */
} kiln_status;

/** Element types; the values are ONNX's TensorProto.DataType numbers. */
typedef enum kiln_dtype {
    KILN_DTYPE_FLOAT32 = 1,
    KILN_DTYPE_UINT8 = 2,
    KILN_DTYPE_INT8 = 3,
    KILN_DTYPE_UINT16 = 4,
    KILN_DTYPE_INT16 = 5,
    KILN_DTYPE_INT32 = 6,
    KILN_DTYPE_INT64 = 7,
    KILN_DTYPE_STRING = 8, /* output only: read with kiln_tensor_string */
    KILN_DTYPE_BOOL = 9,   /* one byte per element, 0 or 1 */
    KILN_DTYPE_FLOAT16 = 10,
    KILN_DTYPE_FLOAT64 = 11,
    KILN_DTYPE_UINT32 = 12,
    KILN_DTYPE_UINT64 = 13,
    KILN_DTYPE_BFLOAT16 = 16,
    KILN_DTYPE_FLOAT8E4M3FN = 17, /* the 8- and 4-bit types: one byte per element */
    KILN_DTYPE_FLOAT8E4M3FNUZ = 18,
    KILN_DTYPE_FLOAT8E5M2 = 19,
    KILN_DTYPE_FLOAT8E5M2FNUZ = 20,
    KILN_DTYPE_UINT4 = 21,
    KILN_DTYPE_INT4 = 22,
    KILN_DTYPE_FLOAT4E2M1 = 23,
    KILN_DTYPE_FLOAT8E8M0 = 24
} kiln_dtype;

typedef enum kiln_executor {
    KILN_EXECUTOR_AUTO = 0, /* dataflow when the graph has enough parallel width */
    KILN_EXECUTOR_SEQUENTIAL = 1,
    KILN_EXECUTOR_DATAFLOW = 2
} kiln_executor;

/** What a model input or output holds. Only tensors pass through kiln_session_run. */
typedef enum kiln_value_kind {
    KILN_VALUE_TENSOR = 0,
    KILN_VALUE_SEQUENCE = 1,
    KILN_VALUE_OPTIONAL_TENSOR = 2,
    KILN_VALUE_OPTIONAL_SEQUENCE = 3
} kiln_value_kind;

typedef struct kiln_session_options kiln_session_options;
typedef struct kiln_run_options kiln_run_options;
typedef struct kiln_session kiln_session;
typedef struct kiln_tensor kiln_tensor;

/** A model input or output, as declared. Pointers belong to the session. */
typedef struct kiln_value_info {
    const char* name;
    kiln_value_kind kind;
    kiln_dtype dtype;           /* of the elements, for a sequence or optional */
    size_t rank;
    const int64_t* dims;        /* rank entries; -1 where symbolic or unknown */
    const char* const* symbols; /* rank entries: the dimension's symbol name, or "" */
} kiln_value_info;

/* ---- library ------------------------------------------------------------------------------- */

/** "MAJOR.MINOR.PATCH" of the library. */
KILN_C_EXPORT const char* kiln_version(void);
/** "OK", "InvalidArgument", ... ("Unknown" for a value outside the enum). */
KILN_C_EXPORT const char* kiln_status_name(kiln_status status);
/** The message of this thread's most recent failed call ("" if none has failed). */
KILN_C_EXPORT const char* kiln_last_error(void);
/** Bytes per element (0 for KILN_DTYPE_STRING and for values outside the enum). */
KILN_C_EXPORT size_t kiln_dtype_size(kiln_dtype dtype);

/* ---- session options ----------------------------------------------------------------------- */

/** Options with every default: all cores, auto executor, -O3, no memory limit, no profile. */
KILN_C_EXPORT kiln_status kiln_session_options_create(kiln_session_options** out);
KILN_C_EXPORT void kiln_session_options_free(kiln_session_options* options);
/** Intra-op threads, >= 0 (0 = all cores). */
KILN_C_EXPORT kiln_status kiln_session_options_set_threads(kiln_session_options* options, int32_t threads);
/** Inter-op threads of the dataflow executor, >= 0 (0 = one: kernels run one at a time). */
KILN_C_EXPORT kiln_status kiln_session_options_set_inter_op_threads(kiln_session_options* options, int32_t threads);
KILN_C_EXPORT kiln_status kiln_session_options_set_executor(kiln_session_options* options, kiln_executor executor);
/** Graph optimization level 0..3 (0: every node its own kernel; 3: fold, simplify, fuse). */
KILN_C_EXPORT kiln_status kiln_session_options_set_opt_level(kiln_session_options* options, int32_t level);
/** Budget in bytes for the session's tensors (0 = unlimited); exceeding it is KILN_OUT_OF_MEMORY. */
KILN_C_EXPORT kiln_status kiln_session_options_set_memory_limit(kiln_session_options* options, uint64_t bytes);
/** The value of symbolic input dimension `name` (>= 0); lets the model compile at load. */
KILN_C_EXPORT kiln_status kiln_session_options_set_dim(kiln_session_options* options, const char* name, int64_t value);
/** Writes a Chrome trace of every run to `path` ("" = off). */
KILN_C_EXPORT kiln_status kiln_session_options_set_profile_path(kiln_session_options* options, const char* path);
/** Who computes convolutions and matrix products: "auto", "generated" or "dnnl". */
KILN_C_EXPORT kiln_status kiln_session_options_set_kernels(kiln_session_options* options, const char* kernels);
/** Compiles these `count` sizes of symbolic dim `name` at load (docs/dynamic_shapes.md); the
 *  sizes of several dims combine (every combination is compiled). Replaces earlier sizes of
 *  `name`. Sizes must be >= 0 and `count` >= 1. */
KILN_C_EXPORT kiln_status kiln_session_options_set_specialize(kiln_session_options* options, const char* name,
                                                              const int64_t* sizes, size_t count);
/** Declares the range of symbolic dim `name`, inclusive: a run whose inputs give it a value
 *  outside [min, max] fails (KILN_INVALID_ARGUMENT, naming the input and the range). Replaces an
 *  earlier range of `name`; 0 <= min <= max, and `name` must be a symbolic input dim (checked
 *  when the session is created). */
KILN_C_EXPORT kiln_status kiln_session_options_set_dim_range(kiln_session_options* options, const char* name,
                                                            int64_t min, int64_t max);
/** How many compiled specializations (shapes) the session keeps, >= 1 (default 16); past it the
 *  least recently used one is dropped. */
KILN_C_EXPORT kiln_status kiln_session_options_set_max_specializations(kiln_session_options* options,
                                                                       int32_t count);
/** Non-zero: compile kernels for runs that will be preempted (C++ SessionOptions::preemptible,
 *  which `kiln serve` sets): a stop waits at most a short parallel iteration, at a few percent of
 *  speed. Results are the same either way; 0 (the default) gives the fastest kernels. */
KILN_C_EXPORT kiln_status kiln_session_options_set_preemptible(kiln_session_options* options, int preemptible);
/** Zero: build kernels at -O3 from the first call. Non-zero (the default): with a cold kernel
 *  cache, run on quickly compiled kernels while their -O3 builds compile in the background
 *  (C++ SessionOptions::tiered_compile; kiln_session_wait_for_optimized_kernels). */
KILN_C_EXPORT kiln_status kiln_session_options_set_tiered_compile(kiln_session_options* options, int tiered);

/* ---- run options --------------------------------------------------------------------------- */

KILN_C_EXPORT kiln_status kiln_run_options_create(kiln_run_options** out);
KILN_C_EXPORT void kiln_run_options_free(kiln_run_options* options);
/** Non-zero: runs using these options stop at the next kernel boundary with KILN_CANCELLED
 *  (a run that has not started yet fails at once). Safe from any thread; 0 clears it. */
KILN_C_EXPORT kiln_status kiln_run_options_set_terminate(kiln_run_options* options, int terminate);

/* ---- session ------------------------------------------------------------------------------- */

/** Loads an ONNX model or a compiled .kiln artifact. `options` may be NULL (defaults); it is
 *  copied, so it may be freed afterwards. A model whose dims are all known compiles here. */
KILN_C_EXPORT kiln_status kiln_session_create(const char* path, const kiln_session_options* options,
                                              kiln_session** out);
KILN_C_EXPORT void kiln_session_free(kiln_session* session);
KILN_C_EXPORT kiln_status kiln_session_input_count(const kiln_session* session, size_t* out);
KILN_C_EXPORT kiln_status kiln_session_output_count(const kiln_session* session, size_t* out);
KILN_C_EXPORT kiln_status kiln_session_input_info(const kiln_session* session, size_t index, kiln_value_info* out);
KILN_C_EXPORT kiln_status kiln_session_output_info(const kiln_session* session, size_t index, kiln_value_info* out);
/** Blocks until every kernel runs its -O3 build (kiln_session_options_set_tiered_compile);
 *  returns at once when they already do. Benchmarks call it before timing warm calls. */
KILN_C_EXPORT kiln_status kiln_session_wait_for_optimized_kernels(kiln_session* session);

/** Runs the model. Every input is given once, by name (any order); their data is read in place.
 *  `outputs` has room for output_count tensors (output_count must equal the model's), which are
 *  filled in model order and are the caller's to free. `run_options` may be NULL. */
KILN_C_EXPORT kiln_status kiln_session_run(kiln_session* session, const kiln_run_options* run_options,
                                           const char* const* input_names, const kiln_tensor* const* inputs,
                                           size_t input_count, kiln_tensor** outputs, size_t output_count);

/* ---- tensors ------------------------------------------------------------------------------- */

/** A tensor over the caller's memory: `data` (dense, row-major, `rank` dims from `shape`) is not
 *  copied, must stay valid while the tensor is used, and is never written by Kiln. The shape is
 *  copied. `shape` may be NULL when rank is 0; `data` may be NULL when an extent is 0. */
KILN_C_EXPORT kiln_status kiln_tensor_borrow(kiln_dtype dtype, const int64_t* shape, size_t rank,
                                             const void* data, kiln_tensor** out);
/** A zero-filled tensor owned by the library (write it through kiln_tensor_mutable_data). */
KILN_C_EXPORT kiln_status kiln_tensor_create(kiln_dtype dtype, const int64_t* shape, size_t rank, kiln_tensor** out);
KILN_C_EXPORT void kiln_tensor_free(kiln_tensor* tensor);
KILN_C_EXPORT kiln_status kiln_tensor_dtype(const kiln_tensor* tensor, kiln_dtype* out);
/** The shape: *rank dims at *dims (owned by the tensor; NULL when the rank is 0). */
KILN_C_EXPORT kiln_status kiln_tensor_shape(const kiln_tensor* tensor, const int64_t** dims, size_t* rank);
/** Number of elements (product of the dims; 1 for rank 0). */
KILN_C_EXPORT kiln_status kiln_tensor_element_count(const kiln_tensor* tensor, int64_t* out);
/** Size of the data in bytes (KILN_INVALID_ARGUMENT for a string tensor). */
KILN_C_EXPORT kiln_status kiln_tensor_nbytes(const kiln_tensor* tensor, size_t* out);
/** The dense row-major data (KILN_INVALID_ARGUMENT for a string tensor). */
KILN_C_EXPORT kiln_status kiln_tensor_data(const kiln_tensor* tensor, const void** out);
/** Writable data of a tensor made by kiln_tensor_create (KILN_INVALID_ARGUMENT for a borrowed
 *  tensor or a run output: an output may share memory with the session's constants). */
KILN_C_EXPORT kiln_status kiln_tensor_mutable_data(kiln_tensor* tensor, void** out);
/** Element `index` (row-major) of a string tensor: UTF-8 bytes, NUL-terminated, `*length` bytes
 *  long (`length` may be NULL). */
KILN_C_EXPORT kiln_status kiln_tensor_string(const kiln_tensor* tensor, int64_t index, const char** out,
                                             size_t* length);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_KILN_C_H_ */
