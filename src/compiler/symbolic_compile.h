// A symbolic compile (CompileOptions::symbolic, docs/dynamic_shapes.md): one executable for
// every value of the model's symbolic dims. The dims stay symbols through the passes; each
// kernel is built over them (te::sym_placeholder / sym_compute) and takes those it uses as
// parameters (kiln_kernel_dims_fn); the runtime binds them from each run's inputs and places
// the intermediates for them (runtime/dims_plan.h).
//
// Only a subset of ops builds over symbolic shapes (symbolic_refusal lists it); a graph with
// any other op is refused with a kUnsupported error saying which, and the caller (the Session)
// compiles per shape instead.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "compiler/lower_group.h"
#include "ir/graph.h"

namespace kiln::compiler {

/// Gives each graph input dim named in `dims` its value; the other symbolic dims stay.
void bind_known_dims(ir::Graph& g, const std::map<std::string, int64_t>& dims);

/// Rewrites Range(0, Gather(Shape(x), k), 1) (int64; k a constant, the dim of x there symbolic:
/// an exporter's position ids) into KilnDimRange(x) {axis=k}, whose length is that dim, and drops
/// the Shape and Gather nodes it leaves unused. Returns how many were rewritten. Symbolic
/// compiles only: there a shape is no value the compiler can fold.
int lower_dim_ranges(ir::Graph& g);

/// Names every unknown dim of a graph input ("?", an ONNX dim without a name or -1: PP-OCR's
/// `[-1, 3, ?, ?]`) `<input>_dim<axis>`, so that a symbolic compile can bind it from the run's
/// inputs like a named one. Returns how many. Symbolic compiles only.
int name_unknown_input_dims(ir::Graph& g);

/// Flatten(x, rank - 1) -> Softmax / LogSoftmax / Hardmax (axis -1) -> Reshape back to x's shape
/// (the importer's form of an opset < 13 Softmax whose input rank was unknown at import) ->
/// the op on x along its last axis: the same numbers, and no reshape of symbolic dims. Returns
/// how many. Run after fold_shape_values, when the ranks are known.
int collapse_softmax_coercions(ir::Graph& g);

/// Rewrites each inference BatchNormalization on symbolic shapes with constant parameters that
/// no Conv or Gemm precedes (those fold into its weights) into Mul and Add by per-channel
/// constants, which build over symbolic dims. Returns how many. Symbolic compiles only.
int decompose_batch_norms(ir::Graph& g);

/// A cheap look at the imported graph before any pass ("" when a symbolic compile may succeed):
/// a node on symbolic shapes whose op no pass turns into the subset (convolutions, pools,
/// resizes, recurrent layers, ...): a refusal found only after the pass pipeline costs a
/// second import and pipeline at load.
std::string symbolic_prefilter(const ir::Graph& g);

/// The graph inputs' symbolic dims, in first-appearance order.
SymbolicDims symbolic_dims_of(const ir::Graph& g);

/// Whether node `n` (a Reshape, KilnReshape, Flatten, Squeeze, Unsqueeze or Identity) only
/// reinterprets its input's buffer at every value of the dims: same dtype, and the same product
/// of dims (the static factors multiply to the same number, the symbols are the same multiset;
/// a product dim such as `batch*seq` counts as its factors).
bool is_symbolic_view(const ir::Node* n, const ir::Graph& g);

/// Two dims a node needs equal at run time (Executable::dim_equalities): their texts, the node.
struct SymbolicEquality {
    std::string a, b, node;
};

/// Why the optimized graph cannot compile symbolically ("" when it can): a node outside the
/// supported subset, a dim that is neither a symbol of the inputs nor a dim expression of them
/// (an unknown "?"; `batch*seq` is fine: support/dim_poly.h),
/// a broadcast that needs a symbolic dim to be 1, a view-like op fused into a kernel.
/// `views` are the nodes compile() makes views; `externs` the first nodes of units that run as
/// extern kernels on symbolic shapes (oneDNN convolutions). Where nodes need two different
/// dims equal (an Add of a conv's rows and an upsampled map's), `equalities` gets them.
std::string symbolic_refusal(const ir::Graph& g, const std::vector<KernelUnit>& units,
                             const std::set<const ir::Node*>& views, const std::set<const ir::Node*>& externs = {},
                             std::vector<SymbolicEquality>* equalities = nullptr);

/// Dims the model needs to be 1 (an axis a Squeeze removes, the factors a KilnReshape leaves
/// out: PP-OCR's recogniser, whose height is unknown in the model and 1 after its convs at the 48
/// rows it is fed) become the static 1 in every value's type, so the Squeeze and the reshape are
/// views; returned as equalities with "1" (Executable::dim_equalities checks them per run).
/// Input symbols are never pinned.
std::vector<SymbolicEquality> pin_unit_dims(ir::Graph& g);

/// Gives every value's dims one name per class of dims `equalities` make equal (an input symbol
/// where the class has one, else the shortest text), so that a kernel reading both sides of an
/// asserted equality sees one dim. The run checks the equalities themselves
/// (Executable::dim_equalities).
void unify_equal_dims(ir::Graph& g, const std::vector<SymbolicEquality>& equalities);

}  // namespace kiln::compiler
