"""torch import: the module's own forward and torch.autograd are the oracles."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models import BadInput, ModelError, Normalize, UnsupportedOperator, from_torch


def _compare(net, model, shape, n=6, seed=0, tol=1e-5):
    rng = np.random.default_rng(seed)
    model = model.eval()
    with torch.no_grad():
        for _ in range(n):
            x = rng.standard_normal(shape).astype(np.float32)
            ref = model(torch.from_numpy(x)).double().numpy().ravel()
            np.testing.assert_allclose(net.forward(x.ravel().astype(np.float64)), ref, rtol=tol, atol=tol * (1 + np.abs(ref).max()))


def test_sequential_mlp_matches_and_infers_shape():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(8, 8),
                                torch.nn.ReLU(), torch.nn.Linear(8, 3))
    net = from_torch(model)
    assert net.input_shape == (1, 4) and net.relu_sizes == [8, 8]
    _compare(net, model, (1, 4), seed=1)


def test_conv_bn_pool_normalize_stack_in_train_mode_is_imported_in_eval_mode():
    torch.manual_seed(1)
    model = torch.nn.Sequential(
        Normalize([0.1, -0.2], [0.5, 2.0]),
        torch.nn.Conv2d(2, 4, 3, stride=1, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
        torch.nn.AvgPool2d(2), torch.nn.Conv2d(4, 3, 2, groups=1, padding="valid"), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2),
    )
    with torch.no_grad():
        for bn in (model[2], model[10]):
            bn.running_mean.uniform_(-0.3, 0.3)
            bn.running_var.uniform_(0.5, 1.5)
    model.train()  # the importer must use the running statistics regardless
    net = from_torch(model, input_shape=(1, 2, 6, 6))
    assert model.training, "the caller's module must not be modified"
    _compare(net, model, (1, 2, 6, 6), seed=2)


def test_custom_module_with_functional_ops():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv1d(1, 2, 3, padding=1)
            self.fc = torch.nn.Linear(10, 3)
            self.register_buffer("mu", torch.tensor(0.25))

        def forward(self, x):
            h = torch.nn.functional.relu(self.conv(x - self.mu))
            h = h.view(h.size(0), -1)
            return 2.0 * self.fc(h) + 1.0

    torch.manual_seed(2)
    model = Net()
    net = from_torch(model, input_shape=(1, 1, 5))
    _compare(net, model, (1, 1, 5), seed=3)


def test_jacobian_matches_autograd():
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 6), torch.nn.ReLU(),
                                torch.nn.Linear(6, 3)).double()
    net = from_torch(model)
    rng = np.random.default_rng(4)
    for _ in range(5):
        x = rng.standard_normal(5)
        ref = torch.autograd.functional.jacobian(model, torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(net.jacobian(x), ref, atol=1e-12)


def test_refusals():
    with pytest.raises(UnsupportedOperator, match="Sigmoid"):
        from_torch(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Sigmoid()))

    class Residual(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 3)

        def forward(self, x):
            return x + torch.relu(self.fc(x))

    with pytest.raises(UnsupportedOperator, match="skip"):
        from_torch(Residual())
    bad = torch.nn.Sequential(torch.nn.Linear(2, 2))
    with torch.no_grad():
        bad[0].weight[0, 0] = float("nan")
    with pytest.raises(ModelError, match="NaN"):
        from_torch(bad)
    with pytest.raises(BadInput, match="input_shape"):
        from_torch(torch.nn.Sequential(torch.nn.Conv2d(1, 1, 2)))


def test_float32_overflow_in_torch_names_the_parameter():
    """The torch check explains float32 overflow like the ONNX one (issue 11, item 11)."""
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    with torch.no_grad():
        model[0].weight.fill_(1e30)
        model[2].weight.fill_(1e30)
    with pytest.raises(ModelError, match=r"torch computes inf/NaN.*overflow float32.*1e\+30 in parameter '0.weight'"):
        from_torch(model)
