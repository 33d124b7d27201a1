// Einsum (12): one TE compute. The equation (spaces ignored) names each input dim with a letter;
// "..." stands for the leading dims not named (broadcast across inputs, right-aligned, numpy
// rules: size 1 against n). Output labels are explicit after "->", else implicit: "..." then
// every letter used exactly once, alphabetically. Each output label is a data-parallel axis,
// every other label a reduce axis; the body is the product of the inputs read at their labels
// (a letter repeated within an input, "ii", reads the diagonal), summed over the reduce axes.
#include <algorithm>
#include <map>
#include <string>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

// Labels: 0..51 for letters, kEllipsis + j for the j-th ellipsis dim (left to right).
constexpr int kEllipsis = 1000;

struct EinsumSpec {
    std::vector<std::vector<int>> inputs;  // per input, one label per dim
    std::vector<int> output;
    std::map<int, int64_t> extent;
    int ellipsis_rank = 0;
};

int letter_label(const ir::Node& n, char c) {
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
    KILN_THROW(kInvalidModel) << node_label(n) << ": invalid character '" << c << "' in the einsum equation";
}

// Splits one term into letter labels with the ellipsis position marked as -1.
std::vector<int> parse_term(const ir::Node& n, const std::string& t) {
    std::vector<int> out;
    bool seen = false;
    for (size_t i = 0; i < t.size(); ++i) {
        if (t[i] == '.') {
            KILN_CHECK(!seen && t.compare(i, 3, "...") == 0, kInvalidModel)
                << node_label(n) << ": malformed ellipsis in einsum term '" << t << "'";
            seen = true;
            out.push_back(-1);
            i += 2;
            continue;
        }
        out.push_back(letter_label(n, t[i]));
    }
    return out;
}

EinsumSpec parse_einsum(const ir::Node& n) {
    std::string eq;
    for (char c : n.attr_string("equation", "")) if (c != ' ') eq += c;
    const size_t arrow = eq.find("->");
    const std::string lhs = eq.substr(0, arrow);
    std::vector<std::string> terms(1);
    for (char c : lhs) {
        if (c == ',') terms.emplace_back();
        else terms.back() += c;
    }
    KILN_CHECK(terms.size() == n.num_inputs(), kInvalidModel)
        << node_label(n) << ": equation '" << eq << "' has " << terms.size() << " input terms, got " << n.num_inputs()
        << " inputs";
    EinsumSpec s;
    std::vector<std::vector<int>> raw;
    for (size_t k = 0; k < terms.size(); ++k) {
        raw.push_back(parse_term(n, terms[k]));
        const int rank = input_type(n, k, "Inputs").rank();
        const bool ell = std::count(raw[k].begin(), raw[k].end(), -1) > 0;
        const int named = static_cast<int>(raw[k].size()) - (ell ? 1 : 0);
        KILN_CHECK(ell ? rank >= named : rank == named, kInvalidModel)
            << node_label(n) << ": term '" << terms[k] << "' names " << named << " dims, input " << k << " has rank " << rank;
        if (ell) s.ellipsis_rank = std::max(s.ellipsis_rank, rank - named);
    }
    std::map<int, int> uses;
    for (size_t k = 0; k < raw.size(); ++k) {
        const auto& t = input_type(n, k, "Inputs");
        std::vector<int> labels;
        int dim = 0;
        const int ell_here = t.rank() - (static_cast<int>(raw[k].size()) - 1);
        for (int l : raw[k]) {
            if (l == -1) {
                for (int j = 0; j < ell_here; ++j) {
                    const int lab = kEllipsis + (s.ellipsis_rank - ell_here) + j;
                    const int64_t e = static_dim(n, t.shape[dim++], "input dim");
                    auto [it, fresh] = s.extent.emplace(lab, e);
                    KILN_CHECK(fresh || it->second == e || e == 1 || it->second == 1, kInvalidModel)
                        << node_label(n) << ": ellipsis dims of sizes " << it->second << " and " << e << " do not broadcast";
                    it->second = std::max(it->second, e);
                    labels.push_back(lab);
                }
                continue;
            }
            const int64_t e = static_dim(n, t.shape[dim++], "input dim");
            auto [it, fresh] = s.extent.emplace(l, e);
            KILN_CHECK(fresh || it->second == e, kInvalidModel)
                << node_label(n) << ": label " << l << " has sizes " << it->second << " and " << e;
            labels.push_back(l);
            ++uses[l];
        }
        s.inputs.push_back(labels);
    }
    for (int j = 0; j < s.ellipsis_rank; ++j) s.extent.emplace(kEllipsis + j, 1);
    if (arrow == std::string::npos) {
        for (int j = 0; j < s.ellipsis_rank; ++j) s.output.push_back(kEllipsis + j);
        for (const auto& [l, c] : uses) if (c == 1) s.output.push_back(l);  // map order: alphabetical (a..z, A..Z)
    } else {
        for (int l : parse_term(n, eq.substr(arrow + 2))) {
            if (l == -1) {
                for (int j = 0; j < s.ellipsis_rank; ++j) s.output.push_back(kEllipsis + j);
                continue;
            }
            KILN_CHECK(s.extent.count(l) && std::count(s.output.begin(), s.output.end(), l) == 0, kInvalidModel)
                << node_label(n) << ": output label " << l << " of '" << eq << "' is unknown or repeated";
            s.output.push_back(l);
        }
    }
    return s;
}

OpDef einsum_op() {
    OpDef d;
    d.name = "Einsum";
    d.onnx_versions = {12};
    d.min_inputs = 1;
    d.max_inputs = -1;
    d.attrs = {{"equation", AttrKind::kString, std::nullopt, true}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "Inputs");
        check_dtype(n, "Inputs", x.dtype, numeric_types());
        for (size_t k = 1; k < n.num_inputs(); ++k)
            check_same_dtype(n, "Inputs[0]", x.dtype, "Inputs[k]", input_type(n, k, "Inputs").dtype);
        EinsumSpec s = parse_einsum(n);
        std::vector<ir::Dim> out;
        for (int l : s.output) out.emplace_back(s.extent.at(l));
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        const EinsumSpec s = parse_einsum(a.node);
        std::vector<te::IterVar> reduce;
        std::map<int, Expr> var_of;
        for (const auto& [l, e] : s.extent) {
            if (std::count(s.output.begin(), s.output.end(), l)) continue;
            reduce.push_back(te::reduce_axis(e, "r" + std::to_string(l)));
            var_of[l] = reduce.back()->var;
        }
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                std::map<int, Expr> idx = var_of;
                for (size_t k = 0; k < s.output.size(); ++k) idx[s.output[k]] = i[k];
                Expr prod;
                for (size_t k = 0; k < s.inputs.size(); ++k) {
                    const te::Tensor& t = a.in(k);
                    std::vector<Expr> ix;
                    for (size_t dd = 0; dd < s.inputs[k].size(); ++dd)
                        ix.push_back(t->shape[dd] == 1 ? te::int_imm(0) : idx.at(s.inputs[k][dd]));
                    Expr r = te::read(t, ix);
                    prod = prod ? prod * r : r;
                }
                return reduce.empty() ? prod : te::sum(prod, reduce);
            },
            "Einsum", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    d.flops = [](const ir::Node& n) {
        EinsumSpec s = parse_einsum(n);
        double total = 1;
        for (const auto& [l, e] : s.extent) total *= static_cast<double>(e);
        return total * static_cast<double>(s.inputs.size());
    };
    return d;
}

}  // namespace

void register_einsum_ops(OpRegistry& r) { r.add(einsum_op()); }

}  // namespace kiln::op
