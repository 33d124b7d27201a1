"""The shipped digits model and the test-model generator, checked against ONNX Runtime and
numpy (no Kiln needed)."""
import os
import subprocess
import sys

import numpy as np
import onnx

from kiln_helpers import REPO, load_npz, make_models, ort_outputs

DIGITS = os.path.join(REPO, "models", "digits")


def test_digits_files_have_the_documented_form():
    model = onnx.load(os.path.join(DIGITS, "digits_cnn.onnx"))
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 17
    assert os.path.getsize(os.path.join(DIGITS, "digits_cnn.onnx")) < 64 * 1024
    (inp,) = model.graph.input
    assert inp.name == "image"
    dims = inp.type.tensor_type.shape.dim
    assert dims[0].dim_param == "N" and [d.dim_value for d in dims[1:]] == [1, 8, 8]
    assert [o.name for o in model.graph.output] == ["probabilities", "digit"]
    images = load_npz(os.path.join(DIGITS, "test_images.npz"))
    assert list(images) == ["image"]
    assert images["image"].shape == (360, 1, 8, 8) and images["image"].dtype == np.float32
    assert 0.0 <= images["image"].min() and images["image"].max() <= 1.0
    labels = np.load(os.path.join(DIGITS, "test_labels.npy"))
    assert labels.shape == (360,) and labels.dtype == np.int64
    assert sorted(np.bincount(labels))[0] >= 35          # stratified: every digit ~36 times


def test_digits_model_is_accurate_under_ort():
    images = load_npz(os.path.join(DIGITS, "test_images.npz"))
    labels = np.load(os.path.join(DIGITS, "test_labels.npy"))
    out = ort_outputs(os.path.join(DIGITS, "digits_cnn.onnx"), images)
    assert (out["digit"] == labels).mean() >= 0.95
    np.testing.assert_allclose(out["probabilities"].sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(out["digit"], out["probabilities"].argmax(axis=1))


def test_generated_models_match_numpy_reference_and_are_deterministic(tmp_path):
    # write_test_models(check=True) compares ORT with the float64 eager numpy reference.
    names = [n for n in make_models.TEST_MODELS if n != "resnet18"]
    make_models.write_test_models(str(tmp_path / "a"), names, check=True)
    make_models.write_test_models(str(tmp_path / "b"), ["mlp", "two_input_mix"], check=False)
    for n in ["mlp", "two_input_mix"]:
        assert (tmp_path / "a" / f"{n}.onnx").read_bytes() == \
            (tmp_path / "b" / f"{n}.onnx").read_bytes()


def test_models_use_only_the_allowed_ops(models_dir):
    allowed = {"Conv", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh",
               "Exp", "Clip", "MaxPool", "AveragePool", "GlobalAveragePool",
               "BatchNormalization", "Flatten", "Reshape", "Transpose", "Concat", "Softmax",
               "Identity", "Constant", "ArgMax", "LayerNormalization", "Erf", "Gather"}
    paths = [str(models_dir / f"{n}.onnx") for n in make_models.TEST_MODELS]
    paths.append(os.path.join(DIGITS, "digits_cnn.onnx"))
    for p in paths:
        ops = {n.op_type for n in onnx.load(p, load_external_data=False).graph.node}
        assert ops <= allowed, f"{p}: ops outside the supported set: {ops - allowed}"


def test_resnet18_has_the_torchvision_layout(models_dir):
    g = onnx.load(str(models_dir / "resnet18.onnx")).graph
    convs = [n for n in g.node if n.op_type == "Conv"]
    bns = [n for n in g.node if n.op_type == "BatchNormalization"]
    assert len(convs) == 20 and len(bns) == 20          # 1 + 16 + 3 projection shortcuts
    assert sum(n.op_type == "Add" for n in g.node) == 8  # one residual add per basic block
    n_params = sum(int(np.prod(t.dims)) for t in g.initializer)
    # torchvision resnet18: 11,689,512 parameters + BN running mean/var (9,600).
    assert n_params == 11_689_512 + 9_600


def test_mobilenetv2_has_the_torchvision_layout(models_dir):
    g = onnx.load(str(models_dir / "mobilenetv2_96.onnx")).graph
    convs = [n for n in g.node if n.op_type == "Conv"]
    depthwise = [n for n in convs if any(a.name == "group" and a.i > 1 for a in n.attribute)]
    assert len(convs) == 52 and len(depthwise) == 17     # stem + 17 blocks (2-3 each) + head
    assert sum(n.op_type == "Add" for n in g.node) == 10  # residual adds of the stride-1 blocks
    assert sum(n.op_type == "Clip" for n in g.node) == 35  # ReLU6 = Clip(0, 6)
    bn_channels = sum(int(t.dims[0]) for t in g.initializer if t.name.startswith("bn")) // 4
    n_params = sum(int(np.prod(t.dims)) for t in g.initializer
                   if not t.name.startswith("relu6"))
    # torchvision mobilenet_v2: 3,504,872 parameters + BN running mean/var.
    assert n_params == 3_504_872 + 2 * bn_channels


def test_bert_tiny_is_an_encoder_of_the_exported_form(models_dir):
    g = onnx.load(str(models_dir / "bert_tiny.onnx")).graph
    ops = [n.op_type for n in g.node]
    assert ops.count("LayerNormalization") == 1 + 2 * 2   # embeddings + 2 per layer
    assert ops.count("Softmax") == 2 and ops.count("Erf") == 2
    assert ops.count("Gather") == 2                       # word and position embeddings
    assert ops.count("MatMul") == 2 * (6 + 2)             # q k v o ffn1 ffn2 + 2 attention
    (inp,) = g.input
    assert inp.name == "input_ids" and inp.type.tensor_type.elem_type == onnx.TensorProto.INT64


def test_big_models_are_not_in_the_default_set():
    assert set(make_models.BIG_MODELS) == {"resnet50", "mobilenetv2", "bert_base"}
    assert not set(make_models.BIG_MODELS) & set(make_models.TEST_MODELS)


def test_digits_report_prints_predictions_and_accuracy(tmp_path):
    labels = np.load(os.path.join(DIGITS, "test_labels.npy"))
    pred = labels.copy()
    pred[[0, 5, 100]] = (pred[[0, 5, 100]] + 1) % 10
    np.save(tmp_path / "digit.npy", pred)
    proc = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "digits_report.py"),
                           str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == "accuracy: 99.2% (357/360)"
    assert len(lines) == 1 + 20 + 1
    assert "wrong" in lines[1] and "wrong" in lines[6] and "wrong" not in lines[2]
