#include "runtime/extern_kernel.h"

#include <cstdlib>
#include <sstream>

#include "runtime/batchnorm_training_kernel.h"
#include "runtime/dnnl_conv_backward.h"
#include "runtime/dql_kernel.h"
#include "runtime/dnnl_int8_kernels.h"
#include "runtime/dnnl_kernels.h"
#include "runtime/index_kernels.h"
#include "runtime/softmax_kernel.h"
#include "runtime/attention_kernel.h"
#include "runtime/maxpool_grad_kernel.h"
#include "runtime/maxpool_kernel.h"
#include "runtime/qadd_kernel.h"
#include "runtime/qmaxpool_kernel.h"
#include "runtime/rnn_kernel.h"
#include "support/error.h"

namespace kiln::runtime {

std::vector<std::string> ExternParams::split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::string cur;
    std::istringstream is(s);
    while (std::getline(is, cur, sep))
        if (!cur.empty()) out.push_back(cur);
    return out;
}

ExternParams::ExternParams(const std::string& text) {
    for (const std::string& pair : split(text, ';')) {
        size_t eq = pair.find('=');
        KILN_CHECK(eq != std::string::npos && eq > 0, kInvalidModel)
            << "extern kernel parameters: expected key=value, got '" << pair << "'";
        kv_[pair.substr(0, eq)] = pair.substr(eq + 1);
    }
}

const std::string& ExternParams::str(const std::string& key) const {
    auto it = kv_.find(key);
    KILN_CHECK(it != kv_.end(), kInvalidModel) << "extern kernel parameters: missing '" << key << "'";
    return it->second;
}

int64_t ExternParams::integer(const std::string& key) const {
    const std::string& v = str(key);
    char* end = nullptr;
    long long x = std::strtoll(v.c_str(), &end, 10);
    KILN_CHECK(end && *end == '\0' && !v.empty(), kInvalidModel)
        << "extern kernel parameter '" << key << "': expected an integer, got '" << v << "'";
    return x;
}

int64_t ExternParams::integer_or(const std::string& key, int64_t fallback) const {
    return has(key) ? integer(key) : fallback;
}

std::vector<int64_t> ExternParams::ints(const std::string& key) const {
    std::vector<int64_t> out;
    for (const std::string& w : split(str(key), ',')) {
        char* end = nullptr;
        long long x = std::strtoll(w.c_str(), &end, 10);
        KILN_CHECK(end && *end == '\0', kInvalidModel)
            << "extern kernel parameter '" << key << "': expected integers, got '" << str(key) << "'";
        out.push_back(x);
    }
    return out;
}

std::vector<std::string> ExternParams::list(const std::string& key) const {
    return has(key) ? split(str(key), ',') : std::vector<std::string>{};
}

std::string ExternParams::format(const std::vector<std::pair<std::string, std::string>>& pairs) {
    std::string s;
    for (const auto& [k, v] : pairs) s += (s.empty() ? "" : ";") + k + "=" + v;
    return s;
}

ExternKernelFactory find_extern_kernel(const std::string& name) {
    if (name == "kiln_topk") return &make_topk_kernel;
    if (name == "kiln_cumsum") return &make_cumsum_kernel;
    if (name == "kiln_scatternd") return &make_scatternd_kernel;
    if (name == "kiln_qadd") return &make_qadd_kernel;
    if (name == "kiln_qmaxpool") return &make_qmaxpool_kernel;
    if (name == "kiln_dql") return &make_dql_kernel;
    if (name == "kiln_maxpool") return &make_maxpool_kernel;
    if (name == "kiln_maxpool_grad") return &make_maxpool_grad_kernel;
    if (name == "kiln_bn_train") return &make_bn_train_kernel;
    if (name == "kiln_bn_grad") return &make_bn_grad_kernel;
    if (name == "kiln_softmax") return &make_softmax_kernel;
#if KILN_HAVE_DNNL
    if (name == "dnnl_conv") return &make_dnnl_conv;
    if (name == "dnnl_matmul") return &make_dnnl_matmul;
    if (name == "dnnl_conv_bwd") return &make_dnnl_conv_backward;
    if (name == "dnnl_qconv") return &make_dnnl_qconv;
    if (name == "dnnl_qmatmul") return &make_dnnl_qmatmul;
    if (name == "dnnl_dqmatmul") return &make_dnnl_dqmatmul;
    if (name == "kiln_rnn") return &make_rnn_kernel;
    if (name == "kiln_attention") return &make_attention_kernel;
#endif
    (void)name;
    return nullptr;
}

bool have_dnnl() { return KILN_HAVE_DNNL != 0; }

std::string dnnl_implementation(const std::string& name, const std::string& params) {
#if KILN_HAVE_DNNL
    if (name == "dnnl_conv") return dnnl_conv_implementation(ExternParams(params));
    if (name == "dnnl_qconv") return dnnl_qconv_implementation(ExternParams(params));
    if (name == "dnnl_conv_bwd") return dnnl_conv_backward_implementation(ExternParams(params));
#endif
    (void)name, (void)params;
    return "";
}

}  // namespace kiln::runtime
