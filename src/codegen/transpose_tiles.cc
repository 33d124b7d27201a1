// match_transpose_tile (see the header).
#include "codegen/transpose_tiles.h"

#include "codegen/one_vector_loop.h"

namespace kiln::codegen {
namespace {

constexpr int64_t kTile = 16;

bool extent_is(const te::Expr& e, int64_t n) {
    return e->kind == te::ExprKind::kIntImm && static_cast<const te::IntImmNode&>(*e).value == n;
}

bool four_byte_plain(DType t) { return t == DType::kFloat32 || t == DType::kInt32 || t == DType::kUInt32; }

}  // namespace

std::optional<TransposeTile> match_transpose_tile(const tir::ForNode& outer) {
    if (outer.loop_kind != te::LoopKind::kSerial || !extent_is(outer.extent, kTile) || !outer.body ||
        outer.body->kind != tir::StmtKind::kFor)
        return std::nullopt;
    const auto& inner = static_cast<const tir::ForNode&>(*outer.body);
    if (inner.loop_kind != te::LoopKind::kVectorized || !extent_is(inner.extent, kTile) || !inner.body ||
        inner.body->kind != tir::StmtKind::kStore)
        return std::nullopt;
    const auto& store = static_cast<const tir::StoreNode&>(*inner.body);
    if (store.value->kind != te::ExprKind::kBufferLoad) return std::nullopt;
    const auto& load = static_cast<const te::BufferLoadNode&>(*store.value);
    // A plain copy of one 4-byte type between two buffers (the helper's pointers are restrict).
    if (load.buffer.get() == store.buffer.get() || !four_byte_plain(store.buffer->dtype) ||
        load.buffer->dtype != store.buffer->dtype || load.dtype != store.buffer->dtype)
        return std::nullopt;
    const te::VarNode *r = outer.var.get(), *c = inner.var.get();
    const auto out_c = index_step(store.index, c), out_r = index_step(store.index, r);
    const auto in_c = index_step(load.index, c), in_r = index_step(load.index, r);
    if (!out_c || !out_r || !in_c || !in_r || *out_c != 1 || *in_r != 1) return std::nullopt;
    // Rows of at least a tile apart (no overlap within the tile), as a transpose's are.
    if (*out_r < kTile || *in_c < kTile) return std::nullopt;
    return TransposeTile{&store, &load, c, *out_r, *in_c};
}

}  // namespace kiln::codegen
