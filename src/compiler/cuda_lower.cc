#include "compiler/cuda_lower.h"

#include "support/error.h"
#include "te/schedule.h"
#include "tir/lower.h"
#include "tir/simplify.h"
#include "topi/cuda_schedule.h"

namespace kiln::compiler {

CudaLoweredKernel lower_unit_cuda(const KernelUnit& unit, const codegen::CudaEmitOptions& emit) {
    CudaLoweredKernel k;
    k.description = unit.ops();
    const ir::Node* first = unit.nodes.front();
    try {
        ComposedUnit c = compose_unit(unit);
        k.flops = c.flops;
        k.node_name = (c.anchor ? c.anchor : first)->name();
        te::Schedule sch = te::create_schedule(c.outs);
        inline_unit_members(sch, unit, c);
        topi::cuda_default_schedule(sch);
        std::vector<te::Tensor> params = c.params;
        for (const te::Tensor& o : c.outs) params.push_back(o);
        k.func = tir::simplify(tir::lower(sch, params, "kiln_cuda"));
        k.cuda = codegen::emit_cuda(k.func, emit);
    } catch (Error& e) {
        e.add_context("while lowering " + first->describe() + " (" + k.description + ") for the GPU");
        throw;
    }
    return k;
}

}  // namespace kiln::compiler
