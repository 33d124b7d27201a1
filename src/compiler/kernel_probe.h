// kernel_probe: where `--kernels auto`'s rule (compile.cc auto_prefers_dnnl) is unsure whether
// Kiln's generated kernel or oneDNN computes a convolution faster, a short measurement at compile
// time decides, on the machine that compiles. Both candidates run on the same random inputs in
// this process (tune/measure.h's worker, no cache flushing, 1 intra-op thread, a few
// milliseconds each), oneDNN's output must match the generated kernel's, and the other kernel
// replaces the rule's pick only when it measured at least 10% faster (a near tie is noise), and
// only after further rounds confirmed it (six in all, the candidates' order alternating: on a
// loaded machine two short measurements can both be descheduled). Verdicts are cached in memory and in `kernel_probe.jsonl` beside the kernel cache, keyed
// by the generated kernel's source, oneDNN's parameters and the CPU, so a workload is measured
// once per machine. A tuning log's choice (`kiln tune`) overrides the probe.
//
// The rule is unsure about convolutions outside the families its figures come from
// (docs/kernels.md): grouped but not depthwise (ResNeXt, RegNet), dilated, 1-D or 3-D, outputs
// of at most 14x14, channel counts that are not multiples of 16, and a SiLU / hard-swish post-op.
// Units under kProbeMinFlops are left to the rule (measuring costs more than it can save).
//
// KILN_KERNEL_PROBE=0 turns probing off (the rule alone decides: what the tests of the rule use).
#pragma once

#include <optional>

#include "compiler/lower_group.h"
#include "topi/dnnl_match.h"

namespace kiln::compiler {

inline constexpr double kProbeMinFlops = 2e6;

/// Whether the rule is unsure about `c` for `unit` (the classes above; false for non-convs).
bool rule_unsure(const KernelUnit& unit, const topi::ExternChoice& c);

/// For a unit the rule is unsure about: whether to take oneDNN, given the rule's pick
/// (`rule_dnnl`) and the measured times (the cached verdict, else a measurement now). nullopt:
/// the rule decides (probing off, the rule sure, or a candidate failed to compile or run).
std::optional<bool> probe_prefers_dnnl(const KernelUnit& unit, const topi::ExternChoice& c, bool rule_dnnl);

}  // namespace kiln::compiler
