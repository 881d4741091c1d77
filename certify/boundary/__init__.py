"""The boundary: what users type and pass, parsed and refused in one place (one-line `BadInput`).

Every question and every command reads its inputs through these modules (imported directly; this
package imports nothing, so `certify --help` stays light):

- `vectors`      a vector: "0.1,-2,3" or @FILE (.npy/.json/.csv); positive scalars; magnitudes
- `points`       a file of many points (`radius --points`, `report --data`, `bench --center @FILE`)
- `indices`      feature indices (`features=`, `--features`) and class indices
- `domains`      input domains: `--domain LO,HI`, a scalar (lo, hi), per-input vectors
- `model_files`  model files: ONNX networks, scikit-learn models (skops); pickles refused

Lower layers hold what solvers need too: the norms, MILP back-ends and bound methods a user may
name (`solvers.choices`), file kinds, signatures and the pickle suffixes (`models.file_kinds`),
the memory budget (`models.memory`), and the ONNX model resolver with its onnxruntime reference
(`models.onnx_reference`).
"""
