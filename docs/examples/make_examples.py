"""Write the small example files the documentation's commands use (docs/examples/).

    python docs/examples/make_examples.py      (from the repository root; about 10 s, deterministic)

- `digits.onnx`: `models.zoo.digits_net((32,), 0)` (64-32-10 ReLU MLP trained on scikit-learn's 8x8
  digits, pixels in [0, 1]) exported with `models.onnx_export` (float32: the torch weights, exact);
  `digits_s1.onnx`: the same architecture trained with seed 1 (another network);
- `x.npy`: one digits test image (64 values in [0, 1]); `test.npy` and `test.csv`: five test images;
  `public.csv`: eight training images (public data for `certify report`);
- `cancel.onnx`: f(x) = relu(x) - relu(x) = 0, whose layer product (certify's cheap global bound) is 2;
- `rf.skops`, `linear.skops`: a random forest (50 trees, depth 5) and a logistic regression on
  scikit-learn's breast_cancer, features scaled to [0, 1] (the LDP utility case study);
  `record.npy`: the first test record (30 values in [0, 1]).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from models.ir import sequential  # noqa: E402
from models.onnx_export import save_onnx  # noqa: E402
from models.zoo import digits_net  # noqa: E402
from models.zoo.digits import digits_data  # noqa: E402


def main() -> None:
    d = digits_data(0)
    save_onnx(digits_net((32,), 0), HERE / "digits.onnx", dtype="float32")
    save_onnx(digits_net((32,), 1), HERE / "digits_s1.onnx", dtype="float32")  # same shape, another seed
    np.save(HERE / "x.npy", d.x_test[0])
    np.save(HERE / "test.npy", d.x_test[:5])
    header = ",".join(f"x{i}" for i in range(64))
    np.savetxt(HERE / "test.csv", d.x_test[:5], delimiter=",", header=header, comments="", fmt="%.6g")
    np.savetxt(HERE / "public.csv", d.x_train[:8], delimiter=",", header=header, comments="", fmt="%.6g")

    cancel = sequential([(np.array([[1.0], [1.0]]), np.zeros(2)), (np.array([[1.0, -1.0]]), np.zeros(1))], "cancel")
    save_onnx(cancel, HERE / "cancel.onnx")

    import zipfile

    import skops.io as sio
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import MinMaxScaler

    x, y = load_breast_cancer(return_X_y=True)
    x = MinMaxScaler().fit_transform(x)
    xtr, xte, ytr, _ = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    for name, model in [("rf", RandomForestClassifier(50, max_depth=5, random_state=0)),
                        ("linear", LogisticRegression(max_iter=5000))]:
        sio.dump(model.fit(xtr, ytr), HERE / f"{name}.skops", compression=zipfile.ZIP_DEFLATED, compresslevel=9)
    np.save(HERE / "record.npy", xte[0])


if __name__ == "__main__":
    main()
