"""kiln.training's ONNX Runtime-shaped API (CheckpointState, Module, Optimizer, schedulers) on a
linear classifier whose gradients numpy computes in closed form: softmax cross-entropy of
logits = x W^T + b has d/dlogits = (softmax - onehot) / N."""
import numpy as np
import onnxruntime as ort
import pytest

import kiln
from kiln.training import CheckpointState, LinearLRScheduler, Module, Optimizer
from linear_classifier import np_loss_grads, save_linear_model

RNG = np.random.default_rng(7)
W0 = RNG.standard_normal((3, 4)).astype(np.float32)
B0 = RNG.standard_normal(3).astype(np.float32)
X = [RNG.standard_normal((5, 4)).astype(np.float32) for _ in range(3)]
Y = [RNG.integers(0, 3, 5).astype(np.int64) for _ in range(3)]


@pytest.fixture
def model(tmp_path):
    return save_linear_model(tmp_path / "linear.onnx", W0, B0)


def make(model, kind="sgd", fused=False, state=None, **opt):
    so = kiln.SessionOptions()
    so.intra_op_num_threads = 1
    m = Module(model, state or CheckpointState(), session_options=so, fused_step=fused)
    return m, Optimizer(m, kind, **opt)


def params(state):
    return state.parameters["W"].data, state.parameters["b"].data


@pytest.mark.parametrize("fused", [False, True])
def test_one_sgd_step_matches_closed_form(model, fused):
    state = CheckpointState()
    m, opt = make(model, fused=fused, state=state, lr=0.5)
    loss = m(X[0], Y[0])
    want_loss, gw, gb = np_loss_grads(W0, B0, X[0], Y[0])
    assert float(loss) == pytest.approx(want_loss, rel=1e-5)
    opt.step()
    w, b = params(state)
    np.testing.assert_allclose(w, W0 - 0.5 * gw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b, B0 - 0.5 * gb, rtol=1e-5, atol=1e-6)
    assert m.step_count == 1


def test_gradient_accumulation_sums_calls(model):
    state = CheckpointState()
    m, opt = make(model, state=state, lr=0.25)
    m(X[0], Y[0])
    m(X[1], Y[1])
    _, gw0, gb0 = np_loss_grads(W0, B0, X[0], Y[0])
    _, gw1, gb1 = np_loss_grads(W0, B0, X[1], Y[1])
    np.testing.assert_allclose(state.parameters["W"].grad, gw0 + gw1, rtol=1e-5, atol=1e-6)
    opt.step()
    w, b = params(state)
    np.testing.assert_allclose(w, W0 - 0.25 * (gw0 + gw1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b, B0 - 0.25 * (gb0 + gb1), rtol=1e-5, atol=1e-6)
    # lazy_reset_grad: the next call starts from zero.
    m.lazy_reset_grad()
    m(X[2], Y[2])
    _, gw2, _ = np_loss_grads(w, b, X[2], Y[2])
    np.testing.assert_allclose(state.parameters["W"].grad, gw2, rtol=1e-4, atol=1e-6)


def _run(m, opt, steps):
    out = []
    for s in range(steps):
        out.append(float(m(X[s % 3], Y[s % 3])))
        opt.step()
        m.lazy_reset_grad()
    return out


def test_fused_step_equals_separate(model):
    a = _run(*make(model, fused=False, lr=0.1, momentum=0.9), 6)
    b = _run(*make(model, fused=True, lr=0.1, momentum=0.9), 6)
    np.testing.assert_allclose(a, b, rtol=1e-6)


def test_fused_step_writes_over_its_parameters_and_keeps_the_callers_arrays(model):
    # SGD with momentum, two fused steps: the step writes the new parameters and momenta over
    # the old ones (buffer donation, memory_report says how many), the values are numpy's
    # closed form, and arrays the caller read before a step keep their values.
    state = CheckpointState()
    m, opt = make(model, fused=True, state=state, lr=0.5, momentum=0.9)
    w, b, vw, vb = W0.copy(), B0.copy(), np.zeros_like(W0), np.zeros_like(B0)
    for s in range(2):
        before = params(state)
        before_copy = [a.copy() for a in before]
        m(X[s], Y[s])
        opt.step()
        m.lazy_reset_grad()
        _, gw, gb = np_loss_grads(w, b, X[s], Y[s])
        vw, vb = 0.9 * vw + gw, 0.9 * vb + gb
        w, b = w - 0.5 * vw, b - 0.5 * vb
        np.testing.assert_allclose(params(state)[0], w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(params(state)[1], b, rtol=1e-5, atol=1e-6)
        for got, want in zip(before, before_copy):
            np.testing.assert_array_equal(got, want)
    donated = [line for line in m.memory_report().splitlines() if line.startswith("donated inputs:")]
    assert donated and int(donated[0].split()[2]) >= 1, m.memory_report()


def test_a_fused_step_refused_for_its_labels_updates_nothing(model):
    # The step writes over its parameters and momenta, but the labels are checked by the loss,
    # which every update waits for: a refused batch leaves the state as it was, so training on
    # continues exactly as if the batch had never come.
    def train(with_bad_batch):
        state = CheckpointState()
        m, opt = make(model, fused=True, state=state, lr=0.5, momentum=0.9)
        for s in range(3):
            if with_bad_batch and s == 1:
                bad = Y[1].copy()
                bad[2] = 7
                with pytest.raises(kiln.InvalidArgument, match="outside"):
                    m(X[1], bad)
            m(X[s], Y[s])
            opt.step()
            m.lazy_reset_grad()
        return params(state)

    for got, want in zip(train(True), train(False)):
        np.testing.assert_array_equal(got, want)


def test_fused_step_refuses_deferred_patterns(model):
    m, opt = make(model, fused=True, lr=0.1)
    m(X[0], Y[0])
    with pytest.raises(kiln.InvalidArgument, match="fused_step"):
        m(X[1], Y[1])
    with pytest.raises(kiln.InvalidArgument, match="fused_step"):
        m.eval()
    opt.step()
    m.eval()


def test_eval_leaves_parameters(model):
    state = CheckpointState()
    m, _ = make(model, state=state)
    m.eval()
    loss = m(X[0], Y[0])
    assert float(loss) == pytest.approx(np_loss_grads(W0, B0, X[0], Y[0])[0], rel=1e-5)
    np.testing.assert_array_equal(params(state)[0], W0)


def test_checkpoint_round_trip(model, tmp_path):
    state = CheckpointState()
    m, opt = make(model, "adam", state=state, lr=0.05)
    _run(m, opt, 2)
    state.properties["epoch"] = 3
    state.properties["note"] = "resume me"
    ckpt = str(tmp_path / "state.ckpt")
    CheckpointState.save_checkpoint(state, ckpt)
    rest = _run(m, opt, 3)

    loaded = CheckpointState.load_checkpoint(ckpt)
    assert loaded.properties == {"epoch": 3, "note": "resume me"}
    assert sorted(loaded.parameters) == ["W", "b"]
    m2, opt2 = make(model, "adam", state=loaded, lr=0.05)
    resumed = _run(m2, opt2, 3)  # the Adam moments and the step count came back too
    np.testing.assert_allclose(resumed, rest, rtol=1e-6)
    assert m2.step_count == 5


def test_learning_rate_and_linear_scheduler(model):
    state = CheckpointState()
    m, opt = make(model, state=state, lr=0.3)
    assert opt.get_learning_rate() == pytest.approx(0.3)
    sched = LinearLRScheduler(opt, warmup_step_count=2, total_step_count=6, initial_lr=1.0)
    lrs = []
    for s in range(6):
        lrs.append(opt.get_learning_rate())
        w_before = params(state)[0]
        m(X[s % 3], Y[s % 3])
        g = state.parameters["W"].grad.copy()
        opt.step()
        m.lazy_reset_grad()
        sched.step()
        np.testing.assert_allclose(params(state)[0], w_before - lrs[-1] * g, rtol=1e-5, atol=1e-6)
    assert lrs == pytest.approx([0.0, 0.5, 1.0, 0.75, 0.5, 0.25])


def test_contiguous_parameters_round_trip(model):
    state = CheckpointState()
    m, _ = make(model, state=state)
    flat = m.get_contiguous_parameters()
    np.testing.assert_array_equal(flat, np.concatenate([W0.ravel(), B0]))
    assert m.get_parameters_size() == 15
    m.copy_buffer_to_parameters(flat * 2)
    np.testing.assert_array_equal(params(state)[1], B0 * 2)


def test_export_runs_in_onnxruntime(model, tmp_path):
    state = CheckpointState()
    m, opt = make(model, state=state, lr=0.5)
    _run(m, opt, 2)
    out = str(tmp_path / "trained.onnx")
    m.export_model_for_inferencing(out, ["logits"])
    w, b = params(state)
    got = ort.InferenceSession(out).run(None, {"x": X[0]})[0]
    np.testing.assert_allclose(got, X[0] @ w.T + b, rtol=1e-5, atol=1e-5)


def test_errors(model):
    m, opt = make(model)
    with pytest.raises(kiln.InvalidArgument, match="expected 2 inputs"):
        m(X[0])
    with pytest.raises(kiln.InvalidArgument, match="no gradients"):
        opt.step()
    with pytest.raises(kiln.InvalidArgument, match="kind must be one of"):
        Optimizer(m, "lion")
    with pytest.raises(kiln.InvalidArgument, match="labels"):
        m(X[0], Y[0].astype(np.int32))  # the native session names the input, expected vs got


def test_generate_artifacts_and_ort_loop(model, tmp_path):
    """ONNX Runtime's loop, file for file: artifacts, load_checkpoint, Module, Optimizer(path)."""
    from kiln.training import artifacts
    paths = artifacts.generate_artifacts(model, loss=artifacts.LossType.CrossEntropyLoss,
                                         optimizer=artifacts.OptimType.SGD, artifact_directory=str(tmp_path / "art"),
                                         lr=0.5)
    state = CheckpointState.load_checkpoint(paths["checkpoint"])
    np.testing.assert_array_equal(state.parameters["W"].data, W0)  # readable before any Module
    m = Module(paths["training_model"], state)
    opt = Optimizer(paths["optimizer"], m)
    assert opt.get_learning_rate() == pytest.approx(0.5)
    m.train()
    m(X[0], Y[0])
    opt.step()
    m.lazy_reset_grad()
    _, gw, _ = np_loss_grads(W0, B0, X[0], Y[0])
    np.testing.assert_allclose(params(state)[0], W0 - 0.5 * gw, rtol=1e-5, atol=1e-6)
    # frozen_params: only the others train.
    paths = artifacts.generate_artifacts(model, frozen_params=["b"], optimizer="sgd",
                                         artifact_directory=str(tmp_path / "frozen"))
    m2 = Module(paths["training_model"], CheckpointState.load_checkpoint(paths["checkpoint"]))
    assert list(m2._state.parameters) == ["W"]
