"""Reference models: determinism and the trained digits nets' accuracy on held-out data."""

from __future__ import annotations

import numpy as np
import pytest

from models import BadInput
from models.zoo import acasxu_path, acasxu_property_path, digits_data, digits_net, random_relu_net


def test_random_nets_are_seeded():
    a, b, c = random_relu_net((4, 8, 3), 1), random_relu_net((4, 8, 3), 1), random_relu_net((4, 8, 3), 2)
    x = np.linspace(-1, 1, 4)
    assert np.array_equal(a.forward(x), b.forward(x)) and not np.array_equal(a.forward(x), c.forward(x))


def test_digits_net_is_accurate_on_held_out_digits():
    data = digits_data()
    assert data.x_train.shape[1] == 64 and 0.0 <= data.x_train.min() and data.x_train.max() <= 1.0
    net = digits_net((32,), seed=0)
    acc = np.mean(np.argmax(net.forward(data.x_test), axis=1) == data.y_test)
    assert acc > 0.9  # chance is 0.1


def test_bundled_files_and_bad_names():
    assert acasxu_path(5, 9).exists() and acasxu_property_path(10).exists()
    with pytest.raises(BadInput):
        acasxu_path(6, 1)
