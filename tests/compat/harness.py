"""Run one corpus program and record what its Estimators' ``evaluate`` calls returned.

    python harness.py PROGRAM --framework {tf_estimator,estflow} --seed N --out RESULT.json

The same harness runs the unmodified program on TF 2.15 + tensorflow-estimator 2.15
(``record_tf215.py``) and the migrated program on estflow (``test_corpus.py``). The program's
text is not touched; the harness only

- seeds Python, NumPy and TensorFlow, and gives every ``RunConfig`` built without a
  ``tf_random_seed`` the run's seed (tf.estimator builds a new graph per call and seeds it from
  ``RunConfig.tf_random_seed``, so the global seed alone does not make it reproducible);
- serves the programs' downloads from ``tests/compat/data/`` (``keras.utils.get_file`` and
  ``pandas.read_csv`` of the known URLs, ``keras.datasets.mnist.load_data``, and a
  ``tensorflow_datasets`` stand-in for ``tfds.load('iris' | 'mnist')``), and stubs the display-only
  imports the notebooks make (``IPython.display.clear_output``, ``tensorflow_decision_forests``);
- wraps ``Estimator.evaluate`` of the framework under test to record each call's result;
- runs the program in a fresh temporary working directory (the notebooks write relative paths),
  after removing the absolute model directories the program names in its header
  (``# corpus: fresh-dir /tmp/...``), with the data files its header names copied in
  (``# corpus: data-file NAME RELATIVE/PATH``: ``data/NAME`` where the program reads
  ``RELATIVE/PATH``, for programs that read local files rather than download).

The result file: ``{"ok": bool, "error": str | None, "seconds": float, "evaluations": [{metric:
value, ..., "_estimator": i}, ...]}`` (values as Python floats/ints, non-scalar entries dropped;
``_estimator`` numbers the Estimator instances in the order they were first evaluated).
A program whose header says ``# corpus: record sklearn-metrics`` (notebooks that score
``predict()`` output with scikit-learn instead of calling ``evaluate``) also gets, after each
scikit-learn metric call, an entry ``{function name: last value, ...}`` with ``"_estimator": -1``
(``accuracy_score`` is recorded as ``accuracy``, ``roc_auc_score`` as ``auc``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import runpy
import shutil
import sys
import tempfile
import time
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")

URLS = {
    "iris_training.csv": "iris_training.csv",
    "iris_test.csv": "iris_test.csv",
    "tf-datasets/titanic/train.csv": "titanic_train.csv",
    "tf-datasets/titanic/eval.csv": "titanic_eval.csv",
    "autos/imports-85.data": "imports85.data",
    "machine-learning-databases/adult/adult.data": "census_adult.data.csv",
    "machine-learning-databases/adult/adult.test": "census_adult.test.csv",
    "mledu-datasets/california_housing_train.csv": "california_housing_train.csv",
}


def local_path(url: str) -> str | None:
    """The local file standing in for a download URL, or None."""
    for suffix, name in URLS.items():
        if str(url).endswith(suffix):
            return os.path.join(DATA, name)
    return None


def _install_download_shims(record_metric=None) -> None:
    import numpy as np
    import pandas as pd
    import tensorflow as tf

    real_read_csv = pd.read_csv

    def read_csv(*args, **kwargs):  # the path positional or as filepath_or_buffer=
        if args:
            args = (local_path(args[0]) or args[0], *args[1:])
        elif "filepath_or_buffer" in kwargs:
            path = kwargs["filepath_or_buffer"]
            kwargs["filepath_or_buffer"] = local_path(path) or path
        return real_read_csv(*args, **kwargs)

    pd.read_csv = read_csv

    def get_file(fname=None, origin=None, *args, **kwargs):
        path = local_path(origin or "") or local_path(fname or "")
        if path is None:
            raise RuntimeError(f"compat harness: no local file for download {origin or fname!r}")
        return path

    def mnist_load_data(path="mnist.npz"):
        with np.load(os.path.join(DATA, "mnist_small.npz")) as f:
            return (f["x_train"], f["y_train"]), (f["x_test"], f["y_test"])

    utils_modules = [tf.keras.utils, tf.compat.v1.keras.utils]  # TF 1 code: compat.v1's own
    try:
        import keras

        utils_modules.append(keras.utils)
    except ImportError:
        pass
    for module in utils_modules:
        module.get_file = get_file
    tf.keras.datasets.mnist.load_data = mnist_load_data
    tf.compat.v1.keras.datasets.mnist.load_data = mnist_load_data  # TF 1 code: its own module

    sys.modules["tensorflow_datasets"] = _fake_tfds(tf, np)
    _install_tf1_data_shims(tf, np)
    try:
        import IPython.display  # noqa: F401
    except ImportError:
        ipython = types.ModuleType("IPython")
        display = types.ModuleType("IPython.display")
        display.clear_output = lambda *a, **k: None
        display.display = lambda *a, **k: None
        ipython.display = display
        sys.modules["IPython"] = ipython
        sys.modules["IPython.display"] = display
    _install_no_plot()
    try:
        import tensorflow_decision_forests  # noqa: F401
    except ImportError:
        sys.modules["tensorflow_decision_forests"] = types.ModuleType("tensorflow_decision_forests")
    from fake_sklearn import install as install_fake_sklearn

    # both venvs lack scikit-learn; the same stand-in in each
    install_fake_sklearn(DATA, np, record=record_metric)


class _NoPlot(types.ModuleType):
    """Any attribute, any call: a plot that draws nothing (neither venv has matplotlib)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __call__(self, *args, **kwargs):
        return self


def _install_no_plot() -> None:
    """``matplotlib`` / ``seaborn`` stand-ins for the notebooks' plotting cells (display only)."""
    for root, subs in (("matplotlib", ("pyplot", "cm", "gridspec")), ("seaborn", ())):
        try:
            __import__(root)
        except ImportError:
            module = _NoPlot(root)
            sys.modules[root] = module
            for sub in subs:
                sys.modules[f"{root}.{sub}"] = module


def _install_tf1_data_shims(tf, np) -> None:
    """TF 1-era loaders: ``tensorflow.examples.tutorials.mnist.input_data`` (gone from TF 2),
    ``keras.datasets.imdb`` and ``urllib.request.urlretrieve`` of MNIST's idx files."""
    import gzip
    import urllib.request

    from corpus_data import imdb_load_data
    from corpus_data import imdb_word_index
    from corpus_data import mnist_idx_gz
    from corpus_data import mnist_read_data_sets

    names = ["tensorflow.examples", "tensorflow.examples.tutorials",
             "tensorflow.examples.tutorials.mnist"]
    for name in names:
        sys.modules.setdefault(name, types.ModuleType(name))
    input_data = types.ModuleType("tensorflow.examples.tutorials.mnist.input_data")
    input_data.read_data_sets = lambda *a, **k: mnist_read_data_sets(DATA, np, *a, **k)
    sys.modules[input_data.__name__] = input_data
    sys.modules[names[-1]].input_data = input_data
    imdb_modules = [tf.keras.datasets.imdb]
    try:
        import keras

        imdb_modules.append(keras.datasets.imdb)
    except (ImportError, AttributeError):
        pass
    for module in imdb_modules:
        module.load_data = lambda *a, **k: imdb_load_data(DATA, np, *a, **k)
        module.get_word_index = lambda *a, **k: imdb_word_index()
    real_urlretrieve = urllib.request.urlretrieve

    def urlretrieve(url, filename=None, *args, **kwargs):
        data = mnist_idx_gz(DATA, np, gzip, str(url))
        if data is None and local_path(str(url)):  # served files too (UCI Adult: official/r1)
            with open(local_path(str(url)), "rb") as f:
                data = f.read()
        if data is None:
            return real_urlretrieve(url, filename, *args, **kwargs)
        filename = filename or tempfile.mkstemp(suffix=".gz")[1]
        with open(filename, "wb") as f:
            f.write(data)
        return filename, None

    urllib.request.urlretrieve = urlretrieve


def _fake_tfds(tf, np) -> types.ModuleType:
    """``tfds.load`` for the two data sets the corpus loads, from the local files."""
    module = types.ModuleType("tensorflow_datasets")
    module.Split = types.SimpleNamespace(TRAIN="train", TEST="test", VALIDATION="validation")

    def splits(name):
        if name == "iris":  # tfds 'iris': 150 rows, features float32[4], label int64; train only
            rows = []
            for file in ("iris_training.csv", "iris_test.csv"):
                with open(os.path.join(DATA, file)) as f:
                    rows += [line.strip().split(",") for line in f.readlines()[1:] if line.strip()]
            x = np.array([[float(v) for v in r[:4]] for r in rows], np.float32)
            y = np.array([int(r[4]) for r in rows], np.int64)
            return {"train": (x, y)}
        if name == "mnist":  # image uint8[28, 28, 1], label int64
            with np.load(os.path.join(DATA, "mnist_small.npz")) as f:
                return {s: (f[f"x_{s}"][..., None], f[f"y_{s}"].astype(np.int64))
                        for s in ("train", "test")}
        raise RuntimeError(f"compat harness: no local data set {name!r}")

    def load(name, split=None, as_supervised=False, with_info=False, **kwargs):
        data = splits(name)

        def dataset(key):
            x, y = data[key]
            if as_supervised:
                return tf.data.Dataset.from_tensor_slices((x, y))
            feature = "features" if name == "iris" else "image"
            return tf.data.Dataset.from_tensor_slices({feature: x, "label": y})

        result = dataset(split) if split is not None else {k: dataset(k) for k in data}
        if not with_info:
            return result
        info = types.SimpleNamespace(name=name, splits={
            k: types.SimpleNamespace(num_examples=len(v[1])) for k, v in data.items()})
        return result, info

    module.load = load
    return module


def _scalar(value):
    try:
        import numpy as np

        array = np.asarray(value)
    except Exception:
        return None
    if array.shape != () or array.dtype.kind not in "biuf":
        return None
    return int(array) if array.dtype.kind in "biu" else float(array)


def _install_framework(framework: str, seed: int, evaluations: list) -> None:
    if framework == "tf_estimator":
        from tensorflow_estimator.python.estimator import estimator as module
        from tensorflow_estimator.python.estimator import run_config as config_module
    elif framework == "estflow":
        from estflow.estimator import estimator as module
        from estflow.estimator import run_config as config_module
    else:
        raise ValueError(framework)

    real_evaluate = module.Estimator.evaluate
    instances: list = []  # the Estimators evaluated, in the order of their first evaluation

    def evaluate(self, *args, **kwargs):
        result = real_evaluate(self, *args, **kwargs)
        if isinstance(result, dict):
            if not any(e is self for e in instances):
                instances.append(self)
            entry = {str(k): v for k, v in ((k, _scalar(v)) for k, v in result.items())
                     if v is not None}
            entry["_estimator"] = next(i for i, e in enumerate(instances) if e is self)
            evaluations.append(entry)
        return result

    module.Estimator.evaluate = evaluate

    real_init = config_module.RunConfig.__init__

    def init(self, *args, **kwargs):
        kwargs.setdefault("tf_random_seed", seed)
        real_init(self, *args, **kwargs)

    config_module.RunConfig.__init__ = init


def fresh_dirs(program: str) -> list[str]:
    with open(program) as f:
        return re.findall(r"^# corpus: fresh-dir (\S+)$", f.read(), flags=re.M)


def metric_recorder(program: str, evaluations: list):
    """The scikit-learn metric recorder of a program that asks for one (see the docstring)."""
    with open(program) as f:
        if not re.search(r"^# corpus: record sklearn-metrics$", f.read(), flags=re.M):
            return None
    names = {"accuracy_score": "accuracy", "roc_auc_score": "auc"}
    last: dict = {}

    def record(name: str, value) -> None:
        value = _scalar(value)
        if value is not None:
            last[names.get(name, name)] = value
            evaluations.append({**last, "_estimator": -1})

    return record


def data_files(program: str) -> list[tuple[str, str]]:
    with open(program) as f:
        return re.findall(r"^# corpus: data-file (\S+) (\S+)$", f.read(), flags=re.M)


def _copy_data_files(program: str, workdir: str) -> None:
    for name, relative in data_files(program):
        target = os.path.join(workdir, relative)
        os.makedirs(os.path.dirname(target) or workdir, exist_ok=True)
        shutil.copyfile(os.path.join(DATA, name), target)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("program")
    parser.add_argument("--framework", required=True, choices=["tf_estimator", "estflow"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    program = os.path.abspath(args.program)
    out = os.path.abspath(args.out)
    evaluations: list = []
    result = {"ok": False, "error": None, "seconds": None, "evaluations": evaluations}
    start = time.time()
    workdir = tempfile.mkdtemp(prefix="compat-")
    try:
        random.seed(args.seed)
        import numpy as np

        np.random.seed(args.seed)
        import tensorflow as tf

        tf.random.set_seed(args.seed)
        _install_download_shims(metric_recorder(program, evaluations))
        _install_framework(args.framework, args.seed, evaluations)
        for path in fresh_dirs(program):
            shutil.rmtree(path, ignore_errors=True)
        _copy_data_files(program, workdir)
        os.chdir(workdir)
        sys.argv = [program]
        runpy.run_path(program, run_name="__main__")
        result["ok"] = True
    except BaseException as err:  # noqa: B036 - SystemExit too: the program's failure is data
        if isinstance(err, SystemExit) and err.code in (0, None):
            result["ok"] = True
        else:
            result["error"] = "".join(traceback.format_exception(err))[-4000:]
    finally:
        result["seconds"] = round(time.time() - start, 1)
        os.chdir(HERE)
        shutil.rmtree(workdir, ignore_errors=True)
        with open(out, "w") as f:
            json.dump(result, f, indent=1, default=str)
    print(f"compat harness: ok={result['ok']} evaluations={len(evaluations)} "
          f"seconds={result['seconds']}")
    if result["error"]:
        print(result["error"], file=sys.stderr)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
