// Reading and replacing an ONNX model's initializers (see model_initializers.h).
#include "frontend/onnx/model_initializers.h"

#include <filesystem>
#include <fstream>
#include <set>

#include <onnx/onnx_pb.h>

#include "frontend/onnx/tensor_proto.h"
#include "support/error.h"

namespace kiln::frontend {

namespace {

onnx::ModelProto parse_model(const std::string& path) {
    KILN_CHECK(std::filesystem::is_regular_file(path), kIOError) << "cannot open '" << path << "': no such file";
    std::ifstream in(path, std::ios::binary);
    KILN_CHECK(in.good(), kIOError) << "cannot open '" << path << "' for reading";
    onnx::ModelProto model;
    KILN_CHECK(model.ParseFromIstream(&in), kInvalidModel) << "could not parse '" << path << "' as an ONNX model";
    return model;
}

/// Sets `proto`'s payload to `t`'s bytes as raw_data (little-endian, as ONNX's raw_data is).
void set_raw(onnx::TensorProto& proto, const Tensor& t) {
    proto.clear_float_data();
    proto.clear_double_data();
    proto.clear_int32_data();
    proto.clear_int64_data();
    proto.clear_uint64_data();
    proto.clear_external_data();
    proto.set_data_location(onnx::TensorProto::DEFAULT);
    proto.set_raw_data(static_cast<const char*>(t.data()), t.nbytes());
}

}  // namespace

std::vector<std::string> onnx_initializer_names(const std::string& path) {
    onnx::ModelProto model = parse_model(path);
    std::vector<std::string> names;
    for (const onnx::TensorProto& t : model.graph().initializer()) names.push_back(t.name());
    return names;
}

std::string onnx_with_initializers(const std::string& path, const std::map<std::string, Tensor>& values) {
    onnx::ModelProto model = parse_model(path);
    const std::string base_dir = std::filesystem::path(path).parent_path().string();
    std::set<std::string> replaced;
    for (onnx::TensorProto& proto : *model.mutable_graph()->mutable_initializer()) {
        auto it = values.find(proto.name());
        if (it == values.end()) {
            if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
                Tensor t = tensor_from_proto(proto, base_dir.empty() ? "." : base_dir, "initializer '" + proto.name() + "'");
                KILN_CHECK(t.dtype() != DType::kString && !dtype_is_int4(t.dtype()) && t.dtype() != DType::kFloat4E2M1,
                           kUnsupported)
                    << "initializer '" << proto.name() << "': cannot embed external data of dtype " << dtype_name(t.dtype());
                set_raw(proto, t);
            }
            continue;
        }
        const Tensor& t = it->second;
        std::optional<DType> dt = dtype_from_onnx(proto.data_type());
        KILN_CHECK(dt && *dt == t.dtype(), kInvalidArgument)
            << "initializer '" << proto.name() << "': expected dtype " << (dt ? dtype_name(*dt) : onnx_type_name(proto.data_type()))
            << ", got " << dtype_name(t.dtype());
        Shape dims(proto.dims().begin(), proto.dims().end());
        KILN_CHECK(dims == t.shape(), kInvalidArgument)
            << "initializer '" << proto.name() << "': expected shape " << shape_str(dims) << ", got " << shape_str(t.shape());
        set_raw(proto, t);
        replaced.insert(proto.name());
    }
    for (const auto& [name, t] : values)
        KILN_CHECK(replaced.count(name), kInvalidArgument) << "'" << name << "' is not an initializer of '" << path << "'";
    std::string bytes;
    KILN_CHECK(model.SerializeToString(&bytes), kInternal) << "bug in Kiln: could not serialize the ONNX model";
    return bytes;
}

}  // namespace kiln::frontend
