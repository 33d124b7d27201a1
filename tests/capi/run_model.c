/* run_model: runs an ONNX model (or .kiln artifact) through the Kiln C API. Plain C99.
 *
 *   run_model MODEL [--dim NAME=VALUE]... [--input NAME=FILE.npy]... [--output-dir DIR]
 *             [--threads N] [--terminate]
 *
 * An input without --input gets a deterministic pattern of its declared shape (symbolic dims
 * from --dim). Prints each output's name, dtype, shape and first values, and writes
 * DIR/<output>.npy. Exits 1 on any C API error (printing kiln_last_error()) or a non-finite
 * float output, 2 on bad usage. --terminate sets the run's terminate flag before the run (the
 * run must then fail with KILN_CANCELLED; exit 3 if it does).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln_c.h"

#define MAX_ARGS 64
#define MAX_RANK 16

typedef struct named {
    const char* name;
    const char* value;
} named;

/* numpy descriptor <-> dtype, for the dtypes numpy has. */
static const struct {
    const char* descr;
    kiln_dtype dtype;
} kDescrs[] = {
    {"<f4", KILN_DTYPE_FLOAT32}, {"<f8", KILN_DTYPE_FLOAT64}, {"<f2", KILN_DTYPE_FLOAT16},
    {"|i1", KILN_DTYPE_INT8},    {"<i2", KILN_DTYPE_INT16},   {"<i4", KILN_DTYPE_INT32},
    {"<i8", KILN_DTYPE_INT64},   {"|u1", KILN_DTYPE_UINT8},   {"<u2", KILN_DTYPE_UINT16},
    {"<u4", KILN_DTYPE_UINT32},  {"<u8", KILN_DTYPE_UINT64},  {"|b1", KILN_DTYPE_BOOL},
};

static int check(kiln_status st, const char* what) {
    if (st == KILN_OK) return 1;
    fprintf(stderr, "run_model: %s failed (%s): %s\n", what, kiln_status_name(st), kiln_last_error());
    return 0;
}

static const char* value_of(const named* list, int n, const char* name) {
    int i;
    for (i = 0; i < n; ++i)
        if (strcmp(list[i].name, name) == 0) return list[i].value;
    return NULL;
}

/* Splits "NAME=VALUE" in place. */
static int split(char* arg, named* out) {
    char* eq = strchr(arg, '=');
    if (!eq) return 0;
    *eq = '\0';
    out->name = arg;
    out->value = eq + 1;
    return 1;
}

static void* read_file(const char* path, long* size) {
    FILE* f = fopen(path, "rb");
    void* buf;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)*size + 1);
    if (buf && fread(buf, 1, (size_t)*size, f) != (size_t)*size) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

/* Reads a little-endian C-order .npy file into a tensor over `*buffer` (freed by the caller). */
static kiln_tensor* load_npy(const char* path, void** buffer) {
    long size = 0, header_len, offset;
    unsigned char* b = (unsigned char*)read_file(path, &size);
    const char *header, *p;
    int64_t shape[MAX_RANK];
    size_t rank = 0, i, nbytes = 0;
    kiln_dtype dtype = KILN_DTYPE_FLOAT32;
    int known = 0;
    kiln_tensor* t = NULL;
    *buffer = b;
    if (!b || size < 10 || memcmp(b, "\x93NUMPY", 6) != 0) {
        fprintf(stderr, "run_model: %s: not a readable .npy file\n", path);
        return NULL;
    }
    header_len = b[6] == 1 ? (long)b[8] | (long)b[9] << 8
                           : (long)b[8] | (long)b[9] << 8 | (long)b[10] << 16 | (long)b[11] << 24;
    offset = b[6] == 1 ? 10 : 12;
    if (offset + header_len > size) {
        fprintf(stderr, "run_model: %s: truncated header\n", path);
        return NULL;
    }
    b[offset + header_len - 1] = '\0'; /* the header ends with '\n' */
    header = (const char*)b + offset;
    for (i = 0; i < sizeof(kDescrs) / sizeof(kDescrs[0]); ++i)
        if (strstr(header, kDescrs[i].descr)) {
            dtype = kDescrs[i].dtype;
            known = 1;
        }
    if (!known || strstr(header, "'fortran_order': True")) {
        fprintf(stderr, "run_model: %s: unsupported dtype or Fortran order (%s)\n", path, header);
        return NULL;
    }
    p = strstr(header, "'shape'");
    p = p ? strchr(p, '(') : NULL;
    if (!p) {
        fprintf(stderr, "run_model: %s: no shape in the header\n", path);
        return NULL;
    }
    ++p;
    while (*p && *p != ')') {
        char* end;
        long long d = strtoll(p, &end, 10);
        if (end == p) {
            ++p;
            continue;
        }
        if (rank == MAX_RANK) return NULL;
        shape[rank++] = (int64_t)d;
        p = end;
    }
    if (!check(kiln_tensor_borrow(dtype, shape, rank, b + offset + header_len, &t), path)) return NULL;
    if (!check(kiln_tensor_nbytes(t, &nbytes), path) || (long)nbytes > size - offset - header_len) {
        fprintf(stderr, "run_model: %s: the data is shorter than the shape says\n", path);
        kiln_tensor_free(t);
        return NULL;
    }
    return t;
}

static int save_npy(const char* dir, const char* name, const kiln_tensor* t) {
    char path[4096], header[1024], shape[512] = "";
    const int64_t* dims;
    size_t rank, nbytes, i, len;
    kiln_dtype dtype;
    const void* data;
    const char* descr = NULL;
    FILE* f;
    if (!check(kiln_tensor_dtype(t, &dtype), "kiln_tensor_dtype") ||
        !check(kiln_tensor_shape(t, &dims, &rank), "kiln_tensor_shape") ||
        !check(kiln_tensor_nbytes(t, &nbytes), "kiln_tensor_nbytes") ||
        !check(kiln_tensor_data(t, &data), "kiln_tensor_data"))
        return 0;
    for (i = 0; i < sizeof(kDescrs) / sizeof(kDescrs[0]); ++i)
        if (kDescrs[i].dtype == dtype) descr = kDescrs[i].descr;
    if (!descr) {
        fprintf(stderr, "run_model: output '%s': dtype %d has no .npy form\n", name, (int)dtype);
        return 0;
    }
    for (i = 0; i < rank; ++i)
        sprintf(shape + strlen(shape), "%lld,%s", (long long)dims[i], rank > 1 && i + 1 < rank ? " " : "");
    len = (size_t)sprintf(header, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape);
    while ((10 + len + 1) % 64 != 0) header[len++] = ' ';
    header[len++] = '\n';
    sprintf(path, "%s/%s.npy", dir, name);
    f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "run_model: cannot write %s\n", path);
        return 0;
    }
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc((int)(len & 0xff), f);
    fputc((int)(len >> 8), f);
    fwrite(header, 1, len, f);
    fwrite(data, 1, nbytes, f);
    fclose(f);
    return 1;
}

/* A tensor of the declared shape with a deterministic pattern; NULL if a dim is unresolved. */
static kiln_tensor* pattern_input(const kiln_value_info* info, const named* dims, int ndims) {
    int64_t shape[MAX_RANK], n = 1, i;
    size_t d;
    kiln_tensor* t = NULL;
    void* data;
    if (info->rank > MAX_RANK) return NULL;
    for (d = 0; d < info->rank; ++d) {
        const char* v = info->symbols[d][0] ? value_of(dims, ndims, info->symbols[d]) : NULL;
        shape[d] = info->dims[d] >= 0 ? info->dims[d] : v ? atoll(v) : -1;
        if (shape[d] < 0) {
            fprintf(stderr, "run_model: input '%s': give --dim %s=VALUE\n", info->name, info->symbols[d]);
            return NULL;
        }
        n *= shape[d];
    }
    if (!check(kiln_tensor_create(info->dtype, shape, info->rank, &t), "kiln_tensor_create") ||
        !check(kiln_tensor_mutable_data(t, &data), "kiln_tensor_mutable_data"))
        return NULL;
    for (i = 0; i < n; ++i) {
        switch (info->dtype) {
            case KILN_DTYPE_FLOAT32: ((float*)data)[i] = (float)sin(0.37 * (double)i); break;
            case KILN_DTYPE_FLOAT64: ((double*)data)[i] = sin(0.37 * (double)i); break;
            case KILN_DTYPE_INT64: ((int64_t*)data)[i] = i % 7; break;
            case KILN_DTYPE_INT32: ((int32_t*)data)[i] = (int32_t)(i % 7); break;
            case KILN_DTYPE_BOOL: ((unsigned char*)data)[i] = (unsigned char)(i % 2); break;
            default: break; /* zeros */
        }
    }
    return t;
}

/* Prints the output's header line and first values; 0 if a float value is not finite. */
static int print_output(const char* name, const kiln_tensor* t) {
    kiln_dtype dtype;
    const int64_t* dims;
    size_t rank, i;
    int64_t n, k;
    const void* data;
    int finite = 1;
    if (!check(kiln_tensor_dtype(t, &dtype), "kiln_tensor_dtype") ||
        !check(kiln_tensor_shape(t, &dims, &rank), "kiln_tensor_shape") ||
        !check(kiln_tensor_element_count(t, &n), "kiln_tensor_element_count"))
        return 0;
    printf("%s: dtype %d shape [", name, (int)dtype);
    for (i = 0; i < rank; ++i) printf("%s%lld", i ? "," : "", (long long)dims[i]);
    printf("]");
    if (dtype == KILN_DTYPE_STRING) {
        printf("\n");
        return 1;
    }
    if (!check(kiln_tensor_data(t, &data), "kiln_tensor_data")) return 0;
    for (k = 0; k < n; ++k) {
        double v = dtype == KILN_DTYPE_FLOAT32   ? ((const float*)data)[k]
                   : dtype == KILN_DTYPE_FLOAT64 ? ((const double*)data)[k]
                   : dtype == KILN_DTYPE_INT64   ? (double)((const int64_t*)data)[k]
                   : dtype == KILN_DTYPE_INT32   ? (double)((const int32_t*)data)[k]
                                                 : 0.0;
        if (!(v - v == 0)) finite = 0; /* NaN or inf */
        if (k < 8) printf(" %g", v);
    }
    printf("%s\n", n > 8 ? " ..." : "");
    if (!finite) fprintf(stderr, "run_model: output '%s' has a non-finite value\n", name);
    return finite;
}

int main(int argc, char** argv) {
    named dims[MAX_ARGS], files[MAX_ARGS];
    int ndims = 0, nfiles = 0, terminate = 0, cancelled = 0, threads = -1, a, ok = 1;
    const char *model = NULL, *out_dir = NULL;
    kiln_session_options* options = NULL;
    kiln_run_options* run_options = NULL;
    kiln_session* session = NULL;
    size_t n_in = 0, n_out = 0, i;
    const char** names = NULL;
    const kiln_tensor** inputs = NULL;
    kiln_tensor **owned = NULL, **outputs = NULL;
    void** buffers = NULL;
    kiln_status st;

    for (a = 1; a < argc; ++a) {
        const char* arg = argv[a];
        int has_value = a + 1 < argc;
        if (strcmp(arg, "--dim") == 0 && has_value && ndims < MAX_ARGS && split(argv[++a], &dims[ndims])) ++ndims;
        else if (strcmp(arg, "--input") == 0 && has_value && nfiles < MAX_ARGS && split(argv[++a], &files[nfiles])) ++nfiles;
        else if (strcmp(arg, "--output-dir") == 0 && has_value) out_dir = argv[++a];
        else if (strcmp(arg, "--threads") == 0 && has_value) threads = atoi(argv[++a]);
        else if (strcmp(arg, "--terminate") == 0) terminate = 1;
        else if (arg[0] != '-' && !model) model = arg;
        else {
            fprintf(stderr, "usage: run_model MODEL [--dim NAME=VALUE]... [--input NAME=FILE.npy]... "
                            "[--output-dir DIR] [--threads N] [--terminate]\n");
            return 2;
        }
    }
    if (!model) return 2;
    printf("kiln %s\n", kiln_version());

    ok = check(kiln_session_options_create(&options), "kiln_session_options_create");
    for (a = 0; ok && a < ndims; ++a)
        ok = check(kiln_session_options_set_dim(options, dims[a].name, atoll(dims[a].value)), "--dim");
    if (ok && threads >= 0) ok = check(kiln_session_options_set_threads(options, threads), "--threads");
    ok = ok && check(kiln_session_create(model, options, &session), "kiln_session_create") &&
         check(kiln_session_input_count(session, &n_in), "kiln_session_input_count") &&
         check(kiln_session_output_count(session, &n_out), "kiln_session_output_count");
    if (ok) {
        names = (const char**)calloc(n_in + 1, sizeof(*names));
        inputs = (const kiln_tensor**)calloc(n_in + 1, sizeof(*inputs));
        owned = (kiln_tensor**)calloc(n_in + 1, sizeof(*owned));
        buffers = (void**)calloc(n_in + 1, sizeof(*buffers));
        outputs = (kiln_tensor**)calloc(n_out + 1, sizeof(*outputs));
    }
    for (i = 0; ok && i < n_in; ++i) {
        kiln_value_info info;
        const char* file;
        ok = check(kiln_session_input_info(session, i, &info), "kiln_session_input_info");
        if (!ok) break;
        names[i] = info.name;
        file = value_of(files, nfiles, info.name);
        owned[i] = file ? load_npy(file, &buffers[i]) : pattern_input(&info, dims, ndims);
        inputs[i] = owned[i];
        ok = owned[i] != NULL;
    }
    if (ok && terminate)
        ok = check(kiln_run_options_create(&run_options), "kiln_run_options_create") &&
             check(kiln_run_options_set_terminate(run_options, 1), "kiln_run_options_set_terminate");
    if (ok) {
        st = kiln_session_run(session, run_options, names, inputs, n_in, outputs, n_out);
        if (terminate && st == KILN_CANCELLED) {
            printf("cancelled: %s\n", kiln_last_error());
            ok = 0;
            cancelled = 1;
        } else {
            ok = check(st, "kiln_session_run");
        }
    }
    for (i = 0; ok && i < n_out; ++i) {
        kiln_value_info info;
        ok = check(kiln_session_output_info(session, i, &info), "kiln_session_output_info") &&
             print_output(info.name, outputs[i]) && (!out_dir || save_npy(out_dir, info.name, outputs[i]));
    }

    for (i = 0; outputs && i < n_out; ++i) kiln_tensor_free(outputs[i]);
    for (i = 0; owned && i < n_in; ++i) {
        kiln_tensor_free(owned[i]);
        free(buffers[i]);
    }
    free(names);
    free(inputs);
    free(owned);
    free(buffers);
    free(outputs);
    kiln_run_options_free(run_options);
    kiln_session_free(session);
    kiln_session_options_free(options);
    if (cancelled) return 3;
    return ok ? 0 : 1;
}
