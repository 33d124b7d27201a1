/* Compiled by the capi_header_c99 test with -std=c99 -pedantic -Wall -Wextra -Werror: the C API
 * header must be plain C99. The function touches every type so each is checked as C. */
#include "kiln/kiln_c.h"

int kiln_header_check(void);

int kiln_header_check(void) {
    kiln_status st = KILN_OK;
    kiln_dtype dt = KILN_DTYPE_FLOAT32;
    kiln_executor ex = KILN_EXECUTOR_AUTO;
    kiln_value_kind kind = KILN_VALUE_TENSOR;
    kiln_value_info info;
    kiln_session* session = NULL;
    kiln_session_options* options = NULL;
    kiln_run_options* run_options = NULL;
    kiln_tensor* tensor = NULL;
    info.rank = 0;
    (void)session;
    (void)options;
    (void)run_options;
    (void)tensor;
    return (int)st + (int)dt + (int)ex + (int)kind + (int)info.rank;
}
