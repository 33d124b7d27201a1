// The tir interpreter (reference semantics of a kernel).
//
// A PrimFunc is first compiled into a tree of closures: every variable and buffer gets a slot
// in a Frame, so the inner loop does no name or map lookups. Each expression compiles to
// either an int closure (ints and bool: the value wrapped to its dtype's width, see
// te/scalar_eval.cc) or a float closure (double, rounded to f32 after every f32 operation so
// results match float C code). f16/bf16/f8/f4 buffers load widened to f32 and store narrowed.
// Every load and store is bounds-checked (KILN_ICHECK): a bad kernel raises an error instead
// of corrupting memory. Integer division by zero raises kInvalidArgument.
#include "tir/interpreter.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "support/error.h"
#include "tir/affine.h"
#include "tir/kernel_dims.h"

namespace kiln::tir {

using te::BinaryOp;
using te::ExprKind;

namespace {

struct Frame {
    std::vector<int64_t> vars;
    std::vector<char*> bufs;
};
using IFn = std::function<int64_t(Frame&)>;
using FFn = std::function<double(Frame&)>;
using SFn = std::function<void(Frame&)>;

double load_float(DType t, const char* base, int64_t i) {
    switch (t) {
        case DType::kFloat32: return reinterpret_cast<const float*>(base)[i];
        case DType::kFloat64: return reinterpret_cast<const double*>(base)[i];
        case DType::kFloat16: return half_to_float(reinterpret_cast<const uint16_t*>(base)[i]);
        case DType::kBFloat16: return bfloat16_to_float(reinterpret_cast<const uint16_t*>(base)[i]);
        default: return lowp_to_float(t, reinterpret_cast<const uint8_t*>(base)[i]);  // f8, f4
    }
}
int64_t load_int(DType t, const char* base, int64_t i) {
    switch (t) {
        case DType::kInt8: return reinterpret_cast<const int8_t*>(base)[i];
        case DType::kInt16: return reinterpret_cast<const int16_t*>(base)[i];
        case DType::kInt32: return reinterpret_cast<const int32_t*>(base)[i];
        case DType::kInt64: return reinterpret_cast<const int64_t*>(base)[i];
        case DType::kUInt8: return reinterpret_cast<const uint8_t*>(base)[i];
        case DType::kUInt16: return reinterpret_cast<const uint16_t*>(base)[i];
        case DType::kUInt32: return reinterpret_cast<const uint32_t*>(base)[i];
        case DType::kUInt64:
            return static_cast<int64_t>(reinterpret_cast<const uint64_t*>(base)[i]);
        case DType::kInt4: return reinterpret_cast<const int8_t*>(base)[i];
        case DType::kUInt4: return reinterpret_cast<const uint8_t*>(base)[i];
        default: return reinterpret_cast<const uint8_t*>(base)[i] != 0;  // bool
    }
}
void store_float(DType t, char* base, int64_t i, double v) {
    switch (t) {
        case DType::kFloat32: reinterpret_cast<float*>(base)[i] = static_cast<float>(v); break;
        case DType::kFloat64: reinterpret_cast<double*>(base)[i] = v; break;
        case DType::kFloat16:
            reinterpret_cast<uint16_t*>(base)[i] = float_to_half(static_cast<float>(v));
            break;
        case DType::kBFloat16:
            reinterpret_cast<uint16_t*>(base)[i] = float_to_bfloat16(static_cast<float>(v));
            break;
        case DType::kFloat8E8M0:  // storage conversions do not saturate (ops clamp first)
            reinterpret_cast<uint8_t*>(base)[i] = float_to_e8m0(static_cast<float>(v), false);
            break;
        default:  // f8, f4
            reinterpret_cast<uint8_t*>(base)[i] = float_to_lowp(t, static_cast<float>(v), false);
            break;
    }
}
void store_int(DType t, char* base, int64_t i, int64_t v) {
    v = te::wrap_int(t, v);
    switch (dtype_size(t)) {
        case 1: reinterpret_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v); break;
        case 2: reinterpret_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(v); break;
        case 4: reinterpret_cast<uint32_t*>(base)[i] = static_cast<uint32_t>(v); break;
        default: reinterpret_cast<int64_t*>(base)[i] = v; break;
    }
}

class Compiler {
public:
    int buffer_slot(const Buffer& b) {
        auto it = buf_slot_.find(b.get());
        if (it != buf_slot_.end()) return it->second;
        int s = static_cast<int>(buf_slot_.size());
        buf_slot_[b.get()] = s;
        return s;
    }
    size_t num_buffers() const { return buf_slot_.size(); }
    size_t num_vars() const { return max_vars_; }
    void bind_buffer(const Buffer& b) { bound_.insert(b.get()); }
    /// A symbolic dim: slot `i` for the whole function (run() stores its value there).
    void bind_dim(const Var& v) {
        KILN_CHECK(!var_slot_.count(v.get()), kInvalidArgument)
            << "interpret: dim '" << v->name << "' is listed twice";
        var_slot_[v.get()] = static_cast<int>(var_slot_.size());
        max_vars_ = std::max(max_vars_, var_slot_.size());
    }
    /// A buffer's element count: a constant, or computed from the dims at run time.
    IFn numel_fn(const Buffer& b) {
        if (b->is_static()) {
            const int64_t n = b->numel();
            return [n](Frame&) { return n; };
        }
        return int_fn(b->numel_expr());
    }

    IFn int_fn(const Expr& e) {
        if (!dtype_is_float(e->dtype)) return compile_int(e);
        FFn f = compile_float(e);
        DType t = DType::kInt64;
        return [f, t](Frame& fr) { return te::float_to_int(t, f(fr)); };
    }
    FFn float_fn(const Expr& e) {
        if (dtype_is_float(e->dtype)) return compile_float(e);
        IFn f = compile_int(e);
        DType t = e->dtype;
        return [f, t](Frame& fr) { return te::int_to_float(t, f(fr)); };
    }

    SFn compile_stmt(const Stmt& s);

private:
    IFn compile_int(const Expr& e);
    IFn compile_affine(const Expr& e);
    FFn compile_float(const Expr& e);
    IFn compile_load_index(const te::BufferLoadNode& n, int* slot);

    std::unordered_map<const te::VarNode*, int> var_slot_;
    std::unordered_map<const te::BufferNode*, int> buf_slot_;
    std::unordered_set<const te::BufferNode*> bound_;  // params and enclosing Allocates
    size_t max_vars_ = 0;
    int checked_slot(const Buffer& b) {
        KILN_CHECK(bound_.count(b.get()), kInvalidArgument)
            << "interpret: buffer '" << b->name << "' is neither a parameter nor allocated";
        return buffer_slot(b);
    }
};

IFn Compiler::compile_load_index(const te::BufferLoadNode& n, int* slot) {
    *slot = checked_slot(n.buffer);
    IFn idx = int_fn(n.index);
    std::string name = n.buffer->name;
    if (!n.buffer->is_static()) {
        IFn numel = numel_fn(n.buffer);
        return [idx, numel, name](Frame& f) {
            int64_t i = idx(f), size = numel(f);
            KILN_ICHECK(i >= 0 && i < size)
                << "out-of-bounds load " << name << "[" << i << "] (size " << size << ")";
            return i;
        };
    }
    int64_t numel = n.buffer->numel();
    return [idx, numel, name](Frame& f) {
        int64_t i = idx(f);
        KILN_ICHECK(i >= 0 && i < numel)
            << "out-of-bounds load " << name << "[" << i << "] (size " << numel << ")";
        return i;
    };
}

// Affine int64 index math over loop vars (the common case) compiles to one closure that sums
// slot*coefficient, instead of a closure per + and *.
IFn Compiler::compile_affine(const Expr& e) {
    if (e->dtype != DType::kInt64 || e->kind != ExprKind::kBinary) return nullptr;
    BinaryOp op = static_cast<const te::BinaryNode&>(*e).op;
    if (op != BinaryOp::kAdd && op != BinaryOp::kSub && op != BinaryOp::kMul) return nullptr;
    AffineSum sum = to_affine(e);
    std::vector<std::pair<int, int64_t>> terms;
    for (const auto& [atom, coef] : sum.terms) {
        if (atom->kind != ExprKind::kVar) return nullptr;
        auto it = var_slot_.find(static_cast<const te::VarNode*>(atom.get()));
        if (it == var_slot_.end()) return nullptr;
        terms.emplace_back(it->second, coef);
    }
    const uint64_t c0 = static_cast<uint64_t>(sum.constant);
    auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
    if (terms.size() == 1) {
        auto [s0, k0] = terms[0];
        return [=](Frame& f) { return static_cast<int64_t>(c0 + u(f.vars[s0]) * u(k0)); };
    }
    if (terms.size() == 2) {
        auto [s0, k0] = terms[0];
        auto [s1, k1] = terms[1];
        return [=](Frame& f) {
            return static_cast<int64_t>(c0 + u(f.vars[s0]) * u(k0) + u(f.vars[s1]) * u(k1));
        };
    }
    return [=](Frame& f) {
        uint64_t acc = c0;
        for (const auto& [slot, k] : terms) acc += u(f.vars[slot]) * u(k);
        return static_cast<int64_t>(acc);
    };
}

IFn Compiler::compile_int(const Expr& e) {
    const DType t = e->dtype;
    if (IFn affine = compile_affine(e)) return affine;
    switch (e->kind) {
        case ExprKind::kIntImm: {
            int64_t v = static_cast<const te::IntImmNode&>(*e).value;
            return [v](Frame&) { return v; };
        }
        case ExprKind::kVar: {
            auto it = var_slot_.find(static_cast<const te::VarNode*>(e.get()));
            KILN_CHECK(it != var_slot_.end(), kInvalidArgument)
                << "interpret: variable '" << static_cast<const te::VarNode&>(*e).name
                << "' is not bound by a loop";
            int s = it->second;
            return [s](Frame& f) { return f.vars[s]; };
        }
        case ExprKind::kBinary: {
            const auto& n = static_cast<const te::BinaryNode&>(*e);
            BinaryOp op = n.op;
            if (dtype_is_float(n.a->dtype) ||
                dtype_is_float(n.b->dtype)) {  // float comparison / logic
                FFn a = float_fn(n.a), b = float_fn(n.b);
                return [a, b, op](Frame& f) {
                    return static_cast<int64_t>(te::eval_float_binary(op, a(f), b(f)));
                };
            }
            IFn a = compile_int(n.a), b = compile_int(n.b);
            DType ot = n.a->dtype;
            if (ot == DType::kInt64) {  // the hot index-math cases
                if (op == BinaryOp::kAdd)
                    return [a, b](Frame& f) {
                        return static_cast<int64_t>(static_cast<uint64_t>(a(f)) +
                                                    static_cast<uint64_t>(b(f)));
                    };
                if (op == BinaryOp::kMul)
                    return [a, b](Frame& f) {
                        return static_cast<int64_t>(static_cast<uint64_t>(a(f)) *
                                                    static_cast<uint64_t>(b(f)));
                    };
                if (op == BinaryOp::kLT)
                    return [a, b](Frame& f) { return static_cast<int64_t>(a(f) < b(f)); };
            }
            return [a, b, op, ot](Frame& f) {
                int64_t out;
                KILN_CHECK(te::eval_int_binary(op, ot, a(f), b(f), &out), kInvalidArgument)
                    << "interpret: integer " << te::binary_op_name(op) << " by zero";
                return out;
            };
        }
        case ExprKind::kUnary: {
            const auto& n = static_cast<const te::UnaryNode&>(*e);
            te::UnaryOp op = n.op;
            if (dtype_is_float(n.a->dtype)) {
                FFn a = compile_float(n.a);
                return [a, op, t](Frame& f) {
                    return te::float_to_int(t, te::eval_float_unary(op, a(f)));
                };
            }
            IFn a = compile_int(n.a);
            DType at = n.a->dtype;
            return [a, op, at, t](Frame& f) {
                return te::wrap_int(t, te::eval_int_unary(op, at, a(f)));
            };
        }
        case ExprKind::kSelect: {
            const auto& n = static_cast<const te::SelectNode&>(*e);
            IFn c = int_fn(n.cond), a = compile_int(n.t), b = compile_int(n.f);
            return [c, a, b](Frame& f) { return c(f) ? a(f) : b(f); };
        }
        case ExprKind::kCast: {
            const auto& n = static_cast<const te::CastNode&>(*e);
            if (dtype_is_float(n.a->dtype)) {
                FFn a = compile_float(n.a);
                return [a, t](Frame& f) { return te::float_to_int(t, a(f)); };
            }
            IFn a = compile_int(n.a);
            return [a, t](Frame& f) { return te::wrap_int(t, a(f)); };
        }
        case ExprKind::kBufferLoad: {
            const auto& n = static_cast<const te::BufferLoadNode&>(*e);
            int slot;
            IFn idx = compile_load_index(n, &slot);
            DType bt = n.buffer->dtype;
            if (dtype_is_float(bt)) {
                return [idx, slot, bt, t](Frame& f) {
                    return te::float_to_int(t, load_float(bt, f.bufs[slot], idx(f)));
                };
            }
            return [idx, slot, bt, t](Frame& f) {
                return te::wrap_int(t, load_int(bt, f.bufs[slot], idx(f)));
            };
        }
        default: break;
    }
    KILN_THROW(kInvalidArgument) << "interpret: unexpected expression " << te::expr_str(e)
                                 << " (TensorRead/Reduce must be lowered first)";
}

FFn Compiler::compile_float(const Expr& e) {
    const DType t = e->dtype;
    const bool f32 = t != DType::kFloat64;
    switch (e->kind) {
        case ExprKind::kFloatImm: {
            double v = static_cast<const te::FloatImmNode&>(*e).value;
            return [v](Frame&) { return v; };
        }
        case ExprKind::kBinary: {
            const auto& n = static_cast<const te::BinaryNode&>(*e);
            FFn a = float_fn(n.a), b = float_fn(n.b);
            BinaryOp op = n.op;
            if (f32 && t == DType::kFloat32) {
                switch (op) {
                    case BinaryOp::kAdd:
                        return [a, b](Frame& f) {
                            return static_cast<double>(static_cast<float>(a(f) + b(f)));
                        };
                    case BinaryOp::kSub:
                        return [a, b](Frame& f) {
                            return static_cast<double>(static_cast<float>(a(f) - b(f)));
                        };
                    case BinaryOp::kMul:
                        return [a, b](Frame& f) {
                            return static_cast<double>(static_cast<float>(a(f) * b(f)));
                        };
                    case BinaryOp::kDiv:
                        return [a, b](Frame& f) {
                            return static_cast<double>(static_cast<float>(a(f) / b(f)));
                        };
                    default: break;
                }
            }
            return [a, b, op, t](Frame& f) {
                return te::round_float(t, te::eval_float_binary(op, a(f), b(f)));
            };
        }
        case ExprKind::kUnary: {
            const auto& n = static_cast<const te::UnaryNode&>(*e);
            FFn a = float_fn(n.a);
            te::UnaryOp op = n.op;
            return
                [a, op, t](Frame& f) { return te::round_float(t, te::eval_float_unary(op, a(f))); };
        }
        case ExprKind::kSelect: {
            const auto& n = static_cast<const te::SelectNode&>(*e);
            IFn c = int_fn(n.cond);
            FFn a = float_fn(n.t), b = float_fn(n.f);
            return [c, a, b](Frame& f) { return c(f) ? a(f) : b(f); };
        }
        case ExprKind::kCast: {
            const auto& n = static_cast<const te::CastNode&>(*e);
            FFn a = float_fn(n.a);
            return [a, t](Frame& f) { return te::round_float(t, a(f)); };
        }
        case ExprKind::kBufferLoad: {
            const auto& n = static_cast<const te::BufferLoadNode&>(*e);
            int slot;
            IFn idx = compile_load_index(n, &slot);
            DType bt = n.buffer->dtype;
            if (bt == DType::kFloat32) {
                return [idx, slot](Frame& f) {
                    return static_cast<double>(
                        reinterpret_cast<const float*>(f.bufs[slot])[idx(f)]);
                };
            }
            if (dtype_is_float(bt)) {
                return [idx, slot, bt, t](Frame& f) {
                    return te::round_float(t, load_float(bt, f.bufs[slot], idx(f)));
                };
            }
            return [idx, slot, bt, t](Frame& f) {
                return te::round_float(t, te::int_to_float(bt, load_int(bt, f.bufs[slot], idx(f))));
            };
        }
        default: break;
    }
    KILN_THROW(kInvalidArgument) << "interpret: unexpected float expression " << te::expr_str(e);
}

SFn Compiler::compile_stmt(const Stmt& s) {
    if (!s) return [](Frame&) {};
    switch (s->kind) {
        case StmtKind::kPrefetch: return [](Frame&) {};  // a hint: reads and writes nothing
        case StmtKind::kFor: {
            const auto& n = static_cast<const ForNode&>(*s);
            IFn ext = int_fn(n.extent);
            KILN_CHECK(!var_slot_.count(n.var.get()), kInvalidArgument)
                << "interpret: loop variable '" << n.var->name << "' is bound twice";
            int slot = static_cast<int>(var_slot_.size());
            var_slot_[n.var.get()] = slot;
            max_vars_ = std::max(max_vars_, var_slot_.size());
            SFn body = compile_stmt(n.body);
            var_slot_.erase(n.var.get());
            return [ext, body, slot](Frame& f) {
                int64_t e = ext(f);
                for (int64_t i = 0; i < e; ++i) {
                    f.vars[slot] = i;
                    body(f);
                }
            };
        }
        case StmtKind::kStore: {
            const auto& n = static_cast<const StoreNode&>(*s);
            int slot = checked_slot(n.buffer);
            IFn idx = int_fn(n.index);
            IFn numel = numel_fn(n.buffer);
            std::string name = n.buffer->name;
            DType bt = n.buffer->dtype;
            auto checked = [idx, numel, name](Frame& f) {
                int64_t i = idx(f), size = numel(f);
                KILN_ICHECK(i >= 0 && i < size)
                    << "out-of-bounds store " << name << "[" << i << "] (size " << size << ")";
                return i;
            };
            if (dtype_is_float(bt)) {
                FFn v = float_fn(n.value);
                if (bt == DType::kFloat32) {
                    return [checked, v, slot](Frame& f) {
                        int64_t i = checked(f);
                        reinterpret_cast<float*>(f.bufs[slot])[i] = static_cast<float>(v(f));
                    };
                }
                return [checked, v, slot, bt](Frame& f) {
                    int64_t i = checked(f);
                    store_float(bt, f.bufs[slot], i, v(f));
                };
            }
            IFn v = int_fn(n.value);
            if (dtype_is_float(n.value->dtype)) {
                FFn fv = float_fn(n.value);
                v = [fv, bt](Frame& f) { return te::float_to_int(bt, fv(f)); };
            }
            return [checked, v, slot, bt](Frame& f) {
                int64_t i = checked(f);
                store_int(bt, f.bufs[slot], i, v(f));
            };
        }
        case StmtKind::kSeq: {
            std::vector<SFn> parts;
            for (const auto& c : static_cast<const SeqNode&>(*s).stmts)
                parts.push_back(compile_stmt(c));
            return [parts](Frame& f) {
                for (const auto& p : parts) p(f);
            };
        }
        case StmtKind::kIf: {
            const auto& n = static_cast<const IfNode&>(*s);
            IFn c = int_fn(n.cond);
            SFn a = compile_stmt(n.then_case), b = compile_stmt(n.else_case);
            return [c, a, b](Frame& f) {
                if (c(f)) {
                    a(f);
                } else {
                    b(f);
                }
            };
        }
        case StmtKind::kAllocate: {
            const auto& n = static_cast<const AllocateNode&>(*s);
            int slot = buffer_slot(n.buffer);
            KILN_CHECK(!bound_.count(n.buffer.get()), kInvalidArgument)
                << "interpret: buffer '" << n.buffer->name << "' is allocated twice";
            bound_.insert(n.buffer.get());
            IFn numel = numel_fn(n.buffer);
            const size_t elem = dtype_size(n.buffer->dtype);
            SFn body = compile_stmt(n.body);
            bound_.erase(n.buffer.get());
            return [slot, numel, elem, body](Frame& f) {
                const int64_t count = numel(f);
                KILN_ICHECK(count >= 0) << "interpret: allocation of " << count << " elements";
                std::vector<char> storage(static_cast<size_t>(count) * elem + 1, 0);
                char* saved = f.bufs[slot];
                f.bufs[slot] = storage.data();
                body(f);
                f.bufs[slot] = saved;
            };
        }
    }
    return [](Frame&) {};
}

}  // namespace

struct PreparedFunc::Impl {
    PrimFunc f;
    SFn body;
    size_t num_vars = 0, num_buffers = 0;
    std::vector<int64_t> static_numels;  // per param, when f has no symbolic dims
};

PreparedFunc::PreparedFunc(const PrimFunc& f) {
    auto impl = std::make_shared<Impl>();
    impl->f = f;
    Compiler c;
    for (const auto& d : f.dims) c.bind_dim(d);  // slots 0..dims-1
    for (size_t i = 0; i < f.params.size(); ++i) {
        const Buffer& p = f.params[i];
        KILN_CHECK(c.buffer_slot(p) == static_cast<int>(i), kInvalidArgument)
            << "interpret '" << f.name << "': buffer '" << p->name << "' is listed twice in params";
        c.bind_buffer(p);
    }
    impl->body = c.compile_stmt(f.body);
    impl->num_vars = c.num_vars();
    impl->num_buffers = c.num_buffers();
    if (f.dims.empty()) impl->static_numels = param_numels(f, {});
    impl_ = std::move(impl);
}

void PreparedFunc::run(std::vector<Tensor>& args) const { run(args, {}); }

void PreparedFunc::run(std::vector<Tensor>& args, const std::vector<int64_t>& dims) const {
    KILN_ICHECK(impl_ != nullptr) << "PreparedFunc::run on an empty PreparedFunc";
    const PrimFunc& f = impl_->f;
    KILN_CHECK(args.size() == f.params.size(), kInvalidArgument)
        << "interpret '" << f.name << "': expected " << f.params.size() << " arguments, got "
        << args.size();
    // A static kernel's sizes were computed once (small nodes run through here on every call).
    std::vector<int64_t> bound;
    if (!f.dims.empty() || !dims.empty()) bound = param_numels(f, dims);
    const std::vector<int64_t>& numels = bound.empty() ? impl_->static_numels : bound;
    for (size_t i = 0; i < args.size(); ++i) {
        const Buffer& p = f.params[i];
        KILN_CHECK(args[i].dtype() == p->dtype, kInvalidArgument)
            << "interpret '" << f.name << "': argument " << i << " ('" << p->name
            << "') expected dtype " << dtype_name(p->dtype) << ", got "
            << dtype_name(args[i].dtype());
        KILN_CHECK(args[i].numel() == numels[i], kInvalidArgument)
            << "interpret '" << f.name << "': argument " << i << " ('" << p->name << "') expected "
            << numels[i] << " elements, got " << args[i].numel();
        KILN_CHECK(args[i].defined(), kInvalidArgument)
            << "interpret '" << f.name << "': argument " << i << " ('" << p->name
            << "') has no storage";
    }
    Frame frame;
    frame.vars.assign(impl_->num_vars + 1, 0);
    frame.bufs.assign(impl_->num_buffers, nullptr);
    for (size_t i = 0; i < dims.size(); ++i) frame.vars[i] = dims[i];
    for (size_t i = 0; i < args.size(); ++i) frame.bufs[i] = static_cast<char*>(args[i].data());
    impl_->body(frame);
}

void interpret(const PrimFunc& f, std::vector<Tensor>& args) { PreparedFunc(f).run(args); }

void interpret(const PrimFunc& f, std::vector<Tensor>& args, const std::vector<int64_t>& dims) {
    PreparedFunc(f).run(args, dims);
}

}  // namespace kiln::tir
