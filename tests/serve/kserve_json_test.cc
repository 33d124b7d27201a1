// KServe v2 request parsing and response writing (JSON tensors and the binary tensor data
// extension), byte-exact against bodies written out by hand.
#include "serve/kserve_json.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "serve/kserve_infer_request.h"
#include "serve/kserve_infer_response.h"

namespace kiln::serve::kserve {
namespace {

using std::string_literals::operator""s;

ParsedInferRequest parse_ok(const std::string& body, std::optional<size_t> header_length = std::nullopt) {
    ParsedInferRequest out;
    Failure f = parse_infer_request(body, header_length, out);
    EXPECT_TRUE(f.ok()) << f.message;
    return out;
}

/// The failure message (and checks the code is kInvalidArgument).
std::string parse_error(const std::string& body, std::optional<size_t> header_length = std::nullopt) {
    ParsedInferRequest out;
    Failure f = parse_infer_request(body, header_length, out);
    EXPECT_EQ(f.code, Code::kInvalidArgument) << body;
    return f.message;
}

std::string input_json(const std::string& fields) {
    return R"({"inputs":[{"name":"x",)" + fields + "}]}";
}

TEST(KServeRequest, JsonTensorsOfEveryKind) {
    const std::string body = R"({"id":"req-7","inputs":[
        {"name":"f","shape":[2,2],"datatype":"FP32","data":[[1.5,-2],[0.25,3]]},
        {"name":"i","shape":[3],"datatype":"INT64","data":[-9007199254740993,0,9223372036854775807]},
        {"name":"u","shape":[2],"datatype":"UINT8","data":[0,255]},
        {"name":"b","shape":[1,3],"datatype":"BOOL","data":[true,false,true]},
        {"name":"s","shape":[2],"datatype":"BYTES","data":["hello",""]},
        {"name":"h","shape":[2],"datatype":"FP16","data":[1.0,-0.5]},
        {"name":"d","shape":[],"datatype":"FP64","data":[0.1]}]})";
    ParsedInferRequest p = parse_ok(body);
    EXPECT_EQ(p.request.id, "req-7");
    ASSERT_EQ(p.request.inputs.size(), 7u);
    const Tensor& f = p.request.inputs[0].tensor;
    EXPECT_EQ(f.dtype(), DType::kFloat32);
    EXPECT_EQ(f.shape(), (Shape{2, 2}));
    EXPECT_EQ(f.data_as<float>()[0], 1.5f);
    EXPECT_EQ(f.data_as<float>()[1], -2.0f);
    EXPECT_EQ(f.data_as<float>()[2], 0.25f);
    EXPECT_EQ(f.data_as<float>()[3], 3.0f);
    const Tensor& i = p.request.inputs[1].tensor;
    EXPECT_EQ(i.data_as<int64_t>()[0], -9007199254740993LL);  // not representable as a double
    EXPECT_EQ(i.data_as<int64_t>()[2], INT64_MAX);
    EXPECT_EQ(p.request.inputs[2].tensor.data_as<uint8_t>()[1], 255);
    const Tensor& b = p.request.inputs[3].tensor;
    EXPECT_EQ(b.dtype(), DType::kBool);
    EXPECT_EQ(std::string(b.data_as<char>(), 3), "\x01\x00\x01"s);
    const Tensor& s = p.request.inputs[4].tensor;
    EXPECT_EQ(s.dtype(), DType::kString);
    EXPECT_EQ(s.data_as<std::string>()[0], "hello");
    EXPECT_EQ(s.data_as<std::string>()[1], "");
    EXPECT_EQ(p.request.inputs[5].tensor.data_as<uint16_t>()[0], 0x3c00);  // 1.0 in IEEE half
    EXPECT_EQ(p.request.inputs[5].tensor.data_as<uint16_t>()[1], 0xb800);  // -0.5
    EXPECT_EQ(p.request.inputs[6].tensor.shape(), Shape{});
    EXPECT_EQ(p.request.inputs[6].tensor.data_as<double>()[0], 0.1);
    EXPECT_TRUE(p.request.outputs.empty());
    EXPECT_FALSE(p.encoding.binary_default);
    EXPECT_FALSE(p.request.priority.has_value());
    EXPECT_FALSE(p.request.timeout.has_value());
}

TEST(KServeRequest, ParametersAndRequestedOutputs) {
    ParsedInferRequest p = parse_ok(R"({"parameters":{"priority":1,"timeout":2500,"binary_data_output":true,
        "custom":"ignored"},"inputs":[],"outputs":[{"name":"a","parameters":{"binary_data":false}},{"name":"b"}]})");
    EXPECT_EQ(p.request.priority, Priority::kRealTime);
    EXPECT_EQ(p.request.timeout, std::chrono::microseconds(2500));
    EXPECT_EQ(p.request.outputs, (std::vector<std::string>{"a", "b"}));
    EXPECT_FALSE(p.encoding.binary_for("a"));
    EXPECT_TRUE(p.encoding.binary_for("b"));
    EXPECT_TRUE(p.encoding.binary_for("c"));

    EXPECT_EQ(parse_ok(R"({"parameters":{"priority":2},"inputs":[]})").request.priority, Priority::kBestEffort);
    EXPECT_EQ(parse_ok(R"({"parameters":{"priority":0},"inputs":[]})").request.priority, std::nullopt);
    EXPECT_EQ(parse_ok(R"({"parameters":{"priority":"realtime"},"inputs":[]})").request.priority, Priority::kRealTime);
    EXPECT_EQ(parse_ok(R"({"parameters":{"priority":"best_effort"},"inputs":[]})").request.priority,
              Priority::kBestEffort);
    EXPECT_EQ(parse_ok(R"({"parameters":{"timeout":0},"inputs":[]})").request.timeout, std::nullopt);
    EXPECT_EQ(parse_ok(R"({"parameters":{"sequence_id":0},"inputs":[]})").request.inputs.size(), 0u);
}

TEST(KServeRequest, BinaryInputs) {
    // UINT32 [2,2] = 1,2,3,0x01020304 (16 bytes), BOOL [3] = T,F,T (3 bytes), BYTES [2] = "ab",""
    // (4+2 + 4+0 bytes), and one JSON input between them.
    const std::string header = R"({"inputs":[
        {"name":"u","shape":[2,2],"datatype":"UINT32","parameters":{"binary_data_size":16}},
        {"name":"j","shape":[1],"datatype":"INT32","data":[7]},
        {"name":"b","shape":[3],"datatype":"BOOL","parameters":{"binary_data_size":3}},
        {"name":"s","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":10}}]})";
    const std::string binary =
        "\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x04\x03\x02\x01"s  // u
        "\x01\x00\x07"s                                                      // b
        "\x02\x00\x00\x00"s
        "ab"
        "\x00\x00\x00\x00"s;  // s
    ParsedInferRequest p = parse_ok(header + binary, header.size());
    ASSERT_EQ(p.request.inputs.size(), 4u);
    const Tensor& u = p.request.inputs[0].tensor;
    EXPECT_EQ(u.data_as<uint32_t>()[0], 1u);
    EXPECT_EQ(u.data_as<uint32_t>()[3], 0x01020304u);
    EXPECT_EQ(p.request.inputs[1].tensor.data_as<int32_t>()[0], 7);
    EXPECT_EQ(std::string(p.request.inputs[2].tensor.data_as<char>(), 3), "\x01\x00\x01"s);  // 7 -> true
    const Tensor& s = p.request.inputs[3].tensor;
    EXPECT_EQ(s.data_as<std::string>()[0], "ab");
    EXPECT_EQ(s.data_as<std::string>()[1], "");
}

TEST(KServeRequest, MalformedRequestsSayWhatIsWrong) {
    EXPECT_NE(parse_error("{\"inputs\": [").find("malformed JSON in the request"), std::string::npos);
    EXPECT_EQ(parse_error("[1]"), "the request must be a JSON object, got [1]");
    EXPECT_EQ(parse_error("{}"), "the request has no \"inputs\"");
    EXPECT_EQ(parse_error(R"({"inputs":{}})"), "\"inputs\" must be an array, got {}");
    EXPECT_EQ(parse_error(R"({"id":5,"inputs":[]})"), "request \"id\" must be a string, got 5");
    EXPECT_EQ(parse_error(R"({"inputs":[{"shape":[1]}]})"), "\"inputs\"[0] has no \"name\"");
    EXPECT_EQ(parse_error(input_json(R"("shape":[1],"datatype":"FP8","data":[1])")),
              "input 'x': unknown datatype \"FP8\"; expected one of BOOL, UINT8, UINT16, UINT32, UINT64, INT8, "
              "INT16, INT32, INT64, FP16, FP32, FP64, BF16, BYTES");
    EXPECT_EQ(parse_error(input_json(R"("shape":[2,2],"datatype":"FP32","data":[1,2,3])")),
              "input 'x': shape [2,2] has 4 elements, but \"data\" has 3");
    EXPECT_EQ(parse_error(input_json(R"("shape":[-1,2],"datatype":"FP32","data":[1,2])")),
              "input 'x': shape dimension -1 is negative or too large");
    EXPECT_EQ(parse_error(input_json(R"("shape":[4294967296,4294967296],"datatype":"FP32","data":[])")),
              "input 'x': shape [4294967296,4294967296] has too many elements");
    EXPECT_EQ(parse_error(input_json(R"("shape":[2],"datatype":"INT32","data":[1,"2"])")),
              "input 'x': data element 1 is \"2\", expected an integer for INT32");
    EXPECT_EQ(parse_error(input_json(R"("shape":[2],"datatype":"INT8","data":[1,128])")),
              "input 'x': data element 1 is 128, out of the range of INT8");
    EXPECT_EQ(parse_error(input_json(R"("shape":[1],"datatype":"UINT16","data":[-1])")),
              "input 'x': data element 0 is -1, out of the range of UINT16");
    EXPECT_EQ(parse_error(input_json(R"("shape":[1],"datatype":"INT64","data":[1.5])")),
              "input 'x': data element 0 is 1.5, expected an integer for INT64");
    EXPECT_EQ(parse_error(input_json(R"("shape":[1],"datatype":"BOOL","data":[1])")),
              "input 'x': data element 0 is 1, expected a boolean for BOOL");
    EXPECT_EQ(parse_error(input_json(R"("shape":[1],"datatype":"FP32","data":1)")),
              "input 'x': \"data\" must be an array, got 1");
    EXPECT_EQ(parse_error(input_json(R"("shape":[1],"datatype":"FP32")")),
              "input 'x' has neither \"data\" nor the parameter \"binary_data_size\"");
    EXPECT_EQ(parse_error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]},
                                        {"name":"x","shape":[1],"datatype":"FP32","data":[2]}]})"),
              "input 'x' is given twice");
    EXPECT_EQ(parse_error(R"({"parameters":{"priority":"urgent"},"inputs":[]})"),
              "request parameter \"priority\" is \"urgent\"; expected \"realtime\", \"best_effort\" or an integer (0 "
              "= the model's default, 1 = real-time, >1 = best effort)");
    EXPECT_EQ(parse_error(R"({"parameters":{"priority":-1},"inputs":[]})"),
              "request parameter \"priority\" must be a non-negative integer, got -1");
    EXPECT_EQ(parse_error(R"({"parameters":{"timeout":"soon"},"inputs":[]})"),
              "request parameter \"timeout\" (microseconds) must be a non-negative integer, got \"soon\"");
    EXPECT_EQ(parse_error(R"({"parameters":{"sequence_id":3},"inputs":[]})"),
              "request parameter \"sequence_id\": sequence batching is not supported");
    EXPECT_EQ(parse_error(R"({"inputs":[],"outputs":[{"name":"y","parameters":{"classification":2}}]})"),
              "requested output 'y': the classification extension is not supported");
    EXPECT_EQ(parse_error(R"({"inputs":[],"outputs":[{"name":"y"},{"name":"y"}]})"),
              "requested output 'y' is requested twice");
    EXPECT_EQ(parse_error(R"({"inputs":[],"outputs":[{"name":"y","parameters":{"binary_data":1}}]})"),
              "requested output 'y': parameter \"binary_data\" must be a boolean, got 1");
}

TEST(KServeRequest, BinaryBodyErrors) {
    const std::string header = input_json(R"("shape":[2,2],"datatype":"FP32","parameters":{"binary_data_size":16})");
    const std::string sixteen(16, '\0');
    EXPECT_EQ(parse_error(header + std::string(8, '\0'), header.size()),
              "truncated binary body: input 'x' has binary_data_size 16 at offset 0 of the binary data, but only 8 "
              "bytes remain");
    EXPECT_EQ(parse_error(header + sixteen + "xy", header.size()),
              "the body has 2 bytes after the inputs' binary data (the binary_data_size parameters add up to 16)");
    EXPECT_EQ(parse_error(header + sixteen, header.size() + 17),
              "Inference-Header-Content-Length is " + std::to_string(header.size() + 17) + " but the body has only " +
                  std::to_string(header.size() + 16) + " bytes");
    const std::string h12 = input_json(R"("shape":[2,2],"datatype":"FP32","parameters":{"binary_data_size":12})");
    EXPECT_EQ(parse_error(h12 + std::string(12, '\0'), h12.size()),
              "input 'x': binary data has 12 bytes, expected 16 (shape [2,2] of FP32)");
    const std::string both =
        input_json(R"("shape":[1],"datatype":"FP32","data":[1],"parameters":{"binary_data_size":4})");
    EXPECT_EQ(parse_error(both + "abcd", both.size()),
              "input 'x' has both \"data\" and the parameter \"binary_data_size\"; give one");
    const std::string bytes = input_json(R"("shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":9})");
    EXPECT_EQ(parse_error(bytes + "\x03\x00\x00\x00"
                                  "abc"
                                  "\x01\x00"s,
                          bytes.size()),
              "input 'x': BYTES binary data ends inside the length of element 1 (2 bytes left at offset 7)");
    const std::string bytes2 = input_json(R"("shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":6})");
    EXPECT_EQ(parse_error(bytes2 + "\x05\x00\x00\x00"
                                   "ab"s,
                          bytes2.size()),
              "input 'x': BYTES element 0 has length 5 but only 2 bytes follow");
    const std::string bytes3 = input_json(R"("shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":5})");
    EXPECT_EQ(parse_error(bytes3 + "\x01\x00\x00\x00"
                                   "a"s,
                          bytes3.size()),
              "input 'x': shape [2] has 2 elements, but the BYTES binary data holds 1");
    // Without the header, binary data after the JSON is not JSON.
    EXPECT_EQ(parse_error(header + sixteen),
              "malformed JSON in the request: a NUL byte at offset " + std::to_string(header.size()) +
                  " (binary tensor data needs the Inference-Header-Content-Length header)");
    EXPECT_NE(parse_error(header + "\x01\x02").find("malformed JSON in the request: parse error"), std::string::npos);

    size_t n = 0;
    EXPECT_TRUE(parse_header_length("123", n).ok());
    EXPECT_EQ(n, 123u);
    EXPECT_EQ(parse_header_length("12a", n).message,
              "Inference-Header-Content-Length must be a byte count, got \"12a\"");
    EXPECT_FALSE(parse_header_length("", n).ok());
    EXPECT_FALSE(parse_header_length("-1", n).ok());
}

Tensor f32(Shape shape, std::initializer_list<float> v) {
    Tensor t(DType::kFloat32, std::move(shape));
    std::copy(v.begin(), v.end(), t.data_as<float>());
    return t;
}

TEST(KServeResponse, JsonOutputs) {
    Tensor s(DType::kString, {2});
    s.data_as<std::string>()[0] = "hi";
    s.data_as<std::string>()[1] = "\"q\"";
    Tensor b(DType::kBool, {2});
    b.data_as<uint8_t>()[1] = 1;
    Tensor i(DType::kInt64, {1});
    i.data_as<int64_t>()[0] = -5;
    InferResponse r{"m", "1", "req-1", {{"y", f32({2, 1}, {1.5f, -2.0f})}, {"s", s}, {"b", b}, {"i", i}}};
    EncodedResponse out;
    ASSERT_TRUE(write_infer_response(r, {}, out).ok());
    EXPECT_FALSE(out.header_length.has_value());
    EXPECT_EQ(out.body, R"({"model_name":"m","model_version":"1","id":"req-1","outputs":[)"
                        R"({"name":"y","datatype":"FP32","shape":[2,1],"data":[1.5,-2.0]},)"
                        R"({"name":"s","datatype":"BYTES","shape":[2],"data":["hi","\"q\""]},)"
                        R"({"name":"b","datatype":"BOOL","shape":[2],"data":[false,true]},)"
                        R"({"name":"i","datatype":"INT64","shape":[1],"data":[-5]}]})");
}

TEST(KServeResponse, BinaryOutputs) {
    Tensor s(DType::kString, {2});
    s.data_as<std::string>()[0] = "abc";
    Tensor u(DType::kUInt16, {2});
    u.data_as<uint16_t>()[0] = 0x0102;
    u.data_as<uint16_t>()[1] = 0xfffe;
    InferResponse r{"m", "3", "", {{"y", f32({1}, {1.0f})}, {"s", s}, {"u", u}}};
    OutputEncoding enc;
    enc.binary_default = true;
    enc.binary["u"] = false;
    EncodedResponse out;
    ASSERT_TRUE(write_infer_response(r, enc, out).ok());
    const std::string json = R"({"model_name":"m","model_version":"3","outputs":[)"
                             R"({"name":"y","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}},)"
                             R"({"name":"s","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":11}},)"
                             R"({"name":"u","datatype":"UINT16","shape":[2],"data":[258,65534]}]})";
    ASSERT_TRUE(out.header_length.has_value());
    EXPECT_EQ(*out.header_length, json.size());
    EXPECT_EQ(out.body, json + "\x00\x00\x80\x3f"s +
                            "\x03\x00\x00\x00"
                            "abc"
                            "\x00\x00\x00\x00"s);
}

TEST(KServeResponse, OutputWithoutKServeDatatypeIsInternalError) {
    InferResponse r{"m", "1", "", {{"q", Tensor(DType::kFloat8E4M3FN, {1})}}};
    EncodedResponse out;
    Failure f = write_infer_response(r, {}, out);
    EXPECT_EQ(f.code, Code::kInternal);
    EXPECT_EQ(f.message, "output 'q' has dtype f8e4m3fn, which KServe v2 has no datatype for");
}

TEST(KServeJson, MetadataIndexStatisticsErrors) {
    EXPECT_EQ(server_metadata_json({"kiln", "0.1", {"statistics"}}),
              R"({"name":"kiln","version":"0.1","extensions":["statistics"]})");
    EXPECT_EQ(model_metadata_json({"m", {"1"}, "onnxruntime_onnx", {{"x", "FP32", {-1, 3}}}, {{"y", "INT64", {1}}}}),
              R"({"name":"m","versions":["1"],"platform":"onnxruntime_onnx",)"
              R"("inputs":[{"name":"x","datatype":"FP32","shape":[-1,3]}],)"
              R"("outputs":[{"name":"y","datatype":"INT64","shape":[1]}]})");
    EXPECT_EQ(
        repository_index_json({{"a", "1", "READY", ""}, {"b", "", "UNAVAILABLE", "compile error"}}),
        R"([{"name":"a","version":"1","state":"READY"},{"name":"b","state":"UNAVAILABLE","reason":"compile error"}])");
    ModelStatistics s;
    s.name = "m";
    s.version = "1";
    s.last_inference_ms = 42;
    s.inference_count = 3;
    s.execution_count = 1;
    s.success = {3, 300};
    s.batch_stats = {{3, {1, 1}, {1, 2}, {1, 3}}};
    EXPECT_EQ(
        statistics_json({s}),
        R"({"model_stats":[{"name":"m","version":"1","last_inference":42,"inference_count":3,)"
        R"("execution_count":1,"inference_stats":{"success":{"count":3,"ns":300},"fail":{"count":0,"ns":0},)"
        R"("queue":{"count":0,"ns":0},"compute_input":{"count":0,"ns":0},"compute_infer":{"count":0,"ns":0},)"
        R"("compute_output":{"count":0,"ns":0},"cache_hit":{"count":0,"ns":0}},"batch_stats":[{"batch_size":3,)"
        R"("compute_input":{"count":1,"ns":1},"compute_infer":{"count":1,"ns":2},"compute_output":{"count":1,"ns":3}}]}]})");
    EXPECT_EQ(error_json("bad \"x\""), R"({"error":"bad \"x\""})");
    EXPECT_EQ(http_status(Code::kInvalidArgument), 400);
    EXPECT_EQ(http_status(Code::kNotFound), 404);
    EXPECT_EQ(http_status(Code::kUnavailable), 503);
    EXPECT_EQ(http_status(Code::kDeadlineExceeded), 504);
    EXPECT_EQ(http_status(Code::kInternal), 500);

    bool ready = true;
    EXPECT_TRUE(parse_repository_index_request("", ready).ok());
    EXPECT_FALSE(ready);
    EXPECT_TRUE(parse_repository_index_request(R"({"ready":true})", ready).ok());
    EXPECT_TRUE(ready);
    EXPECT_EQ(parse_repository_index_request(R"({"ready":1})", ready).message,
              "repository index: \"ready\" must be a boolean");
    EXPECT_EQ(parse_repository_index_request("{", ready).message, "malformed JSON in the repository index request");
    EXPECT_TRUE(parse_repository_load_request(R"({"parameters":{"unload_dependents":false}})", "m", false).ok());
    EXPECT_EQ(parse_repository_load_request(R"({"parameters":{"config":"{}"}})", "m", true).message,
              "load of model 'm': parameter \"config\" (overriding the model's config or files) is not supported; "
              "Kiln loads models from the repository only");
}

}  // namespace
}  // namespace kiln::serve::kserve
