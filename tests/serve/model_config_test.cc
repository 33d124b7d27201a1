// config.pbtxt parsing, auto-complete and checks (serve/model_config.h).
#include <gtest/gtest.h>

#include "serve/model_config.h"

namespace kiln::serve {
namespace {

TensorInfo info(const std::string& name, DType d, std::vector<int64_t> shape, std::vector<std::string> symbols) {
    TensorInfo t;
    t.name = name;
    t.dtype = d;
    t.shape = std::move(shape);
    t.symbols = std::move(symbols);
    return t;
}

ModelSignature batchable_model() {
    return {{info("x", DType::kFloat32, {-1, 4}, {"N", ""})}, {info("y", DType::kFloat32, {-1, 3}, {"N", ""})}, false};
}

TEST(serve_ModelConfig, ParsesTritonFieldsAndReportsUnknownOnes) {
    std::vector<std::string> warnings;
    bool mbs_set = false;
    auto c = parse_model_config(R"(
name: "m"
platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
optimization { execution_accelerators { cpu_execution_accelerator: [ { name: "openvino" } ] } }
dynamic_batching { preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 100
  default_queue_policy { max_queue_size: 7 } }
parameters { key: "sla_ms" value { string_value: "25" } }
)", "config.pbtxt", warnings, &mbs_set);
    EXPECT_TRUE(mbs_set);
    EXPECT_EQ(c.max_batch_size(), 4);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_EQ(warnings[0], "config.pbtxt:6: field 'optimization' is not used by Kiln");
    complete_model_config(c, "m", batchable_model(), true, true, warnings);
    ModelSettings s = model_settings(c, warnings);
    EXPECT_EQ(s.max_batch_size, 4);
    ASSERT_TRUE(s.dynamic_batching.has_value());
    EXPECT_EQ(s.dynamic_batching->max_batch_size, 4);
    EXPECT_EQ(s.dynamic_batching->preferred_batch_sizes, (std::vector<int>{2, 4}));
    EXPECT_EQ(s.dynamic_batching->max_queue_delay.count(), 100);
    EXPECT_EQ(s.queue[1].max_queue_size, 7u);
    ASSERT_TRUE(s.sla.has_value());
    EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(*s.sla).count(), 25);
    ASSERT_EQ(c.output_size(), 1);  // completed from the model
    EXPECT_EQ(c.output(0).dims_size(), 1);
    EXPECT_EQ(c.output(0).dims(0), 3);
}

TEST(serve_ModelConfig, SyntaxErrorNamesTheLine) {
    std::vector<std::string> warnings;
    try {
        parse_model_config("name: \"m\"\nmax_batch_size: \"eight\"\n", "config.pbtxt", warnings);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
        EXPECT_NE(std::string(e.what()).find("config.pbtxt:2"), std::string::npos) << e.what();
    }
}

TEST(serve_ModelConfig, AutoCompleteWithoutAFile) {
    inference::ModelConfig c;
    std::vector<std::string> warnings;
    complete_model_config(c, "m", batchable_model(), false, false, warnings);
    EXPECT_EQ(c.name(), "m");
    EXPECT_EQ(c.platform(), "onnxruntime_onnx");
    EXPECT_EQ(c.max_batch_size(), kDefaultMaxBatchSize);
    EXPECT_TRUE(c.has_dynamic_batching());
    ASSERT_EQ(c.input_size(), 1);
    EXPECT_EQ(c.input(0).data_type(), inference::TYPE_FP32);
    EXPECT_EQ(c.instance_group(0).count(), 1);
    // A static first dimension: no batching.
    inference::ModelConfig fixed;
    ModelSignature sig{{info("x", DType::kFloat32, {1, 4}, {"", ""})}, {info("y", DType::kFloat32, {1, 3}, {"", ""})}, false};
    complete_model_config(fixed, "m", sig, false, false, warnings);
    EXPECT_EQ(fixed.max_batch_size(), 0);
    EXPECT_EQ(fixed.input(0).dims_size(), 2);
    // A config writing max_batch_size: 0 is honoured.
    inference::ModelConfig off = parse_model_config("max_batch_size: 0", "config.pbtxt", warnings);
    complete_model_config(off, "m", batchable_model(), true, true, warnings);
    EXPECT_EQ(off.max_batch_size(), 0);
    EXPECT_EQ(off.input(0).dims(0), -1);
}

void expect_invalid(const std::string& text, const std::string& needle) {
    std::vector<std::string> warnings;
    try {
        bool set = false;
        auto c = parse_model_config(text, "config.pbtxt", warnings, &set);
        complete_model_config(c, "m", batchable_model(), true, set, warnings);
        FAIL() << "expected an error for: " << text;
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

TEST(serve_ModelConfig, ChecksAgainstTheModel) {
    expect_invalid("input [ { name: \"x\" data_type: TYPE_INT64 dims: [4] } ]", "data_type TYPE_INT64");
    expect_invalid("max_batch_size: 2 input [ { name: \"x\" data_type: TYPE_FP32 dims: [5] } ]", "dims [5]");
    expect_invalid("input [ { name: \"z\" data_type: TYPE_FP32 dims: [4] } ]", "input 'z'");
    expect_invalid("name: \"other\"", "name 'other'");
    expect_invalid("max_batch_size: 4 dynamic_batching { preferred_batch_size: [ 16 ] }", "preferred_batch_size 16");
    expect_invalid("parameters { key: \"priority\" value { string_value: \"urgent\" } }", "parameter 'priority'");
    expect_invalid("parameters { key: \"threads\" value { string_value: \"-2\" } }", "parameter 'threads'");
    expect_invalid("instance_group [ { kind: KIND_GPU } ]", "GPU");
    expect_invalid("max_batch_size: 4 dynamic_batching { priority_levels: 2 default_priority_level: 1 "
                   "priority_queue_policy { key: 3 value { max_queue_size: 1 } } }",
                   "priority_queue_policy has level 3, outside 1..2 (priority_levels)");
    expect_invalid("max_batch_size: 4 dynamic_batching { priority_queue_policy { key: 0 value { max_queue_size: 1 } } }",
                   "priority_queue_policy has level 0");
    // max_batch_size on a model whose first dimension is fixed.
    std::vector<std::string> warnings;
    auto c = parse_model_config("max_batch_size: 4", "config.pbtxt", warnings);
    ModelSignature sig{{info("x", DType::kFloat32, {1, 4}, {"", ""})}, {info("y", DType::kFloat32, {1, 3}, {"", ""})}, false};
    EXPECT_THROW(complete_model_config(c, "m", sig, true, true, warnings), Error);
}

TEST(serve_ModelConfig, ReportsEveryParsedFieldKilnDoesNotUse) {
    std::vector<std::string> warnings;
    bool set = false;
    auto c = parse_model_config(R"(
max_batch_size: 4
runtime: "libtorch"
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] allow_ragged_batch: true format: FORMAT_NCHW } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 3 ] label_filename: "labels.txt" } ]
instance_group [ { name: "g0" kind: KIND_MODEL } ]
dynamic_batching { preserve_ordering: true
  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 500 } }
metric_tags { key: "team" value: "search" }
cc_model_filenames { key: "7.5" value: "model.plan" }
)", "config.pbtxt", warnings, &set);
    ASSERT_TRUE(warnings.empty()) << warnings[0];
    complete_model_config(c, "m", batchable_model(), true, set, warnings);
    std::string all;
    for (const std::string& w : warnings) all += w + "\n";
    for (const char* field : {"input 'x' allow_ragged_batch", "input 'x' format", "output 'y' label_filename",
                              "'runtime'", "'cc_model_filenames'", "'metric_tags'", "instance_group name",
                              "KIND_MODEL", "preserve_ordering", "timeout_action DELAY"})
        EXPECT_NE(all.find(field), std::string::npos) << field << " not reported in:\n" << all;
    // The defaults report nothing.
    std::vector<std::string> none;
    inference::ModelConfig plain;
    complete_model_config(plain, "m", batchable_model(), false, false, none);
    EXPECT_TRUE(none.empty()) << none[0];
}

// Levels past 2 share the best-effort queue: a policy given for one of them is reported, not
// dropped in silence; level 2's policy is the one the best-effort queue takes.
TEST(serve_ModelConfig, PolicyOfALevelPastTwoIsReportedNotApplied) {
    std::vector<std::string> warnings;
    auto c = parse_model_config(R"(
max_batch_size: 4
dynamic_batching { priority_levels: 3 default_priority_level: 2
  priority_queue_policy { key: 2 value { max_queue_size: 5 } }
  priority_queue_policy { key: 3 value { max_queue_size: 9 } } }
)", "config.pbtxt", warnings);
    complete_model_config(c, "m", batchable_model(), true, true, warnings);
    ModelSettings s = model_settings(c, warnings);
    EXPECT_EQ(s.queue[static_cast<int>(Priority::kBestEffort)].max_queue_size, 5u);
    std::string all;
    for (const std::string& w : warnings) all += w + "\n";
    EXPECT_NE(all.find("priority_queue_policy[3] is not applied"), std::string::npos) << all;
    EXPECT_EQ(all.find("priority_queue_policy[2] is not applied"), std::string::npos) << all;
}

TEST(serve_ModelConfig, PriorityLevelsAndJson) {
    EXPECT_FALSE(priority_from_level(0).has_value());
    EXPECT_EQ(*priority_from_level(1), Priority::kRealTime);
    EXPECT_EQ(*priority_from_level(2), Priority::kBestEffort);
    std::vector<std::string> warnings;
    auto c = parse_model_config("parameters { key: \"priority\" value { string_value: \"realtime\" } }"
                                " parameters { key: \"colour\" value { string_value: \"blue\" } }",
                                "config.pbtxt", warnings);
    complete_model_config(c, "m", batchable_model(), true, false, warnings);
    EXPECT_EQ(model_settings(c, warnings).default_priority, Priority::kRealTime);
    EXPECT_NE(std::find(warnings.begin(), warnings.end(), "parameter 'colour' is not used by Kiln"), warnings.end());
    std::string json = model_config_to_json(c);
    EXPECT_NE(json.find("\"max_batch_size\":8"), std::string::npos) << json;
    EXPECT_NE(json.find("\"dims\":[4]"), std::string::npos) << json;
    EXPECT_NE(json.find("\"data_type\":\"TYPE_FP32\""), std::string::npos) << json;
}

}  // namespace
}  // namespace kiln::serve
