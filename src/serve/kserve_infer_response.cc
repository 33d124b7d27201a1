// KServe v2 inference response writing (see the header).
#include "serve/kserve_infer_response.h"

#include <nlohmann/json.hpp>

#include "kiln/error.h"
#include "serve/kserve_tensor_data.h"

namespace kiln::serve::kserve {

Failure write_infer_response(const InferResponse& response, const OutputEncoding& encoding, EncodedResponse& out) {
    using ojson = nlohmann::ordered_json;
    ojson doc;
    doc["model_name"] = response.model;
    doc["model_version"] = response.version;
    if (!response.id.empty()) doc["id"] = response.id;
    ojson outputs = ojson::array();
    std::string binary;
    bool any_binary = false;
    for (const NamedTensor& o : response.outputs) {
        const std::optional<std::string> datatype = kserve_datatype(o.tensor.dtype());
        if (!datatype)
            return {Code::kInternal, "output '" + o.name + "' has dtype " + dtype_name(o.tensor.dtype()) +
                                         ", which KServe v2 has no datatype for"};
        ojson entry;
        entry["name"] = o.name;
        entry["datatype"] = *datatype;
        entry["shape"] = o.tensor.shape();
        try {
            if (encoding.binary_for(o.name)) {
                any_binary = true;
                entry["parameters"]["binary_data_size"] = append_tensor_binary(o.tensor, binary);
            } else {
                entry["data"] = tensor_to_json(o.tensor);
            }
        } catch (const kiln::Error& e) {
            return {Code::kInternal, "output '" + o.name + "': " + e.message()};
        }
        outputs.push_back(std::move(entry));
    }
    doc["outputs"] = std::move(outputs);
    // BYTES outputs sent as JSON may hold invalid UTF-8: replace it rather than fail.
    out.body = doc.dump(-1, ' ', false, ojson::error_handler_t::replace);
    out.header_length.reset();
    if (any_binary) {
        out.header_length = out.body.size();
        out.body += binary;
    }
    return Failure::none();
}

}  // namespace kiln::serve::kserve
