// Sources, augmentation stages and field mapping of `kiln train` (train_data.h).
#include "train_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "data/transforms.h"
#include "kiln/error.h"

namespace kiln::cli {
namespace {

std::string field_list(const data::Example& e) {
    std::string out;
    for (const auto& [name, t] : e) out += (out.empty() ? "" : ", ") + name + " " + dtype_name(t.dtype()) + shape_str(t.shape());
    return out.empty() ? "(none)" : out;
}

std::shared_ptr<data::Source> open_checked(const std::string& path, const char* option) {
    KILN_CHECK(std::filesystem::exists(path), kIOError) << option << " '" << path << "': no such file or directory";
    std::shared_ptr<data::Source> src = data::open_source(path);
    KILN_CHECK(src->size() > 0, kInvalidArgument) << option << " '" << path << "' holds no records";
    return src;
}

/// Maps every step input to a data field (see train_data.h).
std::map<std::string, std::string> map_fields(const DataArgs& args, const StepInputs& step, const data::Example& e,
                                              const std::string& data_path) {
    std::map<std::string, std::string> field_of;
    if (!step.labels.empty()) {
        std::string label = args.label_name;
        for (const char* guess : {"labels", "label", "y"})
            if (label.empty() && e.count(guess)) label = guess;
        KILN_CHECK(!label.empty(), kInvalidArgument)
            << "--data '" << data_path << "' has no labels field (looked for labels, label, y); its fields: "
            << field_list(e) << "; name it with --label-name";
        KILN_CHECK(e.count(label), kInvalidArgument)
            << "--label-name " << label << ": --data '" << data_path << "' has no such field; its fields: " << field_list(e);
        field_of[step.labels] = label;
    }
    bool first = true;
    for (const TensorInfo& in : step.inputs) {
        if (in.name == step.labels) continue;
        std::string field = first && !args.input_name.empty() ? args.input_name : e.count(in.name) ? in.name : "";
        if (field.empty() && first) {
            std::vector<std::string> rest;
            for (const auto& [name, t] : e)
                if (step.labels.empty() || name != field_of[step.labels]) rest.push_back(name);
            if (rest.size() == 1) field = rest[0];
        }
        KILN_CHECK(!field.empty() && e.count(field), kInvalidArgument)
            << "model input '" << in.name << "': --data '" << data_path << "' has no field "
            << (field.empty() ? "of that name" : "'" + field + "'") << "; its fields: " << field_list(e)
            << (first ? "; name the field with --input-name" : "");
        field_of[in.name] = field;
        first = false;
    }
    return field_of;
}

/// The stages every record goes through: the label check (before any cast: a float label must
/// be a whole number), then casts of fields whose dtype is not the step input's.
void add_check_stages(data::Pipeline& p, const TrainData& d, const StepInputs& step, const data::Source& source,
                      const std::string& data_path) {
    std::string label_field = step.labels.empty() ? "" : d.field_of.at(step.labels);
    int64_t classes = step.num_classes;
    if (classes > 0 && !label_field.empty())
        p.map([label_field, classes, data_path](data::Example& e, data::Rng&) {
            const Tensor& labels = e.at(label_field);
            for (int64_t i = 0; i < labels.numel(); ++i) {
                double v = labels.get_f64(i);
                KILN_CHECK(v >= 0 && v < static_cast<double>(classes) && std::floor(v) == v, kInvalidArgument)
                    << "label " << v << " out of range in '" << data_path << "' (field '" << label_field
                    << "'): the model's loss output has " << classes << " classes, expected a whole number 0 <= label < "
                    << classes;
            }
        });
    data::Example first = source.get(0);
    for (const TensorInfo& in : step.inputs) {
        const std::string& field = d.field_of.at(in.name);
        if (first.at(field).dtype() != in.dtype) p.map(data::cast(in.dtype, field));
    }
}

}  // namespace

TrainData open_train_sources(const DataArgs& args) {
    TrainData d;
    std::shared_ptr<data::Source> all = open_checked(args.data, "--data");
    d.train_source = all;
    if (!args.eval_data.empty()) {
        d.eval_source = open_checked(args.eval_data, "--eval-data");
    } else if (args.eval_split > 0) {
        KILN_CHECK(args.eval_split < 1, kInvalidArgument) << "--eval-split must be in (0, 1), got " << args.eval_split;
        auto n_eval = static_cast<int64_t>(std::llround(args.eval_split * static_cast<double>(all->size())));
        KILN_CHECK(n_eval > 0 && n_eval < all->size(), kInvalidArgument)
            << "--eval-split " << args.eval_split << " of " << all->size() << " records leaves no eval or no training records";
        d.train_source = data::subset(all, 0, all->size() - n_eval);
        d.eval_source = data::subset(all, all->size() - n_eval, all->size());
    }
    KILN_CHECK(d.train_source->size() >= args.batch_size, kInvalidArgument)
        << "--data '" << args.data << "' has " << d.train_source->size() << " training records, fewer than --batch-size "
        << args.batch_size << " (the training step's batch is fixed, partial batches are dropped)";
    d.describe = "data: " + d.train_source->describe();
    if (d.eval_source) d.describe += "\neval data: " + d.eval_source->describe();
    return d;
}

void build_pipelines(const DataArgs& args, const StepInputs& step, TrainData& d) {
    d.field_of = map_fields(args, step, d.train_source->get(0), args.data);
    if (!args.eval_data.empty()) {
        std::map<std::string, std::string> eval_fields = map_fields(args, step, d.eval_source->get(0), args.eval_data);
        KILN_CHECK(eval_fields == d.field_of, kInvalidArgument)
            << "--eval-data '" << args.eval_data << "' names its fields differently from --data '" << args.data << "'";
    }

    data::PipelineOptions po{.batch_size = args.batch_size, .drop_remainder = true, .shuffle = args.shuffle,
                             .seed = args.seed, .prefetch = 2, .map_threads = args.map_threads};
    data::PipelineOptions train_po = po;  // only training is sharded: every rank evaluates the whole eval set
    train_po.shard_count = args.shard_count, train_po.shard_index = args.shard_index;
    d.train = std::make_unique<data::Pipeline>(d.train_source, train_po);
    add_check_stages(*d.train, d, step, *d.train_source, args.data);
    // Augmentation applies to the field of the model's first input (the image).
    auto first = std::find_if(step.inputs.begin(), step.inputs.end(),
                              [&](const TensorInfo& in) { return in.name != step.labels; });
    KILN_CHECK(first != step.inputs.end(), kInvalidArgument) << "the model has no input besides the labels";
    std::string image = d.field_of.at(first->name);
    if (!args.random_crop.empty()) {
        KILN_CHECK(args.random_crop.size() == 3 && args.random_crop[0] > 0 && args.random_crop[1] > 0 && args.random_crop[2] >= 0,
                   kInvalidArgument)
            << "--random-crop takes H,W,PAD (positive H and W, PAD >= 0)";
        d.train->map(data::random_crop(args.random_crop[0], args.random_crop[1], args.random_crop[2], image));
    }
    if (args.random_flip) d.train->map(data::random_flip_horizontal(0.5, image));
    std::vector<float> mean, stddev;
    if (!args.normalize.empty()) {
        // MEAN,STD, or per channel M1,..,Mc,S1,..,Sc.
        size_t n = args.normalize.size() / 2;
        KILN_CHECK(args.normalize.size() % 2 == 0, kInvalidArgument)
            << "--normalize takes MEAN,STD or M1,..,Mc,S1,..,Sc (as many means as stds), got " << args.normalize.size()
            << " values";
        for (size_t i = 0; i < n; ++i) {
            KILN_CHECK(args.normalize[n + i] != 0, kInvalidArgument) << "--normalize: a standard deviation is 0";
            mean.push_back(static_cast<float>(args.normalize[i]));
            stddev.push_back(static_cast<float>(args.normalize[n + i]));
        }
        d.train->map(data::normalize(mean, stddev, image));
    }
    if (d.eval_source) {
        data::PipelineOptions eo = po;
        eo.shuffle = false;
        eo.drop_remainder = false;  // every eval record counts: step_batch pads the last batch
        d.eval = std::make_unique<data::Pipeline>(d.eval_source, eo);
        add_check_stages(*d.eval, d, step, *d.eval_source, args.eval_data.empty() ? args.data : args.eval_data);
        if (!mean.empty()) d.eval->map(data::normalize(mean, stddev, image));
    }
}

std::map<std::string, Tensor> step_batch(const data::Batch& batch, const TrainData& d, const StepInputs& step,
                                         int64_t* valid) {
    std::map<std::string, Tensor> out;
    int64_t records = -1;
    for (const TensorInfo& in : step.inputs) {
        const std::string& field = d.field_of.at(in.name);
        auto it = batch.find(field);
        KILN_CHECK(it != batch.end(), kInvalidArgument) << "batch has no field '" << field << "' for input '" << in.name << "'";
        const Tensor& t = it->second;
        KILN_CHECK(!t.shape().empty() && !in.shape.empty(), kInvalidArgument)
            << "input '" << in.name << "' or its data field '" << field << "' has no batch dimension";
        int64_t b = t.shape()[0], want = in.shape[0];
        if (records < 0) records = b;
        KILN_CHECK(b == records && b <= want && b > 0, kInvalidArgument)
            << "data field '" << field << "': batch of " << b << " records, expected " << want;
        Shape per_record(in.shape.begin() + 1, in.shape.end());
        Shape got(t.shape().begin() + 1, t.shape().end());
        bool same = got == per_record;
        // A record shaped [1] for a scalar label, or [64] for [1,8,8]: same elements, reshaped.
        bool reshapable = std::none_of(per_record.begin(), per_record.end(), [](int64_t x) { return x < 0; }) &&
                          shape_numel(per_record) == shape_numel(got);
        KILN_CHECK(same || reshapable, kInvalidArgument)
            << "data field '" << field << "' has records of shape " << shape_str(got) << " but input '" << in.name
            << "' takes " << shape_str(in.shape) << " (records of " << shape_str(per_record) << ")";
        KILN_CHECK(t.dtype() == in.dtype, kInvalidArgument)
            << "data field '" << field << "' is " << dtype_name(t.dtype()) << ", input '" << in.name << "' takes "
            << dtype_name(in.dtype);
        Shape full = per_record;
        full.insert(full.begin(), want);
        if (b == want) {
            out[in.name] = t.reshaped(full);
            continue;
        }
        Tensor padded(t.dtype(), full);
        size_t rec = t.nbytes() / static_cast<size_t>(b);
        for (int64_t i = 0; i < want; ++i)
            std::memcpy(static_cast<char*>(padded.data()) + i * rec, static_cast<const char*>(t.data()) + (i % b) * rec, rec);
        out[in.name] = padded;
    }
    if (valid) *valid = records;
    return out;
}

}  // namespace kiln::cli
